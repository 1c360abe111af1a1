/* SPDX-License-Identifier: BSD-3-Clause */
/* In-place MPI_Iallreduce of a gradient-sized float array, waited for at once, as ddp's buckets are:
 * milliseconds per call, wall and CPU (rank 0). Built and run by scripts/bench/allreduce-algorithms.
 *
 *   allreduce FLOATS ITERATIONS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_seconds(void)
{
    struct timespec t;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 535818, iters = argc > 2 ? atoi(argv[2]) : 300, rank;
    float *g = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    double t0, c0;

    if (!g || n < 1 || iters < 1) {
        fprintf(stderr, "usage: allreduce FLOATS ITERATIONS\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < n; i++)
        g[i] = 1e-3f * (float)(i % 1000);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    c0 = cpu_seconds();
    for (int k = 0; k < iters; k++) {
        MPI_Request req;

        MPI_Iallreduce(MPI_IN_PLACE, g, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        for (int i = 0; i < n; i++) /* the average, as ddp takes it (keeps the values finite) */
            g[i] *= 0.5f;
    }
    if (rank == 0)
        printf("%.3f ms wall, %.3f ms cpu per allreduce\n", (MPI_Wtime() - t0) / iters * 1e3,
               (cpu_seconds() - c0) / iters * 1e3);
    free(g);
    MPI_Finalize();
    return 0;
}
