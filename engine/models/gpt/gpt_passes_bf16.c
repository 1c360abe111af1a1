/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's element-wise passes for bf16-true (gpt_passes_tmpl.h): arrays stored in bf16, each
 * element loaded into fp32 registers, computed in fp32 and stored rounded to bf16 — what PyTorch's
 * CPU operators do for a bfloat16 tensor. Sums over rows accumulate in fp32 and are stored once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/nn/bf16_inline.h"

/* vector expf from glibc's libmvec on x86-64, as gpt_passes.c */
#if defined(__x86_64__) && !defined(__clang__)
__attribute__((simd("notinbranch"))) float expf(float);
#endif

#define elem uint16_t
#define real float
#define LD(x) ct_bf16_load(x)
#define ST(v) ct_bf16_store(v)
#define SFX(name) name##_bf16
#define EXP expf
#define SQRT sqrtf

/* Sums over rows of a bf16-stored gradient: in fp32 scratch (adding 2048 rows in bf16 would keep
 * about 3 digits of the first few), columns i0..i1 then stored once. */
static float *row_sums_begin(uint16_t *out, size_t n)
{
    float *sums = malloc(sizeof(float) * n);

    if (!sums) {
        fprintf(stderr, "ctrain: out of memory for a gradient's fp32 row sums\n");
        abort();
    }
    return sums;
}

static void row_sums_end(uint16_t *out, float *sums, size_t i0, size_t i1)
{
    for (size_t i = i0; i < i1; i++)
        out[i] = ST(sums[i]);
    free(sums);
}

#include "engine/models/gpt/gpt_passes_tmpl.h"
