/* SPDX-License-Identifier: BSD-3-Clause */
/* Stopping on a signal: preemption, a time limit, Ctrl-C.
 *
 * The handler only records which signal came (sig_atomic_t): nothing else is safe inside a
 * handler, and a step half done must not be checkpointed. At each step boundary the epoch loop
 * asks ct_run_stop_agreed, a collective: every rank contributes whether it got a signal, so all
 * ranks stop after the same step even when the signal reached them at different moments.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ctrain/launcher.h"
#include "ctrain/util.h"
#include "engine/loops/loops.h"

static volatile sig_atomic_t got_signal;    /* the first stop signal, 0 when none */
static volatile sig_atomic_t got_requeue;   /* the requeue signal came (first or later) */
static volatile sig_atomic_t int_direct;    /* SIGINTs sent to this process (or its group) */
static volatile sig_atomic_t int_forwarded; /* SIGINTs the launcher's supervisor passed on */
static int requeue_signal;
static const int stop_signals[] = { SIGTERM, SIGINT };
static struct sigaction saved[3];
static int saved_sig[3], n_saved;

/* A second stop request by SIGINT means "now": the default action, at once. A SIGINT sent to the
 * process group of ctrain's launcher (kill -INT -- -PGID, timeout, scancel --full) reaches a rank
 * twice, from its sender and tagged from the supervisor (CT_LAUNCHER_FORWARD_TAG): that is one
 * request, so the two kinds are counted apart. */
static int sigint_means_now(const siginfo_t *si)
{
    int forwarded = si && si->si_code == SI_QUEUE && si->si_value.sival_int == CT_LAUNCHER_FORWARD_TAG;
    int n = forwarded ? ++int_forwarded : ++int_direct;

    return n >= 2 || (got_signal && got_signal != SIGINT);
}

static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    if (sig == SIGINT && sig != requeue_signal && sigint_means_now(si)) {
        signal(SIGINT, SIG_DFL);
        raise(SIGINT);
        return;
    }
    if (!got_signal)
        got_signal = sig;
    if (sig == requeue_signal)
        got_requeue = 1;
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

const char *ct_stop_signal_name(int sig, char *buf, size_t size)
{
    const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;

    if (abbrev)
        snprintf(buf, size, "SIG%s", abbrev);
    else
        snprintf(buf, size, "signal %d", sig);
    return buf;
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

int ct_stop_install(int requeue_sig, ct_error *err)
{
    int rc;

    got_signal = 0;
    got_requeue = 0;
    int_direct = 0;
    int_forwarded = 0;
    requeue_signal = requeue_sig;
    n_saved = 0;
    if ((rc = catch_one(requeue_sig, err)))
        return rc;
    for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
        if ((rc = catch_one(stop_signals[i], err)))
            return rc;
    return 0;
}

void ct_stop_uninstall(void)
{
    for (int i = 0; i < n_saved; i++)
        sigaction(saved_sig[i], &saved[i], NULL);
    n_saved = 0;
}

void ct_run_stop_post(ct_run *run)
{
    run->stop_sums[0] = got_signal ? 1 : 0;
    run->stop_sums[1] = got_requeue ? 1 : 0;
    run->stop_sums[2] = run->loss_bad ? 1 : 0;
    ct_strategy_post_with_grads(run->strategy, run->stop_sums, 3);
    run->stop_posted = 1;
}

/* Two numbers summed over the ranks: [ranks that got a stop signal, ranks that got the requeue
 * signal] (the third posted, non-finite losses, is ct_run_loss_finite's). They ride on the previous step's gradient exchange when it posted them (a separate
 * collective would stop every rank once more per step); else (the first step of an epoch) an
 * allreduce of their own. A signal that comes after the post is seen one step later. */
int ct_run_stop_agreed(ct_run *run, ct_error *err)
{
    double v[2] = { got_signal ? 1 : 0, got_requeue ? 1 : 0 };
    int rc;

    if (run->stop_posted) {
        v[0] = run->stop_sums[0];
        v[1] = run->stop_sums[1];
        run->stop_posted = 0;
    } else if ((rc = ct_strategy_reduce_sum(run->strategy, v, 2, err))) {
        return rc;
    }
    if (v[0] < 0.5)
        return 0;
    run->stop.agreed = 1;
    run->stop.requeue = v[1] > 0.5;
    run->stop.signal = got_signal ? got_signal : (run->stop.requeue ? requeue_signal : 0);
    run->stop.local = got_signal != 0;
    return 1;
}
