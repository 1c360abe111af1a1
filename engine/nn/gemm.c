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
#include "engine/nn/thread_share.h"
#include "engine/util/cpu.h"

struct gemm_key {
    int trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate;
    enum ct_dtype ab;
    enum ct_dtype c;    /* C's type: fp32, or bf16 (bf16-true: rounded once, after the fp32 sum) */
    struct ct_gemm_batch batch;   /* all zero: one product */
    float alpha;        /* C = alpha x the product (1: none; an eltwise post-op otherwise) */
    int solo;           /* called inside an OpenMP parallel region: made for, and run on, that one thread
                         * (gemm_widened_team's row blocks: 1 + the thread's number, a primitive each) */
    int bias;           /* C = product + a bias row (oneDNN's bias input): 0 none, else its ct_dtype + 1 */
    int onednn_only;    /* oneDNN's primitive even where OpenBLAS is the faster library (blas_faster) */
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
    /* a bf16-input problem oneDNN made no primitive for (no bf16 matmul on this CPU): the fp32
     * problem it runs as, on its inputs widened to fp32 (NULL: that one has no primitive either,
     * OpenBLAS computes) */
    struct gemm_prim *wide;
    int widened;
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
        size_t lo, k = ct_thread_share(n, 32, &lo);

        if (k)
            bf16_pack_range(in + lo, out + lo, k);
    }
}

/* bf16 -> fp32 is exact: the 16 bits become an fp32's upper half. */
CT_SIMD_CLONES
static void bf16_widen_range(const uint16_t *restrict in, float *restrict out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)in[i] << 16;

        memcpy(&out[i], &u, sizeof(u));
    }
}

/* This thread's share of in[n] widened into out, cut at multiples of 32. */
static void widen_share(const uint16_t *in, float *out, size_t n)
{
    size_t lo, k = ct_thread_share(n, 32, &lo);

    if (k)
        bf16_widen_range(in + lo, out + lo, k);
}

/* a[na] and b[nb] widened from A and B, in one region of the team when large and not already
 * inside a parallel region (each fork and join is a wait on a shared machine). */
static void bf16_widen2(const uint16_t *A, float *a, size_t na, const uint16_t *B, float *b, size_t nb)
{
#pragma omp parallel if (na + nb >= 65536 && !omp_in_parallel())
    {
        widen_share(A, a, na);
        widen_share(B, b, nb);
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
           a->solo == b->solo && a->bias == b->bias && a->onednn_only == b->onednn_only;
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

/* --- which library ---------------------------------------------------------------------------- */

/* Whether OpenBLAS's sgemm computes this fp32 problem faster than oneDNN on this CPU: on an x86-64
 * CPU without AVX-512 (AVX2 and FMA: Haswell to Zen 3), a weight gradient's product C = A^T B, whose
 * reduction runs over the batch's rows (K = B x T), where oneDNN's AVX2 gemm:jit ran at 0.42-1.02x
 * of OpenBLAS's Zen/Haswell kernels on the GPT's shapes on one thread (1.02x: a tie, 256 x 256) (build/t/gemm_shapes
 * --per-shape, scripts/bench/README.md, issue 47); its other products (forward's A B^T, backward's
 * A B) ran as fast or faster on oneDNN, and stay there. Decided from the CPU (cpuid: never an
 * environment variable) and the shape alone, once per shape, so every run and every rank takes the
 * same path (tests compare the loss's bits between runs). On AVX-512 CPUs nothing changes: oneDNN's
 * AVX-512 kernels are the faster ones there. Batches (attention) stay where they were: a batch
 * oneDNN has a primitive for runs on it, the others on OpenBLAS already (gemm_batched_blas). */
static int blas_faster(const struct gemm_key *k)
{
    static int no_avx512 = -1;   /* read once, under gemm_lock (prim_find) */

    if (no_avx512 < 0)
        no_avx512 = ct_cpu_avx512() == 0;
    return no_avx512 && !k->onednn_only && k->ab == CT_DTYPE_F32 && k->c == CT_DTYPE_F32 && k->batch.n0 == 0 &&
           k->alpha == 1.0f && !k->bias && k->trans_a && !k->trans_b;
}

/* OpenBLAS's thread count for the products gemm.c runs on it. Debian's OpenBLAS (its pthread build)
 * keeps one count for the process, read as each product starts. A product on one thread of an
 * OpenMP team (solo: each of backward's pair of threads runs its own) must run on that thread
 * alone: two threaded OpenBLAS products at once are serialised by OpenBLAS's level-3 lock, its own
 * thread spinning beside them on the team's cores (the step ran at 0.65x of its one-thread-BLAS
 * rate that way). A product on the whole team runs on the team's count: blas_team, what the
 * process set (ct_gemm_set_blas_threads) or OpenBLAS's own default, read before gemm.c first
 * changes it. Setting the count is a store once OpenBLAS's threads exist; the sums of each element
 * are the same on any count (OpenBLAS splits a product's rows and columns among its threads, never
 * its reduction). */
static int blas_team;

static void blas_threads(int solo)
{
    int want = solo || blas_team < 1 ? 1 : blas_team;

    if (openblas_get_num_threads() != want)
        openblas_set_num_threads(want);
}

void ct_gemm_set_blas_threads(int threads)
{
    pthread_mutex_lock(&gemm_lock);
    blas_team = threads > 0 ? threads : 1;
    pthread_mutex_unlock(&gemm_lock);
    openblas_set_num_threads(threads > 0 ? threads : 1);
}

void ct_gemm_blas_team(void)
{
    if (blas_team > 0 && !omp_in_parallel())
        blas_threads(0);
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
    if (blas_faster(k))
        return;
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

/* The cached primitive for key, made on first use (the caller holds gemm_lock); NULL only when out
 * of memory. This is where a problem's path is decided, once: oneDNN's primitive; for bf16 inputs
 * oneDNN has none for (a CPU without bf16 matmul: AVX2, or AVX-512 before Cooper Lake), the fp32
 * problem its widened inputs run as (a single product's fp32 primitive, C in fp32 scratch of N
 * columns when C is bf16); else OpenBLAS. */
static struct gemm_prim *prim_find(const struct gemm_key *key)
{
    struct gemm_prim *p;
    struct gemm_key w;

    for (p = gemm_cache; p; p = p->next)
        if (gemm_key_eq(&p->key, key))
            return p;
    if (!blas_team)
        blas_team = openblas_get_num_threads();
    if (!(p = calloc(1, sizeof(*p))))
        return NULL;
    p->key = *key;
    pthread_mutex_init(&p->lock, NULL);
    prim_make(p);
    p->next = gemm_cache;
    gemm_cache = p;
    if (p->prim || key->ab != CT_DTYPE_BF16)
        return p;
    p->widened = 1;
    /* a batch widens its views once and runs each product on OpenBLAS (gemm_batched_blas): oneDNN's
     * fp32 batched matmul on strided views ran at an eighth of that rate on AVX2 */
    if (key->batch.n0 == 0) {
        w = *key;
        w.ab = CT_DTYPE_F32;
        w.c = CT_DTYPE_F32;
        w.bias = w.bias ? CT_DTYPE_F32 + 1 : 0;
        w.ldc = key->c == CT_DTYPE_BF16 ? key->N : key->ldc;
        p->wide = prim_find(&w);
    }
    snprintf(p->impl, sizeof(p->impl), "widened:%s", p->wide && p->wide->prim ? p->wide->impl : "openblas");
    return p;
}

static struct gemm_prim *prim_get(const struct gemm_key *key)
{
    struct gemm_prim *p;

    pthread_mutex_lock(&gemm_lock);
    p = prim_find(key);
    pthread_mutex_unlock(&gemm_lock);
    return p;
}

/* --- fp32 scratch for widened operands -------------------------------------------------------- */

/* Each thread's own buffers, kept between calls (a step's shapes repeat every step) and freed when
 * the thread ends: the team's threads widen their products' operands at once (gemm_pair). */
enum { SCR_A, SCR_B, SCR_C, SCR_BIAS, SCR_N };
struct scratch {
    float *p[SCR_N];
    size_t n[SCR_N];
};
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *v)
{
    struct scratch *s = v;

    for (int i = 0; i < SCR_N; i++)
        free(s->p[i]);
    free(s);
}

static void scratch_key_make(void)
{
    if (pthread_key_create(&scratch_key, scratch_free) != 0) {
        fprintf(stderr, "ctrain: no thread key for the bf16 GEMMs' scratch\n");
        abort();
    }
}

static float *scratch(int slot, size_t n)
{
    struct scratch *s;

    pthread_once(&scratch_once, scratch_key_make);
    s = pthread_getspecific(scratch_key);
    if (!s && (!(s = calloc(1, sizeof(*s))) || pthread_setspecific(scratch_key, s) != 0))
        goto oom;
    if (s->n[slot] < n) {
        free(s->p[slot]);
        s->n[slot] = 0;
        if (!(s->p[slot] = malloc(sizeof(float) * n)))
            goto oom;
        s->n[slot] = n;
    }
    return s->p[slot];
oom:
    fprintf(stderr, "ctrain: out of memory widening a bf16 GEMM's operands to fp32\n");
    abort();
}

/* Elements from a stored matrix's first to its last (rows of cols, ld apart), over a batch's grid. */
static size_t span(int rows, int cols, int ld, int n0, int n1, long s0, long s1)
{
    size_t n = (size_t)(rows - 1) * ld + cols;

    return n0 > 0 ? n + (size_t)(n0 - 1) * s0 + (size_t)(n1 - 1) * s1 : n;
}

static size_t span_a(const struct gemm_key *k)
{
    return span(k->trans_a ? k->K : k->M, k->trans_a ? k->M : k->K, k->lda, k->batch.n0, k->batch.n1, k->batch.a0,
                k->batch.a1);
}

static size_t span_b(const struct gemm_key *k)
{
    return span(k->trans_b ? k->N : k->K, k->trans_b ? k->K : k->N, k->ldb, k->batch.n0, k->batch.n1, k->batch.b0,
                k->batch.b1);
}

/* rows x cols of bf16 c (ld apart) rounded from, or widened into, dense fp32 f. */
static void rows_pack(const float *f, uint16_t *c, int rows, int cols, int ld)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= 65536 && !omp_in_parallel())
    for (int i = 0; i < rows; i++)
        bf16_pack_range(f + (size_t)i * cols, c + (size_t)i * ld, (size_t)cols);
}

static void rows_widen(const uint16_t *c, float *f, int rows, int cols, int ld)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= 65536 && !omp_in_parallel())
    for (int i = 0; i < rows; i++)
        bf16_widen_range(c + (size_t)i * ld, f + (size_t)i * cols, (size_t)cols);
}

/* --- products --------------------------------------------------------------------------------- */

/* p's primitive on these operands. */
static void gemm_exec(struct gemm_prim *p, const void *A, const void *B, const void *bias, void *C)
{
    dnnl_exec_arg_t args[5];
    int n = 3;
    /* a memory object holds its data pointer: callers on several threads would race on it (a solo
     * primitive has its own lock and stream; team primitives run one at a time) */
    pthread_mutex_t *lock = p->key.solo ? &p->lock : &gemm_lock;
    dnnl_stream_t stream = p->key.solo ? p->stream : gemm_stream;

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
}

/* C = op(A) op(B) (+ C, + a bias row: C filled with it first) in fp32 on OpenBLAS (alpha 1). */
static void gemm_blas(const struct gemm_key *k, const float *A, const float *B, const float *bias, float *C, int ldc)
{
    if (bias)
        for (int i = 0; i < k->M; i++)
            memcpy(C + (size_t)i * ldc, bias, sizeof(float) * (size_t)k->N);
    blas_threads(k->solo || omp_in_parallel());
    cblas_sgemm(CblasRowMajor, k->trans_a ? CblasTrans : CblasNoTrans, k->trans_b ? CblasTrans : CblasNoTrans, k->M,
                k->N, k->K, 1.0f, A, k->lda, B, k->ldb, k->accumulate || bias ? 1.0f : 0.0f, C, ldc);
}

/* A single bf16 product without a bf16 primitive: A, B (and a bf16 bias) widened into this thread's
 * fp32 scratch, the fp32 primitive (or OpenBLAS) on them, a bf16 C read from (accumulate) and
 * rounded into from fp32 scratch once. The products of bf16 values are exact in fp32 and summed in
 * fp32 as oneDNN's bf16 kernels sum them: only the order of the sums differs. */
static void gemm_widened(struct gemm_prim *p, const void *A, const void *B, const void *bias, void *C)
{
    const struct gemm_key *k = &p->key;
    size_t na = span_a(k), nb = span_b(k);
    float *a = scratch(SCR_A, na), *b = scratch(SCR_B, nb), *c = C;
    const float *bs = bias;
    int ldc = k->ldc;

    bf16_widen2(A, a, na, B, b, nb);
    if (k->bias == CT_DTYPE_BF16 + 1) {
        float *w = scratch(SCR_BIAS, (size_t)k->N);

        bf16_widen_range(bias, w, (size_t)k->N);
        bs = w;
    }
    if (k->c == CT_DTYPE_BF16) {
        c = scratch(SCR_C, (size_t)k->M * k->N);
        ldc = k->N;
        if (k->accumulate)
            rows_widen(C, c, k->M, k->N, k->ldc);
    }
    if (p->wide && p->wide->prim)
        gemm_exec(p->wide, a, b, bs, c);
    else
        gemm_blas(k, a, b, bs, c, ldc);
    if (k->c == CT_DTYPE_BF16)
        rows_pack(c, C, k->M, k->N, k->ldc);
}

/* A widened product on the whole team (a Linear's forward, bf16-true's and bf16-mixed's products
 * outside backward's pair), in one parallel region instead of three (widen A and B, the fp32
 * product on the team, round C): each thread widens its share of A and B, and after one barrier
 * runs the product for its own block of C's rows on a primitive made for one thread (or one
 * OpenBLAS thread), widening (accumulate) and rounding that block itself while it is in its cache.
 * On a shared 2-core node every join waits for a descheduled thread, and the widened products
 * added two to each product's one (scripts/bench/README.md, issue 47). The sums are fp32 sums of
 * exact products as before, in the one-thread kernel's order. */
static void gemm_widened_team(struct gemm_prim *p, const uint16_t *A, const uint16_t *B, const void *bias, void *C)
{
    const struct gemm_key *k = &p->key;
    size_t na = span_a(k), nb = span_b(k);
    float *a = scratch(SCR_A, na), *b = scratch(SCR_B, nb);

#pragma omp parallel
    {
        struct gemm_key s = p->wide->key;
        size_t lo, rows;
        struct gemm_prim *sp;
        const float *bs = bias;   /* an fp32 bias as it is; a bf16 one widened into the thread's scratch */
        float *c;
        int ldc;

        widen_share(A, a, na);
        widen_share(B, b, nb);
        rows = ct_thread_share((size_t)k->M, 16, &lo);
        if (k->bias == CT_DTYPE_BF16 + 1) {
            float *w = scratch(SCR_BIAS, (size_t)k->N);

            bf16_widen_range(bias, w, (size_t)k->N);
            bs = w;
        }
        if (rows && k->c == CT_DTYPE_BF16) {
            c = scratch(SCR_C, rows * k->N);
            ldc = k->N;
            if (k->accumulate)
                for (size_t i = 0; i < rows; i++)
                    bf16_widen_range((const uint16_t *)C + (lo + i) * k->ldc, c + i * k->N, (size_t)k->N);
        } else {
            c = (float *)C + lo * k->ldc;
            ldc = k->ldc;
        }
#pragma omp barrier
        if (rows) {
            const float *ai = k->trans_a ? a + lo : a + lo * k->lda;

            s.M = (int)rows;
            s.ldc = ldc;
            s.solo = 1 + omp_get_thread_num();
            sp = prim_get(&s);
            if (!sp) {
                fprintf(stderr, "ctrain: out of memory for a bf16 GEMM's primitive\n");
                abort();
            }
            if (sp->prim)
                gemm_exec(sp, ai, b, bs, c);
            else
                gemm_blas(&s, ai, b, bs, c, ldc);
            if (k->c == CT_DTYPE_BF16)
                for (size_t i = 0; i < rows; i++)
                    bf16_pack_range(c + i * k->N, (uint16_t *)C + (lo + i) * k->ldc, (size_t)k->N);
        }
    }
}

/* key's product on its oneDNN primitive, or (widen) widened to fp32 where it is a bf16 problem
 * oneDNN has no primitive for: 0, or -1 when neither ran (the caller computes it). */
static int gemm_run(const struct gemm_key *key, const void *A, const void *B, const void *bias, void *C, int widen)
{
    struct gemm_prim *p = prim_get(key);

    if (!p && key->ab == CT_DTYPE_BF16) {
        fprintf(stderr, "ctrain: out of memory for a bf16 GEMM's primitive\n");
        abort();
    }
    if (!p)
        return -1;
    if (p->prim) {
        gemm_exec(p, A, B, bias, C);
        return 0;
    }
    if (!widen || !p->widened || key->batch.n0 > 0)
        return -1;
    if (p->wide && !key->solo && !omp_in_parallel() && omp_get_max_threads() > 1 && key->M >= 64)
        gemm_widened_team(p, A, B, bias, C);
    else
        gemm_widened(p, A, B, bias, C);
    return 0;
}

int ct_gemm_onednn(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                   enum ct_dtype ab, int accumulate, float *C, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, ab, CT_DTYPE_F32, { 0 }, 1.0f,
                            omp_in_parallel(), 0, 1 };

    return gemm_run(&key, A, B, NULL, C, 0);
}

int ct_gemm_bf16_native(void)
{
    static int native = -1; /* asked once (threads that ask at once get the same answer) */
    struct gemm_key key = { 0, 1, 64, 64, 64, 64, 64, 64, 0, CT_DTYPE_BF16, CT_DTYPE_F32, { 0 }, 1.0f, 0, 0, 0 };
    struct gemm_prim *p;

    if (native < 0) {
        key.solo = omp_in_parallel();
        p = prim_get(&key);
        native = p && p->prim;
    }
    return native;
}

int ct_gemm_batched(const struct ct_gemm_batch *batch, int trans_a, int trans_b, int M, int N, int K, const void *A,
                    int lda, const void *B, int ldb, enum ct_dtype ab, float *C, int ldc)
{
    return ct_gemm_batched_to(batch, trans_a, trans_b, M, N, K, A, lda, B, ldb, ab, 1.0f, CT_DTYPE_F32, C, ldc);
}

/* A batch oneDNN made no primitive for: its views widened once (bf16 inputs), then every product
 * on OpenBLAS, the grid's products spread over the team, each into C directly (fp32) or into the
 * thread's scratch and rounded once (bf16). */
static void gemm_batched_blas(const struct gemm_key *k, const void *A, const void *B, void *C)
{
    const struct ct_gemm_batch *g = &k->batch;
    const float *a = A, *b = B;

    if (k->ab == CT_DTYPE_BF16) {
        size_t na = span_a(k), nb = span_b(k);
        float *wa = scratch(SCR_A, na), *wb = scratch(SCR_B, nb);

        bf16_widen2(A, wa, na, B, wb, nb);
        a = wa, b = wb;
    }
    blas_threads(1);   /* each product on one thread of the team */
#pragma omp parallel for collapse(2) schedule(static) if (!omp_in_parallel())
    for (int i = 0; i < g->n0; i++)
        for (int j = 0; j < g->n1; j++) {
            long ca = i * g->c0 + j * g->c1;
            float *c = k->c == CT_DTYPE_F32 ? (float *)C + ca : scratch(SCR_C, (size_t)k->M * k->N);

            cblas_sgemm(CblasRowMajor, k->trans_a ? CblasTrans : CblasNoTrans, k->trans_b ? CblasTrans : CblasNoTrans,
                        k->M, k->N, k->K, k->alpha, a + i * g->a0 + j * g->a1, k->lda, b + i * g->b0 + j * g->b1,
                        k->ldb, 0.0f, c, k->c == CT_DTYPE_F32 ? k->ldc : k->N);
            if (k->c == CT_DTYPE_BF16)
                rows_pack(c, (uint16_t *)C + ca, k->M, k->N, k->ldc);
        }
}

int ct_gemm_batched_to(const struct ct_gemm_batch *batch, int trans_a, int trans_b, int M, int N, int K, const void *A,
                       int lda, const void *B, int ldb, enum ct_dtype ab, float alpha, enum ct_dtype c, void *C,
                       int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, 0, ab, c, *batch, alpha, omp_in_parallel(), 0,
                            0 };

    if (M <= 0 || N <= 0 || batch->n0 <= 0 || batch->n1 <= 0 || (c != CT_DTYPE_F32 && c != CT_DTYPE_BF16))
        return -1;
    if (!teams_pid && omp_get_max_threads() > 1)
        teams_pid = getpid();
    if (gemm_run(&key, A, B, NULL, C, 0) != 0)
        gemm_batched_blas(&key, A, B, C);
    return 0;
}

const char *ct_gemm_impl(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, enum ct_dtype ab,
                         int accumulate, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, ab, CT_DTYPE_F32, { 0 }, 1.0f,
                            omp_in_parallel(), 0, 0 };
    struct gemm_prim *p = prim_get(&key);

    return p ? p->impl : "openblas";
}

void ct_gemm_prepare(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, enum ct_dtype ab,
                     int accumulate, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, ab, CT_DTYPE_F32, { 0 }, 1.0f,
                            omp_in_parallel(), 0, 0 };

    prim_get(&key);
}

void ct_gemm_prepare_bf16(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int accumulate, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, CT_DTYPE_BF16, CT_DTYPE_BF16, { 0 },
                            1.0f, omp_in_parallel(), 0, 0 };

    prim_get(&key);
}

void ct_gemm(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
             enum ct_dtype ab, int accumulate, float *C, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, ab, CT_DTYPE_F32, { 0 }, 1.0f,
                            omp_in_parallel(), 0, 0 };

    if (M <= 0 || N <= 0)
        return;
    if (!teams_pid && omp_get_max_threads() > 1)
        teams_pid = getpid();
    /* no primitive for an fp32 problem: OpenBLAS (bf16 problems widen: gemm_widened) */
    if (gemm_run(&key, A, B, NULL, C, 1) != 0)
        gemm_blas(&key, A, B, NULL, C, ldc);
}

void ct_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                  int accumulate, uint16_t *C, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, CT_DTYPE_BF16, CT_DTYPE_BF16, { 0 },
                            1.0f, omp_in_parallel(), 0, 0 };

    if (M <= 0 || N <= 0)
        return;
    if (!teams_pid && omp_get_max_threads() > 1)
        teams_pid = getpid();
    gemm_run(&key, A, B, NULL, C, 1);
}

/* C = op(A) op(B) + bias (a row of N added to every row), in one pass: oneDNN's bias input, where
 * filling C with the bias and accumulating onto it wrote C and read it back. Without a primitive,
 * that fill and an accumulating product. */
void ct_gemm_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                  enum ct_dtype ab, const float *bias, float *C, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, 0, ab, CT_DTYPE_F32, { 0 }, 1.0f,
                            omp_in_parallel(), CT_DTYPE_F32 + 1, 0 };

    if (M <= 0 || N <= 0)
        return;
    if (!teams_pid && omp_get_max_threads() > 1)
        teams_pid = getpid();
    if (gemm_run(&key, A, B, bias, C, 1) != 0)
        gemm_blas(&key, A, B, bias, C, ldc);
}

void ct_gemm_bf16_bias(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                       int ldb, const uint16_t *bias, uint16_t *C, int ldc)
{
    struct gemm_key key = { trans_a, trans_b, M, N, K, lda, ldb, ldc, 0, CT_DTYPE_BF16, CT_DTYPE_BF16, { 0 }, 1.0f,
                            omp_in_parallel(), CT_DTYPE_BF16 + 1, 0 };

    if (M <= 0 || N <= 0)
        return;
    if (!teams_pid && omp_get_max_threads() > 1)
        teams_pid = getpid();
    gemm_run(&key, A, B, bias, C, 1);
}
