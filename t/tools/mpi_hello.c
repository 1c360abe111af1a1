/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helper: an Open MPI program that prints "rank R of S on HOST" and checks that every rank
 * can talk to every other (an allreduce of the ranks). Exit 0 only when the sum is right.
 * Between MPI_Init and the allreduce it waits for every rank to leave MPI_Init, as ctrain's ddp
 * strategy does: under srun, Open MPI 5's first message can reach a rank still inside MPI_Init and
 * crash it (ct_pmix_after_mpi_init in ctrain/pmix.h). With MPI_HELLO_LATE=S the last rank sleeps
 * S seconds before that wait and says when it woke, and every rank says when it passed the wait
 * (milliseconds of ct_time_now's monotonic clock, which the test cluster's nodes, processes of
 * one machine, share). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctrain/pmix.h"
#include "ctrain/util.h"

int main(int argc, char **argv)
{
    int rank = -1, size = 0, sum = 0, len = 0;
    char host[MPI_MAX_PROCESSOR_NAME];
    const char *late = getenv("MPI_HELLO_LATE");
    ct_error err = {0};

    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "ctrain: mpi_hello: MPI_Init failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);   /* local: no message */
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (late && rank == size - 1) {
        sleep((unsigned)atoi(late));
        printf("rank %d woke at %.0f\n", rank, ct_time_now() * 1000);
    }
    if (ct_pmix_after_mpi_init(60, &err)) {
        fprintf(stderr, "ctrain: mpi_hello: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (late)
        printf("rank %d passed at %.0f\n", rank, ct_time_now() * 1000);
    MPI_Get_processor_name(host, &len);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d on %s sum %d\n", rank, size, host, sum);
    fflush(stdout);
    MPI_Finalize();
    return sum == size * (size - 1) / 2 ? 0 : 1;
}
