/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's element-wise passes (everything that is not a GEMM), one function per operation,
 * forward and backward. Row-major; N rows of C (or OC) values. Internal to engine/models/gpt. */
#ifndef CTRAIN_MODELS_GPT_KERNELS_H
#define CTRAIN_MODELS_GPT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Every pass for element type real, its public names made by SFX: fp32 under the names below,
 * fp64 (64-true) with the suffix _f64 (gpt_kernels_f64.c). */
#define GPT_SFX_F32(name) name
#define GPT_SFX_F64(name) name##_f64
#define GPT_KERNELS_DECLARE(real, SFX) \
    /* out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] */ \
    void SFX(gpt_embed)(real *out, const int32_t *tokens, const real *wte, const real *wpe, int B, int T, int C); \
    /* dwte[tokens[b,t],:] += dout[b,t,:]; dwpe = sum over b of dout[b,t,:] (overwritten). */ \
    void SFX(gpt_embed_backward)(real *dwte, real *dwpe, const real *dout, const int32_t *tokens, int B, int T, \
                                 int C); \
 \
    /* out = (x - mean) * rstd * w + b per row (eps 1e-5, biased variance as PyTorch); keeps mean, rstd. */ \
    void SFX(gpt_layernorm_forward)(real *out, real *mean, real *rstd, const real *x, const real *w, const real *b, \
                               int N, int C); \
    /* dx += the input gradient; dw, db overwritten. */ \
    void SFX(gpt_layernorm_backward)(real *dx, real *dw, real *db, const real *dout, const real *x, const real *w, \
                                const real *mean, const real *rstd, int N, int C); \
 \
    /* out[n,:] = (residual ? residual[n,:] : 0) + b (the start of a Linear whose GEMM adds onto it). */ \
    void SFX(gpt_bias_fill)(real *out, const real *residual, const real *b, int N, int OC); \
    /* db = column sums of dout[N,OC] (overwritten). */ \
    void SFX(gpt_column_sums)(real *db, const real *dout, int N, int OC); \
 \
    /* GELU with the tanh approximation (PyTorch's approximate='tanh'). */ \
    void SFX(gpt_gelu_forward)(real *out, const real *x, size_t n); \
    /* d[i] *= GELU'(x[i]), in place: d holds the output gradient on entry, the input gradient on exit. */ \
    void SFX(gpt_gelu_backward)(real *d, const real *x, size_t n); \
 \
    /* One head's [T,T] scores, in place: row t becomes softmax of columns 0..t, zeros after. */ \
    void SFX(gpt_causal_softmax)(real *att, int T); \
    /* In place on datt[T,T] (the gradient of the probabilities att): the gradient of the scores. */ \
    void SFX(gpt_causal_softmax_backward)(real *datt, const real *att, int T); \
 \
    /* logits[N,V] -> probabilities in place; returns the summed -log p(target) in nats. */ \
    double SFX(gpt_softmax_xent_forward)(real *probs, const int32_t *targets, int N, int V); \
    /* probs -> (probs - onehot(targets)) * scale, in place (scale = 1 / tokens in the mean). */ \
    void SFX(gpt_softmax_xent_backward)(real *probs, const int32_t *targets, int N, int V, real scale);

GPT_KERNELS_DECLARE(float, GPT_SFX_F32)
GPT_KERNELS_DECLARE(double, GPT_SFX_F64)

#endif
