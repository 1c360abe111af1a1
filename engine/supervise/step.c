/* SPDX-License-Identifier: BSD-3-Clause */
/* One step of ctrain supervise: srun, run as a program (it does the PMIx wire-up, the I/O, the
 * signal forwarding and the step's cancellation, which libslurm's step-launch API would leave to
 * us), its output relayed line by line, the run's event records read while it runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/supervise/internal.h"

#define P CT_SV_P
/* Once a node is named (or srun says it ends the step), srun has this long to end the step by
 * itself (it waits for the step's tasks, KillWait and its own timeouts) before the supervisor kills
 * it and the step. Not from the first failure: Open MPI reports a lost peer at once, and the ranks
 * name its node only after their collective timeout; killing srun before that would leave the node
 * unnamed. */
#define TEARDOWN_S 30.0
/* After SIGTERM/SIGINT to the supervisor: the fit saves last.safetensors and ends within this. */
#define STOP_WAIT_S 20.0
/* How often the event records are read while the step runs. */
#define EVENTS_EVERY_S 0.5
#define MAX_LINE 4096

struct stream {
    int fd, to;
    size_t len;
    char buf[MAX_LINE];
};

/* The first s->nodes healthy nodes, in the job's order, as a hostlist; NULL with fewer. */
char *ct_sv_pick_nodes(const struct ct_sv *s, long *healthy)
{
    ct_hostlist *pick = ct_hostlist_new();
    char *out = NULL;
    ct_error e;

    *healthy = 0;
    if (!pick)
        return NULL;
    ct_error_clear(&e);
    for (size_t i = 0; i < ct_hostlist_count(s->alloc); i++) {
        const char *h = ct_hostlist_get(s->alloc, i);

        if (ct_hostlist_find(s->bad, h) >= 0)
            continue;
        if (++*healthy <= s->nodes)
            ct_hostlist_push(pick, h, &e);
    }
    if (*healthy >= s->nodes)
        ct_hostlist_compress(pick, &out, &e);
    ct_hostlist_free(pick);
    return out;
}

void ct_sv_argv_free(char **av)
{
    if (!av)
        return;
    for (size_t i = 0; i < 6; i++)
        free(av[i + 1]);   /* the six flags srun_argv formats; the rest are borrowed */
    free(av);
}

/* The srun command line: the same world size on the nodes given, every string sized to its
 * content (a --nodelist of 500 names that do not compress is far over any fixed buffer). A restart
 * overlaps the failed step: slurmctld keeps that step (and its CPUs on the healthy nodes) until the
 * failed node answers or is declared DOWN, and a step without --overlap would wait for it
 * ("Requested nodes are busy"); srun has ended every task of it that can still be reached before a
 * restart. NULL when out of memory. */
char **ct_sv_srun_argv(const struct ct_sv *s, const char *nodes, int restart)
{
    size_t n = 0, k = 0;
    char **av;
    int bad = 0;

    while (s->o.cmd[n])
        n++;
    if (!(av = calloc(n + 16, sizeof(*av))))
        return NULL;
    av[k++] = "srun";
    bad |= asprintf(&av[k++], "--mpi=%s", s->o.mpi) < 0;
    bad |= asprintf(&av[k++], "--nodes=%ld", s->nodes) < 0;
    bad |= asprintf(&av[k++], "--ntasks=%ld", s->nodes * s->o.tasks_per_node) < 0;
    bad |= asprintf(&av[k++], "--ntasks-per-node=%ld", s->o.tasks_per_node) < 0;
    bad |= asprintf(&av[k++], "--nodelist=%s", nodes) < 0;
    bad |= asprintf(&av[k++], "--job-name=%s", CT_SV_STEP_NAME) < 0;
    av[k++] = "--kill-on-bad-exit=1";
    if (restart)
        av[k++] = "--overlap";
    for (size_t i = 0; i < n; i++)
        av[k++] = s->o.cmd[i];
    av[k] = NULL;
    if (bad) {
        ct_sv_argv_free(av);
        return NULL;
    }
    return av;
}

static pid_t spawn(char **av, int out[2], int errp[2])
{
    pid_t pid = fork();

    if (pid != 0)
        return pid;
    sigset_t none;

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* The step's checks (the plugin's preflight, fit's --on-straggler exclude) leave a bad node to
     * the supervisor instead of requeueing the job: srun passes this to every task. */
    setenv("CTRAIN_SUPERVISED", "1", 1);
    /* The supervisor gone (SIGKILL), srun still ends its step: it forwards SIGTERM to the tasks. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    dup2(out[1], 1);
    dup2(errp[1], 2);
    close(out[0]);
    close(out[1]);
    close(errp[0]);
    close(errp[1]);
    execvp(av[0], av);
    fprintf(stderr, P "cannot run %s: %s\n", av[0], strerror(errno));
    _exit(127);
}

/* Relay what the step wrote, line by line; srun's and the plugin's lines are read (decide.c). */
static void relay(struct ct_sv *s, struct stream *st)
{
    ssize_t r = read(st->fd, st->buf + st->len, sizeof(st->buf) - 1 - st->len);
    char *nl;

    if (r <= 0) {
        if (st->len) {
            st->buf[st->len] = '\0';
            dprintf(st->to, "%s\n", st->buf);
            ct_sv_scan_line(s, st->buf);
        }
        close(st->fd);
        st->fd = -1;
        return;
    }
    st->len += (size_t)r;
    st->buf[st->len] = '\0';
    while ((nl = strchr(st->buf, '\n')) || st->len == sizeof(st->buf) - 1) {
        size_t n = nl ? (size_t)(nl - st->buf) + 1 : st->len;
        char save = st->buf[n - 1];

        (void)!write(st->to, st->buf, n);
        st->buf[n - 1] = '\0';
        ct_sv_scan_line(s, st->buf);
        st->buf[n - 1] = save;
        memmove(st->buf, st->buf + n, st->len - n);
        st->len -= n;
        st->buf[st->len] = '\0';
    }
}

static void on_signal(struct ct_sv *s, pid_t srun, double *kill_at)
{
    struct signalfd_siginfo si;

    while (read(s->sigfd, &si, sizeof(si)) == sizeof(si)) {
        int sig = (int)si.ssi_signo;

        if (sig == SIGCHLD)
            continue;
        if (sig == SIGUSR1 || sig == SIGUSR2) {
            kill(srun, sig);
            continue;
        }
        if (!s->stop_sig) {
            fprintf(stderr, P "%s: ending the step (the fit saves last.safetensors)\n", strsignal(sig));
            s->stop_sig = sig;
            if (ct_sv_signal_steps(s, SIGTERM) == 0)
                kill(srun, SIGTERM); /* no step yet: srun gives up its launch */
            *kill_at = ct_time_now() + STOP_WAIT_S;
        }
    }
}

static int start(struct ct_sv *s, const char *nodes, int restart, struct stream st[2], pid_t *pid)
{
    int out[2], errp[2];
    char **av = ct_sv_srun_argv(s, nodes, restart);

    if (!av || pipe2(out, O_CLOEXEC)) {
        ct_sv_argv_free(av);
        return -1;
    }
    if (pipe2(errp, O_CLOEXEC)) {
        close(out[0]);
        close(out[1]);
        ct_sv_argv_free(av);
        return -1;
    }
    s->failed_at = 0;
    s->ending_at = 0;
    s->zero_verdict = 0;
    s->srun_end = 0;
    s->step_start = ct_time_now();
    s->step_start_wall = ct_wall_now();
    *pid = spawn(av, out, errp);
    ct_sv_argv_free(av);
    close(out[1]);
    close(errp[1]);
    st[0] = (struct stream){ .fd = out[0], .to = 1 };
    st[1] = (struct stream){ .fd = errp[0], .to = 2 };
    if (*pid < 0) {
        close(out[0]);
        close(errp[0]);
        return -1;
    }
    return 0;
}

/* Run one step on nodes; its wait status. */
int ct_sv_run_step(struct ct_sv *s, const char *nodes, int restart)
{
    struct stream st[2];
    double kill_at = 0, events_at = 0;
    int status = 0, done = 0;
    pid_t pid;

    if (start(s, nodes, restart, st, &pid)) {
        fprintf(stderr, P "cannot start srun: %s\n", strerror(errno));
        return 1 << 8;
    }
    while (!done || st[0].fd >= 0 || st[1].fd >= 0) {
        struct pollfd p[3] = { { st[0].fd, POLLIN, 0 }, { st[1].fd, POLLIN, 0 }, { s->sigfd, POLLIN, 0 } };
        double t = ct_time_now();

        if (t >= events_at) {
            ct_sv_scan_events(s);
            events_at = t + EVENTS_EVERY_S;
        }
        if (!done && s->ending_at > 0 && !kill_at)
            kill_at = s->ending_at + TEARDOWN_S;
        if (!done && kill_at > 0 && t >= kill_at) {
            fprintf(stderr, P "srun has not ended the step %.0f s on: killing it and the step\n", t - s->step_start);
            kill(pid, SIGKILL);
            ct_sv_signal_steps(s, SIGKILL);
            kill_at = t + 3600;
        }
        if (done && (t - s->srun_end) > 5.0)
            break; /* a task of the step holds the pipes; the step is ended below */
        poll(p, 3, 500);
        for (int i = 0; i < 2; i++)
            if (st[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                relay(s, &st[i]);
        if (p[2].revents & POLLIN)
            on_signal(s, pid, &kill_at);
        if (!done && waitpid(pid, &status, WNOHANG) == pid) {
            done = 1;
            s->srun_end = ct_time_now();
        }
    }
    for (int i = 0; i < 2; i++)
        if (st[i].fd >= 0)
            close(st[i].fd);
    return status;
}
