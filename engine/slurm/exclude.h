/* SPDX-License-Identifier: BSD-3-Clause */
/* SLURM's requeue without a bad node: what `--ctrain-preflight=exclude` (the plugin, in a task of
 * the step) and `ctrain fit --on-straggler exclude` (the trainer's rank 0) ask of slurmctld. One
 * file for both: compiled into libctrain and into ctrain.so, whose libslurm symbols come from the
 * srun or slurmstepd that loads it. Include after <slurm/slurm.h>. */
#ifndef CT_SLURM_EXCLUDE_H
#define CT_SLURM_EXCLUDE_H

#include <stdint.h>

#include "ctrain/error.h"

/* Requeue batch job job_id and add nodes (a SLURM hostlist, "n2" or "n[2,5]") to its excluded
 * nodes, with comment as its Comment, so that its next start avoids them. Only a batch job that may
 * be requeued (sbatch --requeue, or JobRequeue=1) qualifies: CT_ENOTAVAIL otherwise, nothing asked.
 * slurmctld changes a job's excluded nodes only while it is pending, so the requeue comes first; a
 * job another caller requeued already (two bad nodes at once) is not an error. *requeued says
 * whether the job was requeued, even when the exclusion then failed (its hint is scontrol's command
 * then; the caller may replace the others'). Errors carry id. */
int ct_slurm_requeue_excluding(uint32_t job_id, const char *nodes, const char *comment, const char *id,
                               int *requeued, ct_error *err);

#endif
