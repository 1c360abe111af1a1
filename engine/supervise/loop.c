/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain supervise's restarts: a failed step's nodes excluded, its records moved aside, a pause that
 * grows with each restart, a new step on the nodes left; SLURM's requeue when too few are left. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrain/launcher.h"
#include "ctrain/util.h"
#include "engine/supervise/internal.h"

#define P CT_SV_P
/* How long a new step waits at most for SLURM to stop listing the failed one (its slurmstepds ended). */
#define STEP_GONE_S 20.0

/* Wait until end, or while cond(s) holds (NULL: to the end), reading stop signals: a stop signal
 * ends the wait and is kept in s->stop_sig. */
static void wait_until(struct ct_sv *s, double end, int (*cond)(const struct ct_sv *s))
{
    while (ct_time_now() < end && (!cond || cond(s) == 1)) {
        struct pollfd p = { s->sigfd, POLLIN, 0 };
        struct signalfd_siginfo si;
        double left = end - ct_time_now();

        if (poll(&p, 1, left > 0.2 ? 200 : left > 0 ? (int)(left * 1000) + 1 : 1) > 0)
            while (read(s->sigfd, &si, sizeof(si)) == sizeof(si))
                if (si.ssi_signo != SIGCHLD && si.ssi_signo != SIGUSR1 && si.ssi_signo != SIGUSR2 && !s->stop_sig)
                    s->stop_sig = (int)si.ssi_signo;
        if (s->stop_sig)
            return;
    }
}

/* Before a new step: wait a little (STEP_GONE_S from the failure) for SLURM to stop listing the
 * failed one. srun returns before the failed step's slurmstepds have ended on its nodes, and a new
 * step started beside them on a node the two share (a healthy one) hung in its tasks' start (SLURM
 * 24.11, t/96: the failed step's slurmstepds ended 3 s after the new one began). The wait is short
 * and never ends in a kill: a node that died keeps the step listed until SLURM marks it down, and
 * the new step does not use that node. Counted from the step's first sign of failure: the healthy
 * nodes' slurmstepds have been ending since, while srun waited for the step's end. */
static void wait_step_gone(struct ct_sv *s)
{
    wait_until(s, (s->failed_at > 0 ? s->failed_at : s->srun_end) + STEP_GONE_S, ct_sv_step_listed);
}

/* The pause before restart n (from 1): --restart-backoff x 2^(n-1), at most
 * CT_SUPERVISE_BACKOFF_MAX_S, counted from the failed step's end. A step that fails at once (a
 * node that refuses every task, a file system that is not there yet) is not started again at once,
 * and again, as fast as srun can fail. */
static double backoff(const struct ct_sv *s, int n)
{
    double b = s->o.backoff_s;

    for (int i = 1; i < n && b < CT_SUPERVISE_BACKOFF_MAX_S; i++)
        b *= 2;
    return b < CT_SUPERVISE_BACKOFF_MAX_S ? b : CT_SUPERVISE_BACKOFF_MAX_S;
}

static void pause_before(struct ct_sv *s, int restart)
{
    double b = backoff(s, restart), left = s->srun_end + b - ct_time_now();

    if (b <= 0 || left <= 0)
        return;
    fprintf(stderr, P "waiting %.1f s before restart %d (--restart-backoff %g: doubled each restart, at most %g s)\n",
            left, restart, s->o.backoff_s, CT_SUPERVISE_BACKOFF_MAX_S);
    fflush(stderr);
    wait_until(s, s->srun_end + b, NULL);
}

/* Before restart N: the failed step's hang and event records (DIR/hang) move to DIR/hang.restart-N,
 * so the next step's are not mixed with them and they stay for ctrain diagnose DIR/hang.restart-N. */
static void archive_hang(struct ct_sv *s, int restart)
{
    char to[1200];
    struct stat sb;

    if (lstat(s->hang_dir, &sb) || !S_ISDIR(sb.st_mode))
        return;
    for (int k = 0; k < 100; k++) {
        if (k == 0)
            snprintf(to, sizeof(to), "%s.restart-%d", s->hang_dir, restart);
        else
            snprintf(to, sizeof(to), "%s.restart-%d.%d", s->hang_dir, restart, k);
        if (!rename(s->hang_dir, to)) {   /* rename(2) replaces only an empty directory: never one with records */
            fprintf(stderr, P "the failed step's hang records are in %s (ctrain diagnose %s)\n", to, to);
            return;
        }
        if (errno != EEXIST && errno != ENOTEMPTY)
            break;
    }
    fprintf(stderr, P "could not move %s aside: %s (the next step's hang records join them)\n", s->hang_dir,
            strerror(errno));
}

/* Everything between two steps; 0 to go on, else the supervisor's exit status. */
static int before_restart(struct ct_sv *s, int restart)
{
    wait_step_gone(s);
    if (!s->stop_sig)
        pause_before(s, restart);
    if (s->stop_sig)
        return 128 + s->stop_sig;
    archive_hang(s, restart);
    fprintf(stderr, P "restart %d of at most %ld\n", restart, s->o.max_restarts);
    return 0;
}

/* After a failed step: 0 to restart, else the supervisor's exit status. */
static int after_step(struct ct_sv *s, int status, int restart)
{
    int code = ct_sv_exit_code(status);

    ct_sv_after_failure(s, status);
    if (code == CT_LAUNCHER_EXIT_STOPPED) {
        fprintf(stderr, P "the fit stopped on its requeue signal (exit %d)\n", code);
        return code;
    }
    if (ct_hostlist_count(s->named) == 0 && (code == 2 || code == CT_LAUNCHER_EXIT_NONFINITE)) {
        fprintf(stderr, P "the fit failed (exit %d) with no node named: a restart would fail alike\n", code);
        return 1;
    }
    if (restart >= s->o.max_restarts) {
        fprintf(stderr, P "%d restart%s done (--max-restarts %ld): giving up\n", restart, restart == 1 ? "" : "s",
                s->o.max_restarts);
        return 1;
    }
    if (ct_hostlist_count(s->named) == 0)
        fprintf(stderr, P "no node named: the next step runs on the same nodes\n");
    return 0;
}

static int fresh_lists(struct ct_sv *s)
{
    ct_hostlist_free(s->named);
    ct_hostlist_free(s->weak);
    s->named = ct_hostlist_new();
    s->weak = ct_hostlist_new();
    return s->named && s->weak ? 0 : -1;
}

int ct_sv_loop(struct ct_sv *s)
{
    for (int restart = 0;; restart++) {
        long healthy;
        char *nodes = ct_sv_pick_nodes(s, &healthy);
        int status, rc;

        if (!nodes)
            return ct_sv_requeue(s, healthy);
        if (restart && (rc = before_restart(s, restart))) {
            free(nodes);
            return rc;
        }
        fprintf(stderr, P "%s step on %s (%ld node%s x %ld task%s%s)\n", restart ? "new" : "starting the", nodes,
                s->nodes, s->nodes == 1 ? "" : "s", s->o.tasks_per_node, s->o.tasks_per_node == 1 ? "" : "s",
                restart ? ", resuming from last.safetensors" : "");
        fflush(stderr);
        if (fresh_lists(s)) {
            free(nodes);
            fprintf(stderr, P "out of memory\n");
            return 1;
        }
        status = ct_sv_run_step(s, nodes, restart);
        free(nodes);
        if (s->stop_sig) {
            ct_sv_signal_steps(s, SIGKILL);
            return 128 + s->stop_sig;
        }
        if (ct_sv_exit_code(status) == 0)
            return 0;
        if ((rc = after_step(s, status, restart)))
            return rc;
    }
}
