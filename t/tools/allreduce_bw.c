/* SPDX-License-Identifier: BSD-3-Clause */
/* In-place sum allreduce of float arrays over one of ddp's backends, as ddp runs its buckets: each
 * started and waited for at once, timed over ITERATIONS after 5 warm-up calls. Rank 0 prints, per
 * size, milliseconds per call, the algorithm bandwidth (bytes / time) and the bus bandwidth
 * (nccl-tests' convention: algbw x 2 (n - 1) / n, the bytes each rank's link carries). Used by
 * scripts/bench/ddp-backends.
 *
 *   allreduce_bw mpi ITERATIONS FLOATS...    under a PMIx server (srun --mpi=pmix, mpirun)
 *   allreduce_bw gloo ITERATIONS FLOATS...   with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (srun
 *                                            --mpi=none with ctrain's plugin, or by hand)
 *
 * mpi: MPI_Iallreduce with Open MPI's settings ddp sets (engine/strategies/ddp.c); gloo: ddp's own
 * gloo context (engine/collectives/gloo_lib.h: the TCPStore on rank 0, gloo's allreduce on the
 * context's worker thread). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/tcpstore.h"
#include "ctrain/util.h"
#ifdef CT_HAVE_GLOO
#include "engine/collectives/gloo_lib.h"
#endif

#define WARMUP 5

/* One backend: its rank, size, and one in-place allreduce of n floats (0 or an error). */
struct backend {
    int rank, size;
    int (*allreduce)(struct backend *b, float *g, size_t n);
#ifdef CT_HAVE_GLOO
    struct ct_gloo *gloo;
    ct_tcpstore_server *srv;
    ct_tcpstore *store;
#endif
};

static int mpi_allreduce(struct backend *b, float *g, size_t n)
{
    MPI_Request req;

    (void)b;
    if (MPI_Iallreduce(MPI_IN_PLACE, g, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        return 1;
    return MPI_Wait(&req, MPI_STATUS_IGNORE) != MPI_SUCCESS;
}

static int mpi_open(struct backend *b)
{
    /* What ddp sets before MPI_Init (a value the user set wins). */
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b->size);
    b->allreduce = mpi_allreduce;
    return 0;
}

#ifdef CT_HAVE_GLOO
static int gloo_allreduce(struct backend *b, float *g, size_t n)
{
    ct_error err;

    if (ct_gloo_allreduce_sum(b->gloo, g, n, sizeof(float), &err)) {
        fprintf(stderr, "allreduce_bw: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static int gloo_open(struct backend *b)
{
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT"), *rank = getenv("RANK");
    const char *size = getenv("WORLD_SIZE");
    ct_error err;

    if (!addr || !port || !rank || !size) {
        fprintf(stderr, "allreduce_bw: gloo needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT\n");
        return 1;
    }
    b->rank = atoi(rank);
    b->size = atoi(size);
    if ((b->rank == 0 && ct_tcpstore_server_start(atoi(port), 0, &b->srv, &err)) ||
        ct_tcpstore_connect(addr, atoi(port), "allreduce_bw", b->rank, 60, &b->store, &err) ||
        ct_gloo_create(b->store, b->rank, b->size, 60, !getenv("ALLREDUCE_BW_UNTHREADED"), &b->gloo, &err)) {
        fprintf(stderr, "allreduce_bw: rank %d: %s\n", b->rank, err.msg);
        return 1;
    }
    b->allreduce = gloo_allreduce;
    return 0;
}
#endif

int main(int argc, char **argv)
{
    struct backend b;
    int iters = argc > 2 ? atoi(argv[2]) : 0, rc = 0;

    memset(&b, 0, sizeof(b));
    if (argc < 4 || iters < 1 || (strcmp(argv[1], "mpi") && strcmp(argv[1], "gloo"))) {
        fprintf(stderr, "usage: allreduce_bw mpi|gloo ITERATIONS FLOATS...\n");
        return 2;
    }
    if (!strcmp(argv[1], "mpi"))
        rc = mpi_open(&b);
    else {
#ifdef CT_HAVE_GLOO
        rc = gloo_open(&b);
#else
        fprintf(stderr, "allreduce_bw: this ctrain was built without gloo\n");
        return 1;
#endif
    }
    if (rc)
        return 1;
    for (int a = 3; a < argc && !rc; a++) {
        size_t n = (size_t)atol(argv[a]);
        float *g = malloc((n ? n : 1) * sizeof(float));
        double t0, t;

        if (!g || n < 1) {
            fprintf(stderr, "allreduce_bw: bad size '%s'\n", argv[a]);
            rc = 1;
            break;
        }
        /* Zeros: the sums stay finite however many calls (and no denormals slow the adds). */
        memset(g, 0, n * sizeof(float));
        t0 = ct_time_now();
        for (int k = 0; k < WARMUP + iters && !rc; k++) {
            if (k == WARMUP)
                t0 = ct_time_now();
            rc = b.allreduce(&b, g, n);
        }
        t = (ct_time_now() - t0) / iters;
        if (!rc && b.rank == 0) {
            double algbw = (double)n * sizeof(float) / t / 1e9;

            printf("%s ranks %d floats %zu bytes %zu ms %.3f algbw_GBps %.3f busbw_GBps %.3f\n", argv[1], b.size, n,
                   n * sizeof(float), t * 1e3, algbw, algbw * 2.0 * (b.size - 1) / b.size);
            fflush(stdout);
        }
        free(g);
    }
#ifdef CT_HAVE_GLOO
    if (b.gloo) {
        ct_gloo_free(b.gloo);
        ct_tcpstore_close(b.store);
        ct_tcpstore_server_stop(b.srv);
        return rc;
    }
#endif
    MPI_Finalize();
    return rc;
}
