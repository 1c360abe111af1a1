/* SPDX-License-Identifier: BSD-3-Clause */
/* Differences between the SLURM releases ctrain builds against (22.05 to 24.11), behind
 * SLURM_VERSION_NUMBER checks as pyxis does: a site builds ctrain against its own SLURM. Include
 * after <slurm/slurm.h>. */
#ifndef CT_SLURM_COMPAT_H
#define CT_SLURM_COMPAT_H

#include <errno.h>

#include <slurm/slurm_version.h>

/* The error of the last failed libslurm call. SLURM 23.11 removed slurm_get_errno(): its calls set
 * errno, which is what slurm_get_errno() returned before. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
#define ct_slurm_errno() (errno)
#else
#define ct_slurm_errno() slurm_get_errno()
#endif

/* End a job step (scancel JOB.STEP). SLURM 23.11 added a flags argument (KILL_* flags; 0: none). */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
#define ct_slurm_kill_step(job, step, sig) slurm_kill_job_step((job), (step), (sig), 0)
#else
#define ct_slurm_kill_step(job, step, sig) slurm_kill_job_step((job), (step), (sig))
#endif

#endif
