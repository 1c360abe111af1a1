/* SPDX-License-Identifier: BSD-3-Clause */
// The MLP on a CUDA device; see mlp_cuda.h. Status: compiled with nvcc, not yet run on a GPU.
//
// Row-major tensors as on the host. cuBLAS is column-major, and a row-major [r, c] matrix is the
// column-major [c, r] matrix, so every GEMM below is written for the transposes:
//   forward   y[B,out]  = x[B,in] W^T    ->  y^T  = W  x^T   gemm(T, N, out, B, in)
//   backward  dW[out,in] = dy^T x        ->  dW^T = x^T dy   gemm(N, T, in, out, B)
//             dx[B,in]  = dy W           ->  dx^T = W^T dy^T gemm(N, N, in, B, out)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "engine/nn/cuda_device.h"
#include "engine/nn/cuda_optim.cuh"
#include "engine/models/mlp/mlp_cuda.h"

// GradScaler's defaults: start at 2^16, halve on overflow, double after 2000 clean steps.
static const float LOSS_SCALE_INIT = 65536.0f;
static const int LOSS_SCALE_GROWTH_INTERVAL = 2000;

struct stats {
    double loss_sum;
    int correct;
    int nonfinite;
    int bad_label;  // 1 + the first out-of-range label's index in the batch, 0 when all are in range
};

struct ct_mlp_cuda {
    int n_layers;
    int dims[CT_MLP_MAX_LAYERS + 1];
    int max_batch;
    int batch;
    enum ct_dtype gemm_dtype;
    cudaDataType_t lowp;          // CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F
    size_t lowp_size;             // bytes per element of that type
    size_t n_params;
    size_t w_off[CT_MLP_MAX_LAYERS], b_off[CT_MLP_MAX_LAYERS];
    cudaStream_t stream;
    cublasHandle_t blas;
    float *params, *grads;        // fp32 master weights and their gradients
    float *state[2];              // optimizer state (AdamW m, v; SGD momentum)
    int n_states;
    float *acts[CT_MLP_MAX_LAYERS];  // fp32 outputs (logits, then probabilities, then dlogits)
    float *dacts[CT_MLP_MAX_LAYERS];
    float *x;                     // the batch's inputs, fp32
    uint8_t *y;                   // its labels
    void *xq[CT_MLP_MAX_LAYERS];  // each layer's input in the GEMM type (mixed precisions)
    void *wq;                     // all weights in the GEMM type, same offsets as params
    void *dyq;                    // the output gradient being used, GEMM type
    struct stats *dstats;         // device side of the per-forward numbers
    struct stats *hstats;         // pinned host copy
    float *hx;                    // pinned host batch
    uint8_t *hy;
    float loss_scale;
    int good_steps;
    int64_t skipped;
};

// --- kernels --------------------------------------------------------------------------------

static unsigned int blocks_for(size_t n, unsigned int threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned int)(b < 65535u * 32u ? (b ? b : 1) : 65535u * 32u);
}

__device__ static void store_lowp(void *dst, size_t i, float v, int type)
{
    if (type == CUDA_R_16BF)
        ((__nv_bfloat16 *)dst)[i] = __float2bfloat16_rn(v);  // round to nearest even, like the cpu path
    else if (type == CUDA_R_16F)
        ((__half *)dst)[i] = __float2half_rn(v);
    else
        ((float *)dst)[i] = v;
}

__global__ static void k_convert(const float *in, void *out, size_t n, int type)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        store_lowp(out, i, in[i], type);
}

// y += b per row, then ReLU when relu; the next layer's GEMM input written in its type (yq != NULL).
__global__ static void k_bias_act(float *y, const float *b, int batch, int out, int relu, void *yq, int type)
{
    size_t n = (size_t)batch * out;

    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = y[i] + b[i % out];

        if (relu)
            v = v > 0.0f ? v : 0.0f;
        y[i] = v;
        if (yq)
            store_lowp(yq, i, v, type);
    }
}

// One thread per sample (the class count is small): softmax in place, loss and argmax summed.
// A label outside [0, classes) is reported through st->bad_label (the host turns it into an error)
// and its row is left alone: reading row[label] there would read past the logits.
__global__ static void k_softmax_xent(float *z, const uint8_t *labels, int batch, int classes, struct stats *st)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float *row, max, sum = 0.0f, zl;
    int arg = 0;

    if (i >= batch)
        return;
    if (labels[i] >= classes) {
        atomicCAS(&st->bad_label, 0, i + 1);
        return;
    }
    row = z + (size_t)i * classes;
    max = row[0];
    zl = row[labels[i]];
    for (int j = 1; j < classes; j++)
        if (row[j] > max) {
            max = row[j];
            arg = j;
        }
    for (int j = 0; j < classes; j++) {
        row[j] = expf(row[j] - max);
        sum += row[j];
    }
    for (int j = 0; j < classes; j++)
        row[j] /= sum;
    atomicAdd(&st->loss_sum, (double)(logf(sum) - (zl - max)));
    if (arg == labels[i])
        atomicAdd(&st->correct, 1);
}

// dlogits = (p - onehot) * scale, scale = loss_scale / batch of the mean.
__global__ static void k_softmax_xent_backward(float *p, const uint8_t *labels, int batch, int classes, float scale)
{
    size_t n = (size_t)batch * classes;

    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int row = (int)(i / classes), col = (int)(i % classes);

        // An out-of-range label never gets here: forward refused the batch.
        p[i] = (p[i] - (col == labels[row] ? 1.0f : 0.0f)) * scale;
    }
}

__global__ static void k_relu_backward(const float *y, float *dy, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// db[j] = sum over rows of dy[:, j]; one thread per column, neighbouring threads read neighbours.
__global__ static void k_column_sums(const float *dy, float *db, int batch, int out)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;

    if (j >= out)
        return;
    for (int i = 0; i < batch; i++)
        s += dy[(size_t)i * out + j];
    db[j] = s;
}

__global__ static void k_nonfinite(const float *g, size_t n, struct stats *st)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (!isfinite(g[i])) {
            st->nonfinite = 1;
            return;
        }
}

// torch.optim.AdamW (engine/nn/cuda_optim.cuh); g multiplied by inv_scale first (16-mixed).
__global__ static void k_adamw(float *p, const float *g, float *m, float *v, size_t n, float b1, float b2, float eps,
                               float decay, float step_size, float inv_sqrt_bc2, float inv_scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        p[i] = ct_cuda_adamw_update(p[i], g[i] * inv_scale, m[i], v[i], b1, b2, eps, decay, step_size, inv_sqrt_bc2);
    }
}

// torch.optim.SGD (engine/nn/cuda_optim.cuh); g multiplied by inv_scale first.
__global__ static void k_sgd(float *p, const float *g, float *buf, size_t n, float lr, float wd, float mu,
                             float inv_scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        p[i] = ct_cuda_sgd_update(p[i], g[i] * inv_scale, buf[i], lr, wd, mu);
    }
}

// --- errors -------------------------------------------------------------------------------

static int cuda_fail(cudaError_t e, const char *what, ct_error *err)
{
    ct_error_set(err, CT_EIO, "cuda", "cuda: %s failed: %s", what, cudaGetErrorString(e));
    return ct_error_hint(err, "check the GPU with nvidia-smi; CUDA_LAUNCH_BLOCKING=1 shows the failing kernel");
}

static int blas_fail(cublasStatus_t s, const char *what, ct_error *err)
{
    ct_error_set(err, CT_EIO, "cuda", "cublas: %s failed: %s", what, cublasGetStatusString(s));
    return ct_error_hint(err, "check the GPU with nvidia-smi and the cuBLAS library version");
}

// A kernel launch's configuration error shows at once; execution errors at the next sync.
static int launched(const char *what, ct_error *err)
{
    cudaError_t e = cudaGetLastError();

    return e == cudaSuccess ? 0 : cuda_fail(e, what, err);
}

// --- create / free ----------------------------------------------------------------------------

static int dev_alloc(void **p, size_t bytes, const char *what, ct_error *err)
{
    int rc = ct_cuda_malloc(p, bytes);

    if (rc) {
        ct_error_set(err, CT_ENOMEM, "cuda", "cuda: out of device memory for %s (%zu bytes)", what, bytes);
        return ct_error_hint(err, "use a smaller --batch-size or --hidden");
    }
    return 0;
}

static size_t act_bytes(const ct_mlp_cuda *d, int l)
{
    return sizeof(float) * (size_t)d->max_batch * d->dims[l + 1];
}

static int widest(const ct_mlp_cuda *d)
{
    int w = 0;

    for (int l = 0; l <= d->n_layers; l++)
        w = d->dims[l] > w ? d->dims[l] : w;
    return w;
}

static int allocate(ct_mlp_cuda *d, ct_error *err)
{
    size_t pb = sizeof(float) * d->n_params;
    int rc;

    if ((rc = dev_alloc((void **)&d->params, pb, "parameters", err)) ||
        (rc = dev_alloc((void **)&d->grads, pb, "gradients", err)) ||
        (rc = dev_alloc((void **)&d->x, sizeof(float) * (size_t)d->max_batch * d->dims[0], "a batch", err)) ||
        (rc = dev_alloc((void **)&d->y, (size_t)d->max_batch, "labels", err)) ||
        (rc = dev_alloc((void **)&d->dstats, sizeof(struct stats), "loss", err)))
        return rc;
    for (int i = 0; i < d->n_states; i++) {
        cudaError_t e;

        if ((rc = dev_alloc((void **)&d->state[i], pb, "optimizer state", err)))
            return rc;
        // On the compute stream: the legacy default stream is not ordered against a non-blocking one.
        if ((e = cudaMemsetAsync(d->state[i], 0, pb, d->stream)) != cudaSuccess)
            return cuda_fail(e, "clearing the optimizer state", err);
    }
    for (int l = 0; l < d->n_layers; l++)
        if ((rc = dev_alloc((void **)&d->acts[l], act_bytes(d, l), "activations", err)) ||
            (rc = dev_alloc((void **)&d->dacts[l], act_bytes(d, l), "activation gradients", err)))
            return rc;
    if (d->gemm_dtype != CT_DTYPE_F32) {
        for (int l = 0; l < d->n_layers; l++)
            if ((rc = dev_alloc(&d->xq[l], d->lowp_size * (size_t)d->max_batch * d->dims[l], "low-precision inputs",
                                err)))
                return rc;
        if ((rc = dev_alloc(&d->wq, d->lowp_size * d->n_params, "low-precision weights", err)) ||
            (rc = dev_alloc(&d->dyq, d->lowp_size * (size_t)d->max_batch * widest(d), "low-precision gradients", err)))
            return rc;
    }
    if (cudaMallocHost((void **)&d->hstats, sizeof(struct stats)) != cudaSuccess ||
        cudaMallocHost((void **)&d->hx, sizeof(float) * (size_t)d->max_batch * d->dims[0]) != cudaSuccess ||
        cudaMallocHost((void **)&d->hy, (size_t)d->max_batch) != cudaSuccess)
        return ct_error_set(err, CT_ENOMEM, "cuda", "cuda: out of pinned host memory for a batch of %d", d->max_batch);
    return 0;
}

extern "C" int ct_mlp_cuda_create(const ct_mlp *host, const ct_optim *o, int max_batch, enum ct_dtype gemm_dtype,
                                  ct_mlp_cuda **out, ct_error *err)
{
    ct_mlp_cuda *d;
    cublasStatus_t bs;
    int rc;

    *out = NULL;
    if (gemm_dtype != CT_DTYPE_F32 && gemm_dtype != CT_DTYPE_BF16 && gemm_dtype != CT_DTYPE_F16)
        return ct_error_set(err, CT_ENOTAVAIL, "mlp-gemm-dtype", "the cuda MLP computes GEMMs in fp32, bf16 or fp16");
    d = (ct_mlp_cuda *)calloc(1, sizeof(*d));
    if (!d)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory creating the cuda model");
    d->n_layers = ct_mlp_num_layers(host);
    d->max_batch = max_batch;
    d->gemm_dtype = gemm_dtype;
    d->lowp = gemm_dtype == CT_DTYPE_BF16 ? CUDA_R_16BF : gemm_dtype == CT_DTYPE_F16 ? CUDA_R_16F : CUDA_R_32F;
    d->lowp_size = gemm_dtype == CT_DTYPE_F32 ? 4 : 2;
    d->loss_scale = gemm_dtype == CT_DTYPE_F16 ? LOSS_SCALE_INIT : 1.0f;
    d->n_params = ct_mlp_num_params(host);
    for (int l = 0; l < d->n_layers; l++) {
        const ct_tensor *w = ct_mlp_tensor(host, 2 * l);

        d->dims[l] = (int)w->shape[1];
        d->dims[l + 1] = (int)w->shape[0];
        d->w_off[l] = w->offset;
        d->b_off[l] = ct_mlp_tensor(host, 2 * l + 1)->offset;
    }
    d->n_states = o ? ct_optim_num_states(o) : 0;
    d->stream = (cudaStream_t)ct_cuda_compute_stream();
    if ((bs = cublasCreate(&d->blas)) != CUBLAS_STATUS_SUCCESS) {
        d->blas = NULL;
        ct_mlp_cuda_free(d);
        return blas_fail(bs, "cublasCreate", err);
    }
    cublasSetStream(d->blas, d->stream);
    if ((rc = allocate(d, err)) || (rc = ct_mlp_cuda_from_host(d, host, o, err))) {
        ct_mlp_cuda_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

extern "C" void ct_mlp_cuda_free(ct_mlp_cuda *d)
{
    size_t pb;

    if (!d)
        return;
    pb = sizeof(float) * d->n_params;
    if (d->stream || d->blas)
        cudaStreamSynchronize(d->stream);
    if (d->blas)
        cublasDestroy(d->blas);
    ct_cuda_free(d->params, pb);
    ct_cuda_free(d->grads, pb);
    for (int i = 0; i < d->n_states; i++)
        ct_cuda_free(d->state[i], pb);
    for (int l = 0; l < d->n_layers; l++) {
        ct_cuda_free(d->acts[l], act_bytes(d, l));
        ct_cuda_free(d->dacts[l], act_bytes(d, l));
        ct_cuda_free(d->xq[l], d->lowp_size * (size_t)d->max_batch * d->dims[l]);
    }
    ct_cuda_free(d->wq, d->lowp_size * d->n_params);
    ct_cuda_free(d->dyq, d->lowp_size * (size_t)d->max_batch * widest(d));
    ct_cuda_free(d->x, sizeof(float) * (size_t)d->max_batch * d->dims[0]);
    ct_cuda_free(d->y, (size_t)d->max_batch);
    ct_cuda_free(d->dstats, sizeof(struct stats));
    if (d->hstats)
        cudaFreeHost(d->hstats);
    if (d->hx)
        cudaFreeHost(d->hx);
    if (d->hy)
        cudaFreeHost(d->hy);
    free(d);
}

extern "C" float *ct_mlp_cuda_batch_x(ct_mlp_cuda *d) { return d->hx; }
extern "C" uint8_t *ct_mlp_cuda_batch_y(ct_mlp_cuda *d) { return d->hy; }
extern "C" float *ct_mlp_cuda_params(ct_mlp_cuda *d) { return d->params; }
extern "C" float *ct_mlp_cuda_grads(ct_mlp_cuda *d) { return d->grads; }
extern "C" size_t ct_mlp_cuda_num_params(const ct_mlp_cuda *d) { return d->n_params; }
extern "C" int64_t ct_mlp_cuda_skipped_steps(const ct_mlp_cuda *d) { return d->skipped; }
extern "C" float ct_mlp_cuda_loss_scale(const ct_mlp_cuda *d) { return d->loss_scale; }

// --- forward / backward --------------------------------------------------------------------

// C[m,n] (column-major) = op(A) op(B), inputs of the GEMM type, fp32 output and accumulation.
static int gemm(ct_mlp_cuda *d, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *a,
                int lda, const void *b, int ldb, float *c, int ldc, const char *what, ct_error *err)
{
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasGemmEx(d->blas, ta, tb, m, n, k, &one, a, d->lowp, lda, b, d->lowp, ldb, &zero, c,
                                    CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);

    return s == CUBLAS_STATUS_SUCCESS ? 0 : blas_fail(s, what, err);
}

static const void *weights_for_gemm(ct_mlp_cuda *d, int l)
{
    if (d->gemm_dtype == CT_DTYPE_F32)
        return d->params + d->w_off[l];
    return (const char *)d->wq + d->lowp_size * d->w_off[l];
}

extern "C" int ct_mlp_cuda_forward(ct_mlp_cuda *d, int batch, double *loss_sum, int *correct, ct_error *err)
{
    const unsigned int T = 256;
    int last = d->n_layers - 1, classes = d->dims[d->n_layers];
    const void *in = d->x;
    cudaError_t e;
    int rc;

    // Before anything is enqueued: a batch of 0 would launch the softmax kernel on an empty grid (an
    // invalid-configuration error at the next check, with the copies already queued), and one past
    // max_batch would overrun the device buffers.
    if (batch < 1 || batch > d->max_batch)
        return ct_error_set(err, CT_EINVAL, "cuda-batch", "cuda: a batch of %d samples (this model takes 1 to %d)",
                            batch, d->max_batch);
    d->batch = batch;
    cudaMemcpyAsync(d->x, d->hx, sizeof(float) * (size_t)batch * d->dims[0], cudaMemcpyHostToDevice, d->stream);
    cudaMemcpyAsync(d->y, d->hy, (size_t)batch, cudaMemcpyHostToDevice, d->stream);
    cudaMemsetAsync(d->dstats, 0, sizeof(struct stats), d->stream);
    if (d->gemm_dtype != CT_DTYPE_F32) {
        size_t nx = (size_t)batch * d->dims[0];

        // The weights changed at the last update: one conversion of all of them per forward.
        k_convert<<<blocks_for(d->n_params, T), T, 0, d->stream>>>(d->params, d->wq, d->n_params, d->lowp);
        k_convert<<<blocks_for(nx, T), T, 0, d->stream>>>(d->x, d->xq[0], nx, d->lowp);
        in = d->xq[0];
        if ((rc = launched("converting the inputs", err)))
            return rc;
    }
    for (int l = 0; l < d->n_layers; l++) {
        int fan_in = d->dims[l], out = d->dims[l + 1];
        void *next = l != last && d->gemm_dtype != CT_DTYPE_F32 ? d->xq[l + 1] : NULL;
        size_t n = (size_t)batch * out;

        if ((rc = gemm(d, CUBLAS_OP_T, CUBLAS_OP_N, out, batch, fan_in, weights_for_gemm(d, l), fan_in, in, fan_in,
                       d->acts[l], out, "forward GEMM", err)))
            return rc;
        k_bias_act<<<blocks_for(n, T), T, 0, d->stream>>>(d->acts[l], d->params + d->b_off[l], batch, out, l != last,
                                                           next, d->lowp);
        if ((rc = launched("bias and ReLU", err)))
            return rc;
        in = next ? next : d->acts[l];
    }
    k_softmax_xent<<<(batch + 127) / 128, 128, 0, d->stream>>>(d->acts[last], d->y, batch, classes, d->dstats);
    if ((rc = launched("softmax cross-entropy", err)))
        return rc;
    cudaMemcpyAsync(d->hstats, d->dstats, sizeof(struct stats), cudaMemcpyDeviceToHost, d->stream);
    if ((e = cudaStreamSynchronize(d->stream)) != cudaSuccess)
        return cuda_fail(e, "forward", err);
    if (d->hstats->bad_label) {
        int i = d->hstats->bad_label - 1;

        d->batch = 0; // backward has nothing to differentiate
        return ct_error_set(err, CT_EINVAL, "cuda-label", "cuda: label %d of sample %d in the batch is not a class "
                            "(the model has %d)", d->hy[i], i, classes);
    }
    *loss_sum = d->hstats->loss_sum;
    if (correct)
        *correct = d->hstats->correct;
    return 0;
}

extern "C" int ct_mlp_cuda_backward(ct_mlp_cuda *d, int grad_scale_batch, ct_grad_ready_fn ready, void *ctx,
                                    ct_error *err)
{
    const unsigned int T = 256;
    int last = d->n_layers - 1, batch = d->batch;
    float *dy = d->acts[last];
    int rc;

    if (batch < 1)
        return ct_error_set(err, CT_EINVAL, "cuda-batch", "cuda: backward without a successful forward");
    k_softmax_xent_backward<<<blocks_for((size_t)batch * d->dims[d->n_layers], T), T, 0, d->stream>>>(
        dy, d->y, batch, d->dims[d->n_layers], d->loss_scale / (float)grad_scale_batch);
    for (int l = last; l >= 0; l--) {
        int fan_in = d->dims[l], out = d->dims[l + 1];
        const void *x = l ? (d->gemm_dtype == CT_DTYPE_F32 ? (const void *)d->acts[l - 1] : d->xq[l])
                          : (d->gemm_dtype == CT_DTYPE_F32 ? (const void *)d->x : d->xq[0]);
        const void *dyg = dy;
        float *dx = l ? d->dacts[l - 1] : NULL;

        k_column_sums<<<(out + 127) / 128, 128, 0, d->stream>>>(dy, d->grads + d->b_off[l], batch, out);
        if (d->gemm_dtype != CT_DTYPE_F32) {
            k_convert<<<blocks_for((size_t)batch * out, T), T, 0, d->stream>>>(dy, d->dyq, (size_t)batch * out,
                                                                               d->lowp);
            dyg = d->dyq;
        }
        if ((rc = launched("backward kernels", err)) ||
            (rc = gemm(d, CUBLAS_OP_N, CUBLAS_OP_T, fan_in, out, batch, x, fan_in, dyg, out, d->grads + d->w_off[l],
                       fan_in, "weight-gradient GEMM", err)))
            return rc;
        // Bias is the later tensor in forward order: announce it first, as the cpu MLP does.
        if (ready && ((rc = ready(ctx, d->b_off[l], (size_t)out)) ||
                      (rc = ready(ctx, d->w_off[l], (size_t)out * fan_in))))
            return rc;
        if (dx) {
            if ((rc = gemm(d, CUBLAS_OP_N, CUBLAS_OP_N, fan_in, batch, out, weights_for_gemm(d, l), fan_in, dyg, out,
                           dx, fan_in, "input-gradient GEMM", err)))
                return rc;
            k_relu_backward<<<blocks_for((size_t)batch * fan_in, T), T, 0, d->stream>>>(d->acts[l - 1], dx,
                                                                                      (size_t)batch * fan_in);
            if ((rc = launched("ReLU backward", err)))
                return rc;
            dy = dx;
        }
    }
    return 0;
}

// --- the update ---------------------------------------------------------------------------

// 16-mixed: did the (already averaged) gradients overflow? Adjusts the scale like GradScaler.
static int check_overflow(ct_mlp_cuda *d, int *skipped, ct_error *err)
{
    const unsigned int T = 256;
    cudaError_t e;

    *skipped = 0;
    if (d->gemm_dtype != CT_DTYPE_F16)
        return 0;
    cudaMemsetAsync(&d->dstats->nonfinite, 0, sizeof(int), d->stream);
    k_nonfinite<<<blocks_for(d->n_params, T), T, 0, d->stream>>>(d->grads, d->n_params, d->dstats);
    cudaMemcpyAsync(&d->hstats->nonfinite, &d->dstats->nonfinite, sizeof(int), cudaMemcpyDeviceToHost, d->stream);
    if ((e = cudaStreamSynchronize(d->stream)) != cudaSuccess)
        return cuda_fail(e, "the overflow check", err);
    if (d->hstats->nonfinite) {
        *skipped = 1;
        d->skipped++;
        d->loss_scale *= 0.5f;
        d->good_steps = 0;
    } else if (++d->good_steps == LOSS_SCALE_GROWTH_INTERVAL) {
        d->loss_scale *= 2.0f;
        d->good_steps = 0;
    }
    return 0;
}

extern "C" int ct_mlp_cuda_optim_step(ct_mlp_cuda *d, ct_optim *o, int *skipped, ct_error *err)
{
    const unsigned int T = 256;
    const ct_optim_config *c = ct_optim_get_config(o);
    float inv_scale = 1.0f / d->loss_scale; // the scale the gradients were computed with
    size_t n = d->n_params;
    int rc;

    if ((rc = check_overflow(d, skipped, err)) || *skipped)
        return rc;
    ct_optim_set_steps(o, ct_optim_steps(o) + 1);
    if (c->kind == CT_OPTIM_ADAMW) {
        double t = (double)ct_optim_steps(o);

        k_adamw<<<blocks_for(n, T), T, 0, d->stream>>>(
            d->params, d->grads, d->state[0], d->state[1], n, (float)c->beta1, (float)c->beta2, (float)c->eps,
            (float)(1.0 - c->lr * c->weight_decay), (float)(c->lr / (1.0 - pow(c->beta1, t))),
            (float)(1.0 / sqrt(1.0 - pow(c->beta2, t))), inv_scale);
    } else {
        k_sgd<<<blocks_for(n, T), T, 0, d->stream>>>(d->params, d->grads, d->state[0], n, (float)c->lr,
                                                     (float)c->weight_decay, (float)c->momentum, inv_scale);
    }
    return launched("the optimizer update", err);
}

// --- host copies ----------------------------------------------------------------------------

// Host copies go through the compute stream, then wait for it: the host arrays are pageable,
// and a copy on the legacy default stream would not be ordered against the (non-blocking)
// compute stream's kernels.
static int copy_sync(ct_mlp_cuda *d, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, const char *what,
                     ct_error *err)
{
    cudaError_t e;

    if ((e = cudaMemcpyAsync(dst, src, bytes, kind, d->stream)) != cudaSuccess ||
        (e = cudaStreamSynchronize(d->stream)) != cudaSuccess)
        return cuda_fail(e, what, err);
    return 0;
}

extern "C" int ct_mlp_cuda_to_host(ct_mlp_cuda *d, ct_mlp *host, ct_optim *o, ct_error *err)
{
    size_t pb = sizeof(float) * d->n_params;
    int rc;

    if ((rc = copy_sync(d, ct_mlp_params(host), d->params, pb, cudaMemcpyDeviceToHost,
                        "copying the parameters to the host", err)))
        return rc;
    for (int i = 0; o && i < d->n_states && i < ct_optim_num_states(o); i++)
        if ((rc = copy_sync(d, ct_optim_state(o, i), d->state[i], pb, cudaMemcpyDeviceToHost,
                            "copying the optimizer state to the host", err)))
            return rc;
    return 0;
}

extern "C" int ct_mlp_cuda_from_host(ct_mlp_cuda *d, const ct_mlp *host, const ct_optim *o, ct_error *err)
{
    size_t pb = sizeof(float) * d->n_params;
    int rc;

    if ((rc = copy_sync(d, d->params, ct_mlp_params((ct_mlp *)host), pb, cudaMemcpyHostToDevice,
                        "copying the parameters to the device", err)))
        return rc;
    for (int i = 0; o && i < d->n_states && i < ct_optim_num_states(o); i++)
        if ((rc = copy_sync(d, d->state[i], ct_optim_state((ct_optim *)o, i), pb, cudaMemcpyHostToDevice,
                            "copying the optimizer state to the device", err)))
            return rc;
    return 0;
}

extern "C" int ct_mlp_cuda_grads_copy(ct_mlp_cuda *d, float *host, int to_device, ct_error *err)
{
    size_t gb = sizeof(float) * d->n_params;

    return to_device ? copy_sync(d, d->grads, host, gb, cudaMemcpyHostToDevice, "copying gradients to the device", err)
                     : copy_sync(d, host, d->grads, gb, cudaMemcpyDeviceToHost, "copying gradients to the host", err);
}
