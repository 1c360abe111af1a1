/* SPDX-License-Identifier: BSD-3-Clause */
/* The distributed sampler; see engine/data/sampler.h for the padding and sharding rules. */
#include <stdlib.h>
#include <string.h>

#include "engine/data/sampler.h"
#include "ctrain/rng.h"

int ct_sampler_init(ct_sampler *s, size_t n, int batch, int rank, int world, int shuffle,
                    uint64_t seed, ct_error *err)
{
    memset(s, 0, sizeof(*s));
    if (world < 1 || rank < 0 || rank >= world || batch < 1 || n > UINT32_MAX)
        return ct_error_set(err, CT_EINVAL, "sampler", "sampler: rank %d of %d, batch %d, %zu samples is invalid",
                            rank, world, batch, n);
    s->n = n;
    s->rank = rank;
    s->world = world;
    s->batch = batch;
    s->shuffle = shuffle == CT_SAMPLER_SHUFFLE;
    s->seed = seed;
    s->epoch = -1;
    if (shuffle == CT_SAMPLER_SHUFFLE || shuffle == CT_SAMPLER_SEQUENTIAL)
        s->per_rank = (n + (size_t)world - 1) / (size_t)world;
    else
        s->per_rank = n / (size_t)world + ((size_t)rank < n % (size_t)world);
    s->order = malloc(sizeof(uint32_t) * (s->per_rank ? s->per_rank : 1));
    s->perm = s->shuffle ? malloc(sizeof(uint32_t) * (n ? n : 1)) : NULL;
    if (!s->order || (s->shuffle && !s->perm)) {
        ct_sampler_free(s);
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for the sampler");
    }
    /* Padded sequential order wraps around to the first windows, as shuffle's padding does. */
    if (!s->shuffle)
        for (size_t i = 0; i < s->per_rank; i++)
            s->order[i] = (uint32_t)((i * (size_t)world + (size_t)rank) % (n ? n : 1));
    return 0;
}

void ct_sampler_free(ct_sampler *s)
{
    free(s->order);
    free(s->perm);
    s->order = s->perm = NULL;
}

void ct_sampler_set_epoch(ct_sampler *s, int64_t epoch)
{
    uint32_t *perm = s->perm;
    uint64_t mix;
    ct_rng rng;

    if (!s->shuffle || s->epoch == epoch)
        return;
    s->epoch = epoch;
    /* Every rank draws the same permutation from (seed, epoch), then takes its own positions. */
    mix = s->seed ^ 0x6a09e667f3bcc909ULL;
    ct_rng_seed(&rng, ct_splitmix64(&mix) + (uint64_t)epoch * 0x9e3779b97f4a7c15ULL);
    for (size_t i = 0; i < s->n; i++)
        perm[i] = (uint32_t)i;
    ct_rng_shuffle(&rng, perm, s->n);
    for (size_t i = 0; i < s->per_rank; i++)
        s->order[i] = perm[(i * (size_t)s->world + (size_t)s->rank) % s->n];
}

size_t ct_sampler_steps(const ct_sampler *s)
{
    return (s->per_rank + (size_t)s->batch - 1) / (size_t)s->batch;
}

int ct_sampler_batch(const ct_sampler *s, size_t step, const uint32_t **idx)
{
    size_t start = step * (size_t)s->batch;
    size_t left = start < s->per_rank ? s->per_rank - start : 0;

    *idx = s->order + start;
    return (int)(left < (size_t)s->batch ? left : (size_t)s->batch);
}
