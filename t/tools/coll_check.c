/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helper: the collectives layer (engine/collectives) on one library, every rank comparing the
 * results with the exact values it expects (small integers, so every order of the sums gives the
 * same bits). Usage: coll_check BACKEND WORLD
 *   mpi:  under mpirun -np WORLD (MPI numbers the ranks);
 *   gloo: WORLD processes with RANK, MASTER_ADDR and MASTER_PORT set (rank 0 hosts the store).
 * Checks all-gather (equal and unequal parts), reduce-scatter, gather to rank 0, allreduce,
 * broadcast and barrier, in fp32 and fp64; prints "coll_check: rank R of N: OP TYPE ok" for each
 * and exits 0, or names the first wrong element and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/error.h"
#include "engine/collectives/collectives.h"

static int rank, world, failed;

static double get(const void *buf, enum ct_coll_type t, size_t i)
{
    return t == CT_COLL_F64 ? ((const double *)buf)[i] : ((const float *)buf)[i];
}

static void put(void *buf, enum ct_coll_type t, size_t i, double v)
{
    if (t == CT_COLL_F64)
        ((double *)buf)[i] = v;
    else
        ((float *)buf)[i] = (float)v;
}

static const char *tname(enum ct_coll_type t) { return t == CT_COLL_F64 ? "fp64" : "fp32"; }

static void report(const char *op, enum ct_coll_type t, const void *buf, const double *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (get(buf, t, i) != want[i]) {
            fprintf(stderr, "coll_check: rank %d of %d: %s %s: element %zu is %g, expected %g\n", rank, world, op,
                    tname(t), i, get(buf, t, i), want[i]);
            failed = 1;
            return;
        }
    printf("coll_check: rank %d of %d: %s %s ok\n", rank, world, op, tname(t));
}

static int run(ct_coll *c, long ticket, const char *what)
{
    ct_error err;

    ct_error_clear(&err);
    if (ct_coll_wait(c, ticket, what, &err)) {
        fprintf(stderr, "coll_check: rank %d: %s: ", rank, what);
        ct_error_print(stderr, &err);
        failed = 1;
        return 1;
    }
    return 0;
}

/* Rank r's part of an all-gather: counts[r] elements r * 100 + i. */
static int check_allgather(ct_coll *c, enum ct_coll_type t, int equal)
{
    size_t counts[64], total = 0, at = 0, esize = ct_coll_type_size(t);
    double want[64 * 70];
    void *buf;
    ct_error err;

    for (int r = 0; r < world; r++)
        total += counts[r] = equal ? 5 : (size_t)r + 1 + (r == 1 ? 3 : 0);
    buf = calloc(total, esize);
    for (int r = 0; r < world; r++)
        for (size_t i = 0; i < counts[r]; i++, at++) {
            want[at] = r * 100 + (double)i;
            put(buf, t, at, r == rank ? want[at] : -1);
        }
    if (run(c, ct_coll_allgather_start(c, buf, counts, t, &err), "an all-gather"))
        return free(buf), 1;
    report(equal ? "all-gather" : "all-gather (unequal parts)", t, buf, want, total);
    free(buf);
    return 0;
}

/* send[q * count + i] = rank * 1000 + q * 10 + i: block q summed over the ranks lands on rank q. */
static int check_reduce_scatter(ct_coll *c, enum ct_coll_type t)
{
    const size_t count = 7;
    size_t esize = ct_coll_type_size(t);
    void *send = calloc((size_t)world * count, esize), *recv = calloc(count, esize);
    double want[7], ranks = (double)world * (world - 1) / 2;
    ct_error err;

    for (int q = 0; q < world; q++)
        for (size_t i = 0; i < count; i++)
            put(send, t, (size_t)q * count + i, rank * 1000 + q * 10 + (double)i);
    for (size_t i = 0; i < count; i++)
        want[i] = ranks * 1000 + world * (rank * 10 + (double)i);
    if (!run(c, ct_coll_reduce_scatter_start(c, send, recv, count, t, &err), "a reduce-scatter"))
        report("reduce-scatter", t, recv, want, count);
    free(send);
    free(recv);
    return 0;
}

/* Rank r's counts[r] = r + 2 elements (r * 10 + i) to rank 0. */
static int check_gather(ct_coll *c, enum ct_coll_type t)
{
    size_t counts[64], total = 0, esize = ct_coll_type_size(t), at = 0;
    double want[64 * 70];
    void *mine, *whole;
    ct_error err;

    for (int r = 0; r < world; r++)
        total += counts[r] = (size_t)r + 2;
    mine = calloc(counts[rank], esize);
    whole = calloc(total, esize);
    for (int r = 0; r < world; r++)
        for (size_t i = 0; i < counts[r]; i++, at++) {
            want[at] = r * 10 + (double)i;
            if (r == rank)
                put(mine, t, i, want[at]);
        }
    if (!run(c, ct_coll_gather_start(c, mine, whole, counts, t, 0, &err), "a gather") && rank == 0)
        report("gather", t, whole, want, total);
    free(mine);
    free(whole);
    return 0;
}

static void check_allreduce_broadcast(ct_coll *c, enum ct_coll_type t)
{
    double v[3], want[3];
    float f[3];
    void *buf = t == CT_COLL_F64 ? (void *)v : (void *)f;
    ct_error err;

    for (int i = 0; i < 3; i++) {
        put(buf, t, (size_t)i, rank + i);
        want[i] = (double)world * (world - 1) / 2 + (double)world * i;
    }
    if (!run(c, ct_coll_allreduce_start(c, buf, 3, t, &err), "an allreduce"))
        report("allreduce", t, buf, want, 3);
    for (int i = 0; i < 3; i++) {
        put(buf, t, (size_t)i, rank == world - 1 ? 40 + i : -1);
        want[i] = 40 + i;
    }
    if (!run(c, ct_coll_broadcast_start(c, buf, 3, t, world - 1, &err), "a broadcast"))
        report("broadcast", t, buf, want, 3);
}

int main(int argc, char **argv)
{
    static const enum ct_coll_type types[] = { CT_COLL_F32, CT_COLL_F64 };
    ct_env_info env;
    ct_coll *c = NULL;
    ct_error err;
    const char *r = getenv("RANK"), *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");

    if (argc != 3 || (world = atoi(argv[2])) < 1 || world > 64) {
        fprintf(stderr, "usage: coll_check mpi|gloo WORLD (1..64)\n");
        return 2;
    }
    memset(&env, 0, sizeof(env));
    rank = r ? atoi(r) : 0;
    /* gloo: the ranks as given; mpi: MPI numbers them (as under ctrain's fork launcher). */
    env.creates_processes_externally = 0;
    env.global_rank = rank;
    snprintf(env.main_address, sizeof(env.main_address), "%s", addr ? addr : "");
    env.main_port = port ? atoi(port) : 0;
    snprintf(env.job_id, sizeof(env.job_id), "coll_check");
    struct ct_coll_setup su = { argv[1], "", "coll_check", rank, world, &env, "manual", 60, 1, 0, 1, "", "", "" };

    ct_error_clear(&err);
    if (ct_coll_check_backend(argv[1], &err) || ct_coll_open(&su, &c, &err)) {
        ct_error_print(stderr, &err);
        ct_coll_free(c);
        return 1;
    }
    rank = ct_coll_rank(c);
    ct_coll_watch(c, NULL, 60);
    for (int k = 0; k < 2; k++) {
        check_allgather(c, types[k], 1);
        check_allgather(c, types[k], 0);
        check_reduce_scatter(c, types[k]);
        check_gather(c, types[k]);
        check_allreduce_broadcast(c, types[k]);
    }
    if (ct_coll_barrier(c, "a barrier", &err)) {
        ct_error_print(stderr, &err);
        failed = 1;
    } else {
        printf("coll_check: rank %d of %d: barrier ok\n", rank, world);
    }
    if (!failed)
        ct_coll_close(c);
    ct_coll_free(c);
    return failed;
}
