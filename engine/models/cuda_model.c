/* SPDX-License-Identifier: BSD-3-Clause */
/* A model on a CUDA device behind the model seam: see cuda_model.h. Status: compiled with nvcc's
 * host compiler, not yet run on a GPU (README ## GPUs). */
#include "engine/models/models.h"

#ifdef CT_HAVE_CUDA
#include <stdlib.h>

#include "engine/models/cuda_model.h"

struct cuda_model {
    ct_model m;
    struct ct_model_ops ops; /* cuda_ops, with defer_loss and loss_read where the device has them */
    const struct ct_cuda_model_dev *dev_ops;
    void *dev;
    int defer; /* the next forward leaves its loss on the device (the training step's) */
};

static struct cuda_model *cm_of(const ct_model *m) { return m->impl; }

static void cuda_destroy(ct_model *m)
{
    struct cuda_model *cm = m->impl;

    cm->dev_ops->free(cm->dev);
    free(cm);
}

/* Device memory is never sharded: need is never given here. */
static int cuda_forward(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                        ct_error *err)
{
    return cm_of(m)->dev_ops->forward(cm_of(m)->dev, m, b, cm_of(m)->defer, out, err);
}

static void cuda_defer_loss(ct_model *m, int on) { cm_of(m)->defer = on; }

static int cuda_loss_read(ct_model *m, int back, double *loss_sum, ct_error *err)
{
    return cm_of(m)->dev_ops->loss_read(cm_of(m)->dev, back, loss_sum, err);
}

/* The device model's parameters are whole device arrays: need has nothing to wait for. */
static int cuda_backward(ct_model *m, double grad_scale, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx,
                         ct_error *err)
{
    (void)need;
    return cm_of(m)->dev_ops->backward(cm_of(m)->dev, grad_scale, ready, ctx, err);
}

static int cuda_optim_step(ct_model *m, ct_optim *o, int *skipped, ct_error *err)
{
    return cm_of(m)->dev_ops->optim_step(cm_of(m)->dev, o, skipped, err);
}

/* The batch buffers are the device model's pinned host memory: one copy to the device per step. */
static int cuda_batch_buffers(ct_model *m, ct_batch *b, ct_error *err)
{
    b->x.data = cm_of(m)->dev_ops->batch_x(cm_of(m)->dev);
    b->y.data = cm_of(m)->dev_ops->batch_y(cm_of(m)->dev);
    return 0;
}

static int cuda_to_host(ct_model *m, ct_optim *o, ct_error *err)
{
    return cm_of(m)->dev_ops->to_host(cm_of(m)->dev, m->host, o, err);
}

static int cuda_from_host(ct_model *m, const ct_optim *o, ct_error *err)
{
    return cm_of(m)->dev_ops->from_host(cm_of(m)->dev, m->host, o, err);
}

static void cuda_stats(const ct_model *m, int64_t *skipped_steps, double *loss_scale)
{
    *skipped_steps = 0;
    *loss_scale = 1.0;
    if (cm_of(m)->dev_ops->stats)
        cm_of(m)->dev_ops->stats(cm_of(m)->dev, skipped_steps, loss_scale);
}

static const struct ct_model_ops cuda_ops = {
    .destroy = cuda_destroy,
    .forward = cuda_forward,
    .backward = cuda_backward,
    .optim_step = cuda_optim_step,
    .batch_buffers = cuda_batch_buffers,
    .to_host = cuda_to_host,
    .from_host = cuda_from_host,
    .stats = cuda_stats,
};

int ct_cuda_model_wrap(ct_model *host, const ct_model_placement *where, const struct ct_cuda_model_dev *ops, void *dev,
                       void *params, void *grads, ct_model **out, ct_error *err)
{
    struct cuda_model *cm = calloc(1, sizeof(*cm));

    *out = NULL;
    if (!cm) {
        ops->free(dev);
        return ct_error_set(err, CT_ENOMEM, "", "out of memory");
    }
    cm->ops = cuda_ops;
    if (ops->loss_read) {
        cm->ops.defer_loss = cuda_defer_loss;
        cm->ops.loss_read = cuda_loss_read;
    }
    cm->dev_ops = ops;
    cm->dev = dev;
    cm->m = *host;  /* name, describe, info, specs, tensors (host views) */
    cm->m.info.announces_params = 0; /* its kernels read device memory, announced as one range */
    cm->m.ops = &cm->ops;
    cm->m.impl = cm;
    cm->m.host = host;
    cm->m.max_batch = where->max_batch;
    cm->m.params = params;
    cm->m.grads = grads;
    *out = &cm->m;
    return 0;
}
#endif
