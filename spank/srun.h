/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — srun (S_CTX_LOCAL) and sbatch/salloc (S_CTX_ALLOCATOR). */
#ifndef CTRAIN_SPANK_SRUN_H
#define CTRAIN_SPANK_SRUN_H

#include <slurm/spank.h>

#include "ctrain/error.h"

/* From each option's callback: the options given so far, against each other and the site's
 * list, without the step's layout. */
int ct_spank_local_options_check(ct_error *err);
/* init_post_opt: every option, logging the connector's choices. */
int ct_spank_local_post_opt(spank_t sp, ct_error *err);
/* local_user_init (srun only): again with the step's node and task counts. */
int ct_spank_local_user_init(spank_t sp, ct_error *err);

#endif
