/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's step in fp64 for 64-true: every GEMM on OpenBLAS's dgemm (oneDNN's matmul has no f64 on
 * the cpu), attention per head on dgemm, every element-wise pass in fp64 (gpt_passes_f64.c). This
 * file: fp64's thin kernels, then attention, the layers and the top-down step (gpt_internal.h has
 * the map of the step's files). */
#include <cblas.h>
#include <math.h>

#include "engine/models/gpt/gpt_internal.h"
#include "engine/models/gpt/gpt_passes.h"
#include "engine/nn/gemm.h"

#define elem double
#define real double
#define LD(x) (x)
#define ST(v) (v)
#define SQRT sqrt
#define BLAS_GEMM cblas_dgemm
#define SFX(name) name##_f64
#define PASS(name) name##_f64
#define ACTS gpt_block_acts_f64
#define VW(m) (&(m)->v.f64)

/* --- which GEMM ------------------------------------------------------------------------------- */

/* ct_gemm's contract in fp64: C = op(A) op(B) (+ C when accumulate). */
static void gemm(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                 enum ct_dtype ab, int accumulate, double *C, int ldc)
{
    (void)ab; /* always CT_DTYPE_F64 here */
    ct_gemm_blas_team();   /* on OpenBLAS's threads, as the process set them (engine/nn/gemm.h) */
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0,
                A, lda, B, ldb, accumulate ? 1.0 : 0.0, C, ldc);
}

/* dgemm has no bias post-op: C filled with the bias row, then the product added onto it. */
static void gemm_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                      enum ct_dtype ab, const double *bias, double *C, int ldc)
{
    gpt_bias_fill_f64(C, NULL, bias, M, N);
    gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, ab, 1, C, ldc);
}

/* dgemm runs on OpenBLAS's own threads: backward's two products one after the other. */
static int gemm_pairs(void) { return 0; }

/* --- what the GEMMs read: the fp64 arrays themselves (no copies) ------------------------------ */

static const void *gemm_param(const ct_gpt *m, const double *p) { return p; }
static const void *gemm_in(ct_gpt *m, const double *x, size_t n, int slot) { return x; }
static const void *gemm_keep(ct_gpt *m, const double *x, size_t n, int l, int which) { return x; }
static const void *gemm_kept(const ct_gpt *m, const double *x, int l, int which) { return x; }
static uint16_t *kept_out(const ct_gpt *m, int l, int which) { return NULL; }
static const void *gemm_dout(ct_gpt *m, double **db, const double *dout, int BT, int OC) { return dout; }
static void pack_params(ct_gpt *m) {}
static const double *gemm_act(ct_gpt *m, const double *x, size_t n, int slot) { return x; }
static void gemm_act_in_place(ct_gpt *m, double *x, size_t n) {}

/* One row of logits (ct_gpt_next_token_logits): x[C] dot each row of wte, in fp64. */
static void logits_row(const ct_gpt *m, const double *wte, const double *x, float *logits)
{
    int C = m->cfg.n_embd;

    for (int v = 0; v < m->cfg.vocab; v++) {
        double dot = 0;

        for (int i = 0; i < C; i++)
            dot += wte[(size_t)v * C + i] * x[i];
        logits[v] = (float)dot;
    }
}

/* --- attention: per head on dgemm ------------------------------------------------------------- */

#include "engine/models/gpt/gpt_attention_heads_tmpl.h"

static const struct gpt_attention_path attention_paths[] = {
    { attention_forward_heads, attention_backward_heads, 0 }, /* per head on dgemm */
};

#include "engine/models/gpt/gpt_layers_tmpl.h"
#include "engine/models/gpt/gpt_step_tmpl.h"
