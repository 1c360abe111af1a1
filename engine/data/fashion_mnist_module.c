/* SPDX-License-Identifier: BSD-3-Clause */
/* The "fashion-mnist" data module: Debian's dataset-fashion-mnist IDX files through the IDX reader
 * (engine/data/fashion_mnist.c), as a data module: x f32[784] normalised images, y u8[] labels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/fashion_mnist.h"
#include "ctrain/datamodule.h"
#include "engine/data/datamodules.h"

struct fmnist {
    ct_datamodule dm;
    ct_dataset split[CT_SPLIT_N];
};

static const ct_dataset *split_of(const ct_datamodule *dm, enum ct_split s)
{
    const struct fmnist *f = dm->impl;

    return (unsigned)s < CT_SPLIT_N ? &f->split[s] : NULL;
}

/* A classifier over the flat image: x must be f32 with 784 elements, y a u8 class. */
static int fmnist_setup(ct_datamodule *dm, const ct_tensor_spec *x, const ct_tensor_spec *y, ct_error *err)
{
    char want[64];

    if (x->dtype != CT_DTYPE_F32 || ct_tensor_spec_numel(x) != 784 || y->dtype != CT_DTYPE_U8 || y->ndim != 0) {
        ct_error_set(err, CT_EINVAL, "data-model-mismatch",
                     "the model takes x %s, but fashion-mnist gives x f32[784] (28x28 images) and y u8[] (classes)",
                     ct_tensor_spec_str(x, want, sizeof(want)));
        return ct_error_hint(err, "use --datamodule for the model's data, or a model that classifies images");
    }
    return 0;
}

static size_t fmnist_size(const ct_datamodule *dm, enum ct_split s)
{
    const ct_dataset *d = split_of(dm, s);

    return d ? d->n : 0;
}

static int fmnist_gather(const ct_datamodule *dm, enum ct_split s, const uint32_t *idx, int count, ct_batch *b,
                         ct_error *err)
{
    const ct_dataset *d = split_of(dm, s);

    if (!d || !d->x)
        return ct_error_set(err, CT_EINTERNAL, "", "fashion-mnist: split %d was not loaded", (int)s);
    ct_dataset_gather(d, idx, count, b->x.data, b->y.data);
    b->count = count;
    b->x.spec = dm->info.x;
    b->y.spec = dm->info.y;
    return 0;
}

static void fmnist_destroy(ct_datamodule *dm)
{
    struct fmnist *f = dm->impl;

    for (int i = 0; i < CT_SPLIT_N; i++)
        ct_dataset_free(&f->split[i]);
    free(f);
}

static const struct ct_datamodule_ops fmnist_ops = {
    .setup = fmnist_setup,
    .size = fmnist_size,
    .gather = fmnist_gather,
    .destroy = fmnist_destroy,
};

static int fmnist_open(const char *dir, double val_fraction, unsigned splits, ct_datamodule **out, ct_error *err)
{
    struct fmnist *f = calloc(1, sizeof(*f));
    ct_data_info *info;
    int rc = 0;

    *out = NULL;
    if (!f)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory");
    f->dm.ops = &fmnist_ops;
    f->dm.impl = f;
    if (splits & CT_SPLITS_FIT)
        rc = ct_fmnist_load_fit(dir, val_fraction, &f->split[CT_SPLIT_TRAIN], &f->split[CT_SPLIT_VAL], err);
    if (!rc && (splits & CT_SPLITS_TEST))
        rc = ct_fmnist_load_test(dir, &f->split[CT_SPLIT_TEST], err);
    if (rc) {
        fmnist_destroy(&f->dm);
        return rc;
    }
    info = &f->dm.info;
    info->x.dtype = CT_DTYPE_F32;
    info->x.ndim = 1;
    info->x.shape[0] = 784;
    info->y.dtype = CT_DTYPE_U8;
    info->y.ndim = 0;
    info->classes = 10;
    info->train_order = CT_ORDER_SHUFFLE;
    snprintf(info->description, sizeof(info->description), "Fashion-MNIST %zu/%zu/%zu images",
             f->split[CT_SPLIT_TRAIN].n, f->split[CT_SPLIT_VAL].n, f->split[CT_SPLIT_TEST].n);
    *out = &f->dm;
    return 0;
}

const struct ct_datamodule_class ct_datamodule_fashion_mnist = { .open = fmnist_open };
