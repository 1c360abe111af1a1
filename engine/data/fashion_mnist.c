/* SPDX-License-Identifier: BSD-3-Clause */
/* Fashion-MNIST: the four IDX files, checked against each other, normalised once at load. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/fashion_mnist.h"
#include "ctrain/rng.h"

#define SPLIT_SEED 0x5eedf00dULL  /* fixed: the validation set does not move with --seed */

struct raw {
    uint32_t n, rows, cols;
    uint8_t *images, *labels;
};

static void raw_free(struct raw *r)
{
    free(r->images);
    free(r->labels);
}

/* The two headers agree with Fashion-MNIST's shape (28x28 images, a label for each): checked
 * before any data is decompressed, so a small file announcing another shape costs nothing. */
static int check_shapes(const char *ipath, const uint32_t *idims, const char *lpath, const uint32_t *ldims,
                        ct_error *err)
{
    if (idims[1] != 28 || idims[2] != 28)
        return ct_error_set(err, CT_EFORMAT, "fmnist-dims", "%s: images are %ux%u, Fashion-MNIST's are 28x28",
                            ipath, idims[1], idims[2]);
    if (idims[0] != ldims[0])
        return ct_error_set(err, CT_EFORMAT, "fmnist-count", "%s has %u labels but %s has %u images",
                            lpath, ldims[0], ipath, idims[0]);
    return 0;
}

static int check_labels(const char *lpath, const struct raw *r, uint32_t n, ct_error *err)
{
    for (uint32_t i = 0; i < n; i++)
        if (r->labels[i] > 9)
            return ct_error_set(err, CT_EFORMAT, "fmnist-label", "%s: label %u of sample %u is not a class 0-9",
                                lpath, (unsigned)r->labels[i], i);
    return 0;
}

/* Read prefix-images-idx3-ubyte.gz and prefix-labels-idx1-ubyte.gz from dir and check they agree. */
static int read_pair(const char *dir, const char *prefix, struct raw *r, ct_error *err)
{
    char ipath[4096], lpath[4096];
    uint32_t idims[3], ldims[1];
    ct_idx *images = NULL, *labels = NULL;
    int rc;

    memset(r, 0, sizeof(*r));
    if (!dir)
        dir = CT_FMNIST_DEFAULT_DIR;
    snprintf(ipath, sizeof(ipath), "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(lpath, sizeof(lpath), "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    if ((rc = ct_idx_open(ipath, 3, idims, &images, err)) || (rc = ct_idx_open(lpath, 1, ldims, &labels, err))) {
        if (rc == CT_ENOENT)
            ct_error_hint(err, "install Debian's dataset-fashion-mnist (scripts/install-deps) or point "
                               "--data at a directory holding the four *-ubyte.gz files");
        goto fail;
    }
    if ((rc = check_shapes(ipath, idims, lpath, ldims, err)) || (rc = ct_idx_read_data(images, &r->images, err)) ||
        (rc = ct_idx_read_data(labels, &r->labels, err)) || (rc = check_labels(lpath, r, ldims[0], err)))
        goto fail;
    ct_idx_close(images);
    ct_idx_close(labels);
    r->n = idims[0];
    r->rows = idims[1];
    r->cols = idims[2];
    return 0;
fail:
    ct_idx_close(images);
    ct_idx_close(labels);
    raw_free(r);
    return rc;
}

static int dataset_alloc(ct_dataset *d, size_t n, int dim, ct_error *err)
{
    d->n = n;
    d->dim = dim;
    d->classes = 10;
    d->x = malloc((n ? n : 1) * (size_t)dim * sizeof(float));
    d->y = malloc(n ? n : 1);
    if (!d->x || !d->y) {
        ct_dataset_free(d);
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for %zu samples", n);
    }
    return 0;
}

/* Sample src of raw into row dst of d, normalised. */
static void put_row(ct_dataset *d, size_t dst, const struct raw *r, size_t src)
{
    const uint8_t *p = r->images + src * (size_t)d->dim;
    float *x = d->x + dst * (size_t)d->dim;
    const float scale = (float)(1.0 / (255.0 * CT_FMNIST_STD));
    const float shift = (float)(CT_FMNIST_MEAN / CT_FMNIST_STD);

    for (int j = 0; j < d->dim; j++)
        x[j] = (float)p[j] * scale - shift;
    d->y[dst] = r->labels[src];
}

int ct_fmnist_load_fit(const char *dir, double val_fraction, ct_dataset *train, ct_dataset *val,
                       ct_error *err)
{
    struct raw r;
    uint32_t *perm;
    size_t n_val, n_train;
    ct_rng rng;
    int rc;

    memset(train, 0, sizeof(*train));
    memset(val, 0, sizeof(*val));
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return ct_error_set(err, CT_EINVAL, "val-fraction", "--val-fraction %g is outside [0, 1)", val_fraction);
    if ((rc = read_pair(dir, "train", &r, err)))
        return rc;
    n_val = (size_t)llround((double)r.n * val_fraction);
    n_train = r.n - n_val;
    perm = malloc(sizeof(uint32_t) * r.n);
    if (!perm || (rc = dataset_alloc(train, n_train, (int)(r.rows * r.cols), err)) ||
        (rc = dataset_alloc(val, n_val, (int)(r.rows * r.cols), err))) {
        free(perm);
        ct_dataset_free(train);
        raw_free(&r);
        return rc ? rc : ct_error_set(err, CT_ENOMEM, "", "out of memory");
    }
    for (uint32_t i = 0; i < r.n; i++)
        perm[i] = i;
    ct_rng_seed(&rng, SPLIT_SEED);
    ct_rng_shuffle(&rng, perm, r.n);
    for (size_t i = 0; i < n_train; i++)
        put_row(train, i, &r, perm[i]);
    for (size_t i = 0; i < n_val; i++)
        put_row(val, i, &r, perm[n_train + i]);
    free(perm);
    raw_free(&r);
    return 0;
}

int ct_fmnist_load_test(const char *dir, ct_dataset *test, ct_error *err)
{
    struct raw r;
    int rc;

    memset(test, 0, sizeof(*test));
    if ((rc = read_pair(dir, "t10k", &r, err)))
        return rc;
    if ((rc = dataset_alloc(test, r.n, (int)(r.rows * r.cols), err))) {
        raw_free(&r);
        return rc;
    }
    for (size_t i = 0; i < r.n; i++)
        put_row(test, i, &r, i);
    raw_free(&r);
    return 0;
}

void ct_dataset_free(ct_dataset *d)
{
    free(d->x);
    free(d->y);
    d->x = NULL;
    d->y = NULL;
    d->n = 0;
}

void ct_dataset_gather(const ct_dataset *d, const uint32_t *idx, int count, float *x, uint8_t *y)
{
    for (int i = 0; i < count; i++) {
        memcpy(x + (size_t)i * d->dim, d->x + (size_t)idx[i] * d->dim, sizeof(float) * (size_t)d->dim);
        y[i] = d->y[idx[i]];
    }
}
