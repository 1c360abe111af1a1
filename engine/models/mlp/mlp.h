/* SPDX-License-Identifier: BSD-3-Clause */
/* The MLP (internal to libctrain; the "mlp" model, engine/models/mlp_model.c, registers it): Linear
 * layers with ReLU between them and a softmax cross-entropy loss, on one contiguous parameter array
 * (weight then bias of each layer, in forward order). Activations for the largest batch are
 * allocated once by ct_mlp_create; nothing allocates inside a training step. */
#ifndef CTRAIN_MODELS_MLP_H
#define CTRAIN_MODELS_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/nn.h"

#define CT_MLP_MAX_LAYERS 16

typedef struct ct_mlp ct_mlp;

/* dims[0] inputs, dims[n_dims-1] classes (n_dims >= 2, n_dims - 1 <= CT_MLP_MAX_LAYERS);
 * max_batch: the largest batch forward will be given. */
int ct_mlp_create(const int *dims, int n_dims, int max_batch, ct_mlp **out, ct_error *err);
void ct_mlp_free(ct_mlp *m);

/* The GEMMs' input type: CT_DTYPE_F32 (the default) or CT_DTYPE_BF16 (bf16-mixed: inputs and
 * weights packed to bf16, multiplied by oneDNN's bf16 matmul with fp32 accumulation; on a CPU
 * without bf16 instructions the same products on OpenBLAS from the widened values, exact in fp32).
 * Allocates the bf16 copies and makes the GEMM primitives here, not in the step. */
int ct_mlp_set_gemm_dtype(ct_mlp *m, enum ct_dtype dtype, ct_error *err);

/* The storage type of parameters, gradients and activations: CT_DTYPE_F32 (the default) or
 * CT_DTYPE_F64 (64-true: fp64 throughout, GEMMs on OpenBLAS's dgemm; inputs widened from the
 * data's fp32). Reallocates them (the values are lost: call before ct_mlp_init). */
int ct_mlp_set_param_dtype(ct_mlp *m, enum ct_dtype dtype, ct_error *err);
enum ct_dtype ct_mlp_param_dtype(const ct_mlp *m);

/* PyTorch's nn.Linear default: W and b uniform in +-1/sqrt(fan_in), drawn from r in forward order. */
void ct_mlp_init(ct_mlp *m, ct_rng *r);

size_t ct_mlp_num_params(const ct_mlp *m);
void *ct_mlp_params(ct_mlp *m);   /* of ct_mlp_param_dtype */
void *ct_mlp_grads(ct_mlp *m);
int ct_mlp_num_layers(const ct_mlp *m);
int ct_mlp_num_tensors(const ct_mlp *m);
/* Parameter tensor i (0 .. num_tensors-1, forward order) viewing the params array. */
const ct_tensor *ct_mlp_tensor(const ct_mlp *m, int i);
/* "784-512-256-10" */
void ct_mlp_describe(const ct_mlp *m, char *buf, size_t size);

/* Forward on x[B, dims[0]] with labels; keeps what backward needs. Returns the summed loss over
 * the batch; *correct gets the number of right predictions (may be NULL). need (may be NULL) hears
 * of each layer's weights and bias before they are read; NAN when it failed. */
double ct_mlp_forward(ct_mlp *m, const float *x, const uint8_t *labels, int batch, int *correct,
                      ct_param_need_fn need, void *ctx);
/* Backward of the mean loss of the last forward; grads are overwritten (no zeroing needed). need
 * (may be NULL) hears of each layer's weights and bias before backward reads them, last layer
 * first; its failure is returned.
 * grad_scale_batch: the divisor of the mean (the batch size the loss is averaged over). */
int ct_mlp_backward(ct_mlp *m, int grad_scale_batch, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx);

#endif
