/* SPDX-License-Identifier: BSD-3-Clause */
/* hang_record [STEPS [COLLECTIVES [BUCKETS]]]
 *
 * What the progress record (engine/health/fit/hang.c) costs a training step, timed on its own: per step,
 * the epoch loop's ct_hang_step and five ct_hang_enter (data, forward, backward, allreduce,
 * optimizer), and for each of COLLECTIVES collectives the ddp strategy's stores into the collective
 * trace around its wait (seq, what, the monotonic clock, waiting; waiting again after), and for each
 * of BUCKETS gradient buckets the bucket number. STEPS such steps (default 10,000,000; 4 collectives
 * and 4 buckets a step), after a warm-up of a tenth. Prints one JSON line: nanoseconds per step and
 * per call. For scripts/bench/hang-record, which sets it against a training step's time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/health/fit/hang.h"

/* The compiler must store to the trace as the strategy does (its stores sit around MPI calls). */
#define KEEP() __asm__ volatile("" ::: "memory")

static void steps(ct_collective_trace *tr, long n, int colls, int buckets)
{
    static long seq;

    for (long i = 0; i < n; i++) {
        ct_hang_step(i);
        ct_hang_enter(CT_PHASE_DATA);
        ct_hang_enter(CT_PHASE_FORWARD);
        ct_hang_enter(CT_PHASE_BACKWARD);
        for (int b = 0; b < buckets; b++) {
            tr->bucket = b;
            KEEP();
        }
        ct_hang_enter(CT_PHASE_ALLREDUCE);
        for (int c = 0; c < colls; c++) {
            tr->seq = ++seq;
            tr->what = "the gradient allreduce";
            tr->wait_since = ct_time_now();
            tr->waiting = 1;
            KEEP();
            tr->waiting = 0;
            KEEP();
        }
        tr->bucket = -1;
        ct_hang_enter(CT_PHASE_OPTIMIZER);
        KEEP();
    }
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000000L;
    int colls = argc > 2 ? atoi(argv[2]) : 4, buckets = argc > 3 ? atoi(argv[3]) : 4;
    ct_collective_trace *tr;
    double t0, t1, t2;
    char dir[] = "/tmp/ctrain-hang-record.XXXXXX";

    if (n < 1 || colls < 0 || buckets < 0) {
        fprintf(stderr, "usage: hang_record [STEPS [COLLECTIVES [BUCKETS]]]\n");
        return 2;
    }
    /* The record as a fit starts it: in its live file's shared mapping (nothing else is written: no
     * dump is asked for). */
    if (!mkdtemp(dir)) {
        perror("hang_record: mkdtemp");
        return 1;
    }
    ct_hang_init(0, 1, dir);
    tr = ct_hang_map();
    steps(tr, n / 10 + 1, colls, buckets);
    t0 = ct_time_now();
    steps(tr, n, colls, buckets);
    t1 = ct_time_now();
    /* The same loop without the collectives and buckets: the loops' calls alone. */
    steps(tr, n, 0, 0);
    t2 = ct_time_now();
    printf("{\"steps\": %ld, \"collectives_per_step\": %d, \"buckets_per_step\": %d, \"ns_per_step\": %.2f, "
           "\"loop_calls_ns_per_step\": %.2f, \"trace_ns_per_step\": %.2f}\n",
           n, colls, buckets, (t1 - t0) * 1e9 / (double)n, (t2 - t1) * 1e9 / (double)n,
           ((t1 - t0) - (t2 - t1)) * 1e9 / (double)n);
    ct_hang_finish(1);
    rmdir(dir);
    return 0;
}
