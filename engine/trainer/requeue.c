/* SPDX-License-Identifier: BSD-3-Clause */
/* Requeue through libslurm's API: containers and minimal nodes often have no scontrol, and a
 * library call reports SLURM's own error instead of a command's exit status. Only libctrain links
 * libslurm; libctrain-core and the SPANK plugin do not. */
#include <pthread.h>
#include <stdlib.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "ctrain/util.h"
#include "engine/slurm/exclude.h"
#include "engine/trainer/requeue.h"
#include "engine/util/slurm_compat.h"

static void slurm_init_default(void)
{
    slurm_init(NULL);
}

void ct_slurm_init_once(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    /* slurm_init reads slurm.conf (SLURM_CONF, or the configless source the node uses). */
    pthread_once(&once, slurm_init_default);
}

/* The job's number from SLURM_JOB_ID, and libslurm initialised to ask about it. */
static int job_number(const char *job_id, long *id, ct_error *err)
{
    if (ct_parse_long(job_id, 1, 0xfffffffeL, id)) {
        ct_error_set(err, CT_EINVAL, "requeue-job-id", "SLURM_JOB_ID='%s' is not a job number", job_id);
        return ct_error_hint(err, "SLURM sets it in every job; unset it if you exported it yourself");
    }
    ct_slurm_init_once();
    return 0;
}

int ct_slurm_requeue(const char *job_id, ct_error *err)
{
    long id;
    int rc;

    if (job_number(job_id, &id, err))
        return err->code;
    rc = slurm_requeue((uint32_t)id, 0);
    if (rc != SLURM_SUCCESS) {
        int e = ct_slurm_errno();

        ct_error_set(err, CT_ECOMM, "requeue-failed", "slurm_requeue(%ld) failed: %s", id, slurm_strerror(e));
        return ct_error_hint(err, "submit with sbatch --requeue (and JobRequeue allowed by the cluster), or pass "
                                  "--no-auto-requeue and resubmit yourself with --ckpt-path last");
    }
    return 0;
}

int ct_slurm_requeue_without(const char *job_id, const char *nodes, const char *comment, ct_error *err)
{
    long id;
    int requeued;

    if (job_number(job_id, &id, err))
        return err->code;
    return ct_slurm_requeue_excluding((uint32_t)id, nodes, comment, "requeue-failed", &requeued, err);
}
