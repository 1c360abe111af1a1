/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's element-wise passes for bf16-true (gpt_passes_tmpl.h): arrays stored in bf16, each
 * element loaded into fp32 registers, computed in fp32 and stored rounded to bf16 — what PyTorch's
 * CPU operators do for a bfloat16 tensor. Sums over rows accumulate in fp32 and are stored once. */
#include <math.h>

#include "engine/nn/bf16_inline.h"

/* vector expf from glibc's libmvec, as gpt_passes.c */
#ifndef __clang__ /* clang has no simd attribute (the fuzz build): the scalar functions there */
__attribute__((simd("notinbranch"))) float expf(float);
#endif

#define elem uint16_t
#define real float
#define LD(x) ct_bf16_load(x)
#define ST(v) ct_bf16_store(v)
#define GPT_STORE_ROUNDS 1
#define SFX(name) name##_bf16
#define EXP expf
#define SQRT sqrtf
#include "engine/models/gpt/gpt_passes_tmpl.h"
