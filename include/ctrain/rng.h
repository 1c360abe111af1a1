/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the PRNG every module shares (libctrain-core: no dependencies).
 *
 * xoshiro256** (Blackman & Vigna, 2018, https://prng.di.unimi.it/) seeded through splitmix64.
 * Small, fast, and its whole state is four 64-bit words, which checkpoints store so a resumed run
 * continues the same stream.
 */
#ifndef CTRAIN_RNG_H
#define CTRAIN_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct ct_rng {
    uint64_t s[4];
} ct_rng;

void ct_rng_seed(ct_rng *r, uint64_t seed);
uint64_t ct_rng_next(ct_rng *r);
/* Uniform double in [0, 1), 53 random bits. */
double ct_rng_uniform(ct_rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t ct_rng_below(ct_rng *r, uint64_t n);
/* Fisher-Yates shuffle of idx[0..n). */
void ct_rng_shuffle(ct_rng *r, uint32_t *idx, size_t n);
/* splitmix64 step: mixes x into a well-distributed 64-bit value (used to derive seeds). */
uint64_t ct_splitmix64(uint64_t *x);

#endif
