/* SPDX-License-Identifier: BSD-3-Clause */
/* The cluster environments ctrain knows and the detection order; see include/ctrain/envs.h. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ctrain/envs.h"
#include "ctrain/util.h"
#include "engine/registry/components.gen.h" /* CT_ENVS, CT_ENVS_REGISTERED */
#include "envs/envs_impl.h"

/* Every name ctrain knows, gathered by the Makefile (components.gen.h) from the files that define
 * an environment: CT_ENVS, envs/NAME.c's ct_env_NAME_ops, built in here; CT_ENVS_REGISTERED, those
 * libctrain registers at start-up (pmix/environment.c: its code links libpmix, which libctrain-core
 * must not), known here by name only until then. Adding one is adding its file and its test. Each
 * describes itself (include/ctrain/environment.h): detection and the order names are listed in go
 * by its priority. */
struct env_slot {
    const char *name;
    const struct ct_env_ops *ops;
};

#define CT_ENV_EXTERN(name) extern const struct ct_env_ops ct_env_##name##_ops;
CT_ENVS(CT_ENV_EXTERN)
#define CT_ENV_BUILT_IN(name) { NULL, &ct_env_##name##_ops },
#define CT_ENV_LATER(name) { #name, NULL },
static struct env_slot slots[] = { CT_ENVS(CT_ENV_BUILT_IN) CT_ENVS_REGISTERED(CT_ENV_LATER) };
#define NSLOTS ((int)(sizeof(slots) / sizeof(slots[0])))

static const char *slot_name(const struct env_slot *s) { return s->ops ? s->ops->name : s->name; }

/* Whether slot j is listed before slot k: the registered by decreasing priority, ties in slot
 * order, then the names registered later (in slot order) until they are registered. */
static int listed_before(int j, int k)
{
    const struct ct_env_ops *a = slots[j].ops, *b = slots[k].ops;

    if (!a != !b)
        return a != NULL;
    if (a && a->priority != b->priority)
        return a->priority > b->priority;
    return j < k;
}

/* Slot k's place in that order. */
static int slot_rank(int k)
{
    int rank = 0;

    for (int j = 0; j < NSLOTS; j++)
        rank += j != k && listed_before(j, k);
    return rank;
}

static const char *names[NSLOTS + 1];

const char *const *ct_env_names(void)
{
    for (int k = 0; k < NSLOTS; k++)
        names[slot_rank(k)] = slot_name(&slots[k]);
    return names;
}

static struct env_slot *slot_of(const char *name)
{
    for (int i = 0; i < NSLOTS; i++)
        if (!strcasecmp(slot_name(&slots[i]), name))
            return &slots[i];
    return NULL;
}

int ct_env_count(void)
{
    int n = 0;

    for (int i = 0; i < NSLOTS; i++)
        n += slots[i].ops != NULL;
    return n;
}

/* The i-th registered environment by decreasing priority (ties: slot order). */
const struct ct_env_ops *ct_env_at(int i)
{
    for (int k = 0; k < NSLOTS; k++)
        if (slots[k].ops && slot_rank(k) == i)
            return slots[k].ops;
    return NULL;
}

const struct ct_env_ops *ct_env_lookup(const char *name)
{
    struct env_slot *s = name ? slot_of(name) : NULL;

    return s ? s->ops : NULL;
}

int ct_env_register(const struct ct_env_ops *ops)
{
    struct env_slot *s = ops && ops->name ? slot_of(ops->name) : NULL;

    if (!s || !ops->detect || !ops->read || !ops->validate)
        return CT_EINVAL;
    if (s->ops && s->ops != ops)
        return CT_ECONFLICT;
    s->ops = ops;
    return 0;
}

/* --- detection ------------------------------------------------------------------------------ */

static int unknown_name(const char *forced, ct_error *err)
{
    const char *const *known = ct_env_names();
    const char *guess = ct_str_closest(forced, known);
    char list[256];
    size_t used;

    /* Environment names are short: also suggest at distance 2 ("slrum") for names of 4 or more. */
    for (int i = 0; !guess && known[i] && strlen(forced) >= 4; i++)
        if (ct_str_distance(forced, known[i]) <= 2)
            guess = known[i];
    used = (size_t)snprintf(list, sizeof(list), "auto");
    for (int i = 0; known[i] && used < sizeof(list); i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, ", %s", known[i]);

    ct_error_set(err, CT_EINVAL, "env-unknown", "unknown cluster environment '%s'", forced);
    if (guess)
        return ct_error_hint(err, "did you mean '%s'? (%s)", guess, list);
    return ct_error_hint(err, "choose one of %s", list);
}

static int forced_ops(ct_getenv_fn get, void *ctx, const char *forced, const struct ct_env_ops **ops,
                      ct_error *err)
{
    struct env_slot *s = slot_of(forced);

    if (!s)
        return unknown_name(forced, err);
    if (!s->ops) {
        ct_error_set(err, CT_ENOTAVAIL, "env-not-linked", "--cluster-env %s: the %s environment is not registered in "
                     "this program (its code is in libctrain and registers itself at start-up; programs linking "
                     "only libctrain-core, like the SPANK plugin, do not have it)", forced, forced);
        return ct_error_hint(err, "leave out --cluster-env to detect the environment, or choose the launcher's own "
                                  "(--cluster-env slurm under srun, mpi under mpirun)");
    }
    if (!s->ops->detect(get, ctx)) {
        if (s->ops->absent)
            return s->ops->absent(get, ctx, err);
        ct_error_set(err, CT_ENOTAVAIL, "env-absent", "--cluster-env %s, but its variables are not set", forced);
        return ct_error_hint(err, "%s needs %s", forced, s->ops->needs ? s->ops->needs : "its variables");
    }
    *ops = s->ops;
    return 0;
}

/* The first present by priority; local (always present) is the last resort. */
static const struct ct_env_ops *auto_ops(ct_getenv_fn get, void *ctx)
{
    for (int i = 0; ct_env_at(i); i++)
        if (ct_env_at(i)->auto_detect && ct_env_at(i)->detect(get, ctx))
            return ct_env_at(i);
    return &ct_env_local_ops;
}

static const struct ct_env_ops *enricher(void)
{
    for (int i = 0; i < NSLOTS; i++)
        if (slots[i].ops && slots[i].ops->enricher)
            return slots[i].ops;
    return NULL;
}

/* pmix refines the environments whose processes a PMIx server may have started (srun --mpi=pmix,
 * jsrun, Open MPI's mpirun: those that say pmix_enriches): it knows node ranks and rank 0's host
 * exactly. */
static int enrich(ct_getenv_fn get, void *ctx, const struct ct_env_ops *base, ct_env_info *info, ct_error *err)
{
    const struct ct_env_ops *pmix = enricher();
    ct_env_info before;
    int rc;

    if (!pmix || pmix == base || !base->pmix_enriches || !pmix->detect(get, ctx))
        return 0;
    before = *info;
    if ((rc = pmix->read(get, ctx, info, err)))
        return ct_error_prefix(err, "%s with PMIx: ", base->name);
    if (!memcmp(&before, info, sizeof(before)))
        return 0;    /* nothing to add (pmix/environment.c says when) */
    snprintf(info->name, sizeof(info->name), "%s", base->name);
    snprintf(info->enriched_by, sizeof(info->enriched_by), "%s", pmix->name);
    return 0;
}

/* A field no variable could decide (an MPI job on several nodes with no PMIx to ask); 0 is "the
 * flags decide" for an environment with complete() (manual), checked by ct_env_complete. */
static int unknown_fields(const struct ct_env_ops *ops, const ct_env_info *info, ct_error *err)
{
    enum ct_env_field f = CT_ENV_NFIELDS;

    if (info->num_nodes < 0 || (info->num_nodes == 0 && !ops->complete))
        f = CT_ENV_NUM_NODES;
    else if (info->node_rank < 0)
        f = CT_ENV_NODE_RANK;
    if (f == CT_ENV_NFIELDS)
        return 0;
    ct_error_set(err, CT_ENOTAVAIL, "env-layout-unknown", "%s: cannot tell the %s (%s)", info->name,
                 f == CT_ENV_NUM_NODES ? "number of nodes" : "node of this process", info->source[f]);
    if (f == CT_ENV_NUM_NODES)
        return ct_error_hint(err, "start the same number of processes on every node, or launch with PMIx "
                                  "(srun --mpi=pmix, Open MPI's mpirun) so ctrain can ask");
    return ct_error_hint(err, "on several nodes only the launcher knows which node a rank is on: launch with PMIx "
                              "(srun --mpi=pmix, Open MPI's mpirun), with srun, or on Cray PALS (PALS_NODEID)");
}

int ct_env_complete(const struct ct_env_ops *ops, ct_getenv_fn get, void *ctx, ct_env_info *info, int devices,
                    int num_nodes, ct_error *err)
{
    int rc;

    if (!ops || !ops->complete)
        return 0;
    if ((rc = ops->complete(get ? get : ct_getenv_process, ctx, info, devices, num_nodes, err)))
        return rc;
    return ct_env_check_ranges(info, err);
}

int ct_env_detect(ct_getenv_fn get, void *ctx, const char *forced, const struct ct_env_ops **ops, ct_env_info *info,
                  ct_error *err)
{
    const struct ct_env_ops *chosen = NULL;
    int rc;

    if (!get)
        get = ct_getenv_process;
    *ops = NULL;
    if (forced && *forced && strcasecmp(forced, "auto")) {
        if ((rc = forced_ops(get, ctx, forced, &chosen, err)))
            return rc;
    } else {
        chosen = auto_ops(get, ctx);
    }
    if ((rc = chosen->read(get, ctx, info, err)))
        return rc;
    if ((rc = enrich(get, ctx, chosen, info, err)) || (rc = unknown_fields(chosen, info, err)))
        return rc;
    /* Whatever started the processes, they may run inside a SLURM job (or a supervised step). */
    ct_str_copy(info->slurm_job_id, sizeof(info->slurm_job_id), ct_env_slurm_job_id(get, ctx));
    info->ctrain_supervised = ct_env_ctrain_supervised(get, ctx);
    *ops = chosen;
    return 0;
}
