/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's step for bf16-true (gpt_step_tmpl.h), as PyTorch's model.to(torch.bfloat16) on the cpu:
 * parameters, activations and gradients stored in bf16; every Linear's GEMM on oneDNN with bf16
 * inputs, fp32 accumulation and a bf16 destination (ct_gemm_bf16); attention per head on fp32
 * copies; the element-wise passes load bf16, compute in fp32, store bf16 (gpt_passes_bf16.c). */
#include <cblas.h>
#include <math.h>

#include "engine/models/gpt/gpt_internal.h"
#include "engine/nn/bf16_inline.h"
#include "engine/nn/gemm.h"

/* ct_gemm's contract with C in bf16: C = op(A) op(B) (+ C when accumulate), rounded once. */
static void gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                      enum ct_dtype ab, int accumulate, uint16_t *C, int ldc)
{
    (void)ab; /* always CT_DTYPE_BF16 here */
    ct_gemm_bf16(trans_a, trans_b, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}

/* ct_gemm_bf16_bias in GEMM's form: C = op(A) op(B) + bias, rounded once. */
static void gemm_bf16_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B,
                           int ldb, enum ct_dtype ab, const uint16_t *bias, uint16_t *C, int ldc)
{
    (void)ab;
    ct_gemm_bf16_bias(trans_a, trans_b, M, N, K, A, lda, B, ldb, bias, C, ldc);
}

#define elem uint16_t
#define real float
#define LD(x) ct_bf16_load(x)
#define ST(v) ct_bf16_store(v)
#define SFX(name) name##_bf16
#define KSFX(name) name##_bf16
#define ACTS gpt_block_acts_bf16
#define VW(m) (&(m)->v.bf16)
#define GEMM gemm_bf16
#define GEMM_BIAS gemm_bf16_bias
#define BLAS_GEMM cblas_sgemm
#define SQRT sqrtf
#define GPT_F32 0
#define GPT_BF16 1
#include "engine/models/gpt/gpt_step_tmpl.h"
