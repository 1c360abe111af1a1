/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's step in fp32: 32-true, and bf16-mixed, whose GEMMs read bf16 copies (the parameters
 * packed once per forward, each activation as a GEMM reads it, those backward reads again kept from
 * forward) and accumulate in fp32 on oneDNN. This file: fp32's thin kernels, bf16-mixed's copies
 * and attention's paths (batched on oneDNN under bf16-mixed; per head on OpenBLAS), then the layers
 * and the top-down step (gpt_internal.h has the map of the step's files). */
#include <cblas.h>
#include <math.h>

#include "engine/models/gpt/gpt_internal.h"
#include "engine/models/gpt/gpt_passes.h"
#include "engine/nn/gemm.h"

#define elem float
#define real float
#define LD(x) (x)
#define ST(v) (v)
#define SQRT sqrtf
#define BLAS_GEMM cblas_sgemm
#define SFX(name) name##_f32
#define PASS(name) name
#define ACTS gpt_block_acts
#define VW(m) (&(m)->v.f32)

/* --- which GEMM ------------------------------------------------------------------------------- */

static void gemm(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                 enum ct_dtype ab, int accumulate, float *C, int ldc)
{
    ct_gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, ab, accumulate, C, ldc);
}

/* oneDNN adds the bias as it stores the product (no pass to fill C with it first). */
static void gemm_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                      enum ct_dtype ab, const float *bias, float *C, int ldc)
{
    ct_gemm_bias(trans_a, trans_b, M, N, K, A, lda, B, ldb, ab, bias, C, ldc);
}

/* oneDNN's products on a thread each of a team of two (gemm_pair). */
static int gemm_pairs(void) { return ct_gemm_get_threads() == 2; }

/* --- what the GEMMs read: fp32, or bf16-mixed's copies ---------------------------------------- */

static int mixed(const ct_gpt *m) { return m->gemm_dtype == CT_DTYPE_BF16; }

/* Parameter p itself, or its bf16 copy. */
static const void *gemm_param(const ct_gpt *m, const float *p)
{
    return mixed(m) ? (const void *)(m->params_b + (p - VW(m)->params)) : p;
}

/* Activation x[n] itself, or x packed to bf16 in copy slot. */
static const void *gemm_in(ct_gpt *m, const float *x, size_t n, int slot)
{
    if (!mixed(m))
        return x;
    ct_bf16_pack(x, m->qb[slot], n);
    return m->qb[slot];
}

/* bf16-mixed keeps, for backward, the bf16 copy forward packed of each activation a GEMM reads
 * again there (packing it twice cost a pass over it each time): gpt_internal.h's KEEP_* slots. */
static uint16_t *kept_slot(const ct_gpt *m, int l, int which)
{
    return m->keep_b + gpt_kept_at(m, l, which);
}

/* Where a pass whose output only a GEMM reads (a LayerNorm, GELU) writes it packed to bf16 instead
 * of in fp32: block l's kept copy `which` under bf16-mixed, else NULL (the fp32 output). */
static uint16_t *kept_out(const ct_gpt *m, int l, int which) { return mixed(m) ? kept_slot(m, l, which) : NULL; }

/* gemm_in for an activation backward reads again: packed into block l's kept copy `which`. */
static const void *gemm_keep(ct_gpt *m, const float *x, size_t n, int l, int which)
{
    uint16_t *k = kept_out(m, l, which);

    if (!k)
        return x;
    ct_bf16_pack(x, k, n);
    return k;
}

/* What backward's GEMM reads for activation x of block l: x, or the copy forward kept. */
static const void *gemm_kept(const ct_gpt *m, const float *x, int l, int which)
{
    return mixed(m) ? (const void *)kept_slot(m, l, which) : x;
}

/* What a Linear's two backward products read for its output gradient dout[BT,OC]: dout, or under
 * bf16-mixed its bf16 copy, packed in the same pass over dout as the bias gradient *db (then
 * done: *db is set to NULL). */
static const void *gemm_dout(ct_gpt *m, float **db, const float *dout, int BT, int OC)
{
    if (!mixed(m))
        return dout;
    gpt_column_sums_packed(*db, m->qb[0], dout, BT, OC);
    *db = NULL;
    return m->qb[0];
}

/* bf16-mixed's parameters packed once per forward (the optimizer changed them since). */
static void pack_params(ct_gpt *m)
{
    if (mixed(m))
        ct_bf16_pack(VW(m)->params, m->params_b, m->n_params);
}

/* What an OpenBLAS GEMM (attention per head) reads for activation x[n]: x itself, or x rounded to
 * bf16 in fp32 copy number slot; and the same for scratch x, in place. */
static const float *gemm_act(ct_gpt *m, const float *x, size_t n, int slot)
{
    if (!mixed(m))
        return x;
    ct_bf16_round_array(x, m->q[slot], n);
    return m->q[slot];
}

static void gemm_act_in_place(ct_gpt *m, float *x, size_t n)
{
    if (mixed(m))
        ct_bf16_round_array(x, x, n);
}

/* One row of logits (ct_gpt_next_token_logits): wte x. */
static void logits_row(const ct_gpt *m, const float *wte, const float *x, float *logits)
{
    cblas_sgemv(CblasRowMajor, CblasNoTrans, m->cfg.vocab, m->cfg.n_embd, 1.0f, wte, m->cfg.n_embd, x, 1, 0.0f,
                logits, 1);
}

/* --- attention -------------------------------------------------------------------------------- */

#include "engine/models/gpt/gpt_attention_heads_tmpl.h"

/* bf16-mixed attention on oneDNN: each product of a block of query rows (or of keys) runs for every
 * sequence and head at once, one batched primitive over the heads' strided views, on bf16 copies
 * of its inputs (PyTorch's autocast runs attention's bmm in bf16 too) into fp32. These small
 * per-head products are where OpenBLAS's fp32 kernels ran at a fraction of the Linear layers'
 * rate. The results are those of the per-head path (gpt_attention_heads_tmpl.h) up to the order of
 * fp32 sums. 0, or -1 under 32-true or when oneDNN made no primitive for one of the products: the
 * per-head path then runs and rewrites everything this one wrote. */
static int attention_forward_mixed(ct_gpt *m, int l, int B)
{
    struct ACTS *a = &VW(m)->blocks[l];
    int T = m->cfg.seq_len, C = m->cfg.n_embd;
    const uint16_t *qkv;

    /* 32-true, and bf16-mixed where oneDNN has no bf16 matmul: per head (on fp32 copies rounded
     * once per tensor, where batched products would widen their views at every call) */
    if (!mixed(m) || !ct_gemm_bf16_native())
        return -1;
    qkv = gemm_keep(m, a->qkv, (size_t)B * T * 3 * C, l, KEEP_QKV);
    /* the fp32 probabilities (backward's softmax reads them) in a->att, their bf16 copy kept for
     * backward's products */
    return gpt_attention_batched(B, T, C, m->cfg.n_head, qkv, a->att, kept_slot(m, l, KEEP_ATT), CT_DTYPE_F32, a->atty);
}

static int attention_backward_mixed(ct_gpt *m, int l, int B)
{
    const struct ACTS *a = &VW(m)->blocks[l];
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
    for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
        if (ct_gemm_batched(&datt, 0, 1, gpt_att_rows(r0, T), r0 + gpt_att_rows(r0, T), HS, dy + (size_t)r0 * C, C,
                            qkv + 2 * C, C3, CT_DTYPE_BF16, d + (size_t)r0 * T, T))
            return -1;
    for (int k0 = 0; k0 < T; k0 += GPT_ATT_BLOCK)
        if (ct_gemm_batched(&dv, 1, 0, gpt_att_rows(k0, T), HS, T - k0, p + (size_t)k0 * T + k0, T,
                            dy + (size_t)k0 * C, C, CT_DTYPE_BF16, dq + 2 * C + (size_t)k0 * C3, C3))
            return -1;
    /* through the softmax (fp32 probabilities), then the scaled q k^T */
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++)
        PASS(gpt_causal_softmax_backward)(d + (size_t)bh * tt, a->att + (size_t)bh * tt, T);
    ds = gemm_in(m, d, (size_t)B * htt, 3);
    /* dq and dk carry the scores' scale: the products' fp32 sums scaled (a post-op, no pass of its own) */
    for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
        if (ct_gemm_batched_to(&dqk, 0, 0, gpt_att_rows(r0, T), HS, r0 + gpt_att_rows(r0, T), ds + (size_t)r0 * T, T,
                               qkv + C, C3, CT_DTYPE_BF16, scale, CT_DTYPE_F32, dq + (size_t)r0 * C3, C3))
            return -1;
    for (int k0 = 0; k0 < T; k0 += GPT_ATT_BLOCK)
        if (ct_gemm_batched_to(&dqk, 1, 0, gpt_att_rows(k0, T), HS, T - k0, ds + (size_t)k0 * T + k0, T,
                               qkv + (size_t)k0 * C3, C3, CT_DTYPE_BF16, scale, CT_DTYPE_F32, dq + C + (size_t)k0 * C3,
                               C3))
            return -1;
    return 0;
}

/* Tried in order (gpt_internal.h): the batched path under bf16-mixed (its backward reads the bf16
 * copies its forward kept), else per head. */
static const struct gpt_attention_path attention_paths[] = {
    { attention_forward_mixed, attention_backward_mixed, 1 }, /* bf16-mixed: batched on oneDNN */
    { attention_forward_heads, attention_backward_heads, 0 },  /* per head on OpenBLAS */
};

#include "engine/models/gpt/gpt_layers_tmpl.h"
#include "engine/models/gpt/gpt_step_tmpl.h"
