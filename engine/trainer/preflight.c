/* SPDX-License-Identifier: BSD-3-Clause */
/* The Trainer's side of preflight (engine/health/fit/preflight.c runs the checks): the options from the
 * config, the output directory, and ctrain preflight's own launch — every rank joins the process
 * group as fit's would, with fit's compute threads, runs the checks and leaves. */
#include <string.h>

#include "ctrain/trainer.h"
#include "engine/health/fit/preflight.h"
#include "engine/trainer/trainer_internal.h"

int ct_trainer_run_preflight(ct_strategy *s, const ct_trainer_config *cfg, FILE *out, int *named, ct_error *err)
{
    ct_preflight_options o;
    int status = 0, rc;

    ct_preflight_defaults(&o);
    if ((rc = ct_preflight_parse_checks(cfg->preflight_checks, &o.checks, err)))
        return rc;
    o.compute_factor = cfg->preflight_compute_factor;
    o.latency_factor = cfg->preflight_latency_factor;
    o.latency_floor_ms = cfg->preflight_latency_floor_ms;
    o.bandwidth_factor = cfg->preflight_bandwidth_factor;
    o.root_dir = cfg->default_root_dir;
    o.out = out;
    /* DIR/preflight.json: rank 0 makes the directory; every rank learns whether it could. */
    if (ct_strategy_is_global_zero(s))
        status = ct_ckpt_connector_make_root(cfg, err);
    if (ct_strategy_world_size(s) > 1 && (rc = ct_strategy_broadcast(s, &status, sizeof(status), 0, err)))
        return rc;
    if (status) {
        if (!ct_strategy_is_global_zero(s))
            ct_error_set(err, status, "trainer-root-dir", "rank 0 could not make --default-root-dir %s",
                         cfg->default_root_dir);
        return status;
    }
    return ct_preflight_run(s, &o, named, err);
}

int ct_trainer_fit_preflight(ct_strategy *s, const ct_trainer_job *job, ct_error *err)
{
    int named = 0, rc;

    if (job->mode != CT_TRAINER_FIT || !job->cfg->preflight)
        return 0;
    if ((rc = ct_trainer_run_preflight(s, job->cfg, stdout, &named, err)) || !named)
        return rc;
    ct_error_set(err, CT_ECOMM, "preflight-named", "fit: preflight named %d node%s (the table above, %s/preflight.json): "
                 "not training", named, named == 1 ? "" : "s", job->cfg->default_root_dir);
    ct_error_outcome(err, CT_OUTCOME_NODE_NAMED);
    return ct_error_hint(err, "leave them out (srun --exclude=NODE, or the job's --exclude) and start again; the "
                         "thresholds are the --preflight-* flags");
}

static int preflight_body(ct_strategy *s, void *arg, void *result, size_t result_size, ct_error *err)
{
    const ct_trainer_config *cfg = arg;
    int named = 0, rc;

    if ((rc = ct_strategy_setup_environment(s, err)))
        return rc;
    /* The GEMM runs on the threads fit's ranks would have (the node's cores shared among its ranks). */
    ct_strategy_host_threads_setup(s);
    rc = ct_trainer_run_preflight(s, cfg, stdout, &named, err);
    if (!rc && result && result_size >= sizeof(named))
        memcpy(result, &named, sizeof(named));
    ct_strategy_teardown(s);
    return rc;
}

int ct_trainer_preflight(const ct_trainer_config *cfg, ct_connector *conn, int *named, ct_error *err)
{
    ct_strategy *s;
    int rc;

    *named = 0;
    if ((rc = ct_trainer_config_check(cfg, err)))
        return ct_error_prefix(err, "preflight: "), rc;
    if ((rc = ct_trainer_strategy_create(cfg, ct_connector_plan(conn), &s, err)))
        return rc;
    rc = ct_strategy_launch(s, preflight_body, (void *)cfg, named, sizeof(*named), err);
    ct_strategy_free_reported(s, rc ? err : NULL);
    return rc;
}
