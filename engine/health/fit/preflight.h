/* SPDX-License-Identifier: BSD-3-Clause */
/* Preflight: checks across the nodes of a run before it trains (ctrain preflight, ctrain fit
 * --preflight). Every rank measures; each node's figures are set against the median of all nodes,
 * and a node far from it is named. Internal to libctrain (the loops' level: the checks use the
 * strategy's collectives and point-to-point exchange, and the GEMM the cpu accelerator runs). */
#ifndef CTRAIN_LOOPS_PREFLIGHT_H
#define CTRAIN_LOOPS_PREFLIGHT_H

#include <stdio.h>

#include "ctrain/error.h"
#include "ctrain/strategy.h"

/* Which checks run (--preflight-checks). */
enum {
    CT_PREFLIGHT_COMPUTE = 1,   /* a GEMM rate on every rank */
    CT_PREFLIGHT_NETWORK = 2,   /* latency and bandwidth between nodes, a ring of pairs */
    CT_PREFLIGHT_ALLREDUCE = 4, /* a timed allreduce of every rank, its sum checked */
    CT_PREFLIGHT_ALL = 7
};

typedef struct ct_preflight_options {
    int checks;                 /* CT_PREFLIGHT_* bits */
    /* A node is named when its figure is this far from the median of all nodes (see README,
     * "Preflight"): compute below median / compute_factor; latency above both latency_factor x
     * median and median + latency_floor_ms; bandwidth below median / bandwidth_factor. */
    double compute_factor;      /* default 3 */
    double latency_factor;      /* default 4 */
    double latency_floor_ms;    /* default 5 */
    double bandwidth_factor;    /* default 4 */
    /* The measurements (fixed, so figures compare across runs and nodes). */
    int gemm_n;                 /* square fp32 GEMM of this side, default 256 */
    int gemm_windows;           /* the rate is the best of these windows, default 3 */
    double gemm_window_s;       /* each at least this long, default 0.25 (> the 100 ms CFS period) */
    int pings;                  /* 8-byte round trips per pair, default 16 (latency: the best) */
    size_t bandwidth_bytes;     /* one message per repetition, default 1 MiB */
    int bandwidth_reps;         /* default 10 (bandwidth: the best) */
    size_t allreduce_bytes;     /* default 4 MiB of doubles */
    int allreduce_reps;         /* default 3 (time: the best) */
    const char *root_dir;       /* DIR/preflight.json written by rank 0; NULL or "": none */
    FILE *out;                  /* rank 0's table; NULL: none */
} ct_preflight_options;

/* The defaults above. */
void ct_preflight_defaults(ct_preflight_options *o);

/* Run the checks on every rank of s (a collective: every rank calls it, after
 * ct_strategy_setup_environment). *named = the number of nodes that failed a check or are outliers,
 * the same on every rank; rank 0 prints the table to o->out and writes DIR/preflight.json.
 * Returns 0, or an error (a collective timed out or failed: the missing rank is named). */
int ct_preflight_run(ct_strategy *s, const ct_preflight_options *o, int *named, ct_error *err);

/* "compute,network,allreduce" (any of them, or "all") into CT_PREFLIGHT_* bits; CT_EINVAL naming
 * the word otherwise. */
int ct_preflight_parse_checks(const char *list, int *out, ct_error *err);

#endif
