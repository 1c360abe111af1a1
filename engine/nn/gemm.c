/* SPDX-License-Identifier: BSD-3-Clause */
/* GEMMs through oneDNN's matmul primitive; see engine/nn/gemm.h.
 *
 * A primitive is oneDNN's compiled kernel for one problem: shapes, strides (which carry the
 * transpositions and leading dimensions), input type and whether C accumulates. Making one costs
 * tens of microseconds to milliseconds (its JIT), running it a few microseconds of overhead, so
 * each problem's primitive is made on its first call and kept, with memory objects whose data
 * pointers are swapped in per call. A training step has a handful of shapes (a GPT's four Linear
 * layers times forward and the two backward products, the LM head); the cache is a list. */
#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#include "engine/nn/bf16_inline.h"
#include "engine/nn/gemm.h"
#include "engine/nn/simd.h"

struct gemm_key {
    int trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate;
    enum ct_dtype ab;
    enum ct_dtype c;    /* C's type: fp32, or bf16 (bf16-true: rounded once, after the fp32 sum) */
    struct ct_gemm_batch batch;   /* all zero: one product */
    float alpha;        /* C = alpha x the product (1: none; an eltwise post-op otherwise) */
    int solo;           /* called inside an OpenMP parallel region: made for, and run on, that one thread */
    int bias;           /* C = product + a bias row (oneDNN's bias input): 0 none, else its ct_dtype + 1 */
};

struct gemm_prim {
    struct gemm_key key;
    dnnl_primitive_t prim;   /* NULL: oneDNN made none, OpenBLAS computes this one */
    dnnl_memory_t src, wei, dst, bias;
    /* a solo primitive's own stream and lock: the team's threads each run their own product at once
     * (ct_gemm from inside a parallel region), which the global lock and stream would serialise */
    dnnl_stream_t stream;
    dnnl_memory_t scratch;   /* and scratchpad (oneDNN's own is per creating thread) */
    pthread_mutex_t lock;
    char impl[64];
    struct gemm_prim *next;
};

static pthread_mutex_t gemm_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t gemm_engine;
static dnnl_stream_t gemm_stream;
static struct gemm_prim *gemm_cache;
/* The process that ran a GEMM with an OpenMP team of more than one thread (0: none yet). libgomp
 * keeps that team's threads for later regions; a child forked without exec (the fork launcher)
 * inherits the bookkeeping but not the threads, and its first region of more than one thread would
 * wait for them forever. */
static pid_t teams_pid;

/* --- bf16 ------------------------------------------------------------------------------------- */

CT_SIMD_CLONES
static void bf16_pack_range(const float *restrict in, uint16_t *restrict out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;

        memcpy(&u, &in[i], sizeof(u));
        /* as ct_bf16_round: nearest, ties to even; a NaN keeps a mantissa bit (stays NaN) */
        if ((u & 0x7fffffffu) > 0x7f800000u)
            u |= 0x00400000u;
        else
            u += 0x7fffu + ((u >> 16) & 1u);
        out[i] = (uint16_t)(u >> 16);
    }
}

void ct_bf16_pack(const float *in, uint16_t *out, size_t n)
{
    /* on the OpenMP team, each thread a range cut at multiples of 32 (64 bytes of output) */
#pragma omp parallel if (n >= 65536)
    {
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num(), blocks = (n + 31) / 32;
        size_t lo = blocks * t / nt * 32, hi = blocks * (t + 1) / nt * 32;

        hi = hi < n ? hi : n;
        if (lo < hi)
            bf16_pack_range(in + lo, out + lo, hi - lo);
    }
}

/* --- threads ---------------------------------------------------------------------------------- */

int ct_gemm_forked_after_teams(void)
{
    return teams_pid != 0 && teams_pid != getpid();
}

void ct_gemm_set_threads(int threads)
{
    omp_set_num_threads(threads > 0 && !ct_gemm_forked_after_teams() ? threads : 1);
}

int ct_gemm_get_threads(void)
{
    return omp_get_max_threads();
}

/* --- primitives ------------------------------------------------------------------------------- */

static int gemm_key_eq(const struct gemm_key *a, const struct gemm_key *b)
{
    return a->trans_a == b->trans_a && a->trans_b == b->trans_b && a->M == b->M && a->N == b->N && a->K == b->K &&
           a->lda == b->lda && a->ldb == b->ldb && a->ldc == b->ldc && a->accumulate == b->accumulate &&
           a->ab == b->ab && a->c == b->c && !memcmp(&a->batch, &b->batch, sizeof(a->batch)) && a->alpha == b->alpha &&
           a->solo == b->solo && a->bias == b->bias;
}

/* A 2-D row-major matrix [rows, cols] with leading dimension ld, read transposed when trans. */
/* A row-major matrix [rows, cols] with leading dimension ld, read transposed when trans; with
 * n0 > 0, a [n0, n1] grid of such matrices, matrix (i, j) at element i * s0 + j * s1. */
struct md_shape {
    int rows, cols, ld, trans;
    int n0, n1;
    long s0, s1;
};

static int md_dims(const struct md_shape *sh, dnnl_dims_t dims, dnnl_dims_t strides)
{
    int nd = 0;

    if (sh->n0 > 0) {
        dims[0] = sh->n0, strides[0] = sh->s0;
        dims[1] = sh->n1, strides[1] = sh->s1;
        nd = 2;
    }
    dims[nd] = sh->rows, strides[nd] = sh->trans ? 1 : sh->ld;
    dims[nd + 1] = sh->cols, strides[nd + 1] = sh->trans ? sh->ld : 1;
    return nd + 2;
}

#if DNNL_VERSION_MAJOR >= 3
typedef dnnl_memory_desc_t gemm_md;
static int md_make(gemm_md *md, const struct md_shape *sh, dnnl_data_type_t dt)
{
    dnnl_dims_t dims, strides;
    int nd = md_dims(sh, dims, strides);

    return dnnl_memory_desc_create_with_strides(md, nd, dims, dt, strides) == dnnl_success ? 0 : -1;
}
static void md_free(gemm_md md) { dnnl_memory_desc_destroy(md); }
static const_dnnl_memory_desc_t md_ptr(const gemm_md *md) { return *md; }
#else
typedef dnnl_memory_desc_t gemm_md;
static int md_make(gemm_md *md, const struct md_shape *sh, dnnl_data_type_t dt)
{
    dnnl_dims_t dims, strides;
    int nd = md_dims(sh, dims, strides);

    return dnnl_memory_desc_init_by_strides(md, nd, dims, dt, strides) == dnnl_success ? 0 : -1;
}
static void md_free(gemm_md md) { (void)md; }
static const dnnl_memory_desc_t *md_ptr(const gemm_md *md) { return md; }
#endif

static dnnl_status_t pd_make(dnnl_primitive_desc_t *pd, const gemm_md *src, const gemm_md *wei,
                             const gemm_md *bias, const gemm_md *dst, const_dnnl_primitive_attr_t attr)
{
#if DNNL_VERSION_MAJOR >= 3
    return dnnl_matmul_primitive_desc_create(pd, gemm_engine, md_ptr(src), md_ptr(wei), bias ? md_ptr(bias) : NULL,
                                             md_ptr(dst), attr);
#else
    dnnl_matmul_desc_t d;
    dnnl_status_t st = dnnl_matmul_desc_init(&d, md_ptr(src), md_ptr(wei), bias ? md_ptr(bias) : NULL, md_ptr(dst));

    return st == dnnl_success ? dnnl_primitive_desc_create(pd, &d, attr, gemm_engine, NULL) : st;
#endif
}

/* Fill p's primitive for p->key; p->prim stays NULL when oneDNN cannot (OpenBLAS then computes). */
static void prim_make_team(struct gemm_prim *p)
{
    const struct gemm_key *k = &p->key;
    const struct ct_gemm_batch *b = &k->batch;
    dnnl_data_type_t dt = k->ab == CT_DTYPE_BF16 ? dnnl_bf16 : dnnl_f32;
    struct md_shape sa, sb, sc, sbias;
    gemm_md src, wei, dst, bia;
    int have_md = 0, have_bias = 0;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    const char *impl = NULL;

    snprintf(p->impl, sizeof(p->impl), "openblas");
#if DNNL_VERSION_MAJOR >= 3
    /* oneDNN 3.7 (Debian 13) multiplies wrong when a dimension is 1 with non-dense strides: a single
     * output column (N = 1) in every transposition, a transposed single row (a weight gradient's
     * row block, M = 1). t/unit/test_nn's test_gemm and gradient check show it; such skinny
     * products stay on OpenBLAS there. */
    if (k->M == 1 || k->N == 1 || k->K == 1)
        return;
#endif
    if (!gemm_engine && (dnnl_engine_create(&gemm_engine, dnnl_cpu, 0) != dnnl_success ||
                         dnnl_stream_create(&gemm_stream, gemm_engine, dnnl_stream_default_flags) != dnnl_success)) {
        gemm_engine = NULL;
        return;
    }
    sa = (struct md_shape){ k->M, k->K, k->lda, k->trans_a, b->n0, b->n1, b->a0, b->a1 };
    sb = (struct md_shape){ k->K, k->N, k->ldb, k->trans_b, b->n0, b->n1, b->b0, b->b1 };
    sc = (struct md_shape){ k->M, k->N, k->ldc, 0, b->n0, b->n1, b->c0, b->c1 };
    if (md_make(&src, &sa, dt) != 0)
        return;
    if (md_make(&wei, &sb, dt) != 0)
        goto out_src;
    if (md_make(&dst, &sc, k->c == CT_DTYPE_BF16 ? dnnl_bf16 : dnnl_f32) != 0)
        goto out_wei;
    have_md = 1;
    /* the bias: one row [1, N], added to every row of C */
    sbias = (struct md_shape){ 1, k->N, k->N, 0, 0, 0, 0, 0 };
    if (k->bias && md_make(&bia, &sbias, k->bias - 1 == CT_DTYPE_BF16 ? dnnl_bf16 : dnnl_f32) != 0)
        goto out;
    have_bias = k->bias != 0;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success)
        goto out;
    if (k->solo && dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success)
        goto out;
    if ((k->accumulate || k->alpha != 1.0f) && dnnl_post_ops_create(&po) != dnnl_success)
        goto out;
    /* C = alpha x product: a linear post-op on the fp32 sum, before it is rounded to C's type */
#if DNNL_VERSION_MAJOR >= 3
    if (k->alpha != 1.0f && dnnl_post_ops_append_eltwise(po, dnnl_eltwise_linear, k->alpha, 0.0f) != dnnl_success)
#else
    if (k->alpha != 1.0f && dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, k->alpha, 0.0f) != dnnl_success)
#endif
        goto out;
    /* C += product: oneDNN's sum post-op adds the old destination in fp32 */
#if DNNL_VERSION_MAJOR >= 3
    if (k->accumulate && dnnl_post_ops_append_sum(po, 1.0f, 0, dnnl_data_type_undef) != dnnl_success)
#else
    if (k->accumulate && dnnl_post_ops_append_sum(po, 1.0f) != dnnl_success)
#endif
        goto out;
    if (po && dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success)
        goto out;
    if (pd_make(&pd, &src, &wei, have_bias ? &bia : NULL, &dst, attr) != dnnl_success)
        goto out;
    if (dnnl_primitive_create(&p->prim, pd) != dnnl_success) {
        p->prim = NULL;
        goto out;
    }
    dnnl_memory_create(&p->src, md_ptr(&src), gemm_engine, DNNL_MEMORY_NONE);
    dnnl_memory_create(&p->wei, md_ptr(&wei), gemm_engine, DNNL_MEMORY_NONE);
    dnnl_memory_create(&p->dst, md_ptr(&dst), gemm_engine, DNNL_MEMORY_NONE);
    if (have_bias)
        dnnl_memory_create(&p->bias, md_ptr(&bia), gemm_engine, DNNL_MEMORY_NONE);
    /* a solo primitive's scratchpad is its own: it runs on whichever thread of the team calls it */
    if (k->solo && dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) > 0)
        dnnl_memory_create(&p->scratch, dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0), gemm_engine,
                           DNNL_MEMORY_ALLOCATE);
    if (!p->src || !p->wei || !p->dst || (have_bias && !p->bias) ||
        (k->solo && !p->scratch &&
         dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) > 0)) {
        dnnl_primitive_destroy(p->prim);
        p->prim = NULL;
        goto out;
    }
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(p->impl, sizeof(p->impl), "%s", impl);
    /* a batch on oneDNN's reference loops is slower than its caller's own per-product path */
    if (b->n0 > 0 && !strncmp(p->impl, "ref", 3)) {
        dnnl_primitive_destroy(p->prim);
        p->prim = NULL;
        snprintf(p->impl, sizeof(p->impl), "openblas");
    }
out:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (!have_md)
        return;
    if (have_bias)
        md_free(bia);
    md_free(dst);
out_wei:
    md_free(wei);
out_src:
    md_free(src);
}

/* A solo primitive is made while this thread's OpenMP thread count is 1, so that oneDNN plans its
 * work for the one thread that runs it: a primitive planned for the team and run inside a parallel
 * region would be handed one thread (oneDNN runs nested regions serially) and a split made for
 * more. Inside a region the count set here is this thread's own, and it is put back. */
static void prim_make(struct gemm_prim *p)
{
    int threads = omp_get_max_threads();

    if (p->key.solo)
        omp_set_num_threads(1);
    prim_make_team(p);
    if (p->key.solo) {
        omp_set_num_threads(threads);
        if (p->prim && dnnl_stream_create(&p->stream, gemm_engine, dnnl_stream_default_flags) != dnnl_success) {
            dnnl_primitive_destroy(p->prim);
            p->prim = NULL;
            p->stream = NULL;
            snprintf(p->impl, sizeof(p->impl), "openblas");
        }
    }
}

/* The cached primitive for key, made on first use; NULL only when out of memory. */
static struct gemm_prim *prim_get(const struct gemm_key *key)
{
    struct gemm_prim *p;

    pthread_mutex_lock(&gemm_lock);
    for (p = gemm_cache; p; p = p->next)
        if (gemm_key_eq(&p->key, key))
            break;
    if (!p && (p = calloc(1, sizeof(*p)))) {
        p->key = *key;
        pthread_mutex_init(&p->lock, NULL);
        prim_make(p);
        p->next = gemm_cache;
        gemm_cache = p;
    }
    pthread_mutex_unlock(&gemm_lock);
    return p;
}

/* --- products --------------------------------------------------------------------------------- */

static int gemm_onednn(const struct gemm_key *key, const void *A, const void *B, const void *bias, void *C)
{
    struct gemm_prim *p = prim_get(key);
    dnnl_exec_arg_t args[5];
    int n = 3;
    pthread_mutex_t *lock;
    dnnl_stream_t stream;

    if (!p || !p->prim)
        return -1;
    /* a memory object holds its data pointer: callers on several threads would race on it (a solo
     * primitive has its own lock and stream; team primitives run one at a time) */
    lock = key->solo ? &p->lock : &gemm_lock;
    stream = key->solo ? p->stream : gemm_stream;
    pthread_mutex_lock(lock);
    dnnl_memory_set_data_handle(p->src, (void *)A);
    dnnl_memory_set_data_handle(p->wei, (void *)B);
    dnnl_memory_set_data_handle(p->dst, C);
    args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, p->src };
    args[1] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, p->wei };
    args[2] = (dnnl_exec_arg_t){ DNNL_ARG_DST, p->dst };
    if (p->scratch)
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, p->scratch };
    if (p->bias) {
        dnnl_memory_set_data_handle(p->bias, (void *)bias);
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, p->bias };
    }
    dnnl_primitive_execute(p->prim, stream, n, args);
    dnnl_stream_wait(stream);
    pthread_mutex_unlock(lock);
    return 0;
}

int ct_gemm_onednn(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                   enum ct_dtype ab, int accumulate, float *C, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, ab, CT_DTYPE_F32, { 0 }, 1.0f,
                            omp_in_parallel(), 0 };

    return gemm_onednn(&key, A, B, NULL, C);
}

int ct_gemm_batched(const struct ct_gemm_batch *batch, int trans_a, int trans_b, int M, int N, int K, const void *A,
                    int lda, const void *B, int ldb, enum ct_dtype ab, float *C, int ldc)
{
    return ct_gemm_batched_to(batch, trans_a, trans_b, M, N, K, A, lda, B, ldb, ab, 1.0f, CT_DTYPE_F32, C, ldc);
}

int ct_gemm_batched_to(const struct ct_gemm_batch *batch, int trans_a, int trans_b, int M, int N, int K, const void *A,
                       int lda, const void *B, int ldb, enum ct_dtype ab, float alpha, enum ct_dtype c, void *C,
                       int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, 0, ab, c, *batch, alpha, omp_in_parallel(), 0 };

    if (M <= 0 || N <= 0 || batch->n0 <= 0 || batch->n1 <= 0 || (c != CT_DTYPE_F32 && c != CT_DTYPE_BF16))
        return -1;
    if (!teams_pid && omp_get_max_threads() > 1)
        teams_pid = getpid();
    return gemm_onednn(&key, A, B, NULL, C);
}

const char *ct_gemm_impl(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, enum ct_dtype ab,
                         int accumulate, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, ab, CT_DTYPE_F32, { 0 }, 1.0f,
                            omp_in_parallel(), 0 };
    struct gemm_prim *p = prim_get(&key);

    return p ? p->impl : "openblas";
}

void ct_gemm_prepare(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, enum ct_dtype ab,
                     int accumulate, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, ab, CT_DTYPE_F32, { 0 }, 1.0f,
                            omp_in_parallel(), 0 };

    prim_get(&key);
}

void ct_gemm_prepare_bf16(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int accumulate, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, CT_DTYPE_BF16, CT_DTYPE_BF16, { 0 },
                            1.0f, omp_in_parallel(), 0 };

    prim_get(&key);
}

/* bf16 rows [rows, cols] (leading dimension ld) widened to fp32, for OpenBLAS. */
static float *bf16_widen(const uint16_t *x, int rows, int cols, int ld)
{
    size_t n = (size_t)(rows - 1) * ld + cols;
    float *out = malloc(sizeof(float) * n);

    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)x[i] << 16;

        memcpy(&out[i], &u, sizeof(u));
    }
    return out;
}

void ct_gemm(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
             enum ct_dtype ab, int accumulate, float *C, int ldc)
{
    const float *a = A, *b = B;
    float *wa = NULL, *wb = NULL;

    if (M <= 0 || N <= 0)
        return;
    if (!teams_pid && omp_get_max_threads() > 1)
        teams_pid = getpid();
    if (ct_gemm_onednn(trans_a, trans_b, M, N, K, A, lda, B, ldb, ab, accumulate, C, ldc) == 0)
        return;
    /* No oneDNN primitive for this problem: the same product on OpenBLAS, in fp32 (a product of
     * two bf16 values is exact in fp32, so only the order of the sums differs). */
    if (ab == CT_DTYPE_BF16) {
        a = wa = bf16_widen(A, trans_a ? K : M, trans_a ? M : K, lda);
        b = wb = bf16_widen(B, trans_b ? N : K, trans_b ? K : N, ldb);
        if (!wa || !wb) {
            fprintf(stderr, "ctrain: out of memory widening a bf16 GEMM's inputs\n");
            abort();
        }
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, C, ldc);
    free(wa);
    free(wb);
}

void ct_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                  int accumulate, uint16_t *C, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, CT_DTYPE_BF16, CT_DTYPE_BF16, { 0 },
                            1.0f, omp_in_parallel(), 0 };
    float *c;

    if (M <= 0 || N <= 0)
        return;
    if (!teams_pid && omp_get_max_threads() > 1)
        teams_pid = getpid();
    if (gemm_onednn(&key, A, B, NULL, C) == 0)
        return;
    /* No oneDNN primitive (a CPU without bf16 instructions): the fp32 product of the widened inputs
     * on OpenBLAS, added to C's old value in fp32 and rounded once, as oneDNN does. */
    c = accumulate ? bf16_widen(C, M, N, ldc) : calloc((size_t)(M - 1) * ldc + N, sizeof(float));
    if (!c) {
        fprintf(stderr, "ctrain: out of memory for a bf16 GEMM's fp32 result\n");
        abort();
    }
    ct_gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, CT_DTYPE_BF16, accumulate, c, ldc);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[(size_t)i * ldc + j] = ct_bf16_store(c[(size_t)i * ldc + j]);
    free(c);
}

/* C = op(A) op(B) + bias (a row of N added to every row), in one pass: oneDNN's bias input, where
 * filling C with the bias and accumulating onto it wrote C and read it back. Without a primitive,
 * that fill and an accumulating product. */
void ct_gemm_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                  enum ct_dtype ab, const float *bias, float *C, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, 0, ab, CT_DTYPE_F32, { 0 }, 1.0f,
                            omp_in_parallel(), CT_DTYPE_F32 + 1 };

    if (M <= 0 || N <= 0)
        return;
    if (!teams_pid && omp_get_max_threads() > 1)
        teams_pid = getpid();
    if (gemm_onednn(&key, A, B, bias, C) == 0)
        return;
    for (int i = 0; i < M; i++)
        memcpy(C + (size_t)i * ldc, bias, sizeof(float) * (size_t)N);
    ct_gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, ab, 1, C, ldc);
}

void ct_gemm_bf16_bias(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                       int ldb, const uint16_t *bias, uint16_t *C, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, 0, CT_DTYPE_BF16, CT_DTYPE_BF16, { 0 }, 1.0f,
                            omp_in_parallel(), CT_DTYPE_BF16 + 1 };

    if (M <= 0 || N <= 0)
        return;
    if (!teams_pid && omp_get_max_threads() > 1)
        teams_pid = getpid();
    if (gemm_onednn(&key, A, B, bias, C) == 0)
        return;
    for (int i = 0; i < M; i++)
        memcpy(C + (size_t)i * ldc, bias, sizeof(uint16_t) * (size_t)N);
    ct_gemm_bf16(trans_a, trans_b, M, N, K, A, lda, B, ldb, 1, C, ldc);
}
