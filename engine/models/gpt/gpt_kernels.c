/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's element-wise passes; see gpt_kernels.h. Each pass's loop over a range of rows (or
 * elements) is cloned for AVX-512 and AVX2 with a run-time pick (glibc ifunc), as engine/nn does,
 * and takes restrict pointers so it vectorises; sums over a row are vectorised with `omp simd
 * reduction`, which lets the compiler add in lanes as a GEMM does. The public function splits the
 * rows among the OpenMP team (the rank's threads, the team oneDNN's GEMMs use), each thread one
 * contiguous range; passes that sum over rows (a LayerNorm's or a bias's weight gradient) split
 * the columns instead, so no thread adds into another's sums and the result does not depend on
 * the thread count. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "engine/models/gpt/gpt_kernels.h"

/* glibc's libmvec (linked through libm) has vector expf and tanhf for SSE, AVX2 and AVX-512;
 * declaring them simd, as glibc's own math.h does under -ffast-math, lets the vectorised loops
 * call them (_ZGVeN16v_tanhf, ...) instead of the scalar functions, which dominated the profile. */
__attribute__((simd("notinbranch"))) float expf(float);
__attribute__((simd("notinbranch"))) float tanhf(float);

#define GPT_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

/* Below this many elements a pass runs on the calling thread: waking the team costs more. */
#define GPT_PAR_MIN 16384

/* This thread's share [*lo, *hi) of n items, in a parallel region. */
static void share(size_t n, size_t *lo, size_t *hi)
{
    size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();

    *lo = n * t / nt;
    *hi = n * (t + 1) / nt;
}

#define GPT_LN_EPS 1e-5f
#define GPT_GELU_K 0.7978845608028654f   /* sqrt(2/pi) */
#define GPT_GELU_C 0.044715f

GPT_SIMD_CLONES
static void embed_rows(float *restrict out, const int32_t *restrict tokens, const float *restrict wte,
                       const float *restrict wpe, size_t n0, size_t n1, int T, int C)
{
    for (size_t n = n0; n < n1; n++) {
        float *restrict o = out + n * C;
        const float *restrict e = wte + (size_t)tokens[n] * C;
        const float *restrict p = wpe + (n % T) * C;

        for (int i = 0; i < C; i++)
            o[i] = e[i] + p[i];
    }
}

void gpt_embed(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C)
{
    size_t N = (size_t)B * T;

#pragma omp parallel if (N * C >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share(N, &lo, &hi);
        embed_rows(out, tokens, wte, wpe, lo, hi, T, C);
    }
}

GPT_SIMD_CLONES
void gpt_embed_backward(float *restrict dwte, float *restrict dwpe, const float *restrict dout,
                        const int32_t *restrict tokens, int B, int T, int C)
{
    memset(dwpe, 0, sizeof(float) * (size_t)T * C);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *restrict d = dout + ((size_t)b * T + t) * C;
            float *restrict e = dwte + (size_t)tokens[b * T + t] * C;
            float *restrict p = dwpe + (size_t)t * C;

            for (int i = 0; i < C; i++) {
                e[i] += d[i];
                p[i] += d[i];
            }
        }
}

GPT_SIMD_CLONES
static void layernorm_rows(float *restrict out, float *restrict mean, float *restrict rstd, const float *restrict x,
                           const float *restrict w, const float *restrict b, size_t n0, size_t n1, int C)
{
    for (size_t n = n0; n < n1; n++) {
        const float *restrict xr = x + (size_t)n * C;
        float *restrict o = out + (size_t)n * C;
        float sum = 0.0f, var = 0.0f, mu, rs;

#pragma omp simd reduction(+ : sum)
        for (int i = 0; i < C; i++)
            sum += xr[i];
        mu = sum / C;
        /* two passes: the variance of (x - mean) keeps its precision when the mean is large */
#pragma omp simd reduction(+ : var)
        for (int i = 0; i < C; i++) {
            float d = xr[i] - mu;
            var += d * d;
        }
        rs = 1.0f / sqrtf(var / C + GPT_LN_EPS);
        for (int i = 0; i < C; i++)
            o[i] = (xr[i] - mu) * rs * w[i] + b[i];
        mean[n] = mu;
        rstd[n] = rs;
    }
}

void gpt_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                           int N, int C)
{
#pragma omp parallel if ((size_t)N * C >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share((size_t)N, &lo, &hi);
        layernorm_rows(out, mean, rstd, x, w, b, lo, hi, C);
    }
}

/* dx for rows n0..n1. */
GPT_SIMD_CLONES
static void layernorm_backward_rows(float *restrict dx, const float *restrict dout, const float *restrict x,
                                    const float *restrict w, const float *restrict mean, const float *restrict rstd,
                                    size_t n0, size_t n1, int C)
{
    for (size_t n = n0; n < n1; n++) {
        const float *restrict d = dout + (size_t)n * C;
        const float *restrict xr = x + (size_t)n * C;
        float *restrict dxr = dx + (size_t)n * C;
        float mu = mean[n], rs = rstd[n], dmean = 0.0f, dnorm_mean = 0.0f;

        /* dnorm = w * dout; dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) */
#pragma omp simd reduction(+ : dmean, dnorm_mean)
        for (int i = 0; i < C; i++) {
            float norm = (xr[i] - mu) * rs, dn = w[i] * d[i];
            dmean += dn;
            dnorm_mean += dn * norm;
        }
        dmean /= C;
        dnorm_mean /= C;
        for (int i = 0; i < C; i++) {
            float norm = (xr[i] - mu) * rs, dn = w[i] * d[i];
            dxr[i] += (dn - dmean - norm * dnorm_mean) * rs;
        }
    }
}

/* dw, db for columns i0..i1, summed over every row in order. */
GPT_SIMD_CLONES
static void layernorm_backward_cols(float *restrict dw, float *restrict db, const float *restrict dout,
                                    const float *restrict x, const float *restrict mean, const float *restrict rstd,
                                    int N, int C, size_t i0, size_t i1)
{
    memset(dw + i0, 0, sizeof(float) * (i1 - i0));
    memset(db + i0, 0, sizeof(float) * (i1 - i0));
    for (int n = 0; n < N; n++) {
        const float *restrict d = dout + (size_t)n * C;
        const float *restrict xr = x + (size_t)n * C;
        float mu = mean[n], rs = rstd[n];

        for (size_t i = i0; i < i1; i++) {
            db[i] += d[i];
            dw[i] += (xr[i] - mu) * rs * d[i];
        }
    }
}

void gpt_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                            const float *mean, const float *rstd, int N, int C)
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
        if (lo < hi)
            layernorm_backward_cols(dw, db, dout, x, mean, rstd, N, C, lo, hi);
    }
}

GPT_SIMD_CLONES
static void bias_fill_rows(float *restrict out, const float *restrict residual, const float *restrict b, size_t n0,
                           size_t n1, int OC)
{
    for (size_t n = n0; n < n1; n++) {
        float *restrict o = out + (size_t)n * OC;

        if (residual) {
            const float *restrict r = residual + (size_t)n * OC;

            for (int j = 0; j < OC; j++)
                o[j] = r[j] + b[j];
        } else {
            for (int j = 0; j < OC; j++)
                o[j] = b[j];
        }
    }
}

void gpt_bias_fill(float *out, const float *residual, const float *b, int N, int OC)
{
#pragma omp parallel if ((size_t)N * OC >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share((size_t)N, &lo, &hi);
        bias_fill_rows(out, residual, b, lo, hi, OC);
    }
}

GPT_SIMD_CLONES
static void column_sums_cols(float *restrict db, const float *restrict dout, int N, int OC, size_t j0, size_t j1)
{
    memset(db + j0, 0, sizeof(float) * (j1 - j0));
    for (int n = 0; n < N; n++) {
        const float *restrict d = dout + (size_t)n * OC;

        for (size_t j = j0; j < j1; j++)
            db[j] += d[j];
    }
}

void gpt_column_sums(float *db, const float *dout, int N, int OC)
{
#pragma omp parallel if ((size_t)N * OC >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share((size_t)(OC + 15) / 16, &lo, &hi);
        lo *= 16;
        hi = hi * 16 < (size_t)OC ? hi * 16 : (size_t)OC;
        if (lo < hi)
            column_sums_cols(db, dout, N, OC, lo, hi);
    }
}

GPT_SIMD_CLONES
static void gelu_forward_range(float *restrict out, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i], u = GPT_GELU_K * (v + GPT_GELU_C * v * v * v);
        out[i] = 0.5f * v * (1.0f + tanhf(u));
    }
}

void gpt_gelu_forward(float *out, const float *x, size_t n)
{
#pragma omp parallel if (n >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share(n, &lo, &hi);
        gelu_forward_range(out + lo, x + lo, hi - lo);
    }
}

GPT_SIMD_CLONES
static void gelu_backward_range(float *restrict d, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i], u = GPT_GELU_K * (v + GPT_GELU_C * v * v * v), th = tanhf(u);
        float du = GPT_GELU_K * (1.0f + 3.0f * GPT_GELU_C * v * v);
        d[i] *= 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du;
    }
}

void gpt_gelu_backward(float *d, const float *x, size_t n)
{
#pragma omp parallel if (n >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share(n, &lo, &hi);
        gelu_backward_range(d + lo, x + lo, hi - lo);
    }
}

GPT_SIMD_CLONES
void gpt_causal_softmax(float *restrict att, int T)
{
    for (int t = 0; t < T; t++) {
        float *restrict row = att + (size_t)t * T;
        float max = row[0], sum = 0.0f, inv;

#pragma omp simd reduction(max : max)
        for (int j = 1; j <= t; j++)
            max = row[j] > max ? row[j] : max;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j <= t; j++) {
            row[j] = expf(row[j] - max);
            sum += row[j];
        }
        inv = 1.0f / sum;
        for (int j = 0; j <= t; j++)
            row[j] *= inv;
        for (int j = t + 1; j < T; j++)
            row[j] = 0.0f;
    }
}

GPT_SIMD_CLONES
void gpt_causal_softmax_backward(float *restrict datt, const float *restrict att, int T)
{
    for (int t = 0; t < T; t++) {
        float *restrict d = datt + (size_t)t * T;
        const float *restrict p = att + (size_t)t * T;
        float dot = 0.0f;

#pragma omp simd reduction(+ : dot)
        for (int j = 0; j <= t; j++)
            dot += p[j] * d[j];
        for (int j = 0; j <= t; j++)
            d[j] = p[j] * (d[j] - dot);
        for (int j = t + 1; j < T; j++)
            d[j] = 0.0f;
    }
}

GPT_SIMD_CLONES
static double softmax_xent_rows(float *restrict probs, const int32_t *restrict targets, size_t n0, size_t n1, int V)
{
    double loss = 0.0;

    for (size_t n = n0; n < n1; n++) {
        float *restrict row = probs + (size_t)n * V;
        float max = row[0], sum = 0.0f, inv, logit = row[targets[n]];

#pragma omp simd reduction(max : max)
        for (int j = 1; j < V; j++)
            max = row[j] > max ? row[j] : max;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < V; j++) {
            row[j] = expf(row[j] - max);
            sum += row[j];
        }
        inv = 1.0f / sum;
        /* -log p = log(sum) - (logit - max): finite even where p underflows */
        loss += log((double)sum) - ((double)logit - max);
        for (int j = 0; j < V; j++)
            row[j] *= inv;
    }
    return loss;
}

double gpt_softmax_xent_forward(float *probs, const int32_t *targets, int N, int V)
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
static void softmax_xent_backward_rows(float *restrict probs, const int32_t *restrict targets, size_t n0, size_t n1,
                                       int V, float scale)
{
    for (size_t n = n0; n < n1; n++) {
        float *restrict row = probs + (size_t)n * V;

        for (int j = 0; j < V; j++)
            row[j] *= scale;
        row[targets[n]] -= scale;
    }
}

void gpt_softmax_xent_backward(float *probs, const int32_t *targets, int N, int V, float scale)
{
#pragma omp parallel if ((size_t)N * V >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        share((size_t)N, &lo, &hi);
        softmax_xent_backward_rows(probs, targets, lo, hi, V, scale);
    }
}
