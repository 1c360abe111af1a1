/* SPDX-License-Identifier: BSD-3-Clause */
/* The cpu GPT's element-wise SIMD passes (gpt_passes.h) for one storage type, included once per
 * type by gpt_passes.c (fp32: 32-true and the mixed precisions), gpt_passes_f64.c (fp64: 64-true)
 * and gpt_passes_bf16.c (bf16 storage: bf16-true), which define
 *   elem          the type arrays are stored in
 *   real          the type the arithmetic runs in (fp32 for bf16 storage)
 *   LD(x), ST(v)  an element loaded into real, a real stored as an element (identity but for bf16)
 *   SFX           the public names' suffix; EXP and SQRT of real
 *   row_sums_begin(out, n), row_sums_end(out, sums, i0, i1)
 *                 where a sum over rows (a LayerNorm's or a bias's weight gradient) accumulates in
 *                 real, and its columns i0..i1 stored into out once: out itself where elem is
 *                 real, fp32 scratch for bf16.
 *
 * Each pass's loop over a range of rows (or
 * elements) is cloned for AVX-512 and AVX2 with a run-time pick (glibc ifunc), as engine/nn does,
 * and takes restrict pointers so it vectorises; sums over a row are vectorised with `omp simd
 * reduction`, which lets the compiler add in lanes as a GEMM does. The public function splits the
 * rows among the OpenMP team (the rank's threads, the team oneDNN's GEMMs use), each thread one
 * contiguous range; passes that sum over rows (a LayerNorm's or a bias's weight gradient) split
 * the columns instead, so no thread adds into another's sums and the result does not depend on
 * the thread count. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/models/gpt/gpt_passes.h"
#include "engine/nn/bf16_inline.h"
#include "engine/nn/simd.h"

#ifdef __clang__
/* clang 14 gives a static function's clones a global resolver, which collides between the three
 * element types' objects (the fuzz build): one plain version there. */
#define GPT_SIMD_CLONES
#else
#define GPT_SIMD_CLONES CT_SIMD_CLONES
#endif

/* Below this many elements a pass runs on the calling thread: waking the team costs more. */
#define GPT_PAR_MIN 16384

/* This thread's share [*lo, *hi) of n items, in a parallel region. */
static void share(size_t n, size_t *lo, size_t *hi)
{
    size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();

    *lo = n * t / nt;
    *hi = n * (t + 1) / nt;
}

#define GPT_LN_EPS ((real)1e-5)
#define GPT_GELU_K ((real)0.7978845608028654)   /* sqrt(2/pi) */
#define GPT_GELU_C ((real)0.044715)

GPT_SIMD_CLONES
static void embed_rows(elem *restrict out, const int32_t *restrict tokens, const elem *restrict wte,
                       const elem *restrict wpe, size_t n0, size_t n1, int T, int C)
{
    for (size_t n = n0; n < n1; n++) {
        elem *restrict o = out + n * C;
        const elem *restrict e = wte + (size_t)tokens[n] * C;
        const elem *restrict p = wpe + (n % T) * C;

        for (int i = 0; i < C; i++)
            o[i] = ST(LD(e[i]) + LD(p[i]));
    }
}

void SFX(gpt_embed)(elem *out, const int32_t *tokens, const elem *wte, const elem *wpe, int B, int T, int C)
{
    size_t N = (size_t)B * T;

#pragma omp parallel if (N * C >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share(N, &lo, &hi);
        embed_rows(out, tokens, wte, wpe, lo, hi, T, C);
    }
}

/* Columns i0..i1 of every row, in row order (each element's sum in the same order whatever the
 * split). */
GPT_SIMD_CLONES
static void embed_backward_cols(elem *restrict dwte, elem *restrict dwpe, const elem *restrict dout,
                                const int32_t *restrict tokens, int B, int T, int C, size_t i0, size_t i1)
{
    for (int t = 0; t < T; t++)
        memset(dwpe + (size_t)t * C + i0, 0, sizeof(elem) * (i1 - i0));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const elem *restrict d = dout + ((size_t)b * T + t) * C;
            elem *restrict e = dwte + (size_t)tokens[b * T + t] * C;
            elem *restrict p = dwpe + (size_t)t * C;

            for (size_t i = i0; i < i1; i++) {
                e[i] = ST(LD(e[i]) + LD(d[i]));
                p[i] = ST(LD(p[i]) + LD(d[i]));
            }
        }
}

/* Rows of dwte are scattered by token (two rows may be one), so the team splits the columns: no
 * two threads write one element, or one cache line (blocks of 32 columns). */
void SFX(gpt_embed_backward)(elem *dwte, elem *dwpe, const elem *dout, const int32_t *tokens, int B, int T, int C)
{
#pragma omp parallel if ((size_t)B * T * C >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share((size_t)(C + 31) / 32, &lo, &hi);
        lo *= 32;
        hi = hi * 32 < (size_t)C ? hi * 32 : (size_t)C;
        if (lo < hi)
            embed_backward_cols(dwte, dwpe, dout, tokens, B, T, C, lo, hi);
    }
}

/* Rows n0..n1 into out, or when outb is given into outb packed to bf16 instead. */
GPT_SIMD_CLONES
static void layernorm_rows(elem *restrict out, uint16_t *restrict outb, elem *restrict mean, elem *restrict rstd,
                           const elem *restrict x, const elem *restrict w, const elem *restrict b, size_t n0,
                           size_t n1, int C)
{
    for (size_t n = n0; n < n1; n++) {
        const elem *restrict xr = x + (size_t)n * C;
        real sum = ((real)0.0), var = ((real)0.0), mu, rs;

#pragma omp simd reduction(+ : sum)
        for (int i = 0; i < C; i++)
            sum += LD(xr[i]);
        mu = sum / C;
        /* two passes: the variance of (x - mean) keeps its precision when the mean is large */
#pragma omp simd reduction(+ : var)
        for (int i = 0; i < C; i++) {
            real d = LD(xr[i]) - mu;
            var += d * d;
        }
        rs = ((real)1.0) / SQRT(var / C + GPT_LN_EPS);
        if (outb) {
            uint16_t *restrict o = outb + (size_t)n * C;

            for (int i = 0; i < C; i++)
                o[i] = ct_bf16_store((float)((LD(xr[i]) - mu) * rs * LD(w[i]) + LD(b[i])));
        } else {
            elem *restrict o = out + (size_t)n * C;

            for (int i = 0; i < C; i++)
                o[i] = ST((LD(xr[i]) - mu) * rs * LD(w[i]) + LD(b[i]));
        }
        mean[n] = ST(mu);
        rstd[n] = ST(rs);
    }
}

static void layernorm_forward(elem *out, uint16_t *outb, elem *mean, elem *rstd, const elem *x, const elem *w,
                              const elem *b, int N, int C)
{
#pragma omp parallel if ((size_t)N * C >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share((size_t)N, &lo, &hi);
        layernorm_rows(out, outb, mean, rstd, x, w, b, lo, hi, C);
    }
}

void SFX(gpt_layernorm_forward)(elem *out, elem *mean, elem *rstd, const elem *x, const elem *w, const elem *b,
                           int N, int C)
{
    layernorm_forward(out, NULL, mean, rstd, x, w, b, N, C);
}

void SFX(gpt_layernorm_forward_packed)(uint16_t *out, elem *mean, elem *rstd, const elem *x, const elem *w,
                                       const elem *b, int N, int C)
{
    layernorm_forward(NULL, out, mean, rstd, x, w, b, N, C);
}

/* dx for rows n0..n1. */
GPT_SIMD_CLONES
static void layernorm_backward_rows(elem *restrict dx, const elem *restrict dout, const elem *restrict x,
                                    const elem *restrict w, const elem *restrict mean, const elem *restrict rstd,
                                    size_t n0, size_t n1, int C)
{
    for (size_t n = n0; n < n1; n++) {
        const elem *restrict d = dout + (size_t)n * C;
        const elem *restrict xr = x + (size_t)n * C;
        elem *restrict dxr = dx + (size_t)n * C;
        real mu = LD(mean[n]), rs = LD(rstd[n]), dmean = ((real)0.0), dnorm_mean = ((real)0.0);

        /* dnorm = w * dout; dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) */
#pragma omp simd reduction(+ : dmean, dnorm_mean)
        for (int i = 0; i < C; i++) {
            real norm = (LD(xr[i]) - mu) * rs, dn = LD(w[i]) * LD(d[i]);
            dmean += dn;
            dnorm_mean += dn * norm;
        }
        dmean /= C;
        dnorm_mean /= C;
        for (int i = 0; i < C; i++) {
            real norm = (LD(xr[i]) - mu) * rs, dn = LD(w[i]) * LD(d[i]);
            dxr[i] = ST(LD(dxr[i]) + (dn - dmean - norm * dnorm_mean) * rs);
        }
    }
}

/* dw, db for columns i0..i1, summed over every row in order. */
GPT_SIMD_CLONES
static void layernorm_backward_cols(real *restrict dw, real *restrict db, const elem *restrict dout,
                                    const elem *restrict x, const elem *restrict mean, const elem *restrict rstd,
                                    int N, int C, size_t i0, size_t i1)
{
    memset(dw + i0, 0, sizeof(real) * (i1 - i0));
    memset(db + i0, 0, sizeof(real) * (i1 - i0));
    for (int n = 0; n < N; n++) {
        const elem *restrict d = dout + (size_t)n * C;
        const elem *restrict xr = x + (size_t)n * C;
        real mu = LD(mean[n]), rs = LD(rstd[n]);

        for (size_t i = i0; i < i1; i++) {
            db[i] += LD(d[i]);
            dw[i] += (LD(xr[i]) - mu) * rs * LD(d[i]);
        }
    }
}

void SFX(gpt_layernorm_backward)(elem *dx, elem *dw, elem *db, const elem *dout, const elem *x, const elem *w,
                            const elem *mean, const elem *rstd, int N, int C)
{
#pragma omp parallel if ((size_t)N * C >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share((size_t)N, &lo, &hi);
        layernorm_backward_rows(dx, dout, x, w, mean, rstd, lo, hi, C);
        /* columns in blocks of 16 (a cache line) so threads do not share one */
        share((size_t)(C + 15) / 16, &lo, &hi);
        lo *= 16;
        hi = hi * 16 < (size_t)C ? hi * 16 : (size_t)C;
        if (lo < hi) {
            real *dw_sums = row_sums_begin(dw, (size_t)C), *db_sums = row_sums_begin(db, (size_t)C);

            layernorm_backward_cols(dw_sums, db_sums, dout, x, mean, rstd, N, C, lo, hi);
            row_sums_end(dw, dw_sums, lo, hi);
            row_sums_end(db, db_sums, lo, hi);
        }
    }
}

GPT_SIMD_CLONES
static void bias_fill_rows(elem *restrict out, const elem *restrict residual, const elem *restrict b, size_t n0,
                           size_t n1, int OC)
{
    for (size_t n = n0; n < n1; n++) {
        elem *restrict o = out + (size_t)n * OC;

        if (residual) {
            const elem *restrict r = residual + (size_t)n * OC;

            for (int j = 0; j < OC; j++)
                o[j] = ST(LD(r[j]) + LD(b[j]));
        } else {
            for (int j = 0; j < OC; j++)
                o[j] = b[j];
        }
    }
}

void SFX(gpt_bias_fill)(elem *out, const elem *residual, const elem *b, int N, int OC)
{
#pragma omp parallel if ((size_t)N * OC >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share((size_t)N, &lo, &hi);
        bias_fill_rows(out, residual, b, lo, hi, OC);
    }
}

GPT_SIMD_CLONES
static void column_sums_cols(real *restrict db, const elem *restrict dout, int N, int OC, size_t j0, size_t j1)
{
    memset(db + j0, 0, sizeof(real) * (j1 - j0));
    for (int n = 0; n < N; n++) {
        const elem *restrict d = dout + (size_t)n * OC;

        for (size_t j = j0; j < j1; j++)
            db[j] += LD(d[j]);
    }
}

void SFX(gpt_column_sums)(elem *db, const elem *dout, int N, int OC)
{
#pragma omp parallel if ((size_t)N * OC >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share((size_t)(OC + 15) / 16, &lo, &hi);
        lo *= 16;
        hi = hi * 16 < (size_t)OC ? hi * 16 : (size_t)OC;
        if (lo < hi) {
            real *sums = row_sums_begin(db, (size_t)OC);

            column_sums_cols(sums, dout, N, OC, lo, hi);
            row_sums_end(db, sums, lo, hi);
        }
    }
}

/* GELU's tanh form through a sigmoid: 0.5 x (1 + tanh(u)) = x sigmoid(2u), and its derivative
 * 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) u' = s + 2 x s (1 - s) u' with s = sigmoid(2u): one
 * exp per element where tanh cost more (libmvec's vector tanhf was the step's largest
 * element-wise item), and no cancellation in 1 + tanh(u) where tanh(u) nears -1. */
#define GELU_SIGMOID(v) \
    (((real)1.0) / (((real)1.0) + EXP(((real)-2.0) * GPT_GELU_K * ((v) + GPT_GELU_C * (v) * (v) * (v)))))

/* x[0..n) into out, or when outb is given into outb packed to bf16 instead. */
GPT_SIMD_CLONES
static void gelu_forward_range(elem *restrict out, uint16_t *restrict outb, const elem *restrict x, size_t n)
{
    if (outb) {
        for (size_t i = 0; i < n; i++) {
            real v = LD(x[i]);
            outb[i] = ct_bf16_store((float)(v * GELU_SIGMOID(v)));
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        real v = LD(x[i]);
        out[i] = ST(v * GELU_SIGMOID(v));
    }
}

static void gelu_forward(elem *out, uint16_t *outb, const elem *x, size_t n)
{
#pragma omp parallel if (n >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share(n, &lo, &hi);
        gelu_forward_range(out ? out + lo : NULL, outb ? outb + lo : NULL, x + lo, hi - lo);
    }
}

void SFX(gpt_gelu_forward)(elem *out, const elem *x, size_t n) { gelu_forward(out, NULL, x, n); }
void SFX(gpt_gelu_forward_packed)(uint16_t *out, const elem *x, size_t n) { gelu_forward(NULL, out, x, n); }

GPT_SIMD_CLONES
static void gelu_backward_range(elem *restrict d, const elem *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        real v = LD(x[i]), sg = GELU_SIGMOID(v);
        real du = GPT_GELU_K * (((real)1.0) + ((real)3.0) * GPT_GELU_C * v * v);
        d[i] = ST(LD(d[i]) * (sg + ((real)2.0) * v * sg * (((real)1.0) - sg) * du));
    }
}

void SFX(gpt_gelu_backward)(elem *d, const elem *x, size_t n)
{
#pragma omp parallel if (n >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share(n, &lo, &hi);
        gelu_backward_range(d + lo, x + lo, hi - lo);
    }
}

GPT_SIMD_CLONES
void SFX(gpt_causal_softmax)(elem *restrict att, int T)
{
    for (int t = 0; t < T; t++) {
        elem *restrict row = att + (size_t)t * T;
        real max = LD(row[0]), sum = ((real)0.0), inv;

#pragma omp simd reduction(max : max)
        for (int j = 1; j <= t; j++)
            max = LD(row[j]) > max ? LD(row[j]) : max;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j <= t; j++) {
            row[j] = ST(EXP(LD(row[j]) - max));
            sum += LD(row[j]);
        }
        inv = ((real)1.0) / sum;
        for (int j = 0; j <= t; j++)
            row[j] = ST(LD(row[j]) * inv);
        for (int j = t + 1; j < T; j++)
            row[j] = ST((real)0.0);
    }
}

GPT_SIMD_CLONES
void SFX(gpt_causal_softmax_backward)(elem *restrict datt, const elem *restrict att, int T)
{
    for (int t = 0; t < T; t++) {
        elem *restrict d = datt + (size_t)t * T;
        const elem *restrict p = att + (size_t)t * T;
        real dot = ((real)0.0);

#pragma omp simd reduction(+ : dot)
        for (int j = 0; j <= t; j++)
            dot += LD(p[j]) * LD(d[j]);
        for (int j = 0; j <= t; j++)
            d[j] = ST(LD(p[j]) * (LD(d[j]) - dot));
        for (int j = t + 1; j < T; j++)
            d[j] = ST((real)0.0);
    }
}

GPT_SIMD_CLONES
static double softmax_xent_rows(elem *restrict probs, const int32_t *restrict targets, size_t n0, size_t n1, int V)
{
    double loss = 0.0;

    for (size_t n = n0; n < n1; n++) {
        elem *restrict row = probs + (size_t)n * V;
        real max = LD(row[0]), sum = ((real)0.0), inv, logit = LD(row[targets[n]]);

#pragma omp simd reduction(max : max)
        for (int j = 1; j < V; j++)
            max = LD(row[j]) > max ? LD(row[j]) : max;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < V; j++) {
            row[j] = ST(EXP(LD(row[j]) - max));
            sum += LD(row[j]);
        }
        inv = ((real)1.0) / sum;
        /* -log p = log(sum) - (logit - max): finite even where p underflows */
        loss += log((double)sum) - ((double)logit - max);
        for (int j = 0; j < V; j++)
            row[j] = ST(LD(row[j]) * inv);
    }
    return loss;
}

double SFX(gpt_softmax_xent_forward)(elem *probs, const int32_t *targets, int N, int V)
{
    /* Each thread's loss in its own slot, added in thread order: the same sum every run. */
    double part[256] = { 0 }, loss = 0.0;
    int nt = omp_get_max_threads() < 256 ? omp_get_max_threads() : 256;

#pragma omp parallel num_threads(nt) if ((size_t)N * V >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share((size_t)N, &lo, &hi);
        part[omp_get_thread_num()] = softmax_xent_rows(probs, targets, lo, hi, V);
    }
    for (int t = 0; t < nt; t++)
        loss += part[t];
    return loss;
}

GPT_SIMD_CLONES
static void softmax_xent_backward_rows(elem *restrict probs, const int32_t *restrict targets, size_t n0, size_t n1,
                                       int V, real scale)
{
    for (size_t n = n0; n < n1; n++) {
        elem *restrict row = probs + (size_t)n * V;

        for (int j = 0; j < V; j++)
            row[j] = ST(LD(row[j]) * scale);
        row[targets[n]] = ST(LD(row[targets[n]]) - scale);
    }
}

void SFX(gpt_softmax_xent_backward)(elem *probs, const int32_t *targets, int N, int V, real scale)
{
#pragma omp parallel if ((size_t)N * V >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share((size_t)N, &lo, &hi);
        softmax_xent_backward_rows(probs, targets, lo, hi, V, scale);
    }
}
