/* SPDX-License-Identifier: BSD-3-Clause */
/* The training step's GEMMs on the CPU: oneDNN's matmul primitive (the library PyTorch's CPU path
 * uses; fp32 and bf16 inputs, fp32 accumulation), one primitive per shape, transposition and input
 * type, created on a shape's first call and reused every step after. Internal to libctrain:
 * libctrain-core never links oneDNN. */
#ifndef CTRAIN_NN_GEMM_H
#define CTRAIN_NN_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/dtype.h"
#include "ctrain/nn.h"

/* Row-major C[M,N] = op(A)[M,K] op(B)[K,N], plus C's old value when accumulate is 1. op(X) is X, or
 * X^T when its trans flag is set (A is then stored [K,M], B [N,K]). A and B are both float
 * (CT_DTYPE_F32) or both bf16 as uint16_t (CT_DTYPE_BF16, ct_bf16_pack); C is float. Called from
 * inside an OpenMP parallel region (every function here), the product runs on the calling thread
 * alone, on a primitive made for one thread, while the team's other threads run their own. */
void ct_gemm(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
             enum ct_dtype ab, int accumulate, float *C, int ldc);

/* C = op(A) op(B) + bias, bias a row of N (float) added to every row of C: one pass over C where
 * filling it with the bias and accumulating read it back (a Linear layer's forward). */
void ct_gemm_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                  enum ct_dtype ab, const float *bias, float *C, int ldc);

/* bf16-true's products: A, B and C all bf16, the sum in fp32 (plus C's old value when accumulate)
 * rounded once into C. On oneDNN (a bf16 destination); without a bf16 primitive, A and B widened
 * into the thread's fp32 scratch, the fp32 primitive of the same shape into fp32 scratch, rounded
 * once into C (OpenBLAS where oneDNN has no fp32 primitive either). */
void ct_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                  int accumulate, uint16_t *C, int ldc);
/* ct_gemm_bf16 with a bf16 bias row added to every row of C (no accumulate): the fp32 sum plus the
 * bias, rounded once. */
void ct_gemm_bf16_bias(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                       int ldb, const uint16_t *bias, uint16_t *C, int ldc);
void ct_gemm_prepare_bf16(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int accumulate, int ldc);

/* Make the primitive ct_gemm will use for this problem now (at a model's set-up) instead of on the
 * step's first call; a problem oneDNN has none for is noted for OpenBLAS. */
void ct_gemm_prepare(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, enum ct_dtype ab,
                     int accumulate, int ldc);

/* out[i] = in[i] rounded to bf16 (nearest, ties to even; NaN stays NaN), as its 16 bits. */
void ct_bf16_pack(const float *in, uint16_t *out, size_t n);

/* A [n0][n1] grid of products of one shape: product (i, j) reads A + i * a0 + j * a1, B + i * b0 +
 * j * b1 and writes C + i * c0 + j * c1 (offsets in elements), e.g. every (sequence, head) of
 * attention in one oneDNN primitive. */
struct ct_gemm_batch {
    int n0, n1;
    long a0, a1, b0, b1, c0, c1;
};

/* ct_gemm's C = op(A) op(B) (no accumulate) over the grid: on one oneDNN primitive, or where oneDNN
 * made none (bf16 inputs on a CPU without bf16 matmul; a batch only its reference loops take) its
 * views widened to fp32 once and each product on OpenBLAS. 0, or -1 for a bad shape or C type. */
int ct_gemm_batched(const struct ct_gemm_batch *batch, int trans_a, int trans_b, int M, int N, int K, const void *A,
                    int lda, const void *B, int ldb, enum ct_dtype ab, float *C, int ldc);
/* The same with C = alpha op(A) op(B), the fp32 sum scaled and then stored as c: fp32 (float), or
 * rounded once to bf16 (uint16_t: bf16-true's attention writes its bf16 tensors directly). */
int ct_gemm_batched_to(const struct ct_gemm_batch *batch, int trans_a, int trans_b, int M, int N, int K, const void *A,
                       int lda, const void *B, int ldb, enum ct_dtype ab, float alpha, enum ct_dtype c, void *C,
                       int ldc);

/* 1 where oneDNN has a bf16 matmul on this CPU (AVX512-BF16, AMX, or AVX-512's emulation), asked of
 * oneDNN once by making a primitive. Where it has none, every bf16 product above still computes,
 * on its operands widened to fp32 and fp32 kernels (decided once per shape, when its primitive
 * would be made); attention then takes its per-head path, which widens each tensor once, over the
 * batched products, which would widen each of their views per call. */
int ct_gemm_bf16_native(void);

/* OpenBLAS's thread count for a product on the whole team (ct_cpu_threads_setup's; OpenBLAS's own
 * default, or OPENBLAS_NUM_THREADS, until it is set). gemm.c runs a product made inside a parallel
 * region (one thread of the team) on one OpenBLAS thread and one on the team on this count:
 * Debian's OpenBLAS has one count for the process, so gemm.c sets it before each of its OpenBLAS
 * products, and ct_gemm_blas_team puts the team's back before another caller's (fp64's dgemm). */
void ct_gemm_set_blas_threads(int threads);
void ct_gemm_blas_team(void);

/* The threads oneDNN and the step's parallel loops use (OpenMP: Debian's oneDNN runs on it). */
void ct_gemm_set_threads(int threads);
int ct_gemm_get_threads(void);
/* 1 in a child forked (without exec) from a process whose GEMMs ran on an OpenMP team: libgomp
 * cannot start a team there (it would wait for the parent's threads), so ct_gemm_set_threads gives
 * it one thread. */
int ct_gemm_forked_after_teams(void);

/* ct_gemm through oneDNN's primitive for the problem only, also where ct_gemm takes OpenBLAS as the
 * faster library on this CPU (an AVX2 CPU's weight-gradient products): 0, or -1 when oneDNN made
 * none (ct_gemm then widens bf16 inputs to fp32, or runs an fp32 product on OpenBLAS). For the
 * microbenchmark (build/t/gemm_shapes). */
int ct_gemm_onednn(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                   enum ct_dtype ab, int accumulate, float *C, int ldc);
/* The implementation oneDNN picked for that shape ("brg:avx512_core_bf16", ...), "openblas", or
 * for bf16 inputs oneDNN has no primitive for "widened:" and the fp32 problem's ("widened:gemm:jit"). */
const char *ct_gemm_impl(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, enum ct_dtype ab,
                         int accumulate, int ldc);

/* ct_linear_forward / ct_linear_backward / ct_linear_backward_weight_blocks with the GEMM inputs
 * (x, w, dyg) of type dt: fp32, or bf16 packed by ct_bf16_pack. dy is the fp32 output gradient
 * the bias gradient sums. */
void ct_linear_forward_dt(const void *x, const void *w, enum ct_dtype dt, const float *b, float *y, int batch, int in,
                          int out, int relu);
void ct_linear_backward_dt(const void *x, const void *w, const void *dyg, enum ct_dtype dt, const float *dy,
                           float *dw, float *db, float *dx, int batch, int in, int out);
int ct_linear_backward_weight_blocks_dt(const void *x, const void *dyg, enum ct_dtype dt, const float *dy, float *dw,
                                        float *db, int batch, int in, int out, int blocks, size_t w_offset,
                                        size_t b_offset, ct_grad_ready_fn ready, void *ctx);

/* 64-true's layers: the same products in fp64 on OpenBLAS's dgemm (oneDNN's matmul has no f64 on
 * cpu), the element-wise passes in fp64. */
void ct_linear_forward_f64(const double *x, const double *w, const double *b, double *y, int batch, int in, int out,
                           int relu);
void ct_linear_backward_f64(const double *x, const double *w, const double *dy, double *dw, double *db, double *dx,
                            int batch, int in, int out);
void ct_relu_backward_f64(const double *y, double *dy, size_t n);
double ct_softmax_xent_forward_f64(const double *logits, const uint8_t *labels, double *probs, int batch, int classes,
                                   int *correct);
void ct_softmax_xent_backward_f64(double *probs, const uint8_t *labels, int batch, int classes, int scale_batch);

#endif
