/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the --ctrain-* options through libctrain-core's connector: one check for
 * srun, sbatch and salloc (srun.c) and for each task on the node (remote.c). */
#ifndef CTRAIN_SPANK_CHECK_H
#define CTRAIN_SPANK_CHECK_H

#include "ctrain/environment.h"
#include "ctrain/error.h"

/* The options in effect against the site's allowed_strategies and the connector, in the
 * environment get/ctx describes (get NULL: no environment at all, the options judged on their
 * own). The connector's messages name the options as srun users type them (--ctrain-strategy).
 * log_plan: log the connector's notices and choices (verbose level). */
int ct_spank_check_flags(ct_getenv_fn get, void *ctx, int log_plan, ct_error *err);

#endif
