/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — srun (S_CTX_LOCAL) and sbatch/salloc (S_CTX_ALLOCATOR): the flags go
 * through libctrain-core's connector, so a conflict stops srun with the connector's message
 * before an allocation is made or a task is started. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/connector.h"
#include "ctrain/environment.h"
#include "ctrain/error.h"
#include "spank/plugin.h"

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

/* The connector names its flags as ctrain's CLI spells them; srun users typed --ctrain-NAME. */
void ct_spank_srun_names(char *text, size_t size)
{
    static const char *const flags[] = { "--strategy", "--accelerator", "--precision", NULL };
    char out[2048];
    size_t o = 0;

    for (const char *p = text; *p && o + 1 < sizeof(out);) {
        const char *hit = NULL;

        for (int i = 0; flags[i] && !hit; i++)
            if (!strncmp(p, flags[i], strlen(flags[i])))
                hit = flags[i];
        if (hit && o + strlen(hit) + 8 < sizeof(out)) {
            o += (size_t)snprintf(out + o, sizeof(out) - o, "--ctrain-%s", hit + 2);
            p += strlen(hit);
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    snprintf(text, size, "%s", out);
}

/* No environment at all: the options judged on their own. */
static const char *no_env(const char *name, void *ctx)
{
    return NULL;
}

static int check_flags(struct layout_env *layout, int quiet, ct_error *err)
{
    ct_connector_flags flags = { 0 };
    ct_connector_context ctx = { 0 };
    ct_connector *c = NULL;
    const ct_plan *plan;
    int rv;

    flags.strategy = ct_spank_strategy();
    flags.accelerator = ct_spank.opts.accelerator;
    flags.precision = ct_spank.opts.precision;
    if (flags.strategy && (rv = ct_spank_strategy_allowed(flags.strategy, err)) != 0)
        return rv;
    ctx.getenv_fn = quiet ? no_env : layout_getenv;
    ctx.getenv_ctx = layout;
    ctx.cuda = CT_CUDA_UNKNOWN; /* srun may run on a login node: the nodes decide */
    if ((rv = ct_connector_create(&flags, &ctx, &c, err)) != 0) {
        ct_spank_srun_names(err->msg, sizeof(err->msg));
        ct_spank_srun_names(err->hint, sizeof(err->hint));
        return rv;
    }
    plan = ct_connector_plan(c);
    for (int i = 0; !quiet && i < plan->n_notices; i++)
        ct_spank_info("%s", plan->notices[i]);
    if (!quiet)
        ct_spank_info("strategy %s, accelerator %s, precision %s", plan->strategy, plan->accelerator,
                      plan->precision);
    ct_connector_free(c);
    return 0;
}

/* From each option's callback. No environment: which allocation srun runs in (its SLURM_*
 * variables) is not the step's, and a combination wrong in every layout is wrong here already.
 * The step's layout is checked in local_user_init and again on the node. */
int ct_spank_local_options_check(ct_error *err)
{
    return check_flags(NULL, 1, err);
}

int ct_spank_local_post_opt(spank_t sp, ct_error *err)
{
    if (!ct_spank_active())
        return 0;
    return check_flags(NULL, 0, err);
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
        return check_flags(NULL, 0, err);
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
    if (!getenv("MASTER_ADDR") || !*getenv("MASTER_ADDR"))
        layout_add_text(&layout, "MASTER_ADDR", "localhost");
    return check_flags(&layout, 0, err);
}
