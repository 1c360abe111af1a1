/* Device memory for ctrain's CUDA code: cudaMalloc/cudaFree with this process's use and peak
 * counted, so the accelerator's memory stats report what ctrain holds (not the whole GPU's use).
 * Allocation happens only when a model or strategy is set up, never inside a training step. */
#ifndef CTRAIN_CUDA_ALLOC_H
#define CTRAIN_CUDA_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0 or the cudaError_t of cudaMalloc; *p is NULL on failure. */
int ct_cuda_malloc(void **p, size_t bytes);
void ct_cuda_free(void *p, size_t bytes);
size_t ct_cuda_alloc_bytes(void);
size_t ct_cuda_alloc_peak_bytes(void);

#ifdef __cplusplus
}
#endif

#endif
