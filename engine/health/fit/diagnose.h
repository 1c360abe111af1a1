/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the hang records read back (engine/health/fit/diagnose.c): which ranks are behind, where
 * and since when, as a struct (ct_diagnose) that ctrain diagnose prints (ct_diagnosis_print),
 * rank 0 prints after a collective timeout (hang.c), and ctrain supervise reads the failed nodes
 * from (engine/supervise) — nothing is decided from the printed text. */
#ifndef CTRAIN_HEALTH_FIT_DIAGNOSE_H
#define CTRAIN_HEALTH_FIT_DIAGNOSE_H

#include <stdint.h>
#include <stdio.h>

#include "ctrain/error.h"
#include "ctrain/strategy.h"

#define CT_DIAG_MAX_RANKS 4096

/* One rank as its record (DIR/hang/rank-R.json) or, when it wrote none, its live record
 * (rank-R.live) says. Strings are escaped for a terminal. */
struct ct_diag_rank {
    int present;                                   /* a record or a live record of the latest run was read */
    int behind;                                    /* the diagnosis: behind the furthest rank */
    char host[256];
    long pid;
    int64_t step;
    int phase;                                     /* enum ct_phase */
    int bucket;
    long seq;
    int waiting, timed_out;
    double waited;
    char what[96];
    int n_missing;                                 /* ranks this one found missing after its timeout */
    int missing[CT_TRACE_MAX_MISSING];
    char missing_host[CT_TRACE_MAX_MISSING][64];   /* "": not known (or a record from before they were kept) */
    double entered_wall, now_wall;
    double stale_s;                                /* how much older its record is than the newest */
    int from_live;                                 /* read from rank-R.live: it wrote no rank-R.json */
};

typedef struct ct_diagnosis {
    int world;                                     /* the latest run's ranks */
    int lead;                                      /* the furthest rank */
    int n_behind;
    struct ct_diag_rank *ranks;                    /* [world] (allocated) */
} ct_diagnosis;

/* Read dir/hang/rank-*.json (dir itself when it has no hang/: DIR/hang.restart-N) and, for a rank
 * of the latest run that wrote none, its rank-R.live, into *d: 0, or an error code (dir missing,
 * no record, a record unreadable, naming it). Free *d with ct_diagnosis_free. */
int ct_diagnose(const char *dir, ct_diagnosis *d, ct_error *err);
/* The node of rank: its record's host, else the node the others' records named when they found
 * it missing; NULL when neither says. */
const char *ct_diagnosis_node(const ct_diagnosis *d, int rank);
/* ctrain diagnose's text: each rank behind, where and since when, and the furthest rank. */
void ct_diagnosis_print(const ct_diagnosis *d, FILE *out);
void ct_diagnosis_free(ct_diagnosis *d);
/* ct_diagnose, printed to out: 0 when every rank is at the same point, 1 when some are behind, or
 * the error code. */
int ct_hang_diagnose(const char *dir, FILE *out, ct_error *err);

#endif
