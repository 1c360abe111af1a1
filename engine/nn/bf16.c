/* SPDX-License-Identifier: BSD-3-Clause */
/* Rounding fp32 to bf16 (the upper 16 bits of an fp32), kept in fp32 storage. */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "ctrain/nn.h"
#include "engine/nn/simd.h"
#include "engine/nn/thread_share.h"

/* x's bits rounded to bf16's (the low 16 bits cleared). Inline so the array loop vectorises. */
static inline float bf16_round(float x)
{
    uint32_t u;

    memcpy(&u, &x, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        /* NaN: truncating could clear every mantissa bit left and make it infinity; keep it quiet. */
        u = (u | 0x00400000u) & 0xffff0000u;
    } else {
        /* Round to nearest, ties to even: add just under half an ulp of bf16, plus one when the
         * kept part is odd; the carry may reach the exponent, which is the right rounding (and
         * turns the largest values into infinity, as a cast does). */
        u += 0x7fffu + ((u >> 16) & 1u);
        u &= 0xffff0000u;
    }
    memcpy(&x, &u, sizeof(x));
    return x;
}

float ct_bf16_round(float x)
{
    return bf16_round(x);
}

CT_SIMD_CLONES
static void round_range(const float *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = bf16_round(in[i]);
}

/* On the OpenMP team (the rank's threads) when large, each thread a range cut at multiples of 16
 * (a cache line). */
void ct_bf16_round_array(const float *in, float *out, size_t n)
{
#pragma omp parallel if (n >= 65536)
    {
        size_t lo, k = ct_thread_share(n, 16, &lo);

        if (k)
            round_range(in + lo, out + lo, k);
    }
}
