/* SPDX-License-Identifier: BSD-3-Clause */
/* What ctrain's CUDA code shares on the current device (internal to libctrain, CT_HAVE_CUDA only).
 * In engine/nn, the lowest of its users (the CUDA MLP; the cuda accelerator and NCCL sit above).
 *
 * Device memory: cudaMalloc/cudaFree with this process's use and peak counted, so the
 * accelerator's memory stats report what ctrain holds (not the whole GPU's use). Allocation
 * happens only when a model or strategy is set up, never inside a training step.
 *
 * The compute stream: the one stream the model's kernels and GEMMs run on, so the NCCL code can
 * order its allreduces after backward's kernels with events (it has a stream of its own). */
#ifndef CTRAIN_CUDA_DEVICE_H
#define CTRAIN_CUDA_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0 or the cudaError_t of cudaMalloc; *p is NULL on failure. */
int ct_cuda_malloc(void **p, size_t bytes);
void ct_cuda_free(void *p, size_t bytes);
size_t ct_cuda_alloc_bytes(void);
size_t ct_cuda_alloc_peak_bytes(void);

/* The compute stream (a cudaStream_t), created non-blocking on the current device at first use;
 * NULL (the legacy default stream) if it cannot be created. */
void *ct_cuda_compute_stream(void);

#ifdef __cplusplus
}
#endif

#endif
