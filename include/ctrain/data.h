/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — data: the Fashion-MNIST IDX reader and the distributed sampler.
 *
 * Reads the gzip'd IDX files of Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)
 * through zlib. Images are normalised once at load to float ((p/255 - 0.2860) / 0.3530, the
 * training set's mean and standard deviation), so a training step only gathers rows.
 */
#ifndef CTRAIN_DATA_H
#define CTRAIN_DATA_H

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

/* --- the distributed sampler ----------------------------------------------------------------
 * Training (shuffle=1): every epoch a permutation of [0, n) drawn from (seed, epoch); padded by
 * repeating its first samples up to a multiple of world (like PyTorch's DistributedSampler,
 * drop_last=False), so every rank gets exactly ceil(n/world) samples: rank r takes positions
 * r, r+world, ... Equal sample counts give equal step counts on every rank; the last batch of an
 * epoch may be short (the same length on every rank).
 * Evaluation (shuffle=0): no padding (metrics count each sample once): rank r takes indices
 * r, r+world, ...; ranks may differ by one sample and one step, which is fine because evaluation
 * only meets the other ranks in the final reduce.
 * Sequential training (shuffle=CT_SAMPLER_SEQUENTIAL, token windows as llm.c reads them): padded
 * like shuffle, but the order is 0, 1, 2, ... every epoch, rank r taking r, r+world, ...
 * Everything is a function of (seed, epoch, step), so a run resumes at any step of an epoch. */
#define CT_SAMPLER_EVAL       0
#define CT_SAMPLER_SHUFFLE    1
#define CT_SAMPLER_SEQUENTIAL 2
typedef struct ct_sampler {
    size_t n;          /* dataset size */
    int rank, world;
    int batch;
    int shuffle;
    uint64_t seed;
    int64_t epoch;     /* the epoch the order was drawn for */
    size_t per_rank;   /* samples this rank visits per epoch */
    uint32_t *order;   /* [per_rank] dataset indices of this rank, in visiting order */
    uint32_t *perm;    /* [n] scratch for the epoch's permutation (shuffle only) */
} ct_sampler;

int ct_sampler_init(ct_sampler *s, size_t n, int batch, int rank, int world, int shuffle,
                    uint64_t seed, ct_error *err);
void ct_sampler_free(ct_sampler *s);
/* Draw the order of an epoch. */
void ct_sampler_set_epoch(ct_sampler *s, int64_t epoch);
/* Steps of an epoch on this rank (ceil(per_rank / batch)). */
size_t ct_sampler_steps(const ct_sampler *s);
/* The indices of batch number step of the current epoch; returns how many (<= batch). */
int ct_sampler_batch(const ct_sampler *s, size_t step, const uint32_t **idx);

/* Copy the rows idx[0..count) of d into x[count, dim] and y[count]. */
void ct_dataset_gather(const ct_dataset *d, const uint32_t *idx, int count, float *x, uint8_t *y);

#endif
