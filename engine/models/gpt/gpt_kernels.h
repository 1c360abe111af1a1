/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's element-wise passes (everything that is not a GEMM), one function per operation,
 * forward and backward. Row-major; N rows of C (or OC) values. Internal to engine/models/gpt. */
#ifndef CTRAIN_MODELS_GPT_KERNELS_H
#define CTRAIN_MODELS_GPT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] */
void gpt_embed(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C);
/* dwte[tokens[b,t],:] += dout[b,t,:]; dwpe = sum over b of dout[b,t,:] (overwritten). */
void gpt_embed_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T, int C);

/* out = (x - mean) * rstd * w + b per row (eps 1e-5, biased variance as PyTorch); keeps mean, rstd. */
void gpt_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                           int N, int C);
/* dx += the input gradient; dw, db overwritten. */
void gpt_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                            const float *mean, const float *rstd, int N, int C);

/* out[n,:] = (residual ? residual[n,:] : 0) + b (the start of a Linear whose GEMM adds onto it). */
void gpt_bias_fill(float *out, const float *residual, const float *b, int N, int OC);
/* db = column sums of dout[N,OC] (overwritten). */
void gpt_column_sums(float *db, const float *dout, int N, int OC);

/* GELU with the tanh approximation (PyTorch's approximate='tanh'). */
void gpt_gelu_forward(float *out, const float *x, size_t n);
/* d[i] *= GELU'(x[i]), in place: d holds the output gradient on entry, the input gradient on exit. */
void gpt_gelu_backward(float *d, const float *x, size_t n);

/* One head's [T,T] scores, in place: row t becomes softmax of columns 0..t, zeros after. */
void gpt_causal_softmax(float *att, int T);
/* In place on datt[T,T] (the gradient of the probabilities att): the gradient of the scores. */
void gpt_causal_softmax_backward(float *datt, const float *att, int T);

/* logits[N,V] -> probabilities in place; returns the summed -log p(target) in nats. */
double gpt_softmax_xent_forward(float *probs, const int32_t *targets, int N, int V);
/* probs -> (probs - onehot(targets)) * scale, in place (scale = 1 / tokens in the mean). */
void gpt_softmax_xent_backward(float *probs, const int32_t *targets, int N, int V, float scale);

#endif
