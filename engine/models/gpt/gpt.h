/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — a GPT-2 on tokens: the model behind --model gpt.
 *
 * Token + learned position embeddings, n_layer pre-LayerNorm blocks (causal self-attention, then a
 * GELU(tanh) MLP, each added to the residual stream), a final LayerNorm and an LM head tied to the
 * token embedding — GPT-2's architecture, written as llm.c writes it: forward and backward by hand,
 * straight-line loops; the Linear layers' and LM head's GEMMs on oneDNN (engine/nn/gemm.h),
 * attention's QK^T and AV per head on OpenBLAS. Nothing allocates inside a step: activations for
 * max_batch sequences are allocated once.
 *
 * Parameters live in ONE contiguous array (fp32, or fp64 under 64-true: ct_gpt_set_param_dtype) and
 * gradients in another with the same layout, one
 * tensor after another in forward order and named as PyTorch names the same nn.Module
 * (t/gpt_torch.py): wte.weight, wpe.weight, h.0.ln_1.weight, h.0.ln_1.bias, h.0.attn.c_attn.weight,
 * h.0.attn.c_attn.bias, h.0.attn.c_proj.weight, h.0.attn.c_proj.bias, h.0.ln_2.weight,
 * h.0.ln_2.bias, h.0.mlp.c_fc.weight, h.0.mlp.c_fc.bias, h.0.mlp.c_proj.weight, h.0.mlp.c_proj.bias,
 * h.1..., ln_f.weight, ln_f.bias. Linear weights are [out, in] (nn.Linear's layout). Backward
 * finishes the tensors in exactly the reverse of that order (ln_f first, the tied wte last), and
 * announces each one through a ct_grad_ready_fn so DDP's buckets overlap with the rest of backward.
 */
#ifndef CTRAIN_MODELS_GPT_H
#define CTRAIN_MODELS_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/dtype.h"
#include "ctrain/error.h"
#include "ctrain/nn.h"
#include "ctrain/rng.h"

/* The largest values a config may hold: far past what a CPU trains, small enough that every size
 * (activations of max_batch sequences included) fits a size_t and an int BLAS dimension. */
#define CT_GPT_MAX_LAYER  64
#define CT_GPT_MAX_EMBD   8192
#define CT_GPT_MAX_SEQ    8192
#define CT_GPT_MAX_VOCAB  65536   /* token shards store uint16 tokens */

typedef struct ct_gpt_config {
    int n_layer;
    int n_head;
    int n_embd;
    int seq_len;
    int vocab;
} ct_gpt_config;

/* n_layer 4, n_head 4, n_embd 256, seq_len 128, vocab 256 (byte tokens). */
void ct_gpt_config_default(ct_gpt_config *c);
/* Set one key from its text ("n_layer", "6"). Unknown key or a value that is not a positive
 * integer: CT_EINVAL naming the key, with a hint. */
int ct_gpt_config_set(ct_gpt_config *c, const char *key, const char *value, ct_error *err);
/* Apply "k=v,k=v" (the --model-config text) on top of c. */
int ct_gpt_config_parse(ct_gpt_config *c, const char *text, ct_error *err);
/* Every value in range and n_embd a multiple of n_head; errors name the key and give a hint. */
int ct_gpt_config_check(const ct_gpt_config *c, ct_error *err);
/* "n_layer=4,n_head=4,n_embd=256,seq_len=128,vocab=256" */
void ct_gpt_config_describe(const ct_gpt_config *c, char *buf, size_t size);

typedef struct ct_gpt ct_gpt;

/* Checks the config, then allocates parameters, gradients and the activations of max_batch
 * sequences of seq_len tokens. */
int ct_gpt_create(const ct_gpt_config *c, int max_batch, ct_gpt **out, ct_error *err);
void ct_gpt_free(ct_gpt *m);
const ct_gpt_config *ct_gpt_get_config(const ct_gpt *m);

/* CT_DTYPE_F32 (default) or CT_DTYPE_BF16 (bf16-mixed: every GEMM reads its two inputs rounded to
 * bf16 and accumulates in fp32; everything else stays fp32). Allocates the rounded copies here. */
int ct_gpt_set_gemm_dtype(ct_gpt *m, enum ct_dtype dtype, ct_error *err);

/* GPT-2's initialisation drawn from r in tensor order: weights normal(0, 0.02), the two residual
 * projections (attn.c_proj, mlp.c_proj) normal(0, 0.02/sqrt(2*n_layer)), biases 0, LayerNorm
 * weights 1 and biases 0. */
void ct_gpt_init(ct_gpt *m, ct_rng *r);

size_t ct_gpt_num_params(const ct_gpt *m);
void *ct_gpt_params(ct_gpt *m);   /* of ct_gpt_param_dtype */
void *ct_gpt_grads(ct_gpt *m);
/* CT_DTYPE_F32 (default) or CT_DTYPE_F64 (64-true: parameters, activations and gradients in fp64,
 * GEMMs on OpenBLAS's dgemm). Reallocates the arrays (values lost: before ct_gpt_init). */
int ct_gpt_set_param_dtype(ct_gpt *m, enum ct_dtype dtype, ct_error *err);
enum ct_dtype ct_gpt_param_dtype(const ct_gpt *m);
/* Activation checkpointing (--activation-checkpointing): forward keeps each block's input (the
 * residual stream) and one block's inner activations, reused by every block; backward recomputes
 * each block's forward from its input just before its backward (need is not called again: the
 * parameters backward reads are those). The same results bit for bit, in every storage type.
 * Reallocates the activations (after ct_gpt_set_param_dtype, before a step). */
int ct_gpt_set_activation_checkpointing(ct_gpt *m, int on, ct_error *err);
int ct_gpt_activation_checkpointing(const ct_gpt *m);
/* The peak activation bytes MEASURED: the most bytes of the activation buffers (and bf16-mixed's
 * kept copies of them) resident after any forward or backward so far (mincore of their own mapping:
 * pages count once a pass wrote them). Backward's scratch (gradient buffers) is not counted. */
size_t ct_gpt_activation_bytes(const ct_gpt *m);
int ct_gpt_num_tensors(const ct_gpt *m);
/* Parameter tensor i (forward order) viewing the params array. */
const ct_tensor *ct_gpt_tensor(const ct_gpt *m, int i);

/* Forward on batch (1..max_batch) sequences: inputs[b*seq_len + t] and targets (the next tokens),
 * every token < vocab (the data module checks this when it loads). Keeps what backward needs.
 * Returns the summed cross-entropy over the batch*seq_len tokens, in nats; NaN for a batch out of
 * range (nothing computed) or when need failed. need (may be NULL) hears of the parameters each
 * step reads before it reads them: the embeddings, each block's tensors, the final layernorm (under
 * bf16-mixed all of them at once: they are rounded in one pass). */
double ct_gpt_forward(ct_gpt *m, const int32_t *inputs, const int32_t *targets, int batch, ct_param_need_fn need,
                      void *ctx);
/* Backward of (summed loss of the last forward) / scale_tokens: scale_tokens is the number of
 * tokens the mean runs over (batch*seq_len on one rank; the global count under DDP when the
 * strategy sums). Gradients are overwritten, no zeroing needed. ready (may be NULL) is called as
 * each tensor's gradient is final, last tensor first; non-zero stops backward and is returned.
 * need (may be NULL) hears of the parameters before backward reads them: the embeddings (the LM
 * head's tied weights) first, then the final layernorm and the blocks, last first (under bf16-mixed
 * all of them at once); its failure is returned. CT_EINTERNAL without a forward before it. */
int ct_gpt_backward(ct_gpt *m, double scale_tokens, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx);

/* The logits[vocab] of the token after tokens[0..len), 1 <= len <= seq_len (every token < vocab):
 * a forward of one sequence of len tokens (a causal model's last position sees only those), then
 * the LM head on its last row. Needs max_batch >= 1; overwrites what backward would read.
 * CT_EINVAL for len out of range. */
int ct_gpt_next_token_logits(ct_gpt *m, const int32_t *tokens, int len, float *logits);

/* Bits per byte of a mean loss in nats per token when tokens are bytes (vocab 256): loss / ln 2. */
double ct_gpt_bits_per_byte(double loss_nats);

#endif
