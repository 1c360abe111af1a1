/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helper: the cuda accelerator and the CUDA MLP against the cpu implementation (TAP).
 *
 *   cuda_check probe   prints "available N" or "unavailable: WHY" (exit 0 / 1)
 *   cuda_check         TAP: without a device every test is "# SKIP no CUDA device (WHY)"; with one,
 *                      forward, gradients and the AdamW update of the device MLP against the cpu
 *                      MLP in fp32, bf16-mixed against the cpu's bf16-mixed, 16-mixed's scaled
 *                      gradients against fp32, the refusal of an out-of-range label and of an
 *                      empty batch, and the device memory stats.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/accelerator.h"
#include "ctrain/engine.h"
#include "ctrain/nn.h"
#include "ctrain/registry.h"

#ifdef CT_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/models/mlp/mlp_cuda.h"
#endif

#define N_TESTS 10

static const struct ct_accelerator_ops *cuda_ops(void)
{
    const ct_registry_entry *e;

    ct_engine_init();
    e = ct_registry_find(CT_REG_ACCELERATOR, "cuda");
    return e ? e->ops : NULL;
}

/* 1 with the device count in *n, else 0 with the reason in why. */
static int probe(char *why, size_t size, int *n)
{
    const struct ct_accelerator_ops *ops = cuda_ops();

    *n = 0;
    if (!ops) {
        snprintf(why, size, "this build of ctrain has no CUDA support");
        return 0;
    }
    if (!ops->is_available(why, size))
        return 0;
    *n = ops->device_count();
    return 1;
}

#ifdef CT_HAVE_CUDA
static int n_done;

static void tap(int ok, const char *what)
{
    printf("%sok %d - %s\n", ok ? "" : "not ", ++n_done, what);
}

enum { B = 37 };
static const int dims[] = { 64, 48, 32, 10 };
/* 16-mixed is compared with fp32, not with an fp16 emulation: one layer, no ReLU, whose kink would
 * let fp16's rounding flip the odd unit near 0 and move the first layer's gradients by more than
 * fp16's precision (bf16-mixed is compared with the cpu's own bf16-mixed, so it keeps the ReLUs). */
static const int dims_linear[] = { 64, 10 };

/* Relative L2 distance of a (device or host) from ref (host). */
static double rel_l2(const float *a, const float *ref, size_t n, double scale)
{
    double num = 0, den = 0;

    for (size_t i = 0; i < n; i++) {
        double d = a[i] / scale - ref[i];

        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int make_model(const int *d, int nd, ct_mlp **m, ct_optim **o, float *x, uint8_t *y)
{
    ct_optim_config oc;
    ct_error err;
    ct_rng r;

    ct_optim_config_default(&oc, CT_OPTIM_ADAMW);
    if (ct_mlp_create(d, nd, B, m, &err) || ct_optim_create(&oc, ct_mlp_num_params(*m), o, &err))
        return -1;
    ct_rng_seed(&r, 5);
    ct_mlp_init(*m, &r);
    for (int i = 0; i < B * dims[0]; i++)
        x[i] = (float)(2 * ct_rng_uniform(&r) - 1);
    for (int i = 0; i < B; i++)
        y[i] = (uint8_t)(ct_rng_uniform(&r) * 10) % 10;
    return 0;
}

/* Forward and backward of the device model on x, y; its gradients copied into g. */
static int device_grads(ct_mlp *m, ct_optim *o, enum ct_dtype t, const float *x, const uint8_t *y, float *g,
                        double *loss, ct_mlp_cuda **out)
{
    ct_mlp_cuda *d;
    ct_error err;
    if (ct_mlp_cuda_create(m, o, B, t, &d, &err)) {
        printf("# %s\n", err.msg);
        return -1;
    }
    memcpy(ct_mlp_cuda_batch_x(d), x, sizeof(float) * B * dims[0]);
    memcpy(ct_mlp_cuda_batch_y(d), y, B);
    if (ct_mlp_cuda_forward(d, B, loss, NULL, &err) || ct_mlp_cuda_backward(d, B, NULL, NULL, &err) ||
        ct_mlp_cuda_grads_copy(d, g, 0, &err)) {
        printf("# %s\n", err.msg);
        ct_mlp_cuda_free(d);
        return -1;
    }
    *out = d;
    return 0;
}

static void run_checks(void)
{
    float x[B * 64], *g32, *gd, *p_cpu;
    uint8_t y[B];
    ct_mlp *m;
    ct_optim *o;
    ct_mlp_cuda *d = NULL;
    ct_error err;
    double lc, ld, e;
    size_t n;
    int skipped = 0;
    char what[160];

    if (make_model(dims, 4, &m, &o, x, y)) {
        printf("Bail out! cannot build the cpu model\n");
        exit(1);
    }
    n = ct_mlp_num_params(m);
    g32 = malloc(n * sizeof(float));
    gd = malloc(n * sizeof(float));
    p_cpu = malloc(n * sizeof(float));
    lc = ct_mlp_forward(m, x, y, B, NULL, NULL, NULL);
    ct_mlp_backward(m, B, NULL, NULL, NULL);
    memcpy(g32, ct_mlp_grads(m), n * sizeof(float));

    /* 32-true: the same numbers up to summation order. */
    tap(device_grads(m, o, CT_DTYPE_F32, x, y, gd, &ld, &d) == 0, "fp32 device model forward and backward run");
    snprintf(what, sizeof(what), "fp32 loss %.6f equals the cpu's %.6f", ld / B, lc / B);
    tap(d && fabs(ld - lc) <= 1e-5 * fabs(lc), what);
    e = rel_l2(gd, g32, n, 1.0);
    snprintf(what, sizeof(what), "fp32 gradients equal the cpu's (relative L2 %.2e < 1e-5)", e);
    tap(d && e < 1e-5, what);
    /* One AdamW update on each side from the same state and the same (cpu) gradients: the kernel
     * alone (from the device's own gradients, a near-zero one of the other sign would move a
     * parameter by 2 lr at AdamW's first step). */
    ct_optim_step(o, ct_mlp_params(m), g32);
    memcpy(p_cpu, ct_mlp_params(m), n * sizeof(float));
    ct_optim_set_steps(o, 0);
    e = 1;
    if (d && ct_mlp_cuda_grads_copy(d, g32, 1, &err) == 0 &&
        ct_mlp_cuda_optim_step(d, o, &skipped, &err) == 0 && ct_mlp_cuda_to_host(d, m, NULL, &err) == 0)
        e = rel_l2(ct_mlp_params(m), p_cpu, n, 1.0);
    snprintf(what, sizeof(what), "AdamW update on the device equals the cpu's (relative L2 %.2e < 1e-6)", e);
    tap(e < 1e-6, what);
    ct_mlp_cuda_free(d);
    d = NULL;
    ct_mlp_free(m);
    ct_optim_free(o);
    make_model(dims, 4, &m, &o, x, y);

    /* bf16-mixed: the cpu emulation rounds the same inputs the same way (RNE). */
    ct_mlp_set_gemm_dtype(m, CT_DTYPE_BF16, &err);
    ct_mlp_forward(m, x, y, B, NULL, NULL, NULL);
    ct_mlp_backward(m, B, NULL, NULL, NULL);
    e = 1;
    if (device_grads(m, o, CT_DTYPE_BF16, x, y, gd, &ld, &d) == 0)
        e = rel_l2(gd, ct_mlp_grads(m), n, 1.0);
    snprintf(what, sizeof(what), "bf16-mixed gradients equal the cpu's bf16-mixed (relative L2 %.2e < 1e-3)", e);
    tap(e < 1e-3, what);
    ct_mlp_cuda_free(d);
    d = NULL;

    /* 16-mixed: gradients come scaled by the loss scale; unscaled they are fp32's within fp16's precision. */
    ct_mlp_free(m);
    ct_optim_free(o);
    make_model(dims_linear, 2, &m, &o, x, y);
    n = ct_mlp_num_params(m);
    ct_mlp_forward(m, x, y, B, NULL, NULL, NULL);
    ct_mlp_backward(m, B, NULL, NULL, NULL);
    memcpy(g32, ct_mlp_grads(m), n * sizeof(float));
    e = 1;
    if (device_grads(m, o, CT_DTYPE_F16, x, y, gd, &ld, &d) == 0)
        e = rel_l2(gd, g32, n, ct_mlp_cuda_loss_scale(d));
    snprintf(what, sizeof(what), "16-mixed unscaled gradients match fp32 (relative L2 %.2e < 5e-3)", e);
    tap(e < 5e-3, what);
    tap(d && ct_mlp_cuda_optim_step(d, o, &skipped, &err) == 0 && !skipped && ct_mlp_cuda_skipped_steps(d) == 0,
        "16-mixed: a finite step is not skipped");

    /* Bad input is an error, not a wild write or an empty launch: a label past the classes (the
     * kernel reports it), and a batch of 0. */
    if (d) {
        double l;
        int rc;

        ct_mlp_cuda_batch_y(d)[3] = 200;
        rc = ct_mlp_cuda_forward(d, B, &l, NULL, &err);
        printf("# %s\n", rc ? err.msg : "no error");
        tap(rc == CT_EINVAL && strstr(err.msg, "label 200 of sample 3") &&
                ct_mlp_cuda_backward(d, B, NULL, NULL, &err) == CT_EINVAL,
            "an out-of-range label is an error naming it (forward), and backward refuses to run");
        ct_mlp_cuda_batch_y(d)[3] = 1;
        rc = ct_mlp_cuda_forward(d, 0, &l, NULL, &err);
        tap(rc == CT_EINVAL && ct_mlp_cuda_forward(d, B, &l, NULL, &err) == 0,
            "a batch of 0 is refused before any launch; the next good batch runs");
    } else {
        tap(0, "an out-of-range label is an error (no device model)");
        tap(0, "a batch of 0 is refused (no device model)");
    }

    /* Memory stats: the allocator's peak covers the model; total is the device's. */
    {
        const struct ct_accelerator_ops *ops = cuda_ops();
        ct_memstats ms;

        tap(ops->memory_stats(0, &ms) == 0 && ms.peak_bytes >= n * sizeof(float) * 2 && ms.total_bytes > ms.peak_bytes,
            "memory stats: allocator peak and device total");
    }
    ct_mlp_cuda_free(d);
    ct_mlp_free(m);
    ct_optim_free(o);
    free(g32);
    free(gd);
    free(p_cpu);
}
#endif

int main(int argc, char **argv)
{
    char why[256];
    int n;

    if (argc > 1 && !strcmp(argv[1], "probe")) {
        if (probe(why, sizeof(why), &n)) {
            printf("available %d\n", n);
            return 0;
        }
        printf("unavailable: %s\n", why);
        return 1;
    }
    printf("1..%d\n", N_TESTS);
    if (!probe(why, sizeof(why), &n)) {
        for (int i = 1; i <= N_TESTS; i++)
            printf("ok %d # SKIP no CUDA device (%s)\n", i, why);
        return 0;
    }
#ifdef CT_HAVE_CUDA
    {
        ct_error err;

        if (cuda_ops()->set_device(0, &err)) {
            printf("Bail out! %s\n", err.msg);
            return 1;
        }
    }
    run_checks();
#endif
    return 0;
}
