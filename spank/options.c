/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the --ctrain-* options of srun, sbatch and salloc. SPANK calls
 * ct_spank_option_cb (ctrain.c) for each; this file stores a value after checking its form, and
 * the connector checks the meaning (local.c in srun/sbatch/salloc, remote.c on the node). */
#include <stdlib.h>
#include <string.h>

#include "ctrain/error.h"
#include "ctrain/util.h"
#include "spank/plugin.h"

static struct spank_option options[] = {
    { "ctrain-strategy", "NAME",
      "ctrain: training strategy of this step (ddp, ...); every task gets RANK, LOCAL_RANK, WORLD_SIZE, "
      "MASTER_ADDR, MASTER_PORT and CTRAIN_STRATEGY", 1, CT_SPANK_OPT_STRATEGY, ct_spank_option_cb },
    { "ctrain-accelerator", "NAME",
      "ctrain: accelerator (cpu, cuda or gpu, auto) as CTRAIN_ACCELERATOR; checked with the strategy before launch",
      1, CT_SPANK_OPT_ACCELERATOR, ct_spank_option_cb },
    { "ctrain-precision", "P",
      "ctrain: precision (32-true, bf16-mixed, ...) as CTRAIN_PRECISION; checked before launch", 1,
      CT_SPANK_OPT_PRECISION, ct_spank_option_cb },
    { "ctrain-bind", "closest|none|verbose",
      "ctrain: bind each task to the GPU, cores and NIC closest to each other inside the step's allocation "
      "(closest, the default), not at all (none), or closest and print each task's binding (verbose)",
      1, CT_SPANK_OPT_BIND, ct_spank_option_cb },
    SPANK_OPTIONS_TABLE_END
};

/* Names are letters, digits, '-', '_' and '.': enough for every registry name, nothing a shell
 * or the environment would mangle. */
static int name_ok(const char *s)
{
    return s && *s && strlen(s) < 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == strlen(s);
}

static int store(char **slot, const char *flag, const char *optarg, ct_error *err)
{
    if (!name_ok(optarg)) {
        ct_error_set(err, CT_EINVAL, "spank-option", "--%s='%s' is not a name", flag, optarg ? optarg : "");
        return ct_error_hint(err, "use letters, digits, '-', '_' and '.' (srun --help lists the ctrain options)");
    }
    free(*slot);
    *slot = strdup(optarg);
    if (!*slot)
        return ct_error_set(err, CT_ENOMEM, "spank-option", "out of memory storing --%s", flag);
    return 0;
}

int ct_spank_option_store(int val, const char *optarg, ct_error *err)
{
    struct ct_spank_opts *o = &ct_spank.opts;

    switch (val) {
    case CT_SPANK_OPT_STRATEGY:
        return store(&o->strategy, "ctrain-strategy", optarg, err);
    case CT_SPANK_OPT_ACCELERATOR:
        return store(&o->accelerator, "ctrain-accelerator", optarg, err);
    case CT_SPANK_OPT_PRECISION:
        return store(&o->precision, "ctrain-precision", optarg, err);
    case CT_SPANK_OPT_BIND:
        if (optarg && !strcmp(optarg, "closest"))
            o->bind = CT_SPANK_BIND_CLOSEST;
        else if (optarg && !strcmp(optarg, "none"))
            o->bind = CT_SPANK_BIND_NONE;
        else if (optarg && !strcmp(optarg, "verbose"))
            o->bind = CT_SPANK_BIND_VERBOSE;
        else {
            ct_error_set(err, CT_EINVAL, "spank-option", "--ctrain-bind='%s' is not a binding mode",
                         optarg ? optarg : "");
            return ct_error_hint(err, "use --ctrain-bind=closest, --ctrain-bind=none or --ctrain-bind=verbose");
        }
        return 0;
    }
    return ct_error_set(err, CT_EINTERNAL, "spank-option", "SPANK passed an option number (%d) ctrain never "
                        "registered", val);
}

int ct_spank_options_register(spank_t sp, ct_error *err)
{
    for (struct spank_option *o = options; o->name; o++) {
        spank_err_t rc = spank_option_register(sp, o);

        if (rc != ESPANK_SUCCESS)
            return ct_error_set(err, CT_EINTERNAL, "spank-option", "registering --%s failed: %s", o->name,
                                spank_strerror(rc));
    }
    return 0;
}

void ct_spank_options_free(void)
{
    free(ct_spank.opts.strategy);
    free(ct_spank.opts.accelerator);
    free(ct_spank.opts.precision);
    memset(&ct_spank.opts, 0, sizeof(ct_spank.opts));
}

int ct_spank_active(void)
{
    const struct ct_spank_opts *o = &ct_spank.opts;

    return o->strategy || o->accelerator || o->precision || o->bind != CT_SPANK_BIND_UNSET ||
           ct_spank.args.default_strategy[0];
}

const char *ct_spank_strategy(void)
{
    if (ct_spank.opts.strategy)
        return ct_spank.opts.strategy;
    return ct_spank.args.default_strategy[0] ? ct_spank.args.default_strategy : NULL;
}

enum ct_spank_bind ct_spank_bind_mode(void)
{
    if (ct_spank.opts.bind != CT_SPANK_BIND_UNSET)
        return ct_spank.opts.bind;
    return ct_spank.args.bind != CT_SPANK_BIND_UNSET ? ct_spank.args.bind : CT_SPANK_BIND_CLOSEST;
}

int ct_spank_strategy_allowed(const char *name, ct_error *err)
{
    char list[sizeof(ct_spank.args.allowed_strategies)], *save = NULL;
    const char *cands[64];
    int n = 0;

    if (!ct_spank.args.allowed_strategies[0])
        return 0;
    ct_str_copy(list, sizeof(list), ct_spank.args.allowed_strategies);
    for (char *tok = strtok_r(list, ",", &save); tok && n < 63; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, name))
            return 0;
        cands[n++] = tok;
    }
    cands[n] = NULL;
    ct_error_set(err, CT_EINVAL, "strategy-not-allowed", "--ctrain-strategy=%s is not allowed on this cluster", name);
    if (ct_str_closest(name, cands))
        return ct_error_hint(err, "did you mean --ctrain-strategy=%s? (allowed: %s)", ct_str_closest(name, cands),
                             ct_spank.args.allowed_strategies);
    return ct_error_hint(err, "the administrators allow: %s", ct_spank.args.allowed_strategies);
}
