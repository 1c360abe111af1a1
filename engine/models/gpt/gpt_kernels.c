/* The GPT's element-wise passes; see gpt_kernels.h. Each is cloned for AVX-512 and AVX2 with a
 * run-time pick (glibc ifunc), as engine/nn does, and takes restrict pointers so it vectorises.
 * Sums over a row are vectorised with `omp simd reduction` (-fopenmp-simd: the pragma only, no
 * OpenMP run-time), which lets the compiler add in lanes as a GEMM does. */
#include <math.h>
#include <string.h>

#include "engine/models/gpt/gpt_kernels.h"

/* glibc's libmvec (linked through libm) has vector expf and tanhf for SSE, AVX2 and AVX-512;
 * declaring them simd, as glibc's own math.h does under -ffast-math, lets the vectorised loops
 * call them (_ZGVeN16v_tanhf, ...) instead of the scalar functions, which dominated the profile. */
__attribute__((simd("notinbranch"))) float expf(float);
__attribute__((simd("notinbranch"))) float tanhf(float);

#define GPT_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

#define GPT_LN_EPS 1e-5f
#define GPT_GELU_K 0.7978845608028654f   /* sqrt(2/pi) */
#define GPT_GELU_C 0.044715f

GPT_SIMD_CLONES
void gpt_embed(float *restrict out, const int32_t *restrict tokens, const float *restrict wte,
               const float *restrict wpe, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *restrict o = out + ((size_t)b * T + t) * C;
            const float *restrict e = wte + (size_t)tokens[b * T + t] * C;
            const float *restrict p = wpe + (size_t)t * C;

            for (int i = 0; i < C; i++)
                o[i] = e[i] + p[i];
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
void gpt_layernorm_forward(float *restrict out, float *restrict mean, float *restrict rstd,
                           const float *restrict x, const float *restrict w, const float *restrict b, int N, int C)
{
    for (int n = 0; n < N; n++) {
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

GPT_SIMD_CLONES
void gpt_layernorm_backward(float *restrict dx, float *restrict dw, float *restrict db, const float *restrict dout,
                            const float *restrict x, const float *restrict w, const float *restrict mean,
                            const float *restrict rstd, int N, int C)
{
    memset(dw, 0, sizeof(float) * (size_t)C);
    memset(db, 0, sizeof(float) * (size_t)C);
    for (int n = 0; n < N; n++) {
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
            db[i] += d[i];
            dw[i] += norm * d[i];
            dxr[i] += (dn - dmean - norm * dnorm_mean) * rs;
        }
    }
}

GPT_SIMD_CLONES
void gpt_bias_fill(float *restrict out, const float *restrict residual, const float *restrict b, int N, int OC)
{
    for (int n = 0; n < N; n++) {
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

GPT_SIMD_CLONES
void gpt_column_sums(float *restrict db, const float *restrict dout, int N, int OC)
{
    memset(db, 0, sizeof(float) * (size_t)OC);
    for (int n = 0; n < N; n++) {
        const float *restrict d = dout + (size_t)n * OC;

        for (int j = 0; j < OC; j++)
            db[j] += d[j];
    }
}

GPT_SIMD_CLONES
void gpt_gelu_forward(float *restrict out, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i], u = GPT_GELU_K * (v + GPT_GELU_C * v * v * v);
        out[i] = 0.5f * v * (1.0f + tanhf(u));
    }
}

GPT_SIMD_CLONES
void gpt_gelu_backward(float *restrict d, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i], u = GPT_GELU_K * (v + GPT_GELU_C * v * v * v), th = tanhf(u);
        float du = GPT_GELU_K * (1.0f + 3.0f * GPT_GELU_C * v * v);
        d[i] *= 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du;
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
double gpt_softmax_xent_forward(float *restrict probs, const int32_t *restrict targets, int N, int V)
{
    double loss = 0.0;

    for (int n = 0; n < N; n++) {
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

GPT_SIMD_CLONES
void gpt_softmax_xent_backward(float *restrict probs, const int32_t *restrict targets, int N, int V, float scale)
{
    for (int n = 0; n < N; n++) {
        float *restrict row = probs + (size_t)n * V;

        for (int j = 0; j < V; j++)
            row[j] *= scale;
        row[targets[n]] -= scale;
    }
}
