/* SPDX-License-Identifier: BSD-3-Clause */
/* The process supervisor shared by the subprocess and fork launchers; see supervisor.h.
 *
 * Signals are handled synchronously: SIGCHLD, SIGINT, SIGTERM and the spec's forward_signals
 * (default SIGUSR1) are blocked and read
 * from a signalfd in the one poll loop that also carries the ranks' output and reports, so there
 * is no handler and no race between a child's exit and the loop. signalfd coalesces SIGCHLD, so
 * every wake-up reaps every rank with WNOHANG (and a 1 s poll timeout reaps anyway). Only our own
 * pids are waited for.
 *
 * The mask is this thread's only: a process-directed signal goes to any thread that does not block
 * it (OpenBLAS's workers, a host program's threads), where its default action would end the
 * process and, by PDEATHSIG, every rank without a checkpoint. So the same signals also get a
 * handler, which passes the signal's siginfo to the poll loop through a pipe as the signalfd would.
 * One supervisor per process at a time (the handler's pipe is process-wide).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/launchers/proc_supervisor.h"

#define LINE_MAX_BYTES 4096
#define DEFAULT_GRACE_S 5.0
#define MAX_GRACE_S 10.0
/* After a rank exited CT_LAUNCHER_EXIT_STOPPED the others, stopping at the same step, have this
 * long to exit too (rank 0 may still be writing the checkpoint or asking SLURM to requeue). */
#define STOPPED_WAIT_S 60.0
/* The same signal from the same sender again within this is the same request: `timeout` signals
 * its child and then the child's whole group, so the supervisor gets it twice while each rank got
 * it once from the group already. */
#define REPEAT_WINDOW_S 1.0
/* Wait status recorded for a rank another waitpid of the process collected. */
#define STATUS_LOST (-1)

/* What a rank sends on its report pipe, then result_len bytes. */
struct report_hdr {
    int32_t rc;
    uint32_t result_len;
    ct_error err;
};

struct stream {
    int fd;            /* read end, -1 when closed */
    int to;            /* 1 or 2 */
    size_t len;
    char buf[LINE_MAX_BYTES];
};

struct rank {
    pid_t pid;
    int running;
    int status;        /* wait status once reaped */
    struct stream out[2];
    int rep_fd;
    char *rep;
    size_t rep_cap, rep_len;
};

struct sv {
    const ct_launch_spec *spec;
    int relay[2];      /* the handler's pipe: read end, write end; -1 when closed */
    int relayed;       /* the handler is installed for the signals in sv->forward and SIGCHLD */
    int masked;        /* this thread blocks them; old_mask is the caller's */
    struct sigaction old_act[NSIG];
    int n;
    double grace;
    pid_t self;
    struct rank *ranks;
    int running;
    ct_pmix_server *server;
    pid_t server_pid;
    int server_dead, server_status;
    int sfd;
    sigset_t old_mask;
    int failed;        /* first failing rank, -1 */
    double kill_at;    /* SIGKILL the rest at this time; 0: not ending */
    int killed;
    int n_stopped;     /* ranks that exited with CT_LAUNCHER_EXIT_STOPPED */
    double stop_deadline; /* end the others at this time unless they exited by then; 0: none */
    int stopped_by;    /* SIGINT or SIGTERM received (forwarded unless from the terminal), 0 */
    int from_terminal; /* stopped_by came from the terminal, which signalled the ranks itself */
    sigset_t forward;  /* what is passed on to the ranks */
    int last_sig;      /* the last signal passed on, its sender and when */
    pid_t last_from;
    double last_at;
    struct pollfd *pfd;  /* the signalfd, the relay pipe, then up to 3 descriptors per rank */
    int *who;          /* for pfd[i]: rank * 3 + (0 stdout, 1 stderr, 2 report) */
};

int ct_proc_supervisor_report(int fd, int rc, const ct_error *err, const void *result, size_t size)
{
    struct report_hdr h;

    memset(&h, 0, sizeof(h));
    h.rc = rc;
    h.result_len = result ? (uint32_t)size : 0;
    if (err)
        h.err = *err;
    if (ct_write_all(fd, &h, sizeof(h)) != 0)
        return CT_EIO;
    if (h.result_len && ct_write_all(fd, result, h.result_len) != 0)
        return CT_EIO;
    return 0;
}

static const char *sig_name(int sig, char *buf, size_t size)
{
    const char *abbrev = sigabbrev_np(sig);

    if (abbrev)
        snprintf(buf, size, "SIG%s", abbrev);
    else
        snprintf(buf, size, "signal %d", sig);
    return buf;
}

/* ---------------------------------------------------------------- output and reports */

static void emit_line(const struct sv *sv, int r, struct stream *s, size_t len, int newline)
{
    char prefix[32];
    int n = snprintf(prefix, sizeof(prefix), "[rank %d] ", r);

    /* Best effort: a closed terminal must not stop the supervision. */
    if (ct_write_all(s->to, prefix, (size_t)n) == 0 && ct_write_all(s->to, s->buf, len) == 0 && newline)
        ct_write_all(s->to, "\n", 1);
}

/* Pass complete lines on with their prefix; keep a partial line for the next read. */
static void stream_lines(const struct sv *sv, int r, struct stream *s, int at_eof)
{
    char *nl;

    while ((nl = memchr(s->buf, '\n', s->len)) != NULL) {
        size_t len = (size_t)(nl - s->buf) + 1;
        emit_line(sv, r, s, len, 0);
        memmove(s->buf, s->buf + len, s->len - len);
        s->len -= len;
    }
    if (s->len && (at_eof || s->len == sizeof(s->buf))) {
        emit_line(sv, r, s, s->len, 1);
        s->len = 0;
    }
}

/* Read what is there; close at end-of-file. */
static void stream_pump(const struct sv *sv, int r, struct stream *s)
{
    for (;;) {
        ssize_t got = read(s->fd, s->buf + s->len, sizeof(s->buf) - s->len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got > 0) {
            s->len += (size_t)got;
            stream_lines(sv, r, s, 0);
            continue;
        }
        if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            stream_lines(sv, r, s, 1);
            close(s->fd);
            s->fd = -1;
        }
        return;
    }
}

static void report_pump(struct rank *rk)
{
    char sink[4096];

    for (;;) {
        char *dst = rk->rep_len < rk->rep_cap ? rk->rep + rk->rep_len : sink;
        size_t room = rk->rep_len < rk->rep_cap ? rk->rep_cap - rk->rep_len : sizeof(sink);
        ssize_t got = read(rk->rep_fd, dst, room);
        if (got < 0 && errno == EINTR)
            continue;
        if (got > 0) {
            if (dst != sink)
                rk->rep_len += (size_t)got;
            continue;
        }
        if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            close(rk->rep_fd);
            rk->rep_fd = -1;
        }
        return;
    }
}

static const struct report_hdr *rank_report(const struct rank *rk)
{
    return rk->rep_len >= sizeof(struct report_hdr) ? (const struct report_hdr *)rk->rep : NULL;
}

/* ---------------------------------------------------------------- ranks */

/* Each rank leads its own process group (child_setup), so ending a rank ends what it started. */
static void signal_running(struct sv *sv, int sig)
{
    for (int r = 0; r < sv->n; r++)
        if (sv->ranks[r].running)
            kill(-sv->ranks[r].pid, sig);
}

/* Pass a signal on, tagged so the rank can tell it from a copy the sender gave the whole group. */
static void forward_running(struct sv *sv, int sig)
{
    union sigval v = { .sival_int = CT_LAUNCHER_FORWARD_TAG };

    for (int r = 0; r < sv->n; r++)
        if (sv->ranks[r].running)
            sigqueue(sv->ranks[r].pid, sig, v);
}

/* What the terminal sends (Ctrl-C, Ctrl-\, hang-up) reaches the whole foreground process group:
 * the supervisor's, not the ranks' (each leads its own), so it is passed on like any other, but
 * never taken for a repeat of the one before (a second Ctrl-C is a second request). */
static int from_terminal(const struct signalfd_siginfo *si)
{
    int sig = (int)si->ssi_signo;

    return si->ssi_code == SI_KERNEL && (sig == SIGINT || sig == SIGQUIT || sig == SIGHUP);
}

/* Whether the process is stopped by a signal (SIGSTOP, SIGTSTP: state T in /proc/PID/stat). */
static int is_stopped(pid_t pid)
{
    char path[64], buf[512], *close_paren;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "r")))
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "PID (COMM) STATE ...": COMM may hold spaces and parentheses, so the last ')' ends it. */
    close_paren = strrchr(buf, ')');
    return close_paren && close_paren[1] == ' ' && close_paren[2] == 'T';
}

/* First failure: ask the others to stop now, kill them when the grace period is over. A rank that
 * is stopped (SIGSTOP: the usual cause of a collective timeout) cannot act on SIGTERM before the
 * grace period ends, so it is killed at once: the job ends within --collective-timeout + 10 s. */
static void begin_ending(struct sv *sv)
{
    if (sv->kill_at > 0)
        return;
    for (int r = 0; r < sv->n; r++)
        if (sv->ranks[r].running && is_stopped(sv->ranks[r].pid))
            kill(-sv->ranks[r].pid, SIGKILL);
    signal_running(sv, SIGTERM);
    sv->kill_at = ct_time_now() + sv->grace;
}

/* The PMIx server, if it has ended (it is stopped only after the ranks): its status kept. */
static void reap_server(struct sv *sv)
{
    int st;

    if (sv->server_pid > 0 && !sv->server_dead && waitpid(sv->server_pid, &st, WNOHANG) == sv->server_pid) {
        sv->server_dead = 1;
        sv->server_status = st;
        ct_pmix_server_reaped(sv->server, st);
        if (sv->running)
            begin_ending(sv);   /* the ranks cannot go on without their server */
    }
}

static void reap(struct sv *sv)
{
    int st;

    for (int r = 0; r < sv->n; r++) {
        struct rank *rk = &sv->ranks[r];
        pid_t got;

        if (!rk->running)
            continue;
        got = waitpid(rk->pid, &st, WNOHANG);
        if (got == 0 || (got < 0 && errno != ECHILD))
            continue;
        if (got < 0)
            st = STATUS_LOST;   /* someone else reaped it: we cannot say it succeeded */
        rk->running = 0;
        rk->status = st;
        sv->running--;
        /* What the rank started and left behind goes with it (its group outlives it only through
         * its members, so the id is not reused while one remains). */
        kill(-rk->pid, SIGKILL);
        /* A rank that stopped on request after saving its state is not a failure: the others are
         * stopping at the same step and must not be cut short while they finish. */
        if (WIFEXITED(st) && WEXITSTATUS(st) == CT_LAUNCHER_EXIT_STOPPED) {
            if (sv->n_stopped++ == 0)
                sv->stop_deadline = ct_time_now() + STOPPED_WAIT_S;
            continue;
        }
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && sv->failed < 0) {
            sv->failed = r;
            begin_ending(sv);
        }
    }
    reap_server(sv);
}

static void handle_signal(struct sv *sv, const struct signalfd_siginfo *si)
{
    int sig = (int)si->ssi_signo;

    if (sig == SIGCHLD)
        return;   /* reap() runs after every wake-up */
    if (from_terminal(si)) {
        forward_running(sv, sig);
        if (sig == SIGINT) {
            sv->stopped_by = sig;
            sv->from_terminal = 1;
        }
        return;
    }
    if (sig == sv->last_sig && (pid_t)si->ssi_pid == sv->last_from && ct_time_now() - sv->last_at < REPEAT_WINDOW_S)
        return;
    sv->last_sig = sig;
    sv->last_from = (pid_t)si->ssi_pid;
    sv->last_at = ct_time_now();
    forward_running(sv, sig);
    if (sig == SIGINT || sig == SIGTERM) {
        sv->stopped_by = sig;
        sv->from_terminal = 0;
    }
}

/* What the signalfd (this thread) and the handler (other threads) received. */
static void handle_signals(struct sv *sv)
{
    struct signalfd_siginfo si;

    while (sv->sfd >= 0 && read(sv->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        handle_signal(sv, &si);
    while (sv->relay[0] >= 0 && read(sv->relay[0], &si, sizeof(si)) == (ssize_t)sizeof(si))
        handle_signal(sv, &si);
}

/* In the child, before rank_main: die with the supervisor, own descriptors only, signals as the
 * caller had them, CTRAIN_LAUNCHER_* set. */
static void child_setup(struct sv *sv, int r, int out_w, int err_w, int rep_r)
{
    char buf[16];

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != sv->self)
        _exit(1);
    setpgid(0, 0);
    /* The caller's handlers back before anything else: the relay is the supervisor's. */
    for (int sig = 1; sig < NSIG; sig++)
        if (sv->relayed && (sig == SIGCHLD || sigismember(&sv->forward, sig) == 1))
            sigaction(sig, &sv->old_act[sig], NULL);
    close(sv->sfd);
    close(sv->relay[0]);
    close(sv->relay[1]);
    close(rep_r);
    for (int j = 0; j < r; j++) {
        for (int k = 0; k < 2; k++)
            if (sv->ranks[j].out[k].fd >= 0)
                close(sv->ranks[j].out[k].fd);
        if (sv->ranks[j].rep_fd >= 0)
            close(sv->ranks[j].rep_fd);
    }
    ct_pmix_server_detach(sv->server);
    if (r > 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0)
            dup2(null, 0);
        dup2(out_w >= 0 ? out_w : null, 1);
        dup2(err_w >= 0 ? err_w : null, 2);
        if (null > 2)
            close(null);
    }
    snprintf(buf, sizeof(buf), "%d", r);
    setenv(CT_LAUNCHER_ENV_RANK, buf, 1);
    snprintf(buf, sizeof(buf), "%d", sv->n);
    setenv(CT_LAUNCHER_ENV_NPROC, buf, 1);
    sigprocmask(SIG_SETMASK, &sv->old_mask, NULL);
}

static void close_pair(int p[2])
{
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0)
            close(p[i]);
}

static int spawn_rank(struct sv *sv, int r, ct_rank_main_fn rank_main, void *arg, ct_error *err)
{
    struct rank *rk = &sv->ranks[r];
    int out[2] = { -1, -1 }, errp[2] = { -1, -1 }, rep[2] = { -1, -1 };
    int piped = r > 0 && !sv->spec->quiet_others;
    struct ct_rank_ctx ctx = { .rank = r, .nprocs = sv->n, .server = sv->server, .arg = arg };

    if (pipe2(rep, O_CLOEXEC) || (piped && (pipe2(out, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)))) {
        close_pair(rep);
        close_pair(out);
        return ct_error_set(err, CT_EIO, "launch-pipe", "pipe for rank %d: %s", r,
                            strerror(errno));
    }
    rk->pid = fork();
    if (rk->pid < 0) {
        close_pair(rep);
        close_pair(out);
        close_pair(errp);
        return ct_error_set(err, CT_EIO, "launch-fork", "fork of rank %d of %d: %s", r, sv->n,
                            strerror(errno)),
               ct_error_hint(err, "the machine may be out of processes or memory (ulimit -u)");
    }
    if (rk->pid == 0) {
        close_pair((int[2]){ out[0], errp[0] });
        child_setup(sv, r, out[1], errp[1], rep[0]);
        ctx.report_fd = rep[1];
        rank_main(&ctx);
        _exit(127);
    }
    setpgid(rk->pid, rk->pid);   /* also here: signal_running may come before the child ran */
    rk->running = 1;
    sv->running++;
    close(rep[1]);
    rk->rep_fd = rep[0];
    fcntl(rk->rep_fd, F_SETFL, O_NONBLOCK);
    if (piped) {
        close(out[1]);
        close(errp[1]);
        rk->out[0].fd = out[0];
        rk->out[1].fd = errp[0];
        fcntl(out[0], F_SETFL, O_NONBLOCK);
        fcntl(errp[0], F_SETFL, O_NONBLOCK);
    }
    return 0;
}

/* ---------------------------------------------------------------- the loop */

static int poll_timeout_ms(const struct sv *sv)
{
    double left;

    if (sv->kill_at <= 0 || sv->killed)
        return 1000;
    left = sv->kill_at - ct_time_now();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

static void watch(struct sv *sv)
{
    struct pollfd *pfd = sv->pfd;
    int *who = sv->who;

    while (sv->running > 0) {
        size_t np = 2;
        pfd[0] = (struct pollfd){ .fd = sv->sfd, .events = POLLIN };
        pfd[1] = (struct pollfd){ .fd = sv->relay[0], .events = POLLIN };
        for (int r = 0; r < sv->n; r++) {
            struct rank *rk = &sv->ranks[r];
            int fds[3] = { rk->out[0].fd, rk->out[1].fd, rk->rep_fd };
            for (int k = 0; k < 3; k++)
                if (fds[k] >= 0) {
                    pfd[np] = (struct pollfd){ .fd = fds[k], .events = POLLIN };
                    who[np++] = r * 3 + k;
                }
        }
        /* Never leave with ranks running: on a poll failure wait a little and go on. */
        if (poll(pfd, np, poll_timeout_ms(sv)) < 0 && errno != EINTR)
            usleep(100000);
        handle_signals(sv);
        reap(sv);
        for (size_t i = 2; i < np; i++) {
            struct rank *rk = &sv->ranks[who[i] / 3];
            int k = who[i] % 3;
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (k < 2)
                stream_pump(sv, who[i] / 3, &rk->out[k]);
            else
                report_pump(rk);
        }
        /* A rank that did not follow the stopped ones in time is stuck: end it like a failure. */
        if (sv->stop_deadline > 0 && sv->kill_at <= 0 && sv->running > 0 && ct_time_now() >= sv->stop_deadline)
            begin_ending(sv);
        if (sv->kill_at > 0 && !sv->killed && ct_time_now() >= sv->kill_at) {
            signal_running(sv, SIGKILL);
            sv->killed = 1;
        }
    }
}

/* After the last rank: what is still in the pipes, then close (a grandchild may hold them). */
static void drain(struct sv *sv)
{
    for (int r = 0; r < sv->n; r++) {
        struct rank *rk = &sv->ranks[r];
        for (int k = 0; k < 2; k++)
            if (rk->out[k].fd >= 0) {
                stream_pump(sv, r, &rk->out[k]);
                if (rk->out[k].fd >= 0) {
                    stream_lines(sv, r, &rk->out[k], 1);
                    close(rk->out[k].fd);
                    rk->out[k].fd = -1;
                }
            }
        if (rk->rep_fd >= 0) {
            report_pump(rk);
            if (rk->rep_fd >= 0)
                close(rk->rep_fd);
            rk->rep_fd = -1;
        }
    }
}

/* ---------------------------------------------------------------- outcome */

/* The PMIx server is stopped only after the ranks: one that ended before is why a rank could not
 * start (MPI_Init's PMIx connection), and the rank's own words do not say so. */
static void server_note(const struct sv *sv, char *buf, size_t size)
{
    char sig[32];

    buf[0] = '\0';
    if (!sv->server_dead)
        return;
    if (WIFSIGNALED(sv->server_status))
        snprintf(buf, size, "; the PMIx server process (pid %ld) had been killed by signal %s",
                 (long)sv->server_pid, sig_name(WTERMSIG(sv->server_status), sig, sizeof(sig)));
    else
        snprintf(buf, size, "; the PMIx server process (pid %ld) had exited with status %d",
                 (long)sv->server_pid, WEXITSTATUS(sv->server_status));
}

/* The hint of a failure that came after the server's end (server_note). */
static int server_hint(const struct sv *sv, ct_error *err)
{
    return ct_error_hint(err, "the ranks reach each other through that server: without it MPI_Init fails "
                              "('Unreachable') and PMIx calls after it (PMIX_ERR_UNREACH); rank %d's output above "
                              "says more", sv->failed);
}

static int describe_failure(const struct sv *sv, ct_error *err)
{
    const struct rank *rk = &sv->ranks[sv->failed];
    const struct report_hdr *h = rank_report(rk);
    int st = rk->status;
    int code = sv->stopped_by ? CT_EINTR : CT_ECOMM;
    char how[128], sig[32], after[96] = "", server[128];

    if (sv->stopped_by)
        snprintf(after, sizeof(after), sv->from_terminal ? " after %s from the terminal" :
                 " after ctrain forwarded %s", sig_name(sv->stopped_by, sig, sizeof(sig)));
    if (h && h->rc == CT_EINTR && h->err.msg[0]) {
        /* The rank stopped on request and said why (a signal, a checkpoint written): pass it on as
         * it is, id included, so the caller can tell a stopped run from a failed one. */
        ct_error_set(err, h->rc, h->err.id, "%s", h->err.msg);
        ct_error_outcome(err, h->err.outcome);
        return h->err.hint[0] ? ct_error_hint(err, "%s", h->err.hint) : err->code;
    }
    server_note(sv, server, sizeof(server));
    if (h && h->rc != 0) {
        /* its own words, and the server's end where that came first (a rank past MPI_Init fails in
         * its next PMIx call: PMIX_ERR_UNREACH) */
        ct_error_set(err, h->rc, h->err.id, "rank %d of %d failed%s: %s%s", sv->failed, sv->n, after,
                     h->err.msg[0] ? h->err.msg : ct_error_code_name(h->rc), server);
        ct_error_outcome(err, h->err.outcome);
        if (server[0])
            return server_hint(sv, err);
        return h->err.hint[0] ? ct_error_hint(err, "%s", h->err.hint) : err->code;
    }
    if (sv->spec->fit_statuses && st != STATUS_LOST && WIFEXITED(st) && WEXITSTATUS(st) == CT_LAUNCHER_EXIT_NONFINITE) {
        ct_error_set(err, CT_EFORMAT, "fit-loss-nonfinite", "rank %d's training loss is not finite: the run stopped "
                     "without saving after the last good checkpoint", sv->failed);
        ct_error_outcome(err, CT_OUTCOME_NONFINITE);
        return ct_error_hint(err, "rank %d's output above says where; lower --lr or add --gradient-clip-val",
                             sv->failed);
    }
    if (st == STATUS_LOST)
        snprintf(how, sizeof(how), "ended, but its exit status was collected elsewhere in this "
                 "process");
    else if (WIFSIGNALED(st))
        snprintf(how, sizeof(how), "was killed by signal %s", sig_name(WTERMSIG(st), sig, sizeof(sig)));
    else
        snprintf(how, sizeof(how), "exited with status %d", WEXITSTATUS(st));
    ct_error_set(err, code, "rank-failed", "rank %d %s (pid %ld)%s; the other %d rank%s %s stopped%s",
                 sv->failed, how, (long)rk->pid, after, sv->n - 1, sv->n == 2 ? "" : "s",
                 sv->n == 2 ? "was" : "were", server);
    if (server[0])
        return server_hint(sv, err);
    return ct_error_hint(err, "rank %d's output above says why; rank 0 writes as is, the others "
                              "with a '[rank N]' prefix", sv->failed);
}

static int outcome(struct sv *sv, void *result, size_t result_size, ct_error *err)
{
    const struct report_hdr *h;
    size_t n;

    reap_server(sv); /* a server killed just before the ranks failed: not yet reaped by the watch */
    if (sv->failed >= 0)
        return describe_failure(sv, err);
    if (sv->server_dead && sv->kill_at > 0)
        return ct_error_set(err, CT_ECOMM, "pmix-server-died", "the PMIx server process (pid %ld) "
                            "ended while the ranks ran (wait status 0x%x)", (long)sv->server_pid,
                            sv->server_status);
    h = rank_report(&sv->ranks[0]);
    if (sv->n_stopped > 0) {
        if (h && h->rc == CT_EINTR && h->err.msg[0]) {
            ct_error_set(err, h->rc, h->err.id, "%s", h->err.msg);
            ct_error_outcome(err, h->err.outcome);
            return h->err.hint[0] ? ct_error_hint(err, "%s", h->err.hint) : err->code;
        }
        ct_error_set(err, CT_EINTR, "launch-stopped", "%d of %d rank%s stopped on request after saving their state "
                     "(exit status %d)", sv->n_stopped, sv->n, sv->n == 1 ? "" : "s", CT_LAUNCHER_EXIT_STOPPED);
        ct_error_outcome(err, CT_OUTCOME_STOPPED);
        return ct_error_hint(err, "rank 0's message above says where and how to continue");
    }
    if (h && result && result_size) {
        n = h->result_len < result_size ? h->result_len : result_size;
        if (sv->ranks[0].rep_len < sizeof(*h) + n)
            return ct_error_set(err, CT_ECOMM, "launch-result", "rank 0's result arrived "
                                "truncated (%zu of %zu bytes)", sv->ranks[0].rep_len - sizeof(*h), n);
        memcpy(result, sv->ranks[0].rep + sizeof(*h), n);
    }
    return 0;
}

/* ---------------------------------------------------------------- entry */

/* SIGINT, SIGTERM and the spec's list (default SIGUSR1) into sv->forward. */
static int forward_set(struct sv *sv, ct_error *err)
{
    const int *list = sv->spec->forward_signals;

    sigemptyset(&sv->forward);
    sigaddset(&sv->forward, SIGINT);
    sigaddset(&sv->forward, SIGTERM);
    if (!list[0])
        sigaddset(&sv->forward, SIGUSR1);
    for (int i = 0; i < CT_LAUNCH_MAX_SIGNALS && list[i]; i++) {
        int sig = list[i];

        if (sig < 1 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD)
            return ct_error_set(err, CT_EINVAL, "launch-signals", "signal %d cannot be forwarded to the ranks",
                                sig);
        sigaddset(&sv->forward, sig);
    }
    return 0;
}

static int sv_init(struct sv *sv, const ct_launch_spec *spec, size_t result_size, ct_error *err)
{
    int rc;

    memset(sv, 0, sizeof(*sv));
    sv->spec = spec;
    sv->n = spec->nprocs;
    sv->failed = -1;
    sv->sfd = -1;
    sv->relay[0] = sv->relay[1] = -1;
    sv->self = getpid();
    sv->grace = spec->kill_grace_s > 0 ? spec->kill_grace_s : DEFAULT_GRACE_S;
    if (sv->grace > MAX_GRACE_S)
        sv->grace = MAX_GRACE_S;
    if (sv->n < 1 || sv->n > 4096)
        return ct_error_set(err, CT_EINVAL, "launch-nprocs", "cannot launch %d processes: the "
                            "count must be 1..4096", sv->n);
    if ((rc = forward_set(sv, err)))
        return rc;
    sv->ranks = calloc((size_t)sv->n, sizeof(*sv->ranks));
    sv->pfd = calloc(2 + 3 * (size_t)sv->n, sizeof(*sv->pfd));
    sv->who = calloc(2 + 3 * (size_t)sv->n, sizeof(*sv->who));
    if (!sv->ranks || !sv->pfd || !sv->who)
        return ct_error_set(err, CT_ENOMEM, "oom", "out of memory for %d ranks", sv->n);
    for (int r = 0; r < sv->n; r++) {
        struct rank *rk = &sv->ranks[r];
        rk->out[0] = (struct stream){ .fd = -1, .to = 1 };
        rk->out[1] = (struct stream){ .fd = -1, .to = 2 };
        rk->rep_fd = -1;
        rk->rep_cap = sizeof(struct report_hdr) + (r == 0 ? result_size : 0);
        if (!(rk->rep = malloc(rk->rep_cap)))
            return ct_error_set(err, CT_ENOMEM, "oom", "out of memory for rank %d's report", r);
    }
    return 0;
}

/* The write end of the running supervisor's relay pipe, for the handler. */
static volatile sig_atomic_t relay_fd = -1;

/* A supervised signal delivered to another thread: its siginfo, as signalfd gives it, to the loop.
 * A pipe write of less than PIPE_BUF bytes is atomic; a full pipe drops it (the loop is behind by
 * thousands of signals then, and SIGCHLD is coalesced anyway). */
static void relay(int sig, siginfo_t *info, void *uc)
{
    int saved = errno, fd = relay_fd;
    struct signalfd_siginfo si;

    memset(&si, 0, sizeof(si));
    si.ssi_signo = (uint32_t)sig;
    si.ssi_code = info->si_code;
    si.ssi_pid = (uint32_t)info->si_pid;
    si.ssi_uid = (uint32_t)info->si_uid;
    if (fd >= 0 && write(fd, &si, sizeof(si)) < 0) {
        /* nothing to do in a handler */
    }
    errno = saved;
}

static int block_signals(struct sv *sv, ct_error *err)
{
    sigset_t set = sv->forward;
    struct sigaction act;

    sigaddset(&set, SIGCHLD);
    if (pipe2(sv->relay, O_CLOEXEC | O_NONBLOCK) != 0)
        return ct_error_set(err, CT_EIO, "launch-signals", "pipe: %s", strerror(errno));
    relay_fd = sv->relay[1];
    /* The handler also replaces an ignored SIGCHLD, which would let the kernel reap the ranks
     * before we learn how they ended. */
    memset(&act, 0, sizeof(act));
    act.sa_sigaction = relay;
    act.sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP;
    sigfillset(&act.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&set, sig) == 1)
            sigaction(sig, &act, &sv->old_act[sig]);
    sv->relayed = 1;
    if (sigprocmask(SIG_BLOCK, &set, &sv->old_mask) != 0)
        return ct_error_set(err, CT_EINTERNAL, "launch-signals", "sigprocmask: %s", strerror(errno));
    sv->masked = 1;
    sv->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sv->sfd < 0)
        return ct_error_set(err, CT_EINTERNAL, "launch-signals", "signalfd: %s", strerror(errno));
    return 0;
}

/* The caller's handlers and mask back, after consuming what arrived for us, so the caller does
 * not get it late. */
static void unblock_signals(struct sv *sv)
{
    for (int sig = 1; sv->relayed && sig < NSIG; sig++)
        if (sig == SIGCHLD || sigismember(&sv->forward, sig) == 1)
            sigaction(sig, &sv->old_act[sig], NULL);
    sv->relayed = 0;
    relay_fd = -1;
    handle_signals(sv);
    if (sv->masked)
        sigprocmask(SIG_SETMASK, &sv->old_mask, NULL);
    sv->masked = 0;
}

static void sv_free(struct sv *sv)
{
    for (int r = 0; sv->ranks && r < sv->n; r++)
        free(sv->ranks[r].rep);
    free(sv->ranks);
    free(sv->pfd);
    free(sv->who);
    if (sv->sfd >= 0)
        close(sv->sfd);
    for (int i = 0; i < 2; i++)
        if (sv->relay[i] >= 0)
            close(sv->relay[i]);
}

int ct_proc_supervisor_run(const ct_launch_spec *spec, ct_rank_main_fn rank_main, void *arg,
                      void *result, size_t result_size, ct_error *err)
{
    struct sv sv;
    int rc = sv_init(&sv, spec, result_size, err);
    int masked = 0;

    if (rc)
        goto out;
    rc = block_signals(&sv, err);
    masked = 1;
    if (rc)
        goto out;
    rc = ct_pmix_server_start(sv.n, &sv.server, err);
    if (rc)
        goto out;
    sv.server_pid = ct_pmix_server_pid(sv.server);
    fflush(NULL);   /* nothing buffered is written again by each rank */
    for (int r = 0; r < sv.n && rc == 0; r++)
        rc = spawn_rank(&sv, r, rank_main, arg, err);
    if (rc)
        begin_ending(&sv);
    watch(&sv);
    drain(&sv);
    if (rc == 0)
        rc = outcome(&sv, result, result_size, err);
out:
    ct_pmix_server_stop(sv.server);
    if (masked)
        unblock_signals(&sv);
    sv_free(&sv);
    return rc;
}
