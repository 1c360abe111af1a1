/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain supervise's state and the calls between its files (internal to engine/supervise):
 * job.c (SLURM: the job and its steps, the requeue), decide.c (which nodes failed: slurmctld's
 * states and the records), step.c (srun: start, relay, wait; reads the records while the step
 * runs), loop.c (restarts), run.c (the start and the end). Calls go one way: run -> loop -> step ->
 * decide, and each of them -> job. */
#ifndef CTRAIN_SUPERVISE_INTERNAL_H
#define CTRAIN_SUPERVISE_INTERNAL_H

#include <stdio.h>
#include <sys/types.h>

#include "ctrain/hostlist.h"
#include "engine/supervise/supervise.h"

#define CT_SV_P "ctrain: supervise: "
/* The step's name in SLURM: how the supervisor finds its own steps to end them. */
#define CT_SV_STEP_NAME "ctrain-supervise"

struct ct_sv {
    ct_supervise_opts o;
    char job[32];
    char hang_dir[1100];  /* DIR/hang: the hang and event records of the current step */
    ct_hostlist *alloc;   /* the job's nodes, as SLURM gave them at the start */
    ct_hostlist *bad;     /* excluded from every later step */
    ct_hostlist *named;   /* named as failed by the current step */
    ct_hostlist *weak;    /* nodes of the step's tasks that srun saw killed by a signal */
    long nodes;           /* nodes per step: the world size's */
    int sigfd;
    int stop_sig;         /* SIGTERM/SIGINT/SIGHUP received */
    double failed_at;     /* first sign of failure in the current step (0: none) */
    double ending_at;     /* a node named, or srun ending the step: srun's teardown runs from here */
    double step_start, srun_end;
    int zero_verdict;        /* rank 0 wrote its roll call's verdict (decide.c) */
    int scan_blames_zero;    /* this reading takes the records that blame rank 0 (decide.c) */
    double step_start_wall;  /* Unix time: event records older than the step are an earlier one's */
};

/* job.c */
int ct_sv_job_setup(struct ct_sv *s, ct_error *err);
void ct_sv_warn_no_kill(const struct ct_sv *s);
int ct_sv_signal_steps(struct ct_sv *s, int sig);
int ct_sv_step_listed(const struct ct_sv *s);
int ct_sv_requeue(struct ct_sv *s, long healthy);

/* decide.c */
int ct_sv_exit_code(int status);
void ct_sv_slurm_nodes(struct ct_sv *s);
void ct_sv_name_node(struct ct_sv *s, const char *host, const char *why);
void ct_sv_scan_events(struct ct_sv *s);
void ct_sv_scan_line(struct ct_sv *s, const char *line);
void ct_sv_after_failure(struct ct_sv *s, int status);

/* step.c */
char *ct_sv_pick_nodes(const struct ct_sv *s, long *healthy);
char **ct_sv_srun_argv(const struct ct_sv *s, const char *nodes, int restart);
void ct_sv_argv_free(char **av);
int ct_sv_run_step(struct ct_sv *s, const char *nodes, int restart);

/* loop.c */
int ct_sv_loop(struct ct_sv *s);

#endif
