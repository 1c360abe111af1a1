/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the --ctrain-* options of srun, sbatch and salloc. SPANK calls the
 * dispatcher's callback (ctrain.c, given at registration) for each; this file stores a value after
 * checking its form, and the connector checks the meaning (check.c, from srun.c in
 * srun/sbatch/salloc and remote.c on the node). */
#include <stdlib.h>
#include <string.h>

#include "ctrain/error.h"
#include "ctrain/util.h"
#include "spank/options.h"
#include "spank/nodecheck.h"

/* --ctrain-* options as the user gave them (NULL/UNSET = not given). */
static struct {
    char *strategy;
    char *accelerator;
    char *precision;
    enum ct_spank_bind bind;
    struct ct_spank_nodecheck preflight;
} opts;
static ct_error refused; /* the first option refused (code 0: none) */

/* The callback is the dispatcher's, set by ct_spank_options_register. */
static struct spank_option options[] = {
    { "ctrain-strategy", "NAME",
      "ctrain: training strategy of this step (ddp, ...); every task gets RANK, LOCAL_RANK, WORLD_SIZE, "
      "MASTER_ADDR, MASTER_PORT and CTRAIN_STRATEGY", 1, CT_SPANK_OPT_STRATEGY, NULL },
    { "ctrain-accelerator", "NAME",
      "ctrain: accelerator (cpu, cuda or gpu, auto) as CTRAIN_ACCELERATOR; checked with the strategy before launch",
      1, CT_SPANK_OPT_ACCELERATOR, NULL },
    { "ctrain-precision", "P",
      "ctrain: precision (32-true, bf16-mixed, ...) as CTRAIN_PRECISION; checked before launch", 1,
      CT_SPANK_OPT_PRECISION, NULL },
    { "ctrain-bind", "closest|none|verbose",
      "ctrain: bind each task to the GPU, cores and NIC closest to each other inside the step's allocation "
      "(closest, the default), not at all (none), or closest and print each task's binding (verbose)",
      1, CT_SPANK_OPT_BIND, NULL },
    { "ctrain-preflight", "report|fail|exclude[,dir=PATH][,mem=MIB]",
      "ctrain: check each node before the tasks start (GPU device files present and free, the network "
      "interface up, the run directory writable, memory free): report the result, also end the step on a bad node "
      "(fail), or also requeue a batch job without the bad node (exclude)", 1, CT_SPANK_OPT_PREFLIGHT, NULL },
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

static int store_value(int val, const char *optarg, ct_error *err)
{
    switch (val) {
    case CT_SPANK_OPT_STRATEGY:
        return store(&opts.strategy, "ctrain-strategy", optarg, err);
    case CT_SPANK_OPT_ACCELERATOR:
        return store(&opts.accelerator, "ctrain-accelerator", optarg, err);
    case CT_SPANK_OPT_PRECISION:
        return store(&opts.precision, "ctrain-precision", optarg, err);
    case CT_SPANK_OPT_BIND:
        if (optarg && !strcmp(optarg, "closest"))
            opts.bind = CT_SPANK_BIND_CLOSEST;
        else if (optarg && !strcmp(optarg, "none"))
            opts.bind = CT_SPANK_BIND_NONE;
        else if (optarg && !strcmp(optarg, "verbose"))
            opts.bind = CT_SPANK_BIND_VERBOSE;
        else {
            ct_error_set(err, CT_EINVAL, "spank-option", "--ctrain-bind='%s' is not a binding mode",
                         optarg ? optarg : "");
            return ct_error_hint(err, "use --ctrain-bind=closest, --ctrain-bind=none or --ctrain-bind=verbose");
        }
        return 0;
    case CT_SPANK_OPT_PREFLIGHT:
        return ct_spank_nodecheck_parse(optarg, &opts.preflight, err);
    }
    return ct_error_set(err, CT_EINTERNAL, "spank-option", "SPANK passed an option number (%d) ctrain never "
                        "registered", val);
}

int ct_spank_option_store(int val, const char *optarg, ct_error *err)
{
    int rv = store_value(val, optarg, err);

    if (rv != 0 && !refused.code)
        refused = *err;
    return rv;
}

const ct_error *ct_spank_options_refused(void)
{
    return refused.code ? &refused : NULL;
}

int ct_spank_options_register(spank_t sp, spank_opt_cb_f cb, ct_error *err)
{
    for (struct spank_option *o = options; o->name; o++) {
        spank_err_t rc;

        o->cb = cb;
        rc = spank_option_register(sp, o);

        if (rc != ESPANK_SUCCESS)
            return ct_error_set(err, CT_EINTERNAL, "spank-option", "registering --%s failed: %s", o->name,
                                spank_strerror(rc));
    }
    return 0;
}

void ct_spank_options_free(void)
{
    free(opts.strategy);
    free(opts.accelerator);
    free(opts.precision);
    memset(&opts, 0, sizeof(opts));
    memset(&refused, 0, sizeof(refused));
}

int ct_spank_active(void)
{
    return opts.strategy || opts.accelerator || opts.precision || opts.bind != CT_SPANK_BIND_UNSET ||
           opts.preflight.mode != CT_SPANK_NODECHECK_OFF || ct_spank_args_get()->default_strategy[0];
}

const char *ct_spank_strategy(void)
{
    const struct ct_spank_args *a = ct_spank_args_get();

    if (opts.strategy)
        return opts.strategy;
    return a->default_strategy[0] ? a->default_strategy : NULL;
}

const char *ct_spank_accelerator(void)
{
    return opts.accelerator;
}

const char *ct_spank_precision(void)
{
    return opts.precision;
}

enum ct_spank_bind ct_spank_bind_mode(void)
{
    const struct ct_spank_args *a = ct_spank_args_get();

    if (opts.bind != CT_SPANK_BIND_UNSET)
        return opts.bind;
    return a->bind != CT_SPANK_BIND_UNSET ? a->bind : CT_SPANK_BIND_CLOSEST;
}

const struct ct_spank_nodecheck *ct_spank_nodecheck_opts(void)
{
    return &opts.preflight;
}
