/* SPDX-License-Identifier: BSD-3-Clause */
/* Linear, ReLU and softmax cross-entropy, forward and backward; every GEMM through oneDNN
 * (engine/nn/gemm.c), in fp32 or on bf16 inputs. Row-major throughout; Linear weights are [out, in]
 * like PyTorch's, so checkpoints interoperate. */
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "ctrain/nn.h"
#include "engine/nn/gemm.h"
#include "engine/nn/simd.h"

/* The element-wise passes are cloned per vector ISA (engine/nn/simd.h), and take restrict
 * pointers so the compiler vectorises them without alias checks. */

/* The element-wise passes for each element type T: fp32 for 32-true and the mixed precisions,
 * fp64 for 64-true (computed in T's own arithmetic, as PyTorch does for a tensor of that dtype). */
#define ELEMENTWISE(T, SFX)                                                                                           \
    CT_SIMD_CLONES                                                                                                     \
    static void bias_relu_##SFX(T *restrict y, const T *restrict b, int batch, int out)                               \
    {                                                                                                                  \
        for (int i = 0; i < batch; i++) {                                                                              \
            T *restrict row = y + (size_t)i * out;                                                                     \
            for (int j = 0; j < out; j++) {                                                                            \
                T v = row[j] + b[j];                                                                                   \
                row[j] = v > (T)0 ? v : (T)0;                                                                          \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    CT_SIMD_CLONES                                                                                                     \
    static void bias_add_##SFX(T *restrict y, const T *restrict b, int batch, int out)                                \
    {                                                                                                                  \
        for (int i = 0; i < batch; i++) {                                                                              \
            T *restrict row = y + (size_t)i * out;                                                                     \
            for (int j = 0; j < out; j++)                                                                              \
                row[j] += b[j];                                                                                        \
        }                                                                                                              \
    }                                                                                                                  \
    CT_SIMD_CLONES                                                                                                     \
    static void column_sums_##SFX(const T *restrict dy, T *restrict db, int batch, int out)                           \
    {                                                                                                                  \
        memset(db, 0, sizeof(T) * (size_t)out);                                                                        \
        for (int i = 0; i < batch; i++) {                                                                              \
            const T *restrict row = dy + (size_t)i * out;                                                              \
            for (int j = 0; j < out; j++)                                                                              \
                db[j] += row[j];                                                                                       \
        }                                                                                                              \
    }                                                                                                                  \
    CT_SIMD_CLONES                                                                                                     \
    static void relu_backward_##SFX(const T *restrict y, T *restrict dy, size_t n)                                    \
    {                                                                                                                  \
        for (size_t i = 0; i < n; i++)                                                                                 \
            dy[i] = y[i] > (T)0 ? dy[i] : (T)0;                                                                        \
    }

ELEMENTWISE(float, f32)
ELEMENTWISE(double, f64)
#define bias_relu bias_relu_f32
#define bias_add bias_add_f32
#define column_sums column_sums_f32

void ct_linear_forward_dt(const void *x, const void *w, enum ct_dtype dt, const float *b, float *y, int batch, int in,
                          int out, int relu)
{
    /* y = x W^T: W is [out, in], so it enters transposed. */
    ct_gemm(0, 1, batch, out, in, x, in, w, in, dt, 0, y, out);
    /* Bias and ReLU in the same pass over y, while it is still in cache. */
    if (relu)
        bias_relu(y, b, batch, out);
    else
        bias_add(y, b, batch, out);
}

void ct_linear_forward(const float *x, const float *w, const float *b, float *y,
                       int batch, int in, int out, int relu)
{
    ct_linear_forward_dt(x, w, CT_DTYPE_F32, b, y, batch, in, out, relu);
}

void ct_linear_backward_dt(const void *x, const void *w, const void *dyg, enum ct_dtype dt, const float *dy,
                           float *dw, float *db, float *dx, int batch, int in, int out)
{
    column_sums(dy, db, batch, out);
    /* dW[out,in] = dy^T[out,B] x[B,in] */
    ct_gemm(1, 0, out, in, batch, dyg, out, x, in, dt, 0, dw, in);
    /* dx[B,in] = dy[B,out] W[out,in] */
    if (dx)
        ct_gemm(0, 0, batch, in, out, dyg, out, w, in, dt, 0, dx, in);
}

void ct_linear_backward(const float *x, const float *w, const float *dy, float *dw, float *db,
                        float *dx, int batch, int in, int out)
{
    ct_linear_backward_dt(x, w, dy, CT_DTYPE_F32, dy, dw, db, dx, batch, in, out);
}

int ct_linear_backward_weight_blocks_dt(const void *x, const void *dyg, enum ct_dtype dt, const float *dy, float *dw,
                                        float *db, int batch, int in, int out, int blocks, size_t w_offset,
                                        size_t b_offset, ct_grad_ready_fn ready, void *ctx)
{
    size_t esize = ct_dtype_size(dt);
    int rc;

    column_sums(dy, db, batch, out);
    if ((rc = ready(ctx, b_offset, (size_t)out)))
        return rc;
    for (int k = blocks - 1; k >= 0; k--) {
        int r0 = (int)((long)out * k / blocks), r1 = (int)((long)out * (k + 1) / blocks);

        if (r1 == r0)
            continue;
        /* dW[r0:r1, :] = dy[:, r0:r1]^T x: the rows of the whole product, computed alike. */
        ct_gemm(1, 0, r1 - r0, in, batch, (const char *)dyg + (size_t)r0 * esize, out, x, in, dt, 0,
                dw + (size_t)r0 * in, in);
        if ((rc = ready(ctx, w_offset + (size_t)r0 * in, (size_t)(r1 - r0) * in)))
            return rc;
    }
    return 0;
}

int ct_linear_backward_weight_blocks(const float *x, const float *dy, float *dw, float *db, int batch, int in,
                                     int out, int blocks, size_t w_offset, size_t b_offset, ct_grad_ready_fn ready,
                                     void *ctx)
{
    return ct_linear_backward_weight_blocks_dt(x, dy, CT_DTYPE_F32, dy, dw, db, batch, in, out, blocks, w_offset,
                                               b_offset, ready, ctx);
}

void ct_relu_backward(const float *y, float *dy, size_t n)
{
    relu_backward_f32(y, dy, n);
}

double ct_softmax_xent_forward(const float *logits, const uint8_t *labels, float *probs,
                               int batch, int classes, int *correct)
{
    double loss = 0.0;
    int right = 0;

    for (int i = 0; i < batch; i++) {
        const float *z = logits + (size_t)i * classes;
        float *p = probs + (size_t)i * classes;
        int arg = 0;
        float max = z[0];
        float sum = 0.0f;
        float zl = z[labels[i]]; /* read before p overwrites z when they alias */

        for (int j = 1; j < classes; j++)
            if (z[j] > max) {
                max = z[j];
                arg = j;
            }
        /* log-sum-exp shifted by the max: no overflow for large logits. */
        for (int j = 0; j < classes; j++) {
            p[j] = expf(z[j] - max);
            sum += p[j];
        }
        loss += (double)(logf(sum) - (zl - max));
        for (int j = 0; j < classes; j++)
            p[j] /= sum;
        right += arg == labels[i];
    }
    if (correct)
        *correct = right;
    return loss;
}

void ct_softmax_xent_backward(float *probs, const uint8_t *labels, int batch, int classes,
                              int scale_batch)
{
    float inv = 1.0f / (float)scale_batch;

    for (int i = 0; i < batch; i++) {
        float *p = probs + (size_t)i * classes;

        p[labels[i]] -= 1.0f;
        for (int j = 0; j < classes; j++)
            p[j] *= inv;
    }
}

/* --- fp64 (64-true): OpenBLAS's dgemm, the element-wise passes above in fp64 ------------------- */

void ct_linear_forward_f64(const double *x, const double *w, const double *b, double *y, int batch, int in, int out,
                           int relu)
{
    ct_gemm_blas_team();   /* on OpenBLAS's threads, as the process set them (gemm.h) */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0, x, in, w, in, 0.0, y, out);
    if (relu)
        bias_relu_f64(y, b, batch, out);
    else
        bias_add_f64(y, b, batch, out);
}

void ct_linear_backward_f64(const double *x, const double *w, const double *dy, double *dw, double *db, double *dx,
                            int batch, int in, int out)
{
    column_sums_f64(dy, db, batch, out);
    ct_gemm_blas_team();
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0, dy, out, x, in, 0.0, dw, in);
    if (dx)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0, dy, out, w, in, 0.0, dx, in);
}

void ct_relu_backward_f64(const double *y, double *dy, size_t n)
{
    relu_backward_f64(y, dy, n);
}

double ct_softmax_xent_forward_f64(const double *logits, const uint8_t *labels, double *probs, int batch, int classes,
                                   int *correct)
{
    double loss = 0.0;
    int right = 0;

    for (int i = 0; i < batch; i++) {
        const double *z = logits + (size_t)i * classes;
        double *p = probs + (size_t)i * classes;
        double max = z[0], sum = 0.0, zl = z[labels[i]];
        int arg = 0;

        for (int j = 1; j < classes; j++)
            if (z[j] > max) {
                max = z[j];
                arg = j;
            }
        for (int j = 0; j < classes; j++) {
            p[j] = exp(z[j] - max);
            sum += p[j];
        }
        loss += log(sum) - (zl - max);
        for (int j = 0; j < classes; j++)
            p[j] /= sum;
        right += arg == labels[i];
    }
    if (correct)
        *correct = right;
    return loss;
}

void ct_softmax_xent_backward_f64(double *probs, const uint8_t *labels, int batch, int classes, int scale_batch)
{
    double inv = 1.0 / (double)scale_batch;

    for (int i = 0; i < batch; i++) {
        double *p = probs + (size_t)i * classes;

        p[labels[i]] -= 1.0;
        for (int j = 0; j < classes; j++)
            p[j] *= inv;
    }
}
