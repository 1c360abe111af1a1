/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — srun (S_CTX_LOCAL) and sbatch/salloc (S_CTX_ALLOCATOR): the flags go
 * through libctrain-core's connector (check.c), so a conflict stops srun with the connector's
 * message before an allocation is made or a task is started. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/environment.h"
#include "ctrain/error.h"
#include "engine/util/rankvars.h"
#include "spank/check.h"
#include "spank/srun.h"
#include "spank/options.h"

/* The step's layout as SLURM variables, in front of srun's own environment, so the connector's
 * SLURM environment sees this step and not the allocation srun runs in. */
struct layout_env {
    char vars[16][2][64];
    int n;
};

static const char *layout_getenv(const char *name, void *ctx)
{
    struct layout_env *l = ctx;

    for (int i = 0; l && i < l->n; i++)
        if (!strcmp(l->vars[i][0], name))
            return l->vars[i][1];
    return getenv(name);
}

static void layout_add_text(struct layout_env *l, const char *name, const char *value)
{
    snprintf(l->vars[l->n][0], sizeof(l->vars[0][0]), "%s", name);
    snprintf(l->vars[l->n][1], sizeof(l->vars[0][1]), "%s", value);
    l->n++;
}

static void layout_add(struct layout_env *l, const char *name, uint32_t value)
{
    char text[16];

    snprintf(text, sizeof(text), "%u", value);
    layout_add_text(l, name, text);
}

/* SLURM_STEP_TASKS_PER_NODE as a block distribution lays the step out ("3(x2),2"): srun's own
 * SLURM_TASKS_PER_NODE describes the allocation, and in a heterogeneous step another component.
 * The check needs a consistent layout, not the real one (slurmstepd reads that), so it also says
 * "block": an arbitrary distribution's rank 0 is not in srun's environment. */
static void layout_tasks_per_node(struct layout_env *l, uint32_t ntasks, uint32_t nnodes)
{
    uint32_t q = nnodes ? ntasks / nnodes : ntasks, r = nnodes ? ntasks % nnodes : 0;

    snprintf(l->vars[l->n][0], sizeof(l->vars[0][0]), "SLURM_DISTRIBUTION");
    snprintf(l->vars[l->n][1], sizeof(l->vars[0][1]), "block");
    l->n++;

    snprintf(l->vars[l->n][0], sizeof(l->vars[0][0]), "SLURM_STEP_TASKS_PER_NODE");
    if (r && q)
        snprintf(l->vars[l->n][1], sizeof(l->vars[0][1]), "%u(x%u),%u(x%u)", q + 1, r, q, nnodes - r);
    else if (r)
        snprintf(l->vars[l->n][1], sizeof(l->vars[0][1]), "1(x%u),0(x%u)", r, nnodes - r);
    else
        snprintf(l->vars[l->n][1], sizeof(l->vars[0][1]), "%u(x%u)", q, nnodes ? nnodes : 1);
    l->n++;
}

/* From each option's callback. No environment: which allocation srun runs in (its SLURM_*
 * variables) is not the step's, and a combination wrong in every layout is wrong here already.
 * The step's layout is checked in local_user_init and again on the node. */
/* What depends on the step's task count (ddp_sharded on one task, single_device on several) is
 * judged only with the step's layout: before it, srun's environment holds at most the
 * allocation's counts (salloc -n4, then srun -n1), or none (world size 1). */
static int without_layout(int rv, ct_error *err)
{
    if (rv != 0 && (!strcmp(err->id, "strategy-sharded-one-device") || !strcmp(err->id, "strategy-single-device-many"))) {
        ct_error_clear(err);
        return 0;
    }
    return rv;
}

int ct_spank_local_options_check(ct_error *err)
{
    return without_layout(ct_spank_check_flags(NULL, NULL, 0, err), err);
}

int ct_spank_local_post_opt(spank_t sp, ct_error *err)
{
    if (!ct_spank_active())
        return 0;
    return without_layout(ct_spank_check_flags(layout_getenv, NULL, 1, err), err);
}

/* srun only, with its allocation: the step's node and task counts are known now. */
int ct_spank_local_user_init(spank_t sp, ct_error *err)
{
    struct layout_env layout = { .n = 0 };
    uint32_t ntasks = 0, nnodes = 0;

    if (!ct_spank_active())
        return 0;
    if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_NNODES, &nnodes) != ESPANK_SUCCESS)
        return ct_spank_check_flags(layout_getenv, NULL, 1, err);
    layout_add(&layout, "SLURM_NTASKS", ntasks);
    layout_add(&layout, "SLURM_NNODES", nnodes);
    layout_add(&layout, "SLURM_JOB_NUM_NODES", nnodes);
    layout_add(&layout, "SLURM_PROCID", 0);
    layout_add(&layout, "SLURM_LOCALID", 0);
    layout_add(&layout, "SLURM_NODEID", 0);
    layout_tasks_per_node(&layout, ntasks, nnodes);
    /* One component of a heterogeneous step, laid out as a plain step: srun's own SLURM_HET_SIZE
     * would tell the reader to find the node by SLURMD_NODENAME, which srun does not have. */
    layout_add_text(&layout, "SLURM_HET_SIZE", "");
    layout_add_text(&layout, "SLURM_PACK_SIZE", "");
    /* In a batch script srun inherits the batch step's SLURM_GTIDS (its one task): not this step's. */
    layout_add_text(&layout, "SLURM_GTIDS", "");
    /* srun's SLURM_NODELIST is the allocation's, larger than a step on part of it (srun -N1 in
     * salloc -N3): no node list, and rank 0's host stands in, the user's MASTER_ADDR when set. */
    layout_add_text(&layout, "SLURM_STEP_NODELIST", "");
    layout_add_text(&layout, "SLURM_NODELIST", "");
    layout_add_text(&layout, "SLURM_JOB_NODELIST", "");
    if (!getenv(CT_VAR_MASTER_ADDR) || !*getenv(CT_VAR_MASTER_ADDR))
        layout_add_text(&layout, CT_VAR_MASTER_ADDR, "localhost");
    return ct_spank_check_flags(layout_getenv, &layout, 1, err);
}
