/* SPDX-License-Identifier: BSD-3-Clause */
/* NCCL on cuda (nccl_lib.c is in the CUDA module libctrain-cuda.so.0; the nccl component, nccl.c, is
 * its user in libctrain, through the loader's functions of these names: nccl_loader.c).
 * Declared here only (t/90). Without CUDA in the build every call fails with CT_ENOTAVAIL (ddp never makes
 * one: no accelerator there keeps device memory).
 *
 * One communicator over the job's ranks, bootstrapped through PMIx: rank 0 makes the
 * ncclUniqueId and puts it in the PMIx key-value store, a fence publishes it, every rank gets it
 * — the same under srun --mpi=pmix, mpirun and ctrain's own launcher, with no port or shared file.
 * Without a PMIx server (torchrun, srun --mpi=none, processes started by hand) the id travels
 * through the TCPStore at MASTER_ADDR:MASTER_PORT instead, as PyTorch's NCCL process group does.
 * Allreduces run on a stream of their own, each ordered after the compute stream's work so far
 * (an event), so a bucket's allreduce overlaps the backward of earlier layers. NCCL runs
 * non-blocking: every wait polls ncclCommGetAsyncError and a deadline, and a dead or stuck peer ends
 * in a clear error and ncclCommAbort instead of a hang.
 *
 * Status: compiled, not yet run on a GPU.
 */
#ifndef CTRAIN_DDP_NCCL_H
#define CTRAIN_DDP_NCCL_H

#include <stddef.h>

#include "ctrain/error.h"
#include "ctrain/tcpstore.h"

typedef struct ct_nccl ct_nccl;

/* Join the communicator of world ranks as rank (on the current device); timeout_s bounds the
 * bootstrap and every later wait. store: where rank 0's id travels when no PMIx server joined the
 * ranks (NULL: through PMIx). */
int ct_nccl_create(int rank, int world, double timeout_s, ct_tcpstore *store, ct_nccl **out, ct_error *err);
/* buf[count] (device memory) from root to every rank; returns when done. */
int ct_nccl_broadcast(ct_nccl *n, float *buf, size_t count, int root, ct_error *err);
/* Start averaging buf[count] (device memory) over the ranks, after the compute stream's work. */
int ct_nccl_allreduce_start(ct_nccl *n, float *buf, size_t count, ct_error *err);
/* Start an in-place all-gather of buf[world * count] (device memory): this rank's count floats at
 * buf + rank * count, after the compute stream's work. */
int ct_nccl_allgather_start(ct_nccl *n, float *buf, size_t count, int rank, ct_error *err);
/* Start averaging send[world * count] over the ranks, this rank's block into recv[count]. */
int ct_nccl_reduce_scatter_start(ct_nccl *n, const float *send, float *recv, size_t count, ct_error *err);
/* Wait for every started allreduce; the compute stream is ordered after them. */
int ct_nccl_wait(ct_nccl *n, ct_error *err);
/* Destroy (or abort, after a failure) the communicator. NULL is fine. */
void ct_nccl_free(ct_nccl *n);

#endif
