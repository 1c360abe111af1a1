/* SPDX-License-Identifier: BSD-3-Clause */
/* Which nodes failed, in this order of trust: slurmctld (DOWN, NOT_RESPONDING, FAIL or DRAIN; job.c),
 * the ranks' event records (DIR/hang/event-*.json, event.h: the collective timeout's missing ranks,
 * the hang diagnosis after it, the straggler check), srun's word on the step's nodes ("Node failure
 * on HOST"; "HOST: task N: Killed" only when nothing else names a node), and the hang records read
 * back as a struct (ct_diagnose). Nothing here reads what the ranks print: a rank's line that reads
 * like a verdict is relayed, never acted on. (The plugin's preflight line is read: see scan_preflight.) */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include <sys/wait.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "ctrain/launcher.h"
#include "ctrain/util.h"
#include "engine/health/fit/diagnose.h"
#include "engine/events/event.h"
#include "engine/supervise/internal.h"
#include "engine/trainer/requeue.h"
#include "engine/util/slurm_compat.h"

#define P CT_SV_P

int ct_sv_exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void ct_sv_name_node(struct ct_sv *s, const char *host, const char *why)
{
    ct_error e;

    if (!host[0] || ct_hostlist_find(s->alloc, host) < 0 || ct_hostlist_find(s->named, host) >= 0 ||
        ct_hostlist_find(s->bad, host) >= 0)
        return;
    ct_error_clear(&e);
    if (s->ending_at == 0)
        s->ending_at = ct_time_now();
    if (ct_hostlist_push(s->named, host, &e) == 0) {
        fprintf(stderr, P "node %s failed: %s\n", host, why);
        fflush(stderr);
    }
}

/* slurmctld's view: the job's nodes DOWN, NOT_RESPONDING, FAIL or DRAIN. */
void ct_sv_slurm_nodes(struct ct_sv *s)
{
    node_info_msg_t *msg = NULL;

    ct_slurm_init_once();
    if (slurm_load_node(0, &msg, SHOW_ALL) != SLURM_SUCCESS || !msg) {
        fprintf(stderr, P "cannot read the nodes' state (slurm_load_node: %s); naming failed nodes from the "
                          "records only\n", slurm_strerror(ct_slurm_errno()));
        return;
    }
    for (uint32_t i = 0; i < msg->record_count; i++) {
        const node_info_t *n = &msg->node_array[i];
        uint32_t st = n->node_state, base = st & NODE_STATE_BASE;
        const char *why = base == NODE_STATE_DOWN ? "DOWN"
                          : st & NODE_STATE_NO_RESPOND ? "NOT_RESPONDING"
                          : st & NODE_STATE_FAIL ? "FAIL"
                          : st & NODE_STATE_DRAIN ? "DRAIN" : NULL;
        char text[320], reason[256];

        if (!n->name || !why)
            continue;
        ct_str_escape(reason, sizeof(reason), n->reason ? n->reason : "");
        snprintf(text, sizeof(text), "slurmctld has it %s%s%s", why, reason[0] ? ": " : "", reason);
        ct_sv_name_node(s, n->name, text);
    }
    slurm_free_node_info_msg(msg);
}

/* Whether ev is a rank's word that rank 0, the roll call's collector, did not answer it. Rank 0
 * asks every rank and names those that do not answer; a rank cut off from rank 0 (its link down)
 * finds rank 0 silent and names rank 0's node, a healthy one. Such a record counts only when rank 0
 * wrote no verdict of its own, and only after the step, when the hang diagnosis named no node
 * either (rank 0 stopped or dead: the diagnosis has it behind from its live record). */
static int blames_zero(const ct_sv_event *ev)
{
    if (ev->kind != CT_SV_EVENT_MISSING || ev->rank == 0)
        return 0;
    for (int i = 0; i < ev->n_nodes; i++)
        if (ev->node_rank[i] == 0)
            return 1;
    return 0;
}

static int on_event(const ct_sv_event *ev, void *arg)
{
    struct ct_sv *s = arg;

    /* A record left by an earlier job in the same directory (a requeued job's failed step) is not
     * this step's (clocks of the nodes differ by far less than the skew allowed). */
    if (ev->wall < s->step_start_wall - 5.0)
        return 0;
    if (s->failed_at == 0 && s->srun_end == 0)   /* read while the step runs: its first sign of failure */
        s->failed_at = ct_time_now();
    if (ev->kind == CT_SV_EVENT_MISSING && ev->rank == 0)
        s->zero_verdict = 1;
    if (blames_zero(ev) != s->scan_blames_zero)
        return 0;
    for (int i = 0; i < ev->n_nodes; i++)
        ct_sv_name_node(s, ev->node[i], ev->why);
    return 0;
}

/* The event records of the current step (read while it runs, and once more after it ended); the
 * records that blame rank 0 are left out (blames_zero). */
void ct_sv_scan_events(struct ct_sv *s)
{
    s->scan_blames_zero = 0;
    ct_sv_events_read(s->hang_dir, on_event, s, NULL);
}

/* After the step, with nothing else naming a node: the records that blame rank 0, unless rank 0
 * gave its own verdict. */
static void scan_blames_zero(struct ct_sv *s)
{
    if (s->zero_verdict)
        return;
    s->scan_blames_zero = 1;
    ct_sv_events_read(s->hang_dir, on_event, s, NULL);
    s->scan_blames_zero = 0;
}

/* srun's own messages: "srun: error: Node failure on n2" names a node; "srun: error: n2: task 1:
 * Killed" (a signal, not the exit status the others give when a collective fails) only suggests
 * one: once a rank aborts, srun --kill-on-bad-exit kills the tasks on healthy nodes as well, so
 * these count only when nothing else names a node (ct_sv_after_failure). "Job step aborted": srun
 * ends the step, its teardown runs from here. */
static void scan_srun(struct ct_sv *s, const char *line)
{
    char host[256], what[64];
    int task;

    if (strncmp(line, "srun: ", 6))
        return;
    if (!strncmp(line, "srun: error:", 12) && s->failed_at == 0)
        s->failed_at = ct_time_now();
    if (!strncmp(line, "srun: Job step aborted", 22) && s->ending_at == 0)
        s->ending_at = ct_time_now();
    if (sscanf(line, "srun: error: Node failure on %255s", host) == 1) {
        ct_sv_name_node(s, host, "srun: Node failure (slurmctld lost it)");
        return;
    }
    if (sscanf(line, "srun: error: %255[^:]: task %d: %63[^\n]", host, &task, what) == 3 &&
        strncmp(what, "Exited with exit code", 21) && strncmp(what, "Terminated", 10) &&
        ct_hostlist_find(s->weak, host) < 0) {
        ct_error e;

        ct_error_clear(&e);
        ct_hostlist_push(s->weak, host, &e);
    }
}

/* The SPANK plugin's preflight line of a bad node ("ctrain: preflight: node HOST: WHY; the step ends
 * before its programs start"), written by slurmstepd before any rank of the step runs: the one
 * line of the step's output still read, as the plugin knows no run directory to write a record in
 * (it never sees the fit's --default-root-dir). */
static void scan_preflight(struct ct_sv *s, const char *line)
{
    char host[256], why[512], *end;

    if (sscanf(line, "ctrain: preflight: node %255[^:]: %511[^\n]", host, why) != 2 ||
        !(end = strstr(why, CT_LINE_PREFLIGHT_STOPS)))
        return;
    *end = '\0';
    ct_sv_name_node(s, host, why);
}

/* A line of the step's output from SLURM's side: srun's, or the plugin's preflight. */
void ct_sv_scan_line(struct ct_sv *s, const char *line)
{
    scan_srun(s, line);
    scan_preflight(s, line);
}

/* The hang records (DIR/hang/rank-R.json and the live records): the nodes of the ranks the
 * diagnosis has behind. */
static void scan_hang(struct ct_sv *s)
{
    ct_diagnosis d;
    ct_error e;

    ct_error_clear(&e);
    if (ct_diagnose(s->o.root_dir, &d, &e))
        return;
    for (int r = 0; r < d.world; r++) {
        const char *node = ct_diagnosis_node(&d, r);

        if (d.ranks[r].behind && node)
            ct_sv_name_node(s, node, "its rank is behind in the hang records (ctrain diagnose)");
    }
    ct_diagnosis_free(&d);
}

/* The step failed: name the failed nodes and move them to the excluded set. */
void ct_sv_after_failure(struct ct_sv *s, int status)
{
    ct_sv_slurm_nodes(s);
    ct_sv_scan_events(s);
    if (ct_hostlist_count(s->named) == 0)
        scan_hang(s);
    if (ct_hostlist_count(s->named) == 0)
        scan_blames_zero(s);
    for (size_t i = 0, none = ct_hostlist_count(s->named) == 0; none && i < ct_hostlist_count(s->weak); i++)
        ct_sv_name_node(s, ct_hostlist_get(s->weak, i), "srun: a task of it was killed by a signal (nothing else "
                                                        "named a node)");
    fprintf(stderr, P "the step ended (srun exit %d) %.1f s after it started", ct_sv_exit_code(status),
            s->srun_end - s->step_start);
    if (s->failed_at > 0)
        fprintf(stderr, ", %.1f s after its first sign of failure", s->srun_end - s->failed_at);
    fprintf(stderr, "\n");
    for (size_t i = 0; i < ct_hostlist_count(s->named); i++) {
        ct_error e;

        ct_error_clear(&e);
        ct_hostlist_push(s->bad, ct_hostlist_get(s->named, i), &e);
    }
}
