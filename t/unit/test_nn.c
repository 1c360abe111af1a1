/* SPDX-License-Identifier: BSD-3-Clause */
/* Layers, MLP and optimizers: gradients against finite differences, updates against hand-computed
 * values, the PRNG's determinism. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cblas.h>

#include "ctrain/model.h"
#include "ctrain/nn.h"
#include "engine/models/mlp/mlp.h"
#include "engine/nn/bf16_inline.h"
#include "engine/nn/gemm.h"
#include "engine/util/cpu.h"

static void test_rng(void **state)
{
    ct_rng a, b;
    uint32_t idx[100];
    int seen[100] = { 0 };

    ct_rng_seed(&a, 42);
    ct_rng_seed(&b, 42);
    for (int i = 0; i < 1000; i++) {
        double u = ct_rng_uniform(&a);
        assert_true(u >= 0.0 && u < 1.0);
        ct_rng_uniform(&b);
    }
    assert_memory_equal(a.s, b.s, sizeof(a.s));
    ct_rng_seed(&b, 43);
    assert_true(ct_rng_next(&a) != ct_rng_next(&b));
    for (int i = 0; i < 100; i++)
        idx[i] = (uint32_t)i;
    ct_rng_shuffle(&a, idx, 100);
    for (int i = 0; i < 100; i++)
        seen[idx[i]]++;
    for (int i = 0; i < 100; i++)
        assert_int_equal(seen[i], 1);
    for (int i = 0; i < 1000; i++)
        assert_true(ct_rng_below(&a, 7) < 7);
}

static void test_linear_forward(void **state)
{
    /* x [2,3], W [2,3], b [2]: y = x W^T + b, checked by hand. */
    float x[] = { 1, 2, 3, -1, 0, 1 };
    float w[] = { 1, 0, -1, 0.5f, 0.5f, 0.5f };
    float b[] = { 0.25f, -10 };
    float y[4];

    ct_linear_forward(x, w, b, y, 2, 3, 2, 0);
    assert_float_equal(y[0], 1 - 3 + 0.25f, 1e-6);
    assert_float_equal(y[1], 3 - 10, 1e-6);
    assert_float_equal(y[2], -1 - 1 + 0.25f, 1e-6);
    assert_float_equal(y[3], 0 - 10, 1e-6);
    ct_linear_forward(x, w, b, y, 2, 3, 2, 1);
    assert_float_equal(y[0], 0, 0);
    assert_float_equal(y[1], 0, 0);
}

struct order { size_t offsets[16]; size_t counts[16]; int n; };

static int record_ready(void *ctx, size_t offset, size_t count)
{
    struct order *o = ctx;

    o->offsets[o->n] = offset;
    o->counts[o->n] = count;
    o->n++;
    return 0;
}

/* Mean loss of the batch at the current parameters. */
static double mean_loss(ct_mlp *m, const float *x, const uint8_t *y, int batch)
{
    return ct_mlp_forward(m, x, y, batch, NULL, NULL, NULL) / batch;
}

static void test_mlp_gradients(void **state)
{
    int dims[] = { 6, 8, 5, 4 };
    enum { B = 5 };
    float x[B * 6], *p, *g;
    uint8_t y[B] = { 0, 1, 2, 3, 1 };
    ct_mlp *m;
    ct_rng rng;
    struct order ord = { .n = 0 };
    ct_error err;
    double worst = 0;
    size_t n;

    assert_int_equal(ct_mlp_create(dims, 4, B, &m, &err), 0);
    ct_rng_seed(&rng, 7);
    ct_mlp_init(m, &rng);
    for (int i = 0; i < B * 6; i++)
        x[i] = (float)(2 * ct_rng_uniform(&rng) - 1);
    n = ct_mlp_num_params(m);
    assert_int_equal(n, 6 * 8 + 8 + 8 * 5 + 5 + 5 * 4 + 4);
    ct_mlp_forward(m, x, y, B, NULL, NULL, NULL);
    assert_int_equal(ct_mlp_backward(m, B, NULL, record_ready, &ord), 0);

    /* Announced last tensor first, covering the array exactly; the first layer's weights (8 rows)
     * in 8 row blocks from the last row to the first, so their exchange can start row by row. */
    assert_int_equal(ord.n, 5 + 8);
    for (int i = 0; i < 5; i++) {
        const ct_tensor *t = ct_mlp_tensor(m, 5 - i);
        assert_int_equal(ord.offsets[i], t->offset);
        assert_int_equal(ord.counts[i], t->numel);
    }
    for (int k = 0; k < 8; k++) {
        assert_int_equal(ord.offsets[5 + k], ct_mlp_tensor(m, 0)->offset + (size_t)(7 - k) * 6);
        assert_int_equal(ord.counts[5 + k], 6);
    }
    assert_int_equal(ct_mlp_tensor(m, 5)->offset + ct_mlp_tensor(m, 5)->numel, n);

    p = ct_mlp_params(m);
    g = malloc(n * sizeof(float));
    memcpy(g, ct_mlp_grads(m), n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        const float h = 1e-3f;
        float saved = p[i];
        double up, down, fd, diff;

        p[i] = saved + h;
        up = mean_loss(m, x, y, B);
        p[i] = saved - h;
        down = mean_loss(m, x, y, B);
        p[i] = saved;
        fd = (up - down) / (2.0 * h);
        diff = fabs(fd - g[i]) / (1e-3 + fabs(fd) + fabs(g[i]));
        if (diff > worst)
            worst = diff;
        if (diff > 5e-3)
            print_message("# param %zu: analytic %g, numeric %g\n", i, g[i], fd);
    }
    print_message("# worst relative gradient error %.2e over %zu parameters\n", worst, n);
    assert_true(worst < 2e-2);
    free(g);
    ct_mlp_free(m);
}

static void test_softmax_xent(void **state)
{
    float z[] = { 0, 0, 0, 1000, 0, 0 }; /* second row: a huge logit must not overflow */
    uint8_t y[] = { 2, 0 };
    int correct;
    double loss = ct_softmax_xent_forward(z, y, z, 2, 3, &correct);

    assert_float_equal(loss, log(3.0), 1e-6);
    assert_int_equal(correct, 1);
    ct_softmax_xent_backward(z, y, 2, 3, 2);
    assert_float_equal(z[0], 1.0 / 6, 1e-6);
    assert_float_equal(z[2], (1.0 / 3 - 1) / 2, 1e-6);
    assert_float_equal(z[3], 0, 1e-6);
}

/* 64-true's optimizer: the same update in fp64 arithmetic, state in fp64; fp16 state refused. */
static void test_adamw_f64(void **state)
{
    ct_optim_config cfg;
    ct_optim *o;
    ct_error err;
    double p[1] = { 1.0 }, g[1] = { 0.5 };

    ct_optim_config_default(&cfg, CT_OPTIM_ADAMW);
    cfg.lr = 0.1;
    cfg.weight_decay = 0.01;
    cfg.dtype = CT_DTYPE_F64;
    assert_int_equal(ct_optim_create(&cfg, 1, &o, &err), 0);
    assert_int_equal(ct_optim_dtype(o), CT_DTYPE_F64);
    ct_optim_step(o, p, g);
    /* 0.999 - 0.1 * 0.5 / (0.5 + 1e-8), to fp64's precision (fp32 would be off by ~1e-8) */
    assert_true(fabs(p[0] - (0.999 - 0.1 * 0.5 / (sqrt(0.00025 / (1 - 0.999)) + 1e-8))) < 1e-15);
    assert_true(fabs(((double *)ct_optim_state(o, 1))[0] - 0.00025) < 1e-18);
    assert_int_equal(ct_optim_state_bytes(o), 2 * sizeof(double));
    ct_optim_free(o);
    cfg.dtype = CT_DTYPE_F16;
    assert_int_equal(ct_optim_create(&cfg, 1, &o, &err), CT_ENOTAVAIL);
}

/* bf16-true's optimizer: parameters, gradients and state in bf16, the update rule computed in fp32
 * from the loaded values and each result rounded once; an update under half a bf16 ulp of its
 * parameter is lost (a LayerNorm weight of 1.0 at lr 1e-3), as in PyTorch. */
static void test_adamw_bf16(void **state)
{
    ct_optim_config cfg;
    ct_optim *o;
    ct_error err;
    uint16_t p[2] = { ct_bf16_store(0.75f), ct_bf16_store(1.0f) }, g[2] = { ct_bf16_store(0.5f), ct_bf16_store(0.5f) };
    float m, v, want;

    (void)state;
    ct_optim_config_default(&cfg, CT_OPTIM_ADAMW);
    cfg.lr = 0.1;
    cfg.weight_decay = 0.01;
    cfg.dtype = CT_DTYPE_BF16;
    assert_int_equal(ct_optim_create(&cfg, 2, &o, &err), 0);
    assert_int_equal(ct_optim_state_bytes(o), 2 * 2 * sizeof(uint16_t));
    ct_optim_step(o, p, g);
    m = 0.1f * 0.5f;
    v = 0.001f * 0.25f;
    want = 0.75f * (float)(1.0 - 0.1 * 0.01) - (float)(0.1 / 0.1) * m / (sqrtf(v) * (float)(1.0 / sqrt(0.001)) + 1e-8f);
    assert_int_equal(p[0], ct_bf16_store(want));
    assert_int_equal(((uint16_t *)ct_optim_state(o, 0))[0], ct_bf16_store(m));
    assert_int_equal(((uint16_t *)ct_optim_state(o, 1))[0], ct_bf16_store(v));
    ct_optim_free(o);
    cfg.lr = 1e-3;
    p[1] = ct_bf16_store(1.0f);
    assert_int_equal(ct_optim_create(&cfg, 2, &o, &err), 0);
    ct_optim_step(o, p, g);
    assert_int_equal(p[1], ct_bf16_store(1.0f));
    ct_optim_free(o);
}

/* The MLP stored in bf16 or fp64: tensors view the new array, GEMMs in the storage type only, fp16
 * storage refused; a model without set_param_dtype is refused fp64 with a hint. */
static void test_mlp_param_dtype(void **state)
{
    int dims[] = { 6, 5, 3 };
    ct_mlp *m;
    ct_error err;
    struct ct_model_ops ops = { 0 };
    ct_model user = { .ops = &ops, .name = "user_model" };

    assert_int_equal(ct_mlp_create(dims, 3, 4, &m, &err), 0);
    assert_int_equal(ct_mlp_set_param_dtype(m, CT_DTYPE_F16, &err), CT_ENOTAVAIL);
    assert_int_equal(ct_mlp_set_param_dtype(m, CT_DTYPE_BF16, &err), 0);
    assert_int_equal(ct_mlp_param_dtype(m), CT_DTYPE_BF16);
    assert_ptr_equal(ct_mlp_tensor(m, 1)->data, (uint16_t *)ct_mlp_params(m) + 30);
    assert_int_equal(ct_mlp_set_gemm_dtype(m, CT_DTYPE_F32, &err), CT_ENOTAVAIL);
    assert_string_equal(err.id, "mlp-gemm-dtype");
    assert_string_equal(err.msg, "a bf16 MLP computes its GEMMs in bf16 only");
    assert_int_equal(ct_mlp_set_param_dtype(m, CT_DTYPE_F64, &err), 0);
    assert_int_equal(ct_mlp_param_dtype(m), CT_DTYPE_F64);
    assert_ptr_equal(ct_mlp_tensor(m, 0)->data, ct_mlp_params(m));
    assert_ptr_equal(ct_mlp_tensor(m, 1)->data, (double *)ct_mlp_params(m) + 30);
    assert_int_equal(ct_mlp_set_gemm_dtype(m, CT_DTYPE_BF16, &err), CT_ENOTAVAIL);
    assert_string_equal(err.msg, "an fp64 MLP computes its GEMMs in fp64 only");
    assert_int_equal(ct_mlp_set_gemm_dtype(m, CT_DTYPE_F64, &err), 0);
    ct_mlp_free(m);
    assert_int_equal(ct_model_set_param_dtype(&user, CT_DTYPE_F32, &err), 0);
    assert_int_equal(ct_model_set_param_dtype(&user, CT_DTYPE_F64, &err), CT_ENOTAVAIL);
    assert_string_equal(err.id, "model-precision-unsupported");
    assert_non_null(strstr(err.msg, "user_model"));
    assert_non_null(strstr(err.hint, "set_param_dtype"));
}

static void test_adamw_by_hand(void **state)
{
    ct_optim_config cfg;
    ct_optim *o;
    ct_error err;
    float p[1] = { 1.0f }, g[1] = { 0.5f };

    ct_optim_config_default(&cfg, CT_OPTIM_ADAMW);
    cfg.lr = 0.1;
    cfg.weight_decay = 0.01;
    assert_int_equal(ct_optim_create(&cfg, 1, &o, &err), 0);
    /* Step 1: p = 1*(1-0.1*0.01) = 0.999; m = 0.05, v = 0.00025; m/(1-0.9) = 0.5,
     * sqrt(v/(1-0.999)) = 0.5, so p -= 0.1 * 0.5/0.5 -> 0.899. */
    ct_optim_step(o, p, g);
    assert_float_equal(p[0], 0.899, 1e-6);
    assert_float_equal(((float *)ct_optim_state(o, 0))[0], 0.05, 1e-7);
    assert_float_equal(((float *)ct_optim_state(o, 1))[0], 0.00025, 1e-8);
    /* Step 2: p = 0.899*0.999 = 0.898101; a constant gradient keeps m_hat/sqrt(v_hat) = 1. */
    ct_optim_step(o, p, g);
    assert_float_equal(p[0], 0.798101, 3e-6);
    assert_int_equal(ct_optim_steps(o), 2);
    assert_string_equal(ct_optim_state_name(o, 1), "exp_avg_sq");
    ct_optim_free(o);
}

static void test_sgd_by_hand(void **state)
{
    ct_optim_config cfg;
    ct_optim *o;
    ct_error err;
    float p[2] = { 1.0f, 2.0f }, g[2] = { 1.0f, -1.0f };

    ct_optim_config_default(&cfg, CT_OPTIM_SGD);
    cfg.lr = 0.1;
    cfg.momentum = 0.9;
    cfg.weight_decay = 0.5;
    assert_int_equal(ct_optim_create(&cfg, 2, &o, &err), 0);
    /* g' = g + 0.5 p = (1.5, 0); buf = g'; p -= 0.1 buf -> (0.85, 2). */
    ct_optim_step(o, p, g);
    assert_float_equal(p[0], 0.85, 1e-6);
    assert_float_equal(p[1], 2.0, 1e-6);
    /* g' = (1 + 0.425, -1 + 1) = (1.425, 0); buf = 0.9*(1.5, 0) + g' = (2.775, 0); p -> (0.5725, 2). */
    ct_optim_step(o, p, g);
    assert_float_equal(p[0], 0.5725, 1e-6);
    assert_float_equal(((float *)ct_optim_state(o, 0))[0], 2.775, 1e-6);
    ct_optim_free(o);
}

static float from_bits(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

/* Round to nearest even on the 16 kept bits, against values worked out by hand. */
static void test_bf16_round(void **state)
{
    /* 1 + 2^-8 is exactly half way between 1 and 1 + 2^-7: ties go to the even (1.0). */
    assert_true(ct_bf16_round(1.0f + 0x1p-8f) == 1.0f);
    /* 1 + 3*2^-8 is half way between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up. */
    assert_true(ct_bf16_round(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
    /* Just above half way rounds up; just below rounds down. */
    assert_true(ct_bf16_round(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
    assert_true(ct_bf16_round(1.0f + 0x1p-8f - 0x1p-20f) == 1.0f);
    /* bf16 values are unchanged, negatives mirror positives, zero keeps its sign. */
    assert_true(ct_bf16_round(-3.140625f) == -3.140625f);
    assert_true(ct_bf16_round(-(1.0f + 3 * 0x1p-8f)) == -(1.0f + 0x1p-6f));
    assert_int_equal(to_bits(ct_bf16_round(-0.0f)), 0x80000000u);
    /* 0.1f (0x3dcccccd) -> 0x3dcd (0.10009765625). */
    assert_int_equal(to_bits(ct_bf16_round(0.1f)), 0x3dcd0000u);
    /* The carry crosses into the exponent; the largest floats round to infinity as a cast does. */
    assert_int_equal(to_bits(ct_bf16_round(from_bits(0x3f7fffffu))), 0x3f800000u);
    assert_true(isinf(ct_bf16_round(FLT_MAX)));
    assert_true(isinf(ct_bf16_round(INFINITY)) && ct_bf16_round(-INFINITY) < 0);
    /* NaN stays NaN, even one whose payload sits only in the dropped bits. */
    assert_true(isnan(ct_bf16_round(from_bits(0x7f800001u))));
    assert_true(isnan(ct_bf16_round(NAN)));
    /* Subnormals round like any other value. */
    assert_int_equal(to_bits(ct_bf16_round(from_bits(0x00008000u))), 0x00000000u);
    assert_int_equal(to_bits(ct_bf16_round(from_bits(0x00018000u))), 0x00020000u);
}

/* bf16-mixed on the CPU: its gradients are those of the model with bf16-rounded GEMM inputs, so
 * they stay within bf16's precision (2^-8 relative) of the fp32 gradients, and differ from them.
 * One layer (no ReLU): with a hidden layer, the rounding flips the odd unit whose pre-activation
 * is near 0 across the ReLU's kink, which moves the first layer's gradients by far more than 2^-8. */
static void test_mlp_bf16_mixed(void **state)
{
    int dims[] = { 32, 10 };
    enum { B = 16 };
    float x[B * 32];
    uint8_t y[B];
    ct_mlp *m;
    ct_rng rng;
    ct_error err;
    size_t n;
    float *g32;
    double l32, l16, num = 0, den = 0;

    assert_int_equal(ct_mlp_create(dims, 2, B, &m, &err), 0);
    ct_rng_seed(&rng, 11);
    ct_mlp_init(m, &rng);
    for (int i = 0; i < B * 32; i++)
        x[i] = (float)(2 * ct_rng_uniform(&rng) - 1);
    for (int i = 0; i < B; i++)
        y[i] = (uint8_t)(i % 10);
    n = ct_mlp_num_params(m);
    g32 = malloc(n * sizeof(float));
    l32 = ct_mlp_forward(m, x, y, B, NULL, NULL, NULL);
    assert_int_equal(ct_mlp_backward(m, B, NULL, NULL, NULL), 0);
    memcpy(g32, ct_mlp_grads(m), n * sizeof(float));

    assert_int_equal(ct_mlp_set_gemm_dtype(m, CT_DTYPE_F16, &err), CT_ENOTAVAIL);
    assert_int_equal(ct_mlp_set_gemm_dtype(m, CT_DTYPE_BF16, &err), 0);
    l16 = ct_mlp_forward(m, x, y, B, NULL, NULL, NULL);
    assert_int_equal(ct_mlp_backward(m, B, NULL, NULL, NULL), 0);
    for (size_t i = 0; i < n; i++) {
        double d = (double)((float *)ct_mlp_grads(m))[i] - g32[i];

        num += d * d;
        den += (double)g32[i] * g32[i];
    }
    print_message("# loss fp32 %.6f bf16-mixed %.6f; gradient relative L2 difference %.2e\n", l32 / B, l16 / B,
                  sqrt(num / den));
    assert_true(fabs(l16 - l32) / fabs(l32) < 1e-2);
    assert_true(sqrt(num / den) < 1e-2);
    assert_true(num > 0); /* the rounding really happened */
    /* Back to fp32: the same numbers as before, bit for bit. */
    assert_int_equal(ct_mlp_set_gemm_dtype(m, CT_DTYPE_F32, &err), 0);
    assert_true(ct_mlp_forward(m, x, y, B, NULL, NULL, NULL) == l32);
    free(g32);
    ct_mlp_free(m);
}

static void test_mlp_bad_shapes(void **state)
{
    int dims[] = { 784, 0, 10 };
    ct_mlp *m;
    ct_error err;

    assert_int_equal(ct_mlp_create(dims, 3, 128, &m, &err), CT_EINVAL);
    assert_null(m);
    assert_int_equal(ct_mlp_create(dims, 1, 128, &m, &err), CT_EINVAL);
}

/* --- the model seam's forward (engine/models/model.c) ------------------------------------------ */

struct ranges {
    size_t lo[4], count[4];
    int n, fail;
};

static int log_need(void *ctx, size_t offset, size_t count)
{
    struct ranges *r = ctx;

    r->lo[r->n] = offset;
    r->count[r->n++] = count;
    return r->fail;
}

/* A model whose forward announces its first half only (a model with a bug), or nothing when it
 * does not announce. */
static int half_forward(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                        ct_error *err)
{
    out->loss = out->count = out->correct = 0;
    return need ? need(ctx, 0, m->num_params / 2) : 0;
}

static const struct ct_model_ops half_ops = { .forward = half_forward };

static void test_model_forward_announcements(void **state)
{
    ct_model m = { .ops = &half_ops, .name = "half", .num_params = 100 };
    ct_batch b = { 0 };
    ct_model_sums sums;
    struct ranges r = { 0 };
    ct_error err;

    /* not announcing: the engine announces the whole array first, the model gets no callback */
    ct_error_clear(&err);
    assert_int_equal(ct_model_forward(&m, &b, log_need, &r, &sums, &err), 0);
    assert_int_equal(r.n, 1);
    assert_true(r.lo[0] == 0 && r.count[0] == 100);
    /* announcing, but not every parameter: an internal error naming the model and the gap */
    m.info.announces_params = 1;
    r = (struct ranges){ 0 };
    assert_int_equal(ct_model_forward(&m, &b, log_need, &r, &sums, &err), CT_EINTERNAL);
    assert_string_equal(err.id, "model-params-unannounced");
    assert_non_null(strstr(err.msg, "half"));
    assert_non_null(strstr(err.msg, "[0, 50) of 100"));
    /* the callback's failure comes back as its code, err untouched (the callback holds the message) */
    r = (struct ranges){ .fail = CT_ETIMEOUT };
    ct_error_clear(&err);
    assert_int_equal(ct_model_forward(&m, &b, log_need, &r, &sums, &err), CT_ETIMEOUT);
    assert_int_equal(err.code, 0);
    /* no callback: nothing to check */
    assert_int_equal(ct_model_forward(&m, &b, NULL, NULL, &sums, &err), 0);
}

/* ct_gemm against a double reference: every transposition, leading dimensions wider than the
 * matrices, with and without accumulating into C, fp32 and bf16 inputs. bf16: the reference takes
 * the bf16 values (products of two bf16 are exact in fp32), so both agree to fp32 summation error. */
static void check_gemm(int ta, int tb, int M, int N, int K, enum ct_dtype dt, int acc)
{
    int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
    size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb), *c = malloc(sizeof(float) * nc);
    uint16_t *ah = malloc(sizeof(uint16_t) * na), *bh = malloc(sizeof(uint16_t) * nb);
    ct_rng r;

    ct_rng_seed(&r, (uint64_t)(ta * 2 + tb + 7 * M + 13 * N + 17 * K + acc * 101 + dt));
    for (size_t i = 0; i < na; i++)
        a[i] = (float)ct_rng_uniform(&r) - 0.5f;
    for (size_t i = 0; i < nb; i++)
        b[i] = (float)ct_rng_uniform(&r) - 0.5f;
    for (size_t i = 0; i < nc; i++)
        c[i] = (float)ct_rng_uniform(&r);
    if (dt == CT_DTYPE_BF16) {
        ct_bf16_pack(a, ah, na);
        ct_bf16_pack(b, bh, nb);
        ct_bf16_round_array(a, a, na);
        ct_bf16_round_array(b, b, nb);
    }
    {
        double *ref = malloc(sizeof(double) * nc);

        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double sum = acc ? c[(size_t)m * ldc + n] : 0.0;

                for (int k = 0; k < K; k++)
                    sum += (double)a[ta ? (size_t)k * lda + m : (size_t)m * lda + k] *
                           b[tb ? (size_t)n * ldb + k : (size_t)k * ldb + n];
                ref[(size_t)m * ldc + n] = sum;
            }
        ct_gemm(ta, tb, M, N, K, dt == CT_DTYPE_BF16 ? (const void *)ah : a, lda,
                dt == CT_DTYPE_BF16 ? (const void *)bh : b, ldb, dt, acc, c, ldc);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++)
                assert_true(fabs(c[(size_t)m * ldc + n] - ref[(size_t)m * ldc + n]) < 1e-4 * (1.0 + K / 8.0));
        free(ref);
    }
    free(a);
    free(b);
    free(c);
    free(ah);
    free(bh);
}

/* ct_gemm_bf16 (bf16-true): bf16 A, B and C, the fp32 sum (plus C's old value) rounded once: each
 * result is the bf16 nearest to the exact value, give or take one bf16 ulp (the fp32 sum's order). */
static void check_gemm_bf16(int ta, int tb, int M, int N, int K, int acc)
{
    int lda = ta ? M + 1 : K + 2, ldb = tb ? K + 3 : N + 1, ldc = N + 2;
    size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    uint16_t *a = malloc(na * 2), *b = malloc(nb * 2), *c = malloc(nc * 2);
    ct_rng r;

    ct_rng_seed(&r, 7);
    for (size_t i = 0; i < na; i++)
        a[i] = ct_bf16_store((float)(2.0 * ct_rng_uniform(&r) - 1.0));
    for (size_t i = 0; i < nb; i++)
        b[i] = ct_bf16_store((float)(2.0 * ct_rng_uniform(&r) - 1.0));
    for (size_t i = 0; i < nc; i++)
        c[i] = ct_bf16_store((float)(2.0 * ct_rng_uniform(&r) - 1.0));
    {
        uint16_t *old = malloc(nc * 2);

        memcpy(old, c, nc * 2);
        ct_gemm_bf16(ta, tb, M, N, K, a, lda, b, ldb, acc, c, ldc);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double want = acc ? ct_bf16_load(old[(size_t)m * ldc + n]) : 0.0, got;

                for (int k = 0; k < K; k++)
                    want += (double)ct_bf16_load(a[ta ? (size_t)k * lda + m : (size_t)m * lda + k]) *
                            ct_bf16_load(b[tb ? (size_t)n * ldb + k : (size_t)k * ldb + n]);
                got = ct_bf16_load(c[(size_t)m * ldc + n]);
                assert_true(fabs(got - want) <= fabs(want) / 128.0 + 1e-6 * K);
            }
        free(old);
    }
    free(a);
    free(b);
    free(c);
}

static void test_gemm_bf16(void **state)
{
    int shapes[][3] = { { 7, 5, 3 }, { 64, 48, 96 }, { 33, 130, 17 }, { 1, 6, 5 }, { 6, 1, 5 } };

    (void)state;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int t = 0; t < 4; t++)
            for (int acc = 0; acc < 2; acc++)
                check_gemm_bf16(t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], acc);
}

/* ct_gemm_batched over a 2 x 3 grid of strided products (attention's layout: every product a view
 * into shared arrays) against each product computed alone by ct_gemm. */
static void check_gemm_batched(int ta, int tb, int M, int N, int K, enum ct_dtype dt)
{
    int n0 = 2, n1 = 3, lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 1;
    long ra = ta ? K : M, rb = tb ? N : K;
    struct ct_gemm_batch g = { n0, n1, n1 * ra * lda, ra * lda, n1 * rb * ldb, rb * ldb, n1 * (long)M * ldc,
                               (long)M * ldc };
    size_t na = (size_t)n0 * g.a0, nb = (size_t)n0 * g.b0, nc = (size_t)n0 * g.c0;
    float *af = malloc(na * 4), *bf = malloc(nb * 4), *c = calloc(nc, 4), *want = calloc(nc, 4);
    uint16_t *ah = malloc(na * 2), *bh = malloc(nb * 2), *ch = malloc(nc * 2);
    const void *a = af, *b = bf;
    ct_rng r;

    ct_rng_seed(&r, (uint64_t)(M * 131 + N * 17 + K + ta * 7 + tb * 3));
    for (size_t i = 0; i < na; i++)
        af[i] = ct_bf16_round((float)(2.0 * ct_rng_uniform(&r) - 1.0));
    for (size_t i = 0; i < nb; i++)
        bf[i] = ct_bf16_round((float)(2.0 * ct_rng_uniform(&r) - 1.0));
    if (dt == CT_DTYPE_BF16) {
        ct_bf16_pack(af, ah, na);
        ct_bf16_pack(bf, bh, nb);
        a = ah, b = bh;
    }
    /* on every CPU: where oneDNN has no bf16 matmul (AVX2, qemu -cpu Haswell, DNNL_MAX_CPU_ISA=AVX2)
     * the views are widened to fp32 and the products computed all the same */
    assert_int_equal(ct_gemm_batched(&g, ta, tb, M, N, K, a, lda, b, ldb, dt, c, ldc), 0);
    for (int i = 0; i < n0; i++)
        for (int j = 0; j < n1; j++)
            ct_gemm(ta, tb, M, N, K, af + i * g.a0 + j * g.a1, lda, bf + i * g.b0 + j * g.b1, ldb, CT_DTYPE_F32, 0,
                    want + i * g.c0 + j * g.c1, ldc);
    for (int i = 0; i < n0; i++)
        for (int j = 0; j < n1; j++)
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++) {
                    size_t at = (size_t)(i * g.c0 + j * g.c1) + (size_t)m * ldc + n;

                    assert_true(fabsf(c[at] - want[at]) <= 1e-5f * K);
                }
    /* ct_gemm_batched_to: the sums scaled by alpha (attention's 1/sqrt(head size)), stored as fp32,
     * or rounded once to bf16 (within half a bf16 ulp of the fp32 result, give or take its sum's order) */
    assert_int_equal(ct_gemm_batched_to(&g, ta, tb, M, N, K, a, lda, b, ldb, dt, 0.125f, CT_DTYPE_F32, c, ldc), 0);
    memset(ch, 0, nc * 2);
    if (dt == CT_DTYPE_BF16)
        assert_int_equal(ct_gemm_batched_to(&g, ta, tb, M, N, K, a, lda, b, ldb, dt, 0.125f, CT_DTYPE_BF16, ch, ldc),
                         0);
    for (int i = 0; i < n0; i++)
        for (int j = 0; j < n1; j++)
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++) {
                    size_t at = (size_t)(i * g.c0 + j * g.c1) + (size_t)m * ldc + n;
                    float w = 0.125f * want[at];

                    assert_true(fabsf(c[at] - w) <= 0.125f * 1e-5f * K);
                    if (dt == CT_DTYPE_BF16)
                        assert_true(fabsf(ct_bf16_load(ch[at]) - w) <= fabsf(w) / 256.0f + 0.125f * 1e-5f * K);
                }
    free(af);
    free(bf);
    free(ah);
    free(bh);
    free(ch);
    free(c);
    free(want);
}

/* ct_gemm_bias and ct_gemm_bf16_bias (a Linear's forward, oneDNN adding the bias as it stores C)
 * against C filled with the bias and an accumulating ct_gemm / ct_gemm_bf16: fp32 within the sum's
 * order, bf16 within one bf16 ulp. */
static void test_gemm_bias(void **state)
{
    int shapes[][3] = { { 64, 48, 96 }, { 33, 130, 17 }, { 7, 5, 3 } };

    (void)state;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int dt = 0; dt < 3; dt++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldc = N + 3;
            float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * N * K), *bias = malloc(4 * N);
            float *c = calloc((size_t)M * ldc, 4), *want = calloc((size_t)M * ldc, 4);
            uint16_t *ah = malloc(2 * M * K), *bh = malloc(2 * N * K), *biash = malloc(2 * N);
            uint16_t *ch = calloc((size_t)M * ldc, 2), *wanth = calloc((size_t)M * ldc, 2);
            ct_rng r;

            ct_rng_seed(&r, (uint64_t)(M + N + K + dt));
            for (int i = 0; i < M * K; i++)
                a[i] = ct_bf16_round((float)ct_rng_uniform(&r) - 0.5f);
            for (int i = 0; i < N * K; i++)
                b[i] = ct_bf16_round((float)ct_rng_uniform(&r) - 0.5f);
            for (int i = 0; i < N; i++)
                bias[i] = ct_bf16_round((float)ct_rng_uniform(&r) - 0.5f);
            ct_bf16_pack(a, ah, (size_t)M * K);
            ct_bf16_pack(b, bh, (size_t)N * K);
            ct_bf16_pack(bias, biash, (size_t)N);
            for (int i = 0; i < M; i++) {
                memcpy(want + (size_t)i * ldc, bias, 4 * (size_t)N);
                memcpy(wanth + (size_t)i * ldc, biash, 2 * (size_t)N);
            }
            /* dt 0: fp32, 1: bf16 inputs into fp32, 2: bf16 throughout; W transposed, as a Linear's */
            if (dt == 2) {
                ct_gemm_bf16(0, 1, M, N, K, ah, K, bh, K, 1, wanth, ldc);
                ct_gemm_bf16_bias(0, 1, M, N, K, ah, K, bh, K, biash, ch, ldc);
            } else {
                ct_gemm(0, 1, M, N, K, dt ? (const void *)ah : a, K, dt ? (const void *)bh : b, K,
                        dt ? CT_DTYPE_BF16 : CT_DTYPE_F32, 1, want, ldc);
                ct_gemm_bias(0, 1, M, N, K, dt ? (const void *)ah : a, K, dt ? (const void *)bh : b, K,
                             dt ? CT_DTYPE_BF16 : CT_DTYPE_F32, bias, c, ldc);
            }
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    size_t at = (size_t)i * ldc + j;

                    if (dt == 2)
                        assert_true(fabsf(ct_bf16_load(ch[at]) - ct_bf16_load(wanth[at])) <=
                                    fabsf(ct_bf16_load(wanth[at])) / 128.0f + 1e-6f * K);
                    else
                        assert_true(fabsf(c[at] - want[at]) <= 1e-5f * K);
                }
            free(a), free(b), free(bias), free(c), free(want), free(ah), free(bh), free(biash), free(ch), free(wanth);
        }
}

/* ct_gemm and ct_gemm_bf16 from inside an OpenMP parallel region, two threads each running its own
 * product at once (the GPT's backward does so with a layer's weight and input gradients on a team
 * of two): each equals the same product run on the whole team outside, within the fp32 sum's
 * order (bf16 results: one bf16 ulp). The shapes are large enough for oneDNN to split a product
 * among a team. */
static void test_gemm_in_parallel(void **state)
{
    int threads = omp_get_max_threads(), team = 0, shapes[2][5] = { { 1, 0, 96, 80, 512 }, { 0, 0, 512, 80, 96 } };
    size_t n = 512 * 96;
    float *a = malloc(n * 4), *b = malloc(n * 4), *want[2], *got[2];
    uint16_t *ah = malloc(n * 2), *bh = malloc(n * 2), *wantb[2], *gotb[2];
    ct_rng r;

    (void)state;
    ct_rng_seed(&r, 11);
    for (size_t i = 0; i < n; i++) {
        a[i] = ct_bf16_round((float)ct_rng_uniform(&r) - 0.5f);
        b[i] = ct_bf16_round((float)ct_rng_uniform(&r) - 0.5f);
    }
    ct_bf16_pack(a, ah, n);
    ct_bf16_pack(b, bh, n);
    omp_set_num_threads(2);
    for (int dt = 0; dt < 3; dt++) {
        for (int i = 0; i < 2; i++) {
            want[i] = calloc(n, 4), got[i] = calloc(n, 4);
            wantb[i] = calloc(n, 2), gotb[i] = calloc(n, 2);
        }
        /* dt 0: fp32, 1: bf16 inputs into fp32, 2: bf16 throughout (ct_gemm_bf16) */
#define PRODUCT(s, c, cb)                                                                                             \
    (dt == 2 ? ct_gemm_bf16(s[0], s[1], s[2], s[3], s[4], ah, s[0] ? s[2] : s[4], bh, s[3], 0, cb, s[3])              \
             : ct_gemm(s[0], s[1], s[2], s[3], s[4], dt ? (const void *)ah : a, s[0] ? s[2] : s[4],                    \
                       dt ? (const void *)bh : b, s[3], dt ? CT_DTYPE_BF16 : CT_DTYPE_F32, 0, c, s[3]))
        for (int i = 0; i < 2; i++)
            PRODUCT(shapes[i], want[i], wantb[i]);
#pragma omp parallel num_threads(2)
        {
            int t = omp_get_thread_num();

            if (t == 0)
                team = omp_get_num_threads();
            PRODUCT(shapes[t], got[t], gotb[t]);
        }
#undef PRODUCT
        assert_int_equal(team, 2);
        for (int i = 0; i < 2; i++) {
            for (size_t k = 0; k < (size_t)shapes[i][2] * shapes[i][3]; k++) {
                if (dt == 2) {
                    float w = ct_bf16_load(wantb[i][k]);

                    assert_true(fabsf(ct_bf16_load(gotb[i][k]) - w) <= fabsf(w) / 128.0f + 1e-6f * shapes[i][4]);
                } else {
                    assert_true(fabsf(got[i][k] - want[i][k]) <= 1e-5f * shapes[i][4]);
                }
            }
            free(want[i]), free(got[i]), free(wantb[i]), free(gotb[i]);
        }
    }
    omp_set_num_threads(threads);
    free(a);
    free(b);
    free(ah);
    free(bh);
}

/* Which library computes an fp32 product, read from the CPU (cpuid, as oneDNN and OpenBLAS read it;
 * qemu-x86_64 -cpu Haswell hides AVX-512 from all three): on an x86-64 CPU without AVX-512 the
 * weight gradient's C = A^T B runs on OpenBLAS (faster there, issue 47), its bf16 form widened onto
 * it; forward's A B^T and backward's A B stay on oneDNN; on any other CPU nothing moves to OpenBLAS.
 * The same answer every time it is asked (every run and rank takes the same path). Such a product
 * made on one thread of a team runs on one OpenBLAS thread, and the team's count comes back for
 * the next product on the whole team. */
static void test_gemm_library(void **state)
{
    int blas = ct_cpu_avx512() == 0, threads = omp_get_max_threads(), inside = 0;
    size_t n = 512 * 96;
    float *a = calloc(n, 4), *b = calloc(n, 4), *c = calloc(n, 4);

    (void)state;
    for (int i = 0; i < 2; i++) {
        const char *at = ct_gemm_impl(1, 0, 96, 80, 512, 96, 80, CT_DTYPE_F32, 0, 80);

        assert_int_equal(!strcmp(at, "openblas"), blas);
        assert_string_not_equal(ct_gemm_impl(0, 1, 512, 80, 96, 96, 96, CT_DTYPE_F32, 0, 80), "openblas");
        assert_string_not_equal(ct_gemm_impl(0, 0, 512, 80, 96, 96, 80, CT_DTYPE_F32, 0, 80), "openblas");
        if (!ct_gemm_bf16_native())
            assert_int_equal(!strcmp(ct_gemm_impl(1, 0, 96, 80, 512, 96, 80, CT_DTYPE_BF16, 0, 80),
                                     "widened:openblas"), blas);
    }
    ct_gemm_set_blas_threads(2);
    omp_set_num_threads(2);
#pragma omp parallel num_threads(2)
    {
        ct_gemm(1, 0, 96, 80, 512, a, 96, b, 80, CT_DTYPE_F32, 0, c, 80);
#pragma omp barrier
        if (omp_get_thread_num() == 0)
            inside = openblas_get_num_threads();
    }
    if (blas)
        assert_int_equal(inside, 1);
    ct_gemm_blas_team();
    assert_int_equal(openblas_get_num_threads(), 2);
    omp_set_num_threads(threads);
    free(a), free(b), free(c);
}

static void test_gemm_batched(void **state)
{
    int shapes[][3] = { { 32, 128, 64 }, { 7, 5, 3 }, { 32, 64, 96 } };

    (void)state;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int t = 0; t < 4; t++) {
            check_gemm_batched(t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], CT_DTYPE_F32);
            check_gemm_batched(t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], CT_DTYPE_BF16);
        }
}

static void test_gemm(void **state)
{
    /* M, N, K; with single rows and columns (a weight gradient's row blocks are M = 1, transposed A:
     * oneDNN 3.7 got those wrong with a unit stride on the size-1 dimension) */
    int shapes[][3] = { { 7, 5, 3 }, { 64, 48, 96 }, { 33, 130, 17 }, { 1, 6, 5 }, { 6, 1, 5 }, { 6, 5, 1 }, { 1, 1, 7 } };

    (void)state;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int t = 0; t < 4; t++)
            for (int acc = 0; acc < 2; acc++) {
                check_gemm(t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], CT_DTYPE_F32, acc);
                check_gemm(t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], CT_DTYPE_BF16, acc);
            }
    /* where oneDNN has no bf16 matmul (asked of oneDNN, which reads the CPU: AVX2, qemu -cpu Haswell,
     * or held to AVX2 by t/01-nn-avx2.t) the bf16 products above ran widened to fp32 */
    if (!ct_gemm_bf16_native())
        assert_true(!strncmp(ct_gemm_impl(0, 1, 64, 48, 96, 99, 101, CT_DTYPE_BF16, 0, 50), "widened:", 8));
    else
        assert_true(strncmp(ct_gemm_impl(0, 1, 64, 48, 96, 99, 101, CT_DTYPE_BF16, 0, 50), "widened:", 8));
    /* bf16 packing: round to nearest even, NaN stays NaN, as ct_bf16_round */
    {
        float in[5] = { 1.0f + 1.0f / 256.0f, 1.0f + 3.0f / 256.0f, -2.5f, NAN, 3.0e38f }, back;
        uint16_t h[5];

        ct_bf16_pack(in, h, 5);
        for (int i = 0; i < 5; i++) {
            uint32_t u = (uint32_t)h[i] << 16;

            memcpy(&back, &u, sizeof(back));
            if (isnan(in[i]))
                assert_true(isnan(back));
            else
                assert_true(back == ct_bf16_round(in[i]));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_linear_forward),
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_mlp_gradients),
        cmocka_unit_test(test_adamw_by_hand),
        cmocka_unit_test(test_sgd_by_hand),
        cmocka_unit_test(test_mlp_bad_shapes),
        cmocka_unit_test(test_bf16_round),
        cmocka_unit_test(test_mlp_bf16_mixed),
        cmocka_unit_test(test_model_forward_announcements),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_adamw_f64),
        cmocka_unit_test(test_adamw_bf16),
        cmocka_unit_test(test_gemm_bf16),
        cmocka_unit_test(test_gemm_batched),
        cmocka_unit_test(test_gemm_library),
        cmocka_unit_test(test_gemm_in_parallel),
        cmocka_unit_test(test_gemm_bias),
        cmocka_unit_test(test_mlp_param_dtype),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
