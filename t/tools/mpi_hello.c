/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helper: an Open MPI program that prints "rank R of S on HOST" and checks that every rank
 * can talk to every other (an allreduce of the ranks). Exit 0 only when the sum is right. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank = -1, size = 0, sum = 0, len = 0;
    char host[MPI_MAX_PROCESSOR_NAME];

    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "ctrain: mpi_hello: MPI_Init failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d on %s sum %d\n", rank, size, host, sum);
    fflush(stdout);
    MPI_Finalize();
    return sum == size * (size - 1) / 2 ? 0 : 1;
}
