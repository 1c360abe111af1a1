/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's layers, one function for each layer's forward and one for its backward, as llm.c's
 * train_gpt2.c writes them (encoder, layernorm, matmul, attention, gelu, residual, crossentropy);
 * gpt_step_tmpl.h calls them top-down. Written once for every element type and included by each
 * type's file (gpt_internal.h has the map) after its thin kernels:
 *   elem, real      the storage type, and the type the arithmetic runs in (fp32 for bf16 storage)
 *   PASS(name)      the type's element-wise passes (gpt_passes.h); ACTS, VW(m) its activations, view
 *   gemm, gemm_bias ct_gemm's contract with C of type elem (gemm_bias: plus a bias row, no accumulate)
 *   gemm_pairs      1 when backward's two products run on a thread each (gemm_pair)
 *   gemm_param, gemm_in, gemm_keep, gemm_kept, gemm_dout, kept_out
 *                   what a GEMM reads for a parameter or an activation: itself, or bf16-mixed's
 *                   copy (packed here, or kept from forward); kept_out NULL unless a pass writes its
 *                   output straight to such a copy
 *   attention_paths the type's attention paths, tried in order (struct gpt_attention_path)
 * No storage type is named here: what differs by type is in those kernels. */
#include <omp.h>
#include <string.h>

/* --- parameters ------------------------------------------------------------------------------- */

static const elem *tensor_data(const ct_gpt *m, int i) { return m->tensors[i].data; }
static elem *tensor_grad(const ct_gpt *m, int i) { return VW(m)->grads + m->tensors[i].offset; }
static int block_tensor(int l, int which) { return 2 + l * BLK_TENSORS + which; }

/* --- encoder: token and position embeddings --------------------------------------------------- */

/* out[b,t,:] = wte[inputs[b,t],:] + wpe[t,:] */
static void encoder_forward(const ct_gpt *m, elem *out, const int32_t *inputs, int B)
{
    PASS(gpt_embed)(out, inputs, tensor_data(m, 0), tensor_data(m, 1), B, m->cfg.seq_len, m->cfg.n_embd);
}

/* dwte += dout at each input's row (the LM head wrote it first), dwpe = dout summed over sequences. */
static void encoder_backward(const ct_gpt *m, const elem *dout, int B)
{
    PASS(gpt_embed_backward)(tensor_grad(m, 0), tensor_grad(m, 1), dout, m->inputs, B, m->cfg.seq_len,
                             m->cfg.n_embd);
}

/* --- layernorm -------------------------------------------------------------------------------- */

/* out = LayerNorm(x) (keeping mean and rstd for backward); returns what the next GEMM reads. With
 * kept (kept_out: bf16-mixed, where the GEMM is all out is read for) the output goes there packed
 * to bf16 instead and out is not written: backward reads x, mean and rstd. */
static const void *layernorm_forward(elem *out, elem *mean, elem *rstd, const elem *x, const elem *w, const elem *b,
                                     int BT, int C, uint16_t *kept)
{
    if (kept) {
        PASS(gpt_layernorm_forward_packed)(kept, mean, rstd, x, w, b, BT, C);
        return kept;
    }
    PASS(gpt_layernorm_forward)(out, mean, rstd, x, w, b, BT, C);
    return out;
}

/* dx += the input's gradient; dw, db overwritten. */
static void layernorm_backward(elem *dx, elem *dw, elem *db, const elem *dout, const elem *x, const elem *w,
                               const elem *mean, const elem *rstd, int BT, int C)
{
    PASS(gpt_layernorm_backward)(dx, dw, db, dout, x, w, mean, rstd, BT, C);
}

/* --- matmul: a Linear layer, and the residual add ----------------------------------------------- */

/* out[BT,OC] = (residual ? residual : 0) + in[BT,IC] W[OC,IC]^T + b; inq is what the GEMM reads for
 * in (in itself, or its bf16 copy: gemm_keep, layernorm_forward, gelu_forward). llm.c's
 * residual_forward is folded in: the GEMM accumulates onto residual + b. */
static void linear_forward(const ct_gpt *m, elem *out, const elem *residual, const void *inq, const elem *w,
                           const elem *b, int BT, int IC, int OC)
{
    if (!residual) {
        gemm_bias(0, 1, BT, OC, IC, inq, IC, gemm_param(m, w), IC, m->gemm_dtype, b, out, OC);
        return;
    }
    PASS(gpt_bias_fill)(out, residual, b, BT, OC);
    gemm(0, 1, BT, OC, IC, inq, IC, gemm_param(m, w), IC, m->gemm_dtype, 1, out, OC);
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
    gemm(j->trans_a, j->trans_b, j->M, j->N, j->K, j->A, j->lda, j->B, j->ldb, m->gemm_dtype, 0, j->C, j->ldc);
}

/* first (after db = column sums of dout[BT,OC], when db is given) and second, on one thread each
 * of a team of two, else one after the other on the whole team. */
static void gemm_pair(const ct_gpt *m, elem *db, const elem *dout, int BT, int OC, const struct gemm_job *first,
                      const struct gemm_job *second)
{
    if (!gemm_pairs()) {
        if (db)
            PASS(gpt_column_sums)(db, dout, BT, OC);
        gemm_job_run(m, first);
        gemm_job_run(m, second);
        return;
    }
#pragma omp parallel num_threads(2)
    {
        /* a team of one (the runtime gave no second thread) runs both */
        int t = omp_get_thread_num(), one = omp_get_num_threads() == 1;

        if (t == 0 && db)
            PASS(gpt_column_sums)(db, dout, BT, OC);
        if (t == 0)
            gemm_job_run(m, first);
        if (t == 1 || one)
            gemm_job_run(m, second);
    }
}

/* From dout[BT,OC]: dw[OC,IC] = dout^T in, db = column sums of dout, din[BT,IC] = dout W (in: block
 * l's activation `keep`, as forward read it). The residual's backward is the caller's: dout is
 * the residual stream's gradient, which flows on unchanged. */
static void linear_backward(ct_gpt *m, elem *din, elem *dw, elem *db, const elem *dout, const elem *in,
                            const elem *w, int BT, int IC, int OC, int l, int keep)
{
    struct gemm_job dwj = { 1, 0, OC, IC, BT, NULL, OC, gemm_kept(m, in, l, keep), IC, dw, IC };
    struct gemm_job dinj = { 0, 0, BT, IC, OC, NULL, OC, gemm_param(m, w), IC, din, IC };

    dwj.A = dinj.A = gemm_dout(m, &db, dout, BT, OC);
    gemm_pair(m, db, dout, BT, OC, &dwj, &dinj);
}

/* --- attention -------------------------------------------------------------------------------- */

#define ATTENTION_PATHS ((int)(sizeof(attention_paths) / sizeof(attention_paths[0])))

/* Block l's atty[BT,C] from its qkv[BT,3C]: the first of the type's paths that runs here. */
static void attention_forward(ct_gpt *m, int l, int B)
{
    for (int i = 0; i < ATTENTION_PATHS; i++)
        if (attention_paths[i].forward(m, l, B) == 0) {
            m->att_path = i;
            return;
        }
}

/* dqkv[BT,3C] from datty[BT,C] (VW(m)->dbt_c): the first path that runs, skipping one whose
 * backward needs its own forward's copies when the last forward took another. */
static void attention_backward(ct_gpt *m, int l, int B)
{
    for (int i = 0; i < ATTENTION_PATHS; i++) {
        const struct gpt_attention_path *p = &attention_paths[i];

        if (p->after_forward && m->att_path != i)
            continue;
        if (p->backward(m, l, B) == 0)
            return;
    }
}

/* --- gelu ------------------------------------------------------------------------------------- */

/* GELU of x[n] into out, or into kept packed to bf16 as layernorm_forward; returns what the next
 * GEMM reads (backward reads x: fch). */
static const void *gelu_forward(elem *out, const elem *x, size_t n, uint16_t *kept)
{
    if (kept) {
        PASS(gpt_gelu_forward_packed)(kept, x, n);
        return kept;
    }
    PASS(gpt_gelu_forward)(out, x, n);
    return out;
}

/* d[n] holds the output's gradient on entry, the input's on return. */
static void gelu_backward(elem *d, const elem *x, size_t n) { PASS(gpt_gelu_backward)(d, x, n); }

/* --- crossentropy: the tied LM head, softmax and loss ----------------------------------------- */

/* logits = lnf wte^T into probs[BT,V] (the LM head is the token embedding, transposed), then
 * softmax in place; returns the summed -log p(target) in nats. */
static double crossentropy_forward(ct_gpt *m, const int32_t *targets, int BT)
{
    int C = m->cfg.n_embd, V = m->cfg.vocab;
    const void *lnf = gemm_keep(m, VW(m)->lnf, (size_t)BT * C, m->cfg.n_layer, KEEP_LN1);

    gemm(0, 1, BT, V, C, lnf, C, gemm_param(m, tensor_data(m, 0)), C, m->gemm_dtype, 0, VW(m)->probs, V);
    return PASS(gpt_softmax_xent_forward)(VW(m)->probs, targets, BT, V);
}

/* probs -> dlogits = (probs - onehot) / scale_tokens in place; dlnf (VW(m)->dbt_c) = dlogits wte,
 * dwte = dlogits^T lnf (written here: the encoder adds to it last). */
static void crossentropy_backward(ct_gpt *m, double scale_tokens, int BT)
{
    int C = m->cfg.n_embd, V = m->cfg.vocab;
    const void *dlogits;

    PASS(gpt_softmax_xent_backward)(VW(m)->probs, m->targets, BT, V, (real)(1.0 / scale_tokens));
    dlogits = gemm_in(m, VW(m)->probs, (size_t)BT * V, 0);
    {
        struct gemm_job dlnf = { 0, 0, BT, C, V, dlogits, V, gemm_param(m, tensor_data(m, 0)), C, VW(m)->dbt_c, C };
        struct gemm_job dw = { 1, 0, V, C, BT, dlogits, V, gemm_kept(m, VW(m)->lnf, m->cfg.n_layer, KEEP_LN1), C,
                               tensor_grad(m, 0), C };

        gemm_pair(m, NULL, NULL, BT, V, &dw, &dlnf);
    }
}
