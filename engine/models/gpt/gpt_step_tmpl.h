/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's step, top-down as llm.c's gpt2_forward and gpt2_backward: the embedding, each block's
 * layers, the final LayerNorm and the LM head's cross-entropy, then backward in reverse, each
 * layer a call into gpt_layers_tmpl.h. Included by each type's file after gpt_layers_tmpl.h
 * (gpt_internal.h has the map); defines the type's entry points SFX(gpt_carve), SFX(gpt_forward),
 * SFX(gpt_backward) and SFX(gpt_next_token_logits). See engine/models/gpt/gpt.c for the shapes. */
#include <math.h>

/* Block a's inner activations (all but its output res3) from *pp on, advancing it. */
static void carve_block(struct ACTS *a, elem **pp, size_t B, size_t T, size_t C, size_t NH)
{
    size_t BT = B * T;
    elem *p = *pp;

    a->ln1 = p, p += BT * C;
    a->ln1_mean = p, p += BT;
    a->ln1_rstd = p, p += BT;
    a->qkv = p, p += BT * 3 * C;
    a->att = p, p += B * NH * T * T;
    a->atty = p, p += BT * C;
    a->res2 = p, p += BT * C;
    a->ln2 = p, p += BT * C;
    a->ln2_mean = p, p += BT;
    a->ln2_rstd = p, p += BT;
    a->fch = p, p += BT * 4 * C;
    a->fch_gelu = p, p += BT * 4 * C;
    *pp = p;
}

/* Cut the model's arrays into this type's view (at create, and again when the type or activation
 * checkpointing changes). Checkpointing: every block's output, then one block's inner activations
 * that every block's view points at. */
void SFX(gpt_carve)(ct_gpt *m)
{
    const ct_gpt_config *c = &m->cfg;
    size_t B = (size_t)m->max_batch, T = (size_t)c->seq_len, C = (size_t)c->n_embd, BT = B * T, NH = c->n_head;
    elem *p = m->acts_mem;

    VW(m)->params = m->params;
    VW(m)->grads = m->grads;
    VW(m)->blocks = m->blocks_mem;
    VW(m)->encoded = p, p += BT * C;
    if (m->act_ckpt) {
        elem *res3 = p;

        p += BT * C * c->n_layer;
        carve_block(&VW(m)->blocks[0], &p, B, T, C, NH);
        for (int l = 0; l < c->n_layer; l++) {
            VW(m)->blocks[l] = VW(m)->blocks[0];
            VW(m)->blocks[l].res3 = res3 + BT * C * l;
        }
    } else {
        for (int l = 0; l < c->n_layer; l++) {
            carve_block(&VW(m)->blocks[l], &p, B, T, C, NH);
            VW(m)->blocks[l].res3 = p, p += BT * C;
        }
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

/* --- forward ---------------------------------------------------------------------------------- */

/* need() for tensors first..last (adjacent in the parameter array). */
static int need_tensors(const ct_gpt *m, int first, int last, ct_param_need_fn need, void *ctx)
{
    size_t lo = m->tensors[first].offset;

    return need ? need(ctx, lo, m->tensors[last].offset + m->tensors[last].numel - lo) : 0;
}

/* A block's parameters in three parts of about 4 C^2 each, in array order, each announced (need)
 * right before the layers that read it: fsdp gathers, and frees, a part at a time, so at most a
 * part and the next one are whole on a rank (not two blocks). */
enum { PART_ATTN, PART_FC, PART_FPROJ, PARTS };
static const int part_first[PARTS + 1] = { BLK_LN1_W, BLK_LN2_W, BLK_FPROJ_W, BLK_TENSORS };

static int need_part(const ct_gpt *m, int l, int part, ct_param_need_fn need, void *ctx)
{
    return need_tensors(m, block_tensor(l, part_first[part]), block_tensor(l, part_first[part + 1] - 1), need, ctx);
}

/* Block l on its input x (the previous block's output, or the embedding): res3 = res2 + MLP(ln2),
 * res2 = x + attention(ln1). -1 when need() refused the block's parameters. */
static int block_forward(ct_gpt *m, int l, const elem *x, int B, ct_param_need_fn need, void *ctx)
{
    struct ACTS *a = &VW(m)->blocks[l];
    int C = m->cfg.n_embd, BT = B * m->cfg.seq_len;
    const elem *w[BLK_TENSORS];
    const void *in;

    if (m->gemm_dtype == CT_DTYPE_BF16)
        need = NULL; /* bf16's GEMMs read the copy forward packed of every parameter */
    for (int i = 0; i < BLK_TENSORS; i++)
        w[i] = tensor_data(m, block_tensor(l, i));
    if (need_part(m, l, PART_ATTN, need, ctx))
        return -1;
    in = layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, w[BLK_LN1_W], w[BLK_LN1_B], BT, C,
                           kept_out(m, l, KEEP_LN1));
    linear_forward(m, a->qkv, NULL, in, w[BLK_ATTN_W], w[BLK_ATTN_B], BT, C, 3 * C);
    attention_forward(m, l, B);
    in = gemm_keep(m, a->atty, (size_t)BT * C, l, KEEP_ATTY);
    linear_forward(m, a->res2, x, in, w[BLK_APROJ_W], w[BLK_APROJ_B], BT, C, C);
    if (need_part(m, l, PART_FC, need, ctx))
        return -1;
    in = layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w[BLK_LN2_W], w[BLK_LN2_B], BT, C,
                           kept_out(m, l, KEEP_LN2));
    linear_forward(m, a->fch, NULL, in, w[BLK_FC_W], w[BLK_FC_B], BT, C, 4 * C);
    in = gelu_forward(a->fch_gelu, a->fch, (size_t)BT * 4 * C, kept_out(m, l, KEEP_FCH));
    if (need_part(m, l, PART_FPROJ, need, ctx))
        return -1;
    linear_forward(m, a->res3, a->res2, in, w[BLK_FPROJ_W], w[BLK_FPROJ_B], BT, 4 * C, C);
    return 0;
}

double SFX(gpt_forward)(ct_gpt *m, const int32_t *inputs, const int32_t *targets, int batch, ct_param_need_fn need,
                        void *ctx)
{
    const ct_gpt_config *c = &m->cfg;
    int C = c->n_embd, BT = batch * c->seq_len, L = c->n_layer, lf = 2 + L * BLK_TENSORS;
    const elem *x;

    /* A batch beyond what create allocated for would write past the activations. */
    if (batch < 1 || batch > m->max_batch) {
        m->batch = 0;
        return NAN;
    }
    m->inputs = inputs;
    m->targets = targets;
    m->batch = batch;
    /* GEMMs on bf16: every parameter needed now (bf16-mixed packs them all at once) */
    if (m->gemm_dtype == CT_DTYPE_BF16) {
        if (need_tensors(m, 0, m->n_tensors - 1, need, ctx))
            return NAN;
        pack_params(m);
    } else if (need_tensors(m, 0, 1, need, ctx)) {
        return NAN;
    }
    encoder_forward(m, VW(m)->encoded, inputs, batch);
    x = VW(m)->encoded;
    for (int l = 0; l < L; l++) {
        if (block_forward(m, l, x, batch, need, ctx))
            return NAN;
        x = VW(m)->blocks[l].res3;
    }
    if (m->gemm_dtype != CT_DTYPE_BF16 && need_tensors(m, lf, lf + 1, need, ctx))
        return NAN;
    /* lnf in full: the LM head's GEMM reads it (or its copy), and so do next-token logits */
    layernorm_forward(VW(m)->lnf, VW(m)->lnf_mean, VW(m)->lnf_rstd, x, tensor_data(m, lf), tensor_data(m, lf + 1), BT,
                      C, NULL);
    return crossentropy_forward(m, targets, BT);
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
    logits_row(m, tensor_data(m, 0), VW(m)->lnf + (size_t)(len - 1) * C, logits);
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

/* Block l's backward (x its input): VW(m)->dres holds the gradient of its output res3 on entry and
 * of its input on return, each tensor's gradient announced as soon as it is finished. */
static int block_backward(ct_gpt *m, int l, const elem *x, ct_param_need_fn need, ct_grad_ready_fn ready,
                          void *ctx)
{
    const struct ACTS *a = &VW(m)->blocks[l];
    int B = m->batch, C = m->cfg.n_embd, BT = B * m->cfg.seq_len;
    const elem *w[BLK_TENSORS];
    elem *g[BLK_TENSORS], *dres = VW(m)->dres, *dbt_c = VW(m)->dbt_c;
    int t0 = block_tensor(l, 0), rv;

    for (int i = 0; i < BLK_TENSORS; i++) {
        w[i] = tensor_data(m, t0 + i);
        g[i] = tensor_grad(m, t0 + i);
    }
    /* MLP: res3 = res2 + gelu(ln2 Wfc^T + bfc) Wproj^T + bproj */
    if ((rv = need_part(m, l, PART_FPROJ, need, ctx)))
        return rv;
    linear_backward(m, VW(m)->dfch, g[BLK_FPROJ_W], g[BLK_FPROJ_B], dres, a->fch_gelu, w[BLK_FPROJ_W], BT, 4 * C, C,
                    l, KEEP_FCH);
    if ((rv = announce_run(m, t0 + BLK_FPROJ_B, t0 + BLK_FPROJ_W, ready, ctx)))
        return rv;
    gelu_backward(VW(m)->dfch, a->fch, (size_t)BT * 4 * C);
    if ((rv = need_part(m, l, PART_FC, need, ctx)))
        return rv;
    linear_backward(m, dbt_c, g[BLK_FC_W], g[BLK_FC_B], VW(m)->dfch, a->ln2, w[BLK_FC_W], BT, C, 4 * C, l, KEEP_LN2);
    if ((rv = announce_run(m, t0 + BLK_FC_B, t0 + BLK_FC_W, ready, ctx)))
        return rv;
    layernorm_backward(dres, g[BLK_LN2_W], g[BLK_LN2_B], dbt_c, a->res2, w[BLK_LN2_W], a->ln2_mean, a->ln2_rstd, BT,
                       C);
    if ((rv = announce_run(m, t0 + BLK_LN2_B, t0 + BLK_LN2_W, ready, ctx)))
        return rv;
    /* attention: res2 = x + attention(ln1 Wattn^T + battn) Wproj^T + bproj */
    if ((rv = need_part(m, l, PART_ATTN, need, ctx)))
        return rv;
    linear_backward(m, dbt_c, g[BLK_APROJ_W], g[BLK_APROJ_B], dres, a->atty, w[BLK_APROJ_W], BT, C, C, l, KEEP_ATTY);
    if ((rv = announce_run(m, t0 + BLK_APROJ_B, t0 + BLK_APROJ_W, ready, ctx)))
        return rv;
    attention_backward(m, l, B);
    linear_backward(m, dbt_c, g[BLK_ATTN_W], g[BLK_ATTN_B], VW(m)->dqkv, a->ln1, w[BLK_ATTN_W], BT, C, 3 * C, l,
                    KEEP_LN1);
    if ((rv = announce_run(m, t0 + BLK_ATTN_B, t0 + BLK_ATTN_W, ready, ctx)))
        return rv;
    layernorm_backward(dres, g[BLK_LN1_W], g[BLK_LN1_B], dbt_c, x, w[BLK_LN1_W], a->ln1_mean, a->ln1_rstd, BT, C);
    return announce_run(m, t0 + BLK_LN1_B, t0 + BLK_LN1_W, ready, ctx);
}

int SFX(gpt_backward)(ct_gpt *m, double scale_tokens, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx)
{
    const ct_gpt_config *c = &m->cfg;
    int B = m->batch, C = c->n_embd, BT = B * c->seq_len, L = c->n_layer, lf = 2 + L * BLK_TENSORS, rv;
    const elem *x = L ? VW(m)->blocks[L - 1].res3 : VW(m)->encoded;

    /* bf16's GEMMs read the packed copy: everything is announced at once below */
    ct_param_need_fn bk_need = m->gemm_dtype == CT_DTYPE_BF16 ? NULL : need;

    if (B == 0)
        return CT_EINTERNAL; /* no forward (or a refused one) to take the gradient of */
    /* The LM head reads the token embedding (tied): the embeddings' range first, as in forward;
     * bf16-mixed's GEMMs read the packed copy of every parameter: all of them. */
    if (m->gemm_dtype == CT_DTYPE_BF16)
        rv = need_tensors(m, 0, m->n_tensors - 1, need, ctx);
    else if (!(rv = need_tensors(m, 0, 1, need, ctx)))
        rv = need_tensors(m, lf, lf + 1, need, ctx);
    if (rv)
        return rv;
    crossentropy_backward(m, scale_tokens, BT);
    /* the residual stream's gradient starts at the final LayerNorm's input */
    memset(VW(m)->dres, 0, sizeof(elem) * (size_t)BT * C);
    layernorm_backward(VW(m)->dres, tensor_grad(m, lf), tensor_grad(m, lf + 1), VW(m)->dbt_c, x, tensor_data(m, lf),
                       VW(m)->lnf_mean, VW(m)->lnf_rstd, BT, C);
    if ((rv = announce_run(m, lf + 1, lf, ready, ctx)))
        return rv;
    for (int l = L - 1; l >= 0; l--) {
        const elem *in = l ? VW(m)->blocks[l - 1].res3 : VW(m)->encoded;

        /* Activation checkpointing: block l's inner activations again, from its input, into the
         * buffers every block shares (the last block's are still there from forward). The same
         * computation on the same values: the same bits as forward's, res3 rewritten as it was.
         * It reads every part of the block: fsdp gathers the whole block again first (its parts'
         * needs in block_backward then find them there); it announces nothing itself. */
        if (m->act_ckpt && l < L - 1) {
            if (bk_need && (rv = need_tensors(m, block_tensor(l, 0), block_tensor(l, BLK_TENSORS - 1), bk_need, ctx)))
                return rv;
            block_forward(m, l, in, B, NULL, NULL);
        }
        /* fsdp: each part gathered again before backward reads it */
        if ((rv = block_backward(m, l, in, bk_need, ready, ctx)))
            return rv;
    }
    encoder_backward(m, VW(m)->dres, B);
    return announce_run(m, 1, 0, ready, ctx);
}
