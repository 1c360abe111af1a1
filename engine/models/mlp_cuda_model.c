/* SPDX-License-Identifier: BSD-3-Clause */
/* The "mlp" model on a CUDA device: engine/models/mlp/mlp_cuda.cu behind the model seam, made by the cuda
 * accelerator (ct_model_register_impl("mlp", "cuda", ...)). The host model keeps the fp32 master
 * copy for checkpoints; batches are gathered straight into the device model's pinned buffers, and
 * forward, backward and the optimizer update run on the device.
 * Status: compiled with nvcc, not yet run on a GPU (see README ## GPUs). */
#include "engine/models/models.h"

#ifdef CT_HAVE_CUDA
#include <stdlib.h>

#include "engine/models/mlp/mlp_cuda.h"

struct mlp_cuda_model {
    ct_model m;
    ct_mlp_cuda *dev;
};

static ct_mlp_cuda *dev_of(const ct_model *m) { return ((const struct mlp_cuda_model *)m->impl)->dev; }

static void cuda_destroy(ct_model *m)
{
    struct mlp_cuda_model *cm = m->impl;

    ct_mlp_cuda_free(cm->dev);
    free(cm);
}

/* Device memory is never sharded (ddp_sharded is cpu only): need is never given here. */
static int cuda_forward(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                        ct_error *err)
{
    int correct = 0, rc = ct_mlp_cuda_forward(dev_of(m), b->count, &out->loss, &correct, err);

    out->count = b->count;
    out->correct = correct;
    return rc;
}

static int cuda_backward(ct_model *m, double grad_scale, ct_grad_ready_fn ready, void *ctx, ct_error *err)
{
    return ct_mlp_cuda_backward(dev_of(m), (int)grad_scale, ready, ctx, err);
}

static int cuda_optim_step(ct_model *m, ct_optim *o, int *skipped, ct_error *err)
{
    return ct_mlp_cuda_optim_step(dev_of(m), o, skipped, err);
}

/* The batch buffers are the device model's pinned host memory: one copy to the device per step. */
static int cuda_batch_buffers(ct_model *m, ct_batch *b, ct_error *err)
{
    b->x.data = ct_mlp_cuda_batch_x(dev_of(m));
    b->y.data = ct_mlp_cuda_batch_y(dev_of(m));
    return 0;
}

static int cuda_to_host(ct_model *m, ct_optim *o, ct_error *err)
{
    return ct_mlp_cuda_to_host(dev_of(m), ct_mlp_model_mlp(m->host), o, err);
}

static int cuda_from_host(ct_model *m, const ct_optim *o, ct_error *err)
{
    return ct_mlp_cuda_from_host(dev_of(m), ct_mlp_model_mlp(m->host), o, err);
}

static void cuda_stats(const ct_model *m, int64_t *skipped_steps, double *loss_scale)
{
    *skipped_steps = ct_mlp_cuda_skipped_steps(dev_of(m));
    *loss_scale = ct_mlp_cuda_loss_scale(dev_of(m));
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

int ct_mlp_cuda_model_create(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err)
{
    struct mlp_cuda_model *cm = calloc(1, sizeof(*cm));
    int rc;

    *out = NULL;
    if (!cm)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory");
    if ((rc = ct_mlp_cuda_create(ct_mlp_model_mlp(host), where->optim, where->max_batch, where->gemm_dtype, &cm->dev, err))) {
        free(cm);
        return rc;
    }
    cm->m = *host;  /* name, describe, info, specs, tensors (host views) */
    cm->m.info.announces_params = 0; /* its kernels read device memory, announced as one range */
    cm->m.ops = &cuda_ops;
    cm->m.impl = cm;
    cm->m.host = host;
    cm->m.max_batch = where->max_batch;
    cm->m.params = ct_mlp_cuda_params(cm->dev);
    cm->m.grads = ct_mlp_cuda_grads(cm->dev);
    *out = &cm->m;
    return 0;
}
#endif
