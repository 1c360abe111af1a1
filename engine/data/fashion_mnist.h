/* SPDX-License-Identifier: BSD-3-Clause */
/* Fashion-MNIST's files: the IDX reader and the dataset (internal to libctrain; the
 * "fashion-mnist" data module, engine/data/fashion_mnist_module.c, serves it to the Trainer).
 *
 * Reads the gzip'd IDX files of Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)
 * through zlib. Images are normalised once at load to float ((p/255 - 0.2860) / 0.3530, the
 * training set's mean and standard deviation), so a training step only gathers rows.
 */
#ifndef CTRAIN_DATA_FASHION_MNIST_H
#define CTRAIN_DATA_FASHION_MNIST_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/error.h"

#define CT_FMNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define CT_FMNIST_MEAN 0.2860
#define CT_FMNIST_STD  0.3530

/* --- IDX ------------------------------------------------------------------------------------- */
/* Read an IDX file (gzip'd or plain: zlib reads both) of unsigned bytes with ndim dimensions.
 * dims[0..ndim) receive the sizes; *data a malloc'd array of their product. Missing file:
 * CT_ENOENT; wrong magic, wrong dimension count, truncated data or trailing bytes: CT_EFORMAT,
 * the message naming the file and the problem. */
int ct_idx_read_u8(const char *path, int ndim, uint32_t *dims, uint8_t **data, ct_error *err);

/* The same in two steps, so a caller checks the header's dimensions against the shape it expects
 * before the data is decompressed (a small gzip file may announce hundreds of MiB):
 * ct_idx_open reads the header into dims (opened without blocking, a regular file only),
 * ct_idx_read_data the data; ct_idx_close (NULL ok) after either. */
typedef struct ct_idx ct_idx;
int ct_idx_open(const char *path, int ndim, uint32_t *dims, ct_idx **out, ct_error *err);
int ct_idx_read_data(ct_idx *x, uint8_t **data, ct_error *err);
void ct_idx_close(ct_idx *x);

/* --- datasets ------------------------------------------------------------------------------- */
typedef struct ct_dataset {
    size_t n;       /* samples */
    int dim;        /* features per sample (784) */
    int classes;    /* 10 */
    float *x;       /* [n, dim], normalised */
    uint8_t *y;     /* [n] */
} ct_dataset;

/* Training set split into train and validation: a fixed permutation (independent of --seed, so
 * every run validates on the same samples) puts round(n * val_fraction) samples in val.
 * val_fraction in [0, 1); 0 leaves val empty. dir NULL: the default directory. */
int ct_fmnist_load_fit(const char *dir, double val_fraction, ct_dataset *train, ct_dataset *val,
                       ct_error *err);
/* The official test set (t10k). */
int ct_fmnist_load_test(const char *dir, ct_dataset *test, ct_error *err);
void ct_dataset_free(ct_dataset *d);

/* Copy the rows idx[0..count) of d into x[count, dim] and y[count]. */
void ct_dataset_gather(const ct_dataset *d, const uint32_t *idx, int count, float *x, uint8_t *y);

#endif
