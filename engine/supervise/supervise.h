/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — ctrain supervise as a library (engine/supervise): the body of a batch job that keeps a
 * fit training inside its allocation. It runs the fit as a SLURM step (srun) on the job's healthy
 * nodes and, when the step fails, names the failed nodes, excludes them and starts a new step of the
 * same world size on the nodes left (spares included), which resumes from last.safetensors; with too
 * few healthy nodes left it falls back to SLURM's requeue.
 *
 * Not ctrain's own launcher's process supervisor (engine/launchers/proc_supervisor.c, which forks
 * the ranks of one node): this one supervises SLURM steps across the job's nodes.
 *
 * A failed node is named from records, never from the words the ranks print: slurmctld's node
 * states (libslurm), the ranks' event records (engine/events/event.h: a collective timeout's
 * missing ranks, the hang diagnosis after it, the straggler check), the hang records read as a
 * struct (engine/health/fit/diagnose.h), and srun's own messages about the step's tasks. */
#ifndef CTRAIN_SUPERVISE_SUPERVISE_H
#define CTRAIN_SUPERVISE_SUPERVISE_H

#include "ctrain/error.h"

#define CT_SUPERVISE_MAX_RESTARTS 100
/* The pause before restart N is backoff_s x 2^(N-1), at most CT_SUPERVISE_BACKOFF_MAX_S, counted
 * from the failed step's end (a step that fails at once is not started again at once). */
#define CT_SUPERVISE_BACKOFF_S 5.0
#define CT_SUPERVISE_BACKOFF_MAX_S 60.0

typedef struct ct_supervise_opts {
    long max_restarts;      /* new steps after failures before it gives up */
    long spares;            /* nodes of the job kept out of the first step */
    long tasks_per_node;    /* 0: SLURM_NTASKS_PER_NODE, else 1 */
    double backoff_s;       /* --restart-backoff (0: none) */
    const char *mpi;        /* srun --mpi */
    char root_dir[1024];    /* the fit's --default-root-dir: DIR/hang holds the records */
    char **cmd;             /* the fit's command line, NULL-terminated */
} ct_supervise_opts;

/* Supervise the fit in the SLURM job of the environment: the exit status (0 the fit completed,
 * CT_LAUNCHER_EXIT_STOPPED requeued, 1 gave up, 128+SIG stopped by SIG), or -1 with err set when it
 * could not start (not in a job, too many spares: nothing launched). */
int ct_supervise_run(const ct_supervise_opts *o, ct_error *err);

#endif
