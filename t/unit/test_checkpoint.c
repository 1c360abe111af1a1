/* SPDX-License-Identifier: BSD-3-Clause */
/* safetensors checkpoint IO: round trip, the on-disk format, and damaged files (truncated at every
 * length, bytes flipped, another shape, missing tensors, overlapping or gapped data, trailing
 * bytes, a key twice, oversized headers) -> CT_EFORMAT naming file and tensor; stale temp files
 * removed by name, never by a glob of the path. ctrain's format in one place (engine/checkpoint/
 * format.h): the dtype names both ways, the metadata, the format check. */
#include <fcntl.h>
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

#include "ctrain/checkpoint_io.h"
#include "ctrain/dtype.h"
#include "engine/checkpoint/format.h"
#include "engine/checkpoint/meta.h"

static char dir[] = "/tmp/ctrain-test-ckpt-XXXXXX";
static char path[256];
static float w[6] = { 1, 2, 3, 4, 5, 6 }, b[2] = { -1, -2 };

static void add_tensor(ct_ckpt *c, const char *name, float *data, int ndim, int64_t d0, int64_t d1)
{
    ct_ckpt_tensor *t = &c->tensors[c->n_tensors++];

    snprintf(t->name, sizeof(t->name), "%s", name);
    t->dtype = CT_DTYPE_F32;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->data = data;
    t->nbytes = sizeof(float) * (size_t)(ndim == 1 ? d0 : d0 * d1);
}

static void make_ckpt(ct_ckpt *c, float *wbuf, float *bbuf)
{
    memset(c, 0, sizeof(*c));
    add_tensor(c, "layers.0.weight", wbuf, 2, 2, 3);
    add_tensor(c, "layers.0.bias", bbuf, 1, 2, 0);
    c->n_meta = 2;
    snprintf(c->meta[0].key, 64, "epoch");
    snprintf(c->meta[0].value, 1024, "3");
    snprintf(c->meta[1].key, 64, "rng");
    snprintf(c->meta[1].value, 1024, "0123456789abcdef");
}

static int setup(void **state)
{
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof(path), "%s/last.safetensors", dir);
    return 0;
}

static int teardown(void **state)
{
    char cmd[300];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd);
}

static void save_good(void)
{
    ct_ckpt c;
    ct_error err;

    make_ckpt(&c, w, b);
    assert_int_equal(ct_checkpoint_io_safetensors.save(path, &c, &err), 0);
}

static void test_round_trip(void **state)
{
    float w2[6] = { 0 }, b2[2] = { 0 };
    ct_ckpt c;
    ct_error err;
    char cmd[600];
    struct stat st;

    save_good();
    make_ckpt(&c, w2, b2);
    c.n_meta = 0;
    assert_int_equal(ct_checkpoint_io_safetensors.load(path, &c, &err), 0);
    assert_memory_equal(w, w2, sizeof(w));
    assert_memory_equal(b, b2, sizeof(b));
    assert_int_equal(c.n_meta, 2);
    assert_string_equal(c.meta[1].value, "0123456789abcdef");
    /* No temporary files left beside it. */
    snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", dir);
    assert_int_equal(system(cmd), 0);
    /* The layout: 8-byte length, header padded to 8, 32 data bytes. */
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal((st.st_size - 8 - 32) % 8, 0);
}

/* The format as another reader sees it: Python's json on the header. */
static void test_format_python(void **state)
{
    char cmd[1200];

    if (access("/usr/bin/python3", X_OK)) {
        /* In CI (.ci/run sets CI=true) scripts/install-deps installed it: missing is a failure. */
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("/usr/bin/python3 missing, and CI installs it (t/lib/ci.sh)");
        skip();
        return;
    }
    save_good();
    snprintf(cmd, sizeof(cmd),
             "/usr/bin/python3 -c 'import json,struct,sys\n"
             "d=open(sys.argv[1],\"rb\").read(); n=struct.unpack(\"<Q\",d[:8])[0]; h=json.loads(d[8:8+n])\n"
             "assert h[\"__metadata__\"][\"epoch\"]==\"3\"\n"
             "t=h[\"layers.0.bias\"]; a,b=t[\"data_offsets\"]\n"
             "assert t[\"dtype\"]==\"F32\" and t[\"shape\"]==[2]\n"
             "assert struct.unpack(\"<2f\",d[8+n+a:8+n+b])==(-1.0,-2.0)\n"
             "assert h[\"layers.0.weight\"][\"shape\"]==[2,3]' '%s'", path);
    assert_int_equal(system(cmd), 0);
}

static int try_load(ct_error *err)
{
    float w2[6], b2[2];
    ct_ckpt c;

    make_ckpt(&c, w2, b2);
    ct_error_clear(err);
    return ct_checkpoint_io_safetensors.load(path, &c, err);
}

static void test_truncated_everywhere(void **state)
{
    struct stat st;
    ct_error err;
    off_t size;

    save_good();
    assert_int_equal(stat(path, &st), 0);
    size = st.st_size;
    for (off_t len = size - 1; len >= 0; len--) {
        assert_int_equal(truncate(path, len), 0);
        assert_int_equal(try_load(&err), CT_EFORMAT);
        assert_non_null(strstr(err.msg, path));
        if (len == size - 1 || len == 5)
            print_message("# cut at %lld: %s\n", (long long)len, err.msg);
    }
}

static void test_flipped_bytes(void **state)
{
    struct stat st;
    ct_error err;
    int failures = 0;

    save_good();
    assert_int_equal(stat(path, &st), 0);
    /* Every single byte of the header and length replaced: either a clean error or (a byte that
     * does not matter, like padding) a successful load; never a crash. */
    for (off_t pos = 0; pos < st.st_size - 32; pos++)
        for (int v = 0; v < 3; v++) {
            static const unsigned char vals[] = { 0x00, 0xff, '9' };
            int fd;
            unsigned char old;

            save_good();
            fd = open(path, O_RDWR);
            assert_int_equal(pread(fd, &old, 1, pos), 1);
            assert_int_equal(pwrite(fd, &vals[v], 1, pos), 1);
            close(fd);
            if (try_load(&err)) {
                assert_true(err.code == CT_EFORMAT);
                assert_non_null(strstr(err.msg, path));
                failures++;
            }
        }
    print_message("# %d of the flipped files rejected\n", failures);
    assert_true(failures > 0);
}

static void test_other_shape(void **state)
{
    float w2[8], b2[2];
    ct_ckpt c;
    ct_error err;

    save_good();
    make_ckpt(&c, w2, b2);
    c.tensors[0].shape[1] = 4;
    c.tensors[0].nbytes = sizeof(w2);
    assert_int_equal(ct_checkpoint_io_safetensors.load(path, &c, &err), CT_EFORMAT);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, "layers.0.weight"));
    assert_non_null(strstr(err.msg, "[2, 3]"));
    assert_true(err.hint[0] != '\0');
    make_ckpt(&c, w2, b2);
    snprintf(c.tensors[1].name, sizeof(c.tensors[1].name), "layers.1.bias");
    assert_int_equal(ct_checkpoint_io_safetensors.load(path, &c, &err), CT_EFORMAT);
    assert_non_null(strstr(err.msg, "no tensor layers.1.bias"));
}

static void write_raw(uint64_t hlen, const char *json)
{
    FILE *f = fopen(path, "wb");
    unsigned char len8[8];

    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)(hlen >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(json, 1, strlen(json), f);
    fclose(f);
}

/* A key with a control character (escaped NUL: read as "layers.0.bias" by a C reader) is refused. */
static void test_control_char_key(void **state)
{
    static const char *const bad[] = {
        "{\"layers.0.bias\\u0000x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"__metadata__\":{\"a\\n\":\"b\"}}",
        "{\"layers.0.bias\\u001f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    };
    float bb[2];
    ct_ckpt c;
    ct_error err;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        FILE *f;

        write_raw(strlen(bad[i]), bad[i]);
        f = fopen(path, "ab");
        fwrite("\0\0\0\0\0\0\0\0", 1, 8, f);
        fclose(f);
        memset(&c, 0, sizeof(c));
        add_tensor(&c, "layers.0.bias", bb, 1, 2, 0);
        assert_int_equal(ct_checkpoint_io_safetensors.load(path, &c, &err), CT_EFORMAT);
        assert_non_null(strstr(err.msg, "control character"));
    }
    /* An escaped backslash before u0000 is a printable name. */
    write_raw(strlen("{\"a\\\\u0000\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"),
              "{\"a\\\\u0000\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}");
    {
        FILE *f = fopen(path, "ab");
        fwrite("\0\0\0\0\0\0\0\0", 1, 8, f);
        fclose(f);
    }
    memset(&c, 0, sizeof(c));
    add_tensor(&c, "a\\u0000", bb, 1, 2, 0);
    assert_int_equal(ct_checkpoint_io_safetensors.load(path, &c, &err), 0);
}

/* The loader's digests: equal for the same file, the header's unchanged and the whole one changed
 * by other tensor bytes (what every rank compares with rank 0's). */
static void test_digest(void **state)
{
    float w2[6], b2[2], w3[6] = { 9, 2, 3, 4, 5, 6 };
    uint64_t h1, d1;
    ct_ckpt c;
    ct_error err;

    save_good();
    make_ckpt(&c, w2, b2);
    assert_int_equal(ct_checkpoint_io_safetensors.load(path, &c, &err), 0);
    h1 = c.header_digest;
    d1 = c.digest;
    assert_true(h1 != 0 && d1 != h1);
    make_ckpt(&c, w2, b2);
    assert_int_equal(ct_checkpoint_io_safetensors.load(path, &c, &err), 0);
    assert_true(c.header_digest == h1 && c.digest == d1);
    make_ckpt(&c, w3, b);
    assert_int_equal(ct_checkpoint_io_safetensors.save(path, &c, &err), 0);
    make_ckpt(&c, w2, b2);
    assert_int_equal(ct_checkpoint_io_safetensors.load(path, &c, &err), 0);
    assert_true(c.header_digest == h1);
    assert_true(c.digest != d1);
}

static void test_bad_header(void **state)
{
    static const struct { const char *json; const char *needle; } cases[] = {
        { "{\"layers.0.bias\":1}", "lacks dtype" },
        { "[1,2,3]", "not a JSON object" },
        { "{\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,800]}}", "outside the" },
        { "{\"layers.0.bias\":{\"dtype\":\"I7\",\"shape\":[2],\"data_offsets\":[0,8]}}", "unsupported dtype I7" },
        { "{\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", "do not hold its shape" },
        { "{\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", "bad shape" },
        { "{\"__metadata__\":{\"epoch\":3}}", "not a string" },
    };
    ct_error err;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char json[512];

        snprintf(json, sizeof(json), "%s%s", cases[i].json, "        " "\x01\x02\x03\x04\x05\x06\x07\x08");
        write_raw(strlen(cases[i].json), json);
        assert_int_equal(try_load(&err), CT_EFORMAT);
        print_message("# %s\n", err.msg);
        assert_non_null(strstr(err.msg, cases[i].needle));
        assert_non_null(strstr(err.msg, path));
    }
    write_raw(UINT64_C(0x7fffffffffffffff), "{}");
    assert_int_equal(try_load(&err), CT_EFORMAT);
    assert_non_null(strstr(err.msg, "header length"));
    unlink(path);
    assert_int_equal(try_load(&err), CT_ENOENT);
}

/* A file with header json (padded to 8) followed by data_len data bytes. */
static void write_file(const char *json, size_t data_len)
{
    size_t n = strlen(json), hlen = (n + 7) / 8 * 8;
    char *buf = calloc(1, 8 + hlen + data_len);
    FILE *f = fopen(path, "wb");

    assert_non_null(buf);
    assert_non_null(f);
    for (int i = 0; i < 8; i++)
        buf[i] = (char)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, json, n);
    memset(buf + 8 + n, ' ', hlen - n);
    assert_int_equal(fwrite(buf, 1, 8 + hlen + data_len, f), 8 + hlen + data_len);
    fclose(f);
    free(buf);
}

#define W "\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":"
#define B "\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"

/* Hugging Face's rules: sorted by offset the data ranges follow each other from 0 and cover the
 * data exactly; and no key twice. Entries in any order within that are fine (as for Python). */
static void test_layout(void **state)
{
    static const struct { const char *json; size_t data; const char *needle; } cases[] = {
        { "{" W "[0,24]}," B "[16,24]}}", 24, "overlap" },
        { "{" W "[0,24]}," B "[28,36]}}", 36, "gap" },
        { "{" W "[0,24]}," B "[24,32]}}", 40, "8 bytes after the last tensor" },
        { "{" W "[0,24]}," B "[24,32]}}", 33, "1 byte after the last tensor" },
        { "{" W "[8,32]}," B "[0,8]}," B "[0,8]}}", 32, "names layers.0.bias twice" },
        { "{\"__metadata__\":{\"epoch\":\"1\",\"epoch\":\"2\"}," W "[0,24]}," B "[24,32]}}", 32,
          "__metadata__ names epoch twice" },
        { "{" W "[0,24]}," B "[24,32]},\"extra\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[24,28]}}", 32,
          "overlap" },
    };
    float w2[6], b2[2];
    ct_ckpt c;
    ct_error err;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_file(cases[i].json, cases[i].data);
        assert_int_equal(try_load(&err), CT_EFORMAT);
        print_message("# %s\n", err.msg);
        assert_non_null(strstr(err.msg, cases[i].needle));
        assert_non_null(strstr(err.msg, path));
    }
    /* Listed out of order but laid out contiguously: loads, each tensor from its own range. */
    write_file("{" B "[24,32]}," W "[0,24]}}", 32);
    {
        FILE *f = fopen(path, "r+b");
        float data[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
        struct stat st;

        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(fseek(f, st.st_size - 32, SEEK_SET), 0);
        fwrite(data, sizeof(float), 8, f);
        fclose(f);
    }
    make_ckpt(&c, w2, b2);
    assert_int_equal(ct_checkpoint_io_safetensors.load(path, &c, &err), 0);
    assert_true(w2[0] == 1 && w2[5] == 6 && b2[0] == 7 && b2[1] == 8);
}

/* What a header may cost: a header over 1 MiB, or one of more JSON values than a checkpoint can
 * need, is refused before it is parsed (t/fuzz/README.md has the memory figures). */
static void test_header_limits(void **state)
{
    size_t n = (size_t)2 << 20;
    char *json = malloc(n + 1);
    ct_error err;

    assert_non_null(json);
    memset(json, ' ', n);
    memcpy(json, "{}", 2);
    json[n] = '\0';
    write_file(json, 0);
    assert_int_equal(try_load(&err), CT_EFORMAT);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, "larger than ctrain reads"));
    /* 100000 zeros in 200 KB: small, but a parsed node each. */
    n = 6 + 2 * 100000;
    memcpy(json, "{\"x\":[", 6);
    for (size_t i = 6; i < n; i += 2)
        memcpy(json + i, "0,", 2);
    memcpy(json + n - 1, "]}", 3);
    write_file(json, 0);
    assert_int_equal(try_load(&err), CT_EFORMAT);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, "more than 65536 JSON values"));
    free(json);
}

/* A killed writer's temp files are removed before the next save, matched by name, not by a glob
 * of the path: a directory named with [ * ? must not reach other files. */
static void test_stale_temps_literal(void **state)
{
    char sub[300], other[400], stale[400], mine[300], cmd[700];
    ct_ckpt c;
    ct_error err;
    int fd;

    snprintf(sub, sizeof(sub), "%s/run[1]*?", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(mine, sizeof(mine), "%s/last.safetensors", sub);
    snprintf(stale, sizeof(stale), "%s.tmp.AbC123", mine);
    snprintf(other, sizeof(other), "%s/run1x/last.safetensors.tmp.XyZ789", dir);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/run1x'", dir);
    assert_int_equal(system(cmd), 0);
    assert_true((fd = open(stale, O_CREAT | O_WRONLY, 0600)) >= 0);
    close(fd);
    assert_true((fd = open(other, O_CREAT | O_WRONLY, 0600)) >= 0);
    close(fd);
    make_ckpt(&c, w, b);
    assert_int_equal(ct_checkpoint_io_safetensors.save(mine, &c, &err), 0);
    assert_int_equal(access(stale, F_OK), -1);       /* its own stale temp: gone */
    assert_int_equal(access(other, F_OK), 0);        /* another run's, which the glob matched: kept */
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s/run1x'", sub, dir);
    assert_int_equal(system(cmd), 0);
}

static void test_unwritable_dir(void **state)
{
    ct_ckpt c;
    ct_error err;

    make_ckpt(&c, w, b);
    assert_int_equal(ct_checkpoint_io_safetensors.save("/nonexistent-dir/x.safetensors", &c, &err), CT_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x.safetensors"));
}

/* One table of names, both ways: what a file says is what the metadata's param_dtype says. */
static void test_dtype_names(void **state)
{
    static const struct { enum ct_dtype t; const char *name; } want[] = {
        { CT_DTYPE_F32, "F32" }, { CT_DTYPE_F64, "F64" }, { CT_DTYPE_BF16, "BF16" }, { CT_DTYPE_F16, "F16" },
    };

    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_string_equal(ct_ckpt_dtype_name(want[i].t), want[i].name);
        assert_int_equal(ct_ckpt_dtype_parse(want[i].name), want[i].t);
    }
    /* types no checkpoint stores, names no file gives, case */
    assert_null(ct_ckpt_dtype_name(CT_DTYPE_U8));
    assert_null(ct_ckpt_dtype_name(CT_DTYPE_I32));
    assert_null(ct_ckpt_dtype_name(-1));
    assert_int_equal(ct_ckpt_dtype_parse("f32"), -1);
    assert_int_equal(ct_ckpt_dtype_parse("U8"), -1);
    assert_int_equal(ct_ckpt_dtype_parse(""), -1);
    assert_int_equal(ct_ckpt_dtype_parse(NULL), -1);
}

static void test_format_meta(void **state)
{
    ct_ckpt *c = calloc(1, sizeof(*c));
    ct_ckpt_record *r = calloc(1, sizeof(*r));
    ct_error err;

    assert_non_null(c);
    assert_non_null(r);
    ct_ckpt_record_read(c, r);
    assert_null(r->text[CT_CKPT_F_FORMAT]);
    assert_int_equal(ct_ckpt_record_format_check(r, "", "/x/a.safetensors", &err), CT_EFORMAT);
    assert_string_equal(err.id, "ckpt-format");
    assert_string_equal(err.msg, "/x/a.safetensors: not a ctrain checkpoint (metadata format is missing)");
    ct_ckpt_meta_hf(c);
    ct_ckpt_record_read(c, r);
    assert_int_equal(ct_ckpt_record_format_check(r, "--ckpt-path ", "m.safetensors", &err), CT_EFORMAT);
    assert_string_equal(err.msg, "--ckpt-path m.safetensors: not a ctrain checkpoint (metadata format is pt)");
    assert_non_null(strstr(err.hint, "written by ctrain fit"));
    snprintf(c->meta[0].value, sizeof(c->meta[0].value), "%s", CT_CKPT_FORMAT);
    ct_ckpt_record_read(c, r);
    assert_int_equal(ct_ckpt_record_format_check(r, "", "a", &err), 0);
    assert_string_equal(CT_CKPT_FORMAT, "ctrain-checkpoint-1");   /* on disk: never changed by a refactor */
    free(r);
    free(c);
}

/* The metadata of a checkpoint written before the field table (ctrain fit's keys, values and
 * order, as checkpoint.c wrote them one by one) reads into a record that writes it back entry for
 * entry: the table keeps the files as they were. */
static void test_meta_table_round_trip(void **state)
{
    static const char *const old[][2] = {
        { "format", "ctrain-checkpoint-1" }, { "model", "mlp 784-32-10" }, { "optimizer", "adamw" },
        { "precision", "32-true" }, { "param_dtype", "F32" }, { "optimizer_steps", "188" }, { "epoch", "1" },
        { "step_in_epoch", "0" }, { "global_step", "188" }, { "best_val_acc", "0.80500000000000005" },
        { "val_acc", "0.80500000000000005" }, { "val_loss", "0.54123456789012347" }, { "world_size", "2" },
        { "batch_size", "32" }, { "blas_threads", "1" }, { "gemm_threads", "1" }, { "seed", "42" },
        { "rng", "0123456789abcdeffedcba98765432100011223344556677aabbccddeeff0011" },
        { "flags", "{\"model\":\"mlp\",\"model_config\":\"hidden=32\"}" }, { "slurm_job_id", "" },
        { "monitor", "val_acc max" }, { "best_score", "0.80500000000000005" }, { "wait_count", "0" },
        { "early_stopped", "0" }, { "top_k", "0.80500000000000005 epoch=0-step=188.safetensors" },
        { "datamodule", "fashion-mnist" }, { "data", "4 files 2f1e" }, { "val_fraction", "0.083333333333333329" },
        { "model_config", "hidden=32" },
    };
    int n = (int)(sizeof(old) / sizeof(old[0]));
    ct_ckpt *in = calloc(1, sizeof(*in)), *out = calloc(1, sizeof(*out));
    ct_ckpt_record *r = calloc(1, sizeof(*r));
    ct_ckpt_record *mine = calloc(1, sizeof(*mine));
    ct_error err;

    assert_non_null(in);
    assert_non_null(out);
    assert_non_null(r);
    assert_non_null(mine);
    for (int i = 0; i < n; i++) {
        snprintf(in->meta[i].key, sizeof(in->meta[i].key), "%s", old[i][0]);
        snprintf(in->meta[i].value, sizeof(in->meta[i].value), "%s", old[i][1]);
    }
    in->n_meta = n;
    ct_ckpt_record_read(in, r);
    assert_int_equal(r->bad, 0);
    assert_int_equal(r->epoch, 1);
    assert_int_equal(r->global_step, 188);
    assert_int_equal(r->rng[3], 0xaabbccddeeff0011ULL);
    ct_ckpt_record_write(r, out);
    assert_int_equal(out->n_meta, n);
    for (int i = 0; i < n; i++) {
        assert_string_equal(out->meta[i].key, old[i][0]);
        assert_string_equal(out->meta[i].value, old[i][1]);
    }
    /* The record written is the run's own: it matches itself under every rule. */
    memcpy(mine, r, sizeof(*mine));
    memset(mine->text, 0, sizeof(mine->text));
    snprintf(mine->slurm_job_id, sizeof(mine->slurm_job_id), "7");
    assert_int_equal(ct_ckpt_record_check(r, mine, NULL, CT_CKPT_RULE_LOAD | CT_CKPT_RULE_RESUME |
                                          CT_CKPT_RULE_DETERMINISTIC, "a", &err), 0);
    /* Another seed, another job, a tampered count: each named. */
    mine->seed = 7;
    assert_int_equal(ct_ckpt_record_check(r, mine, NULL, CT_CKPT_RULE_LOAD | CT_CKPT_RULE_RESUME, "a", &err),
                     CT_ECONFLICT);
    assert_non_null(strstr(err.msg, "the checkpoint's run has --seed 42, this run has 7"));
    assert_int_equal(ct_ckpt_record_check(r, mine, NULL, CT_CKPT_RULE_LOAD | CT_CKPT_RULE_JOB, "a", &err),
                     CT_ECONFLICT);
    assert_string_equal(err.id, "ckpt-auto-other-job");
    snprintf(in->meta[6].value, sizeof(in->meta[6].value), "-1");
    ct_ckpt_record_read(in, r);
    mine->seed = 42;
    assert_int_equal(ct_ckpt_record_check(r, mine, NULL, CT_CKPT_RULE_LOAD | CT_CKPT_RULE_RESUME, "a", &err),
                     CT_EFORMAT);
    assert_string_equal(err.msg, "a: metadata epoch is '-1', not a count from 0 to 10^12");
    free(mine);
    free(r);
    free(out);
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_format_python),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_flipped_bytes),
        cmocka_unit_test(test_other_shape),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_control_char_key),
        cmocka_unit_test(test_digest),
        cmocka_unit_test(test_unwritable_dir),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_header_limits),
        cmocka_unit_test(test_stale_temps_literal),
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_format_meta),
        cmocka_unit_test(test_meta_table_round_trip),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, setup, teardown);
}
