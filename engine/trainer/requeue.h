/* SPDX-License-Identifier: BSD-3-Clause */
/* Requeueing the SLURM job a run belongs to (internal to the Trainer). */
#ifndef CTRAIN_TRAINER_REQUEUE_H
#define CTRAIN_TRAINER_REQUEUE_H

#include "ctrain/error.h"

/* Ask slurmctld to requeue job job_id (libslurm's slurm_requeue, no scontrol needed). SLURM then
 * ends the job's processes and starts the job again under the same id once it is eligible. */
int ct_slurm_requeue(const char *job_id, ct_error *err);

/* libslurm's slurm_init(NULL), once per process, and never slurm_fini: SLURM 24.11 unloads its
 * plugins in slurm_fini, and a later slurm_init's calls then crash in slurm_plugin_get_syms
 * (seen in t/95-supervise, which asks slurmctld many times). Before any other libslurm call. */
void ct_slurm_init_once(void);
/* Requeue job job_id with nodes (a hostlist) added to its excluded nodes and comment as its
 * Comment (engine/slurm/exclude.c): --on-straggler exclude. */
int ct_slurm_requeue_without(const char *job_id, const char *nodes, const char *comment, ct_error *err);

#endif
