/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the --ctrain-* options (the user's settings) of srun, sbatch and salloc,
 * as SLURM hands them to the plugin, and what the step uses: an option, else the site's default
 * (spank/args.h). */
#ifndef CTRAIN_SPANK_OPTIONS_H
#define CTRAIN_SPANK_OPTIONS_H

#include <slurm/spank.h>

#include "ctrain/error.h"
#include "spank/args.h"

struct ct_spank_nodecheck;   /* spank/nodecheck.h */

/* The option values SPANK passes to the callback (the options table's val). */
enum ct_spank_opt { CT_SPANK_OPT_STRATEGY = 1, CT_SPANK_OPT_ACCELERATOR, CT_SPANK_OPT_PRECISION, CT_SPANK_OPT_BIND,
                     CT_SPANK_OPT_PREFLIGHT };

/* Register every option with cb as its callback (the dispatcher's, spank/ctrain.c). */
int ct_spank_options_register(spank_t sp, spank_opt_cb_f cb, ct_error *err);
/* Store a value after checking its form. The first refusal is also kept for
 * ct_spank_options_refused: SLURM ignores an option callback's failure in slurmstepd. */
int ct_spank_option_store(int val, const char *optarg, ct_error *err);
/* The first option refused so far, or NULL. */
const ct_error *ct_spank_options_refused(void);
/* Forget every option (and a refusal). */
void ct_spank_options_free(void);

/* 1 when the step is ctrain's: a --ctrain-* option was given or the site set default_strategy. */
int ct_spank_active(void);
/* The strategy in effect: the option, else the site default, else NULL. */
const char *ct_spank_strategy(void);
/* --ctrain-accelerator and --ctrain-precision as given, or NULL. */
const char *ct_spank_accelerator(void);
const char *ct_spank_precision(void);
/* The binding in effect: the option, else the site default, else closest. */
enum ct_spank_bind ct_spank_bind_mode(void);
/* --ctrain-preflight as given (mode CT_SPANK_NODECHECK_OFF when not). */
const struct ct_spank_nodecheck *ct_spank_nodecheck_opts(void);

#endif
