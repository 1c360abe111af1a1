/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd (S_CTX_REMOTE): each task's rank layout, environment and
 * binding. */
#ifndef CTRAIN_SPANK_REMOTE_H
#define CTRAIN_SPANK_REMOTE_H

#include <slurm/spank.h>

/* init_post_opt: the step's layout and rank 0 (libslurm calls: as root, see ctrain.c). */
int ct_spank_remote_step_init(spank_t sp);
/* user_init: the binding, as the job's user. */
int ct_spank_remote_user_init(spank_t sp);
/* 0, or -1 after writing the reason to the task's stderr: the task must not run. */
int ct_spank_remote_task_init(spank_t sp);
/* slurm_spank_exit: free the step's state. */
void ct_spank_remote_exit(void);

#endif
