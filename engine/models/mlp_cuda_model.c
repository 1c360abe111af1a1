/* SPDX-License-Identifier: BSD-3-Clause */
/* The "mlp" model on a CUDA device: engine/models/mlp/mlp_cuda.cu behind the model seam
 * (cuda_model.c), made by the cuda accelerator (ct_model_register_impl("mlp", "cuda", ...)). Its
 * loss is read at every forward; 16-mixed's dynamic loss scale lives on the device (stats).
 * Status: compiled with nvcc, not yet run on a GPU (see README ## GPUs). */
#include "engine/models/models.h"

#ifdef CT_HAVE_CUDA
#include "engine/models/cuda_model.h"
#include "engine/models/mlp/mlp_cuda.h"

static void dev_free(void *d) { ct_mlp_cuda_free(d); }

static int dev_forward(void *d, const ct_model *m, const ct_batch *b, int defer, ct_model_sums *out, ct_error *err)
{
    int correct = 0, rc = ct_mlp_cuda_forward(d, b->count, &out->loss, &correct, err);

    out->count = b->count;
    out->correct = correct;
    return rc;
}

static int dev_backward(void *d, double grad_scale, ct_grad_ready_fn ready, void *ctx, ct_error *err)
{
    return ct_mlp_cuda_backward(d, (int)grad_scale, ready, ctx, err);
}

static void *dev_x(void *d) { return ct_mlp_cuda_batch_x(d); }

static int dev_to_host(void *d, ct_model *host, ct_optim *o, ct_error *err)
{
    return ct_mlp_cuda_to_host(d, ct_mlp_model_mlp(host), o, err);
}

static void *dev_y(void *d) { return ct_mlp_cuda_batch_y(d); }

static int dev_from_host(void *d, ct_model *host, const ct_optim *o, ct_error *err)
{
    return ct_mlp_cuda_from_host(d, ct_mlp_model_mlp(host), o, err);
}

static void dev_stats(void *d, int64_t *skipped_steps, double *loss_scale)
{
    *skipped_steps = ct_mlp_cuda_skipped_steps(d);
    *loss_scale = ct_mlp_cuda_loss_scale(d);
}

/* It may skip a step (16-mixed's overflow). */
static int dev_optim_step(void *d, ct_optim *o, int *skipped, ct_error *err)
{
    return ct_mlp_cuda_optim_step(d, o, skipped, err);
}

static const struct ct_cuda_model_dev mlp_dev = {
    dev_free, dev_forward, NULL, dev_backward, dev_optim_step, dev_x, dev_y, dev_to_host, dev_from_host, dev_stats,
};

int ct_mlp_cuda_model_create(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err)
{
    ct_mlp_cuda *d;
    int rc;

    *out = NULL;
    if ((rc = ct_mlp_cuda_create(ct_mlp_model_mlp(host), where->optim, where->max_batch, where->gemm_dtype, &d, err)))
        return rc;
    return ct_cuda_model_wrap(host, where, &mlp_dev, d, ct_mlp_cuda_params(d), ct_mlp_cuda_grads(d), out, err);
}
#endif
