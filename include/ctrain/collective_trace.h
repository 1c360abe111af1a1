/* SPDX-License-Identifier: BSD-3-Clause */
/* Where a rank stands in the collectives (engine/collectives keeps it up to date; the hang record,
 * engine/health/fit/hang.c, reads it). */
#ifndef CTRAIN_COLLECTIVE_TRACE_H
#define CTRAIN_COLLECTIVE_TRACE_H

/* Where this rank stands in the collectives, written by the strategy into a record its caller owns
 * (the loops' hang record, engine/health/fit/hang.c) with plain stores: no lock, no system call, so it
 * costs nothing on the step; the record is copied (a snapshot) when a hang is dumped. */
#define CT_TRACE_MAX_MISSING 16
typedef struct ct_collective_trace {
    long seq;                 /* the collective waited for last, or now (counted from 1, the same on every rank) */
    int waiting;              /* 1 while this rank waits in collective seq */
    double wait_since;        /* ct_time_now() when the wait for collective seq began */
    int bucket;               /* the gradient bucket started last this step (from 0); -1: none yet */
    const char *what;         /* what collective seq is (a string literal), NULL before the first */
    int timed_out;            /* collective seq passed --collective-timeout */
    int n_missing;            /* then: ranks that did not arrive (-1: not known) */
    int missing[CT_TRACE_MAX_MISSING];
    /* ... and the node each of them runs on ("": not known): a rank that cannot write its own
     * record (stopped, dead) is still named with its node. */
    char missing_host[CT_TRACE_MAX_MISSING][64];
} ct_collective_trace;

#endif
