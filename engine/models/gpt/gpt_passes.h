/* SPDX-License-Identifier: BSD-3-Clause */
/* The cpu GPT's element-wise passes (everything that is not a GEMM), one function per operation,
 * forward and backward: loops over host memory, vectorised for AVX-512/AVX2 (SIMD clones picked at
 * run time) and split among the rank's OpenMP threads. Not GPU kernels: the CUDA GPT's are in
 * gpt_cuda.cu. Row-major; N rows of C (or OC) values. Internal to engine/models/gpt. */
#ifndef CTRAIN_MODELS_GPT_PASSES_H
#define CTRAIN_MODELS_GPT_PASSES_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/dtype.h"

/* Every pass for storage type elem computed in real, its public names made by SFX: fp32 under the
 * names below, fp64 (64-true) with the suffix _f64 (gpt_passes_f64.c), bf16 storage computed in
 * fp32 (bf16-true) with the suffix _bf16 (gpt_passes_bf16.c). */
#define GPT_SFX_F32(name) name
#define GPT_SFX_F64(name) name##_f64
#define GPT_SFX_BF16(name) name##_bf16
#define GPT_PASSES_DECLARE(elem, real, SFX) \
    /* out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] */ \
    void SFX(gpt_embed)(elem *out, const int32_t *tokens, const elem *wte, const elem *wpe, int B, int T, int C); \
    /* dwte[tokens[b,t],:] += dout[b,t,:]; dwpe = sum over b of dout[b,t,:] (overwritten). */ \
    void SFX(gpt_embed_backward)(elem *dwte, elem *dwpe, const elem *dout, const int32_t *tokens, int B, int T, \
                                 int C); \
 \
    /* out = (x - mean) * rstd * w + b per row (eps 1e-5, biased variance as PyTorch); keeps mean, rstd. */ \
    void SFX(gpt_layernorm_forward)(elem *out, elem *mean, elem *rstd, const elem *x, const elem *w, const elem *b, \
                               int N, int C); \
    /* The same with out packed to bf16 only (bf16-mixed: all the next GEMM reads; one pass fewer). */ \
    void SFX(gpt_layernorm_forward_packed)(uint16_t *out, elem *mean, elem *rstd, const elem *x, const elem *w, \
                                           const elem *b, int N, int C); \
    /* dx += the input gradient; dw, db overwritten. */ \
    void SFX(gpt_layernorm_backward)(elem *dx, elem *dw, elem *db, const elem *dout, const elem *x, const elem *w, \
                                const elem *mean, const elem *rstd, int N, int C); \
 \
    /* out[n,:] = (residual ? residual[n,:] : 0) + b (the start of a Linear whose GEMM adds onto it). */ \
    void SFX(gpt_bias_fill)(elem *out, const elem *residual, const elem *b, int N, int OC); \
    /* db = column sums of dout[N,OC] (overwritten). */ \
    void SFX(gpt_column_sums)(elem *db, const elem *dout, int N, int OC); \
 \
    /* GELU with the tanh approximation (PyTorch's approximate='tanh'). */ \
    void SFX(gpt_gelu_forward)(elem *out, const elem *x, size_t n); \
    /* The same with out packed to bf16 only (bf16-mixed). */ \
    void SFX(gpt_gelu_forward_packed)(uint16_t *out, const elem *x, size_t n); \
    /* d[i] *= GELU'(x[i]), in place: d holds the output gradient on entry, the input gradient on exit. */ \
    void SFX(gpt_gelu_backward)(elem *d, const elem *x, size_t n); \
 \
    /* One head's [T,T] scores, in place: row t becomes softmax of columns 0..t, zeros after. */ \
    void SFX(gpt_causal_softmax)(elem *att, int T); \
    /* In place on datt[T,T] (the gradient of the probabilities att): the gradient of the scores. */ \
    void SFX(gpt_causal_softmax_backward)(elem *datt, const elem *att, int T); \
 \
    /* logits[N,V] -> probabilities in place; returns the summed -log p(target) in nats. */ \
    double SFX(gpt_softmax_xent_forward)(elem *probs, const int32_t *targets, int N, int V); \
    /* probs -> (probs - onehot(targets)) * scale, in place (scale = 1 / tokens in the mean). */ \
    void SFX(gpt_softmax_xent_backward)(elem *probs, const int32_t *targets, int N, int V, real scale);

GPT_PASSES_DECLARE(float, float, GPT_SFX_F32)
/* One head's fp32 scores s[T,T] times scale, in place: row t becomes softmax of columns 0..t, zeros
 * after; with outb, the probabilities also rounded to bf16 there (scaling, gpt_causal_softmax and
 * ct_bf16_pack in one pass). */
void gpt_causal_softmax_scaled(float *s, uint16_t *outb, int T, float scale);
/* Causal attention's forward over every (sequence b, head h) of B sequences on oneDNN's batched
 * products, as bf16-true and bf16-mixed both run it: the scores q k^T from the bf16 qkv[B*T, 3C] in
 * blocks of GPT_ATT_BLOCK query rows, each against the keys up to its last row, into fp32 s[B*NH,T,T];
 * each head's scaled softmax there (gpt_causal_softmax_scaled), rounded into the bf16 probabilities
 * p[B*NH,T,T]; y[B*T, C] = p v, stored as y_type (fp32 or bf16, rounded once). 0, or -1 when oneDNN
 * made no primitive for a product. */
int gpt_attention_batched(int B, int T, int C, int NH, const uint16_t *qkv, float *s, uint16_t *p,
                          enum ct_dtype y_type, void *y);
/* bf16-true's softmax backward for one head: d[T,T] the fp32 gradient of the probabilities, rounded
 * to bf16 first (d is scratch after), p the bf16 probabilities; ds[T,T] the scores' gradient in
 * bf16, zeros above the diagonal. */
void gpt_causal_softmax_backward_rounded(float *d, const uint16_t *p, uint16_t *ds, int T);
/* db = column sums of dout[N,OC] (overwritten) and dout packed to bf16 into outb, in one pass over
 * dout (bf16-mixed's Linear backward). */
void gpt_column_sums_packed(float *db, uint16_t *outb, const float *dout, int N, int OC);
GPT_PASSES_DECLARE(double, double, GPT_SFX_F64)
GPT_PASSES_DECLARE(uint16_t, float, GPT_SFX_BF16)

#endif
