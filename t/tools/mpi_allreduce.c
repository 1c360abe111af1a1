/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helper: MPI_Init, allreduce of the rank numbers, check the sum, exit 0 (right) or 1.
 * Prints "allreduce ok rank R of N sum S" on success. Used by t/3x-*.t under ctrain's launchers,
 * mpirun and srun. */
#include <stdio.h>

#include <mpi.h>

int main(int argc, char **argv)
{
    int rank = -1, size = 0;
    long mine, sum = -1, want;

    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "mpi_allreduce: MPI_Init failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mine = rank;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    want = (long)size * (size - 1) / 2;
    MPI_Finalize();
    if (sum != want) {
        fprintf(stderr, "mpi_allreduce: rank %d of %d: sum %ld, expected %ld\n", rank, size, sum,
                want);
        return 1;
    }
    printf("allreduce ok rank %d of %d sum %ld\n", rank, size, sum);
    return 0;
}
