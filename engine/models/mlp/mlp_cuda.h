/* SPDX-License-Identifier: BSD-3-Clause */
/* The MLP on a CUDA device (internal to libctrain; CT_HAVE_CUDA builds only).
 *
 * A device mirror of a host ct_mlp and its optimizer: the same contiguous fp32 parameter and
 * gradient layout (so DDP buckets and checkpoints line up), fp32 master weights, GEMMs through
 * cublasGemmEx with fp32 accumulation, and CUDA C kernels for bias+ReLU, softmax cross-entropy and
 * the AdamW/SGD update. Everything is allocated by ct_mlp_cuda_create; a training step allocates
 * nothing. Batches are gathered by the caller straight into pinned host buffers (batch_x/batch_y)
 * and copied to the device once per step, asynchronously on the compute stream.
 *
 * Precision: gemm_dtype CT_DTYPE_F32 (32-true), CT_DTYPE_BF16 (bf16-mixed: GEMM inputs converted
 * to bf16 by round-to-nearest-even) or CT_DTYPE_F16 (16-mixed: fp16 inputs, dynamic loss scaling:
 * the loss is multiplied by a scale before backward; a step whose gradients hold inf/NaN is skipped
 * and the scale halved; after 2000 good steps it doubles — torch.cuda.amp.GradScaler's defaults).
 *
 * Status: compiled with nvcc, not yet run on a GPU (see README ## GPUs).
 */
#ifndef CTRAIN_MLP_CUDA_H
#define CTRAIN_MLP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ctrain's headers are C: their functions keep C linkage when nvcc's C++ includes them. */
#include "ctrain/dtype.h"
#include "ctrain/error.h"
#include "engine/models/mlp/mlp.h"

typedef struct ct_mlp_cuda ct_mlp_cuda;

/* On the current device, with host's shapes, parameters and o's state (o may be NULL for
 * evaluation only); max_batch: the largest batch forward will see. */
int ct_mlp_cuda_create(const ct_mlp *host, const ct_optim *o, int max_batch, enum ct_dtype gemm_dtype,
                       ct_mlp_cuda **out, ct_error *err);
void ct_mlp_cuda_free(ct_mlp_cuda *d);

/* Pinned host buffers the caller fills before forward: [max_batch, inputs] floats, max_batch labels. */
float *ct_mlp_cuda_batch_x(ct_mlp_cuda *d);
uint8_t *ct_mlp_cuda_batch_y(ct_mlp_cuda *d);

/* Copies the batch in, runs forward; *loss_sum gets the summed loss, *correct (may be NULL) the
 * right predictions. Waits for the two numbers (the only host synchronisation of a step).
 * CT_EINVAL for a batch outside 1..max_batch and for a label that is not a class (the kernel
 * reports it; nothing is written out of bounds), and backward then refuses to run. */
int ct_mlp_cuda_forward(ct_mlp_cuda *d, int batch, double *loss_sum, int *correct, ct_error *err);
/* Backward of the mean loss (divided by grad_scale_batch) of the last forward. ready is called as
 * each tensor's gradient has been enqueued on the compute stream, last tensor first; offsets are
 * into ct_mlp_cuda_grads() (device memory). The gradients are final once the compute stream has
 * reached that point: a consumer orders itself after it (ct_cuda_compute_stream + an event). */
int ct_mlp_cuda_backward(ct_mlp_cuda *d, int grad_scale_batch, ct_grad_ready_fn ready, void *ctx, ct_error *err);
/* One optimizer update with o's config and step count (o's counter is advanced unless the step
 * is skipped). 16-mixed: the gradients are unscaled in the update; *skipped = 1 when they
 * overflowed and nothing was updated. */
int ct_mlp_cuda_optim_step(ct_mlp_cuda *d, ct_optim *o, int *skipped, ct_error *err);

/* Device arrays with the host layout (for the strategy: broadcast, allreduce). */
float *ct_mlp_cuda_params(ct_mlp_cuda *d);
float *ct_mlp_cuda_grads(ct_mlp_cuda *d);
size_t ct_mlp_cuda_num_params(const ct_mlp_cuda *d);

/* Parameters and optimizer state to the host arrays (before a checkpoint) and back (after one is
 * loaded, or rank 0's weights were broadcast on the host). o may be NULL. Synchronous. */
int ct_mlp_cuda_to_host(ct_mlp_cuda *d, ct_mlp *host, ct_optim *o, ct_error *err);
int ct_mlp_cuda_from_host(ct_mlp_cuda *d, const ct_mlp *host, const ct_optim *o, ct_error *err);
/* The gradients (n_params floats) to host (to_device 0) or from it (1), ordered on the compute
 * stream after the work enqueued so far; synchronous (t/tools/cuda_check compares and sets them). */
int ct_mlp_cuda_grads_copy(ct_mlp_cuda *d, float *host, int to_device, ct_error *err);

/* 16-mixed: steps skipped for overflowing gradients so far, and the current loss scale (1 otherwise). */
int64_t ct_mlp_cuda_skipped_steps(const ct_mlp_cuda *d);
float ct_mlp_cuda_loss_scale(const ct_mlp_cuda *d);

#ifdef __cplusplus
}
#endif

#endif
