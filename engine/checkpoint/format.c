/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain's checkpoint format: the model's tensors and the readers' checks; see
 * engine/checkpoint/format.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/checkpoint/format.h"

void ct_ckpt_tensor_add(ct_ckpt *c, const char *name, void *data, enum ct_dtype dtype, int ndim, const int64_t *shape,
                        size_t numel)
{
    ct_ckpt_tensor *t = &c->tensors[c->n_tensors++];

    snprintf(t->name, sizeof(t->name), "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    t->data = data;
    t->nbytes = numel * ct_dtype_size(dtype);
}

void ct_ckpt_model_tensors_add(ct_ckpt *c, const ct_model *m)
{
    for (int i = 0; i < m->n_tensors; i++) {
        const ct_tensor *t = &m->tensors[i];

        ct_ckpt_tensor_add(c, t->name, t->data, m->param_dtype, t->ndim, t->shape, t->numel);
    }
}

/* The index of t's first element that is not finite, or -1. BF16 and F16 by their exponent bits
 * (all ones: Inf or NaN). */
static long first_nonfinite(const ct_ckpt_tensor *t)
{
    size_t size = ct_dtype_size((enum ct_dtype)t->dtype), n = size ? t->nbytes / size : 0;

    for (size_t i = 0; t->data && i < n; i++) {
        int bad = 0;

        if (t->dtype == CT_DTYPE_F32)
            bad = !isfinite(((const float *)t->data)[i]);
        else if (t->dtype == CT_DTYPE_F64)
            bad = !isfinite(((const double *)t->data)[i]);
        else if (t->dtype == CT_DTYPE_BF16)
            bad = (((const uint16_t *)t->data)[i] & 0x7f80) == 0x7f80;
        else if (t->dtype == CT_DTYPE_F16)
            bad = (((const uint16_t *)t->data)[i] & 0x7c00) == 0x7c00;
        else
            return -1;
        if (bad)
            return (long)i;
    }
    return -1;
}

int ct_ckpt_check_finite(const char *path, const ct_ckpt *c, ct_error *err)
{
    for (int i = 0; i < c->n_tensors; i++) {
        long at = first_nonfinite(&c->tensors[i]);

        if (at >= 0) {
            ct_error_set(err, CT_EFORMAT, "ckpt-nonfinite", "%s: tensor %s holds a value that is not finite (NaN or "
                         "Inf) at element %ld", path, c->tensors[i].name, at);
            return ct_error_hint(err, "the run that wrote it diverged, or the file was altered: use an earlier "
                                      "checkpoint (best.safetensors, epoch=N-step=M.safetensors)");
        }
    }
    return 0;
}
