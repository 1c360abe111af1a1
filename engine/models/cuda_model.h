/* SPDX-License-Identifier: BSD-3-Clause */
/* A model on a CUDA device behind the model seam, the part every model's cuda implementation shares
 * (engine/models/cuda_model.c; the gpt's and the MLP's: gpt_cuda_model.c, mlp_cuda_model.c). The
 * host model keeps the fp32 master copy for checkpoints (the same tensors as on cpu); batches are
 * gathered straight into the device model's pinned host buffers (one copy to the device per step);
 * forward, backward and the optimizer update run on the device. Device memory is never sharded
 * (ddp_sharded is cpu only). In the CUDA module only. */
#ifndef CTRAIN_MODELS_CUDA_MODEL_H
#define CTRAIN_MODELS_CUDA_MODEL_H

#include "ctrain/model.h"

/* What a device model does, on its handle (dev). */
struct ct_cuda_model_dev {
    void (*free)(void *dev);
    /* b->count samples through the forward into out; defer: the loss stays on the device (out->loss
     * NaN), read later by loss_read. */
    int (*forward)(void *dev, const ct_model *m, const ct_batch *b, int defer, ct_model_sums *out, ct_error *err);
    /* NULL: the model never defers its loss (no defer_loss, no loss_read in its ops). */
    int (*loss_read)(void *dev, int back, double *loss_sum, ct_error *err);
    int (*backward)(void *dev, double grad_scale, ct_grad_ready_fn ready, void *ctx, ct_error *err);
    int (*optim_step)(void *dev, ct_optim *o, int *skipped, ct_error *err);
    void *(*batch_x)(void *dev);
    void *(*batch_y)(void *dev);
    int (*to_host)(void *dev, ct_model *host, ct_optim *o, ct_error *err);
    int (*from_host)(void *dev, ct_model *host, const ct_optim *o, ct_error *err);
    /* NULL: no skipped steps, loss scale 1 (no loss scaling on the device). */
    void (*stats)(void *dev, int64_t *skipped_steps, double *loss_scale);
};

/* *out: host's twin on the device, over dev (made by the caller; freed by the model's destroy, and
 * here on failure), whose parameters and gradients (device memory, as many as the host's) are
 * params and grads. */
int ct_cuda_model_wrap(ct_model *host, const ct_model_placement *where, const struct ct_cuda_model_dev *ops, void *dev,
                       void *params, void *grads, ct_model **out, ct_error *err);

#endif
