/* SPDX-License-Identifier: BSD-3-Clause */
/* The "gpt" model on a CUDA device: engine/models/gpt/gpt_cuda.cu behind the model seam, made by the cuda
 * accelerator (ct_model_register_impl("gpt", "cuda", ...)), as the CUDA MLP is. The host model keeps
 * the fp32 master copy for checkpoints (the same tensors as on cpu); batches are gathered straight
 * into the device model's pinned token buffers; forward, backward and the optimizer update run on
 * the device. Status: compiled with nvcc, not yet run on a GPU: the connector refuses gpt on cuda
 * until t/tools/gpt_cuda_check has passed on one (README ## GPUs). */
#include "engine/models/models.h"

#ifdef CT_HAVE_CUDA
#include <math.h>
#include <stdlib.h>

#include "engine/models/gpt/gpt_cuda.h"

struct gpt_cuda_model {
    ct_model m;
    ct_gpt_cuda *dev;
    int defer;        /* the next forward leaves its loss on the device (the training step's) */
};

static ct_gpt_cuda *dev_of(const ct_model *m) { return ((const struct gpt_cuda_model *)m->impl)->dev; }

static void cuda_destroy(ct_model *m)
{
    struct gpt_cuda_model *cm = m->impl;

    ct_gpt_cuda_free(cm->dev);
    free(cm);
}

/* Device memory is never sharded (ddp_sharded is cpu only): need is never given here. */
static int cuda_forward(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                        ct_error *err)
{
    struct gpt_cuda_model *cm = m->impl;
    int rc = ct_gpt_cuda_forward(cm->dev, b->count, cm->defer ? NULL : &out->loss, err);

    if (cm->defer)
        out->loss = NAN;
    out->count = (double)b->count * m->info.context;
    out->correct = 0;
    return rc;
}

static void cuda_defer_loss(ct_model *m, int on) { ((struct gpt_cuda_model *)m->impl)->defer = on; }

static int cuda_loss_read(ct_model *m, int back, double *loss_sum, ct_error *err)
{
    return ct_gpt_cuda_loss_read(dev_of(m), back, loss_sum, err);
}

static int cuda_backward(ct_model *m, double grad_scale, ct_grad_ready_fn ready, void *ctx, ct_error *err)
{
    return ct_gpt_cuda_backward(dev_of(m), grad_scale, ready, ctx, err);
}

static int cuda_optim_step(ct_model *m, ct_optim *o, int *skipped, ct_error *err)
{
    *skipped = 0;
    return ct_gpt_cuda_optim_step(dev_of(m), o, err);
}

/* The batch buffers are the device model's pinned host memory: one copy to the device per step. */
static int cuda_batch_buffers(ct_model *m, ct_batch *b, ct_error *err)
{
    b->x.data = ct_gpt_cuda_batch_inputs(dev_of(m));
    b->y.data = ct_gpt_cuda_batch_targets(dev_of(m));
    return 0;
}

static int cuda_to_host(ct_model *m, ct_optim *o, ct_error *err)
{
    return ct_gpt_cuda_to_host(dev_of(m), ct_gpt_model_gpt(m->host), o, err);
}

static int cuda_from_host(ct_model *m, const ct_optim *o, ct_error *err)
{
    return ct_gpt_cuda_from_host(dev_of(m), ct_gpt_model_gpt(m->host), o, err);
}

static void cuda_stats(const ct_model *m, int64_t *skipped_steps, double *loss_scale)
{
    *skipped_steps = 0;
    *loss_scale = 1.0;
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
    .defer_loss = cuda_defer_loss,
    .loss_read = cuda_loss_read,
};

int ct_gpt_cuda_model_create(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err)
{
    struct gpt_cuda_model *cm;
    ct_gpt *g = ct_gpt_model_gpt(host);
    int rc;

    *out = NULL;
    if (!g)
        return ct_error_set(err, CT_EINTERNAL, "model-not-on-accelerator", "gpt on cuda: the host model is not a gpt");
    if (where->loss_scaling)
        return ct_error_set(err, CT_ENOTAVAIL, "model-precision-unsupported",
                            "the cuda gpt computes in 32-true or bf16-mixed (no loss scaling)");
    if (!(cm = calloc(1, sizeof(*cm))))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory");
    if ((rc = ct_gpt_cuda_create(g, where->optim, where->max_batch, where->gemm_dtype, NULL, &cm->dev, err))) {
        free(cm);
        return rc;
    }
    cm->m = *host;  /* name, describe, info, specs, tensors (host views) */
    cm->m.info.announces_params = 0; /* its kernels read device memory, announced as one range */
    cm->m.ops = &cuda_ops;
    cm->m.impl = cm;
    cm->m.host = host;
    cm->m.max_batch = where->max_batch;
    cm->m.params = ct_gpt_cuda_params(cm->dev);
    cm->m.grads = ct_gpt_cuda_grads(cm->dev);
    *out = &cm->m;
    return 0;
}
#endif
