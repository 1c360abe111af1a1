/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's step for bf16-true, as PyTorch's model.to(torch.bfloat16) on the cpu: parameters,
 * activations and gradients stored in bf16; every Linear's GEMM on oneDNN with bf16 inputs, fp32
 * accumulation and a bf16 destination (ct_gemm_bf16); the element-wise passes load bf16, compute in
 * fp32, store bf16 (gpt_passes_bf16.c). This file: bf16's thin kernels and its two attention paths
 * (batched on oneDNN; per head on fp32 copies where oneDNN has no primitive), then the layers and
 * the top-down step (gpt_internal.h has the map of the step's files). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/models/gpt/gpt_internal.h"
#include "engine/models/gpt/gpt_passes.h"
#include "engine/nn/bf16_inline.h"
#include "engine/nn/gemm.h"

#define elem uint16_t
#define real float
#define LD(x) ct_bf16_load(x)
#define ST(v) ct_bf16_store(v)
#define SQRT sqrtf
#define SFX(name) name##_bf16
#define PASS(name) name##_bf16
#define ACTS gpt_block_acts_bf16
#define VW(m) (&(m)->v.bf16)

/* --- which GEMM ------------------------------------------------------------------------------- */

/* ct_gemm's contract with C in bf16: C = op(A) op(B) (+ C when accumulate), rounded once. */
static void gemm(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                 enum ct_dtype ab, int accumulate, uint16_t *C, int ldc)
{
    (void)ab; /* always CT_DTYPE_BF16 here */
    ct_gemm_bf16(trans_a, trans_b, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}

/* ct_gemm_bf16_bias in gemm's form: C = op(A) op(B) + bias, rounded once. */
static void gemm_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                      enum ct_dtype ab, const uint16_t *bias, uint16_t *C, int ldc)
{
    (void)ab;
    ct_gemm_bf16_bias(trans_a, trans_b, M, N, K, A, lda, B, ldb, bias, C, ldc);
}

/* oneDNN's products on a thread each of a team of two (gemm_pair). */
static int gemm_pairs(void) { return ct_gemm_get_threads() == 2; }

/* --- what the GEMMs read: the bf16 arrays themselves (no copies) ------------------------------ */

static const void *gemm_param(const ct_gpt *m, const uint16_t *p) { return p; }
static const void *gemm_in(ct_gpt *m, const uint16_t *x, size_t n, int slot) { return x; }
static const void *gemm_keep(ct_gpt *m, const uint16_t *x, size_t n, int l, int which) { return x; }
static const void *gemm_kept(const ct_gpt *m, const uint16_t *x, int l, int which) { return x; }
static uint16_t *kept_out(const ct_gpt *m, int l, int which) { return NULL; }
static const void *gemm_dout(ct_gpt *m, uint16_t **db, const uint16_t *dout, int BT, int OC) { return dout; }
static void pack_params(ct_gpt *m) {}

/* One row of logits (ct_gpt_next_token_logits): x[C] dot each row of wte, in fp32. */
static void logits_row(const ct_gpt *m, const uint16_t *wte, const uint16_t *x, float *logits)
{
    int C = m->cfg.n_embd;

    for (int v = 0; v < m->cfg.vocab; v++) {
        float dot = 0;

        for (int i = 0; i < C; i++)
            dot += LD(wte[(size_t)v * C + i]) * LD(x[i]);
        logits[v] = dot;
    }
}

/* --- attention -------------------------------------------------------------------------------- */

/* The per-head path's copies: one head's T rows of HS (ld apart in the bf16 array) loaded into, or
 * stored rounded from, the thread's fp32 scratch. */
static void head_load(float *dst, const elem *src, int T, int HS, size_t ld)
{
    for (int t = 0; t < T; t++)
        for (int i = 0; i < HS; i++)
            dst[(size_t)t * HS + i] = LD(src[t * ld + i]);
}

static void head_store(elem *dst, const float *src, int T, int HS, size_t ld)
{
    for (int t = 0; t < T; t++)
        for (int i = 0; i < HS; i++)
            dst[t * ld + i] = ST(src[(size_t)t * HS + i]);
}

/* x[n] rounded to bf16 in place (what a bf16 tensor holds). */
static void round_in_place(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = LD(ST(x[i]));
}

static float *head_scratch(size_t n)
{
    float *s = malloc(sizeof(float) * n);

    if (!s) {
        fprintf(stderr, "ctrain: out of memory for the attention's fp32 scratch\n");
        abort();
    }
    return s;
}

/* bf16-true's attention on oneDNN, as bf16-mixed's (gpt_step_f32.c): each product of a block of query rows (or
 * of keys) one primitive batched over every (sequence, head), reading the bf16 arrays themselves
 * (qkv, att, datty, the scores' gradient). The scores and their gradient come out in fp32 scratch
 * (m->q[0]), where the softmax passes read them; every other product (atty, dq, dk, dv) is stored
 * straight to bf16 by oneDNN, rounded once from its fp32 sum (dq and dk scaled first) as the
 * per-head path stores it: the same values up to the order of fp32 sums. 0, or -1 when there is no
 * scratch or oneDNN made no primitive for a product (the per-head path then runs and rewrites
 * everything). */
static int attention_forward_onednn(ct_gpt *m, int l, int B)
{
    struct ACTS *a = &VW(m)->blocks[l];

    /* where oneDNN has no bf16 matmul, per head: each head's tensors widened once into the thread's
     * fp32 scratch, where batched products would widen their views at every call */
    if (!m->q[0] || !ct_gemm_bf16_native())
        return -1;
    /* the scores in fp32 scratch; atty straight to bf16 (the fp32 sum rounded once, as storing it
     * from fp32 scratch did) */
    return gpt_attention_batched(B, m->cfg.seq_len, m->cfg.n_embd, m->cfg.n_head, a->qkv, m->q[0], a->att,
                                 CT_DTYPE_BF16, a->atty);
}

static int attention_backward_onednn(ct_gpt *m, int l, int B)
{
    const struct ACTS *a = &VW(m)->blocks[l];
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    long tt = (long)T * T, htt = (long)NH * T * T;
    float scale = 1.0f / sqrtf((float)HS), *d = m->q[0];
    elem *ds = VW(m)->datt, *dqkv = VW(m)->dqkv;
    const elem *dy = VW(m)->dbt_c;
    struct ct_gemm_batch datt = { B, NH, (long)T * C, HS, (long)T * C3, HS, htt, tt };
    struct ct_gemm_batch dv = { B, NH, htt, tt, (long)T * C, HS, (long)T * C3, HS };
    struct ct_gemm_batch dqk = { B, NH, htt, tt, (long)T * C3, HS, (long)T * C3, HS };

    if (!d || !ct_gemm_bf16_native())
        return -1;
    /* datt = dy v^T (query rows over their keys); dv = att^T dy (keys over their queries), dv
     * straight into dqkv in bf16 */
    for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
        if (ct_gemm_batched(&datt, 0, 1, gpt_att_rows(r0, T), r0 + gpt_att_rows(r0, T), HS, dy + (size_t)r0 * C, C,
                            a->qkv + 2 * C, C3, CT_DTYPE_BF16, d + (size_t)r0 * T, T))
            return -1;
    for (int k0 = 0; k0 < T; k0 += GPT_ATT_BLOCK)
        if (ct_gemm_batched_to(&dv, 1, 0, gpt_att_rows(k0, T), HS, T - k0, a->att + (size_t)k0 * T + k0, T,
                               dy + (size_t)k0 * C, C, CT_DTYPE_BF16, 1.0f, CT_DTYPE_BF16,
                               dqkv + 2 * C + (size_t)k0 * C3, C3))
            return -1;
    /* through the softmax on the stored probabilities, each gradient rounded as a bf16 tensor is */
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++)
        gpt_causal_softmax_backward_rounded(d + (size_t)bh * tt, a->att + (size_t)bh * tt, ds + (size_t)bh * tt, T);
    /* dq and dk carry the scores' scale: the products' fp32 sums scaled, then rounded once */
    for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
        if (ct_gemm_batched_to(&dqk, 0, 0, gpt_att_rows(r0, T), HS, r0 + gpt_att_rows(r0, T), ds + (size_t)r0 * T, T,
                               a->qkv + C, C3, CT_DTYPE_BF16, scale, CT_DTYPE_BF16, dqkv + (size_t)r0 * C3, C3))
            return -1;
    for (int k0 = 0; k0 < T; k0 += GPT_ATT_BLOCK)
        if (ct_gemm_batched_to(&dqk, 1, 0, gpt_att_rows(k0, T), HS, T - k0, ds + (size_t)k0 * T + k0, T,
                               a->qkv + (size_t)k0 * C3, C3, CT_DTYPE_BF16, scale, CT_DTYPE_BF16,
                               dqkv + C + (size_t)k0 * C3, C3))
            return -1;
    return 0;
}

/* The per-head path: per sequence and head, the head's q, k, v (and in backward its probabilities
 * and output gradient) loaded into fp32 scratch of the thread, the products and softmax computed
 * there, each result rounded to bf16 where PyTorch's bf16 model stores a tensor (att, atty, datt,
 * the scores' gradient, dq, dk, dv). */
static int attention_forward_heads(ct_gpt *m, int l, int B)
{
    struct ACTS *a = &VW(m)->blocks[l];
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    size_t th = (size_t)T * HS, tt = (size_t)T * T;

#pragma omp parallel
    {
        float *q = head_scratch(4 * th + tt), *k = q + th, *v = k + th, *y = v + th, *att = y + th;

#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                const elem *qs = a->qkv + (size_t)b * T * C3 + h * HS;
                elem *stored = a->att + ((size_t)b * NH + h) * tt;

                head_load(q, qs, T, HS, C3);
                head_load(k, qs + C, T, HS, C3);
                head_load(v, qs + 2 * C, T, HS, C3);
                for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, gpt_att_rows(r0, T), r0 + gpt_att_rows(r0, T),
                                HS, scale, q + (size_t)r0 * HS, HS, k, HS, 0.0f, att + (size_t)r0 * T, T);
                gpt_causal_softmax(att, T);
                for (size_t i = 0; i < tt; i++) {
                    stored[i] = ST(att[i]);
                    att[i] = LD(stored[i]);
                }
                for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, gpt_att_rows(r0, T), HS,
                                r0 + gpt_att_rows(r0, T), 1.0f, att + (size_t)r0 * T, T, v, HS, 0.0f,
                                y + (size_t)r0 * HS, HS);
                head_store(a->atty + (size_t)b * T * C + h * HS, y, T, HS, C);
            }
        free(q);
    }
    return 0;
}

/* dqkv[BT,3C] from datty[BT,C] (VW(m)->dbt_c). */
static int attention_backward_heads(ct_gpt *m, int l, int B)
{
    const struct ACTS *a = &VW(m)->blocks[l];
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    size_t th = (size_t)T * HS, tt = (size_t)T * T;

#pragma omp parallel
    {
        float *q = head_scratch(7 * th + 2 * tt), *k = q + th, *v = k + th, *dy = v + th;
        float *dq = dy + th, *dk = dq + th, *dv = dk + th, *p = dv + th, *d = p + tt;

#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                size_t row = (size_t)b * T * C3 + h * HS;
                const elem *pst = a->att + ((size_t)b * NH + h) * tt;
                elem *dqs = VW(m)->dqkv + row;

                head_load(q, a->qkv + row, T, HS, C3);
                head_load(k, a->qkv + row + C, T, HS, C3);
                head_load(v, a->qkv + row + 2 * C, T, HS, C3);
                head_load(dy, VW(m)->dbt_c + (size_t)b * T * C + h * HS, T, HS, C);
                for (size_t i = 0; i < tt; i++)
                    p[i] = LD(pst[i]);
                /* datt = dy v^T (query rows over their keys); dv = att^T dy (keys over their queries) */
                for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, gpt_att_rows(r0, T), r0 + gpt_att_rows(r0, T),
                                HS, 1.0f, dy + (size_t)r0 * HS, HS, v, HS, 0.0f, d + (size_t)r0 * T, T);
                for (int k0 = 0; k0 < T; k0 += GPT_ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, gpt_att_rows(k0, T), HS, T - k0, 1.0f,
                                p + (size_t)k0 * T + k0, T, dy + (size_t)k0 * HS, HS, 0.0f, dv + (size_t)k0 * HS, HS);
                /* through the softmax, then the scaled q k^T */
                round_in_place(d, tt);
                gpt_causal_softmax_backward(d, p, T);
                round_in_place(d, tt);
                for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, gpt_att_rows(r0, T), HS,
                                r0 + gpt_att_rows(r0, T), scale, d + (size_t)r0 * T, T, k, HS, 0.0f,
                                dq + (size_t)r0 * HS, HS);
                for (int k0 = 0; k0 < T; k0 += GPT_ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, gpt_att_rows(k0, T), HS, T - k0, scale,
                                d + (size_t)k0 * T + k0, T, q + (size_t)k0 * HS, HS, 0.0f, dk + (size_t)k0 * HS, HS);
                head_store(dqs, dq, T, HS, C3);
                head_store(dqs + C, dk, T, HS, C3);
                head_store(dqs + 2 * C, dv, T, HS, C3);
            }
        free(q);
    }
    return 0;
}

/* Tried in order (gpt_internal.h): the batched path reads only the bf16 arrays both paths write
 * alike, so its backward runs whichever path forward took. */
static const struct gpt_attention_path attention_paths[] = {
    { attention_forward_onednn, attention_backward_onednn, 0 }, /* batched on oneDNN */
    { attention_forward_heads, attention_backward_heads, 0 },   /* per head on fp32 copies */
};

#include "engine/models/gpt/gpt_layers_tmpl.h"
#include "engine/models/gpt/gpt_step_tmpl.h"
