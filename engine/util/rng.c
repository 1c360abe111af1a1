/* SPDX-License-Identifier: BSD-3-Clause */
/* xoshiro256** seeded by splitmix64; see include/ctrain/rng.h.
 * Reference: https://prng.di.unimi.it/ (public domain reference code by Blackman & Vigna). */
#include "ctrain/rng.h"

uint64_t ct_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void ct_rng_seed(ct_rng *r, uint64_t seed)
{
    uint64_t x = seed;

    /* splitmix64 never yields four zero words in a row, so the state is valid for every seed. */
    for (int i = 0; i < 4; i++)
        r->s[i] = ct_splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t ct_rng_next(ct_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double ct_rng_uniform(ct_rng *r)
{
    return (double)(ct_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t ct_rng_below(ct_rng *r, uint64_t n)
{
    /* Reject the top partial range so every value is equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;

    do
        v = ct_rng_next(r);
    while (v >= limit);
    return v % n;
}

void ct_rng_shuffle(ct_rng *r, uint32_t *idx, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)ct_rng_below(r, i);
        uint32_t t = idx[i - 1];

        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}
