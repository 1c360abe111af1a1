/* SPDX-License-Identifier: BSD-3-Clause */
/* The cpu GPT's state, shared by gpt.c (configuration, allocation, initialisation) and the step.
 * Internal to engine/models/gpt.
 *
 * How the step's files fit together (llm.c's train_gpt2.c, split by concern; C has no generics, so
 * what is written once for every element type is a template a type's file includes):
 *   gpt_step_f32.c    fp32 storage: 32-true, bf16-mixed  } each: the type's thin kernels (which
 *   gpt_step_f64.c    fp64 storage: 64-true              } GEMM, load/store, bf16-mixed's copies)
 *   gpt_step_bf16.c   bf16 storage: bf16-true            } and its attention paths, then the templates
 *   gpt_attention_heads_tmpl.h  attention per (sequence, head) on OpenBLAS (fp32, fp64)
 *   gpt_layers_tmpl.h one function per layer's forward and backward (encoder, layernorm, linear,
 *                     attention through the type's table of paths, gelu, the LM head's cross-entropy)
 *   gpt_step_tmpl.h   the view's layout, then gpt_forward / gpt_backward calling the layers top-down,
 *                     block by block
 *   gpt_passes*.c     the element-wise SIMD loops the layers call (gpt_passes.h; compiled per type
 *                     from gpt_passes_tmpl.h); engine/nn/gemm.c the GEMMs on oneDNN
 * gpt.c picks the type's entry points (GPT_STEP_DECLARE below) by the parameters' dtype. The arrays
 * are one allocation each whatever the type; the model's own type's view (v.f32, v.f64 or v.bf16)
 * holds the typed pointers into them. */
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
    void *acts_mem;                   /* every activation, one mapping of acts_bytes (engine/util/pages.h) */
    size_t acts_bytes;
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
     * block, then lnf: KEEP_* below), packed once in forward; qb[0..3] scratch bf16 copies of what
     * is read once (backward's gradients). att_path: the path of the type's table (struct
     * gpt_attention_path) the last forward's attention ran on (a path whose backward reads what
     * its forward kept runs backward only after it). Where oneDNN has no primitive for
     * attention's products, they run per head on OpenBLAS in fp32 on bf16-rounded copies:
     * q[0..2]; bf16-true's scores and their gradient are fp32 scratch in q[0]. */
    enum ct_dtype gemm_dtype;
    uint16_t *params_b;
    uint16_t *keep_b;
    int att_path;
    uint16_t *qb[4];
    float *q[3];
    size_t q_n;

    const int32_t *inputs;
    const int32_t *targets;
    int batch;

    /* --activation-checkpointing: acts_mem holds the embedding, every block's output res3 (the
     * residual stream: the next block's input) and ONE block's inner activations, which every
     * block's view shares; keep_b one block's copies and lnf's. Backward recomputes block l's
     * forward from its input just before block l's backward (the last block's are still there). */
    int act_ckpt;
    size_t keep_bytes;                /* keep_b's mapping */
    size_t act_peak;                  /* the most bytes of acts_mem and keep_b resident after a pass */
};

/* Elements of activations for B sequences (the layout gpt_carve cuts; ckpt: activation checkpointing's). */
size_t gpt_acts_size(const ct_gpt_config *c, size_t B, int ckpt);
size_t gpt_grad_buf_size(const ct_gpt_config *c, size_t B);
/* bf16-mixed's kept bf16 activations (keep_b): per block ln1, qkv, the attention probabilities,
 * atty, ln2 and fch_gelu; then lnf as block n_layer's KEEP_LN1. Strides are batch B's (max_batch).
 * gpt_kept_offset(c, B, c->n_layer, KEEP_QKV) is past the last of them, lnf (the allocation). */
enum { KEEP_LN1, KEEP_QKV, KEEP_ATT, KEEP_ATTY, KEEP_LN2, KEEP_FCH, KEEP_N };
size_t gpt_kept_offset(const ct_gpt_config *c, size_t B, int l, int which);
/* Where block l's kept copy `which` is in m->keep_b (l = n_layer: lnf's): under activation
 * checkpointing every block shares block 0's slots and lnf takes block 1's. */
size_t gpt_kept_at(const ct_gpt *m, int l, int which);

/* Attention's causal products run per block of GPT_ATT_BLOCK query rows over the keys up to the
 * block's end (and, for the key-side gradients, per block of keys over the queries from the block's
 * start), skipping most of the zero upper triangle: 3/8 of attention's multiply-adds at seq_len
 * 128. Entries above the diagonal are never read; the softmax passes write them as zeros. */
#define GPT_ATT_BLOCK 32

/* Rows of the block starting at row r0 of T. */
static inline int gpt_att_rows(int r0, int T) { return T - r0 < GPT_ATT_BLOCK ? T - r0 : GPT_ATT_BLOCK; }

/* One way of running attention's products for an element type: each type's file lists its paths
 * in a table, tried in order. forward and backward run block l's attention for B sequences and
 * return 0, or -1 when this path cannot run here (no oneDNN primitive, no scratch, another
 * precision): the next path then runs and rewrites everything this one wrote. after_forward: the
 * backward reads what this path's forward kept, so it runs only when the last forward took it. */
struct gpt_attention_path {
    int (*forward)(ct_gpt *m, int l, int B);
    int (*backward)(ct_gpt *m, int l, int B);
    int after_forward;
};

/* The step of one element type (gpt_step_f32.c, gpt_step_f64.c, gpt_step_bf16.c). carve points
 * the view at acts_mem, grad_mem, blocks_mem and params/grads. */
#define GPT_STEP_DECLARE(SFX)                                                                                         \
    void SFX(gpt_carve)(ct_gpt *m);                                                                                    \
    double SFX(gpt_forward)(ct_gpt *m, const int32_t *inputs, const int32_t *targets, int batch,                       \
                            ct_param_need_fn need, void *ctx);                                                         \
    int SFX(gpt_backward)(ct_gpt *m, double scale_tokens, ct_param_need_fn need, ct_grad_ready_fn ready,             \
                          void *ctx);                                                                                  \
    int SFX(gpt_next_token_logits)(ct_gpt *m, const int32_t *tokens, int len, float *logits);
#define GPT_STEP_SFX_F32(name) name##_f32
#define GPT_STEP_SFX_F64(name) name##_f64
#define GPT_STEP_SFX_BF16(name) name##_bf16
GPT_STEP_DECLARE(GPT_STEP_SFX_F32)
GPT_STEP_DECLARE(GPT_STEP_SFX_F64)
GPT_STEP_DECLARE(GPT_STEP_SFX_BF16)

#endif
