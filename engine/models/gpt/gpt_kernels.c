/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's element-wise passes in fp32 (gpt_kernels_tmpl.h). */
#include <math.h>

/* glibc's libmvec (linked through libm) has vector expf and tanhf for SSE, AVX2 and AVX-512;
 * declaring them simd, as glibc's own math.h does under -ffast-math, lets the vectorised loops
 * call them (_ZGVeN16v_tanhf, ...) instead of the scalar functions, which dominated the profile. */
#ifndef __clang__ /* clang has no simd attribute (the fuzz build): the scalar functions there */
__attribute__((simd("notinbranch"))) float expf(float);
__attribute__((simd("notinbranch"))) float tanhf(float);
#endif

#define real float
#define SFX(name) name
#define EXP expf
#define TANH tanhf
#define SQRT sqrtf
#define elem real
#define LD(x) (x)
#define ST(v) (v)
#define GPT_STORE_ROUNDS 0
#include "engine/models/gpt/gpt_kernels_tmpl.h"
