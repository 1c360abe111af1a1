/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the supervisor's event records (internal): what a rank saw that ctrain supervise acts on,
 * as a structured record in the run's directory, beside the hang records (DIR/hang/event-KIND-rank-R.json):
 * what happened, where (step, collective), on which node and rank, and why. The ranks write them
 * where they find a node at fault (the collective timeout's roll call, the hang diagnosis after it,
 * the straggler check stopping the fit); ctrain supervise (engine/supervise/) reads them back and
 * decides from them alone: the ranks' printed words stay for the people who read them.
 *
 * Below the strategies (the roll call in engine/strategies writes them): this file depends on
 * engine/util only, and takes plain values, not the strategy's trace. Written with
 * ct_fs_write_atomic (a fresh O_EXCL/O_NOFOLLOW temp renamed into place), read with
 * ct_fs_read_input (a regular file, opened without blocking, size-capped). */
#ifndef CTRAIN_EVENTS_EVENT_H
#define CTRAIN_EVENTS_EVENT_H

#include <stdint.h>

#include "ctrain/error.h"

enum ct_sv_event_kind {
    CT_SV_EVENT_MISSING = 0,   /* a collective timed out: these ranks did not arrive */
    CT_SV_EVENT_BEHIND,        /* the hang diagnosis after the timeout: these ranks are behind */
    CT_SV_EVENT_STRAGGLER,     /* the straggler check stopped the fit over these ranks' node */
    CT_SV_EVENT_N
};

#define CT_SV_EVENT_NODES 16   /* ranks named by one record (the strategy's trace keeps as many) */
#define CT_SV_EVENT_HOST 64

typedef struct ct_sv_event {
    int kind;                              /* enum ct_sv_event_kind */
    int rank, world;                       /* the writer */
    long pid;
    char host[CT_SV_EVENT_HOST];           /* the writer's node (SLURM's name) */
    int64_t step;                          /* where: the step ... */
    long seq;                              /* ... and the collective (0: none) */
    char what[96];                         /* what that collective is ("" when none) */
    int n_nodes;                           /* the ranks at fault and their nodes ("": not known) */
    int node_rank[CT_SV_EVENT_NODES];
    char node[CT_SV_EVENT_NODES][CT_SV_EVENT_HOST];
    char why[256];
    double wall;                           /* when it was written (Unix time) */
} ct_sv_event;

const char *ct_sv_event_kind_name(int kind);

/* This rank's writer: records go to hang_dir (DIR/hang, made and checked by the hang record,
 * engine/health/fit/hang.c); step is read when a record is written. Until it is called (a rank
 * outside a fit) the writes below do nothing. */
void ct_sv_events_init(const char *hang_dir, int rank, int world, const char *host, const volatile int64_t *step);
/* Write ev (kind, where and the ranks at fault filled in; the writer's fields and the time are
 * added) as DIR/hang/event-KIND-rank-R.json. 0, or -1 (said on stderr). Not from a signal handler. */
int ct_sv_event_write(ct_sv_event *ev);
/* The collective timeout's roll call found ranks[n] (on hosts[n], "" when not known) missing in
 * collective #seq (what). */
int ct_sv_event_missing(long seq, const char *what, const int *ranks, const char (*hosts)[64], int n);

/* Every event record of hang_dir, parsed, to fn (which returns non-zero to stop). A record that is
 * not one (bad JSON, a field out of range, not a regular file, over the size cap) is skipped and
 * counted in *bad (may be NULL). 0, or -1 when the folder cannot be read (absent: 0, nothing). */
typedef int (*ct_sv_event_fn)(const ct_sv_event *ev, void *arg);
int ct_sv_events_read(const char *hang_dir, ct_sv_event_fn fn, void *arg, int *bad);

#endif
