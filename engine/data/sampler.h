/* SPDX-License-Identifier: BSD-3-Clause */
/* The distributed sampler: which samples each rank visits, in which order (internal to libctrain;
 * the loops draw the training batches through it, whatever the data module). */
#ifndef CTRAIN_DATA_SAMPLER_H
#define CTRAIN_DATA_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/error.h"

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

#endif
