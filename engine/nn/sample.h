/* SPDX-License-Identifier: BSD-3-Clause */
/* One token drawn from a language model's next-token logits (ctrain generate): the most likely at
 * temperature 0, else a draw from softmax(logits / temperature) over the top_k most likely. The
 * same seed of r gives the same draws. */
#ifndef CTRAIN_NN_SAMPLE_H
#define CTRAIN_NN_SAMPLE_H

#include <stdint.h>

#include "ctrain/rng.h"

/* Scratch for one draw: a logit and its token, V of them. */
struct ct_sample_entry {
    float logit;
    int id;
};

/* A token from logits[V] (top_k 0: all V); s is scratch for V entries. Ties between equal logits
 * go to the lower id, so the choice is the same every time. */
int32_t ct_sample_token(const float *logits, int V, double temperature, long top_k, struct ct_sample_entry *s,
                        ct_rng *r);

#endif
