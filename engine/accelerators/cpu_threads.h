/* SPDX-License-Identifier: BSD-3-Clause */
/* The host's compute threads (OpenBLAS's and OpenMP's, which runs oneDNN's GEMMs), owned by the
 * cpu accelerator (internal to libctrain). */
#ifndef CTRAIN_CPU_THREADS_H
#define CTRAIN_CPU_THREADS_H

/* One thread team per rank: share this node's cores among its ranks (world ranks over nodes),
 * unless the user chose (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS). is_zero: this rank prints the
 * notes. Returns the BLAS threads each rank computes on (recorded in checkpoints). */
int ct_cpu_threads_setup(int world, int nodes, int is_zero);

#endif
