/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT model and token shards: gradients against finite differences on a tiny config, bf16-mixed
 * against fp32, the gradient announcements, config errors, GPT-2's initialisation, and token shards:
 * a round trip, every damaged-file case, windows. (t/70-gpt-torch.t checks the model against
 * PyTorch; t/71-tokenize.t the tokenize command.) */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctrain/nn.h"
#include "engine/data/tokens.h"
#include "engine/models/gpt/gpt.h"
#include "engine/models/gpt/gpt_hf.h"

static char dir[] = "/tmp/ctrain-test-gpt-XXXXXX";

/* --- the model ----------------------------------------------------------------------------------- */

/* seq_len 37: attention's GEMMs run in blocks of 32 query rows, so a full and a partial block */
#define TINY_T 37
static const ct_gpt_config tiny = { .n_layer = 2, .n_head = 2, .n_embd = 8, .seq_len = TINY_T, .vocab = 11 };

/* A tiny model with parameters ~N(0, 0.3) (larger than GPT-2's init, so gradients are large enough
 * for finite differences in fp32), and a batch of 2 random sequences. */
static ct_gpt *tiny_model(int32_t *in, int32_t *tg)
{
    ct_gpt *m = NULL;
    ct_error err;
    ct_rng r;
    float *p;

    assert_int_equal(ct_gpt_create(&tiny, 2, &m, &err), 0);
    ct_rng_seed(&r, 7);
    ct_gpt_init(m, &r);
    p = ct_gpt_params(m);
    for (size_t i = 0; i < ct_gpt_num_params(m); i++)
        p[i] += (float)((ct_rng_uniform(&r) - 0.5) * 0.6);
    for (int i = 0; i < 2 * tiny.seq_len; i++) {
        in[i] = (int32_t)ct_rng_below(&r, (uint64_t)tiny.vocab);
        tg[i] = (int32_t)ct_rng_below(&r, (uint64_t)tiny.vocab);
    }
    return m;
}

static double mean_loss(ct_gpt *m, const int32_t *in, const int32_t *tg)
{
    return ct_gpt_forward(m, in, tg, 2, NULL, NULL) / (2.0 * tiny.seq_len);
}

static void test_gpt_gradcheck(void **state)
{
    int32_t in[2 * TINY_T], tg[2 * TINY_T];
    ct_gpt *m = tiny_model(in, tg);
    float *p = ct_gpt_params(m), *g;
    float *ana = malloc(sizeof(float) * ct_gpt_num_params(m));

    mean_loss(m, in, tg);
    assert_int_equal(ct_gpt_backward(m, 2.0 * tiny.seq_len, NULL, NULL, NULL), 0);
    g = ct_gpt_grads(m);
    memcpy(ana, g, sizeof(float) * ct_gpt_num_params(m));
    /* every tensor, a spread of its elements: central differences, compared norm-wise per tensor */
    for (int t = 0; t < ct_gpt_num_tensors(m); t++) {
        const ct_tensor *ts = ct_gpt_tensor(m, t);
        double diff = 0, ref = 0;

        for (size_t k = 0; k < ts->numel; k += 1 + ts->numel / 7) {
            size_t i = ts->offset + k;
            float keep = p[i];
            const float h = 1e-2f;
            double up, down, num;

            p[i] = keep + h;
            up = mean_loss(m, in, tg);
            p[i] = keep - h;
            down = mean_loss(m, in, tg);
            p[i] = keep;
            num = (up - down) / (2.0 * h);
            diff += (num - ana[i]) * (num - ana[i]);
            ref += num * num;
        }
        if (!(sqrt(diff) <= 1e-2 * sqrt(ref) + 1e-5))
            fail_msg("%s: finite differences differ from backward: |diff| %.3g, |grad| %.3g", ts->name, sqrt(diff),
                     sqrt(ref));
    }
    free(ana);
    ct_gpt_free(m);
}

/* bf16-mixed: the same gradients within bf16's precision, but computed differently. */
static void test_gpt_bf16_mixed(void **state)
{
    int32_t in[2 * TINY_T], tg[2 * TINY_T];
    ct_gpt *m = tiny_model(in, tg);
    size_t n = ct_gpt_num_params(m);
    float *g32 = malloc(sizeof(float) * n);
    double l32, l16, diff = 0, ref = 0;
    ct_error err;

    l32 = mean_loss(m, in, tg);
    ct_gpt_backward(m, 2.0 * tiny.seq_len, NULL, NULL, NULL);
    memcpy(g32, ct_gpt_grads(m), sizeof(float) * n);
    assert_int_equal(ct_gpt_set_gemm_dtype(m, CT_DTYPE_BF16, &err), 0);
    l16 = mean_loss(m, in, tg);
    ct_gpt_backward(m, 2.0 * tiny.seq_len, NULL, NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        const float *g16 = ct_gpt_grads(m);

        diff += (g16[i] - g32[i]) * (double)(g16[i] - g32[i]);
        ref += g32[i] * (double)g32[i];
    }
    assert_true(l16 != l32);
    assert_true(fabs(l16 - l32) < 2e-2 * l32);
    assert_true(diff > 0 && sqrt(diff) < 5e-2 * sqrt(ref));
    assert_int_equal(ct_gpt_set_gemm_dtype(m, CT_DTYPE_F16, &err), CT_ENOTAVAIL);
    assert_string_equal(err.id, "gpt-gemm-dtype");
    assert_string_equal(err.msg, "the cpu gpt computes GEMMs in fp32 or bf16 only");
    free(g32);
    ct_gpt_free(m);
}

struct ready_log {
    size_t next_end;
    int calls, stop_at;
};

static int ready(void *ctx, size_t offset, size_t count)
{
    struct ready_log *l = ctx;

    assert_int_equal(offset + count, l->next_end);
    l->next_end = offset;
    return ++l->calls == l->stop_at ? 42 : 0;
}

/* Every tensor announced once, last first, tiling the array; a non-zero answer stops backward. */
static void test_gpt_announce(void **state)
{
    int32_t in[2 * TINY_T], tg[2 * TINY_T];
    ct_gpt *m = tiny_model(in, tg);
    struct ready_log l = { ct_gpt_num_params(m), 0, 0 };

    mean_loss(m, in, tg);
    assert_int_equal(ct_gpt_backward(m, 10, NULL, ready, &l), 0);
    assert_int_equal(l.calls, ct_gpt_num_tensors(m));
    assert_int_equal(l.calls, 2 + 12 * tiny.n_layer + 2);
    assert_int_equal(l.next_end, 0);
    l = (struct ready_log){ ct_gpt_num_params(m), 0, 3 };
    assert_int_equal(ct_gpt_backward(m, 10, NULL, ready, &l), 42);
    assert_int_equal(l.calls, 3);
    /* a batch past max_batch (2) computes nothing, and there is then nothing to differentiate */
    assert_true(isnan(ct_gpt_forward(m, in, tg, 3, NULL, NULL)));
    assert_int_equal(ct_gpt_backward(m, 10, NULL, NULL, NULL), CT_EINTERNAL);
    ct_gpt_free(m);
}

struct need_log {
    size_t next;      /* where the next range must start */
    int calls, stop_at;
};

static int need(void *ctx, size_t offset, size_t count)
{
    struct need_log *l = ctx;

    assert_int_equal(offset, l->next);
    l->next = offset + count;
    return ++l->calls == l->stop_at ? 42 : 0;
}

static int count_need(void *ctx, size_t offset, size_t count)
{
    (void)offset;
    (void)count;
    ++*(int *)ctx;
    return 0;
}

/* Forward announces the embeddings, each block's three parts (attention with ln_1; ln_2 and the
 * MLP's c_fc; its c_proj: fsdp's units, a third of a block each) and the final layernorm, first to
 * last, tiling the array before reading them (bf16-mixed: all at once), and computes the same loss;
 * a non-zero answer stops it. Backward announces the embeddings and the final layernorm, then each
 * block's parts again, last first. */
static void test_gpt_forward_announces(void **state)
{
    int32_t in[2 * TINY_T], tg[2 * TINY_T];
    ct_gpt *m = tiny_model(in, tg);
    struct need_log l = { 0, 0, 0 };
    int backward_needs;
    double plain = ct_gpt_forward(m, in, tg, 2, NULL, NULL);
    ct_error err;

    assert_true(ct_gpt_forward(m, in, tg, 2, need, &l) == plain);
    assert_int_equal(l.calls, 1 + 3 * tiny.n_layer + 1);
    assert_int_equal(l.next, ct_gpt_num_params(m));
    backward_needs = 0;
    assert_int_equal(ct_gpt_backward(m, 10, count_need, NULL, &backward_needs), 0);
    assert_int_equal(backward_needs, 2 + 3 * tiny.n_layer);
    l = (struct need_log){ 0, 0, 2 };
    assert_true(isnan(ct_gpt_forward(m, in, tg, 2, need, &l)));
    assert_int_equal(l.calls, 2);
    assert_int_equal(ct_gpt_set_gemm_dtype(m, CT_DTYPE_BF16, &err), 0);
    l = (struct need_log){ 0, 0, 0 };
    assert_false(isnan(ct_gpt_forward(m, in, tg, 2, need, &l)));
    assert_int_equal(l.calls, 1);
    assert_int_equal(l.next, ct_gpt_num_params(m));
    ct_gpt_free(m);
}

static void test_gpt_names_and_layout(void **state)
{
    ct_gpt *m = NULL;
    ct_error err;
    size_t off = 0;
    static const char *const want[] = { "wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias",
        "h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight", "h.0.attn.c_proj.bias",
        "h.0.ln_2.weight", "h.0.ln_2.bias", "h.0.mlp.c_fc.weight", "h.0.mlp.c_fc.bias", "h.0.mlp.c_proj.weight",
        "h.0.mlp.c_proj.bias" };

    assert_int_equal(ct_gpt_create(&tiny, 1, &m, &err), 0);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_string_equal(ct_gpt_tensor(m, (int)i)->name, want[i]);
    assert_string_equal(ct_gpt_tensor(m, ct_gpt_num_tensors(m) - 2)->name, "ln_f.weight");
    assert_int_equal(ct_gpt_tensor(m, 4)->shape[0], 3 * tiny.n_embd);   /* c_attn [3C, C] */
    assert_int_equal(ct_gpt_tensor(m, 4)->shape[1], tiny.n_embd);
    assert_int_equal(ct_gpt_tensor(m, 12)->shape[1], 4 * tiny.n_embd);  /* mlp.c_proj [C, 4C] */
    for (int i = 0; i < ct_gpt_num_tensors(m); i++) {
        assert_int_equal(ct_gpt_tensor(m, i)->offset, off);
        off += ct_gpt_tensor(m, i)->numel;
    }
    assert_int_equal(off, ct_gpt_num_params(m));
    ct_gpt_free(m);
}

static void test_gpt_init(void **state)
{
    ct_gpt_config c;
    ct_gpt *a = NULL, *b = NULL;
    ct_error err;
    ct_rng r;
    double s2 = 0, p2 = 0;
    const ct_tensor *wte, *proj, *ln, *bias;

    ct_gpt_config_default(&c);
    c.n_layer = 2;
    c.n_embd = 64;
    c.seq_len = 16;
    assert_int_equal(ct_gpt_create(&c, 1, &a, &err), 0);
    assert_int_equal(ct_gpt_create(&c, 1, &b, &err), 0);
    ct_rng_seed(&r, 3);
    ct_gpt_init(a, &r);
    ct_rng_seed(&r, 3);
    ct_gpt_init(b, &r);
    assert_memory_equal(ct_gpt_params(a), ct_gpt_params(b), sizeof(float) * ct_gpt_num_params(a));
    wte = ct_gpt_tensor(a, 0);
    proj = ct_gpt_tensor(a, 2 + 12 + 10); /* h.1.mlp.c_proj.weight */
    ln = ct_gpt_tensor(a, 2);
    bias = ct_gpt_tensor(a, 5);
    assert_string_equal(proj->name, "h.1.mlp.c_proj.weight");
    for (size_t i = 0; i < wte->numel; i++)
        s2 += ((float *)wte->data)[i] * (double)((float *)wte->data)[i];
    for (size_t i = 0; i < proj->numel; i++)
        p2 += ((float *)proj->data)[i] * (double)((float *)proj->data)[i];
    assert_true(fabs(sqrt(s2 / wte->numel) - 0.02) < 0.001);
    assert_true(fabs(sqrt(p2 / proj->numel) - 0.02 / sqrt(4.0)) < 0.0005);
    for (size_t i = 0; i < ln->numel; i++)
        assert_true(((float *)ln->data)[i] == 1.0f);
    for (size_t i = 0; i < bias->numel; i++)
        assert_true(((float *)bias->data)[i] == 0.0f);
    ct_gpt_free(a);
    ct_gpt_free(b);
}

static void expect_config_error(const char *text, const char *needle)
{
    ct_gpt_config c;
    ct_gpt *m = NULL;
    ct_error err;
    int rv;

    ct_error_clear(&err);
    ct_gpt_config_default(&c);
    rv = ct_gpt_config_parse(&c, text, &err);
    if (rv == 0)
        rv = ct_gpt_create(&c, 1, &m, &err);
    assert_null(m);
    assert_int_equal(rv, CT_EINVAL);
    if (!strstr(err.msg, needle))
        fail_msg("'%s': message '%s' does not name '%s'", text, err.msg, needle);
    assert_true(err.hint[0] != '\0');
}

static void test_gpt_config_errors(void **state)
{
    ct_gpt_config c;
    char buf[128];
    ct_error err;

    ct_gpt_config_default(&c);
    assert_int_equal(ct_gpt_config_parse(&c, "n_layer=2,n_embd=96,n_head=3", &err), 0);
    assert_int_equal(ct_gpt_config_check(&c, &err), 0);
    ct_gpt_config_describe(&c, buf, sizeof(buf));
    assert_string_equal(buf, "n_layer=2,n_head=3,n_embd=96,seq_len=128,vocab=256");
    expect_config_error("n_embd=100,n_head=3", "not a multiple of n_head");
    expect_config_error("n_layer=0", "n_layer");
    expect_config_error("n_head=-1", "n_head");
    expect_config_error("n_embd=abc", "n_embd");
    expect_config_error("seq_len=100000", "seq_len");
    expect_config_error("vocab=70000", "vocab");
    expect_config_error("n_layers=2", "n_layers");
    expect_config_error("n_layer", "key=value");
    expect_config_error("n_head=4,n_embd=2", "n_head");
    /* each value in range, the whole too large for a process */
    expect_config_error("n_layer=64,n_embd=8192,n_head=8", "too large");
    ct_error_clear(&err);
    ct_gpt_config_default(&c);
    ct_gpt_config_set(&c, "n_lyer", "3", &err);
    assert_non_null(strstr(err.hint, "did you mean n_layer"));
}

static void test_bits_per_byte(void **state)
{
    assert_true(fabs(ct_gpt_bits_per_byte(log(256.0)) - 8.0) < 1e-12);
}

/* --- token shards ------------------------------------------------------------------------------ */

static void path_of(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

static void write_raw(const char *path, const int32_t *header, size_t header_ints, const uint16_t *body, size_t n)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    if (header_ints)
        assert_int_equal(fwrite(header, 4, header_ints, f), header_ints);
    if (n)
        assert_int_equal(fwrite(body, 2, n, f), n);
    fclose(f);
}

static void test_tokens_round_trip(void **state)
{
    char path[512];
    uint16_t src[1000], *back = NULL;
    size_t n = 0;
    ct_error err;
    FILE *f;
    int32_t header[3];

    for (int i = 0; i < 1000; i++)
        src[i] = (uint16_t)(i * 37 % 65536);
    path_of(path, sizeof(path), "rt.bin");
    assert_int_equal(ct_tokens_write(path, src, 1000, &err), 0);
    assert_int_equal(ct_tokens_read(path, 0, &back, &n, &err), 0);
    assert_int_equal(n, 1000);
    assert_memory_equal(back, src, sizeof(src));
    free(back);
    /* the header llm.c writes: magic, version, count */
    f = fopen(path, "rb");
    assert_int_equal(fread(header, 4, 3, f), 3);
    fclose(f);
    assert_int_equal(header[0], 20240520);
    assert_int_equal(header[1], 1);
    assert_int_equal(header[2], 1000);
    /* an empty shard is valid */
    assert_int_equal(ct_tokens_write(path, src, 0, &err), 0);
    assert_int_equal(ct_tokens_read(path, 0, &back, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_null(back);
}

static void expect_read_error(const char *name, int code, const char *needle)
{
    char path[512];
    uint16_t *t = NULL;
    size_t n = 7;
    ct_error err;

    path_of(path, sizeof(path), name);
    ct_error_clear(&err);
    assert_int_equal(ct_tokens_read(path, 256, &t, &n, &err), code);
    assert_null(t);
    assert_int_equal(n, 0);
    if (!strstr(err.msg, needle) || !strstr(err.msg, path))
        fail_msg("%s: message '%s' does not name the file and '%s'", name, err.msg, needle);
    assert_true(err.hint[0] != '\0');
}

static void test_tokens_damaged(void **state)
{
    char path[512];
    int32_t h[256] = { 20240520, 1, 10 };
    uint16_t body[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };

    expect_read_error("missing.bin", CT_ENOENT, "does not exist");
    path_of(path, sizeof(path), "empty.bin");
    write_raw(path, h, 0, body, 0);
    expect_read_error("empty.bin", CT_EFORMAT, "shorter than");
    path_of(path, sizeof(path), "short.bin");
    write_raw(path, h, 100, body, 0);
    expect_read_error("short.bin", CT_EFORMAT, "shorter than");
    path_of(path, sizeof(path), "magic.bin");
    h[0] = 20240521;
    write_raw(path, h, 256, body, 10);
    expect_read_error("magic.bin", CT_EFORMAT, "magic 20240521");
    h[0] = 20240520;
    h[1] = 2;
    path_of(path, sizeof(path), "version.bin");
    write_raw(path, h, 256, body, 10);
    expect_read_error("version.bin", CT_EFORMAT, "version 2");
    h[1] = 1;
    path_of(path, sizeof(path), "truncated.bin");
    write_raw(path, h, 256, body, 9);
    expect_read_error("truncated.bin", CT_EFORMAT, "truncated");
    path_of(path, sizeof(path), "trailing.bin");
    write_raw(path, h, 256, body, 11);
    expect_read_error("trailing.bin", CT_EFORMAT, "trailing");
    h[2] = -5;
    path_of(path, sizeof(path), "negative.bin");
    write_raw(path, h, 256, body, 0);
    expect_read_error("negative.bin", CT_EFORMAT, "declares -5");
    h[2] = 10;
    body[6] = 300;
    path_of(path, sizeof(path), "vocab.bin");
    write_raw(path, h, 256, body, 10);
    expect_read_error("vocab.bin", CT_EFORMAT, "token 300 at position 6");
    path_of(path, sizeof(path), "");
    expect_read_error("", CT_EFORMAT, "not a regular file");
    /* A FIFO is refused at once (its open used to wait for a writer forever). */
    path_of(path, sizeof(path), "fifo.bin");
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_read_error("fifo.bin", CT_EFORMAT, "is a FIFO, not a regular file");
}

/* An --init-from file's embedding dimensions are checked before they become ints: a vocabulary of
 * 2^32 + 256 rows wrapped to 256 and passed as a valid GPT-2 shape. */
static void test_hf_shape_beyond_int(void **state)
{
    static const int64_t wte[2] = { ((int64_t)1 << 32) + 256, 32 }, wpe[2] = { 16, 32 }, ln[1] = { 32 };
    const ct_model_file_tensor file[3] = { { "wte.weight", 2, wte }, { "wpe.weight", 2, wpe },
                                           { "h.0.ln_1.weight", 1, ln } };
    ct_config given = { 0 };
    ct_error err;

    (void)state;
    ct_error_clear(&err);
    assert_int_equal(ct_gpt_hf_config(file, 3, "{\"n_head\": 2}", &given, &err), CT_EFORMAT);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, "[4294967552, 32] (wte)"));
}

static void test_token_windows(void **state)
{
    uint16_t tokens[11];
    ct_token_windows w = { tokens, 11, 0, 0 };
    int32_t in[6], tg[6];
    uint32_t idx[2] = { 3, 0 };
    ct_error err;

    for (int i = 0; i < 11; i++)
        tokens[i] = (uint16_t)(100 + i);
    assert_int_equal(ct_token_windows_set_len(&w, 3, "x.bin", &err), 0);
    assert_int_equal(w.count, 3); /* (11 - 1) / 3: windows 0-3, 3-6, 6-9 */
    assert_int_equal(ct_token_windows_set_len(&w, 10, "x.bin", &err), 0);
    assert_int_equal(w.count, 1);
    assert_int_equal(ct_token_windows_set_len(&w, 11, "x.bin", &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "x.bin holds 11 tokens"));
    assert_string_equal(err.id, "data-model-mismatch");
    assert_int_equal(ct_token_windows_set_len(&w, 2, "x.bin", &err), 0);
    assert_int_equal(w.count, 5);
    ct_token_windows_gather(&w, idx, 2, in, tg);
    /* window 3 = tokens 6..8 -> targets 7..9; window 0 = tokens 0..2 -> 1..3 (seq_len 2: in 6,7) */
    assert_int_equal(in[0], 106);
    assert_int_equal(in[1], 107);
    assert_int_equal(tg[0], 107);
    assert_int_equal(tg[1], 108);
    assert_int_equal(in[2], 100);
    assert_int_equal(tg[3], 102);
}

static int setup(void **state)
{
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[600];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_gradcheck),
        cmocka_unit_test(test_gpt_bf16_mixed),
        cmocka_unit_test(test_gpt_announce),
        cmocka_unit_test(test_gpt_forward_announces),
        cmocka_unit_test(test_gpt_names_and_layout),
        cmocka_unit_test(test_gpt_init),
        cmocka_unit_test(test_gpt_config_errors),
        cmocka_unit_test(test_bits_per_byte),
        cmocka_unit_test(test_tokens_round_trip),
        cmocka_unit_test(test_tokens_damaged),
        cmocka_unit_test(test_hf_shape_beyond_int),
        cmocka_unit_test(test_token_windows),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, setup, teardown);
}
