/* SPDX-License-Identifier: BSD-3-Clause */
/* The Strategy's gradient passes (include/ctrain/strategy.h): the norm, scaling and clamping of
 * this rank's gradients, one loop per storage type (fp32, fp64 under 64-true, bf16 under
 * bf16-true), over the view the strategy gives (a shard of them under a sharded strategy). */
#include <math.h>
#include <stdint.h>

#include "engine/nn/bf16_inline.h"

#include "engine/strategies/strategy_impl.h"

static void grad_view(ct_strategy *s, void **g, size_t *n, int *partial)
{
    *g = s->grads;
    *n = s->n_grads;
    *partial = 0;
    if (s->ops->grad_view)
        s->ops->grad_view(s, g, n, partial);
}

/* The gradient passes for each storage type T (fp32; fp64 under 64-true). */
#define GRAD_PASSES(T, SFX)                                                                                           \
    static double sum_sq_##SFX(const T *g, size_t n)                                                                   \
    {                                                                                                                  \
        double sq = 0;                                                                                                 \
        for (size_t i = 0; i < n; i++)                                                                                 \
            sq += (double)g[i] * (double)g[i];                                                                         \
        return sq;                                                                                                     \
    }                                                                                                                  \
    static void scale_##SFX(T *g, size_t n, T factor)                                                                  \
    {                                                                                                                  \
        for (size_t i = 0; i < n; i++)                                                                                 \
            g[i] *= factor;                                                                                            \
    }                                                                                                                  \
    static void clamp_##SFX(T *g, size_t n, T limit)                                                                   \
    {                                                                                                                  \
        for (size_t i = 0; i < n; i++)                                                                                 \
            g[i] = g[i] > limit ? limit : g[i] < -limit ? -limit : g[i];                                               \
    }

GRAD_PASSES(float, f32)
GRAD_PASSES(double, f64)

/* bf16-true's: each element loaded into fp32, the result stored rounded (the norm summed in fp64). */
static double sum_sq_bf16(const uint16_t *g, size_t n)
{
    double sq = 0;

    for (size_t i = 0; i < n; i++)
        sq += (double)ct_bf16_load(g[i]) * ct_bf16_load(g[i]);
    return sq;
}

static void scale_bf16(uint16_t *g, size_t n, float factor)
{
    for (size_t i = 0; i < n; i++)
        g[i] = ct_bf16_store(ct_bf16_load(g[i]) * factor);
}

static void clamp_bf16(uint16_t *g, size_t n, float limit)
{
    for (size_t i = 0; i < n; i++) {
        float v = ct_bf16_load(g[i]);

        g[i] = ct_bf16_store(v > limit ? limit : v < -limit ? -limit : v);
    }
}

int ct_strategy_grad_norm(ct_strategy *s, double *norm, ct_error *err)
{
    double sq;
    void *g;
    size_t n;
    int partial, rc;

    grad_view(s, &g, &n, &partial);
    sq = s->param_dtype == CT_DTYPE_F64    ? sum_sq_f64(g, n)
         : s->param_dtype == CT_DTYPE_BF16 ? sum_sq_bf16(g, n)
                                           : sum_sq_f32(g, n);
    /* A sharded gradient: the norm over the whole model is the root of the ranks' sums; a replica of
     * a shard another rank counts (partial 2: hybrid_shard's other nodes) adds nothing. */
    if (partial == 2)
        sq = 0;
    if (partial && s->world_size > 1 && (rc = ct_strategy_reduce_sum(s, &sq, 1, err)))
        return rc;
    *norm = sqrt(sq);
    return 0;
}

void ct_strategy_grad_scale(ct_strategy *s, double factor)
{
    void *g;
    size_t n;
    int partial;

    grad_view(s, &g, &n, &partial);
    if (s->param_dtype == CT_DTYPE_F64)
        scale_f64(g, n, factor);
    else if (s->param_dtype == CT_DTYPE_BF16)
        scale_bf16(g, n, (float)factor);
    else
        scale_f32(g, n, (float)factor);
}

void ct_strategy_grad_clamp(ct_strategy *s, double limit)
{
    void *g;
    size_t n;
    int partial;

    grad_view(s, &g, &n, &partial);
    if (s->param_dtype == CT_DTYPE_F64)
        clamp_f64(g, n, limit);
    else if (s->param_dtype == CT_DTYPE_BF16)
        clamp_bf16(g, n, (float)limit);
    else
        clamp_f32(g, n, (float)limit);
}
