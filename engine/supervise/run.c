/* SPDX-License-Identifier: BSD-3-Clause */
/* ct_supervise_run: the job's sizes, the signals, the first check of the nodes, the restarts
 * (loop.c), and what is left of the steps ended. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/supervise/internal.h"


/* T from SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE ("2(x3)": the first node's count), else 1. */
static long env_tasks_per_node(void)
{
    const char *v = getenv("SLURM_NTASKS_PER_NODE");
    long t;

    if (!v || !*v)
        v = getenv("SLURM_TASKS_PER_NODE");
    if (v && *v) {
        char num[16];
        size_t n = strspn(v, "0123456789");

        if (n > 0 && n < sizeof(num)) {
            memcpy(num, v, n);
            num[n] = '\0';
            if (ct_parse_long(num, 1, 100000, &t) == 0)
                return t;
        }
    }
    return 1;
}

static int sizes(struct ct_sv *s, ct_error *err)
{
    long n = (long)ct_hostlist_count(s->alloc);

    if (!s->o.tasks_per_node)
        s->o.tasks_per_node = env_tasks_per_node();
    s->nodes = n - s->o.spares;
    if (s->nodes < 1) {
        ct_error_set(err, CT_EINVAL, "supervise-spares",
                     "supervise: --spare-nodes %ld leaves no node for the step (the job has %ld)", s->o.spares, n);
        return ct_error_hint(err, "ask sbatch for more nodes (-N %ld) or fewer spares", s->o.spares + 1);
    }
    return 0;
}

/* Signals are read from a signalfd in the step's poll loop: no handler, no race with srun's exit.
 * srun gets an unblocked mask (step.c's spawn). */
static int signals(struct ct_sv *s, ct_error *err)
{
    static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD };
    sigset_t set;

    sigemptyset(&set);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaddset(&set, sigs[i]);
    sigprocmask(SIG_BLOCK, &set, NULL);
    s->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (s->sigfd < 0)
        return ct_error_set(err, CT_EIO, NULL, "supervise: signalfd: %s", strerror(errno));
    return 0;
}

static void release(struct ct_sv *s)
{
    if (s->sigfd >= 0)
        close(s->sigfd);
    ct_hostlist_free(s->alloc);
    ct_hostlist_free(s->bad);
    ct_hostlist_free(s->named);
    ct_hostlist_free(s->weak);
}

int ct_supervise_run(const ct_supervise_opts *o, ct_error *err)
{
    struct ct_sv s = { .o = *o, .sigfd = -1 };
    int rc;

    snprintf(s.hang_dir, sizeof(s.hang_dir), "%s/hang", o->root_dir);
    if (ct_sv_job_setup(&s, err) || sizes(&s, err))
        goto fail;
    s.bad = ct_hostlist_new();
    s.named = ct_hostlist_new();
    s.weak = ct_hostlist_new();
    if (!s.bad || !s.named || !s.weak) {
        ct_error_set(err, CT_ENOMEM, NULL, "supervise: out of memory");
        goto fail;
    }
    if (signals(&s, err))
        goto fail;
    ct_sv_warn_no_kill(&s);
    ct_sv_slurm_nodes(&s); /* nodes already failed before the first step */
    for (size_t i = 0; i < ct_hostlist_count(s.named); i++)
        ct_hostlist_push(s.bad, ct_hostlist_get(s.named, i), err);
    ct_error_clear(err);
    rc = ct_sv_loop(&s);
    ct_sv_signal_steps(&s, SIGKILL);
    release(&s);
    return rc;
fail:
    release(&s);
    return -1;
}
