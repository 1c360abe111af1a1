/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA GPT's host side, without a GPU (engine/models/gpt/gpt_cuda_host.c): the layout its
 * kernels index is the cpu GPT's, backward's announcement stages give the cpu GPT's exact order of
 * gradient ranges (DDP's buckets), and parameters and optimizer state go device -> host model ->
 * safetensors -> host model -> device unchanged, with "device memory" here plain host buffers moved
 * by the same copy seam cudaMemcpy fills on a GPU. (t/tools/gpt_cuda_check runs the device side.) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctrain/checkpoint_io.h"
#include "ctrain/nn.h"
#include "ctrain/rng.h"
#include "engine/models/gpt/gpt.h"
#include "engine/models/gpt/gpt_cuda.h"
#include "engine/loops/loops.h"
#include "engine/nn/bf16_inline.h"

static const ct_gpt_config cfg = { .n_layer = 3, .n_head = 2, .n_embd = 16, .seq_len = 9, .vocab = 13 };

static ct_gpt *model(uint64_t seed)
{
    ct_gpt *m = NULL;
    ct_error err;
    ct_rng r;

    assert_int_equal(ct_gpt_create(&cfg, 2, &m, &err), 0);
    ct_rng_seed(&r, seed);
    ct_gpt_init(m, &r);
    return m;
}

static void test_layout_is_the_cpu_gpts(void **state)
{
    ct_gpt *m = model(1);
    ct_gpt_cuda_layout lay;
    ct_error err;
    int t = 0;

    (void)state;
    assert_int_equal(ct_gpt_cuda_layout_of(m, &lay, &err), 0);
    assert_int_equal(lay.n_tensors, ct_gpt_num_tensors(m));
    assert_int_equal(lay.n_params, ct_gpt_num_params(m));
    for (int i = 0; i < lay.n_tensors; i++) {
        assert_int_equal(lay.offset[i], ct_gpt_tensor(m, i)->offset);
        assert_int_equal(lay.numel[i], ct_gpt_tensor(m, i)->numel);
    }
    /* the named offsets the kernels use, by the tensors' names */
    assert_string_equal(ct_gpt_tensor(m, t)->name, "wte.weight");
    assert_int_equal(lay.wte, ct_gpt_tensor(m, t++)->offset);
    assert_string_equal(ct_gpt_tensor(m, t)->name, "wpe.weight");
    assert_int_equal(lay.wpe, ct_gpt_tensor(m, t++)->offset);
    for (int l = 0; l < cfg.n_layer; l++) {
        static const char *const suffix[CT_GPT_BLOCK_TENSORS] = {
            "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
            "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
            "mlp.c_proj.weight", "mlp.c_proj.bias",
        };

        for (int i = 0; i < CT_GPT_BLOCK_TENSORS; i++) {
            char name[64];

            snprintf(name, sizeof(name), "h.%d.%s", l, suffix[i]);
            assert_string_equal(ct_gpt_tensor(m, t)->name, name);
            assert_int_equal(lay.blk[l][i], ct_gpt_tensor(m, t++)->offset);
        }
    }
    assert_string_equal(ct_gpt_tensor(m, t)->name, "ln_f.weight");
    assert_int_equal(lay.lnf_w, ct_gpt_tensor(m, t++)->offset);
    assert_string_equal(ct_gpt_tensor(m, t)->name, "ln_f.bias");
    assert_int_equal(lay.lnf_b, ct_gpt_tensor(m, t++)->offset);
    assert_int_equal(t, lay.n_tensors);
    ct_gpt_free(m);
}

/* An fp64 (64-true) or bf16 (bf16-true) model is not the CUDA GPT's: refused, saying why. */
static void test_layout_refuses_other_storage(void **state)
{
    ct_gpt *m = model(1);
    ct_gpt_cuda_layout lay;
    ct_error err;

    (void)state;
    assert_int_equal(ct_gpt_set_param_dtype(m, CT_DTYPE_F64, &err), 0);
    assert_int_equal(ct_gpt_cuda_layout_of(m, &lay, &err), CT_ENOTAVAIL);
    assert_non_null(strstr(err.msg, "32-true or bf16-mixed"));
    ct_gpt_free(m);
}

struct record {
    size_t off[256], count[256];
    int n;
};

static int record(void *ctx, size_t offset, size_t count)
{
    struct record *r = ctx;

    assert_true(r->n < 256);
    r->off[r->n] = offset;
    r->count[r->n++] = count;
    return 0;
}

static int stop_third(void *ctx, size_t offset, size_t count)
{
    struct record *r = ctx;

    record(ctx, offset, count);
    return r->n == 3 ? 42 : 0;
}

/* The cpu GPT's backward announces in some order; the CUDA GPT's stages, walked as its backward walks
 * them, announce the same ranges in the same order: every tensor once, bias before weight. */
static void test_announcement_order(void **state)
{
    ct_gpt *m = model(2);
    ct_gpt_cuda_layout lay;
    struct record cpu = { .n = 0 }, dev = { .n = 0 }, stopped = { .n = 0 };
    int32_t in[2 * 9], tg[2 * 9];
    ct_error err;
    int rc = 0;

    (void)state;
    for (int i = 0; i < 2 * cfg.seq_len; i++) {
        in[i] = i % cfg.vocab;
        tg[i] = (i * 7 + 3) % cfg.vocab;
    }
    ct_gpt_forward(m, in, tg, 2, NULL, NULL);
    assert_int_equal(ct_gpt_backward(m, 2.0 * cfg.seq_len, NULL, record, &cpu), 0);
    assert_int_equal(ct_gpt_cuda_layout_of(m, &lay, &err), 0);
    assert_int_equal(ct_gpt_cuda_stages(&lay), 2 + 6 * cfg.n_layer);
    for (int s = 0; s < ct_gpt_cuda_stages(&lay); s++)
        assert_int_equal(ct_gpt_cuda_announce(&lay, s, record, &dev), 0);
    assert_int_equal(dev.n, lay.n_tensors);
    assert_int_equal(dev.n, cpu.n);
    for (int i = 0; i < dev.n; i++) {
        assert_int_equal(dev.off[i], cpu.off[i]);
        assert_int_equal(dev.count[i], cpu.count[i]);
        /* the exact reverse of the layout */
        assert_int_equal(dev.off[i], lay.offset[lay.n_tensors - 1 - i]);
    }
    /* out-of-range stages announce nothing; a callback's error stops the walk and is returned */
    assert_int_equal(ct_gpt_cuda_announce(&lay, -1, record, &dev), 0);
    assert_int_equal(ct_gpt_cuda_announce(&lay, ct_gpt_cuda_stages(&lay), record, &dev), 0);
    assert_int_equal(dev.n, lay.n_tensors);
    for (int s = 0; s < ct_gpt_cuda_stages(&lay) && rc == 0; s++)
        rc = ct_gpt_cuda_announce(&lay, s, stop_third, &stopped);
    assert_int_equal(rc, 42);
    assert_int_equal(stopped.n, 3);
    ct_gpt_free(m);
}

/* "Device memory" of the round trip: host buffers, moved by the seam cudaMemcpy fills on a GPU. */
static int copy_host(void *ctx, int dir, void *host, void *dev, size_t bytes)
{
    int *calls = ctx;

    ++*calls;
    if (dir == CT_GPT_TO_HOST)
        memcpy(host, dev, bytes);
    else
        memcpy(dev, host, bytes);
    return 0;
}

static int copy_fails(void *ctx, int dir, void *host, void *dev, size_t bytes)
{
    (void)ctx, (void)dir, (void)host, (void)dev, (void)bytes;
    return 1;
}

static ct_optim *adamw(size_t n, float fill)
{
    ct_optim_config oc;
    ct_optim *o = NULL;
    ct_error err;

    ct_optim_config_default(&oc, CT_OPTIM_ADAMW);
    assert_int_equal(ct_optim_create(&oc, n, &o, &err), 0);
    for (int s = 0; s < ct_optim_num_states(o); s++)
        for (size_t i = 0; i < n; i++)
            ((float *)ct_optim_state(o, s))[i] = fill * (float)(s + 1) + (float)i * 1e-3f;
    return o;
}

/* The host model's tensors and o's states as a checkpoint (the names a checkpoint gives them). */
static void checkpoint_of(ct_ckpt *c, ct_gpt *m, ct_optim *o)
{
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < ct_gpt_num_tensors(m); i++) {
        const ct_tensor *t = ct_gpt_tensor(m, i);

        for (int s = -1; s < ct_optim_num_states(o); s++) {
            ct_ckpt_tensor *ct = &c->tensors[c->n_tensors++];

            if (s < 0)
                snprintf(ct->name, sizeof(ct->name), "%s", t->name);
            else
                snprintf(ct->name, sizeof(ct->name), "optim.%s.%s", ct_optim_state_name(o, s), t->name);
            ct->dtype = CT_DTYPE_F32;
            ct->ndim = t->ndim;
            ct->shape[0] = t->shape[0];
            ct->shape[1] = t->shape[1];
            ct->data = s < 0 ? t->data : (float *)ct_optim_state(o, s) + t->offset;
            ct->nbytes = t->numel * sizeof(float);
        }
    }
}

/* device (a) -> host model B -> safetensors -> host model C -> device (b): b is a, bit for bit. */
static void test_checkpoint_round_trip(void **state)
{
    char dir[] = "/tmp/ctrain-test-gpt-cuda-XXXXXX", path[128];
    ct_gpt *a = model(3), *b = model(4), *c = model(5);
    size_t n = ct_gpt_num_params(a), bytes = sizeof(float) * n;
    ct_optim *oa = adamw(n, 0.25f), *ob = adamw(n, 0.0f), *oc = adamw(n, 0.0f);
    float *dev = malloc(bytes), *dev_states[2] = { malloc(bytes), malloc(bytes) };
    float *back = malloc(bytes), *back_states[2] = { malloc(bytes), malloc(bytes) };
    ct_gpt_cuda_layout lay;
    ct_ckpt *ck = calloc(1, sizeof(*ck));
    ct_error err;
    int calls = 0;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/last.safetensors", dir);
    assert_int_equal(ct_gpt_cuda_layout_of(a, &lay, &err), 0);
    /* the device as ct_gpt_cuda_create leaves it: a's parameters and oa's state */
    assert_int_equal(ct_gpt_cuda_sync(&lay, CT_GPT_TO_DEVICE, a, oa, dev, dev_states, 2, copy_host, &calls, &err), 0);
    assert_int_equal(calls, 3);
    assert_memory_equal(dev, ct_gpt_params(a), bytes);
    /* before a checkpoint: to the host model, which the checkpoint writes */
    assert_int_equal(ct_gpt_cuda_sync(&lay, CT_GPT_TO_HOST, b, ob, dev, dev_states, 2, copy_host, &calls, &err), 0);
    checkpoint_of(ck, b, ob);
    assert_int_equal(ct_checkpoint_io_safetensors.save(path, ck, &err), 0);
    /* resuming: loaded into another host model, then to the device */
    checkpoint_of(ck, c, oc);
    assert_int_equal(ct_checkpoint_io_safetensors.load(path, ck, &err), 0);
    assert_int_equal(ct_gpt_cuda_sync(&lay, CT_GPT_TO_DEVICE, c, oc, back, back_states, 2, copy_host, &calls, &err), 0);
    assert_memory_equal(back, ct_gpt_params(a), bytes);
    for (int s = 0; s < 2; s++) {
        assert_memory_equal(back_states[s], ct_optim_state(oa, s), bytes);
        assert_memory_equal(back_states[s], dev_states[s], bytes);
    }
    /* parameters only (no optimizer: evaluation) */
    calls = 0;
    assert_int_equal(ct_gpt_cuda_sync(&lay, CT_GPT_TO_HOST, c, NULL, dev, NULL, 0, copy_host, &calls, &err), 0);
    assert_int_equal(calls, 1);
    /* a failed copy is an error naming what */
    assert_int_equal(ct_gpt_cuda_sync(&lay, CT_GPT_TO_HOST, c, oc, dev, dev_states, 2, copy_fails, NULL, &err), CT_EIO);
    assert_non_null(strstr(err.msg, "parameters"));
    unlink(path);
    rmdir(dir);
    free(ck);
    free(dev);
    free(back);
    for (int s = 0; s < 2; s++) {
        free(dev_states[s]);
        free(back_states[s]);
    }
    ct_optim_free(oa);
    ct_optim_free(ob);
    ct_optim_free(oc);
    ct_gpt_free(a);
    ct_gpt_free(b);
    ct_gpt_free(c);
}

/* A host model of another shape, or an optimizer with other state, is refused before any copy. */
static void test_sync_refuses_another_layout(void **state)
{
    ct_gpt_config other = cfg;
    ct_gpt *a = model(6), *b = NULL;
    ct_gpt_cuda_layout lay;
    size_t n = ct_gpt_num_params(a);
    float *dev = calloc(n, sizeof(float)), *states[2] = { NULL, NULL };
    ct_optim *o = adamw(n, 1.0f);
    ct_error err;
    int calls = 0;

    (void)state;
    other.n_embd = 8;
    assert_int_equal(ct_gpt_create(&other, 1, &b, &err), 0);
    assert_int_equal(ct_gpt_cuda_layout_of(a, &lay, &err), 0);
    assert_int_equal(ct_gpt_cuda_sync(&lay, CT_GPT_TO_HOST, b, NULL, dev, NULL, 0, copy_host, &calls, &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "layout differs"));
    assert_int_equal(ct_gpt_cuda_sync(&lay, CT_GPT_TO_HOST, a, o, dev, states, 1, copy_host, &calls, &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "optimizer"));
    assert_int_equal(calls, 0);
    free(dev);
    ct_optim_free(o);
    ct_gpt_free(a);
    ct_gpt_free(b);
}

/* Tokens outside the vocabulary are refused on the host before the batch is copied: the kernels index
 * wte's rows by the inputs and the logits' rows by the targets (the classifier guards its reads too). */
static void test_tokens_checked(void **state)
{
    ct_gpt *m = model(7);
    ct_gpt_cuda_layout lay;
    int32_t in[6] = { 0, 1, 12, 3, 4, 5 }, tg[6] = { 1, 2, 3, 4, 5, 12 };
    ct_error err;

    (void)state;
    assert_int_equal(ct_gpt_cuda_layout_of(m, &lay, &err), 0);
    assert_int_equal(ct_gpt_cuda_check_tokens(&lay, in, tg, 6, &err), 0);
    tg[4] = 13; /* the vocabulary is 13 tokens: 0..12 */
    assert_int_equal(ct_gpt_cuda_check_tokens(&lay, in, tg, 6, &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "target token 13 at position 4"));
    tg[4] = 5;
    in[2] = -1;
    assert_int_equal(ct_gpt_cuda_check_tokens(&lay, in, tg, 6, &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "input token -1 at position 2"));
    /* only the batch's n tokens are read */
    assert_int_equal(ct_gpt_cuda_check_tokens(&lay, in, tg, 2, &err), 0);
    ct_gpt_free(m);
}

/* Until a tensor-core attention has run on a GPU the simple path (cuBLAS's tensor-core GEMMs around a
 * softmax kernel) is the default at every length: the flash-style kernels are CUDA-core code, 20 times
 * slower at GPT-2's 1024 tokens by the estimate in README ## GPUs. Flash only when asked for. */
static void test_attention_default(void **state)
{
    static const int lens[] = { 9, 1023, 1024, 4096, 8192 };
    ct_gpt_config c = cfg;
    enum ct_gpt_cuda_attention got;
    ct_error err;

    (void)state;
    c.n_embd = 768;
    c.n_head = 12;
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        c.seq_len = lens[i];
        assert_int_equal(ct_gpt_cuda_attention_choice(&c, CT_GPT_ATT_AUTO, &got, &err), 0);
        assert_int_equal(got, CT_GPT_ATT_SIMPLE);
        assert_int_equal(ct_gpt_cuda_attention_choice(&c, CT_GPT_ATT_FLASH, &got, &err), 0);
        assert_int_equal(got, CT_GPT_ATT_FLASH);
    }
    c.n_head = 3; /* heads of 256 channels: flash takes 128 at most */
    assert_int_equal(ct_gpt_cuda_attention_choice(&c, CT_GPT_ATT_FLASH, &got, &err), CT_ENOTAVAIL);
    assert_non_null(strstr(err.msg, "128 channels at most, not 256"));
    assert_int_equal(ct_gpt_cuda_attention_choice(&c, CT_GPT_ATT_AUTO, &got, &err), 0);
    assert_int_equal(got, CT_GPT_ATT_SIMPLE);
}

/* The LM head's rows and the logits' stride: vocab to a multiple of 64. */
static void test_padded_vocab(void **state)
{
    (void)state;
    assert_int_equal(ct_gpt_cuda_padded_vocab(50257), 50304);
    assert_int_equal(ct_gpt_cuda_padded_vocab(256), 256);
    assert_int_equal(ct_gpt_cuda_padded_vocab(1001), 1024);
    assert_int_equal(ct_gpt_cuda_padded_vocab(13), 64);
    assert_int_equal(ct_gpt_cuda_padded_vocab(65536), 65536);
}

/* The alignment cuBLASLt is told, from the real pointers: a tensor 96 bytes into a 256-byte aligned
 * array (what the test shapes' offsets give) is 32-byte aligned, not the 256 the heuristic assumes. */
static void test_alignment_of_pointers(void **state)
{
    static char base[1024] __attribute__((aligned(256)));
    const uint16_t *bf = (const uint16_t *)base;

    (void)state;
    assert_int_equal(ct_gpt_cuda_alignment(base), 256);
    assert_int_equal(ct_gpt_cuda_alignment(base + 512), 256);
    assert_int_equal(ct_gpt_cuda_alignment(base + 96), 32);
    assert_int_equal(ct_gpt_cuda_alignment(base + 8), 8);
    assert_int_equal(ct_gpt_cuda_alignment(bf + 3), 2); /* a bf16 element 6 bytes in */
    assert_int_equal(ct_gpt_cuda_alignment(NULL), 256);
    /* every tensor of the cpu GPT's layout, as bf16 in a 256-byte aligned array: at least 2 bytes, and
     * exactly what its offset's lowest set bit says */
    {
        ct_gpt *m = model(8);
        ct_gpt_cuda_layout lay;
        ct_error err;

        assert_int_equal(ct_gpt_cuda_layout_of(m, &lay, &err), 0);
        for (int i = 0; i < lay.n_tensors; i++) {
            size_t bytes = 2 * lay.offset[i];
            unsigned want = bytes ? (unsigned)(bytes & -bytes) : 256;

            assert_int_equal(ct_gpt_cuda_alignment((const char *)(uintptr_t)0x10000 + bytes), want > 256 ? 256 : want);
        }
        ct_gpt_free(m);
    }
}

static ct_gpt_cuda_gemm_shape shape_of_head(void)
{
    /* the LM head of GPT-2 small under bf16-mixed: 50304 x 8192 x 768, bf16 in, fp32 out (14 = CUDA_R_16BF,
     * 0 = CUDA_R_32F, 1 = CUBLASLT_EPILOGUE_DEFAULT) */
    ct_gpt_cuda_gemm_shape s = { 1, 0, 50304, 8192, 768, 768, 768, 50304, 0, 14, 14, 0, 1,
                                 (const void *)(uintptr_t)0x100000, (const void *)(uintptr_t)0x200000,
                                 (const void *)(uintptr_t)0x300000, NULL, NULL };
    return s;
}

/* A key holds every field the descriptors and the algorithm depend on and not the pointers: the same
 * shape at other addresses of the same alignment is the same key, any field changed another. */
static void test_gemm_keys(void **state)
{
    ct_gpt_cuda_gemm_shape s = shape_of_head(), t;
    ct_gpt_cuda_gemm_key a, b;

    (void)state;
    ct_gpt_cuda_gemm_key_set(&a, &s);
    assert_int_equal(a.m, 50304);
    assert_int_equal(a.align_a, 256);
    t = s;
    t.a = (const char *)s.a + 4096;
    t.d = (const char *)s.d + 65536;
    ct_gpt_cuda_gemm_key_set(&b, &t);
    assert_memory_equal(&a, &b, sizeof(a));
    for (int f = 0; f < 18; f++) {
        t = s;
        switch (f) {
        case 0: t.ta = 0; break;
        case 1: t.tb = 1; break;
        case 2: t.m = 50257; break;
        case 3: t.n = 4096; break;
        case 4: t.k = 3072; break;
        case 5: t.lda = 776; break;
        case 6: t.ldb = 776; break;
        case 7: t.ldd = 50257; break;
        case 8: t.ld_aux = 768; break;
        case 9: t.a_type = 0; break;
        case 10: t.b_type = 0; break;
        case 11: t.d_type = 14; break;
        case 12: t.epilogue = 4; break;
        case 13: t.a = (const char *)s.a + 96; break;
        case 14: t.b = (const char *)s.b + 2; break;
        case 15: t.d = (const char *)s.d + 16; break;
        case 16: t.bias = (const char *)s.d + 4; break; /* a bias 4 bytes off 256 */
        case 17: t.aux = (const char *)s.d + 8; break;
        }
        ct_gpt_cuda_gemm_key_set(&b, &t);
        assert_memory_not_equal(&a, &b, sizeof(a));
    }
    assert_int_equal(b.align_aux, 8);
    t.bias = (const char *)s.d + 4;
    ct_gpt_cuda_gemm_key_set(&b, &t);
    assert_int_equal(b.align_bias, 4);
}

/* The cache: a key met again is its slot, a new one the next; full, -1; a failed build's slot dropped. */
static void test_gemm_cache(void **state)
{
    ct_gpt_cuda_gemm_cache c = { 0 };
    ct_gpt_cuda_gemm_shape s = shape_of_head();
    ct_gpt_cuda_gemm_key k;
    int fresh = -1;

    (void)state;
    for (int i = 0; i < CT_GPT_CUDA_GEMM_SLOTS; i++) {
        s.n = 64 * (i + 1);
        ct_gpt_cuda_gemm_key_set(&k, &s);
        assert_int_equal(ct_gpt_cuda_gemm_cache_slot(&c, &k, &fresh), i);
        assert_int_equal(fresh, 1);
    }
    for (int i = CT_GPT_CUDA_GEMM_SLOTS - 1; i >= 0; i--) {
        s.n = 64 * (i + 1);
        ct_gpt_cuda_gemm_key_set(&k, &s);
        assert_int_equal(ct_gpt_cuda_gemm_cache_slot(&c, &k, &fresh), i);
        assert_int_equal(fresh, 0);
    }
    s.n = 7;
    ct_gpt_cuda_gemm_key_set(&k, &s);
    assert_int_equal(ct_gpt_cuda_gemm_cache_slot(&c, &k, &fresh), -1);
    /* a build that failed leaves its slot free for the next key */
    memset(&c, 0, sizeof(c));
    assert_int_equal(ct_gpt_cuda_gemm_cache_slot(&c, &k, &fresh), 0);
    ct_gpt_cuda_gemm_cache_drop(&c, 0);
    assert_int_equal(c.n, 0);
    assert_int_equal(ct_gpt_cuda_gemm_cache_slot(&c, &k, &fresh), 0);
    assert_int_equal(fresh, 1);
}

/* The training loop's loss read one step late (engine/loops/step.c), against a stand-in for the
 * device's ring of loss sums: forwards[] the sums of the deferred forwards so far, back 0 the last. */
struct lag_device {
    double sums[8];
    int forwards, reads_waiting, reads;
};

static int lag_device_read(void *ctx, int back, double *sum, ct_error *err)
{
    struct lag_device *d = ctx;

    (void)err;
    assert_true(back < d->forwards);
    *sum = d->sums[d->forwards - 1 - back];
    d->reads++;
    d->reads_waiting += back == 0;
    return 0;
}

static void lag_forward(struct lag_device *d, double sum) { d->sums[d->forwards++] = sum; }

static void test_loss_read_one_step_late(void **state)
{
    struct lag_device dev = { { 0 }, 0, 0, 0 };
    ct_loss_lag lag = { 0 };
    double loss = 0;
    int64_t of = -1;
    int got = -1;
    ct_error err;

    (void)state;
    /* step 0: nothing pending before it */
    lag_forward(&dev, 20.0);
    assert_int_equal(ct_loss_lag_advance(&lag, 0, 10, lag_device_read, &dev, &loss, &of, &got, &err), 0);
    assert_int_equal(got, 0);
    /* step 1: step 0's mean per term, read as the one before the last forward (no wait) */
    lag_forward(&dev, 0.0 / 0.0);
    assert_int_equal(ct_loss_lag_advance(&lag, 1, 10, lag_device_read, &dev, &loss, &of, &got, &err), 0);
    assert_int_equal(got, 1);
    assert_int_equal(of, 0);
    assert_true(loss == 2.0);
    /* step 2: step 1's non-finite loss comes back one step late, named as step 1's */
    lag_forward(&dev, 30.0);
    assert_int_equal(ct_loss_lag_advance(&lag, 2, 5, lag_device_read, &dev, &loss, &of, &got, &err), 0);
    assert_int_equal(got, 1);
    assert_int_equal(of, 1);
    assert_true(loss != loss);
    assert_int_equal(dev.reads_waiting, 0);
    /* a drain point: step 2's, the last forward's (the one read that waits) */
    assert_int_equal(ct_loss_lag_drain(&lag, lag_device_read, &dev, &loss, &of, &got, &err), 0);
    assert_int_equal(got, 1);
    assert_int_equal(of, 2);
    assert_true(loss == 6.0);
    assert_int_equal(dev.reads_waiting, 1);
    /* nothing pending after a drain: a second drain and the next step read nothing */
    assert_int_equal(ct_loss_lag_drain(&lag, lag_device_read, &dev, &loss, &of, &got, &err), 0);
    assert_int_equal(got, 0);
    lag_forward(&dev, 7.0);
    assert_int_equal(ct_loss_lag_advance(&lag, 3, 7, lag_device_read, &dev, &loss, &of, &got, &err), 0);
    assert_int_equal(got, 0);
    assert_int_equal(dev.reads, 3);
}

/* The device's pinned loss slots: deferred forward number seq (from 1) wrote slot (seq - 1) % ring;
 * the last two are readable, nothing older and nothing before the first. */
static void test_loss_slots(void **state)
{
    (void)state;
    assert_int_equal(CT_GPT_CUDA_LOSS_RING, 2);
    assert_int_equal(ct_gpt_cuda_loss_slot(0, 0), -1);
    assert_int_equal(ct_gpt_cuda_loss_slot(1, 0), 0);
    assert_int_equal(ct_gpt_cuda_loss_slot(1, 1), -1);
    assert_int_equal(ct_gpt_cuda_loss_slot(2, 0), 1);
    assert_int_equal(ct_gpt_cuda_loss_slot(2, 1), 0);
    assert_int_equal(ct_gpt_cuda_loss_slot(5, 0), 0);
    assert_int_equal(ct_gpt_cuda_loss_slot(5, 1), 1);
    assert_int_equal(ct_gpt_cuda_loss_slot(5, 2), -1);
    assert_int_equal(ct_gpt_cuda_loss_slot(5, -1), -1);
}

/* The fused classifier's host reference on bf16 logits against the cross-entropy in double on the
 * same values: the loss within 1e-5, each gradient within one bf16 rounding of softmax - onehot. */
static void test_classifier_reference(void **state)
{
    enum { V = 1001, T = 17 };
    uint16_t x[V], d[V], inplace[V];
    double m = -1e300, sum = 0, want;
    float loss;
    uint64_t s = 12345;

    (void)state;
    for (int j = 0; j < V; j++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[j] = ct_bf16_store((float)((double)(s >> 11) / 9007199254740992.0 * 16.0 - 8.0));
        m = ct_bf16_load(x[j]) > m ? ct_bf16_load(x[j]) : m;
    }
    for (int j = 0; j < V; j++)
        sum += exp(ct_bf16_load(x[j]) - m);
    want = log(sum) - (ct_bf16_load(x[T]) - m);
    loss = ct_gpt_cuda_classifier_ref(x, V, T, d);
    assert_true(fabs(loss - want) <= 1e-5 * fabs(want));
    for (int j = 0; j < V; j++) {
        double g = exp(ct_bf16_load(x[j]) - m) / sum - (j == T);

        assert_true(fabs(ct_bf16_load(d[j]) - g) <= fabs(g) / 256 + 1e-9);
    }
    /* in place, as the kernel: the same bits */
    memcpy(inplace, x, sizeof(x));
    assert_true(ct_gpt_cuda_classifier_ref(inplace, V, T, inplace) == loss);
    assert_memory_equal(inplace, d, sizeof(d));
    /* a target outside the vocabulary: NaN, and no one-hot (the gradients sum to 1) */
    loss = ct_gpt_cuda_classifier_ref(x, V, V, d);
    assert_true(loss != loss);
    sum = 0;
    for (int j = 0; j < V; j++)
        sum += ct_bf16_load(d[j]);
    assert_true(fabs(sum - 1.0) < 1e-2);
}

/* Under bf16-mixed the update writes each parameter's bf16 copy itself: wte's into the padded LM
 * head copy (row-major [vp, C], the same index less wte's offset), every other one at its own index
 * of the parameters' copy. Every parameter lands in exactly one place, nothing past wte's V rows. */
static void test_param_copy_places(void **state)
{
    ct_gpt *m = model(3);
    ct_gpt_cuda_layout lay;
    size_t n_wte = (size_t)cfg.vocab * cfg.n_embd, in_wte = 0;
    ct_error err;

    (void)state;
    assert_int_equal(ct_gpt_cuda_layout_of(m, &lay, &err), 0);
    for (size_t i = 0; i < lay.n_params; i++) {
        int w = ct_gpt_cuda_param_in_wte(i, lay.wte, n_wte);

        assert_int_equal(w, i >= lay.wte && i < lay.wte + n_wte);
        in_wte += (size_t)w;
    }
    assert_true(in_wte == n_wte);
    ct_gpt_free(m);
}

/* The forward in a CUDA graph: off unless enabled; full batches only (the last, smaller one eager); the
 * first full batch eager, the second captured, then replays; a failed capture turns it off for good. */
static void test_graph_steps(void **state)
{
    ct_gpt_cuda_graph_state off = { 0 }, g = { 1, 0, 0, 0 }, bad = { 1, 0, 0, 0 };

    (void)state;
    for (int i = 0; i < 3; i++)
        assert_int_equal(ct_gpt_cuda_graph_next(&off, 4, 4), CT_GPT_GRAPH_EAGER);
    assert_int_equal(ct_gpt_cuda_graph_next(&g, 3, 4), CT_GPT_GRAPH_EAGER);
    assert_int_equal(ct_gpt_cuda_graph_next(&g, 4, 4), CT_GPT_GRAPH_EAGER);
    assert_int_equal(ct_gpt_cuda_graph_next(&g, 4, 4), CT_GPT_GRAPH_CAPTURE);
    ct_gpt_cuda_graph_done(&g, 1);
    assert_int_equal(ct_gpt_cuda_graph_next(&g, 4, 4), CT_GPT_GRAPH_REPLAY);
    assert_int_equal(ct_gpt_cuda_graph_next(&g, 2, 4), CT_GPT_GRAPH_EAGER);
    assert_int_equal(ct_gpt_cuda_graph_next(&g, 4, 4), CT_GPT_GRAPH_REPLAY);
    assert_int_equal(ct_gpt_cuda_graph_next(&bad, 4, 4), CT_GPT_GRAPH_EAGER);
    assert_int_equal(ct_gpt_cuda_graph_next(&bad, 4, 4), CT_GPT_GRAPH_CAPTURE);
    ct_gpt_cuda_graph_done(&bad, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ct_gpt_cuda_graph_next(&bad, 4, 4), CT_GPT_GRAPH_EAGER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_is_the_cpu_gpts),
        cmocka_unit_test(test_layout_refuses_other_storage),
        cmocka_unit_test(test_announcement_order),
        cmocka_unit_test(test_checkpoint_round_trip),
        cmocka_unit_test(test_sync_refuses_another_layout),
        cmocka_unit_test(test_tokens_checked),
        cmocka_unit_test(test_attention_default),
        cmocka_unit_test(test_padded_vocab),
        cmocka_unit_test(test_alignment_of_pointers),
        cmocka_unit_test(test_gemm_keys),
        cmocka_unit_test(test_gemm_cache),
        cmocka_unit_test(test_loss_read_one_step_late),
        cmocka_unit_test(test_loss_slots),
        cmocka_unit_test(test_classifier_reference),
        cmocka_unit_test(test_param_copy_places),
        cmocka_unit_test(test_graph_steps),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
