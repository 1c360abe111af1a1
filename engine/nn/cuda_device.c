/* SPDX-License-Identifier: BSD-3-Clause */
/* Counted device allocations; see cuda_device.h. */
#ifdef CT_HAVE_CUDA
#include <stdatomic.h>

#include <cuda_runtime_api.h>

#include "engine/nn/cuda_device.h"

static atomic_size_t in_use, peak;

int ct_cuda_malloc(void **p, size_t bytes)
{
    cudaError_t e = cudaMalloc(p, bytes);
    size_t now, old;

    if (e != cudaSuccess) {
        *p = NULL;
        return (int)e;
    }
    now = atomic_fetch_add(&in_use, bytes) + bytes;
    old = atomic_load(&peak);
    while (now > old && !atomic_compare_exchange_weak(&peak, &old, now))
        ;
    return 0;
}

void ct_cuda_free(void *p, size_t bytes)
{
    if (!p)
        return;
    cudaFree(p);
    atomic_fetch_sub(&in_use, bytes);
}

size_t ct_cuda_alloc_bytes(void) { return atomic_load(&in_use); }
size_t ct_cuda_alloc_peak_bytes(void) { return atomic_load(&peak); }

/* One process drives one device from one thread (the training loop), so a plain static is enough;
 * it is created after set_device chose the device. */
void *ct_cuda_compute_stream(void)
{
    static cudaStream_t stream;
    static int tried;

    if (!tried) {
        tried = 1;
        if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
            stream = NULL;
    }
    return stream;
}
#endif
