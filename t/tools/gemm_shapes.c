/* SPDX-License-Identifier: BSD-3-Clause */
/* gemm_shapes [--config k=v,..] [--batch B] [--reps N]
 *
 * The GPT training step's own GEMMs (every Linear's forward and two backward products, the tied LM
 * head's three), timed on their own: oneDNN fp32 (ct_gemm_onednn: oneDNN's primitive even where
 * ctrain takes OpenBLAS), ctrain's fp32 products as the step runs them (ct_gemm: oneDNN, or
 * OpenBLAS for the shapes it is faster at on this CPU, engine/nn/gemm.c's blas_faster), bf16
 * inputs (ct_gemm: oneDNN's bf16 primitives, or widened to fp32) and OpenBLAS sgemm. Each shape runs
 * as often as one step runs it; the set repeats --reps times after one warm-up. Prints one JSON
 * line: GFLOP/s per backend over the whole set, best_f32_gflops (each shape on whichever of oneDNN
 * and OpenBLAS ran it faster here: the machine's fp32 GEMM ceiling for the step), the
 * implementation per shape, and the set's FLOP per token; --per-shape adds a line per shape with
 * the rates. For scripts/bench/gpt-throughput (the share of the GEMM ceiling the step reaches).
 * Threads: OMP_NUM_THREADS (oneDNN) and OPENBLAS_NUM_THREADS, as the step.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/util.h"
#include "engine/models/gpt/gpt.h"
#include "engine/nn/gemm.h"

struct shape { int ta, tb, M, N, K, lda, ldb, ldc, acc, count; };

static int add(struct shape *s, int n, int ta, int tb, int M, int N, int K, int acc, int count)
{
    s[n] = (struct shape){ ta, tb, M, N, K, ta ? M : K, tb ? K : N, N, acc, count };
    return n + 1;
}

/* What ct_gpt_forward and ct_gpt_backward hand ct_gemm in one step. */
static int step_shapes(const ct_gpt_config *c, int B, struct shape *s)
{
    int BT = B * c->seq_len, C = c->n_embd, V = c->vocab, L = c->n_layer, n = 0;
    int io[4][2] = { { C, 3 * C }, { C, C }, { C, 4 * C }, { 4 * C, C } };

    for (int i = 0; i < 4; i++) {
        int IC = io[i][0], OC = io[i][1];

        n = add(s, n, 0, 1, BT, OC, IC, 1, L);  /* out += in W^T */
        n = add(s, n, 1, 0, OC, IC, BT, 0, L);  /* dW = dout^T in */
        n = add(s, n, 0, 0, BT, IC, OC, 0, L);  /* din = dout W */
    }
    n = add(s, n, 0, 1, BT, V, C, 0, 1);
    n = add(s, n, 0, 0, BT, C, V, 0, 1);
    n = add(s, n, 1, 0, V, C, BT, 0, 1);
    return n;
}

static double run(const struct shape *s, int n, int reps, int backend, void *a, void *b, float *c)
{
    double t0 = 0;

    for (int r = 0; r < reps + 1; r++) {
        if (r == 1)
            t0 = ct_time_now();
        for (int i = 0; i < n; i++)
            for (int k = 0; k < s[i].count; k++) {
                const struct shape *p = &s[i];

                if (backend == 2 || (backend == 3 && ct_gemm_onednn(p->ta, p->tb, p->M, p->N, p->K, a, p->lda, b,
                                                                     p->ldb, CT_DTYPE_F32, p->acc, c, p->ldc) != 0))
                    cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans,
                                p->M, p->N, p->K, 1.0f, a, p->lda, b, p->ldb, p->acc ? 1.0f : 0.0f, c, p->ldc);
                else if (backend != 3)
                    ct_gemm(p->ta, p->tb, p->M, p->N, p->K, a, p->lda, b, p->ldb,
                            backend ? CT_DTYPE_BF16 : CT_DTYPE_F32, p->acc, c, p->ldc);
            }
    }
    return (ct_time_now() - t0) / reps;
}

/* Inputs in [-0.5, 0.5): fp32, or packed to bf16 in place (the first half of each buffer). */
static void fill(float *a, float *b, size_t n, int bf16)
{
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        b[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
    }
    if (bf16) {
        ct_bf16_pack(a, (uint16_t *)a, n);
        ct_bf16_pack(b, (uint16_t *)b, n);
    }
}

int main(int argc, char **argv)
{
    ct_gpt_config cfg;
    ct_error err;
    long batch = 16, reps = 20;
    int per_shape = 0;
    struct shape s[16];
    int n;
    double flops = 0, t[4], best = 0;
    size_t big = 0;
    float *a, *b, *c;

    ct_gpt_config_default(&cfg);
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";

        if (!strcmp(argv[i], "--per-shape")) {
            per_shape = 1;
            i--;
            continue;
        }
        if ((!strcmp(argv[i], "--config") && ct_gpt_config_parse(&cfg, v, &err)) ||
            (!strcmp(argv[i], "--batch") && ct_parse_long(v, 1, 4096, &batch)) ||
            (!strcmp(argv[i], "--reps") && ct_parse_long(v, 1, 100000, &reps)) ||
            (strcmp(argv[i], "--config") && strcmp(argv[i], "--batch") && strcmp(argv[i], "--reps")))
            return fprintf(stderr, "usage: gemm_shapes [--config k=v,..] [--batch B] [--reps N] [--per-shape]\n"), 2;
    }
    n = step_shapes(&cfg, (int)batch, s);
    for (int i = 0; i < n; i++) {
        size_t sz[3] = { (size_t)s[i].M * s[i].K, (size_t)s[i].K * s[i].N, (size_t)s[i].M * s[i].N };

        for (int j = 0; j < 3; j++)
            big = sz[j] > big ? sz[j] : big;
        flops += 2.0 * s[i].M * s[i].N * s[i].K * s[i].count;
    }
    a = malloc(sizeof(float) * big);
    b = malloc(sizeof(float) * big);
    c = calloc(big, sizeof(float));
    fill(a, b, big, 0);
    t[2] = run(s, n, (int)reps, 2, a, b, c);
    t[3] = run(s, n, (int)reps, 3, a, b, c);
    t[0] = run(s, n, (int)reps, 0, a, b, c);
    /* the ceiling: each shape on the faster of the two libraries */
    for (int i = 0; i < n; i++) {
        double tb = run(&s[i], 1, (int)reps, 2, a, b, c), td = run(&s[i], 1, (int)reps, 3, a, b, c);

        best += tb < td ? tb : td;
    }
    fill(a, b, big, 1);
    t[1] = run(s, n, (int)reps, 1, a, b, c);
    printf("{\"flop_per_token\": %.0f, \"onednn_f32_gflops\": %.1f, \"ctrain_f32_gflops\": %.1f, "
           "\"best_f32_gflops\": %.1f, \"onednn_bf16_gflops\": %.1f, \"openblas_gflops\": %.1f, \"threads\": %d, "
           "\"impl\": [", flops / ((double)batch * cfg.seq_len), flops / t[3] / 1e9, flops / t[0] / 1e9,
           flops / best / 1e9, flops / t[1] / 1e9, flops / t[2] / 1e9, ct_gemm_get_threads());
    for (int i = 0; i < n; i++)
        printf("%s\"%dx%dx%d%s%s %s / %s\"", i ? ", " : "", s[i].M, s[i].N, s[i].K, s[i].ta ? " At" : "",
               s[i].tb ? " Bt" : "",
               ct_gemm_impl(s[i].ta, s[i].tb, s[i].M, s[i].N, s[i].K, s[i].lda, s[i].ldb, CT_DTYPE_F32, s[i].acc,
                            s[i].ldc),
               ct_gemm_impl(s[i].ta, s[i].tb, s[i].M, s[i].N, s[i].K, s[i].lda, s[i].ldb, CT_DTYPE_BF16, s[i].acc,
                            s[i].ldc));
    printf("]}\n");
    if (per_shape)
        for (int i = 0; i < n; i++) {
            double ts[3], f = 2.0 * s[i].M * s[i].N * s[i].K * s[i].count;

            fill(a, b, big, 0);
            ts[0] = run(&s[i], 1, (int)reps, 2, a, b, c);
            ts[1] = run(&s[i], 1, (int)reps, 3, a, b, c);
            fill(a, b, big, 1);
            ts[2] = run(&s[i], 1, (int)reps, 1, a, b, c);
            printf("%5dx%5dx%5d%s%s  x%d  OpenBLAS %6.1f  oneDNN fp32 %6.1f  oneDNN bf16 %6.1f GFLOP/s\n", s[i].M,
                   s[i].N, s[i].K, s[i].ta ? " At" : "   ", s[i].tb ? " Bt" : "   ", s[i].count, f / ts[0] / 1e9,
                   f / ts[1] / 1e9, f / ts[2] / 1e9);
        }
    free(a);
    free(b);
    free(c);
    return 0;
}
