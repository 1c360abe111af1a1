/* SPDX-License-Identifier: BSD-3-Clause */
/* Catching the stop signals: preemption, a time limit, Ctrl-C (beside the signal connector, which
 * parses --requeue-signal and acts once the ranks stopped).
 *
 * Only a flag is recorded (sig_atomic_t): a step half done must not be checkpointed. The flag lives
 * here, with the code that catches the signals; the loops are handed a read-only view of it in the
 * run (run->signals, ct_stop_flags in engine/run/run.h), so they read it without calling up into
 * the Trainer. At each step boundary the epoch loop asks ct_run_stop_agreed (engine/loops/step.c),
 * a collective: every rank contributes whether it got a signal, so all ranks stop after the same
 * step even when the signal reached them at different moments.
 *
 * No signal handler runs on a thread that computes. oneDNN's JIT GEMM kernels (Debian 12's 2.7,
 * Debian 13's 3.x; oneDNN #4845, fixed upstream by #4855) point rsp into a heap workspace while
 * they run: the kernel builds a handler's frame below rsp, so a signal that lands then writes its
 * frame over the heap (glibc's "corrupted size vs. prev_size" a moment later, in a third to a half
 * of the stopped runs). So the stop signals are blocked in the thread that installs (and so in
 * every thread it starts afterwards: OpenMP's team, MPI's and PMIx's progress threads) and read
 * from a signalfd by one thread of ours that computes nothing. A thread started earlier that
 * leaves them unblocked (a program's own) gets a handler that only records them, as before.
 * `ctrain fit` blocks them from its first instruction (ct_stop_block_early), so a stop during
 * start-up is kept for the first step boundary too, and so are the ranks its launchers start.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "ctrain/launcher.h"
#include "ctrain/util.h"
#include "engine/trainer/trainer_internal.h"

static ct_stop_flags caught;                /* what came (the loops read it: run->signals) */
static int int_direct;                      /* SIGINTs sent to this process (or its group) */
static int int_forwarded;                   /* SIGINTs the launcher's supervisor passed on */
static int dump_signal;                     /* writes the hang record, stops nothing; 0: none */
static const int stop_signals[] = { SIGTERM, SIGINT };
static struct sigaction saved[4];
static int saved_sig[4], n_saved;

/* The thread that reads the blocked stop signals. */
static struct {
    pthread_t thread;
    int running;
    int sfd, wake;          /* the signalfd; an eventfd that ends the thread */
    int poke;               /* an eventfd: a handler on an earlier thread got the dump signal */
    sigset_t set;           /* the stop signals */
    sigset_t old_mask;      /* the installing thread's mask before */
} catcher = { .sfd = -1, .wake = -1, .poke = -1 };

/* A second stop request by SIGINT means "now": the default action, at once. A SIGINT sent to the
 * process group of ctrain's launcher (kill -INT -- -PGID, timeout, scancel --full) reaches a rank
 * twice, from its sender and tagged from the supervisor (CT_LAUNCHER_FORWARD_TAG): that is one
 * request, so the two kinds are counted apart. The counters may be bumped by the catcher thread
 * and by a handler on another thread at once: atomics. */
static int sigint_means_now(int forwarded)
{
    int n = __atomic_add_fetch(forwarded ? &int_forwarded : &int_direct, 1, __ATOMIC_SEQ_CST);

    return n >= 2 || (caught.signal && caught.signal != SIGINT);
}

/* Record one stop signal; 1 when it asks to end the process now (see sigint_means_now). */
static int note_signal(int sig, int forwarded)
{
    if (sig == SIGINT && sig != caught.requeue_signal && sigint_means_now(forwarded))
        return 1;
    if (!caught.signal)
        caught.signal = sig;
    if (sig == caught.requeue_signal)
        caught.requeue = 1;
    return 0;
}

static int is_forwarded(int code, int value)
{
    return code == SI_QUEUE && value == CT_LAUNCHER_FORWARD_TAG;
}

/* For threads that do not block the stop signals (started before ct_stop_install). The dump is
 * not written here (it formats and allocates): the catcher thread is poked to write it. */
static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    if (sig == dump_signal) {
        uint64_t one = 1;
        int saved_errno = errno;

        if (catcher.poke >= 0 && write(catcher.poke, &one, sizeof(one)) < 0) {
            /* the counter is full: a dump is already due */
        }
        errno = saved_errno;
        return;
    }
    if (note_signal(sig, si && is_forwarded(si->si_code, si->si_value.sival_int))) {
        signal(SIGINT, SIG_DFL);
        raise(SIGINT);   /* delivered when the handler returns: this thread does not block it */
    }
}

/* SIGINT's default action from the catcher: the signal is blocked in every thread of ours, so it is
 * raised at this thread with the block lifted. */
static void end_now(void)
{
    sigset_t one;

    signal(SIGINT, SIG_DFL);
    sigemptyset(&one);
    sigaddset(&one, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(SIGINT);
}

static void drain(void)
{
    struct signalfd_siginfo si;

    while (read(catcher.sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        if ((int)si.ssi_signo == dump_signal)
            ct_hang_dump("signal");
        else if (note_signal((int)si.ssi_signo, is_forwarded((int)si.ssi_code, si.ssi_int)))
            end_now();
}

static void *catcher_main(void *arg)
{
    struct pollfd p[3] = { { .fd = catcher.sfd, .events = POLLIN }, { .fd = catcher.wake, .events = POLLIN },
                           { .fd = catcher.poke, .events = POLLIN } };
    uint64_t n;

    (void)arg;
    for (;;) {
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        drain();
        if (p[2].revents && read(catcher.poke, &n, sizeof(n)) == (ssize_t)sizeof(n))
            ct_hang_dump("signal");
        if (p[1].revents)
            break;
    }
    return NULL;
}

static void stop_set(int requeue_sig, sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, requeue_sig);
    for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
        sigaddset(set, stop_signals[i]);
    if (dump_signal)
        sigaddset(set, dump_signal);
}

void ct_stop_set_dump_signal(int sig)
{
    dump_signal = sig;
}

/* Signals a user may choose for --requeue-signal: those SLURM's --signal sends and that end a
 * process by default (so a run without ctrain's handler would be lost, not paused). */
static const int allowed[] = { SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP, SIGXCPU, SIGALRM, SIGQUIT };

int ct_stop_signal_parse(const char *name, int *sig)
{
    const char *n = name;
    long num;

    if (!strncasecmp(n, "SIG", 3))
        n += 3;
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
        const char *abbrev = sigabbrev_np(allowed[i]);

        if ((abbrev && !strcasecmp(n, abbrev)) || (!ct_parse_long(n, 1, 64, &num) && num == allowed[i])) {
            *sig = allowed[i];
            return 0;
        }
    }
    return CT_EINVAL;
}

static int catch_one(int sig, ct_error *err)
{
    struct sigaction sa;

    for (int i = 0; i < n_saved; i++)
        if (saved_sig[i] == sig)
            return 0;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_RESTART | SA_SIGINFO;   /* reads, writes and MPI go on; the loop looks at the flag */
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, &saved[n_saved]))
        return ct_error_set(err, CT_EINTERNAL, "stop-signal", "sigaction(%d) failed", sig);
    saved_sig[n_saved++] = sig;
    return 0;
}

static void restore_handlers(void)
{
    for (int i = 0; i < n_saved; i++)
        sigaction(saved_sig[i], &saved[i], NULL);
    n_saved = 0;
}

static void close_catcher_fds(void)
{
    if (catcher.sfd >= 0)
        close(catcher.sfd);
    if (catcher.wake >= 0)
        close(catcher.wake);
    if (catcher.poke >= 0)
        close(catcher.poke);
    catcher.sfd = catcher.wake = catcher.poke = -1;
}

/* Block the stop signals here (and in the threads started from now on) and start the thread that
 * reads them. */
static int start_catcher(ct_error *err)
{
    int rc;

    if (pthread_sigmask(SIG_BLOCK, &catcher.set, &catcher.old_mask))
        return ct_error_set(err, CT_EINTERNAL, "stop-signal", "pthread_sigmask failed");
    catcher.sfd = signalfd(-1, &catcher.set, SFD_NONBLOCK | SFD_CLOEXEC);
    catcher.wake = eventfd(0, EFD_CLOEXEC);
    catcher.poke = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (catcher.sfd < 0 || catcher.wake < 0 || catcher.poke < 0) {
        ct_error_set(err, CT_EINTERNAL, "stop-signal", "signalfd/eventfd: %s", strerror(errno));
        goto fail;
    }
    if ((rc = pthread_create(&catcher.thread, NULL, catcher_main, NULL))) {
        ct_error_set(err, CT_EINTERNAL, "stop-signal", "the signal thread: %s", strerror(rc));
        goto fail;
    }
    catcher.running = 1;
    return 0;
fail:
    close_catcher_fds();
    pthread_sigmask(SIG_SETMASK, &catcher.old_mask, NULL);
    return err->code;
}

int ct_stop_install(int requeue_sig, const ct_stop_flags **flags, ct_error *err)
{
    int rc;

    caught.signal = 0;
    caught.requeue = 0;
    int_direct = 0;
    int_forwarded = 0;
    caught.requeue_signal = requeue_sig;
    n_saved = 0;
    stop_set(requeue_sig, &catcher.set);
    if ((rc = catch_one(requeue_sig, err)))
        goto fail;
    for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
        if ((rc = catch_one(stop_signals[i], err)))
            goto fail;
    if (dump_signal && (rc = catch_one(dump_signal, err)))
        goto fail;
    if ((rc = start_catcher(err)))
        goto fail;
    *flags = &caught;
    return 0;
fail:
    restore_handlers();
    return rc;
}

/* The catcher reads what came until it is told to end; then the handlers and this thread's mask
 * are what they were (a signal still pending then takes its old disposition). */
void ct_stop_uninstall(void)
{
    uint64_t one = 1;

    if (catcher.running) {
        if (write(catcher.wake, &one, sizeof(one)) != (ssize_t)sizeof(one))
            pthread_cancel(catcher.thread);
        pthread_join(catcher.thread, NULL);
        catcher.running = 0;
        close_catcher_fds();
        restore_handlers();
        pthread_sigmask(SIG_SETMASK, &catcher.old_mask, NULL);
        return;
    }
    restore_handlers();
}

static int blocked_early;

void ct_stop_block_early(void)
{
    sigset_t set;

    blocked_early = 1;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
        sigaddset(&set, allowed[i]);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void ct_stop_keep_blocked(int requeue_sig)
{
    sigset_t set, keep;

    if (!blocked_early)
        return;
    stop_set(requeue_sig, &keep);
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
        if (!sigismember(&keep, allowed[i]))
            sigaddset(&set, allowed[i]);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}
