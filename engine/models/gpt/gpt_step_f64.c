/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's step in fp64 for 64-true (gpt_step_tmpl.h): every GEMM on OpenBLAS's dgemm (oneDNN's
 * matmul has no f64 on the cpu), every element-wise pass in fp64 (gpt_passes_f64.c). */
#include <cblas.h>
#include <math.h>

#include "engine/models/gpt/gpt_internal.h"

/* ct_gemm's contract in fp64: C = op(A) op(B) (+ C when accumulate). */
static void gemm_f64(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                     enum ct_dtype ab, int accumulate, double *C, int ldc)
{
    (void)ab; /* always CT_DTYPE_F64 here */
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0,
                A, lda, B, ldb, accumulate ? 1.0 : 0.0, C, ldc);
}

#define real double
#define SFX(name) name##_f64
#define KSFX(name) name##_f64
#define ACTS gpt_block_acts_f64
#define VW(m) (&(m)->v.f64)
#define GEMM gemm_f64
#define BLAS_GEMM cblas_dgemm
#define SQRT sqrt
#define GPT_F32 0
#define elem real
#define LD(x) (x)
#define ST(v) (v)
#define GPT_BF16 0
#include "engine/models/gpt/gpt_step_tmpl.h"
