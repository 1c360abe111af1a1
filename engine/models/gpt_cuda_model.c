/* SPDX-License-Identifier: BSD-3-Clause */
/* The "gpt" model on a CUDA device: engine/models/gpt/gpt_cuda.cu behind the model seam
 * (cuda_model.c), made by the cuda accelerator (ct_model_register_impl("gpt", "cuda", ...)), as the
 * CUDA MLP is. Batches are gathered straight into the device model's pinned token buffers; its
 * training step's loss stays on the device until the loop reads it (defer_loss, loss_read).
 * Status: compiled with nvcc, not yet run on a GPU: the connector refuses gpt on cuda until
 * t/tools/gpt_cuda_check has passed on one (README ## GPUs). */
#include "engine/models/models.h"

#ifdef CT_HAVE_CUDA
#include <math.h>

#include "engine/models/cuda_model.h"
#include "engine/models/gpt/gpt_cuda.h"

static void dev_free(void *d) { ct_gpt_cuda_free(d); }

static int dev_forward(void *d, const ct_model *m, const ct_batch *b, int defer, ct_model_sums *out, ct_error *err)
{
    int rc = ct_gpt_cuda_forward(d, b->count, defer ? NULL : &out->loss, err);

    if (defer)
        out->loss = NAN;
    out->count = (double)b->count * m->info.context;
    out->correct = 0;
    return rc;
}

static int dev_loss_read(void *d, int back, double *loss_sum, ct_error *err)
{
    return ct_gpt_cuda_loss_read(d, back, loss_sum, err);
}

static int dev_backward(void *d, double grad_scale, ct_grad_ready_fn ready, void *ctx, ct_error *err)
{
    return ct_gpt_cuda_backward(d, grad_scale, ready, ctx, err);
}

static int dev_optim_step(void *d, ct_optim *o, int *skipped, ct_error *err)
{
    *skipped = 0;
    return ct_gpt_cuda_optim_step(d, o, err);
}

static void *dev_inputs(void *d) { return ct_gpt_cuda_batch_inputs(d); }

static int dev_to_host(void *d, ct_model *host, ct_optim *o, ct_error *err)
{
    return ct_gpt_cuda_to_host(d, ct_gpt_model_gpt(host), o, err);
}

static void *dev_targets(void *d) { return ct_gpt_cuda_batch_targets(d); }

static int dev_from_host(void *d, ct_model *host, const ct_optim *o, ct_error *err)
{
    return ct_gpt_cuda_from_host(d, ct_gpt_model_gpt(host), o, err);
}

/* No loss scaling on the device (stats: none skipped, scale 1). */
static const struct ct_cuda_model_dev gpt_dev = {
    dev_free, dev_forward, dev_loss_read, dev_backward, dev_optim_step, dev_inputs, dev_targets, dev_to_host,
    dev_from_host, NULL,
};

int ct_gpt_cuda_model_create(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err)
{
    ct_gpt *g = ct_gpt_model_gpt(host);
    ct_gpt_cuda *d;
    int rc;

    *out = NULL;
    if (!g)
        return ct_error_set(err, CT_EINTERNAL, "model-not-on-accelerator", "gpt on cuda: the host model is not a gpt");
    if (where->loss_scaling)
        return ct_error_set(err, CT_ENOTAVAIL, "model-precision-unsupported",
                            "the cuda gpt computes in 32-true or bf16-mixed (no loss scaling)");
    if ((rc = ct_gpt_cuda_create(g, where->optim, where->max_batch, where->gemm_dtype, NULL, &d, err)))
        return rc;
    return ct_cuda_model_wrap(host, where, &gpt_dev, d, ct_gpt_cuda_params(d), ct_gpt_cuda_grads(d), out, err);
}
#endif
