/* SPDX-License-Identifier: BSD-3-Clause */
/* One token from next-token logits; see sample.h. */
#include <math.h>
#include <stdlib.h>

#include "engine/nn/sample.h"

static int by_logit_desc(const void *a, const void *b)
{
    const struct ct_sample_entry *x = a, *y = b;

    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return x->id - y->id; /* ties in id order: the same choice every time */
}

int32_t ct_sample_token(const float *logits, int V, double temperature, long top_k, struct ct_sample_entry *s,
                        ct_rng *r)
{
    int k = top_k > 0 && top_k < V ? (int)top_k : V;
    double total = 0, u, acc = 0;

    for (int i = 0; i < V; i++) {
        s[i].logit = logits[i];
        s[i].id = i;
    }
    qsort(s, (size_t)V, sizeof(*s), by_logit_desc);
    if (temperature == 0)
        return s[0].id;
    for (int i = 0; i < k; i++)
        total += exp(((double)s[i].logit - s[0].logit) / temperature);
    u = ct_rng_uniform(r) * total;
    for (int i = 0; i < k; i++) {
        acc += exp(((double)s[i].logit - s[0].logit) / temperature);
        if (u < acc)
            return s[i].id;
    }
    return s[k - 1].id;
}
