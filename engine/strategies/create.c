/* SPDX-License-Identifier: BSD-3-Clause */
/* The strategy from the connector's plan, handed its parts — accelerator, precision, cluster
 * environment, checkpoint IO, launcher and devices. The connector only plans; this is where a
 * plan becomes a running strategy, which belongs to the caller (the Trainer creates one per run
 * and frees it).
 *
 * The implementations are the ops libctrain attached to the registry entries at start-up
 * (ct_engine_init). A process that linked only libctrain-core (the SPANK plugin) never gets here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/connector.h"
#include "ctrain/registry.h"
#include "engine/strategies/strategy_impl.h"

/* The plan's part is its descriptor: its ops are the implementation (no lookup by name). */
static int part_ops(enum ct_registry_kind kind, const ct_registry_entry *part, const void **ops, ct_error *err)
{
    const ct_registry_entry *e = part;

    /* A registered variant (ddp_no_overlap) runs its base's implementation with its own options. */
    if (e && !e->ops && e->base)
        e = ct_registry_find(kind, e->base);
    *ops = e ? e->ops : NULL;
    if (*ops)
        return 0;
    ct_error_set(err, CT_ENOTAVAIL, "implementation-missing", "%s '%s' has no implementation in this process",
                 ct_registry_kind_name(kind), ct_plan_part_name(part));
    return ct_error_hint(err, "link libctrain and call ct_engine_init() before creating the strategy");
}

int ct_strategy_create_from_plan(const ct_plan *plan, ct_strategy **out, ct_error *err)
{
    const void *ops[CT_REG_NKINDS];
    ct_strategy *s = NULL;
    int rc;

    *out = NULL;
    if ((rc = part_ops(CT_REG_STRATEGY, plan->strategy, &ops[CT_REG_STRATEGY], err)) ||
        (rc = part_ops(CT_REG_ACCELERATOR, plan->accelerator, &ops[CT_REG_ACCELERATOR], err)) ||
        (rc = part_ops(CT_REG_PRECISION, plan->precision, &ops[CT_REG_PRECISION], err)) ||
        (rc = part_ops(CT_REG_CHECKPOINT_IO, plan->checkpoint_io, &ops[CT_REG_CHECKPOINT_IO], err)) ||
        (rc = part_ops(CT_REG_LAUNCHER, plan->launcher, &ops[CT_REG_LAUNCHER], err)))
        return rc;
    s = calloc(1, sizeof(*s));
    if (!s)
        return ct_error_set(err, CT_ENOMEM, NULL, "out of memory creating strategy %s", plan->strategy->name);
    s->ops = ops[CT_REG_STRATEGY];
    s->accelerator = ops[CT_REG_ACCELERATOR];
    s->precision = ops[CT_REG_PRECISION];
    s->checkpoint_io = ops[CT_REG_CHECKPOINT_IO];
    s->launcher = ops[CT_REG_LAUNCHER];
    snprintf(s->name, sizeof(s->name), "%s", plan->strategy->name);
    s->options = plan->strategy_config;
    snprintf(s->accelerator_name, sizeof(s->accelerator_name), "%s", plan->accelerator->name);
    snprintf(s->env_name, sizeof(s->env_name), "%s", plan->cluster_env);
    memcpy(s->devices, plan->devices, sizeof(s->devices));
    s->n_devices = plan->n_devices;
    s->env_info = plan->env;
    s->world_size = plan->world_size;
    s->collective_timeout_s = plan->collective_timeout_s;
    s->global_rank = plan->env.creates_processes_externally ? plan->env.global_rank : 0;
    s->local_rank = plan->env.creates_processes_externally ? plan->env.local_rank : 0;
    s->node_rank = plan->env.creates_processes_externally ? plan->env.node_rank : 0;
    s->num_nodes = plan->num_nodes;
    s->device = plan->devices[s->local_rank < plan->n_devices ? s->local_rank : 0];
    rc = s->ops->init ? s->ops->init(s, err) : 0;
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void ct_strategy_free(ct_strategy *s)
{
    if (!s)
        return;
    ct_async_ckpt_free(s);
    if (s->ops->destroy)
        s->ops->destroy(s);
    free(s);
}

void ct_strategy_free_reported(ct_strategy *s, const ct_error *why)
{
    /* The caller owns the report, but would never get to print it. */
    if (s && why && s->ops->ends_job && s->ops->ends_job(s)) {
        ct_error_print(stderr, why);
        fflush(NULL);
    }
    ct_strategy_free(s);
}
