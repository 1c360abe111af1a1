/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's step in fp32 (32-true; bf16-mixed's GEMMs on bf16 copies): gpt_step_tmpl.h. */
#include <math.h>

#include "engine/models/gpt/gpt_internal.h"
#include "engine/nn/gemm.h"

#define real float
#define SFX(name) name##_f32
#define KSFX(name) name
#define ACTS gpt_block_acts
#define VW(m) (&(m)->v.f32)
#define GEMM ct_gemm
#define GEMM_BIAS ct_gemm_bias
#define BLAS_GEMM cblas_sgemm
#define SQRT sqrtf
#define GPT_F32 1
#define elem real
#define LD(x) (x)
#define ST(v) (v)
#define GPT_BF16 0
#include "engine/models/gpt/gpt_step_tmpl.h"
