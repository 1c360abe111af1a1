/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helper: the CUDA GPT (engine/models/gpt/gpt_cuda.cu) against the cpu GPT, driven directly
 * (the connector still refuses --model gpt --accelerator cuda until this passes on a GPU). TAP.
 *
 *   gpt_cuda_check           without a device (or a CUDA build): "1..0 # SKIP why". With one, per
 *                            configuration, precision (32-true, bf16-mixed) and attention path
 *                            (simple, flash; cuBLASLt's epilogues on and off): one batch's loss and
 *                            every gradient tensor against the cpu GPT's (relative L2 error per
 *                            tensor <= 1e-4 in 32-true, <= 1e-2 in bf16-mixed), the announcement
 *                            order, a second backward bit for bit (determinism), the gradient norm,
 *                            clipping, one AdamW update against the cpu's, the parameters' trip
 *                            to the host model and back, a target outside the vocabulary refused,
 *                            a smaller batch after the full ones, the deferred loss read late, and
 *                            (bf16-mixed) the fused classifier on bf16 logits against its host
 *                            reference and the fp32 path. The small shape again with the forward in a
 *                            CUDA graph (its captured second step the same bits as the eager first).
 *   gpt_cuda_check --bench   also the ms per training step (forward, backward, AdamW) of a GPT-2
 *                            small shape (12 layers, 768 channels, 12 heads, 1024 tokens, batch 8)
 *                            in bf16-mixed with either attention path (the simple one with and
 *                            without the forward in a CUDA graph), as TAP comments.
 *   gpt_cuda_check --quick   the small and odd shapes only (every kernel, partial blocks and warps
 *                            included, without the 1024-token one): what scripts/gpu-check runs under
 *                            compute-sanitizer, which slows kernels 10-100 times.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctrain/accelerator.h"
#include "ctrain/engine.h"
#include "ctrain/nn.h"
#include "ctrain/registry.h"
#include "ctrain/rng.h"
#include "engine/models/gpt/gpt.h"

#ifdef CT_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/models/gpt/gpt_cuda.h"
#include "engine/nn/bf16_inline.h"
#include "engine/nn/cuda_device.h"

static int n_done, n_failed;

static void tap(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tap(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%sok %d - ", ok ? "" : "not ", ++n_done);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    n_failed += !ok;
}

struct record {
    size_t *off;
    int n, max;
};

static int record(void *ctx, size_t offset, size_t count)
{
    struct record *r = ctx;

    (void)count;
    if (r->n < r->max)
        r->off[r->n] = offset;
    r->n++;
    return 0;
}

/* ||a - b|| / ||b|| (||a|| when b is all zeros). */
static double rel_l2(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;

    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

static int dev_to_host(float *dst, const float *src, size_t n)
{
    return cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess;
}

struct run {
    const char *name;
    ct_gpt_config cfg;
    int batch;
    enum ct_dtype gemm;
    enum ct_gpt_cuda_attention att;
    int no_epilogues;
    int graph;
};

static void fill_tokens(int32_t *in, int32_t *tg, size_t n, int vocab, uint64_t seed)
{
    ct_rng r;

    ct_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        in[i] = (int32_t)ct_rng_below(&r, (uint64_t)vocab);
        tg[i] = (int32_t)ct_rng_below(&r, (uint64_t)vocab);
    }
}

/* bf16-mixed: the fused classifier over bf16 logits (what the LM head's GEMM writes) on rows of
 * random logits, against its host reference (ct_gpt_cuda_classifier_ref: the kernel's arithmetic;
 * each row's loss within 1e-5 relative, each gradient within one bf16 rounding, 2^-7 relative: the
 * orders of the fp32 sums differ) and against the fp32 path on the unrounded logits (the mean loss
 * within 1e-2 relative: bf16 keeps 8 bits of a logit). Run last: it overwrites the model's logits. */
static void check_classifier(ct_gpt_cuda *dev, const struct run *rn, const char *label)
{
    int V = rn->cfg.vocab, vp = ct_gpt_cuda_padded_vocab(V), rows = rn->batch * rn->cfg.seq_len;
    size_t cells = (size_t)rows * vp;
    uint16_t *x = calloc(cells, 2), *ref = calloc(cells, 2);
    float *x32 = calloc(cells, 4), *losses = calloc((size_t)rows, 4);
    int32_t *tg = calloc((size_t)rows, 4);
    double worst_loss = 0, worst_grad = 0, mean_bf16 = 0, mean_f32 = 0;
    ct_error err;
    ct_rng r;
    int ok;

    if (!x || !ref || !x32 || !losses || !tg) {
        tap(0, "%s: the classifier check: out of memory", label);
        goto out;
    }
    ct_rng_seed(&r, 21);
    for (int i = 0; i < rows; i++) {
        tg[i] = (int32_t)ct_rng_below(&r, (uint64_t)V);
        for (int j = 0; j < V; j++) {
            x32[(size_t)i * vp + j] = (float)ct_rng_below(&r, 1u << 20) / (1u << 20) * 16.0f - 8.0f;
            x[(size_t)i * vp + j] = ct_bf16_store(x32[(size_t)i * vp + j]);
        }
    }
    memcpy(ref, x, cells * 2);
    ok = ct_gpt_cuda_classifier_rows(dev, x, tg, rows, losses, &err) == 0;
    for (int i = 0; ok && i < rows; i++) {
        const float *row = x32 + (size_t)i * vp;
        float want = ct_gpt_cuda_classifier_ref(ref + (size_t)i * vp, V, tg[i], ref + (size_t)i * vp);
        double m = -INFINITY, sum = 0;

        worst_loss = fmax(worst_loss, fabs(losses[i] - want) / fabs(want));
        for (int j = 0; j < V; j++) {
            double a = ct_bf16_load(x[(size_t)i * vp + j]), b = ct_bf16_load(ref[(size_t)i * vp + j]);

            if (fabs(a - b) > fmax(fabs(a), fabs(b)) / 128)
                worst_grad = fmax(worst_grad, fabs(a - b) / fmax(fabs(a), fabs(b)));
            m = fmax(m, row[j]);
        }
        for (int j = 0; j < V; j++)
            sum += exp(row[j] - m);
        mean_bf16 += losses[i] / rows;
        mean_f32 += (log(sum) - (row[tg[i]] - m)) / rows;
    }
    tap(ok && worst_loss <= 1e-5 && worst_grad == 0, "%s: the fused classifier on bf16 logits against its host "
        "reference (%d rows: loss relative %.2e, gradients beyond one bf16 rounding %.2e)%s%s", label, rows, worst_loss,
        worst_grad, ok ? "" : ": ", ok ? "" : err.msg);
    tap(ok && fabs(mean_bf16 - mean_f32) <= 1e-2 * mean_f32, "%s: the bf16 logits' mean loss %.6f against the fp32 "
        "path's %.6f (at most 1e-2 relative)", label, mean_bf16, mean_f32);
out:
    free(x);
    free(ref);
    free(x32);
    free(losses);
    free(tg);
}

/* Every check of one configuration; the cpu GPT is the reference. */
static void check_run(const struct run *rn)
{
    const double tol = rn->gemm == CT_DTYPE_BF16 ? 1e-2 : 1e-4;
    const char *prec = rn->gemm == CT_DTYPE_BF16 ? "bf16-mixed" : "32-true";
    const char *att = rn->att == CT_GPT_ATT_FLASH ? "flash" : "simple";
    ct_gpt_cuda_options opt = { rn->att, rn->no_epilogues, rn->graph };
    size_t BT = (size_t)rn->batch * rn->cfg.seq_len, n;
    ct_gpt *cpu = NULL, *back = NULL;
    ct_gpt_cuda *dev = NULL;
    ct_optim *ocpu = NULL, *odev = NULL;
    ct_optim_config oc;
    struct record rc_cpu = { 0 }, rc_dev = { 0 };
    float *g, *g2, *p;
    double loss_cpu, loss_dev = 0, loss_upd = NAN, worst = 0, norm_cpu = 0, norm_dev = 0, t_ratio;
    char label[160];
    ct_error err;
    ct_rng r;
    int ok;

    snprintf(label, sizeof(label), "%s %s %s attention%s", rn->name, prec, att,
             rn->no_epilogues ? " (no epilogues)" : rn->graph ? " (forward in a CUDA graph)" : "");
    if (ct_gpt_create(&rn->cfg, rn->batch, &cpu, &err) || ct_gpt_set_gemm_dtype(cpu, rn->gemm, &err) ||
        ct_gpt_create(&rn->cfg, rn->batch, &back, &err)) {
        tap(0, "%s: cpu model: %s", label, err.msg);
        goto out;
    }
    ct_rng_seed(&r, 11);
    ct_gpt_init(cpu, &r);
    n = ct_gpt_num_params(cpu);
    ct_optim_config_default(&oc, CT_OPTIM_ADAMW);
    oc.lr = 1e-3;
    if (ct_optim_create(&oc, n, &ocpu, &err) || ct_optim_create(&oc, n, &odev, &err)) {
        tap(0, "%s: optimizer: %s", label, err.msg);
        goto out;
    }
    if (ct_gpt_cuda_create(cpu, odev, rn->batch, rn->gemm, &opt, &dev, &err)) {
        tap(0, "%s: ct_gpt_cuda_create: %s", label, err.msg);
        goto out;
    }
    g = malloc(n * sizeof(float));
    g2 = malloc(n * sizeof(float));
    p = malloc(n * sizeof(float));
    rc_cpu.max = rc_dev.max = ct_gpt_num_tensors(cpu);
    rc_cpu.off = calloc((size_t)rc_cpu.max, sizeof(size_t));
    rc_dev.off = calloc((size_t)rc_dev.max, sizeof(size_t));

    /* one batch forward and backward on both */
    fill_tokens(ct_gpt_cuda_batch_inputs(dev), ct_gpt_cuda_batch_targets(dev), BT, rn->cfg.vocab, 5);
    loss_cpu = ct_gpt_forward(cpu, ct_gpt_cuda_batch_inputs(dev), ct_gpt_cuda_batch_targets(dev), rn->batch, NULL, NULL);
    ok = ct_gpt_cuda_forward(dev, rn->batch, &loss_dev, &err) == 0;
    tap(ok && fabs(loss_dev - loss_cpu) <= tol * fabs(loss_cpu), "%s: loss %.6f against the cpu's %.6f%s%s", label,
        loss_dev / BT, loss_cpu / BT, ok ? "" : ": ", ok ? "" : err.msg);
    ct_gpt_backward(cpu, (double)BT, NULL, record, &rc_cpu);
    ok = ct_gpt_cuda_backward(dev, (double)BT, record, &rc_dev, &err) == 0 && dev_to_host(g, ct_gpt_cuda_grads(dev), n) == 0;
    tap(ok, "%s: backward%s%s", label, ok ? "" : ": ", ok ? "" : err.msg);
    for (int i = 0; ok && i < ct_gpt_num_tensors(cpu); i++) {
        const ct_tensor *t = ct_gpt_tensor(cpu, i);
        double e = rel_l2(g + t->offset, (const float *)ct_gpt_grads(cpu) + t->offset, t->numel);

        worst = e > worst ? e : worst;
        tap(e <= tol, "%s: gradient of %s, relative error %.2e (at most %.0e)", label, t->name, e, tol);
    }
    printf("# %s: worst gradient relative error %.2e\n", label, worst);
    tap(rc_dev.n == rc_cpu.n && !memcmp(rc_dev.off, rc_cpu.off, sizeof(size_t) * (size_t)rc_cpu.max),
        "%s: %d gradient ranges announced in the cpu GPT's order", label, rc_dev.n);

    /* determinism: the same batch again gives the same bits */
    ok = ct_gpt_cuda_forward(dev, rn->batch, &t_ratio, &err) == 0 &&
         ct_gpt_cuda_backward(dev, (double)BT, NULL, NULL, &err) == 0 && dev_to_host(g2, ct_gpt_cuda_grads(dev), n) == 0;
    tap(ok && t_ratio == loss_dev && !memcmp(g, g2, n * sizeof(float)), "%s: a second step gives the same loss and "
        "gradients bit for bit", label);

    /* the training loop's deferred loss: two forwards that leave it on the device, read a step late
     * (back 1) and at a drain (back 0), the same bits as the waited-for one; none kept further back */
    {
        double late = NAN, last = NAN, none;

        ok = ct_gpt_cuda_forward(dev, rn->batch, NULL, &err) == 0 && ct_gpt_cuda_forward(dev, rn->batch, NULL, &err) == 0 &&
             ct_gpt_cuda_loss_read(dev, 1, &late, &err) == 0 && ct_gpt_cuda_loss_read(dev, 0, &last, &err) == 0;
        tap(ok && late == loss_dev && last == loss_dev && ct_gpt_cuda_loss_read(dev, 2, &none, &err) == CT_EINTERNAL,
            "%s: the deferred loss read a step late and at a drain equals the waited-for one bit for bit%s%s", label,
            ok ? "" : ": ", ok ? "" : err.msg);
        ok = ct_gpt_cuda_backward(dev, (double)BT, NULL, NULL, &err) == 0 && dev_to_host(g2, ct_gpt_cuda_grads(dev), n) == 0;
        tap(ok && !memcmp(g, g2, n * sizeof(float)), "%s: backward after a deferred forward: the same gradients", label);
    }

    /* the global gradient norm, then clipping to half of it */
    for (size_t i = 0; i < n; i++)
        norm_cpu += (double)((float *)ct_gpt_grads(cpu))[i] * ((float *)ct_gpt_grads(cpu))[i];
    norm_cpu = sqrt(norm_cpu);
    ok = ct_gpt_cuda_grad_norm(dev, &norm_dev, &err) == 0;
    tap(ok && fabs(norm_dev - norm_cpu) <= tol * norm_cpu, "%s: gradient norm %.6g against the cpu's %.6g", label,
        norm_dev, norm_cpu);
    ok = ct_gpt_cuda_clip_grad_norm(dev, norm_dev / 2, &err) == 0 && dev_to_host(g2, ct_gpt_cuda_grads(dev), n) == 0;
    t_ratio = (norm_dev / 2) / (norm_dev + 1e-6);
    for (size_t i = 0; i < n; i++)
        g[i] = (float)(g[i] * t_ratio);
    tap(ok && rel_l2(g2, g, n) <= 1e-6, "%s: clipping to half the norm scales every gradient by %.6f", label,
        t_ratio);

    /* one AdamW update from the cpu's gradients on both (the device's overwritten with them) */
    ok = cudaMemcpyAsync(ct_gpt_cuda_grads(dev), ct_gpt_grads(cpu), n * sizeof(float), cudaMemcpyHostToDevice,
                         (cudaStream_t)ct_cuda_compute_stream()) == cudaSuccess &&
         ct_gpt_cuda_optim_step(dev, odev, &err) == 0 && dev_to_host(p, ct_gpt_cuda_params(dev), n) == 0;
    ct_optim_step(ocpu, ct_gpt_params(cpu), ct_gpt_grads(cpu));
    tap(ok && rel_l2(p, ct_gpt_params(cpu), n) <= 1e-6 && ct_optim_steps(odev) == 1,
        "%s: one AdamW update equals the cpu's (relative %.2e)", label, rel_l2(p, ct_gpt_params(cpu), n));
    /* the forward after it reads the bf16 copy the update wrote (bf16-mixed); after the host round trip
     * below, one made from the weights: the same loss bit for bit */
    ok = ct_gpt_cuda_forward(dev, rn->batch, &loss_upd, &err) == 0;

    /* to a fresh host model (a checkpoint's source) and back */
    ok = ct_gpt_cuda_to_host(dev, back, odev, &err) == 0 && !memcmp(ct_gpt_params(back), p, n * sizeof(float));
    ok = ok && ct_gpt_cuda_from_host(dev, back, odev, &err) == 0 && dev_to_host(g2, ct_gpt_cuda_params(dev), n) == 0 &&
         !memcmp(g2, p, n * sizeof(float));
    tap(ok, "%s: parameters and AdamW state to the host model and back%s%s", label, ok ? "" : ": ", ok ? "" : err.msg);
    ok = ct_gpt_cuda_forward(dev, rn->batch, &loss_dev, &err) == 0;
    tap(ok && loss_dev == loss_upd, "%s: the forward after the update reads the weights it wrote (loss %.9g, from "
        "the host's weights %.9g)%s%s", label, loss_upd, loss_dev, ok ? "" : ": ", ok ? "" : err.msg);

    /* a target outside the vocabulary is refused, naming it, before anything is copied or launched */
    {
        int32_t *tg = ct_gpt_cuda_batch_targets(dev), was = tg[1];

        tg[1] = rn->cfg.vocab;
        ok = ct_gpt_cuda_forward(dev, rn->batch, &loss_dev, &err) == CT_EINVAL &&
             strstr(err.msg, "outside the vocabulary") != NULL;
        tg[1] = was;
        tap(ok, "%s: a target outside the vocabulary is refused (%s)", label, ok ? err.msg : "not refused");
    }
    /* a smaller batch after the full ones (GEMMs of other shapes: plans of their own) against the cpu's,
     * both from the updated parameters */
    if (rn->batch > 1) {
        loss_cpu = ct_gpt_forward(cpu, ct_gpt_cuda_batch_inputs(dev), ct_gpt_cuda_batch_targets(dev), rn->batch - 1,
                                  NULL, NULL);
        ok = ct_gpt_cuda_forward(dev, rn->batch - 1, &loss_dev, &err) == 0;
        tap(ok && fabs(loss_dev - loss_cpu) <= tol * fabs(loss_cpu), "%s: a batch of %d after batches of %d: loss "
            "%.6f against the cpu's %.6f%s%s", label, rn->batch - 1, rn->batch, loss_dev, loss_cpu, ok ? "" : ": ",
            ok ? "" : err.msg);
    }
    if (rn->gemm == CT_DTYPE_BF16)
        check_classifier(dev, rn, label);
    free(g);
    free(g2);
    free(p);
    free(rc_cpu.off);
    free(rc_dev.off);
out:
    ct_gpt_cuda_free(dev);
    ct_optim_free(ocpu);
    ct_optim_free(odev);
    ct_gpt_free(cpu);
    ct_gpt_free(back);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ms per step of GPT-2 small's shape, device only (the cpu GPT would take minutes). */
static void bench(enum ct_gpt_cuda_attention att, int graph)
{
    ct_gpt_config c = { .n_layer = 12, .n_head = 12, .n_embd = 768, .seq_len = 1024, .vocab = 50257 };
    ct_gpt_cuda_options opt = { att, 0, graph };
    const int B = 8, steps = 10;
    ct_gpt *host = NULL;
    ct_gpt_cuda *dev = NULL;
    ct_optim *o = NULL;
    ct_optim_config oc;
    double loss, t0 = 0;
    ct_error err;
    ct_rng r;

    ct_optim_config_default(&oc, CT_OPTIM_ADAMW);
    if (ct_gpt_create(&c, 1, &host, &err) || ct_optim_create(&oc, ct_gpt_num_params(host), &o, &err) ||
        ct_gpt_cuda_create(host, o, B, CT_DTYPE_BF16, &opt, &dev, &err)) {
        printf("# bench (%s attention): %s\n", att == CT_GPT_ATT_FLASH ? "flash" : "simple", err.msg);
        goto out;
    }
    ct_rng_seed(&r, 1);
    ct_gpt_init(host, &r);
    ct_gpt_cuda_from_host(dev, host, o, &err);
    fill_tokens(ct_gpt_cuda_batch_inputs(dev), ct_gpt_cuda_batch_targets(dev), (size_t)B * c.seq_len, c.vocab, 3);
    for (int s = 0; s <= steps; s++) {
        if (s == 1)
            t0 = now_s(); /* the first step warms cuBLASLt's heuristics and the caches */
        /* as the training loop: the loss left on the device, the previous step's read after this
         * step's forward is enqueued (it does not wait) */
        if (ct_gpt_cuda_forward(dev, B, NULL, &err) || (s > 0 && ct_gpt_cuda_loss_read(dev, 1, &loss, &err)) ||
            ct_gpt_cuda_backward(dev, (double)B * c.seq_len, NULL, NULL, &err) || ct_gpt_cuda_optim_step(dev, o, &err)) {
            printf("# bench: %s\n", err.msg);
            goto out;
        }
    }
    cudaDeviceSynchronize();
    if (ct_gpt_cuda_loss_read(dev, 0, &loss, &err)) {
        printf("# bench: %s\n", err.msg);
        goto out;
    }
    printf("# bench: GPT-2 small shape, batch %d x %d, bf16-mixed, %s attention%s: %.1f ms per step, loss %.3f\n", B,
           c.seq_len, att == CT_GPT_ATT_FLASH ? "flash" : "simple", graph ? " (forward in a CUDA graph)" : "", (now_s() - t0) * 1e3 / steps, loss / (B * c.seq_len));
out:
    ct_gpt_cuda_free(dev);
    ct_optim_free(o);
    ct_gpt_free(host);
}
#endif

/* 1 when a device is there, else 0 with the reason. */
static int probe(char *why, size_t size)
{
    const ct_registry_entry *e;
    const struct ct_accelerator_ops *ops;

    ct_engine_init();
    e = ct_registry_find(CT_REG_ACCELERATOR, "cuda");
    ops = e ? e->ops : NULL;
    if (!ops) {
        snprintf(why, size, "this build of ctrain has no CUDA support");
        return 0;
    }
    return ops->is_available(why, size) && ops->device_count() > 0;
}

int main(int argc, char **argv)
{
    char why[256] = "";
    int bench_too = 0, quick = 0;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bench"))
            bench_too = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else {
            fprintf(stderr, "ctrain: gpt_cuda_check: unknown argument '%s' (--bench, --quick)\n", argv[i]);
            return 2;
        }
    }

    if (!probe(why, sizeof(why))) {
        printf("1..0 # SKIP no CUDA device (%s)\n", why);
        return 0;
    }
#ifdef CT_HAVE_CUDA
    {
        /* seq_len 37 and vocab 1001: partial blocks and warps, rows of odd length; 3 heads of 16; the
         * long shape last (--quick leaves it out) */
        static const struct { const char *name; ct_gpt_config cfg; int batch; } shapes[] = {
            { "small", { .n_layer = 2, .n_head = 4, .n_embd = 64, .seq_len = 64, .vocab = 256 }, 4 },
            { "odd", { .n_layer = 1, .n_head = 3, .n_embd = 48, .seq_len = 37, .vocab = 1001 }, 3 },
            { "long", { .n_layer = 1, .n_head = 2, .n_embd = 128, .seq_len = 1024, .vocab = 256 }, 2 },
        };

        struct cudaDeviceProp prop;
        int rt = 0;

        if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
            printf("1..0 # SKIP cudaSetDevice(0) failed\n");
            return 0;
        }
        cudaRuntimeGetVersion(&rt);
        printf("# device 0: %s (sm_%d%d, %d SMs), CUDA runtime %d\n", prop.name, prop.major, prop.minor,
               prop.multiProcessorCount, rt);
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]) - (size_t)quick; s++)
            for (int bf = 0; bf < 2; bf++)
                for (int fl = 0; fl < 2; fl++) {
                    struct run rn = { shapes[s].name, shapes[s].cfg, shapes[s].batch,
                                      bf ? CT_DTYPE_BF16 : CT_DTYPE_F32, fl ? CT_GPT_ATT_FLASH : CT_GPT_ATT_SIMPLE, 0, 0 };

                    check_run(&rn);
                    /* the kernels cuBLASLt's epilogues stand in for */
                    if (s == 0 && !fl) {
                        rn.no_epilogues = 1;
                        check_run(&rn);
                        /* the forward in a CUDA graph: the first full batch eager, the second (the
                         * determinism check: the same bits) captured, the deferred ones replayed, the
                         * smaller batch eager */
                        rn.no_epilogues = 0;
                        rn.graph = 1;
                        check_run(&rn);
                    }
                }
        if (bench_too) {
            bench(CT_GPT_ATT_SIMPLE, 0);
            bench(CT_GPT_ATT_SIMPLE, 1);
            bench(CT_GPT_ATT_FLASH, 0);
        }
        printf("1..%d\n", n_done);
        return n_failed ? 1 : 0;
    }
#else
    (void)bench_too, (void)quick;
    return 0;
#endif
}
