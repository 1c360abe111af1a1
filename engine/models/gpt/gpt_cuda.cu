/* SPDX-License-Identifier: BSD-3-Clause */
// The GPT on a CUDA device; see gpt_cuda.h. Status: compiled with nvcc, not yet run on a GPU.
//
// Written top-down as llm.c's train_gpt2.cu: kernels, then a function per layer forward and
// backward, then the step. Shapes as the cpu GPT (gpt.c): B sequences of T tokens, C channels, NH
// heads of HS channels, V vocabulary, L layers, BT = B*T rows; row-major throughout. fp32 master
// weights, gradients, residual stream and element-wise math; what a GEMM reads is of the GEMM type
// G: fp32 under 32-true, bf16 (rounded to nearest even, as the cpu's bf16-mixed) under bf16-mixed,
// kept per layer in G for backward's GEMMs.
//
// cuBLAS is column-major and a row-major [r, c] matrix is the column-major [c, r] one, so each GEMM
// is written for the transposes (the MLP's mlp_cuda.cu explains the three of a Linear layer).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "engine/models/gpt/gpt_cuda.h"
#include "engine/nn/cuda_device.h"
#include "engine/nn/cuda_optim.cuh"

typedef __nv_bfloat16 bf16;

#define WARP 32
#define FULL_MASK 0xffffffffu
#define LN_EPS 1e-5f
#define GELU_K 0.7978845608028654f // sqrt(2/pi)
#define GELU_C 0.044715f
#define COL_CHUNK 128              // rows per partial sum of a column (bias and LayerNorm gradients)
#define NORM_BLOCKS 512            // the grad norm's first stage: a fixed count, so a fixed order
#define FLASH_WARPS 4              // query (or key) rows per flash block, one per warp
#define FLASH_MAX_HS CT_GPT_CUDA_FLASH_MAX_HS
#define LT_WORKSPACE (32u << 20)   // cuBLASLt's workspace (llm.c's size for Hopper)

struct layer_acts {
    void *ln1, *qkv, *atty, *ln2, *fch_gelu; // G: what the GEMMs read, kept for backward's
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
    float *res2, *res3;                      // the residual stream after attention, after the MLP
    void *fch;                               // G: pre-GELU (the GELU epilogue's aux)
    float *att;                              // 32-true simple attention: probabilities [B,NH,T,T]
    void *att_g;                             // bf16-mixed simple attention: the same in bf16 (no fp32 ones)
    float *lse;                              // flash attention: each row's log-sum-exp [B,NH,T]
};

// One cuBLASLt matmul's descriptors and algorithm, built the first time its key is met (gpt_cuda.h's
// ct_gpt_cuda_gemm_cache: shape, transposes, types, epilogue, the pointers' alignment). no_algo: the
// heuristic offered none (status why), remembered so the fallback is taken without asking again.
struct lt_plan {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int no_algo;
    cublasStatus_t status;
};

struct ct_gpt_cuda {
    ct_gpt_cuda_layout lay;
    int max_batch, batch;
    int vp;                       // the logits' row stride: vocab rounded up to 64 (ct_gpt_cuda_padded_vocab)
    int bf16;                     // bf16-mixed: G is bf16
    size_t gsz;                   // bytes of a G element
    cudaDataType_t gtype;
    int flash, no_epilogues;
    cudaStream_t stream;
    cublasHandle_t blas;          // attention's batched GEMMs
    cublasLtHandle_t lt;          // every other GEMM
    void *ws;
    ct_gpt_cuda_gemm_cache gemm_cache;
    struct lt_plan plans[CT_GPT_CUDA_GEMM_SLOTS];

    char *arena;                  // every device array, one allocation
    size_t arena_bytes;
    float *params, *grads, *state[2];
    int n_states;
    void *params_g;               // bf16-mixed: the parameters in bf16, written by the update (not wte's)
    int copy_stale;               // bf16-mixed: the weights came from elsewhere: the next forward copies them
    void *wte_g;                  // bf16-mixed: wte in bf16, [vp, C], the rows past vocab zero (the LM head's A)
    int32_t *inputs, *targets;
    float *encoded;
    struct layer_acts layers[CT_GPT_MAX_LAYER];
    void *lnf;
    float *lnf_mean, *lnf_rstd;
    float *logits;                // 32-true: [BT,vp] logits, then (softmax - onehot) from the fused classifier
    __nv_bfloat16 *logits_g;      // bf16-mixed: the same in bf16 (the LM head's GEMM writes bf16; no fp32 pass)
    float *losses;                // [BT]
    float *dres, *dbt_c, *dqkv, *dfch; // backward's; forward's fp32 scratch too
    float *datt;                  // simple attention's gradient [B,NH,T,T]
    void *qkvp, *dyp;             // G: q, k, v and dy per head [B,NH,T,HS]
    float *dqkvp;                 // fp32: y, then dq, dk, dv per head
    float *delta;                 // flash: rowsum(dy * y) [B,NH,T]
    void *grad_g;                 // bf16-mixed: a gradient a GEMM reads, in bf16
    float *partials;              // column sums' partials
    float *norm_part;
    double *norm_sq;

    double *loss_sum;             // [ring + 1] forwards' loss sums (the last: a waited-for forward's)

    int32_t *h_tokens;            // pinned: inputs then targets
    double *h_loss;               // pinned: loss_sum's copies
    double *h_norm;
    cudaEvent_t tokens_copied;    // the batch's tokens are on the device: the pinned buffer may be refilled
    cudaEvent_t loss_copied[CT_GPT_CUDA_LOSS_RING + 1];
    unsigned long long loss_seq;  // deferred forwards so far (ct_gpt_cuda_loss_slot)
    ct_gpt_cuda_graph_state graph; // the forward's compute in a CUDA graph (options.graph)
    cudaGraphExec_t graph_exec;
};

// --- kernels ------------------------------------------------------------------------------

__device__ static inline float ld(const float *p, size_t i) { return p[i]; }
__device__ static inline float ld(const bf16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ static inline void st(float *p, size_t i, float v) { p[i] = v; }
__device__ static inline void st(bf16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

__device__ static inline float warp_sum(float v)
{
    for (int o = WARP / 2; o > 0; o /= 2)
        v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ static inline float warp_max(float v)
{
    for (int o = WARP / 2; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

#define GRID_STRIDE(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
                               i += (size_t)gridDim.x * blockDim.x)

__global__ static void k_to_bf16(const float *in, bf16 *out, size_t n)
{
    GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(in[i]);
}

// out[n, :] = wte[token n] + wpe[n % T]. The host refused tokens outside [0, V) (ct_gpt_cuda_check_tokens);
// one that got here anyway reads no row of wte (its embedding is NaN, so the loss shows it).
__global__ static void k_embed(float *out, const int32_t *tokens, const float *wte, const float *wpe, int BT, int T,
                               int C, int V)
{
    GRID_STRIDE(i, (size_t)BT * C) {
        size_t n = i / C, c = i % C;
        int t = tokens[n];

        out[i] = (t >= 0 && t < V ? wte[(size_t)t * C + c] : NAN) + wpe[(n % T) * C + c];
    }
}

// dwpe[t, c] = sum over sequences, in order (overwrites).
__global__ static void k_embed_backward_wpe(float *dwpe, const float *dout, int B, int T, int C)
{
    GRID_STRIDE(i, (size_t)T * C) {
        float s = 0.0f;

        for (int b = 0; b < B; b++)
            s += dout[(size_t)b * T * C + i];
        dwpe[i] = s;
    }
}

// dwte[token n, c] += dout[n, c], deterministic without atomics: thread (c, k) owns channel c of the
// tokens in range k of WTE_RANGES and walks the rows in order, adding those of its tokens, so a token
// seen twice adds in the same order every run; the ranges give WTE_RANGES times the parallelism of
// one thread per channel.
#define WTE_RANGES 32
__global__ static void k_embed_backward_wte(float *dwte, const float *dout, const int32_t *tokens, int BT, int C,
                                            int V)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, k = blockIdx.y;
    int lo = (int)((long long)V * k / WTE_RANGES), hi = (int)((long long)V * (k + 1) / WTE_RANGES);

    if (c >= C)
        return;
    for (int n = 0; n < BT; n++) {
        int t = tokens[n];

        if (t >= lo && t < hi)
            dwte[(size_t)t * C + c] += dout[(size_t)n * C + c];
    }
}

// One warp per row: res = a + b when a is given (the fused residual), then the LayerNorm of res into
// out (G) with its mean and rstd; two passes over the row as the cpu GPT (the variance of x - mean).
template <typename G>
__global__ static void k_residual_layernorm(float *res, const float *a, const float *b, G *out, float *mean,
                                            float *rstd, const float *w, const float *bias, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    float *x;
    float sum = 0.0f, var = 0.0f, mu, rs;

    if (row >= N)
        return;
    x = res + (size_t)row * C;
    for (int i = lane; i < C; i += WARP) {
        float v = a ? a[(size_t)row * C + i] + b[(size_t)row * C + i] : x[i];

        if (a)
            x[i] = v; // read back below by the same lane only
        sum += v;
    }
    mu = warp_sum(sum) / C;
    for (int i = lane; i < C; i += WARP) {
        float dv = x[i] - mu;
        var += dv * dv;
    }
    rs = 1.0f / sqrtf(warp_sum(var) / C + LN_EPS);
    for (int i = lane; i < C; i += WARP)
        st(out, (size_t)row * C + i, (x[i] - mu) * rs * w[i] + bias[i]);
    if (lane == 0) {
        mean[row] = mu;
        rstd[row] = rs;
    }
}

// One warp per row: dx += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = w * dout.
__global__ static void k_layernorm_backward_dx(float *dx, const float *dout, const float *x, const float *w,
                                               const float *mean, const float *rstd, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const float *d, *xr;
    float mu, rs, dmean = 0.0f, dnm = 0.0f;

    if (row >= N)
        return;
    d = dout + (size_t)row * C;
    xr = x + (size_t)row * C;
    mu = mean[row];
    rs = rstd[row];
    for (int i = lane; i < C; i += WARP) {
        float dn = w[i] * d[i];
        dmean += dn;
        dnm += dn * (xr[i] - mu) * rs;
    }
    dmean = warp_sum(dmean) / C;
    dnm = warp_sum(dnm) / C;
    for (int i = lane; i < C; i += WARP) {
        float norm = (xr[i] - mu) * rs;
        dx[(size_t)row * C + i] += (w[i] * d[i] - dmean - norm * dnm) * rs;
    }
}

// Column sums in two stages, each in a fixed order (deterministic, no atomics): block (x, chunk)
// sums COL_CHUNK rows of its columns; with x (a LayerNorm's input) also sum(norm * dout) for dw.
__global__ static void k_col_partials(const float *dout, const float *x, const float *mean, const float *rstd, int N,
                                      int OC, float *part)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y, n1;
    float db = 0.0f, dw = 0.0f;

    if (c >= OC)
        return;
    n1 = min(N, (chunk + 1) * COL_CHUNK);
    for (int n = chunk * COL_CHUNK; n < n1; n++) {
        float g = dout[(size_t)n * OC + c];

        db += g;
        if (x)
            dw += (x[(size_t)n * OC + c] - mean[n]) * rstd[n] * g;
    }
    part[(size_t)chunk * OC + c] = db;
    if (x)
        part[((size_t)gridDim.y + chunk) * OC + c] = dw;
}

__global__ static void k_col_finish(const float *part, int chunks, int OC, float *db, float *dw)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;

    if (c >= OC)
        return;
    for (int k = 0; k < chunks; k++)
        s += part[(size_t)k * OC + c];
    db[c] = s;
    if (!dw)
        return;
    s = 0.0f;
    for (int k = 0; k < chunks; k++)
        s += part[((size_t)chunks + k) * OC + c];
    dw[c] = s;
}

__device__ static inline float gelu(float v)
{
    return 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_C * v * v * v)));
}

__device__ static inline float gelu_grad(float v)
{
    float th = tanhf(GELU_K * (v + GELU_C * v * v * v));

    return 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_C * v * v);
}

// Where cuBLASLt has no epilogue: out[n, :] += b; with aux, aux = out + b (pre-GELU) and
// out = gelu(aux) (out is then the GEMM's result in aux itself).
__global__ static void k_bias_gelu(float *out, float *aux, const float *b, int N, int OC)
{
    GRID_STRIDE(i, (size_t)N * OC) {
        if (aux) {
            float v = aux[i] + b[i % OC];

            aux[i] = v;
            out[i] = gelu(v);
        } else {
            out[i] += b[i % OC];
        }
    }
}

// bf16-mixed, where cuBLASLt offers no GELU epilogue with a bf16 output (or without epilogues): from
// the GEMM's fp32 result x, aux = x + b and out = gelu(x + b), each rounded once to G, as the
// epilogue writes them.
template <typename G>
__global__ static void k_bias_gelu_g(const float *x, G *out, G *aux, const float *b, int N, int OC)
{
    GRID_STRIDE(i, (size_t)N * OC) {
        float v = x[i] + b[i % OC];

        st(aux, i, v);
        st(out, i, gelu(v));
    }
}

// d *= gelu'(pre): the DGELU epilogue's work where it is not used (pre in G: bf16-mixed keeps the
// pre-GELU values in bf16, and cuBLASLt's aux takes D's type, fp32 for a gradient).
template <typename G>
__global__ static void k_gelu_backward(float *d, const G *pre, size_t n)
{
    GRID_STRIDE(i, n) d[i] *= gelu_grad(ld(pre, i));
}

// --- attention, the simple path: per-head copies, batched GEMMs, a softmax kernel ---

// qkv [B,T,3C] (G) into q, k, v [B,NH,T,HS] each.
template <typename G>
__global__ static void k_permute_qkv(const G *qkv, G *q, G *k, G *v, int B, int T, int NH, int HS)
{
    int C = NH * HS;

    GRID_STRIDE(i, (size_t)B * T * C) {
        size_t dd = i % HS, t = (i / HS) % T, h = (i / HS / T) % NH, b = i / HS / T / NH;
        size_t src = (b * T + t) * 3 * C + h * HS + dd;

        q[i] = qkv[src];
        k[i] = qkv[src + C];
        v[i] = qkv[src + 2 * C];
    }
}

// [B,NH,T,HS] (fp32) into [B,T,C] (G); and the reverse for dy.
template <typename G>
__global__ static void k_unpermute(const float *in, G *out, int B, int T, int NH, int HS)
{
    GRID_STRIDE(i, (size_t)B * T * NH * HS) {
        size_t dd = i % HS, t = (i / HS) % T, h = (i / HS / T) % NH, b = i / HS / T / NH;

        st(out, (b * T + t) * NH * HS + h * HS + dd, in[i]);
    }
}

template <typename G>
__global__ static void k_permute(const float *in, G *out, int B, int T, int NH, int HS)
{
    GRID_STRIDE(i, (size_t)B * T * NH * HS) {
        size_t dd = i % HS, t = (i / HS) % T, h = (i / HS / T) % NH, b = i / HS / T / NH;

        st(out, i, in[(b * T + t) * NH * HS + h * HS + dd]);
    }
}

// dq, dk, dv [B,NH,T,HS] each into dqkv [B,T,3C].
__global__ static void k_unpermute_dqkv(const float *dq, float *dqkv, int B, int T, int NH, int HS)
{
    size_t n = (size_t)B * T * NH * HS;
    int C = NH * HS;

    GRID_STRIDE(i, n) {
        size_t dd = i % HS, t = (i / HS) % T, h = (i / HS / T) % NH, b = i / HS / T / NH;
        size_t dst = (b * T + t) * 3 * C + h * HS + dd;

        dqkv[dst] = dq[i];
        dqkv[dst + C] = dq[n + i];
        dqkv[dst + 2 * C] = dq[2 * n + i];
    }
}

// One warp per row t of a head's scaled scores: the causal softmax (zeros above the diagonal) in
// place, or (pg given: bf16-mixed) into pg only, the probabilities kept for the ·V GEMM and backward
// in bf16 and the fp32 scores a scratch shared by the layers.
template <typename G>
__global__ static void k_causal_softmax(float *att, G *pg, int rows, int T)
{
    int r = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP, t;
    float *x, mx = -INFINITY, sum = 0.0f, inv;

    if (r >= rows)
        return;
    t = r % T;
    x = att + (size_t)r * T;
    for (int j = lane; j <= t; j += WARP)
        mx = fmaxf(mx, x[j]);
    mx = warp_max(mx);
    for (int j = lane; j <= t; j += WARP) {
        float e = expf(x[j] - mx);
        x[j] = e;
        sum += e;
    }
    inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < T; j += WARP) {
        float p = j <= t ? x[j] * inv : 0.0f;

        if (pg)
            st(pg, (size_t)r * T + j, p);
        else
            x[j] = p;
    }
}

// Through the softmax: d = p * (d - sum(p * d)) per row, on the kept probabilities (G: bf16 under
// bf16-mixed, the math in fp32); G copy in dg.
template <typename G>
__global__ static void k_causal_softmax_backward(float *datt, const G *att, G *dg, int rows, int T)
{
    int r = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP, t;
    float *d, dot = 0.0f;
    const G *p;

    if (r >= rows)
        return;
    t = r % T;
    d = datt + (size_t)r * T;
    p = att + (size_t)r * T;
    for (int j = lane; j <= t; j += WARP)
        dot += ld(p, j) * d[j];
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += WARP) {
        float v = j <= t ? ld(p, j) * (d[j] - dot) : 0.0f;

        d[j] = v;
        if (dg)
            st(dg, (size_t)r * T + j, v);
    }
}

// --- attention, the fused flash-style path ---
// One warp per query row (forward, dq) or key row (dk, dv), FLASH_WARPS rows per block, grid.y the
// (sequence, head) pairs. A lane scores one key (or query) of a chunk of 32; each lane owns the
// output channels lane, lane+32, ... (HS <= 128: 4 registers). Reads q, k, v straight from qkv
// [B,T,3C]; the probabilities are never stored: backward recomputes them from each row's
// log-sum-exp. dq and dk, dv come from two kernels, so no two threads add into one value.

#define FLASH_REGS (FLASH_MAX_HS / WARP)

// head h of sequence b: row t's q (part 0), k (1) or v (2)
template <typename G>
__device__ static inline const G *head_row(const G *qkv, int b, int t, int h, int part, int T, int C, int HS)
{
    return qkv + ((size_t)b * T + t) * 3 * C + (size_t)part * C + (size_t)h * HS;
}

// acc += sum over the warp's nk rows j0 + jj of part (q 0, k 1, v 2) of head h, each weighted by
// lane jj's w (broadcast from it): this lane's channels lane, lane+32, ... of the weighted sum, in
// row order. The forward's o += p v and the backward's dq += ds k.
template <typename G>
__device__ static inline void add_weighted_rows(float (&acc)[FLASH_REGS], float w, int nk, const G *qkv, int b,
                                                int j0, int h, int part, int T, int C, int HS)
{
    int lane = threadIdx.x % WARP;

    for (int jj = 0; jj < nk; jj++) {
        float wj = __shfl_sync(FULL_MASK, w, jj);
        const G *row = head_row(qkv, b, j0 + jj, h, part, T, C, HS);

#pragma unroll
        for (int r = 0; r < FLASH_REGS; r++)
            if (lane + r * WARP < HS)
                acc[r] += wj * ld(row, lane + r * WARP);
    }
}

template <typename G>
__device__ static inline float dot_row(const float *s, const G *r, int HS)
{
    float acc = 0.0f;

    for (int i = 0; i < HS; i++)
        acc += s[i] * ld(r, i);
    return acc;
}

template <typename G>
__global__ static void k_flash_forward(const G *qkv, G *y, float *lse, int T, int NH, int HS, float scale)
{
    __shared__ float qs[FLASH_WARPS][FLASH_MAX_HS];
    int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, b = blockIdx.y / NH, h = blockIdx.y % NH;
    int t = blockIdx.x * FLASH_WARPS + warp, C = NH * HS;
    float o[FLASH_REGS], m = -INFINITY, l = 0.0f;

    if (t >= T)
        return;
    for (int i = lane; i < HS; i += WARP)
        qs[warp][i] = ld(head_row(qkv, b, t, h, 0, T, C, HS), i);
    __syncwarp();
#pragma unroll
    for (int r = 0; r < FLASH_REGS; r++)
        o[r] = 0.0f;
    for (int j0 = 0; j0 <= t; j0 += WARP) {
        int j = j0 + lane, nk = min(WARP, t - j0 + 1);
        float s = j <= t ? scale * dot_row(qs[warp], head_row(qkv, b, j, h, 1, T, C, HS), HS) : -INFINITY;
        float mn = fmaxf(m, warp_max(s)), p = j <= t ? expf(s - mn) : 0.0f, corr = expf(m - mn);

        l = l * corr + warp_sum(p);
#pragma unroll
        for (int r = 0; r < FLASH_REGS; r++)
            o[r] *= corr;
        add_weighted_rows(o, p, nk, qkv, b, j0, h, 2, T, C, HS);
        m = mn;
    }
#pragma unroll
    for (int r = 0; r < FLASH_REGS; r++)
        if (lane + r * WARP < HS)
            st(y, ((size_t)b * T + t) * C + (size_t)h * HS + lane + r * WARP, o[r] / l);
    if (lane == 0)
        lse[(size_t)blockIdx.y * T + t] = m + logf(l);
}

// delta[b,h,t] = sum over the head's channels of dy * y (backward's row term).
template <typename G>
__global__ static void k_flash_delta(const float *dy, const G *y, float *delta, int T, int NH, int HS)
{
    int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, b = blockIdx.y / NH, h = blockIdx.y % NH;
    int t = blockIdx.x * FLASH_WARPS + warp, C = NH * HS;
    size_t row = ((size_t)b * T + t) * C + (size_t)h * HS;
    float s = 0.0f;

    if (t >= T)
        return;
    for (int i = lane; i < HS; i += WARP)
        s += dy[row + i] * ld(y, row + i);
    s = warp_sum(s);
    if (lane == 0)
        delta[(size_t)blockIdx.y * T + t] = s;
}

// dq for query row t: sum over keys j <= t of ds_tj k_j, ds = p (dy_t . v_j - delta_t), times scale.
template <typename G>
__global__ static void k_flash_backward_dq(const G *qkv, const float *dy, const float *lse, const float *delta,
                                           float *dqkv, int T, int NH, int HS, float scale)
{
    __shared__ float qs[FLASH_WARPS][FLASH_MAX_HS], dys[FLASH_WARPS][FLASH_MAX_HS];
    int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, b = blockIdx.y / NH, h = blockIdx.y % NH;
    int t = blockIdx.x * FLASH_WARPS + warp, C = NH * HS;
    float dq[FLASH_REGS], lt, dt;

    if (t >= T)
        return;
    for (int i = lane; i < HS; i += WARP) {
        qs[warp][i] = ld(head_row(qkv, b, t, h, 0, T, C, HS), i);
        dys[warp][i] = dy[((size_t)b * T + t) * C + (size_t)h * HS + i];
    }
    __syncwarp();
    lt = lse[(size_t)blockIdx.y * T + t];
    dt = delta[(size_t)blockIdx.y * T + t];
#pragma unroll
    for (int r = 0; r < FLASH_REGS; r++)
        dq[r] = 0.0f;
    for (int j0 = 0; j0 <= t; j0 += WARP) {
        int j = j0 + lane, nk = min(WARP, t - j0 + 1);
        float ds = 0.0f;

        if (j <= t) {
            float p = expf(scale * dot_row(qs[warp], head_row(qkv, b, j, h, 1, T, C, HS), HS) - lt);

            ds = p * (dot_row(dys[warp], head_row(qkv, b, j, h, 2, T, C, HS), HS) - dt);
        }
        add_weighted_rows(dq, ds, nk, qkv, b, j0, h, 1, T, C, HS);
    }
#pragma unroll
    for (int r = 0; r < FLASH_REGS; r++)
        if (lane + r * WARP < HS)
            dqkv[((size_t)b * T + t) * 3 * C + (size_t)h * HS + lane + r * WARP] = dq[r] * scale;
}

// dk, dv for key row j: sums over queries i >= j of ds_ij q_i (times scale) and p_ij dy_i.
template <typename G>
__global__ static void k_flash_backward_dkdv(const G *qkv, const float *dy, const float *lse, const float *delta,
                                             float *dqkv, int T, int NH, int HS, float scale)
{
    __shared__ float ks[FLASH_WARPS][FLASH_MAX_HS], vs[FLASH_WARPS][FLASH_MAX_HS];
    int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, b = blockIdx.y / NH, h = blockIdx.y % NH;
    int j = blockIdx.x * FLASH_WARPS + warp, C = NH * HS;
    float dk[FLASH_REGS], dv[FLASH_REGS];

    if (j >= T)
        return;
    for (int i = lane; i < HS; i += WARP) {
        ks[warp][i] = ld(head_row(qkv, b, j, h, 1, T, C, HS), i);
        vs[warp][i] = ld(head_row(qkv, b, j, h, 2, T, C, HS), i);
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < FLASH_REGS; r++)
        dk[r] = dv[r] = 0.0f;
    for (int i0 = j; i0 < T; i0 += WARP) {
        int i = i0 + lane, nq = min(WARP, T - i0);
        float p = 0.0f, ds = 0.0f;

        if (i < T) {
            const float *dyi = dy + ((size_t)b * T + i) * C + (size_t)h * HS;
            float dp = 0.0f;

            p = expf(scale * dot_row(ks[warp], head_row(qkv, b, i, h, 0, T, C, HS), HS) -
                     lse[(size_t)blockIdx.y * T + i]);
            for (int c = 0; c < HS; c++)
                dp += dyi[c] * vs[warp][c];
            ds = p * (dp - delta[(size_t)blockIdx.y * T + i]);
        }
        for (int ii = 0; ii < nq; ii++) {
            float pi = __shfl_sync(FULL_MASK, p, ii), dsi = __shfl_sync(FULL_MASK, ds, ii);
            const G *q = head_row(qkv, b, i0 + ii, h, 0, T, C, HS);
            const float *dyi = dy + ((size_t)b * T + i0 + ii) * C + (size_t)h * HS;

#pragma unroll
            for (int r = 0; r < FLASH_REGS; r++)
                if (lane + r * WARP < HS) {
                    dk[r] += dsi * ld(q, lane + r * WARP);
                    dv[r] += pi * dyi[lane + r * WARP];
                }
        }
    }
#pragma unroll
    for (int r = 0; r < FLASH_REGS; r++)
        if (lane + r * WARP < HS) {
            size_t o = ((size_t)b * T + j) * 3 * C + (size_t)h * HS + lane + r * WARP;

            dqkv[o + C] = dk[r] * scale;
            dqkv[o + 2 * C] = dv[r];
        }
}

// --- the fused classifier ---
// One block per row of logits (L: fp32 under 32-true, bf16 under bf16-mixed, as the LM head's GEMM
// wrote them; the math in fp32 either way, as llm.c's fused_classifier): the row's max and sum of
// exponentials in one online pass, the loss -log p[target] = log(sum) - (logit - max), then
// (softmax - onehot) written over the logits in L, what the LM head's backward GEMMs read. The
// probabilities are never stored; backward scales by 1/tokens in the GEMMs' alpha. Its host
// reference: ct_gpt_cuda_classifier_ref (gpt_cuda_host.c).
__device__ static inline void online_merge(float *m, float *s, float m2, float s2)
{
    float mx = fmaxf(*m, m2);

    if (mx == -INFINITY)
        return;
    *s = *s * expf(*m - mx) + s2 * expf(m2 - mx);
    *m = mx;
}

// A target outside [0, V) (the host refuses them first: ct_gpt_cuda_check_tokens) is never read as an
// index: its row's loss is NaN, which the summed loss shows, and its gradient has no one-hot.
template <typename L>
__global__ static void k_classifier(L *logits, const int32_t *targets, float *losses, int V, int stride)
{
    __shared__ float sm[32], ss[32];
    int row = blockIdx.x, lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    int tg = targets[row], valid = tg >= 0 && tg < V;
    L *x = logits + (size_t)row * stride;
    float m = -INFINITY, s = 0.0f, inv;

    for (int j = threadIdx.x; j < V; j += blockDim.x)
        online_merge(&m, &s, ld(x, j), 1.0f);
    for (int o = WARP / 2; o > 0; o /= 2) {
        float m2 = __shfl_xor_sync(FULL_MASK, m, o), s2 = __shfl_xor_sync(FULL_MASK, s, o);

        online_merge(&m, &s, m2, s2);
    }
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    m = -INFINITY;
    s = 0.0f;
    for (int w = 0; w < nw; w++)
        online_merge(&m, &s, sm[w], ss[w]);
    if (threadIdx.x == 0)
        losses[row] = valid ? logf(s) - (ld(x, tg) - m) : NAN;
    __syncthreads(); // x[tg] is read before it is overwritten
    inv = 1.0f / s;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        st(x, j, expf(ld(x, j) - m) * inv - (j == tg ? 1.0f : 0.0f));
}

// The summed loss in one block, in double, in a fixed order (the same bits every run): the training
// loop reads this one number, not the [BT] losses. Its finiteness is the step's finite flag (a
// row's loss is never -inf, so a NaN or +inf row leaves the sum non-finite).
#define LOSS_THREADS 256
__global__ static void k_loss_sum(const float *losses, int n, double *out)
{
    __shared__ double sh[LOSS_THREADS];
    double s = 0.0;

    for (int i = threadIdx.x; i < n; i += LOSS_THREADS)
        s += losses[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = LOSS_THREADS / 2; w > 0; w /= 2) {
        if (threadIdx.x < w)
            sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *out = sh[0];
}

// --- the update, the norm ---

// Where the update writes its parameters' bf16 copy (bf16-mixed; pg NULL under 32-true): wte's
// elements into the LM head's padded copy, the others into the parameters' copy
// (ct_gpt_cuda_param_in_wte), so the forward reads them with no conversion pass of its own.
struct param_copy {
    bf16 *pg, *wg;
    size_t w0, n_wte;
};

__device__ static inline void put_copy(const struct param_copy &c, size_t i, float p)
{
    if (!c.pg)
        return;
    if (ct_gpt_cuda_param_in_wte(i, c.w0, c.n_wte))
        c.wg[i - c.w0] = __float2bfloat16_rn(p);
    else
        c.pg[i] = __float2bfloat16_rn(p);
}

// torch.optim.AdamW (engine/nn/cuda_optim.cuh); the bf16 copy of each updated parameter in the same pass.
__global__ static void k_adamw(float *p, const float *g, float *m, float *v, size_t n, float b1, float b2, float eps,
                               float decay, float step_size, float inv_sqrt_bc2, struct param_copy c)
{
    GRID_STRIDE(i, n) {
        float pi = ct_cuda_adamw_update(p[i], g[i], m[i], v[i], b1, b2, eps, decay, step_size, inv_sqrt_bc2);

        p[i] = pi;
        put_copy(c, i, pi);
    }
}

// torch.optim.SGD (engine/nn/cuda_optim.cuh); the bf16 copy as AdamW's.
__global__ static void k_sgd(float *p, const float *g, float *buf, size_t n, float lr, float wd, float mu,
                             struct param_copy c)
{
    GRID_STRIDE(i, n) {
        float pi = ct_cuda_sgd_update(p[i], g[i], buf[i], lr, wd, mu);

        p[i] = pi;
        put_copy(c, i, pi);
    }
}

// Stage 1 of the squared norm: NORM_BLOCKS blocks, each its grid-stride share into part[block].
__global__ static void k_sumsq_partials(const float *g, size_t n, float *part)
{
    __shared__ float sh[32];
    float s = 0.0f;

    GRID_STRIDE(i, n) s += g[i] * g[i];
    s = warp_sum(s);
    if (threadIdx.x % WARP == 0)
        sh[threadIdx.x / WARP] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        s = 0.0f;
        for (unsigned w = 0; w < blockDim.x / WARP; w++)
            s += sh[w];
        part[blockIdx.x] = s;
    }
}

// Stage 2: the partials in block order, in double.
__global__ static void k_sumsq_finish(const float *part, int n, double *out)
{
    double s = 0.0;

    for (int i = 0; i < n; i++)
        s += part[i];
    *out = s;
}

// torch.nn.utils.clip_grad_norm_: g *= min(1, max_norm / (norm + 1e-6)), the norm read on the device.
__global__ static void k_clip(float *g, size_t n, const double *norm_sq, float max_norm)
{
    float coef = max_norm / ((float)sqrt(*norm_sq) + 1e-6f);

    if (coef >= 1.0f)
        return;
    GRID_STRIDE(i, n) g[i] *= coef;
}

// --- errors ---------------------------------------------------------------------------------

static int cuda_fail(cudaError_t e, const char *what, ct_error *err)
{
    ct_error_set(err, CT_EIO, "cuda", "cuda gpt: %s failed: %s", what, cudaGetErrorString(e));
    return ct_error_hint(err, "check the GPU with nvidia-smi; CUDA_LAUNCH_BLOCKING=1 shows the failing kernel");
}

static int blas_fail(cublasStatus_t s, const char *what, ct_error *err)
{
    ct_error_set(err, CT_EIO, "cuda", "cuda gpt: cublas %s failed: %s", what, cublasGetStatusString(s));
    return ct_error_hint(err, "check the GPU with nvidia-smi and the cuBLAS library version");
}

// A launch's configuration error shows at once; execution errors at the next synchronisation.
static int launched(const char *what, ct_error *err)
{
    cudaError_t e = cudaGetLastError();

    return e == cudaSuccess ? 0 : cuda_fail(e, what, err);
}

static unsigned blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;

    return (unsigned)(b < 65535u * 32u ? (b ? b : 1) : 65535u * 32u);
}

// A kernel templated on the GEMM type, launched with G the model's.
#define LAUNCH_G(d, kern, grid, block, ...)                                                                        \
    do {                                                                                                         \
        if ((d)->bf16) {                                                                                         \
            typedef bf16 G;                                                                                      \
            kern<G><<<(grid), (block), 0, (d)->stream>>>(__VA_ARGS__);                                            \
        } else {                                                                                                 \
            typedef float G;                                                                                     \
            kern<G><<<(grid), (block), 0, (d)->stream>>>(__VA_ARGS__);                                            \
        }                                                                                                        \
    } while (0)

// --- GEMMs --------------------------------------------------------------------------------

// One GEMM: D[m,n] = alpha op(A) op(B) and an epilogue: bias (length m) added, GELU with the pre-GELU
// values in aux, or dGELU with aux read. D is fp32 (dtype CUDA_R_32F), or bf16 (CUDA_R_16BF: a kept
// activation written straight from the fp32 accumulator, the bias added before its one rounding).
struct gemm_args {
    int ta, tb, m, n, k;
    float alpha;
    const void *a;
    int lda;
    const void *b;
    int ldb;
    void *d;
    int ldd;
    cublasLtEpilogue_t epi;
    const float *bias;
    void *aux;
    cudaDataType_t dtype;
};

static void plan_free(struct lt_plan *p)
{
    if (p->lc)
        cublasLtMatrixLayoutDestroy(p->lc);
    if (p->lb)
        cublasLtMatrixLayoutDestroy(p->lb);
    if (p->la)
        cublasLtMatrixLayoutDestroy(p->la);
    if (p->op)
        cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof(*p));
}

// The descriptors of key k and the heuristic's algorithm for them, told the pointers' real alignment
// (it assumes 256 bytes otherwise and may pick an algorithm the pointers cannot take): A's, B's and D's
// as preferences, the bias's and aux's by g's pointers themselves, which it reads for theirs.
static int plan_build(ct_gpt_cuda *d, const ct_gpt_cuda_gemm_key *k, const struct gemm_args *g, struct lt_plan *p,
                      const char *what, ct_error *err)
{
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t h;
    cublasOperation_t opa = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = (cublasLtEpilogue_t)k->epilogue;
    size_t ws = LT_WORKSPACE;
    int64_t ld_aux = k->ld_aux;
    uint32_t align_a = k->align_a, align_b = k->align_b, align_d = k->align_d;
    int found = 0;
    cublasStatus_t s;

    memset(&h, 0, sizeof(h));
    if ((s = cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS ||
        (s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa))) ||
        (s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb))) ||
        (s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi))) ||
        (ld_aux && (s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux,
                                                       sizeof(ld_aux)))) ||
        (g->bias && (s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias,
                                                        sizeof(g->bias)))) ||
        (g->aux && (s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux,
                                                       sizeof(g->aux)))) ||
        (s = cublasLtMatrixLayoutCreate(&p->la, (cudaDataType_t)k->a_type, k->ta ? k->k : k->m, k->ta ? k->m : k->k,
                                        k->lda)) ||
        (s = cublasLtMatrixLayoutCreate(&p->lb, (cudaDataType_t)k->b_type, k->tb ? k->n : k->k, k->tb ? k->k : k->n,
                                        k->ldb)) ||
        (s = cublasLtMatrixLayoutCreate(&p->lc, (cudaDataType_t)k->d_type, k->m, k->n, k->ldd)) ||
        (s = cublasLtMatmulPreferenceCreate(&pref)) ||
        (s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws))) ||
        (s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                  sizeof(align_a))) ||
        (s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                  sizeof(align_b))) ||
        (s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
                                                  sizeof(align_d))) ||
        (s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                                                  sizeof(align_d)))) {
        if (pref)
            cublasLtMatmulPreferenceDestroy(pref);
        return blas_fail(s, what, err);
    }
    s = cublasLtMatmulAlgoGetHeuristic(d->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &h, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
        p->no_algo = 1;
        p->status = s != CUBLAS_STATUS_SUCCESS ? s : CUBLAS_STATUS_NOT_SUPPORTED;
        return 0;
    }
    p->algo = h.algo;
    return 0;
}

// D[m,n] (column-major, fp32) = alpha op(A) op(B) with A, B of the GEMM type, fp32 accumulation, and
// g's epilogue, through the plan cached for its key (built here the first time; for this call alone
// when the cache is full). *no_algo (when given) is set instead of failing where cuBLASLt has no
// algorithm for the epilogue; the caller then runs it as a kernel.
static int lt_gemm(ct_gpt_cuda *d, const struct gemm_args *g, int *no_algo, const char *what, ct_error *err)
{
    ct_gpt_cuda_gemm_shape shape = { g->ta, g->tb, g->m, g->n, g->k, g->lda, g->ldb, g->ldd, g->aux ? g->m : 0,
                                     (int)d->gtype, (int)d->gtype, (int)g->dtype, (int)g->epi, g->a, g->b, g->d,
                                     g->bias, g->aux };
    ct_gpt_cuda_gemm_key key;
    struct lt_plan once, *p = &once;
    const float beta = 0.0f;
    int slot, fresh = 1, rc = 0;
    cublasStatus_t s;

    memset(&once, 0, sizeof(once));
    ct_gpt_cuda_gemm_key_set(&key, &shape);
    if ((slot = ct_gpt_cuda_gemm_cache_slot(&d->gemm_cache, &key, &fresh)) >= 0)
        p = &d->plans[slot];
    if (fresh && (rc = plan_build(d, &key, g, p, what, err))) {
        plan_free(p);
        if (slot >= 0)
            ct_gpt_cuda_gemm_cache_drop(&d->gemm_cache, slot);
        return rc;
    }
    if (p->no_algo) {
        if (no_algo && g->epi != CUBLASLT_EPILOGUE_DEFAULT)
            *no_algo = 1;
        else
            rc = blas_fail(p->status, what, err);
        goto out;
    }
    // The pointers are the call's (the cached descriptor keeps the last call's until set again; their
    // alignment is the key's).
    if ((g->bias && (s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias,
                                                        sizeof(g->bias))) != CUBLAS_STATUS_SUCCESS) ||
        (g->aux && (s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux,
                                                       sizeof(g->aux))) != CUBLAS_STATUS_SUCCESS) ||
        (s = cublasLtMatmul(d->lt, p->op, &g->alpha, g->a, p->la, g->b, p->lb, &beta, g->d, p->lc, g->d, p->lc,
                            &p->algo, d->ws, LT_WORKSPACE, d->stream)) != CUBLAS_STATUS_SUCCESS)
        rc = blas_fail(s, what, err);
out:
    if (slot < 0)
        plan_free(&once);
    return rc;
}

// The GEMM with its epilogue, or (none offered, or no_epilogues) the plain GEMM and the kernel.
static int gemm_epilogue(ct_gpt_cuda *d, const struct gemm_args *g, const char *what, ct_error *err)
{
    const unsigned TH = 256;
    struct gemm_args plain = *g;
    size_t n = (size_t)g->m * g->n;
    int no_algo = d->no_epilogues && g->epi != CUBLASLT_EPILOGUE_DEFAULT, rc;

    if (!no_algo && ((rc = lt_gemm(d, g, &no_algo, what, err)) || !no_algo))
        return rc;
    plain.epi = CUBLASLT_EPILOGUE_DEFAULT;
    plain.bias = NULL;
    plain.aux = NULL;
    if (g->epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
        plain.d = g->aux; // the pre-GELU values first
    if ((rc = lt_gemm(d, &plain, NULL, what, err)))
        return rc;
    if (g->epi == CUBLASLT_EPILOGUE_DGELU)
        k_gelu_backward<float><<<blocks_for(n, TH), TH, 0, d->stream>>>((float *)g->d, (const float *)g->aux, n);
    else
        k_bias_gelu<<<blocks_for(n, TH), TH, 0, d->stream>>>(
            (float *)g->d, g->epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? (float *)g->aux : NULL, g->bias, g->n, g->m);
    return launched(what, err);
}

// Attention's batched GEMMs over the (sequence, head) pairs, on cuBLAS: C[m,n] = alpha op(A) op(B).
static int batched_gemm(ct_gpt_cuda *d, int ta, int tb, int m, int n, int k, float alpha, const void *a, int lda,
                        long long sa, const void *b, int ldb, long long sb, float *c, int ldc, long long sc, int count,
                        const char *what, ct_error *err)
{
    const float beta = 0.0f;
    cublasStatus_t s = cublasGemmStridedBatchedEx(d->blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                  m, n, k, &alpha, a, d->gtype, lda, sa, b, d->gtype, ldb, sb, &beta, c,
                                                  CUDA_R_32F, ldc, sc, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);

    return s == CUBLAS_STATUS_SUCCESS ? 0 : blas_fail(s, what, err);
}

// --- layers -------------------------------------------------------------------------------

static const void *weight(const ct_gpt_cuda *d, size_t off)
{
    if (d->bf16 && off == d->lay.wte)
        return d->wte_g;
    return d->bf16 ? (const void *)((const bf16 *)d->params_g + off) : (const void *)(d->params + off);
}

static void *g_at(const ct_gpt_cuda *d, void *base, size_t i) { return (char *)base + i * d->gsz; }

// Where a GEMM whose result is kept in G writes it: the kept array itself (32-true) or fp32 scratch.
static float *gemm_out(const ct_gpt_cuda *d, void *kept, float *scratch) { return d->bf16 ? scratch : (float *)kept; }

// The kept G copy of what gemm_out wrote (bf16-mixed: rounded to nearest even).
static int keep(ct_gpt_cuda *d, const float *out, void *kept, size_t n, ct_error *err)
{
    if (!d->bf16)
        return 0;
    k_to_bf16<<<blocks_for(n, 256), 256, 0, d->stream>>>(out, (bf16 *)kept, n);
    return launched("a bf16 copy", err);
}

// What a GEMM reads for the fp32 gradient x[n]: x, or its bf16 copy.
static const void *grad_for_gemm(ct_gpt_cuda *d, const float *x, size_t n)
{
    if (!d->bf16)
        return x;
    k_to_bf16<<<blocks_for(n, 256), 256, 0, d->stream>>>(x, (bf16 *)d->grad_g, n);
    return d->grad_g;
}

// db[OC] = column sums of dout[N,OC]; with x: dw = column sums of the LayerNorm's norm * dout.
static int column_sums(ct_gpt_cuda *d, const float *dout, const float *x, const float *mean, const float *rstd, int N,
                       int OC, float *db, float *dw, ct_error *err)
{
    dim3 grid((OC + 255) / 256, (N + COL_CHUNK - 1) / COL_CHUNK);

    k_col_partials<<<grid, 256, 0, d->stream>>>(dout, x, mean, rstd, N, OC, d->partials);
    k_col_finish<<<(OC + 255) / 256, 256, 0, d->stream>>>(d->partials, (int)grid.y, OC, db, dw);
    return launched("column sums", err);
}

// res = a + b (when a is given), then out = LayerNorm(res) with weight and bias at w, b_off.
static int layernorm_forward(ct_gpt_cuda *d, float *res, const float *a, const float *b, void *out, float *mean,
                             float *rstd, size_t w, size_t b_off, int N, ct_error *err)
{
    int C = d->lay.cfg.n_embd;

    LAUNCH_G(d, k_residual_layernorm, (N + 7) / 8, 256, res, a, b, (G *)out, mean, rstd, d->params + w,
             d->params + b_off, N, C);
    return launched("layernorm forward", err);
}

// dx += the LayerNorm's input gradient; its weight and bias gradients overwritten.
static int layernorm_backward(ct_gpt_cuda *d, float *dx, size_t w, size_t b_off, const float *dout, const float *x,
                              const float *mean, const float *rstd, int N, ct_error *err)
{
    int C = d->lay.cfg.n_embd, rc;

    k_layernorm_backward_dx<<<(N + 7) / 8, 256, 0, d->stream>>>(dx, dout, x, d->params + w, mean, rstd, N, C);
    if ((rc = launched("layernorm backward", err)))
        return rc;
    return column_sums(d, dout, x, mean, rstd, N, C, d->grads + b_off, d->grads + w, err);
}

// out[BT,OC] = in[BT,IC] W[OC,IC]^T + b, one cuBLASLt GEMM with the bias epilogue; with gelu_pre
// out = gelu(that), the pre-GELU values written to gelu_pre (the GELU_AUX_BIAS epilogue).
static int linear_forward(ct_gpt_cuda *d, float *out, const void *in, size_t w, size_t b, int BT, int IC, int OC,
                          float *gelu_pre, ct_error *err)
{
    struct gemm_args g = { 1, 0, OC, BT, IC, 1.0f, weight(d, w), IC, in, IC, out, OC,
                           gelu_pre ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS, d->params + b, gelu_pre,
                           CUDA_R_32F };

    return gemm_epilogue(d, &g, "a Linear layer's forward GEMM", err);
}

// The same with no GELU into kept[BT,OC] (G), a layer's output backward's GEMMs read: under bf16-mixed the
// GEMM writes bf16 itself, the bias added to the fp32 accumulator before the one rounding, as an fp32
// output and keep()'s copy round (the algorithm, so the order of the fp32 sums, may differ), without the
// fp32 pass; where cuBLASLt offers no bf16-output algorithm with the bias epilogue, or without
// epilogues, that fp32 output in scratch and the copy. (qkv's; the MLP's first layer: mlp_fc_forward.)
static int linear_forward_kept(ct_gpt_cuda *d, void *kept, float *scratch, const void *in, size_t w, size_t b, int BT,
                               int IC, int OC, ct_error *err)
{
    float *out = gemm_out(d, kept, scratch);
    int rc;

    if (d->bf16 && !d->no_epilogues) {
        struct gemm_args g = { 1, 0, OC, BT, IC, 1.0f, weight(d, w), IC, in, IC, kept, OC, CUBLASLT_EPILOGUE_BIAS,
                               d->params + b, NULL, CUDA_R_16BF };
        int no_algo = 0;

        if ((rc = lt_gemm(d, &g, &no_algo, "a Linear layer's forward GEMM (bf16 output)", err)) || !no_algo)
            return rc;
    }
    if ((rc = linear_forward(d, out, in, w, b, BT, IC, OC, NULL, err)))
        return rc;
    return keep(d, out, kept, (size_t)BT * OC, err);
}

// From dout[BT,OC]: db = column sums, dW = dout^T in, din = dout W (times gelu'(dgelu_pre) when
// given: the DGELU epilogue). in is what forward's GEMM read.
// Under bf16-mixed the pre-GELU values are bf16 and cuBLASLt's DGELU aux would have to be of din's
// type (fp32): the plain GEMM, then k_gelu_backward reads them.
static int linear_backward(ct_gpt_cuda *d, float *din, size_t w, size_t b, const float *dout, const void *in, int BT,
                           int IC, int OC, const void *dgelu_pre, ct_error *err)
{
    const void *dq = grad_for_gemm(d, dout, (size_t)BT * OC);
    int epi = dgelu_pre && !d->bf16, rc;
    struct gemm_args gw = { 0, 1, IC, OC, BT, 1.0f, in, IC, dq, OC, d->grads + w, IC, CUBLASLT_EPILOGUE_DEFAULT, NULL,
                            NULL, CUDA_R_32F };
    struct gemm_args gx = { 0, 0, IC, BT, OC, 1.0f, weight(d, w), IC, dq, OC, din, IC,
                            epi ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT, NULL,
                            epi ? (void *)dgelu_pre : NULL, CUDA_R_32F };
    size_t n = (size_t)BT * IC;

    if ((rc = column_sums(d, dout, NULL, NULL, NULL, BT, OC, d->grads + b, NULL, err)) ||
        (rc = lt_gemm(d, &gw, NULL, "a weight-gradient GEMM", err)) ||
        (rc = gemm_epilogue(d, &gx, "an input-gradient GEMM", err)) || !dgelu_pre || epi)
        return rc;
    k_gelu_backward<bf16><<<blocks_for(n, 256), 256, 0, d->stream>>>(din, (const bf16 *)dgelu_pre, n);
    return launched("the GELU's backward", err);
}

// The MLP's first layer: G outputs a->fch_gelu = gelu(ln2 W^T + b) and its pre-GELU values a->fch. 32-true:
// the GELU_AUX_BIAS epilogue (or its kernel) in fp32. bf16-mixed: the GEMM writes both in bf16 itself (the
// epilogue's aux takes D's type), no fp32 pass and copy; where cuBLASLt offers no such algorithm, or
// without epilogues, the fp32 GEMM into scratch and k_bias_gelu_g.
static int mlp_fc_forward(ct_gpt_cuda *d, struct layer_acts *a, size_t w, size_t b, int BT, int IC, int OC,
                          ct_error *err)
{
    struct gemm_args g = { 1, 0, OC, BT, IC, 1.0f, weight(d, w), IC, a->ln2, IC, a->fch_gelu, OC,
                           CUBLASLT_EPILOGUE_GELU_AUX_BIAS, d->params + b, a->fch, CUDA_R_16BF };
    int no_algo = 0, rc;

    if (!d->bf16)
        return linear_forward(d, (float *)a->fch_gelu, a->ln2, w, b, BT, IC, OC, (float *)a->fch, err);
    if (!d->no_epilogues &&
        ((rc = lt_gemm(d, &g, &no_algo, "the MLP's GELU GEMM (bf16 output)", err)) || !no_algo))
        return rc;
    g.d = d->dfch;
    g.epi = CUBLASLT_EPILOGUE_DEFAULT;
    g.bias = NULL;
    g.aux = NULL;
    g.dtype = CUDA_R_32F;
    if ((rc = lt_gemm(d, &g, NULL, "the MLP's GELU GEMM", err)))
        return rc;
    k_bias_gelu_g<bf16><<<blocks_for((size_t)BT * OC, 256), 256, 0, d->stream>>>(
        d->dfch, (bf16 *)a->fch_gelu, (bf16 *)a->fch, d->params + b, BT, OC);
    return launched("the MLP's bias and GELU", err);
}

// atty[BT,C] (G) from qkv[BT,3C] (G): causal softmax(q k^T / sqrt(HS)) v per sequence and head.
static int attention_forward(ct_gpt_cuda *d, struct layer_acts *a, int B, ct_error *err)
{
    const ct_gpt_config *c = &d->lay.cfg;
    int T = c->seq_len, NH = c->n_head, HS = c->n_embd / NH, rc;
    float scale = 1.0f / sqrtf((float)HS);
    size_t n = (size_t)B * T * c->n_embd;
    void *q = d->qkvp, *k = g_at(d, q, n), *v = g_at(d, q, 2 * n);
    long long tt = (long long)T * T, th = (long long)T * HS;
    float *scores = d->bf16 ? d->datt : a->att; // bf16-mixed: fp32 scores in backward's scratch

    if (d->flash) {
        dim3 grid((T + FLASH_WARPS - 1) / FLASH_WARPS, B * NH);

        LAUNCH_G(d, k_flash_forward, grid, FLASH_WARPS * WARP, (const G *)a->qkv, (G *)a->atty, a->lse, T, NH, HS,
                 scale);
        return launched("flash attention forward", err);
    }
    LAUNCH_G(d, k_permute_qkv, blocks_for(n, 256), 256, (const G *)a->qkv, (G *)q, (G *)k, (G *)v, B, T, NH, HS);
    if ((rc = launched("attention's permute", err)) ||
        (rc = batched_gemm(d, 1, 0, T, T, HS, scale, k, HS, th, q, HS, th, scores, T, tt, B * NH, "q k^T", err)))
        return rc;
    LAUNCH_G(d, k_causal_softmax, (unsigned)(((size_t)B * NH * T + 7) / 8), 256, scores, (G *)a->att_g, B * NH * T,
             T);
    if ((rc = launched("causal softmax", err)) ||
        (rc = batched_gemm(d, 0, 0, HS, T, T, 1.0f, v, HS, th, d->bf16 ? a->att_g : a->att, T, tt, d->dqkvp, HS, th,
                           B * NH, "att v", err)))
        return rc;
    LAUNCH_G(d, k_unpermute, blocks_for(n, 256), 256, d->dqkvp, (G *)a->atty, B, T, NH, HS);
    return launched("attention's unpermute", err);
}

// dqkv[BT,3C] from datty[BT,C] (dbt_c).
static int attention_backward(ct_gpt_cuda *d, const struct layer_acts *a, int B, ct_error *err)
{
    const ct_gpt_config *c = &d->lay.cfg;
    int T = c->seq_len, NH = c->n_head, HS = c->n_embd / NH, rc;
    float scale = 1.0f / sqrtf((float)HS);
    size_t n = (size_t)B * T * c->n_embd;
    void *q = d->qkvp, *k = g_at(d, q, n), *v = g_at(d, q, 2 * n);
    const void *p = d->bf16 ? a->att_g : a->att, *ds = d->bf16 ? d->grad_g : d->datt;
    long long tt = (long long)T * T, th = (long long)T * HS;

    if (d->flash) {
        dim3 grid((T + FLASH_WARPS - 1) / FLASH_WARPS, B * NH);

        LAUNCH_G(d, k_flash_delta, grid, FLASH_WARPS * WARP, d->dbt_c, (const G *)a->atty, d->delta, T, NH, HS);
        LAUNCH_G(d, k_flash_backward_dq, grid, FLASH_WARPS * WARP, (const G *)a->qkv, d->dbt_c, a->lse, d->delta,
                 d->dqkv, T, NH, HS, scale);
        LAUNCH_G(d, k_flash_backward_dkdv, grid, FLASH_WARPS * WARP, (const G *)a->qkv, d->dbt_c, a->lse, d->delta,
                 d->dqkv, T, NH, HS, scale);
        return launched("flash attention backward", err);
    }
    LAUNCH_G(d, k_permute_qkv, blocks_for(n, 256), 256, (const G *)a->qkv, (G *)q, (G *)k, (G *)v, B, T, NH, HS);
    LAUNCH_G(d, k_permute, blocks_for(n, 256), 256, d->dbt_c, (G *)d->dyp, B, T, NH, HS);
    /* datt = dy v^T; dv = att^T dy */
    if ((rc = launched("attention's permutes", err)) ||
        (rc = batched_gemm(d, 1, 0, T, T, HS, 1.0f, v, HS, th, d->dyp, HS, th, d->datt, T, tt, B * NH, "dy v^T", err)) ||
        (rc = batched_gemm(d, 0, 1, HS, T, T, 1.0f, d->dyp, HS, th, p, T, tt, d->dqkvp + 2 * n, HS, th, B * NH,
                           "att^T dy", err)))
        return rc;
    LAUNCH_G(d, k_causal_softmax_backward, (unsigned)(((size_t)B * NH * T + 7) / 8), 256, d->datt, (const G *)p,
             (G *)(d->bf16 ? d->grad_g : NULL), B * NH * T, T);
    /* dq = ds k, dk = ds^T q, both times the scores' scale */
    if ((rc = launched("causal softmax backward", err)) ||
        (rc = batched_gemm(d, 0, 0, HS, T, T, scale, k, HS, th, ds, T, tt, d->dqkvp, HS, th, B * NH, "ds k", err)) ||
        (rc = batched_gemm(d, 0, 1, HS, T, T, scale, q, HS, th, ds, T, tt, d->dqkvp + n, HS, th, B * NH, "ds^T q",
                           err)))
        return rc;
    k_unpermute_dqkv<<<blocks_for(n, 256), 256, 0, d->stream>>>(d->dqkvp, d->dqkv, B, T, NH, HS);
    return launched("attention's gradient unpermute", err);
}

// Block l: attention then the MLP, each added to the residual stream; the residual add fused with
// the next LayerNorm (ln_2, then the next block's ln_1 or ln_f).
static int block_forward(ct_gpt_cuda *d, int l, int B, ct_error *err)
{
    const ct_gpt_cuda_layout *lay = &d->lay;
    int C = lay->cfg.n_embd, BT = B * lay->cfg.seq_len, last = l == lay->cfg.n_layer - 1, rc;
    struct layer_acts *a = &d->layers[l], *next = last ? NULL : &d->layers[l + 1];
    const float *x = l ? d->layers[l - 1].res3 : d->encoded;
    const size_t *w = lay->blk[l];

    if ((rc = linear_forward_kept(d, a->qkv, d->dqkv, a->ln1, w[CT_GPT_ATTN_W], w[CT_GPT_ATTN_B], BT, C, 3 * C,
                                  err)) ||
        (rc = attention_forward(d, a, B, err)) ||
        (rc = linear_forward(d, d->dbt_c, a->atty, w[CT_GPT_APROJ_W], w[CT_GPT_APROJ_B], BT, C, C, NULL, err)) ||
        (rc = layernorm_forward(d, a->res2, x, d->dbt_c, a->ln2, a->ln2_mean, a->ln2_rstd, w[CT_GPT_LN2_W],
                                w[CT_GPT_LN2_B], BT, err)) ||
        (rc = mlp_fc_forward(d, a, w[CT_GPT_FC_W], w[CT_GPT_FC_B], BT, C, 4 * C, err)) ||
        (rc = linear_forward(d, d->dbt_c, a->fch_gelu, w[CT_GPT_FPROJ_W], w[CT_GPT_FPROJ_B], BT, 4 * C, C, NULL, err)))
        return rc;
    if (last)
        return layernorm_forward(d, a->res3, a->res2, d->dbt_c, d->lnf, d->lnf_mean, d->lnf_rstd, lay->lnf_w,
                                 lay->lnf_b, BT, err);
    return layernorm_forward(d, a->res3, a->res2, d->dbt_c, next->ln1, next->ln1_mean, next->ln1_rstd,
                             lay->blk[l + 1][CT_GPT_LN1_W], lay->blk[l + 1][CT_GPT_LN1_B], BT, err);
}

// Block l's backward: dres holds the gradient of its output on entry, of its input on return; each
// tensor pair announced (stage s0 + 0..5) as soon as its gradient is enqueued.
static int block_backward(ct_gpt_cuda *d, int l, int B, ct_grad_ready_fn ready, void *ctx, ct_error *err)
{
    const ct_gpt_cuda_layout *lay = &d->lay;
    int C = lay->cfg.n_embd, BT = B * lay->cfg.seq_len, s0 = 1 + 6 * (lay->cfg.n_layer - 1 - l), rc;
    const struct layer_acts *a = &d->layers[l];
    const float *x = l ? d->layers[l - 1].res3 : d->encoded;
    const size_t *w = lay->blk[l];

    if ((rc = linear_backward(d, d->dfch, w[CT_GPT_FPROJ_W], w[CT_GPT_FPROJ_B], d->dres, a->fch_gelu, BT, 4 * C, C,
                              a->fch, err)) ||
        (rc = ct_gpt_cuda_announce(lay, s0, ready, ctx)) ||
        (rc = linear_backward(d, d->dbt_c, w[CT_GPT_FC_W], w[CT_GPT_FC_B], d->dfch, a->ln2, BT, C, 4 * C, NULL, err)) ||
        (rc = ct_gpt_cuda_announce(lay, s0 + 1, ready, ctx)) ||
        (rc = layernorm_backward(d, d->dres, w[CT_GPT_LN2_W], w[CT_GPT_LN2_B], d->dbt_c, a->res2, a->ln2_mean,
                                 a->ln2_rstd, BT, err)) ||
        (rc = ct_gpt_cuda_announce(lay, s0 + 2, ready, ctx)) ||
        (rc = linear_backward(d, d->dbt_c, w[CT_GPT_APROJ_W], w[CT_GPT_APROJ_B], d->dres, a->atty, BT, C, C, NULL,
                              err)) ||
        (rc = ct_gpt_cuda_announce(lay, s0 + 3, ready, ctx)) || (rc = attention_backward(d, a, B, err)) ||
        (rc = linear_backward(d, d->dbt_c, w[CT_GPT_ATTN_W], w[CT_GPT_ATTN_B], d->dqkv, a->ln1, BT, C, 3 * C, NULL,
                              err)) ||
        (rc = ct_gpt_cuda_announce(lay, s0 + 4, ready, ctx)) ||
        (rc = layernorm_backward(d, d->dres, w[CT_GPT_LN1_W], w[CT_GPT_LN1_B], d->dbt_c, x, a->ln1_mean, a->ln1_rstd,
                                 BT, err)))
        return rc;
    return ct_gpt_cuda_announce(lay, s0 + 5, ready, ctx);
}

// --- the step -----------------------------------------------------------------------------

// The fused classifier over rows of the logits the LM head wrote (d->losses, per row).
static int classifier(ct_gpt_cuda *d, int rows, ct_error *err)
{
    if (d->bf16)
        k_classifier<bf16><<<rows, 256, 0, d->stream>>>(d->logits_g, d->targets, d->losses, d->lay.cfg.vocab, d->vp);
    else
        k_classifier<float><<<rows, 256, 0, d->stream>>>(d->logits, d->targets, d->losses, d->lay.cfg.vocab, d->vp);
    return launched("the fused classifier", err);
}

extern "C" int ct_gpt_cuda_classifier_rows(ct_gpt_cuda *d, uint16_t *logits, const int32_t *targets, int rows,
                                           float *losses, ct_error *err)
{
    size_t bytes = sizeof(bf16) * (size_t)rows * d->vp;
    cudaError_t e;
    int rc;

    if (!d->bf16 || rows < 1 || rows > d->max_batch * d->lay.cfg.seq_len)
        return ct_error_set(err, CT_EINTERNAL, "cuda", "cuda gpt: the bf16 classifier on %d rows of a %s model", rows,
                            d->bf16 ? "bf16-mixed" : "32-true");
    d->batch = 0; // the model's logits and targets are overwritten: no backward of its last forward
    cudaMemcpyAsync(d->logits_g, logits, bytes, cudaMemcpyHostToDevice, d->stream);
    cudaMemcpyAsync(d->targets, targets, sizeof(int32_t) * rows, cudaMemcpyHostToDevice, d->stream);
    if ((rc = classifier(d, rows, err)))
        return rc;
    cudaMemcpyAsync(logits, d->logits_g, bytes, cudaMemcpyDeviceToHost, d->stream);
    cudaMemcpyAsync(losses, d->losses, sizeof(float) * rows, cudaMemcpyDeviceToHost, d->stream);
    if ((e = cudaStreamSynchronize(d->stream)) != cudaSuccess)
        return cuda_fail(e, "the classifier's rows", err);
    return 0;
}

// The forward's compute, embedding to the classifier: the part a CUDA graph may hold (fixed pointers;
// nothing in it waits for the host or records an event the host waits for).
static int forward_compute(ct_gpt_cuda *d, int batch, ct_error *err)
{
    const ct_gpt_cuda_layout *lay = &d->lay;
    int T = lay->cfg.seq_len, C = lay->cfg.n_embd, V = lay->cfg.vocab, BT = batch * T, rc;
    struct gemm_args head;

    k_embed<<<blocks_for((size_t)BT * C, 256), 256, 0, d->stream>>>(d->encoded, d->inputs, d->params + lay->wte,
                                                                    d->params + lay->wpe, BT, T, C, V);
    if ((rc = launched("embedding", err)) ||
        (rc = layernorm_forward(d, d->encoded, NULL, NULL, d->layers[0].ln1, d->layers[0].ln1_mean,
                                d->layers[0].ln1_rstd, lay->blk[0][CT_GPT_LN1_W], lay->blk[0][CT_GPT_LN1_B], BT, err)))
        return rc;
    for (int l = 0; l < lay->cfg.n_layer; l++)
        if ((rc = block_forward(d, l, batch, err)))
            return rc;
    /* logits = lnf wte^T: the LM head is the token embedding, transposed; under bf16-mixed over the
     * padded vocabulary (a multiple of 64 rows: whole tiles; the extra logits are 0 and never read) */
    head = { 1, 0, d->bf16 ? d->vp : V, BT, C, 1.0f, weight(d, lay->wte), C, d->lnf, C,
             d->bf16 ? (void *)d->logits_g : (void *)d->logits, d->vp, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL,
             d->bf16 ? CUDA_R_16BF : CUDA_R_32F };
    if ((rc = lt_gemm(d, &head, NULL, "the LM head", err)))
        return rc;
    return classifier(d, BT, err);
}

// Captures forward_compute of a full batch into d->graph_exec (ct_gpt_cuda_graph_done says how it
// went); 0 with *ok 0 when the capture or the instantiation failed (the caller runs it eagerly), an
// error code when forward_compute itself failed.
static int forward_capture(ct_gpt_cuda *d, int batch, int *ok, ct_error *err)
{
    cudaGraph_t g = NULL;
    cudaError_t e;
    int rc;

    *ok = 0;
    if (cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    rc = forward_compute(d, batch, err);
    e = cudaStreamEndCapture(d->stream, &g);
    if (rc || e != cudaSuccess || !g || cudaGraphInstantiate(&d->graph_exec, g, 0) != cudaSuccess) {
        d->graph_exec = NULL;
        if (g)
            cudaGraphDestroy(g);
        cudaGetLastError(); // a capture error is not sticky: clear it for the eager run
        return rc;
    }
    cudaGraphDestroy(g);
    *ok = 1;
    return 0;
}

// forward_compute eagerly, captured then launched, or replayed (ct_gpt_cuda_graph_next).
static int forward_graph(ct_gpt_cuda *d, int batch, ct_error *err)
{
    cudaError_t e;
    int ok, rc;

    int step = ct_gpt_cuda_graph_next(&d->graph, batch, d->max_batch);

    if (step == CT_GPT_GRAPH_EAGER)
        return forward_compute(d, batch, err);
    if (step == CT_GPT_GRAPH_CAPTURE) {
        rc = forward_capture(d, batch, &ok, err);
        ct_gpt_cuda_graph_done(&d->graph, ok);
        if (rc || !ok)
            return rc ? rc : forward_compute(d, batch, err);
    }
    // the captured forward launched (replayed after the capture)
    if ((e = cudaGraphLaunch(d->graph_exec, d->stream)) != cudaSuccess)
        return cuda_fail(e, "launching the forward's graph", err);
    return 0;
}

extern "C" int ct_gpt_cuda_forward(ct_gpt_cuda *d, int batch, double *loss_sum, ct_error *err)
{
    const ct_gpt_cuda_layout *lay = &d->lay;
    int T = lay->cfg.seq_len, C = lay->cfg.n_embd, V = lay->cfg.vocab, BT = batch * T, rc;
    size_t maxbt = (size_t)d->max_batch * T;
    cudaError_t e;
    int slot;

    if (batch < 1 || batch > d->max_batch)
        return ct_error_set(err, CT_EINTERNAL, "cuda", "cuda gpt: a batch of %d for at most %d", batch, d->max_batch);
    d->batch = 0;
    // On the host, before the copy: the kernels index wte and the logits by the tokens.
    if ((rc = ct_gpt_cuda_check_tokens(lay, d->h_tokens, d->h_tokens + maxbt, (size_t)BT, err)))
        return rc;
    cudaMemcpyAsync(d->inputs, d->h_tokens, sizeof(int32_t) * BT, cudaMemcpyHostToDevice, d->stream);
    cudaMemcpyAsync(d->targets, d->h_tokens + maxbt, sizeof(int32_t) * BT, cudaMemcpyHostToDevice, d->stream);
    if ((e = cudaEventRecord(d->tokens_copied, d->stream)) != cudaSuccess)
        return cuda_fail(e, "recording the batch copy", err);
    // The bf16 copy of the weights: the update writes it (k_adamw, k_sgd); after the weights came
    // from the host (creation, a checkpoint) and whatever wrote them before this first forward (the
    // NCCL broadcast of rank 0's initial weights, between creation and the first step) it is made here.
    if (d->bf16 && d->copy_stale) {
        size_t w0 = lay->wte, w1 = lay->wte + (size_t)V * C;

        k_to_bf16<<<blocks_for(w0, 256), 256, 0, d->stream>>>(d->params, (bf16 *)d->params_g, w0);
        k_to_bf16<<<blocks_for((size_t)V * C, 256), 256, 0, d->stream>>>(d->params + w0, (bf16 *)d->wte_g,
                                                                         (size_t)V * C);
        k_to_bf16<<<blocks_for(lay->n_params - w1, 256), 256, 0, d->stream>>>(d->params + w1, (bf16 *)d->params_g + w1,
                                                                              lay->n_params - w1);
        if ((rc = launched("the weights' bf16 copy", err)))
            return rc;
        d->copy_stale = 0;
    }
    if ((rc = forward_graph(d, batch, err)))
        return rc;
    // The loss sum into its pinned slot behind the step's work: a deferred forward's into the ring,
    // a waited-for one's into the last slot (so an evaluation never overwrites a training step's).
    slot = loss_sum ? CT_GPT_CUDA_LOSS_RING : (int)(d->loss_seq % CT_GPT_CUDA_LOSS_RING);
    k_loss_sum<<<1, LOSS_THREADS, 0, d->stream>>>(d->losses, BT, d->loss_sum + slot);
    if ((rc = launched("the loss sum", err)))
        return rc;
    cudaMemcpyAsync(d->h_loss + slot, d->loss_sum + slot, sizeof(double), cudaMemcpyDeviceToHost, d->stream);
    if ((e = cudaEventRecord(d->loss_copied[slot], d->stream)) != cudaSuccess)
        return cuda_fail(e, "recording the loss copy", err);
    d->batch = batch;
    if (loss_sum) {
        if ((e = cudaEventSynchronize(d->loss_copied[slot])) != cudaSuccess)
            return cuda_fail(e, "forward", err);
        *loss_sum = d->h_loss[slot];
        return 0;
    }
    d->loss_seq++;
    // The caller refills the pinned tokens for the next step once this returns: wait for their copy
    // (the device is then past the previous step's update, with this forward queued behind it, so it
    // does not idle; the host runs at most a step ahead).
    if ((e = cudaEventSynchronize(d->tokens_copied)) != cudaSuccess)
        return cuda_fail(e, "copying the batch", err);
    return 0;
}

extern "C" int ct_gpt_cuda_loss_read(ct_gpt_cuda *d, int back, double *loss_sum, ct_error *err)
{
    int slot = ct_gpt_cuda_loss_slot(d->loss_seq, back);
    cudaError_t e;

    if (slot < 0)
        return ct_error_set(err, CT_EINTERNAL, "cuda", "cuda gpt: no deferred loss %d forwards back (%llu so far)",
                            back, d->loss_seq);
    if ((e = cudaEventSynchronize(d->loss_copied[slot])) != cudaSuccess)
        return cuda_fail(e, "the loss copy", err);
    *loss_sum = d->h_loss[slot];
    return 0;
}

extern "C" int ct_gpt_cuda_backward(ct_gpt_cuda *d, double scale_tokens, ct_grad_ready_fn ready, void *ctx,
                                    ct_error *err)
{
    const ct_gpt_cuda_layout *lay = &d->lay;
    int B = d->batch, T = lay->cfg.seq_len, C = lay->cfg.n_embd, V = lay->cfg.vocab, L = lay->cfg.n_layer;
    int BT = B * T, rc;
    float alpha = (float)(1.0 / scale_tokens);
    const void *dl = d->bf16 ? (const void *)d->logits_g : (const void *)d->logits;
    /* LM head: dlnf = dlogits wte, dwte = dlogits^T lnf (the embedding adds to it last); the
     * classifier left (softmax - onehot): the mean's 1/tokens is alpha */
    struct gemm_args dx = { 0, 0, C, BT, V, alpha, weight(d, lay->wte), C, dl, d->vp, d->dbt_c, C,
                            CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, CUDA_R_32F };
    struct gemm_args dw = { 0, 1, C, V, BT, alpha, d->lnf, C, dl, d->vp, d->grads + lay->wte, C,
                            CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, CUDA_R_32F };

    if (B == 0)
        return ct_error_set(err, CT_EINTERNAL, "cuda", "cuda gpt: backward without a forward");
    if ((rc = lt_gemm(d, &dx, NULL, "the LM head's input gradient", err)) ||
        (rc = lt_gemm(d, &dw, NULL, "the LM head's weight gradient", err)))
        return rc;
    cudaMemsetAsync(d->dres, 0, sizeof(float) * BT * C, d->stream);
    if ((rc = layernorm_backward(d, d->dres, lay->lnf_w, lay->lnf_b, d->dbt_c, d->layers[L - 1].res3, d->lnf_mean,
                                 d->lnf_rstd, BT, err)) ||
        (rc = ct_gpt_cuda_announce(lay, 0, ready, ctx)))
        return rc;
    for (int l = L - 1; l >= 0; l--)
        if ((rc = block_backward(d, l, B, ready, ctx, err)))
            return rc;
    k_embed_backward_wpe<<<blocks_for((size_t)T * C, 256), 256, 0, d->stream>>>(d->grads + lay->wpe, d->dres, B, T, C);
    k_embed_backward_wte<<<dim3((C + 127) / 128, WTE_RANGES), 128, 0, d->stream>>>(d->grads + lay->wte, d->dres,
                                                                                 d->inputs, BT, C, V);
    if ((rc = launched("embedding backward", err)))
        return rc;
    return ct_gpt_cuda_announce(lay, ct_gpt_cuda_stages(lay) - 1, ready, ctx);
}

static void norm_enqueue(ct_gpt_cuda *d)
{
    k_sumsq_partials<<<NORM_BLOCKS, 256, 0, d->stream>>>(d->grads, d->lay.n_params, d->norm_part);
    k_sumsq_finish<<<1, 1, 0, d->stream>>>(d->norm_part, NORM_BLOCKS, d->norm_sq);
}

extern "C" int ct_gpt_cuda_grad_norm(ct_gpt_cuda *d, double *norm, ct_error *err)
{
    cudaError_t e;

    norm_enqueue(d);
    cudaMemcpyAsync(d->h_norm, d->norm_sq, sizeof(double), cudaMemcpyDeviceToHost, d->stream);
    if ((e = cudaStreamSynchronize(d->stream)) != cudaSuccess)
        return cuda_fail(e, "the gradient norm", err);
    *norm = sqrt(*d->h_norm);
    return 0;
}

extern "C" int ct_gpt_cuda_clip_grad_norm(ct_gpt_cuda *d, double max_norm, ct_error *err)
{
    norm_enqueue(d);
    k_clip<<<blocks_for(d->lay.n_params, 256), 256, 0, d->stream>>>(d->grads, d->lay.n_params, d->norm_sq,
                                                                    (float)max_norm);
    return launched("gradient clipping", err);
}

extern "C" int ct_gpt_cuda_optim_step(ct_gpt_cuda *d, ct_optim *o, ct_error *err)
{
    const ct_optim_config *c = ct_optim_get_config(o);
    size_t n = d->lay.n_params;
    int need = c->kind == CT_OPTIM_ADAMW ? 2 : 1;

    if (d->n_states != need)
        return ct_error_set(err, CT_EINTERNAL, "cuda", "cuda gpt: made with %d optimizer states, %s keeps %d",
                            d->n_states, ct_optim_kind_name(c->kind), need);
    struct param_copy pc = { d->bf16 ? (bf16 *)d->params_g : NULL, d->bf16 ? (bf16 *)d->wte_g : NULL, d->lay.wte,
                             (size_t)d->lay.cfg.vocab * d->lay.cfg.n_embd };

    ct_optim_set_steps(o, ct_optim_steps(o) + 1);
    if (c->kind == CT_OPTIM_ADAMW) {
        double t = (double)ct_optim_steps(o);

        k_adamw<<<blocks_for(n, 256), 256, 0, d->stream>>>(
            d->params, d->grads, d->state[0], d->state[1], n, (float)c->beta1, (float)c->beta2, (float)c->eps,
            (float)(1.0 - c->lr * c->weight_decay), (float)(c->lr / (1.0 - pow(c->beta1, t))),
            (float)(1.0 / sqrt(1.0 - pow(c->beta2, t))), pc);
    } else {
        k_sgd<<<blocks_for(n, 256), 256, 0, d->stream>>>(d->params, d->grads, d->state[0], n, (float)c->lr,
                                                         (float)c->weight_decay, (float)c->momentum, pc);
    }
    return launched("the optimizer update", err);
}

// --- create / free / host copies ------------------------------------------------------------

// Every device array cut from one allocation, 256-byte aligned (cuBLASLt's preferred alignment):
// run once without a base to measure, then with it.
struct arena {
    char *base;
    size_t off;
};

static void *take(struct arena *ar, size_t bytes)
{
    size_t o = (ar->off + 255) & ~(size_t)255;

    ar->off = o + bytes;
    return ar->base ? ar->base + o : NULL;
}

static void carve(ct_gpt_cuda *d, struct arena *ar)
{
    const ct_gpt_config *c = &d->lay.cfg;
    size_t B = (size_t)d->max_batch, T = (size_t)c->seq_len, C = (size_t)c->n_embd, NH = (size_t)c->n_head;
    size_t BT = B * T, V = (size_t)d->vp, P = d->lay.n_params, g = d->gsz, att = B * NH * T * T;
    size_t widest = BT * 4 * C > att || d->flash ? BT * 4 * C : att, chunks = (BT + COL_CHUNK - 1) / COL_CHUNK;
    int simple = !d->flash;

    d->ws = take(ar, LT_WORKSPACE);
    d->params = (float *)take(ar, 4 * P);
    d->grads = (float *)take(ar, 4 * P);
    for (int s = 0; s < d->n_states; s++)
        d->state[s] = (float *)take(ar, 4 * P);
    d->params_g = d->bf16 ? take(ar, 2 * P) : NULL;
    d->wte_g = d->bf16 ? take(ar, 2 * V * C) : NULL;
    d->inputs = (int32_t *)take(ar, 4 * BT);
    d->targets = (int32_t *)take(ar, 4 * BT);
    d->encoded = (float *)take(ar, 4 * BT * C);
    for (int l = 0; l < c->n_layer; l++) {
        struct layer_acts *a = &d->layers[l];

        a->ln1 = take(ar, g * BT * C);
        a->qkv = take(ar, g * BT * 3 * C);
        a->atty = take(ar, g * BT * C);
        a->ln2 = take(ar, g * BT * C);
        a->fch_gelu = take(ar, g * BT * 4 * C);
        a->ln1_mean = (float *)take(ar, 4 * BT);
        a->ln1_rstd = (float *)take(ar, 4 * BT);
        a->ln2_mean = (float *)take(ar, 4 * BT);
        a->ln2_rstd = (float *)take(ar, 4 * BT);
        a->res2 = (float *)take(ar, 4 * BT * C);
        a->res3 = (float *)take(ar, 4 * BT * C);
        a->fch = take(ar, g * BT * 4 * C);
        a->att = simple && !d->bf16 ? (float *)take(ar, 4 * att) : NULL;
        a->att_g = simple && d->bf16 ? take(ar, 2 * att) : NULL;
        a->lse = simple ? NULL : (float *)take(ar, 4 * B * NH * T);
    }
    d->lnf = take(ar, g * BT * C);
    d->lnf_mean = (float *)take(ar, 4 * BT);
    d->lnf_rstd = (float *)take(ar, 4 * BT);
    d->logits = d->bf16 ? NULL : (float *)take(ar, 4 * BT * V);
    d->logits_g = d->bf16 ? (bf16 *)take(ar, 2 * BT * V) : NULL;
    d->losses = (float *)take(ar, 4 * BT);
    d->dres = (float *)take(ar, 4 * BT * C);
    d->dbt_c = (float *)take(ar, 4 * BT * C);
    d->dqkv = (float *)take(ar, 4 * BT * 3 * C);
    d->dfch = (float *)take(ar, 4 * BT * 4 * C);
    d->datt = simple ? (float *)take(ar, 4 * att) : NULL;
    d->qkvp = simple ? take(ar, g * 3 * BT * C) : NULL;
    d->dyp = simple ? take(ar, g * BT * C) : NULL;
    d->dqkvp = simple ? (float *)take(ar, 4 * 3 * BT * C) : NULL;
    d->delta = simple ? NULL : (float *)take(ar, 4 * B * NH * T);
    d->grad_g = d->bf16 ? take(ar, 2 * widest) : NULL;
    d->partials = (float *)take(ar, 4 * 2 * chunks * 4 * C);
    d->norm_part = (float *)take(ar, 4 * NORM_BLOCKS);
    d->norm_sq = (double *)take(ar, 8);
    d->loss_sum = (double *)take(ar, 8 * (CT_GPT_CUDA_LOSS_RING + 1));
}

// The shapes the kernels and cuBLASLt take, or why not.
static int check_shapes(ct_gpt_cuda *d, enum ct_gpt_cuda_attention att, ct_error *err)
{
    const ct_gpt_config *c = &d->lay.cfg;
    size_t BT = (size_t)d->max_batch * c->seq_len;
    int rc;

    if (c->n_embd % 8) {
        ct_error_set(err, CT_ENOTAVAIL, "model-config-value",
                     "the cuda gpt needs n_embd a multiple of 8 (16-byte aligned bf16 rows), not %d", c->n_embd);
        return ct_error_hint(err, "use n_embd=%d", (c->n_embd / 8 + 1) * 8);
    }
    if ((rc = ct_gpt_cuda_attention_choice(c, att, &att, err)))
        return rc;
    if (BT * 4 * c->n_embd > INT32_MAX || BT * d->vp > INT32_MAX || (BT + COL_CHUNK - 1) / COL_CHUNK > 65535)
        return ct_error_set(err, CT_EINVAL, "model-config-value", "cuda gpt: batch %d x seq_len %d is too large",
                            d->max_batch, c->seq_len);
    d->flash = att == CT_GPT_ATT_FLASH;
    return 0;
}

static int handles(ct_gpt_cuda *d, ct_error *err)
{
    cublasStatus_t s;
    cudaError_t e;
    struct arena ar = { NULL, 0 };

    d->stream = (cudaStream_t)ct_cuda_compute_stream();
    if ((s = cublasCreate(&d->blas)) != CUBLAS_STATUS_SUCCESS) {
        d->blas = NULL;
        return blas_fail(s, "cublasCreate", err);
    }
    cublasSetStream(d->blas, d->stream);
    if ((s = cublasLtCreate(&d->lt)) != CUBLAS_STATUS_SUCCESS) {
        d->lt = NULL;
        return blas_fail(s, "cublasLtCreate", err);
    }
    carve(d, &ar);
    d->arena_bytes = ar.off;
    if (ct_cuda_malloc((void **)&d->arena, d->arena_bytes) != 0) {
        d->arena = NULL;
        ct_error_set(err, CT_ENOMEM, "cuda", "cuda gpt: out of device memory (%zu bytes)", d->arena_bytes);
        if (!d->flash)
            return ct_error_hint(err, "use a smaller --batch-size, seq_len or n_embd (the simple attention keeps "
                                 "batch x heads x seq_len^2 probabilities per layer, %zu MiB each)",
                                 (size_t)d->max_batch * d->lay.cfg.n_head * d->lay.cfg.seq_len * d->lay.cfg.seq_len *
                                     (d->bf16 ? 2 : 4) >> 20);
        return ct_error_hint(err, "use a smaller --batch-size, seq_len or n_embd");
    }
    ar.base = d->arena;
    ar.off = 0;
    carve(d, &ar);
    // Under graphs cuBLAS's batched GEMMs (attention) must not allocate a workspace of their own inside a
    // capture: they share cuBLASLt's (one stream, so never at once).
    if (d->graph.enabled && (s = cublasSetWorkspace(d->blas, d->ws, LT_WORKSPACE)) != CUBLAS_STATUS_SUCCESS)
        return blas_fail(s, "cublasSetWorkspace", err);
    if (d->bf16 && cudaMemsetAsync((bf16 *)d->wte_g + (size_t)d->lay.cfg.vocab * d->lay.cfg.n_embd, 0,
                                   sizeof(bf16) * (size_t)(d->vp - d->lay.cfg.vocab) * d->lay.cfg.n_embd,
                                   d->stream) != cudaSuccess)
        return ct_error_set(err, CT_EIO, "cuda", "cuda gpt: clearing the padded LM head's rows failed");
    if (cudaMallocHost((void **)&d->h_tokens, 2 * sizeof(int32_t) * d->max_batch * d->lay.cfg.seq_len) != cudaSuccess ||
        cudaMallocHost((void **)&d->h_loss, sizeof(double) * (CT_GPT_CUDA_LOSS_RING + 1)) != cudaSuccess ||
        cudaMallocHost((void **)&d->h_norm, sizeof(double)) != cudaSuccess)
        return ct_error_set(err, CT_ENOMEM, "cuda", "cuda gpt: out of pinned host memory");
    for (int i = 0; i <= CT_GPT_CUDA_LOSS_RING; i++)
        if ((e = cudaEventCreateWithFlags(&d->loss_copied[i], cudaEventDisableTiming)) != cudaSuccess)
            return cuda_fail(e, "cudaEventCreate", err);
    if ((e = cudaEventCreateWithFlags(&d->tokens_copied, cudaEventDisableTiming)) != cudaSuccess)
        return cuda_fail(e, "cudaEventCreate", err);
    return 0;
}

extern "C" int ct_gpt_cuda_create(ct_gpt *host, const ct_optim *o, int max_batch, enum ct_dtype gemm_dtype,
                                  const ct_gpt_cuda_options *opt, ct_gpt_cuda **out, ct_error *err)
{
    ct_gpt_cuda *d;
    int rc;

    *out = NULL;
    if (gemm_dtype != CT_DTYPE_F32 && gemm_dtype != CT_DTYPE_BF16)
        return ct_error_set(err, CT_ENOTAVAIL, "model-precision-unsupported",
                            "the cuda gpt computes in 32-true or bf16-mixed");
    if (!(d = (ct_gpt_cuda *)calloc(1, sizeof(*d))))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory creating the cuda gpt");
    d->max_batch = max_batch;
    d->vp = ct_gpt_cuda_padded_vocab(ct_gpt_get_config(host)->vocab);
    d->bf16 = gemm_dtype == CT_DTYPE_BF16;
    d->gsz = d->bf16 ? 2 : 4;
    d->gtype = d->bf16 ? CUDA_R_16BF : CUDA_R_32F;
    d->no_epilogues = opt ? opt->no_epilogues : 0;
    d->graph.enabled = opt ? opt->graph : 0;
    d->n_states = o ? ct_optim_num_states((ct_optim *)o) : 0;
    if ((rc = ct_gpt_cuda_layout_of(host, &d->lay, err)) ||
        (rc = check_shapes(d, opt ? opt->attention : CT_GPT_ATT_AUTO, err)) || (rc = handles(d, err)) ||
        (rc = ct_gpt_cuda_from_host(d, host, o, err))) {
        ct_gpt_cuda_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

extern "C" void ct_gpt_cuda_free(ct_gpt_cuda *d)
{
    if (!d)
        return;
    if (d->stream || d->blas)
        cudaStreamSynchronize(d->stream);
    if (d->graph_exec)
        cudaGraphExecDestroy(d->graph_exec);
    for (int i = 0; i < d->gemm_cache.n; i++)
        plan_free(&d->plans[i]);
    if (d->blas)
        cublasDestroy(d->blas);
    if (d->lt)
        cublasLtDestroy(d->lt);
    ct_cuda_free(d->arena, d->arena_bytes);
    if (d->h_tokens)
        cudaFreeHost(d->h_tokens);
    if (d->h_loss)
        cudaFreeHost(d->h_loss);
    for (int i = 0; i <= CT_GPT_CUDA_LOSS_RING; i++)
        if (d->loss_copied[i])
            cudaEventDestroy(d->loss_copied[i]);
    if (d->tokens_copied)
        cudaEventDestroy(d->tokens_copied);
    if (d->h_norm)
        cudaFreeHost(d->h_norm);
    free(d);
}

extern "C" int32_t *ct_gpt_cuda_batch_inputs(ct_gpt_cuda *d) { return d->h_tokens; }
extern "C" int32_t *ct_gpt_cuda_batch_targets(ct_gpt_cuda *d)
{
    return d->h_tokens + (size_t)d->max_batch * d->lay.cfg.seq_len;
}
extern "C" float *ct_gpt_cuda_params(ct_gpt_cuda *d) { return d->params; }
extern "C" float *ct_gpt_cuda_grads(ct_gpt_cuda *d) { return d->grads; }
extern "C" const ct_gpt_cuda_layout *ct_gpt_cuda_get_layout(const ct_gpt_cuda *d) { return &d->lay; }

// Copies on the compute stream, waited for: ordered after the step that wrote the arrays and before
// the next one that reads them (a cudaMemcpy on the legacy stream is not ordered with a non-blocking
// stream, and from pageable memory it may return before its DMA is done). Checkpoints are rare.
static int copy_sync(void *ctx, int dir, void *host, void *dev, size_t bytes)
{
    cudaStream_t stream = (cudaStream_t)ctx;
    cudaError_t e = dir == CT_GPT_TO_HOST ? cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, stream)
                                          : cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream);

    return e != cudaSuccess || cudaStreamSynchronize(stream) != cudaSuccess;
}

static int sync_host(ct_gpt_cuda *d, int dir, ct_gpt *host, ct_optim *o, ct_error *err)
{
    cudaError_t e = cudaStreamSynchronize(d->stream);

    if (e != cudaSuccess)
        return cuda_fail(e, "waiting for the step", err);
    if (dir == CT_GPT_TO_DEVICE)
        d->copy_stale = 1;
    return ct_gpt_cuda_sync(&d->lay, dir, host, o, d->params, d->state, o ? d->n_states : 0, copy_sync, d->stream,
                            err);
}

extern "C" int ct_gpt_cuda_to_host(ct_gpt_cuda *d, ct_gpt *host, ct_optim *o, ct_error *err)
{
    return sync_host(d, CT_GPT_TO_HOST, host, o, err);
}

extern "C" int ct_gpt_cuda_from_host(ct_gpt_cuda *d, ct_gpt *host, const ct_optim *o, ct_error *err)
{
    return sync_host(d, CT_GPT_TO_DEVICE, host, (ct_optim *)o, err);
}
