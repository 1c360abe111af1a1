/* SPDX-License-Identifier: BSD-3-Clause */
/* SLURM's requeue without a bad node; see exclude.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "ctrain/hostlist.h"
#include "engine/slurm/exclude.h"
#include "engine/util/slurm_compat.h"

/* The job's record (one job: an array task or a plain job). */
static job_info_t *load_job(uint32_t job_id, job_info_msg_t **msg)
{
    *msg = NULL;
    if (slurm_load_job(msg, job_id, SHOW_DETAIL) != SLURM_SUCCESS || !*msg || (*msg)->record_count < 1) {
        if (*msg)
            slurm_free_job_info_msg(*msg);
        *msg = NULL;
        return NULL;
    }
    return &(*msg)->job_array[0];
}

/* 1 when every node of want is in list (SLURM hostlists). */
static int all_listed(const char *list, const ct_hostlist *want)
{
    ct_hostlist *hl = NULL;
    ct_error err;
    int found = 1;

    if (!list || !list[0] || ct_hostlist_expand(list, &hl, &err) != 0)
        return 0;
    for (size_t i = 0; i < ct_hostlist_count(want) && found; i++)
        found = ct_hostlist_find(hl, ct_hostlist_get(want, i)) >= 0;
    ct_hostlist_free(hl);
    return found;
}

/* Add nodes to the job's excluded nodes while it is pending. Two callers may write at once (two
 * bad nodes of one step, each its own process): read, write, read back, a few times. */
static int add_excluded(uint32_t job_id, const ct_hostlist *want, const char *nodes, const char *comment,
                        const char *id, ct_error *err)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        job_info_msg_t *msg;
        job_info_t *job = load_job(job_id, &msg);
        job_desc_msg_t desc;
        char list[4096];
        int done;

        if (!job)
            break;
        done = all_listed(job->exc_nodes, want);
        if (!done) {
            snprintf(list, sizeof(list), "%s%s%s", job->exc_nodes ? job->exc_nodes : "",
                     job->exc_nodes && job->exc_nodes[0] ? "," : "", nodes);
            slurm_init_job_desc_msg(&desc);
            desc.job_id = job_id;
            desc.exc_nodes = list;
            desc.comment = (char *)comment;
            (void)slurm_update_job(&desc);   /* read back below: another writer may have replaced ours */
        }
        slurm_free_job_info_msg(msg);
        if (done)
            return 0;
        usleep((useconds_t)(20000 + (rand() % 50) * 1000));
    }
    ct_error_set(err, CT_ECOMM, id, "job %u was requeued, but slurmctld did not take %s into its excluded nodes (%s)",
                 job_id, nodes, slurm_strerror(ct_slurm_errno()));
    return ct_error_hint(err, "scontrol update job=%u ExcNodeList=%s while it is pending", job_id, nodes);
}

/* 1 when the job is a batch job that may be requeued; else 0 with err set. */
static int requeueable(uint32_t job_id, const char *id, ct_error *err)
{
    job_info_msg_t *msg;
    job_info_t *job = load_job(job_id, &msg);
    int batch, requeue;

    if (!job) {
        ct_error_set(err, CT_ECOMM, id, "slurmctld did not give job %u's record (%s)", job_id,
                     slurm_strerror(ct_slurm_errno()));
        ct_error_hint(err, "check that slurmctld answers (scontrol show job %u)", job_id);
        return 0;
    }
    batch = job->batch_flag != 0;
    requeue = job->requeue != 0;
    slurm_free_job_info_msg(msg);
    if (batch && requeue)
        return 1;
    ct_error_set(err, CT_ENOTAVAIL, id, "job %u not requeued: %s", job_id,
                 !batch ? "it is not a batch job" : "it may not be requeued");
    ct_error_hint(err, "only a batch job submitted with sbatch --requeue (or on a cluster with JobRequeue=1) is "
                       "requeued without a bad node");
    return 0;
}

int ct_slurm_requeue_excluding(uint32_t job_id, const char *nodes, const char *comment, const char *id,
                               int *requeued, ct_error *err)
{
    ct_hostlist *want = NULL;
    int rc;

    *requeued = 0;
    if (ct_hostlist_expand(nodes, &want, err) != 0)
        return err->code;
    if (!requeueable(job_id, id, err)) {
        ct_hostlist_free(want);
        return err->code;
    }
    srand((unsigned)(time(NULL) ^ getpid()));
    /* Another caller may have requeued the job already: then slurmctld refuses a second requeue,
     * and the excluded list is what is left to do. */
    if (slurm_requeue(job_id, 0) != SLURM_SUCCESS && ct_slurm_errno() != ESLURM_JOB_PENDING &&
        ct_slurm_errno() != ESLURM_TRANSITION_STATE_NO_UPDATE) {
        int e = ct_slurm_errno();
        job_info_msg_t *msg;
        job_info_t *job = load_job(job_id, &msg);
        int pending = job && (job->job_state & JOB_STATE_BASE) == JOB_PENDING;

        if (msg)
            slurm_free_job_info_msg(msg);
        if (!pending) {
            ct_hostlist_free(want);
            ct_error_set(err, CT_ECOMM, id, "slurmctld refused to requeue job %u (%s)", job_id, slurm_strerror(e));
            return ct_error_hint(err, "JobRequeue and the job's --requeue allow it; scontrol requeue %u by hand",
                                 job_id);
        }
    }
    *requeued = 1;
    rc = add_excluded(job_id, want, nodes, comment, id, err);
    ct_hostlist_free(want);
    return rc;
}
