/* SPDX-License-Identifier: BSD-3-Clause */
/* The Trainer's config: its defaults and its checks, in one place. The Trainer checks a config
 * once, when fit/validate/test start (engine/trainer/trainer.c); the CLI and a user's program only
 * fill it. The requeue signal is the signal connector's to parse (signal_connector.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ctrain/nn.h"
#include "ctrain/trainer.h"
#include "engine/loops/loops.h"
#include "engine/health/fit/preflight.h"
#include "engine/trainer/flags.h"
#include "engine/trainer/trainer_internal.h"

void ct_trainer_config_default(ct_trainer_config *cfg)
{
    ct_preflight_options pf;

    ct_preflight_defaults(&pf);
    memset(cfg, 0, sizeof(*cfg));
    /* The names' defaults are the flags' table's (flags.c); the numbers' are written here. */
    for (const ct_trainer_flag *f = ct_trainer_flags; f->key.key; f++)
        if ((f->field == CT_TF_TEXT || f->field == CT_TF_CHOICE) && f->key.dflt)
            snprintf((char *)cfg + f->offset, f->size, "%s", f->key.dflt);
    cfg->max_epochs = 5;
    cfg->max_steps = -1;
    cfg->batch_size = 128;
    cfg->lr = 1e-3;
    cfg->weight_decay = -1;
    cfg->momentum = 0.9;
    cfg->seed = 42;
    cfg->log_every_n_steps = 50;
    cfg->progress = CT_TRAINER_PROGRESS_AUTO;
    cfg->val_fraction = 1.0 / 12.0;
    cfg->auto_requeue = 1;
    cfg->collective_timeout = CT_PLAN_COLLECTIVE_TIMEOUT_S;
    cfg->accumulate_grad_batches = 1;
    cfg->limit_val_batches = 1.0;
    cfg->save_top_k = 1;
    cfg->tensorboard = 1;
    cfg->preflight_compute_factor = pf.compute_factor;   /* the checks' own defaults, written once */
    cfg->preflight_latency_factor = pf.latency_factor;
    cfg->preflight_latency_floor_ms = pf.latency_floor_ms;
    cfg->preflight_bandwidth_factor = pf.bandwidth_factor;
    cfg->straggler_every = 8;
    cfg->straggler_factor = 2;
    cfg->straggler_windows = 3;
}

int ct_trainer_strategy_create(const ct_trainer_config *cfg, const ct_plan *plan, ct_strategy **out, ct_error *err)
{
    ct_plan mine = *plan;
    int rc;

    /* The timeout is the plan's, set once here before creation (nothing sets it afterwards). */
    mine.collective_timeout_s = cfg->collective_timeout;
    if ((rc = ct_strategy_create_from_plan(&mine, out, err)))
        return rc;
    ct_strategy_set_store(*out, cfg->run_id, cfg->store_bind, cfg->store_secret_file);
    return 0;
}

/* --run-id becomes part of the store's keys, the same on every rank: a short name, no '/'. */
static int check_store(const ct_trainer_config *cfg, ct_error *err)
{
    size_t n = strlen(cfg->run_id);

    if (n >= sizeof(cfg->run_id) - 1 || strspn(cfg->run_id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                              "0123456789._-") != n || !strcmp(cfg->run_id, ".") ||
        !strcmp(cfg->run_id, "..")) {
        ct_error_set(err, CT_EINVAL, "trainer-run-id", "--run-id (or CTRAIN_RUN_ID) '%.64s%s' is not a run id",
                     cfg->run_id, n > 64 ? "..." : "");
        return ct_error_hint(err, "give every rank the same name of at most 64 letters, digits, '.', '_' and '-'");
    }
    if (strlen(cfg->store_secret_file) >= sizeof(cfg->store_secret_file) - 1)
        return ct_error_set(err, CT_EINVAL, "trainer-store-secret-file", "--store-secret-file (or "
                            "CTRAIN_STORE_SECRET_FILE) is longer than %zu characters", sizeof(cfg->store_secret_file) - 2);
    if (strlen(cfg->store_bind) >= sizeof(cfg->store_bind) - 1) {
        ct_error_set(err, CT_EINVAL, "trainer-store-bind", "--store-bind (or CTRAIN_STORE_BIND) is longer than %zu "
                     "characters", sizeof(cfg->store_bind) - 2);
        return ct_error_hint(err, "give all, or a few of this host's addresses, comma-separated");
    }
    return 0;
}

/* Lightning's trainer controls against each other (README, "Training controls"; each on its own:
 * the table's ranges); the monitored metric is checked against the model's metrics once it is
 * built (resolve_monitor). */
static int check_controls(const ct_trainer_config *cfg, ct_error *err)
{
    if (cfg->gradient_clip_algorithm[0] && cfg->gradient_clip_val == 0) {
        ct_error_set(err, CT_EINVAL, "trainer-gradient-clip-algorithm-alone",
                     "--gradient-clip-algorithm %s without --gradient-clip-val clips nothing", cfg->gradient_clip_algorithm);
        return ct_error_hint(err, "add --gradient-clip-val X (the largest norm or value), or drop the algorithm");
    }
    if (cfg->val_check_interval < 0)
        return ct_error_set(err, CT_EINVAL, "trainer-val-check-interval",
                            "--val-check-interval %ld must be a number of optimizer steps (>= 1)", cfg->val_check_interval);
    if (!(cfg->limit_val_batches >= 0) || (!cfg->limit_val_is_count && cfg->limit_val_batches > 1)) {
        ct_error_set(err, CT_EINVAL, "trainer-limit-val-batches", "--limit-val-batches %g is neither a count of "
                     "batches nor a fraction in [0.0, 1.0]", cfg->limit_val_batches);
        return ct_error_hint(err, "write a count as an integer (--limit-val-batches 50) and a fraction with a point "
                                  "(--limit-val-batches 0.25)");
    }
    if (cfg->max_steps >= 0 && cfg->warmup_steps > cfg->max_steps) {
        ct_error_set(err, CT_EINVAL, "trainer-warmup-steps", "--warmup-steps %ld is longer than --max-steps %ld",
                     cfg->warmup_steps, cfg->max_steps);
        return ct_error_hint(err, "warm up over a part of the fit (llm.c: a few percent of the steps)");
    }
    if (!(cfg->min_lr >= 0) || !isfinite(cfg->min_lr) || cfg->min_lr >= cfg->lr) {
        ct_error_set(err, CT_EINVAL, "trainer-min-lr", "--min-lr %g must be >= 0 and below --lr %g", cfg->min_lr,
                     cfg->lr);
        return ct_error_hint(err, "the cosine decays from --lr to --min-lr (llm.c and nanoGPT: lr / 10)");
    }
    if (cfg->min_lr_set && ct_trainer_choice(ct_trainer_schedule_names, cfg->lr_schedule) == CT_LR_CONSTANT) {
        ct_error_set(err, CT_EINVAL, "trainer-min-lr-constant", "--min-lr with --lr-schedule constant: a constant "
                     "schedule has no end value");
        return ct_error_hint(err, "use --lr-schedule cosine (the default) or drop --min-lr");
    }
    if (cfg->early_stopping_patience > 0 && strcmp(cfg->monitor, "train_loss") &&
        (cfg->val_fraction == 0 || cfg->limit_val_batches == 0)) {
        ct_error_set(err, CT_EINVAL, "trainer-early-stopping-no-val", "--early-stopping-patience %d watches %s, but "
                     "%s leaves no validation", cfg->early_stopping_patience,
                     cfg->monitor[0] ? cfg->monitor : "the validation metric",
                     cfg->val_fraction == 0 ? "--val-fraction 0" : "--limit-val-batches 0");
        return ct_error_hint(err, "keep a validation set, or --monitor train_loss");
    }
    return 0;
}

/* The preflight thresholds are factors away from the median: below 1 every node would be named. */
static int check_preflight(const ct_trainer_config *cfg, ct_error *err)
{
    const struct {
        const char *flag;
        double v;
    } f[] = { { "--preflight-compute-factor", cfg->preflight_compute_factor },
              { "--preflight-latency-factor", cfg->preflight_latency_factor },
              { "--preflight-bandwidth-factor", cfg->preflight_bandwidth_factor } };
    int checks;

    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        if (!(f[i].v >= 1) || !isfinite(f[i].v)) {
            ct_error_set(err, CT_EINVAL, "trainer-preflight", "%s %g: a factor away from the median is at least 1",
                         f[i].flag, f[i].v);
            return ct_error_hint(err, "e.g. %s 3 names a node 3 times worse than the median node", f[i].flag);
        }
    if (!(cfg->preflight_latency_floor_ms >= 0) || !isfinite(cfg->preflight_latency_floor_ms))
        return ct_error_set(err, CT_EINVAL, "trainer-preflight", "--preflight-latency-floor %g is not a number of "
                            "milliseconds", cfg->preflight_latency_floor_ms);
    if (!(cfg->straggler_factor > 1) || !isfinite(cfg->straggler_factor)) {
        ct_error_set(err, CT_EINVAL, "trainer-straggler", "--straggler-factor %g, --straggler-every %d, "
                     "--straggler-windows %d: a factor above 1 and counts of at least 1", cfg->straggler_factor,
                     cfg->straggler_every, cfg->straggler_windows);
        return ct_error_hint(err, "the defaults are 2, 8 and 3");
    }
    return ct_preflight_parse_checks(cfg->preflight_checks, &checks, err);
}

int ct_trainer_add_callback(ct_trainer_config *cfg, const ct_callback_ops *ops, void *self, ct_error *err)
{
    if (!ops || cfg->n_callbacks >= CT_TRAINER_MAX_CALLBACKS) {
        ct_error_set(err, CT_EINVAL, "callback-add", "callback %s: %s", ops && ops->name ? ops->name : "(no ops)",
                     ops ? "too many callbacks" : "no hooks given");
        return ct_error_hint(err, "a fit takes at most %d callbacks of the program's own", CT_TRAINER_MAX_CALLBACKS);
    }
    cfg->callbacks[cfg->n_callbacks].ops = ops;
    cfg->callbacks[cfg->n_callbacks].self = self;
    cfg->n_callbacks++;
    return 0;
}

int ct_trainer_config_check(const ct_trainer_config *cfg, ct_error *err)
{
    int rc;

    /* Each flag on its own: its range or its choices, from the flags' table (flags.c). */
    if ((rc = ct_trainer_flags_check(cfg, err)))
        return rc;
    if (!cfg->default_root_dir[0])
        return ct_error_set(err, CT_EINVAL, "trainer-root-dir", "--default-root-dir must not be empty");
    if ((rc = check_preflight(cfg, err)) || (rc = check_store(cfg, err)))
        return rc;
    if (cfg->weights_only && (!cfg->ckpt_path[0] || !strcmp(cfg->ckpt_path, "auto"))) {
        ct_error_set(err, CT_EINVAL, "trainer-weights-only", "--weights-only needs the checkpoint to load (--ckpt-path "
                     "%s)", cfg->ckpt_path[0] ? "auto resumes" : "not given");
        return ct_error_hint(err, "give --ckpt-path last, best or a FILE with --weights-only");
    }
    return check_controls(cfg, err);
}
