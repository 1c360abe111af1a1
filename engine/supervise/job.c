/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain supervise and SLURM: the job and its nodes, slurmctld's view of them, the supervisor's
 * steps, the requeue. libslurm calls, as engine/trainer/requeue.c explains: no scontrol needed,
 * SLURM's own error in the message. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "ctrain/launcher.h"
#include "ctrain/util.h"
#include "engine/supervise/internal.h"
#include "engine/trainer/requeue.h"
#include "engine/util/slurm_compat.h"

#define P CT_SV_P

static int job_number(const struct ct_sv *s, uint32_t *out)
{
    long jid;

    if (ct_parse_long(s->job, 1, 0xfffffffeL, &jid))
        return -1;
    *out = (uint32_t)jid;
    return 0;
}

/* The job's id and nodes, from the environment SLURM gives a batch job. */
int ct_sv_job_setup(struct ct_sv *s, ct_error *err)
{
    const char *id = getenv("SLURM_JOB_ID"), *nl = getenv("SLURM_JOB_NODELIST");
    long jid;

    if (!id || !*id || !nl || !*nl) {
        ct_error_set(err, CT_ECONFLICT, "supervise-no-job", "supervise: not in a SLURM job (SLURM_JOB_ID%s unset)",
                     nl && *nl ? "" : " or SLURM_JOB_NODELIST");
        return ct_error_hint(err, "run it as the body of a batch job: sbatch scripts/sbatch/supervise.sbatch");
    }
    if (ct_parse_long(id, 1, 0xfffffffeL, &jid)) {
        ct_error_set(err, CT_EINVAL, "supervise-no-job", "supervise: SLURM_JOB_ID='%s' is not a job number", id);
        return ct_error_hint(err, "SLURM sets it in every job; unset it if you exported it yourself");
    }
    ct_str_copy(s->job, sizeof(s->job), id);
    return ct_hostlist_expand(nl, &s->alloc, err);
}

/* Whether the batch script asks for --no-kill (-k) in its #SBATCH lines, which sbatch reads up to
 * the first command. -1: the script cannot be read. */
static int script_no_kill(uint32_t jid)
{
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc, found = 0;

    if (!f)
        return -1;
    ct_slurm_init_once();
    rc = slurm_job_batch_script(f, jid);
    fclose(f);
    if (rc != SLURM_SUCCESS) {
        free(text);
        return -1;
    }
    for (line = strtok_r(text, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
        line += strspn(line, " \t");
        if (*line && *line != '#')
            break;
        if (strncmp(line, "#SBATCH", 7))
            continue;
        for (char *w = strtok(line + 7, " \t="); w && !found; w = strtok(NULL, " \t="))
            found = !strcmp(w, "--no-kill") || !strcmp(w, "-k") || !strncmp(w, "--no-kill=", 10);
    }
    free(text);
    return found;
}

/* At the start: without --no-kill slurmctld ends the whole job (this supervisor with it) when one
 * of its nodes fails, and nothing is restarted. SLURM's job record does not tell a client whether
 * the job has it (job_info_t has no kill_on_node_fail, 22.05 to 24.11): the job's batch script
 * (slurm_job_batch_script) and SBATCH_NO_KILL, which sbatch reads and the job inherits, do. */
void ct_sv_warn_no_kill(const struct ct_sv *s)
{
    const char *env = getenv("SBATCH_NO_KILL");
    uint32_t jid;
    int in_script;

    if ((env && *env) || job_number(s, &jid))
        return;
    in_script = script_no_kill(jid);
    if (in_script == 1)
        return;
    fprintf(stderr, P "warning: job %s %s: unless sbatch was given --no-kill on its command line (SLURM's job "
                      "record does not say), slurmctld ends the whole job, this supervisor with it, at the first "
                      "failed node, and nothing is restarted\n",
            s->job, in_script == 0 ? "has no #SBATCH --no-kill in its script" : "has a script SLURM did not show");
    fprintf(stderr, P "hint: sbatch --no-kill --requeue (scripts/sbatch/supervise.sbatch has both)\n");
    fflush(stderr);
}

/* The job's steps SLURM lists; NULL when they cannot be listed. */
static job_step_info_response_msg_t *steps(const struct ct_sv *s, int quiet)
{
    job_step_info_response_msg_t *r = NULL;
    uint32_t jid;

    if (job_number(s, &jid))
        return NULL;
    ct_slurm_init_once();
    if (slurm_get_job_steps(0, jid, NO_VAL, &r, SHOW_ALL) != SLURM_SUCCESS || !r) {
        if (!quiet)
            fprintf(stderr, P "cannot list the job's steps (slurm_get_job_steps: %s)\n",
                    slurm_strerror(ct_slurm_errno()));
        return NULL;
    }
    return r;
}

/* Signal every step of this job the supervisor started (by name) that SLURM still lists: SIGKILL
 * ends what is left of them; SIGTERM reaches the tasks through slurmstepd, as scancel sends it (srun
 * would turn its own SIGTERM into SIGKILL for the tasks, and the fit would not save). Returns how
 * many steps it signalled. */
int ct_sv_signal_steps(struct ct_sv *s, int sig)
{
    job_step_info_response_msg_t *r = steps(s, 0);
    int n = 0;

    for (uint32_t i = 0; r && i < r->job_step_count; i++) {
        const job_step_info_t *st = &r->job_steps[i];

        if (!st->name || strcmp(st->name, CT_SV_STEP_NAME))
            continue;
        if (slurm_signal_job_step(st->step_id.job_id, st->step_id.step_id, (uint32_t)sig) == SLURM_SUCCESS)
            n++;
        else if (sig != SIGKILL) /* a step that ended meanwhile is no news */
            fprintf(stderr, P "cannot signal step %s.%u: %s\n", s->job, st->step_id.step_id,
                    slurm_strerror(ct_slurm_errno()));
    }
    if (r)
        slurm_free_job_step_info_response_msg(r);
    return n;
}

/* Whether SLURM still lists a step of this job that the supervisor started: 1, 0, or -1 when the
 * steps cannot be listed. */
int ct_sv_step_listed(const struct ct_sv *s)
{
    job_step_info_response_msg_t *r = steps(s, 1);
    int n = 0;

    if (!r)
        return -1;
    for (uint32_t i = 0; i < r->job_step_count; i++)
        n |= r->job_steps[i].name && !strcmp(r->job_steps[i].name, CT_SV_STEP_NAME);
    slurm_free_job_step_info_response_msg(r);
    return n;
}

/* Too few healthy nodes left: SLURM's requeue (the allocation given back). */
int ct_sv_requeue(struct ct_sv *s, long healthy)
{
    ct_error e;
    char *badl = NULL;

    ct_error_clear(&e);
    ct_hostlist_compress(s->bad, &badl, &e);
    fprintf(stderr, P "%ld healthy node%s left (failed: %s), the step needs %ld: falling back to SLURM's requeue "
                      "of job %s (the allocation is given back; the job starts again when SLURM has nodes for "
                      "it, and resumes from last.safetensors)\n",
            healthy, healthy == 1 ? "" : "s", badl ? badl : "", s->nodes, s->job);
    free(badl);
    fflush(stderr);
    if (ct_slurm_requeue(s->job, &e)) {
        fprintf(stderr, P "the job was not requeued: ");
        ct_error_print(stderr, &e);
        return 1;
    }
    fprintf(stderr, P "requeueing SLURM job %s\n", s->job);
    return CT_LAUNCHER_EXIT_STOPPED;
}
