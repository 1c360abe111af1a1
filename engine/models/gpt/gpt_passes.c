/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's element-wise passes in fp32 (gpt_passes_tmpl.h through gpt_passes_real.h). */
#include <math.h>
#include <stddef.h>

#include "engine/models/gpt/gpt_internal.h"
#include "engine/models/gpt/gpt_passes.h"
#include "engine/nn/gemm.h"

/* glibc's libmvec (linked through libm) has a vector expf for SSE, AVX2 and AVX-512;
 * declaring it simd, as glibc's own math.h does under -ffast-math, lets the vectorised loops
 * call it (_ZGVeN16v_expf, ...) instead of the scalar function, which dominated the profile.
 * x86-64 only: Debian 12's glibc (2.36) has no libmvec for aarch64 (2.38 brings one). clang has no
 * simd attribute (the fuzz build). Elsewhere the scalar expf. */
#if defined(__x86_64__) && !defined(__clang__)
__attribute__((simd("notinbranch"))) float expf(float);
#endif

#define real float
#define SFX(name) name
#define EXP expf
#define SQRT sqrtf
#include "engine/models/gpt/gpt_passes_real.h"

/* Attention's probabilities from one head's fp32 scores s[T,T] (the batched products' output), in
 * one pass over each row where there were three (scale, softmax, the copy to bf16): row t's columns
 * 0..t scaled, then softmax, in place (zeros after); when outb is given, each probability also
 * rounded to bf16 there (bf16-mixed's kept copy for backward's products; bf16-true's stored
 * probabilities). The same operations in the same order as scaling first and gpt_causal_softmax. */
GPT_SIMD_CLONES
void gpt_causal_softmax_scaled(float *restrict s, uint16_t *restrict outb, int T, float scale)
{
    for (int t = 0; t < T; t++) {
        float *restrict row = s + (size_t)t * T;
        float max, sum = 0.0f, inv;

        row[0] *= scale;
        max = row[0];
#pragma omp simd reduction(max : max)
        for (int j = 1; j <= t; j++) {
            row[j] *= scale;
            max = row[j] > max ? row[j] : max;
        }
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
        if (outb) {
            uint16_t *restrict o = outb + (size_t)t * T;

            for (int j = 0; j < T; j++)
                o[j] = ct_bf16_store(row[j]);
        }
    }
}

int gpt_attention_batched(int B, int T, int C, int NH, const uint16_t *qkv, float *s, uint16_t *p,
                          enum ct_dtype y_type, void *y)
{
    int HS = C / NH, C3 = 3 * C;
    long tt = (long)T * T, htt = (long)NH * T * T;
    float scale = 1.0f / sqrtf((float)HS);
    size_t y_size = y_type == CT_DTYPE_BF16 ? sizeof(uint16_t) : sizeof(float);
    /* (sequence b, head h): its q, k and v rows C3 apart in qkv, its scores T x T in s and p, its
     * output rows C apart in y */
    struct ct_gemm_batch scores = { B, NH, (long)T * C3, HS, (long)T * C3, HS, htt, tt };
    struct ct_gemm_batch out = { B, NH, htt, tt, (long)T * C3, HS, (long)T * C, HS };

    for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
        if (ct_gemm_batched(&scores, 0, 1, gpt_att_rows(r0, T), r0 + gpt_att_rows(r0, T), HS, qkv + (size_t)r0 * C3, C3,
                            qkv + C, C3, CT_DTYPE_BF16, s + (size_t)r0 * T, T))
            return -1;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++)
        gpt_causal_softmax_scaled(s + (size_t)bh * tt, p + (size_t)bh * tt, T, scale);
    for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
        if (ct_gemm_batched_to(&out, 0, 0, gpt_att_rows(r0, T), HS, r0 + gpt_att_rows(r0, T), p + (size_t)r0 * T, T,
                               qkv + 2 * C, C3, CT_DTYPE_BF16, 1.0f, y_type, (char *)y + (size_t)r0 * C * y_size, C))
            return -1;
    return 0;
}

/* bf16-true's softmax backward for one head: d[T,T] the fp32 gradient of the probabilities (a
 * product's output, rounded here to bf16 as PyTorch's bf16 tensor holds it), p the stored bf16
 * probabilities; ds the scores' gradient, rounded to bf16 (zeros above the diagonal). One pass per
 * row where there were four (p widened, d rounded, gpt_causal_softmax_backward, ds stored), the
 * same operations in the same order. d is left as scratch. */
GPT_SIMD_CLONES
void gpt_causal_softmax_backward_rounded(float *restrict d, const uint16_t *restrict p, uint16_t *restrict ds, int T)
{
    for (int t = 0; t < T; t++) {
        float *restrict dr = d + (size_t)t * T;
        const uint16_t *restrict pr = p + (size_t)t * T;
        uint16_t *restrict o = ds + (size_t)t * T;
        float dot = 0.0f;

#pragma omp simd reduction(+ : dot)
        for (int j = 0; j <= t; j++) {
            dr[j] = ct_bf16_load(ct_bf16_store(dr[j]));
            dot += ct_bf16_load(pr[j]) * dr[j];
        }
        for (int j = 0; j <= t; j++)
            o[j] = ct_bf16_store(ct_bf16_load(pr[j]) * (dr[j] - dot));
        for (int j = t + 1; j < T; j++)
            o[j] = 0;
    }
}

/* db = column sums of dout[N,OC] (as gpt_column_sums) and dout packed to bf16 into outb (as
 * ct_bf16_pack), in one read of dout: bf16-mixed's Linear backward, whose two products read the
 * packed copy. Columns j0..j1, every row in order. */
GPT_SIMD_CLONES
static void column_sums_packed_cols(float *restrict db, uint16_t *restrict outb, const float *restrict dout, int N,
                                    int OC, size_t j0, size_t j1)
{
    memset(db + j0, 0, sizeof(float) * (j1 - j0));
    for (int n = 0; n < N; n++) {
        const float *restrict d = dout + (size_t)n * OC;
        uint16_t *restrict o = outb + (size_t)n * OC;

        for (size_t j = j0; j < j1; j++) {
            db[j] += d[j];
            o[j] = ct_bf16_store(d[j]);
        }
    }
}

void gpt_column_sums_packed(float *db, uint16_t *outb, const float *dout, int N, int OC)
{
#pragma omp parallel if ((size_t)N * OC >= GPT_PAR_MIN)
    {
        size_t lo, hi;

        /* columns in blocks of 32 (64 bytes of the bf16 copy) so threads do not share a cache line */
        share((size_t)(OC + 31) / 32, &lo, &hi);
        lo *= 32;
        hi = hi * 32 < (size_t)OC ? hi * 32 : (size_t)OC;
        if (lo < hi)
            column_sums_packed_cols(db, outb, dout, N, OC, lo, hi);
    }
}
