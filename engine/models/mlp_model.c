/* SPDX-License-Identifier: BSD-3-Clause */
/* The "mlp" model: the MLP of engine/nn (ct_mlp) behind the model seam. Inputs are the data's
 * flattened x (f32), classes its y values (u8 labels); --model-config hidden=512-256. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/model.h"
#include "engine/models/models.h"

static ct_mlp *mlp_of(const ct_model *m) { return m->impl; }

static void mlp_destroy(ct_model *m)
{
    ct_mlp_free(mlp_of(m));
    free(m);
}

static void mlp_init(ct_model *m, ct_rng *r) { ct_mlp_init(mlp_of(m), r); }

static int mlp_set_gemm_dtype(ct_model *m, enum ct_dtype dtype, ct_error *err)
{
    return ct_mlp_set_gemm_dtype(mlp_of(m), dtype, err);
}

/* 64-true: the MLP's arrays in fp64; the model's views follow them. */
static int mlp_set_param_dtype(ct_model *m, enum ct_dtype dtype, ct_error *err)
{
    ct_mlp *mlp = mlp_of(m);
    int rc = ct_mlp_set_param_dtype(mlp, dtype, err);

    ct_model_set_views(m, ct_mlp_param_dtype(mlp), ct_mlp_params(mlp), ct_mlp_grads(mlp), ct_mlp_tensor(mlp, 0));
    return rc;
}

static int mlp_forward(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                       ct_error *err)
{
    int correct = 0;

    /* A need failure leaves NAN here; ct_model_forward returns the callback's code. */
    out->loss = ct_mlp_forward(mlp_of(m), b->x.data, b->y.data, b->count, &correct, need, ctx);
    out->count = b->count;
    out->correct = correct;
    return 0;
}

/* ct_mlp_backward returns the callback's status; its message is in the callback's own error. */
static int mlp_backward(ct_model *m, double grad_scale, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx,
                        ct_error *err)
{
    return ct_mlp_backward(mlp_of(m), (int)grad_scale, need, ready, ctx);
}

static const struct ct_model_ops mlp_ops = {
    .destroy = mlp_destroy,
    .init = mlp_init,
    .set_param_dtype = mlp_set_param_dtype,
    .set_gemm_dtype = mlp_set_gemm_dtype,
    .forward = mlp_forward,
    .backward = mlp_backward,
};

ct_mlp *ct_mlp_model_mlp(const ct_model *m)
{
    return m && m->ops == &mlp_ops ? m->impl : NULL;
}

static int mlp_create(const ct_config *cfg, const ct_data_info *data, int max_batch, ct_model **out, ct_error *err)
{
    int dims[CT_MLP_MAX_LAYERS + 1], n = 0, n_hidden;
    char have[64];
    ct_model *m;
    ct_mlp *mlp = NULL;
    int rc;

    *out = NULL;
    if (data->x.dtype != CT_DTYPE_F32 || data->y.dtype != CT_DTYPE_U8 || data->y.ndim != 0 || data->classes < 2 ||
        ct_tensor_spec_numel(&data->x) < 1) {
        ct_error_set(err, CT_EINVAL, "data-model-mismatch", "model mlp classifies f32 inputs into u8 classes, but the "
                     "data gives x %s", ct_tensor_spec_str(&data->x, have, sizeof(have)));
        return ct_error_hint(err, "use --datamodule fashion-mnist, or a model for this data (ctrain plan --list)");
    }
    dims[n++] = (int)ct_tensor_spec_numel(&data->x);
    n_hidden = ct_config_int_list(cfg, "hidden", dims + 1, CT_MLP_MAX_LAYERS - 1);
    n += n_hidden;
    dims[n++] = (int)data->classes;
    if (!(m = calloc(1, sizeof(*m))))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory");
    if ((rc = ct_mlp_create(dims, n, max_batch, &mlp, err))) {
        free(m);
        return rc;
    }
    m->ops = &mlp_ops;
    m->impl = mlp;
    ct_mlp_describe(mlp, m->describe, sizeof(m->describe));
    m->info.has_accuracy = 1;
    m->info.announces_params = 1;
    m->x.dtype = CT_DTYPE_F32;
    m->x.ndim = 1;
    m->x.shape[0] = dims[0];
    m->y.dtype = CT_DTYPE_U8;
    m->y.ndim = 0;
    m->max_batch = max_batch;
    m->num_params = ct_mlp_num_params(mlp);
    m->n_tensors = ct_mlp_num_tensors(mlp);
    ct_model_set_views(m, ct_mlp_param_dtype(mlp), ct_mlp_params(mlp), ct_mlp_grads(mlp), ct_mlp_tensor(mlp, 0));
    *out = m;
    return 0;
}

/* Its layers are set by --model-config hidden=W-W, or ctrain fit's alias --hidden W,W. */
const struct ct_model_class ct_model_mlp = {
    .create = mlp_create,
    .shape_hint = "use the --hidden or --model and --model-config of the run that wrote it",
};
