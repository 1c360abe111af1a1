/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — Launchers: how the processes of a run come to exist.
 *
 * Separate from strategies: one DDP strategy runs under every launcher.
 *   external   — processes already started by srun / mpirun / jsrun / torchrun: run the body here.
 *   subprocess — this process becomes supervisor and PMIx server and fork+execs nprocs copies of
 *                its own command line (/proc/self/exe with /proc/self/cmdline) as ranks 0..n-1.
 *   fork       — (ddp_fork, alias ddp_spawn) forks nprocs workers at the call; each runs the body;
 *                rank 0's result buffer comes back to the caller through a pipe.
 * Supervisors forward SIGINT, SIGTERM and the spec's forward_signals (default SIGUSR1) to every
 * rank, tagged (see CT_LAUNCHER_FORWARD_TAG) and never what the terminal sent to the whole
 * foreground process group, ranks included; when a rank dies or exits
 * non-zero the others are ended within kill_grace_s, the failing rank and how it failed are
 * reported in err, and launch returns non-zero. No orphans. Rank 0's output passes as is, the
 * others' lines are prefixed "[rank N] " (or dropped with quiet_others).
 */
#ifndef CTRAIN_LAUNCHER_H
#define CTRAIN_LAUNCHER_H

#include <stddef.h>

#include "ctrain/error.h"

#define CT_LAUNCH_MAX_SIGNALS 8

typedef struct ct_launch_spec {
    int nprocs;           /* ranks to create on this node */
    int quiet_others;     /* 1: drop the output of ranks other than 0 */
    double kill_grace_s;  /* after a failure, SIGTERM then SIGKILL the rest within this (<= 10) */
    /* Signals forwarded to every rank besides SIGINT and SIGTERM, 0-terminated; none given:
     * SIGUSR1. ctrain fit puts its --requeue-signal here. SIGKILL, SIGSTOP and SIGCHLD are refused. */
    int forward_signals[CT_LAUNCH_MAX_SIGNALS];
    /* 1: the ranks are ctrain fit's, whose exit status CT_LAUNCHER_EXIT_NONFINITE means its training
     * loss became non-finite (a rank the subprocess launcher execs can say so only by its status);
     * 0: any status but CT_LAUNCHER_EXIT_STOPPED is a failure, reported with its number. */
    int fit_statuses;
} ct_launch_spec;

/* The work of one rank. result: a buffer of result_size bytes the body may fill. */
typedef int (*ct_launch_body)(void *arg, void *result, size_t result_size, ct_error *err);

/* Registered under its descriptor's name (engine/registry/launcher_NAME.c). */
struct ct_launcher_ops {
    /* Create the ranks and run body in each (external: in this process, once). result is rank
     * 0's when it returns to the caller (external, fork); subprocess's supervisor, which runs no
     * body, leaves it as it was. */
    int (*launch)(const ct_launch_spec *spec, ct_launch_body body, void *arg,
                  void *result, size_t result_size, ct_error *err);
};

/* The launchers (engine/launchers/<name>.c). */
extern const struct ct_launcher_ops ct_launcher_external;
extern const struct ct_launcher_ops ct_launcher_subprocess;
extern const struct ct_launcher_ops ct_launcher_fork;

/* The ends of the lines a check writes when it ends a step over a bad node: one definition for the
 * writers and the reader.
 *   the plugin's preflight:  "ctrain: preflight: node HOST: WHY" CT_LINE_PREFLIGHT_STOPS (read by
 *                            `ctrain supervise`: the plugin has no run directory to write a record in)
 *   fit's straggler check:   "ctrain: warning: straggler: node HOST (rank R) ..." CT_LINE_STRAGGLER_STOPS "stop)"
 *                            (for people: `ctrain supervise` reads the event record the check writes,
 *                            engine/events/event.h) */
#define CT_LINE_PREFLIGHT_STOPS "; the step ends before its programs start"
#define CT_LINE_STRAGGLER_STOPS "; stopping (--on-straggler "

/* Exit status of a rank that stopped on request (a signal) after saving its state, e.g. ctrain fit
 * after a preemption signal: supervisors do not treat it as a failure that ends the other ranks,
 * and launch returns CT_EINTR (err->id "launch-stopped", or the rank's own id when it reported). */
#define CT_LAUNCHER_EXIT_STOPPED 75   /* EX_TEMPFAIL of sysexits.h: "try again later" */
/* A rank of ctrain fit whose training loss became non-finite exits 3; with the spec's fit_statuses
 * the supervisor says so with the id "fit-loss-nonfinite", and ctrain fit exits 3 too. */
#define CT_LAUNCHER_EXIT_NONFINITE 3
/* ctrain fit stopped by --on-straggler stop|exclude after saving last.safetensors: a node named
 * slow, which ctrain supervise keeps out of the next step. */
#define CT_LAUNCHER_EXIT_STRAGGLER 76

/* A signal the supervisor forwards arrives in the rank with si_code SI_QUEUE and this si_value
 * (sigqueue), so the rank can tell it from a copy sent to the whole process group (kill -- -PGID,
 * timeout, scancel --full): the two copies of one group signal are one request, not two. */
#define CT_LAUNCHER_FORWARD_TAG 0x63747266   /* "ctrf" */

/* Set in every rank a ctrain launcher created, so the child knows it is a rank (and which). */
#define CT_LAUNCHER_ENV_RANK  "CTRAIN_LAUNCHER_RANK"
#define CT_LAUNCHER_ENV_NPROC "CTRAIN_LAUNCHER_NPROCS"

#endif
