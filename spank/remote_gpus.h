/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd, the GPU variables (spank/remote_gpus.c). Internal to
 * the plugin. */
#ifndef CTRAIN_SPANK_REMOTE_GPUS_H
#define CTRAIN_SPANK_REMOTE_GPUS_H

#include "spank/step.h"

/* The step's GPUs as SLURM gave them (NULL: none), whether the task sees them
 * numbered from 0, and the task's GPU variables. */
const char *ct_spank_slurm_gpus(char **env);
int ct_spank_gpus_numbered_locally(char **env);
int ct_spank_gpus_apply(spank_t sp, const struct step *s, const ct_bind_task *t, uint32_t rank, int local_gpus,
                        const char *task_gpus, int *kept);

#endif
