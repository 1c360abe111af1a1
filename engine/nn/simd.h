/* SPDX-License-Identifier: BSD-3-Clause */
/* CT_SIMD_CLONES: an element-wise hot loop compiled once per vector ISA and picked at run time
 * (glibc ifunc): on x86-64 the baseline is SSE2, so AVX2 and AVX-512 versions are cloned. On aarch64
 * Advanced SIMD is in the base ISA and -O3 vectorises the one version with it; GCC 12 has no
 * target_clones there (SVE clones come with GCC 14), so the loop is compiled once. Internal to
 * libctrain. */
#ifndef CTRAIN_NN_SIMD_H
#define CTRAIN_NN_SIMD_H

#if defined(__x86_64__)
#define CT_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CT_SIMD_CLONES
#endif

#endif
