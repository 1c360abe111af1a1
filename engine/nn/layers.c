/* SPDX-License-Identifier: BSD-3-Clause */
/* Linear, ReLU and softmax cross-entropy, forward and backward; every GEMM through oneDNN
 * (engine/nn/gemm.c), in fp32 or on bf16 inputs. Row-major throughout; Linear weights are [out, in]
 * like PyTorch's, so checkpoints interoperate. */
#include <math.h>
#include <string.h>

#include "ctrain/nn.h"
#include "engine/nn/gemm.h"

/* The element-wise passes are cloned for AVX-512 and AVX2 with a run-time pick (glibc ifunc), and
 * take restrict pointers so the compiler vectorises them without alias checks. */
#define CT_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

CT_SIMD_CLONES
static void bias_relu(float *restrict y, const float *restrict b, int batch, int out)
{
    for (int i = 0; i < batch; i++) {
        float *restrict row = y + (size_t)i * out;

        for (int j = 0; j < out; j++) {
            float v = row[j] + b[j];
            row[j] = v > 0.0f ? v : 0.0f;
        }
    }
}

CT_SIMD_CLONES
static void bias_add(float *restrict y, const float *restrict b, int batch, int out)
{
    for (int i = 0; i < batch; i++) {
        float *restrict row = y + (size_t)i * out;

        for (int j = 0; j < out; j++)
            row[j] += b[j];
    }
}

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

CT_SIMD_CLONES
static void column_sums(const float *restrict dy, float *restrict db, int batch, int out)
{
    memset(db, 0, sizeof(float) * (size_t)out);
    for (int i = 0; i < batch; i++) {
        const float *restrict row = dy + (size_t)i * out;

        for (int j = 0; j < out; j++)
            db[j] += row[j];
    }
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

CT_SIMD_CLONES
void ct_relu_backward(const float *restrict y, float *restrict dy, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
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
