/* SPDX-License-Identifier: BSD-3-Clause */
/* SGD with momentum and AdamW, with PyTorch's update rules; see include/ctrain/nn.h. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/nn.h"
#include "engine/nn/bf16_inline.h"
#include "engine/nn/simd.h"
#include "engine/nn/thread_share.h"

struct ct_optim {
    ct_optim_config cfg;
    size_t n;            /* elements the state covers: all parameters, or a shard of them */
    size_t shard_lo;     /* first parameter of the shard (0 when whole) */
    size_t total;        /* parameters of the model */
    int64_t steps;
    int n_states;
    const char *state_names[2];
    void *state[CT_OPTIM_MAX_STATES];   /* of cfg.dtype */
};

void ct_optim_config_default(ct_optim_config *cfg, enum ct_optim_kind kind)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->kind = kind;
    cfg->lr = 1e-3;
    cfg->beta1 = 0.9;
    cfg->beta2 = 0.999;
    cfg->eps = 1e-8;
    cfg->weight_decay = kind == CT_OPTIM_ADAMW ? 0.01 : 0.0;
    cfg->momentum = kind == CT_OPTIM_SGD ? 0.9 : 0.0;
}

int ct_optim_parse_kind(const char *name, enum ct_optim_kind *out)
{
    if (!strcmp(name, "adamw"))
        *out = CT_OPTIM_ADAMW;
    else if (!strcmp(name, "sgd"))
        *out = CT_OPTIM_SGD;
    else
        return CT_EINVAL;
    return 0;
}

const char *ct_optim_kind_name(enum ct_optim_kind kind)
{
    return kind == CT_OPTIM_SGD ? "sgd" : "adamw";
}

int ct_optim_create(const ct_optim_config *cfg, size_t n, ct_optim **out, ct_error *err)
{
    ct_optim *o = calloc(1, sizeof(*o));

    *out = NULL;
    if (!o)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory creating the optimizer");
    if (cfg->dtype != CT_DTYPE_F32 && cfg->dtype != CT_DTYPE_F64 && cfg->dtype != CT_DTYPE_BF16) {
        free(o);
        return ct_error_set(err, CT_ENOTAVAIL, "", "the optimizer updates fp32, fp64 or bf16 parameters only");
    }
    o->cfg = *cfg;
    o->n = n;
    o->total = n;
    if (cfg->kind == CT_OPTIM_ADAMW) {
        o->n_states = 2;
        o->state_names[0] = "exp_avg";
        o->state_names[1] = "exp_avg_sq";
    } else {
        o->n_states = 1;
        o->state_names[0] = "momentum_buffer";
    }
    for (int i = 0; i < o->n_states; i++) {
        o->state[i] = calloc(n ? n : 1, ct_dtype_size(cfg->dtype));
        if (!o->state[i]) {
            ct_optim_free(o);
            return ct_error_set(err, CT_ENOMEM, "", "out of memory for optimizer state");
        }
    }
    *out = o;
    return 0;
}

void ct_optim_free(ct_optim *o)
{
    if (!o)
        return;
    for (int i = 0; i < o->n_states; i++)
        free(o->state[i]);
    free(o);
}

/* torch.optim.AdamW: p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
 * torch.optim.SGD (dampening 0, not Nesterov): g += wd p; buf = mu buf + g (buf = g at the first
 * step, which a zero buffer gives too); p -= lr buf.
 * Both for each storage type T in T's own arithmetic, as PyTorch computes them for a tensor of that
 * dtype (fp32 for 32-true, fp64 for 64-true). */
/* Cloned per vector ISA (engine/nn/simd.h): the update is memory-bound element-wise work over
 * every parameter, a third of a step when left scalar. */
#define OPTIM_RANGES(T, SFX, SQRT)                                                                                    \
    CT_SIMD_CLONES                                                                                                     \
    static void adamw_range_##SFX(ct_optim *o, T *restrict p, const T *restrict g, size_t lo, size_t hi)              \
    {                                                                                                                  \
        const ct_optim_config *c = &o->cfg;                                                                            \
        T *m = o->state[0], *v = o->state[1];                                                                          \
        double t = (double)o->steps;                                                                                   \
        T b1 = (T)c->beta1, b2 = (T)c->beta2, eps = (T)c->eps;                                                         \
        T decay = (T)(1.0 - c->lr * c->weight_decay);                                                                  \
        T step_size = (T)(c->lr / (1.0 - pow(c->beta1, t)));                                                           \
        T inv_sqrt_bc2 = (T)(1.0 / sqrt(1.0 - pow(c->beta2, t)));                                                      \
        for (size_t i = lo; i < hi; i++) {                                                                             \
            T gi = g[i];                                                                                               \
            m[i] = b1 * m[i] + ((T)1 - b1) * gi;                                                                       \
            v[i] = b2 * v[i] + ((T)1 - b2) * gi * gi;                                                                  \
            p[i] = p[i] * decay - step_size * m[i] / (SQRT(v[i]) * inv_sqrt_bc2 + eps);                                \
        }                                                                                                              \
    }                                                                                                                  \
    CT_SIMD_CLONES                                                                                                     \
    static void sgd_range_##SFX(ct_optim *o, T *restrict p, const T *restrict g, size_t lo, size_t hi)                \
    {                                                                                                                  \
        const ct_optim_config *c = &o->cfg;                                                                            \
        T lr = (T)c->lr, wd = (T)c->weight_decay, mu = (T)c->momentum;                                                 \
        T *buf = o->state[0];                                                                                          \
        for (size_t i = lo; i < hi; i++) {                                                                             \
            T gi = g[i] + wd * p[i];                                                                                   \
            buf[i] = mu * buf[i] + gi;                                                                                 \
            p[i] -= lr * (mu != (T)0 ? buf[i] : gi);                                                                   \
        }                                                                                                              \
    }

OPTIM_RANGES(float, f32, sqrtf)
OPTIM_RANGES(double, f64, sqrt)

/* bf16-true (Lightning's bf16-true with torch.optim.AdamW): the parameters, their gradients and the
 * optimizer's state are bf16 tensors (PyTorch makes the state zeros_like(param)); each element is
 * loaded into fp32, the whole update rule computed in fp32, and p, m, v stored rounded once each.
 * PyTorch's eager AdamW rounds after every tensor operation instead; the difference is a rounding
 * or two per step (t/70 compares 20 steps within 2e-2). As in PyTorch, an update smaller than half
 * a bf16 ulp of its parameter is lost: LayerNorm weights of 1.0 stay 1.0 at lr 1e-3. */
CT_SIMD_CLONES
static void adamw_range_bf16(ct_optim *o, uint16_t *restrict p, const uint16_t *restrict g, size_t lo, size_t hi)
{
    const ct_optim_config *c = &o->cfg;
    uint16_t *m = o->state[0], *v = o->state[1];
    double t = (double)o->steps;
    float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
    float decay = (float)(1.0 - c->lr * c->weight_decay);
    float step_size = (float)(c->lr / (1.0 - pow(c->beta1, t)));
    float inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(c->beta2, t)));

    for (size_t i = lo; i < hi; i++) {
        float gi = ct_bf16_load(g[i]);
        float mi = b1 * ct_bf16_load(m[i]) + (1.0f - b1) * gi;
        float vi = b2 * ct_bf16_load(v[i]) + (1.0f - b2) * gi * gi;

        m[i] = ct_bf16_store(mi);
        v[i] = ct_bf16_store(vi);
        p[i] = ct_bf16_store(ct_bf16_load(p[i]) * decay - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps));
    }
}

CT_SIMD_CLONES
static void sgd_range_bf16(ct_optim *o, uint16_t *restrict p, const uint16_t *restrict g, size_t lo, size_t hi)
{
    const ct_optim_config *c = &o->cfg;
    float lr = (float)c->lr, wd = (float)c->weight_decay, mu = (float)c->momentum;
    uint16_t *buf = o->state[0];

    for (size_t i = lo; i < hi; i++) {
        float pi = ct_bf16_load(p[i]), gi = ct_bf16_load(g[i]) + wd * pi;
        float bi = mu * ct_bf16_load(buf[i]) + gi;

        buf[i] = ct_bf16_store(bi);
        p[i] = ct_bf16_store(pi - lr * (mu != 0.0f ? bi : gi));
    }
}

static void update_range(ct_optim *o, void *p, const void *g, size_t lo, size_t hi)
{
    int adamw = o->cfg.kind == CT_OPTIM_ADAMW;

    if (o->cfg.dtype == CT_DTYPE_F64)
        (adamw ? adamw_range_f64 : sgd_range_f64)(o, p, g, lo, hi);
    else if (o->cfg.dtype == CT_DTYPE_BF16)
        (adamw ? adamw_range_bf16 : sgd_range_bf16)(o, p, g, lo, hi);
    else
        (adamw ? adamw_range_f32 : sgd_range_f32)(o, p, g, lo, hi);
}

/* The update is element-wise: each OpenMP thread (the rank's threads) takes one contiguous range,
 * cut at multiples of 16 (a cache line) so no two threads write one. */
void ct_optim_step(ct_optim *o, void *params, const void *grads)
{
    o->steps++;
#pragma omp parallel if (o->n >= 65536)
    {
        size_t lo, k = ct_thread_share(o->n, 16, &lo);

        if (k)
            update_range(o, params, grads, lo, lo + k);
    }
}

int ct_optim_shard(ct_optim *o, size_t lo, size_t count, ct_error *err)
{
    if (lo > o->n || count > o->n - lo)
        return ct_error_set(err, CT_EINVAL, "", "optimizer shard [%zu, %zu) outside its %zu elements", lo, lo + count,
                            o->n);
    for (int i = 0; i < o->n_states; i++) {
        /* The shard's own values stay (a state loaded before sharding is kept); the rest is freed. */
        size_t es = ct_dtype_size(o->cfg.dtype);
        void *part = malloc((count ? count : 1) * es);

        if (!part)
            return ct_error_set(err, CT_ENOMEM, "", "out of memory for the optimizer state shard");
        memcpy(part, (char *)o->state[i] + lo * es, count * es);
        free(o->state[i]);
        o->state[i] = part;
    }
    o->shard_lo += lo;
    o->n = count;
    return 0;
}

int ct_optim_shard_ranges(ct_optim *o, const size_t *lo, const size_t *count, int n, ct_error *err)
{
    size_t es = ct_dtype_size(o->cfg.dtype), total = 0;

    for (int r = 0; r < n; r++) {
        if (lo[r] > o->n || count[r] > o->n - lo[r])
            return ct_error_set(err, CT_EINVAL, "", "optimizer shard range [%zu, %zu) outside its %zu elements",
                                lo[r], lo[r] + count[r], o->n);
        total += count[r];
    }
    for (int i = 0; i < o->n_states; i++) {
        char *part = malloc((total ? total : 1) * es), *at = part;

        if (!part)
            return ct_error_set(err, CT_ENOMEM, "", "out of memory for the optimizer state shard");
        for (int r = 0; r < n; r++, at += count[r - 1] * es)
            memcpy(at, (char *)o->state[i] + lo[r] * es, count[r] * es);
        free(o->state[i]);
        o->state[i] = part;
    }
    o->shard_lo += n ? lo[0] : 0;
    o->n = total;
    return 0;
}

void ct_optim_shard_range(const ct_optim *o, size_t *lo, size_t *count, size_t *total)
{
    *lo = o->shard_lo;
    *count = o->n;
    *total = o->total;
}

size_t ct_optim_state_bytes(const ct_optim *o)
{
    return (size_t)o->n_states * o->n * ct_dtype_size(o->cfg.dtype);
}

const ct_optim_config *ct_optim_get_config(const ct_optim *o) { return &o->cfg; }
void ct_optim_set_lr(ct_optim *o, double lr) { o->cfg.lr = lr; }
int64_t ct_optim_steps(const ct_optim *o) { return o->steps; }
void ct_optim_set_steps(ct_optim *o, int64_t steps) { o->steps = steps; }
int ct_optim_num_states(const ct_optim *o) { return o->n_states; }
const char *ct_optim_state_name(const ct_optim *o, int i) { return o->state_names[i]; }
void *ct_optim_state(ct_optim *o, int i) { return o->state[i]; }
enum ct_dtype ct_optim_dtype(const ct_optim *o) { return o->cfg.dtype; }
