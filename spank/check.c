/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the options through the connector; see spank/check.h. */
#include <stdio.h>
#include <string.h>

#include "ctrain/connector.h"
#include "ctrain/environment.h"
#include "ctrain/error.h"
#include "spank/args.h"
#include "spank/check.h"
#include "spank/log.h"
#include "spank/options.h"

/* The connector names its flags as ctrain's CLI spells them; srun users typed --ctrain-NAME. */
static void srun_names(char *text, size_t size)
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

int ct_spank_check_flags(ct_getenv_fn get, void *ctx, int log_plan, ct_error *err)
{
    ct_connector_flags flags = { 0 };
    ct_connector_context cctx = { 0 };
    ct_connector *c = NULL;
    const ct_plan *plan;
    int rv;

    flags.strategy = ct_spank_strategy();
    flags.accelerator = ct_spank_accelerator();
    flags.precision = ct_spank_precision();
    if (flags.strategy && (rv = ct_spank_args_strategy_allowed(flags.strategy, err)) != 0)
        return rv;
    cctx.getenv_fn = get ? get : no_env;
    cctx.getenv_ctx = ctx;
    /* srun may run on a login node, and slurmstepd must not open the GPUs: the program probes
     * its devices, and its CPU's bf16 instructions, itself. */
    cctx.cuda = CT_CUDA_UNKNOWN;
    cctx.cpu_bf16 = CT_CPU_BF16_UNKNOWN;
    if ((rv = ct_connector_create(&flags, &cctx, &c, err)) != 0) {
        srun_names(err->msg, sizeof(err->msg));
        srun_names(err->hint, sizeof(err->hint));
        return rv;
    }
    plan = ct_connector_plan(c);
    for (int i = 0; log_plan && i < plan->n_notices; i++)
        ct_spank_info("%s", plan->notices[i]);
    if (log_plan)
        ct_spank_info("strategy %s, accelerator %s, precision %s", ct_plan_part_name(plan->strategy),
                      ct_plan_part_name(plan->accelerator), ct_plan_part_name(plan->precision));
    ct_connector_free(c);
    return 0;
}
