/* SPDX-License-Identifier: BSD-3-Clause */
/* This OpenMP thread's share of an element-wise pass, inside a parallel region: the element-wise
 * passes of engine/nn (bf16 rounding and packing, the optimizer's update) split their n elements
 * the same way. */
#ifndef CTRAIN_NN_THREAD_SHARE_H
#define CTRAIN_NN_THREAD_SHARE_H

#include <omp.h>
#include <stddef.h>

/* The share's first element in *lo and its length (0 for a thread left without) of n elements, cut
 * at multiples of align elements (a cache line of what the pass writes) so that no two threads
 * write one line. */
static inline size_t ct_thread_share(size_t n, size_t align, size_t *lo)
{
    size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num(), blocks = (n + align - 1) / align;
    size_t hi = blocks * (t + 1) / nt * align;

    *lo = blocks * t / nt * align;
    hi = hi < n ? hi : n;
    return *lo < hi ? hi - *lo : 0;
}

#endif
