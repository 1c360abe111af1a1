/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the neural-network engine: tensors, layers, the MLP, optimizers, the PRNG.
 *
 * Knows nothing about ranks or strategies. Parameters live in ONE contiguous array (fp32; fp64
 * under 64-true) and gradients in another with the same layout: weight then bias of each Linear
 * layer, in forward order. Backward runs from the last tensor to the first and calls a "gradient
 * ready" callback as each tensor's gradient is final (the Trainer wires it to the Strategy for
 * overlapped allreduce).
 * Every fp32 or bf16 GEMM goes through oneDNN's matmul, fp64 ones through OpenBLAS's dgemm. Nothing
 * allocates inside a training step: a model allocates the activations for its largest batch once.
 */
#ifndef CTRAIN_NN_H
#define CTRAIN_NN_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/dtype.h"
#include "ctrain/error.h"
#include "ctrain/rng.h"

/* --- a tensor view ------------------------------------------------------------------------------ */
#define CT_TENSOR_MAX_DIMS 4

typedef struct ct_tensor {
    char name[64];       /* e.g. "layers.0.weight" (the safetensors / PyTorch name) */
    void *data;          /* element type: the model's param_dtype */
    int ndim;
    int64_t shape[CT_TENSOR_MAX_DIMS];
    size_t offset;       /* element offset inside the model's contiguous array */
    size_t numel;
} ct_tensor;

/* --- layers (row-major; B = batch) -------------------------------------------------------------
 * Linear weight W is [out, in] (PyTorch's layout), bias b is [out]. */

/* y[B,out] = x[B,in] W^T + b, then ReLU when relu != 0 (bias and ReLU fused in one pass). */
void ct_linear_forward(const float *x, const float *w, const float *b, float *y,
                       int batch, int in, int out, int relu);
/* From dy[B,out]: dw = dy^T x, db = column sums of dy, and dx = dy W when dx != NULL. */
void ct_linear_backward(const float *x, const float *w, const float *dy, float *dw, float *db,
                        float *dx, int batch, int in, int out);
/* dz = dy * (y > 0), in place on dy; y is the ReLU output. */
void ct_relu_backward(const float *y, float *dy, size_t n);
/* Softmax cross-entropy, mean over the batch. logits[B,C] -> probs[B,C] (may alias logits).
 * Returns the summed (not mean) loss; *correct gets the count of argmax == label. */
double ct_softmax_xent_forward(const float *logits, const uint8_t *labels, float *probs,
                               int batch, int classes, int *correct);
/* dlogits = (probs - onehot(labels)) / scale_batch, in place on probs. */
void ct_softmax_xent_backward(float *probs, const uint8_t *labels, int batch, int classes,
                              int scale_batch);

/* --- bf16 ----------------------------------------------------------------------------------------
 * x rounded to the nearest bf16 (round to nearest, ties to even), returned as the fp32 of the
 * same value; NaN stays NaN, values past bf16's largest finite round to infinity like a cast. */
float ct_bf16_round(float x);
/* out[i] = ct_bf16_round(in[i]); out may alias in. */
void ct_bf16_round_array(const float *in, float *out, size_t n);

/* --- backward and forward hooks ------------------------------------------------------------- */
/* Called as each parameter tensor's gradient is final, last tensor first. Non-zero stops backward
 * and is returned by ct_mlp_backward. */
typedef int (*ct_grad_ready_fn)(void *ctx, size_t offset, size_t count);
/* Called by forward before it first reads a range of the parameter array, first tensor first: a
 * sharded strategy's all-gather of the parameters is then waited for tensor by tensor, while the
 * earlier layers compute. Non-zero stops forward (the caller's own error says why). */
typedef int (*ct_param_need_fn)(void *ctx, size_t offset, size_t count);
/* The first layer's backward (no dx) for an overlapping gradient exchange: db, announced as
 * ready(ctx, b_offset, out), then dw in `blocks` row blocks from the last to the first, each
 * announced as soon as it is computed, so its allreduce starts while the next block computes.
 * Returns ready's first non-zero code. */
int ct_linear_backward_weight_blocks(const float *x, const float *dy, float *dw, float *db, int batch, int in,
                                     int out, int blocks, size_t w_offset, size_t b_offset, ct_grad_ready_fn ready,
                                     void *ctx);


/* --- optimizers -------------------------------------------------------------------------------
 * State lives in contiguous arrays with the params' layout, so checkpoints store it whole. */
enum ct_optim_kind {
    CT_OPTIM_ADAMW = 0,
    CT_OPTIM_SGD
};

typedef struct ct_optim_config {
    enum ct_optim_kind kind;
    double lr;
    double weight_decay; /* AdamW: decoupled (p -= lr*wd*p); SGD: L2 added to the gradient */
    double momentum;     /* SGD */
    double beta1, beta2, eps; /* AdamW */
    /* The parameters' and gradients' element type, and its state's: CT_DTYPE_F32 (default) or
     * CT_DTYPE_F64 (64-true: the update in fp64 arithmetic). */
    enum ct_dtype dtype;
} ct_optim_config;

typedef struct ct_optim ct_optim;

/* Defaults: AdamW (PyTorch's: betas 0.9/0.999, eps 1e-8, weight decay 0.01); SGD momentum 0.9. */
void ct_optim_config_default(ct_optim_config *cfg, enum ct_optim_kind kind);
int ct_optim_parse_kind(const char *name, enum ct_optim_kind *out);
const char *ct_optim_kind_name(enum ct_optim_kind kind);

int ct_optim_create(const ct_optim_config *cfg, size_t n, ct_optim **out, ct_error *err);
void ct_optim_free(ct_optim *o);
/* One update of params[n] from grads[n] with the PyTorch semantics of torch.optim.AdamW / SGD.
 * A sharded optimizer (ct_optim_shard) updates its count elements: pass the shard's first
 * parameter and gradient. */
void ct_optim_step(ct_optim *o, void *params, const void *grads);
const ct_optim_config *ct_optim_get_config(const ct_optim *o);
/* The learning rate of the next steps (a schedule sets it before each step). */
void ct_optim_set_lr(ct_optim *o, double lr);
/* Updates done so far (AdamW's bias correction depends on it). */
int64_t ct_optim_steps(const ct_optim *o);
void ct_optim_set_steps(ct_optim *o, int64_t steps);
/* State arrays: AdamW "exp_avg", "exp_avg_sq"; SGD "momentum_buffer". */
#define CT_OPTIM_MAX_STATES 2
int ct_optim_num_states(const ct_optim *o);
const char *ct_optim_state_name(const ct_optim *o, int i);
void *ct_optim_state(ct_optim *o, int i);   /* of the config's dtype */
enum ct_dtype ct_optim_dtype(const ct_optim *o);
/* Keep the state of elements [lo, lo+count) only (a sharded strategy's partition, ZeRO stage 1):
 * the rest is freed and later steps update count elements. */
int ct_optim_shard(ct_optim *o, size_t lo, size_t count, ct_error *err);
/* Keep the state of the ranges [lo[i], lo[i]+count[i]), i < n, only, concatenated in that order
 * (fsdp's part of each unit): later steps update the sum of the counts, passed as arrays laid out
 * the same way. ct_optim_shard_range then gives lo[0] and that sum. */
int ct_optim_shard_ranges(ct_optim *o, const size_t *lo, const size_t *count, int n, ct_error *err);
/* The elements the state covers: [lo, lo+count) of total (0, total, total when not sharded). */
void ct_optim_shard_range(const ct_optim *o, size_t *lo, size_t *count, size_t *total);
/* Bytes of state this optimizer holds (every state array, its shard only when sharded). */
size_t ct_optim_state_bytes(const ct_optim *o);

#endif
