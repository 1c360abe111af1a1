/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's step for one element type: GEMMs, attention, forward and backward. Included once per
 * type by gpt_step.c (real = float: 32-true and bf16-mixed, GEMMs on oneDNN), gpt_step_f64.c
 * (real = double: 64-true, GEMMs on OpenBLAS's dgemm) and gpt_step_bf16.c (bf16-true: bf16
 * storage, fp32 arithmetic, GEMMs on oneDNN with a bf16 destination), which define
 *   elem          the element type parameters, activations and gradients are stored in
 *   real          the type the arithmetic runs in (fp32 for bf16 storage)
 *   SFX(name)     the suffix of this type's entry points (gpt_forward_f32, gpt_forward_f64, ...)
 *   KSFX(name)    the names of this type's element-wise passes (gpt_passes.h)
 *   ACTS, VW(m)   this type's block activations and view of the model (gpt_internal.h)
 *   GEMM(...)     ct_gemm's arguments, C of type real
 *   GEMM_BIAS     ct_gemm_bias's (fp32 and bf16 storage: a bias row added as the product is stored)
 *   BLAS_GEMM     cblas_sgemm or cblas_dgemm
 *   SQRT          sqrtf or sqrt
 *   GPT_F32       1 for fp32: the bf16-mixed copies exist only there
 *   GPT_BF16      1 for bf16 storage: attention per head on fp32 copies; LD()/ST() load and store
 * See engine/models/gpt/gpt.c for the shapes. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/models/gpt/gpt_internal.h"
#include "engine/models/gpt/gpt_passes.h"
#include "engine/nn/gemm.h"

/* Cut the model's arrays into this type's view (at create, and again when the type changes). */
void SFX(gpt_carve)(ct_gpt *m)
{
    const ct_gpt_config *c = &m->cfg;
    size_t B = (size_t)m->max_batch, T = (size_t)c->seq_len, C = (size_t)c->n_embd, BT = B * T;
    elem *p = m->acts_mem;

    VW(m)->params = m->params;
    VW(m)->grads = m->grads;
    VW(m)->blocks = m->blocks_mem;
    VW(m)->encoded = p, p += BT * C;
    for (int l = 0; l < c->n_layer; l++) {
        struct ACTS *a = &VW(m)->blocks[l];

        a->ln1 = p, p += BT * C;
        a->ln1_mean = p, p += BT;
        a->ln1_rstd = p, p += BT;
        a->qkv = p, p += BT * 3 * C;
        a->att = p, p += B * c->n_head * T * T;
        a->atty = p, p += BT * C;
        a->res2 = p, p += BT * C;
        a->ln2 = p, p += BT * C;
        a->ln2_mean = p, p += BT;
        a->ln2_rstd = p, p += BT;
        a->fch = p, p += BT * 4 * C;
        a->fch_gelu = p, p += BT * 4 * C;
        a->res3 = p, p += BT * C;
    }
    VW(m)->lnf = p, p += BT * C;
    VW(m)->lnf_mean = p, p += BT;
    VW(m)->lnf_rstd = p, p += BT;
    VW(m)->probs = p;
    p = m->grad_mem;
    VW(m)->dres = p, p += BT * C;
    VW(m)->dbt_c = p, p += BT * C;
    VW(m)->dqkv = p, p += BT * 3 * C;
    VW(m)->dfch = p, p += BT * 4 * C;
    VW(m)->datt = p;
}

/* --- GEMMs ------------------------------------------------------------------------------------ */

/* What a oneDNN GEMM reads for parameter p: p itself, or its bf16 copy (bf16-mixed, fp32 only). */
static const void *gemm_param(const ct_gpt *m, const elem *p)
{
#if GPT_F32
    if (m->gemm_dtype == CT_DTYPE_BF16)
        return m->params_b + (p - VW(m)->params);
#endif
    return p;
}

/* What a oneDNN GEMM reads for activation x[n]: x itself, or x packed to bf16 in copy slot. */
static const void *gemm_in(ct_gpt *m, const elem *x, size_t n, int slot)
{
#if GPT_F32
    if (m->gemm_dtype == CT_DTYPE_BF16) {
        ct_bf16_pack(x, m->qb[slot], n);
        return m->qb[slot];
    }
#endif
    return x;
}

/* bf16-mixed keeps, for backward, the bf16 copy forward packed of each activation a GEMM reads
 * again there (packing it twice cost a pass over it each time): gpt_internal.h's KEEP_* slots. */
#if GPT_F32
static uint16_t *kept_slot(const ct_gpt *m, int l, int which)
{
    return m->keep_b + gpt_kept_offset(&m->cfg, (size_t)m->max_batch, l, which);
}
#endif

/* gemm_in for an activation backward reads again: packed into block l's kept copy `which`. */
static const void *gemm_keep(ct_gpt *m, const elem *x, size_t n, int l, int which)
{
#if GPT_F32
    if (m->gemm_dtype == CT_DTYPE_BF16) {
        uint16_t *k = kept_slot(m, l, which);

        ct_bf16_pack(x, k, n);
        return k;
    }
#endif
    (void)m, (void)n, (void)l, (void)which;
    return x;
}

/* A LayerNorm of x into out (and its mean and rstd); returns what the next GEMM reads. Under
 * bf16-mixed that is all out is read for, so the output goes straight to block l's kept bf16 copy
 * `which` (out itself is not written: backward reads x, mean and rstd). */
static const void *ln_forward(ct_gpt *m, elem *out, elem *mean, elem *rstd, const elem *x, const elem *w,
                              const elem *b, int BT, int C, int l, int which)
{
#if GPT_F32
    if (m->gemm_dtype == CT_DTYPE_BF16) {
        uint16_t *k = kept_slot(m, l, which);

        KSFX(gpt_layernorm_forward_packed)(k, mean, rstd, x, w, b, BT, C);
        return k;
    }
#endif
    (void)m, (void)l, (void)which;
    KSFX(gpt_layernorm_forward)(out, mean, rstd, x, w, b, BT, C);
    return out;
}

/* GELU of x[n] into out, as ln_forward (backward reads x: fch). */
static const void *gelu_forward(ct_gpt *m, elem *out, const elem *x, size_t n, int l, int which)
{
#if GPT_F32
    if (m->gemm_dtype == CT_DTYPE_BF16) {
        uint16_t *k = kept_slot(m, l, which);

        KSFX(gpt_gelu_forward_packed)(k, x, n);
        return k;
    }
#endif
    (void)m, (void)l, (void)which;
    KSFX(gpt_gelu_forward)(out, x, n);
    return out;
}

/* What backward's GEMM reads for activation x of block l: x, or the copy forward kept. */
static const void *gemm_kept(const ct_gpt *m, const elem *x, int l, int which)
{
#if GPT_F32
    if (m->gemm_dtype == CT_DTYPE_BF16)
        return kept_slot(m, l, which);
#endif
    (void)m, (void)l, (void)which;
    return x;
}

#if !GPT_BF16
/* What an OpenBLAS GEMM (attention) reads for activation x[n]: x itself, or x rounded to bf16 in
 * fp32 copy number slot. */
static const elem *gemm_act(ct_gpt *m, const elem *x, size_t n, int slot)
{
#if GPT_F32
    if (m->gemm_dtype == CT_DTYPE_BF16) {
        ct_bf16_round_array(x, m->q[slot], n);
        return m->q[slot];
    }
#endif
    return x;
}

#endif

/* out[BT,OC] = (residual ? residual : 0) + in[BT,IC] W[OC,IC]^T + b; inq is what the GEMM reads for
 * in (in itself, or its bf16 copy: gemm_keep, ln_forward, gelu_forward). */
static void linear_forward(const ct_gpt *m, elem *out, const elem *residual, const void *inq, const elem *w,
                           const elem *b, int BT, int IC, int OC)
{
#if GPT_F32 || GPT_BF16
    /* oneDNN adds the bias as it stores the product (no pass to fill out with it first) */
    if (!residual) {
        GEMM_BIAS(0, 1, BT, OC, IC, inq, IC, gemm_param(m, w), IC, m->gemm_dtype, b, out, OC);
        return;
    }
#endif
    KSFX(gpt_bias_fill)(out, residual, b, BT, OC);
    GEMM(0, 1, BT, OC, IC, inq, IC, gemm_param(m, w), IC, m->gemm_dtype, 1, out, OC);
}

/* Backward's two products of a layer (the weight's gradient and the input's) read the same output
 * gradient and nothing the other writes. On a team of two threads (two cores per rank) each runs on
 * its own thread, on a oneDNN primitive made for one thread (engine/nn/gemm.c's solo primitives):
 * one product split across two threads ran at well under twice the one-thread rate on this
 * model's shapes (scripts/bench/README.md, issue 40). Other team sizes split each product across
 * the team as before. 64-true's dgemm stays on OpenBLAS's own threads. */
struct gemm_job {
    int trans_a, trans_b, M, N, K;
    const void *A;
    int lda;
    const void *B;
    int ldb;
    elem *C;
    int ldc;
};

static void gemm_job_run(const ct_gpt *m, const struct gemm_job *j)
{
    GEMM(j->trans_a, j->trans_b, j->M, j->N, j->K, j->A, j->lda, j->B, j->ldb, m->gemm_dtype, 0, j->C, j->ldc);
}

static int gemm_pairs(void)
{
#if GPT_F32 || GPT_BF16
    return ct_gemm_get_threads() == 2;
#else
    return 0;
#endif
}

/* first (after db = column sums of dout[BT,OC], when db is given) and second, on one thread each
 * of a team of two, else one after the other on the whole team. */
static void gemm_pair(const ct_gpt *m, elem *db, const elem *dout, int BT, int OC, const struct gemm_job *first,
                      const struct gemm_job *second)
{
    if (!gemm_pairs()) {
        if (db)
            KSFX(gpt_column_sums)(db, dout, BT, OC);
        gemm_job_run(m, first);
        gemm_job_run(m, second);
        return;
    }
#pragma omp parallel num_threads(2)
    {
        /* a team of one (the runtime gave no second thread) runs both */
        int t = omp_get_thread_num(), one = omp_get_num_threads() == 1;

        if (t == 0 && db)
            KSFX(gpt_column_sums)(db, dout, BT, OC);
        if (t == 0)
            gemm_job_run(m, first);
        if (t == 1 || one)
            gemm_job_run(m, second);
    }
}

/* From dout[BT,OC]: dw[OC,IC] = dout^T in, db = column sums of dout, din[BT,IC] = dout W (in: block
 * l's activation `keep`, as forward read it). */
static void linear_backward(ct_gpt *m, elem *din, elem *dw, elem *db, const elem *dout, const elem *in,
                            const elem *w, int BT, int IC, int OC, int l, int keep)
{
    const void *doutq = dout;
    struct gemm_job dwj = { 1, 0, OC, IC, BT, NULL, OC, gemm_kept(m, in, l, keep), IC, dw, IC };
    struct gemm_job dinj = { 0, 0, BT, IC, OC, NULL, OC, gemm_param(m, w), IC, din, IC };

#if GPT_F32
    /* bf16-mixed: the bias gradient and the products' bf16 copy of dout in one pass over it */
    if (m->gemm_dtype == CT_DTYPE_BF16) {
        gpt_column_sums_packed(db, m->qb[0], dout, BT, OC);
        doutq = m->qb[0];
        db = NULL;
    }
#endif
    dwj.A = dinj.A = doutq;
    gemm_pair(m, db, dout, BT, OC, &dwj, &dinj);
}

/* --- attention -------------------------------------------------------------------------------- */

/* Causal attention: query row t reads keys 0..t only. The GEMMs run per block of ATT_BLOCK query
 * rows over the keys up to the block's end (and, for the key-side gradients, per block of keys over
 * the queries from the block's start), skipping most of the zero upper triangle: 3/8 of attention's
 * multiply-adds at seq_len 128. Entries above the diagonal are never read; the softmax passes write
 * them as zeros. */
#define ATT_BLOCK 32

static int att_rows(int r0, int T) { return T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK; }

#if GPT_BF16
/* bf16-true's attention: per sequence and head, the head's q, k, v (and in backward its
 * probabilities and output gradient) loaded into fp32 scratch of the thread, the fp32 path's
 * products and softmax computed there, each result rounded to bf16 where PyTorch's bf16 model
 * stores a tensor (att, atty, datt, the scores' gradient, dq, dk, dv). */
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

/* bf16-true's attention on oneDNN, as bf16-mixed's below: each product of a block of query rows (or
 * of keys) one primitive batched over every (sequence, head), reading the bf16 arrays themselves
 * (qkv, att, datty, the scores' gradient). The scores and their gradient come out in fp32 scratch
 * (m->q[0]), where the softmax passes read them; every other product (atty, dq, dk, dv) is stored
 * straight to bf16 by oneDNN, rounded once from its fp32 sum (dq and dk scaled first) as the
 * per-head path stores it: the same values up to the order of fp32 sums. 0, or -1 when there is no
 * scratch or oneDNN made no primitive for a product (the per-head path then runs and rewrites
 * everything). */
static int attention_forward_onednn(ct_gpt *m, struct ACTS *a, int B)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    long tt = (long)T * T, htt = (long)NH * T * T;
    float scale = 1.0f / sqrtf((float)HS), *s = m->q[0];
    struct ct_gemm_batch scores = { B, NH, (long)T * C3, HS, (long)T * C3, HS, htt, tt };
    struct ct_gemm_batch out = { B, NH, htt, tt, (long)T * C3, HS, (long)T * C, HS };

    if (!s)
        return -1;
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
        if (ct_gemm_batched(&scores, 0, 1, att_rows(r0, T), r0 + att_rows(r0, T), HS, a->qkv + (size_t)r0 * C3, C3,
                            a->qkv + C, C3, CT_DTYPE_BF16, s + (size_t)r0 * T, T))
            return -1;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++)
        gpt_causal_softmax_scaled(s + (size_t)bh * tt, a->att + (size_t)bh * tt, T, scale);
    /* atty straight to bf16 (the fp32 sum rounded once, as storing it from fp32 scratch did) */
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
        if (ct_gemm_batched_to(&out, 0, 0, att_rows(r0, T), HS, r0 + att_rows(r0, T), a->att + (size_t)r0 * T, T,
                               a->qkv + 2 * C, C3, CT_DTYPE_BF16, 1.0f, CT_DTYPE_BF16, a->atty + (size_t)r0 * C, C))
            return -1;
    return 0;
}

static int attention_backward_onednn(ct_gpt *m, const struct ACTS *a, int B)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    long tt = (long)T * T, htt = (long)NH * T * T;
    float scale = 1.0f / sqrtf((float)HS), *d = m->q[0];
    elem *ds = VW(m)->datt, *dqkv = VW(m)->dqkv;
    const elem *dy = VW(m)->dbt_c;
    struct ct_gemm_batch datt = { B, NH, (long)T * C, HS, (long)T * C3, HS, htt, tt };
    struct ct_gemm_batch dv = { B, NH, htt, tt, (long)T * C, HS, (long)T * C3, HS };
    struct ct_gemm_batch dqk = { B, NH, htt, tt, (long)T * C3, HS, (long)T * C3, HS };

    if (!d)
        return -1;
    /* datt = dy v^T (query rows over their keys); dv = att^T dy (keys over their queries), dv
     * straight into dqkv in bf16 */
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
        if (ct_gemm_batched(&datt, 0, 1, att_rows(r0, T), r0 + att_rows(r0, T), HS, dy + (size_t)r0 * C, C,
                            a->qkv + 2 * C, C3, CT_DTYPE_BF16, d + (size_t)r0 * T, T))
            return -1;
    for (int k0 = 0; k0 < T; k0 += ATT_BLOCK)
        if (ct_gemm_batched_to(&dv, 1, 0, att_rows(k0, T), HS, T - k0, a->att + (size_t)k0 * T + k0, T,
                               dy + (size_t)k0 * C, C, CT_DTYPE_BF16, 1.0f, CT_DTYPE_BF16,
                               dqkv + 2 * C + (size_t)k0 * C3, C3))
            return -1;
    /* through the softmax on the stored probabilities, each gradient rounded as a bf16 tensor is */
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++)
        gpt_causal_softmax_backward_rounded(d + (size_t)bh * tt, a->att + (size_t)bh * tt, ds + (size_t)bh * tt, T);
    /* dq and dk carry the scores' scale: the products' fp32 sums scaled, then rounded once */
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
        if (ct_gemm_batched_to(&dqk, 0, 0, att_rows(r0, T), HS, r0 + att_rows(r0, T), ds + (size_t)r0 * T, T,
                               a->qkv + C, C3, CT_DTYPE_BF16, scale, CT_DTYPE_BF16, dqkv + (size_t)r0 * C3, C3))
            return -1;
    for (int k0 = 0; k0 < T; k0 += ATT_BLOCK)
        if (ct_gemm_batched_to(&dqk, 1, 0, att_rows(k0, T), HS, T - k0, ds + (size_t)k0 * T + k0, T,
                               a->qkv + (size_t)k0 * C3, C3, CT_DTYPE_BF16, scale, CT_DTYPE_BF16,
                               dqkv + C + (size_t)k0 * C3, C3))
            return -1;
    return 0;
}

static void attention_forward(ct_gpt *m, struct ACTS *a, int B, int l)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    size_t th = (size_t)T * HS, tt = (size_t)T * T;

    (void)l;
    if (attention_forward_onednn(m, a, B) == 0)
        return;
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
                for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, att_rows(r0, T), r0 + att_rows(r0, T), HS,
                                scale, q + (size_t)r0 * HS, HS, k, HS, 0.0f, att + (size_t)r0 * T, T);
                gpt_causal_softmax(att, T);
                for (size_t i = 0; i < tt; i++) {
                    stored[i] = ST(att[i]);
                    att[i] = LD(stored[i]);
                }
                for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, att_rows(r0, T), HS, r0 + att_rows(r0, T),
                                1.0f, att + (size_t)r0 * T, T, v, HS, 0.0f, y + (size_t)r0 * HS, HS);
                head_store(a->atty + (size_t)b * T * C + h * HS, y, T, HS, C);
            }
        free(q);
    }
}

/* dqkv[BT,3C] from datty[BT,C] (VW(m)->dbt_c). */
static void attention_backward(ct_gpt *m, const struct ACTS *a, int B, int l)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    size_t th = (size_t)T * HS, tt = (size_t)T * T;

    (void)l;
    if (attention_backward_onednn(m, a, B) == 0)
        return;
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
                for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, att_rows(r0, T), r0 + att_rows(r0, T), HS,
                                1.0f, dy + (size_t)r0 * HS, HS, v, HS, 0.0f, d + (size_t)r0 * T, T);
                for (int k0 = 0; k0 < T; k0 += ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, att_rows(k0, T), HS, T - k0, 1.0f,
                                p + (size_t)k0 * T + k0, T, dy + (size_t)k0 * HS, HS, 0.0f, dv + (size_t)k0 * HS, HS);
                /* through the softmax, then the scaled q k^T */
                round_in_place(d, tt);
                gpt_causal_softmax_backward(d, p, T);
                round_in_place(d, tt);
                for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, att_rows(r0, T), HS, r0 + att_rows(r0, T),
                                scale, d + (size_t)r0 * T, T, k, HS, 0.0f, dq + (size_t)r0 * HS, HS);
                for (int k0 = 0; k0 < T; k0 += ATT_BLOCK)
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, att_rows(k0, T), HS, T - k0, scale,
                                d + (size_t)k0 * T + k0, T, q + (size_t)k0 * HS, HS, 0.0f, dk + (size_t)k0 * HS, HS);
                head_store(dqs, dq, T, HS, C3);
                head_store(dqs + C, dk, T, HS, C3);
                head_store(dqs + 2 * C, dv, T, HS, C3);
            }
        free(q);
    }
}
#else

#if GPT_F32
/* bf16-mixed attention on oneDNN: each product of a block of query rows (or of keys) runs for every
 * sequence and head at once, one batched primitive over the heads' strided views, on bf16 copies
 * of its inputs (PyTorch's autocast runs attention's bmm in bf16 too) into fp32. These small
 * per-head products are where OpenBLAS's fp32 kernels ran at a fraction of the Linear layers'
 * rate. The results are those of the per-head path below up to the order of fp32 sums. 0, or -1
 * when oneDNN made no primitive for one of the products: the caller then runs the per-head path,
 * which rewrites everything this one wrote. */
static int attention_forward_bf16(ct_gpt *m, struct ACTS *a, int B, int l)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    long tt = (long)T * T, htt = (long)NH * T * T;
    float scale = 1.0f / sqrtf((float)HS);
    const uint16_t *qkv = gemm_keep(m, a->qkv, (size_t)B * T * C3, l, KEEP_QKV);
    uint16_t *att = kept_slot(m, l, KEEP_ATT);
    /* (sequence b, head h): its q, k and v rows C3 apart in qkv, its scores T x T in att */
    struct ct_gemm_batch scores = { B, NH, (long)T * C3, HS, (long)T * C3, HS, htt, tt };
    struct ct_gemm_batch out = { B, NH, htt, tt, (long)T * C3, HS, (long)T * C, HS };

    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
        if (ct_gemm_batched(&scores, 0, 1, att_rows(r0, T), r0 + att_rows(r0, T), HS, qkv + (size_t)r0 * C3, C3,
                            qkv + C, C3, CT_DTYPE_BF16, a->att + (size_t)r0 * T, T))
            return -1;
    /* the fp32 probabilities (backward's softmax reads them) and their bf16 copy, kept for backward's
     * products, in one pass */
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++)
        gpt_causal_softmax_scaled(a->att + (size_t)bh * tt, att + (size_t)bh * tt, T, scale);
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
        if (ct_gemm_batched(&out, 0, 0, att_rows(r0, T), HS, r0 + att_rows(r0, T), att + (size_t)r0 * T, T,
                            qkv + 2 * C, C3, CT_DTYPE_BF16, a->atty + (size_t)r0 * C, C))
            return -1;
    return 0;
}

static int attention_backward_bf16(ct_gpt *m, const struct ACTS *a, int B, int l)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    long tt = (long)T * T, htt = (long)NH * T * T;
    float scale = 1.0f / sqrtf((float)HS);
    const uint16_t *qkv = gemm_kept(m, a->qkv, l, KEEP_QKV);
    const uint16_t *p = gemm_kept(m, a->att, l, KEEP_ATT);
    const uint16_t *dy = gemm_in(m, VW(m)->dbt_c, (size_t)B * T * C, 2), *ds;
    float *d = VW(m)->datt, *dq = VW(m)->dqkv;
    /* grids over (sequence, head) of: d's and the probabilities' T x T, dy's rows C apart, q's, k's,
     * v's and their gradients' rows C3 apart */
    struct ct_gemm_batch datt = { B, NH, (long)T * C, HS, (long)T * C3, HS, htt, tt };
    struct ct_gemm_batch dv = { B, NH, htt, tt, (long)T * C, HS, (long)T * C3, HS };
    struct ct_gemm_batch dqk = { B, NH, htt, tt, (long)T * C3, HS, (long)T * C3, HS };

    /* datt = dy v^T (query rows over their keys); dv = att^T dy (keys over their queries) */
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
        if (ct_gemm_batched(&datt, 0, 1, att_rows(r0, T), r0 + att_rows(r0, T), HS, dy + (size_t)r0 * C, C,
                            qkv + 2 * C, C3, CT_DTYPE_BF16, d + (size_t)r0 * T, T))
            return -1;
    for (int k0 = 0; k0 < T; k0 += ATT_BLOCK)
        if (ct_gemm_batched(&dv, 1, 0, att_rows(k0, T), HS, T - k0, p + (size_t)k0 * T + k0, T,
                            dy + (size_t)k0 * C, C, CT_DTYPE_BF16, dq + 2 * C + (size_t)k0 * C3, C3))
            return -1;
    /* through the softmax (fp32 probabilities), then the scaled q k^T */
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++)
        KSFX(gpt_causal_softmax_backward)(d + (size_t)bh * tt, a->att + (size_t)bh * tt, T);
    ds = gemm_in(m, d, (size_t)B * htt, 3);
    /* dq and dk carry the scores' scale: the products' fp32 sums scaled (a post-op, no pass of its own) */
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
        if (ct_gemm_batched_to(&dqk, 0, 0, att_rows(r0, T), HS, r0 + att_rows(r0, T), ds + (size_t)r0 * T, T,
                               qkv + C, C3, CT_DTYPE_BF16, scale, CT_DTYPE_F32, dq + (size_t)r0 * C3, C3))
            return -1;
    for (int k0 = 0; k0 < T; k0 += ATT_BLOCK)
        if (ct_gemm_batched_to(&dqk, 1, 0, att_rows(k0, T), HS, T - k0, ds + (size_t)k0 * T + k0, T,
                               qkv + (size_t)k0 * C3, C3, CT_DTYPE_BF16, scale, CT_DTYPE_F32, dq + C + (size_t)k0 * C3,
                               C3))
            return -1;
    return 0;
}
#endif

/* atty[BT,C] from qkv[BT,3C]: per sequence b and head h, att = causal_softmax(q k^T / sqrt(HS)),
 * then atty = att v, on strided views of qkv. */
static void attention_forward(ct_gpt *m, struct ACTS *a, int B, int l)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    real scale = (real)1 / SQRT((real)HS);
    const elem *qkv, *att;

#if GPT_F32
    /* backward takes the same path: it reads the bf16 copies this one keeps */
    m->att_onednn = m->gemm_dtype == CT_DTYPE_BF16 && attention_forward_bf16(m, a, B, l) == 0;
    if (m->att_onednn)
        return;
#else
    (void)l;
#endif
    qkv = gemm_act(m, a->qkv, (size_t)B * T * C3, 1);

    /* Heads are independent: one per OpenMP thread, each GEMM single-threaded (OpenBLAS's small-
     * matrix kernels run on the calling thread). */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const elem *q = qkv + (size_t)b * T * C3 + h * HS, *k = q + C;
            elem *pre = a->att + ((size_t)b * NH + h) * T * T;

            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, att_rows(r0, T), r0 + att_rows(r0, T), HS,
                            scale, q + (size_t)r0 * C3, C3, k, C3, (real)0, pre + (size_t)r0 * T, T);
            KSFX(gpt_causal_softmax)(pre, T);
        }
    att = gemm_act(m, a->att, (size_t)B * NH * T * T, 2);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const elem *v = qkv + (size_t)b * T * C3 + 2 * C + h * HS;
            const elem *p = att + ((size_t)b * NH + h) * T * T;
            elem *out = a->atty + (size_t)b * T * C + h * HS;

            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, att_rows(r0, T), HS, r0 + att_rows(r0, T),
                            (real)1, p + (size_t)r0 * T, T, v, C3, (real)0, out + (size_t)r0 * C, C);
        }
}

/* dqkv[BT,3C] from datty[BT,C] (VW(m)->dbt_c). */
static void attention_backward(ct_gpt *m, const struct ACTS *a, int B, int l)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    real scale = (real)1 / SQRT((real)HS);
    const elem *qkv, *att, *datty;

#if GPT_F32
    if (m->att_onednn && attention_backward_bf16(m, a, B, l) == 0)
        return;
#else
    (void)l;
#endif
    qkv = gemm_act(m, a->qkv, (size_t)B * T * C3, 0);
    att = gemm_act(m, a->att, (size_t)B * NH * T * T, 1);
    datty = gemm_act(m, VW(m)->dbt_c, (size_t)B * T * C, 2);

#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            elem *d = VW(m)->datt + ((size_t)b * NH + h) * T * T;
            size_t row = (size_t)b * T * C3 + h * HS;
            const elem *q = qkv + row, *k = q + C, *v = q + 2 * C;
            const elem *p = att + ((size_t)b * NH + h) * T * T;
            const elem *pf = a->att + ((size_t)b * NH + h) * T * T;
            const elem *dy = datty + (size_t)b * T * C + h * HS;
            elem *dq = VW(m)->dqkv + row, *dk = dq + C, *dv = dq + 2 * C;

            /* datt = dy v^T (query rows over their keys); dv = att^T dy (keys over their queries) */
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, att_rows(r0, T), r0 + att_rows(r0, T), HS,
                            (real)1, dy + (size_t)r0 * C, C, v, C3, (real)0, d + (size_t)r0 * T, T);
            for (int k0 = 0; k0 < T; k0 += ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, att_rows(k0, T), HS, T - k0, (real)1,
                            p + (size_t)k0 * T + k0, T, dy + (size_t)k0 * C, C, (real)0, dv + (size_t)k0 * C3, C3);
            /* through the softmax (fp32 probabilities), then the scaled q k^T */
            KSFX(gpt_causal_softmax_backward)(d, pf, T);
#if GPT_F32
            if (m->gemm_dtype == CT_DTYPE_BF16)
                ct_bf16_round_array(d, d, (size_t)T * T);
#endif
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, att_rows(r0, T), HS, r0 + att_rows(r0, T),
                            scale, d + (size_t)r0 * T, T, k, C3, (real)0, dq + (size_t)r0 * C3, C3);
            for (int k0 = 0; k0 < T; k0 += ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, att_rows(k0, T), HS, T - k0, scale,
                            d + (size_t)k0 * T + k0, T, q + (size_t)k0 * C3, C3, (real)0, dk + (size_t)k0 * C3, C3);
        }
}
#endif

/* --- forward ---------------------------------------------------------------------------------- */

static const elem *tensor_data(const ct_gpt *m, int i) { return m->tensors[i].data; }
static elem *tensor_grad(const ct_gpt *m, int i) { return VW(m)->grads + m->tensors[i].offset; }
static int block_tensor(int l, int which) { return 2 + l * BLK_TENSORS + which; }

/* need() for tensors first..last (adjacent in the parameter array). */
static int need_tensors(const ct_gpt *m, int first, int last, ct_param_need_fn need, void *ctx)
{
    size_t lo = m->tensors[first].offset;

    return need ? need(ctx, lo, m->tensors[last].offset + m->tensors[last].numel - lo) : 0;
}

double SFX(gpt_forward)(ct_gpt *m, const int32_t *inputs, const int32_t *targets, int batch, ct_param_need_fn need,
                      void *ctx)
{
    const ct_gpt_config *c = &m->cfg;
    int T = c->seq_len, C = c->n_embd, V = c->vocab, BT = batch * T, L = c->n_layer;
    const elem *x;
    int lf = 2 + L * BLK_TENSORS;

    /* A batch beyond what create allocated for would write past the activations. */
    if (batch < 1 || batch > m->max_batch) {
        m->batch = 0;
        return NAN;
    }
    m->inputs = inputs;
    m->targets = targets;
    m->batch = batch;
    if (m->gemm_dtype == CT_DTYPE_BF16) {
        if (need_tensors(m, 0, m->n_tensors - 1, need, ctx))
            return NAN;
#if GPT_F32
        ct_bf16_pack(VW(m)->params, m->params_b, m->n_params);
#endif
    } else if (need_tensors(m, 0, 1, need, ctx)) {
        return NAN;
    }
    KSFX(gpt_embed)(VW(m)->encoded, inputs, tensor_data(m, 0), tensor_data(m, 1), batch, T, C);
    x = VW(m)->encoded;
    for (int l = 0; l < L; l++) {
        struct ACTS *a = &VW(m)->blocks[l];
        const elem *w[BLK_TENSORS];
        const void *in;

        if (m->gemm_dtype != CT_DTYPE_BF16 &&
            need_tensors(m, block_tensor(l, 0), block_tensor(l, BLK_TENSORS - 1), need, ctx))
            return NAN;
        for (int i = 0; i < BLK_TENSORS; i++)
            w[i] = tensor_data(m, block_tensor(l, i));
        in = ln_forward(m, a->ln1, a->ln1_mean, a->ln1_rstd, x, w[BLK_LN1_W], w[BLK_LN1_B], BT, C, l, KEEP_LN1);
        linear_forward(m, a->qkv, NULL, in, w[BLK_ATTN_W], w[BLK_ATTN_B], BT, C, 3 * C);
        attention_forward(m, a, batch, l);
        in = gemm_keep(m, a->atty, (size_t)BT * C, l, KEEP_ATTY);
        linear_forward(m, a->res2, x, in, w[BLK_APROJ_W], w[BLK_APROJ_B], BT, C, C);
        in = ln_forward(m, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w[BLK_LN2_W], w[BLK_LN2_B], BT, C, l,
                        KEEP_LN2);
        linear_forward(m, a->fch, NULL, in, w[BLK_FC_W], w[BLK_FC_B], BT, C, 4 * C);
        in = gelu_forward(m, a->fch_gelu, a->fch, (size_t)BT * 4 * C, l, KEEP_FCH);
        linear_forward(m, a->res3, a->res2, in, w[BLK_FPROJ_W], w[BLK_FPROJ_B], BT, 4 * C, C);
        x = a->res3;
    }
    if (m->gemm_dtype != CT_DTYPE_BF16 && need_tensors(m, lf, lf + 1, need, ctx))
        return NAN;
    KSFX(gpt_layernorm_forward)(VW(m)->lnf, VW(m)->lnf_mean, VW(m)->lnf_rstd, x, tensor_data(m, lf),
                                tensor_data(m, lf + 1), BT, C);
    /* logits = lnf wte^T: the LM head is the token embedding, transposed */
    GEMM(0, 1, BT, V, C, gemm_keep(m, VW(m)->lnf, (size_t)BT * C, L, KEEP_LN1), C, gemm_param(m, tensor_data(m, 0)), C,
            m->gemm_dtype, 0, VW(m)->probs, V);
    return KSFX(gpt_softmax_xent_forward)(VW(m)->probs, targets, BT, V);
}

/* A shorter sequence is a forward at seq_len len: every stride below reads cfg.seq_len, and
 * the buffers made for seq_len hold one sequence of fewer tokens. The tokens stand in as targets
 * (the loss is not used); the last row of the final LayerNorm then goes through the LM head. */
int SFX(gpt_next_token_logits)(ct_gpt *m, const int32_t *tokens, int len, float *logits)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd;

    if (len < 1 || len > T || m->max_batch < 1)
        return CT_EINVAL;
    m->cfg.seq_len = len;
    SFX(gpt_forward)(m, tokens, tokens, 1, NULL, NULL);
    m->cfg.seq_len = T;
    m->batch = 0; /* no backward of this forward */
#if GPT_F32
    cblas_sgemv(CblasRowMajor, CblasNoTrans, m->cfg.vocab, C, 1.0f, tensor_data(m, 0), C,
                VW(m)->lnf + (size_t)(len - 1) * C, 1, 0.0f, logits, 1);
#else
    {
        const elem *wte = tensor_data(m, 0), *x = VW(m)->lnf + (size_t)(len - 1) * C;

        for (int v = 0; v < m->cfg.vocab; v++) {
            real dot = 0;

            for (int i = 0; i < C; i++)
                dot += (real)LD(wte[(size_t)v * C + i]) * LD(x[i]);
            logits[v] = (float)dot;
        }
    }
#endif
    return 0;
}

/* --- backward --------------------------------------------------------------------------------- */

static int announce(const ct_gpt *m, int t, ct_grad_ready_fn ready, void *ctx)
{
    return ready ? ready(ctx, m->tensors[t].offset, m->tensors[t].numel) : 0;
}

/* Announce tensors hi, hi-1, ..., lo (a contiguous run finished together). */
static int announce_run(const ct_gpt *m, int hi, int lo, ct_grad_ready_fn ready, void *ctx)
{
    int rv = 0;

    for (int t = hi; t >= lo && rv == 0; t--)
        rv = announce(m, t, ready, ctx);
    return rv;
}

/* Block l's backward: VW(m)->dres holds the gradient of its output res3 on entry and of its input on
 * return. */
static int block_backward(ct_gpt *m, int l, const elem *x, ct_grad_ready_fn ready, void *ctx)
{
    const ct_gpt_config *c = &m->cfg;
    const struct ACTS *a = &VW(m)->blocks[l];
    int B = m->batch, T = c->seq_len, C = c->n_embd, BT = B * T;
    const elem *w[BLK_TENSORS];
    elem *g[BLK_TENSORS];
    int t0 = block_tensor(l, 0), rv;

    for (int i = 0; i < BLK_TENSORS; i++) {
        w[i] = tensor_data(m, t0 + i);
        g[i] = tensor_grad(m, t0 + i);
    }
    /* MLP: res3 = res2 + gelu(ln2 Wfc^T + bfc) Wproj^T + bproj */
    linear_backward(m, VW(m)->dfch, g[BLK_FPROJ_W], g[BLK_FPROJ_B], VW(m)->dres, a->fch_gelu, w[BLK_FPROJ_W], BT,
                    4 * C, C, l, KEEP_FCH);
    if ((rv = announce_run(m, t0 + BLK_FPROJ_B, t0 + BLK_FPROJ_W, ready, ctx)))
        return rv;
    KSFX(gpt_gelu_backward)(VW(m)->dfch, a->fch, (size_t)BT * 4 * C);
    linear_backward(m, VW(m)->dbt_c, g[BLK_FC_W], g[BLK_FC_B], VW(m)->dfch, a->ln2, w[BLK_FC_W], BT, C, 4 * C, l,
                    KEEP_LN2);
    if ((rv = announce_run(m, t0 + BLK_FC_B, t0 + BLK_FC_W, ready, ctx)))
        return rv;
    KSFX(gpt_layernorm_backward)(VW(m)->dres, g[BLK_LN2_W], g[BLK_LN2_B], VW(m)->dbt_c, a->res2, w[BLK_LN2_W],
                                 a->ln2_mean, a->ln2_rstd, BT, C);
    if ((rv = announce_run(m, t0 + BLK_LN2_B, t0 + BLK_LN2_W, ready, ctx)))
        return rv;
    /* attention: res2 = x + attention(ln1 Wattn^T + battn) Wproj^T + bproj */
    linear_backward(m, VW(m)->dbt_c, g[BLK_APROJ_W], g[BLK_APROJ_B], VW(m)->dres, a->atty, w[BLK_APROJ_W], BT, C, C,
                    l, KEEP_ATTY);
    if ((rv = announce_run(m, t0 + BLK_APROJ_B, t0 + BLK_APROJ_W, ready, ctx)))
        return rv;
    attention_backward(m, a, B, l);
    linear_backward(m, VW(m)->dbt_c, g[BLK_ATTN_W], g[BLK_ATTN_B], VW(m)->dqkv, a->ln1, w[BLK_ATTN_W], BT, C, 3 * C,
                    l, KEEP_LN1);
    if ((rv = announce_run(m, t0 + BLK_ATTN_B, t0 + BLK_ATTN_W, ready, ctx)))
        return rv;
    KSFX(gpt_layernorm_backward)(VW(m)->dres, g[BLK_LN1_W], g[BLK_LN1_B], VW(m)->dbt_c, x, w[BLK_LN1_W], a->ln1_mean,
                           a->ln1_rstd, BT, C);
    return announce_run(m, t0 + BLK_LN1_B, t0 + BLK_LN1_W, ready, ctx);
}

int SFX(gpt_backward)(ct_gpt *m, double scale_tokens, ct_grad_ready_fn ready, void *ctx)
{
    const ct_gpt_config *c = &m->cfg;
    int B = m->batch, T = c->seq_len, C = c->n_embd, V = c->vocab, BT = B * T, L = c->n_layer;
    int lf = 2 + L * BLK_TENSORS, rv;
    elem *dwte = tensor_grad(m, 0);

    if (B == 0)
        return CT_EINTERNAL; /* no forward (or a refused one) to take the gradient of */
    KSFX(gpt_softmax_xent_backward)(VW(m)->probs, m->targets, BT, V, (real)(1.0 / scale_tokens));
    {
        const void *dlogits = gemm_in(m, VW(m)->probs, (size_t)BT * V, 0);
        /* LM head: dlnf = dlogits wte; dwte = dlogits^T lnf (the embedding adds to it last) */
        struct gemm_job dlnf = { 0, 0, BT, C, V, dlogits, V, gemm_param(m, tensor_data(m, 0)), C, VW(m)->dbt_c, C };
        struct gemm_job dw = { 1, 0, V, C, BT, dlogits, V, gemm_kept(m, VW(m)->lnf, L, KEEP_LN1), C, dwte, C };

        gemm_pair(m, NULL, NULL, BT, V, &dw, &dlnf);
    }
    memset(VW(m)->dres, 0, sizeof(elem) * (size_t)BT * C);
    KSFX(gpt_layernorm_backward)(VW(m)->dres, tensor_grad(m, lf), tensor_grad(m, lf + 1), VW(m)->dbt_c,
                                 L ? VW(m)->blocks[L - 1].res3 : VW(m)->encoded, tensor_data(m, lf), VW(m)->lnf_mean,
                                 VW(m)->lnf_rstd, BT, C);
    if ((rv = announce_run(m, lf + 1, lf, ready, ctx)))
        return rv;
    for (int l = L - 1; l >= 0; l--)
        if ((rv = block_backward(m, l, l ? VW(m)->blocks[l - 1].res3 : VW(m)->encoded, ready, ctx)))
            return rv;
    KSFX(gpt_embed_backward)(dwte, tensor_grad(m, 1), VW(m)->dres, m->inputs, B, T, C);
    return announce_run(m, 1, 0, ready, ctx);
}
