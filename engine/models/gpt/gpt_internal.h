/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's state, shared by gpt.c (configuration, allocation, initialisation) and the step
 * (gpt_step_tmpl.h: GEMMs, attention, forward, backward), which is compiled once per element type:
 * fp32 (32-true, bf16-mixed), fp64 (64-true) and bf16 (bf16-true). The arrays are one allocation each whatever the
 * type; the model's own type's view (v.f32 or v.f64) holds the typed pointers into them. Internal
 * to engine/models/gpt. */
#ifndef CTRAIN_MODELS_GPT_INTERNAL_H
#define CTRAIN_MODELS_GPT_INTERNAL_H

#include "engine/models/gpt/gpt.h"

/* Tensors of one block, in forward (= layout) order. */
enum {
    BLK_LN1_W, BLK_LN1_B, BLK_ATTN_W, BLK_ATTN_B, BLK_APROJ_W, BLK_APROJ_B,
    BLK_LN2_W, BLK_LN2_B, BLK_FC_W, BLK_FC_B, BLK_FPROJ_W, BLK_FPROJ_B,
    BLK_TENSORS
};

/* Activations of one block for max_batch sequences. */
#define GPT_BLOCK_ACTS(real)                                                                                          \
    {                                                                                                                  \
        real *ln1, *ln1_mean, *ln1_rstd; /* [BT,C], [BT], [BT] */                                                      \
        real *qkv;                       /* [BT,3C] */                                                                 \
        real *att;                       /* [B,NH,T,T] softmax probabilities (0 above the diagonal) */                 \
        real *atty;                      /* [BT,C] attention output, before the projection */                          \
        real *res2;                      /* [BT,C] residual after attention */                                         \
        real *ln2, *ln2_mean, *ln2_rstd;                                                                               \
        real *fch;                       /* [BT,4C] before GELU */                                                     \
        real *fch_gelu;                  /* [BT,4C] */                                                                 \
        real *res3;                      /* [BT,C] residual after the MLP: the block's output */                       \
    }
struct gpt_block_acts GPT_BLOCK_ACTS(float);
struct gpt_block_acts_f64 GPT_BLOCK_ACTS(double);
struct gpt_block_acts_bf16 GPT_BLOCK_ACTS(uint16_t);

/* The typed pointers of one element type into the model's arrays. */
#define GPT_VIEW(real, acts)                                                                                          \
    {                                                                                                                  \
        real *params, *grads;                                                                                          \
        real *encoded;                    /* [BT,C] */                                                                 \
        struct acts *blocks;              /* [L] */                                                                    \
        real *lnf, *lnf_mean, *lnf_rstd;                                                                               \
        real *probs;                      /* [BT,V] logits, then probabilities, then dlogits */                        \
        real *dres;                       /* [BT,C] gradient of the residual stream */                                 \
        real *dbt_c;                      /* [BT,C] gradient of a LayerNorm output or of atty */                       \
        real *dqkv;                       /* [BT,3C] */                                                                \
        real *dfch;                       /* [BT,4C] */                                                                \
        real *datt;                       /* [B,NH,T,T] the heads' attention gradients (heads run in parallel) */      \
    }
struct gpt_view_f32 GPT_VIEW(float, gpt_block_acts);
struct gpt_view_f64 GPT_VIEW(double, gpt_block_acts_f64);
struct gpt_view_bf16 GPT_VIEW(uint16_t, gpt_block_acts_bf16);

struct ct_gpt {
    ct_gpt_config cfg;
    int max_batch;
    size_t n_params;
    enum ct_dtype param_dtype;        /* fp32, fp64 (64-true) or bf16 (bf16-true) */
    int n_tensors;
    ct_tensor *tensors;

    void *params, *grads;             /* n_params elements each */
    void *acts_mem;                   /* every activation, one allocation */
    void *grad_mem;                   /* backward's buffers, one allocation */
    void *blocks_mem;                 /* [L] block activation pointers */
    union {
        struct gpt_view_f32 f32;
        struct gpt_view_f64 f64;
        struct gpt_view_bf16 bf16;
    } v;                              /* the view of param_dtype */

    /* bf16-mixed: params_b holds the parameters as bf16 (packed once per forward, after the
     * optimizer step that changed them); keep_b the bf16 copies of the activations forward's GEMMs
     * read and backward's read again (ln1, qkv, attention probabilities, atty, ln2, fch_gelu of every
     * block, then lnf: gpt_step_tmpl.h's KEEP_*), packed once in forward; qb[0..3] scratch bf16
     * copies of what is read once (backward's gradients). att_onednn: the last forward ran
     * attention's products batched over sequences and heads on oneDNN (backward then does too).
     * Where oneDNN has no primitive for attention's products, they run per head on OpenBLAS in
     * fp32 on bf16-rounded copies: q[0..2]. */
    enum ct_dtype gemm_dtype;
    uint16_t *params_b;
    uint16_t *keep_b;
    int att_onednn;
    uint16_t *qb[4];
    float *q[3];
    size_t q_n;

    const int32_t *inputs;
    const int32_t *targets;
    int batch;
};

/* Elements of activations for B sequences (the layout gpt_carve cuts). */
size_t gpt_acts_size(const ct_gpt_config *c, size_t B);
size_t gpt_grad_buf_size(const ct_gpt_config *c, size_t B);
/* bf16-mixed's kept bf16 activations (keep_b): per block ln1, qkv, the attention probabilities,
 * atty, ln2 and fch_gelu; then lnf as block n_layer's KEEP_LN1. Strides are batch B's (max_batch).
 * gpt_kept_offset(c, B, c->n_layer, KEEP_QKV) is past the last of them, lnf (the allocation). */
enum { KEEP_LN1, KEEP_QKV, KEEP_ATT, KEEP_ATTY, KEEP_LN2, KEEP_FCH, KEEP_N };
size_t gpt_kept_offset(const ct_gpt_config *c, size_t B, int l, int which);

/* The step of one element type (gpt_step.c: fp32, gpt_step_f64.c: fp64). carve points the view
 * at acts_mem, grad_mem, blocks_mem and params/grads. */
#define GPT_STEP_DECLARE(SFX)                                                                                         \
    void SFX(gpt_carve)(ct_gpt *m);                                                                                    \
    double SFX(gpt_forward)(ct_gpt *m, const int32_t *inputs, const int32_t *targets, int batch,                       \
                            ct_param_need_fn need, void *ctx);                                                         \
    int SFX(gpt_backward)(ct_gpt *m, double scale_tokens, ct_grad_ready_fn ready, void *ctx);                          \
    int SFX(gpt_next_token_logits)(ct_gpt *m, const int32_t *tokens, int len, float *logits);
#define GPT_STEP_SFX_F32(name) name##_f32
#define GPT_STEP_SFX_F64(name) name##_f64
#define GPT_STEP_SFX_BF16(name) name##_bf16
GPT_STEP_DECLARE(GPT_STEP_SFX_F32)
GPT_STEP_DECLARE(GPT_STEP_SFX_F64)
GPT_STEP_DECLARE(GPT_STEP_SFX_BF16)

#endif
