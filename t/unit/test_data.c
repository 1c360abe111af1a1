/* SPDX-License-Identifier: BSD-3-Clause */
/* IDX reader on good and damaged files (written to a temp dir), the train/val split on the real
 * data set, and the distributed sampler's sharding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "engine/data/fashion_mnist.h"
#include "engine/data/sampler.h"

static char dir[] = "/tmp/ctrain-test-data-XXXXXX";

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Write an IDX file (gzip'd): magic type 8, ndim dims, then `bytes` data bytes (may differ from
 * the product of dims, to make damaged files); extra_magic overrides the magic's last byte. */
static void write_idx(const char *name, int magic_ndim, int ndim, const uint32_t *dims, size_t bytes,
                      uint8_t fill)
{
    char path[512];
    unsigned char hdr[4 + 4 * 4] = { 0, 0, 8, (unsigned char)magic_ndim };
    unsigned char *data = malloc(bytes + 1);
    gzFile f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    for (int i = 0; i < ndim; i++)
        put_be32(hdr + 4 + 4 * i, dims[i]);
    memset(data, fill, bytes + 1);
    f = gzopen(path, "wb");
    assert_non_null(f);
    gzwrite(f, hdr, (unsigned)(4 + 4 * ndim));
    if (bytes)
        gzwrite(f, data, (unsigned)bytes);
    gzclose(f);
    free(data);
}

static void write_good_test_set(uint32_t n)
{
    uint32_t idims[3] = { n, 28, 28 }, ldims[1] = { n };

    write_idx("t10k-images-idx3-ubyte.gz", 3, 3, idims, (size_t)n * 784, 255);
    write_idx("t10k-labels-idx1-ubyte.gz", 1, 1, ldims, n, 3);
}

static int setup(void **state)
{
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[600];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd);
}

static void test_good_files(void **state)
{
    ct_dataset d;
    ct_error err;

    write_good_test_set(3);
    assert_int_equal(ct_fmnist_load_test(dir, &d, &err), 0);
    assert_int_equal(d.n, 3);
    assert_int_equal(d.dim, 784);
    assert_int_equal(d.y[2], 3);
    /* 255 normalised: (1 - mean) / std */
    assert_float_equal(d.x[100], (1.0 - CT_FMNIST_MEAN) / CT_FMNIST_STD, 1e-5);
    ct_dataset_free(&d);
}

/* Loading fails with code, and the message contains both needles. */
static void expect_failure(int code, const char *needle1, const char *needle2)
{
    ct_dataset d;
    ct_error err;

    ct_error_clear(&err);
    assert_int_equal(ct_fmnist_load_test(dir, &d, &err), code);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, needle1));
    assert_non_null(strstr(err.msg, needle2));
    assert_null(d.x);
}

static void test_missing(void **state)
{
    char path[512];

    write_good_test_set(2);
    snprintf(path, sizeof(path), "%s/t10k-labels-idx1-ubyte.gz", dir);
    unlink(path);
    expect_failure(CT_ENOENT, "t10k-labels-idx1-ubyte.gz", "No such file");
}

static void test_wrong_magic(void **state)
{
    uint32_t idims[3] = { 2, 28, 28 };

    write_good_test_set(2);
    /* A labels-style magic (1 dimension) on the images file. */
    write_idx("t10k-images-idx3-ubyte.gz", 1, 3, idims, 2 * 784, 0);
    expect_failure(CT_EFORMAT, "t10k-images-idx3-ubyte.gz", "wrong magic");
}

static void test_truncated(void **state)
{
    uint32_t idims[3] = { 4, 28, 28 };

    write_good_test_set(4);
    write_idx("t10k-images-idx3-ubyte.gz", 3, 3, idims, 3 * 784 + 17, 0);
    expect_failure(CT_EFORMAT, "t10k-images-idx3-ubyte.gz", "truncated");
}

static void test_trailing(void **state)
{
    uint32_t ldims[1] = { 4 };

    write_good_test_set(4);
    write_idx("t10k-labels-idx1-ubyte.gz", 1, 1, ldims, 5, 1);
    expect_failure(CT_EFORMAT, "t10k-labels-idx1-ubyte.gz", "after the 4 data bytes");
}

static void test_count_mismatch(void **state)
{
    uint32_t ldims[1] = { 5 };

    write_good_test_set(4);
    write_idx("t10k-labels-idx1-ubyte.gz", 1, 1, ldims, 5, 1);
    expect_failure(CT_EFORMAT, "5 labels", "4 images");
}

static void test_wrong_dims(void **state)
{
    uint32_t idims[3] = { 2, 27, 28 };

    write_good_test_set(2);
    write_idx("t10k-images-idx3-ubyte.gz", 3, 3, idims, 2 * 27 * 28, 0);
    expect_failure(CT_EFORMAT, "t10k-images-idx3-ubyte.gz", "27x28");
}

static void test_bad_label(void **state)
{
    uint32_t ldims[1] = { 2 };

    write_good_test_set(2);
    write_idx("t10k-labels-idx1-ubyte.gz", 1, 1, ldims, 2, 10);
    expect_failure(CT_EFORMAT, "t10k-labels-idx1-ubyte.gz", "label 10");
}

/* A gzip stream cut in the middle (a partial download): corrupt or truncated, never a crash. */
static void test_cut_gzip_stream(void **state)
{
    char path[512];
    FILE *f;
    long size;
    ct_dataset d;
    ct_error err;

    write_good_test_set(50);
    snprintf(path, sizeof(path), "%s/t10k-images-idx3-ubyte.gz", dir);
    f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fclose(f);
    assert_int_equal(truncate(path, size / 2), 0);
    assert_int_equal(ct_fmnist_load_test(dir, &d, &err), CT_EFORMAT);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, "t10k-images-idx3-ubyte.gz"));
}

/* A tiny file announcing 4 GB of data: truncated, found without allocating 4 GB first. */
static void test_huge_header(void **state)
{
    uint32_t idims[3] = { 1u << 24, 16, 16 }, got[3];
    char path[512];
    uint8_t *data;
    ct_error err;

    write_idx("huge-idx3-ubyte.gz", 3, 3, idims, 10, 0);
    snprintf(path, sizeof(path), "%s/huge-idx3-ubyte.gz", dir);
    assert_int_equal(ct_idx_read_u8(path, 3, got, &data, &err), CT_EFORMAT);
    assert_non_null(strstr(err.msg, "truncated"));
    assert_null(data);
}

/* The peak resident size of this process so far, in KiB. */
static long peak_kib(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* 2^19 images of 16x16: 128 MiB of zeros in a gzip file of about 128 KiB, written in 1 MiB pieces
 * so that the writer itself does not raise the peak resident size. */
static void write_bomb(void)
{
    static unsigned char zeros[1 << 20];
    unsigned char hdr[16] = { 0, 0, 8, 3 };
    char path[512];
    gzFile f;

    put_be32(hdr + 4, 1u << 19);
    put_be32(hdr + 8, 16);
    put_be32(hdr + 12, 16);
    snprintf(path, sizeof(path), "%s/t10k-images-idx3-ubyte.gz", dir);
    assert_non_null(f = gzopen(path, "wb9"));
    gzwrite(f, hdr, sizeof(hdr));
    for (int i = 0; i < 128; i++)
        gzwrite(f, zeros, sizeof(zeros));
    gzclose(f);
}

/* The shape is checked from the headers, before any data is decompressed: a small file
 * announcing 128 MiB of 16x16 images is refused without reading them (the peak resident size
 * grows by less than 32 MiB; it grew by 128 MiB when the check came after the read). */
static void test_shape_before_data(void **state)
{
    ct_dataset d;
    ct_error err;
    long before;

    write_good_test_set(4);
    write_bomb();
    before = peak_kib();
    assert_int_equal(ct_fmnist_load_test(dir, &d, &err), CT_EFORMAT);
    print_message("# %s (peak grew by %ld KiB)\n", err.msg, peak_kib() - before);
    assert_non_null(strstr(err.msg, "images are 16x16"));
    assert_true(peak_kib() - before < 32 * 1024);
}

/* A FIFO as an IDX file is refused at once (its open used to wait for a writer forever). */
static void test_fifo_refused(void **state)
{
    char path[512];
    uint32_t got[3];
    uint8_t *data;
    ct_error err;

    snprintf(path, sizeof(path), "%s/fifo-idx3-ubyte.gz", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(ct_idx_read_u8(path, 3, got, &data, &err), CT_EFORMAT);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, "fifo-idx3-ubyte.gz is a FIFO, not a regular file"));
    assert_null(data);
}

static void test_real_split(void **state)
{
    ct_dataset train, val, again, again_val;
    ct_error err;
    int rc = ct_fmnist_load_fit(NULL, 1.0 / 12, &train, &val, &err);

    if (rc == CT_ENOENT) {
        /* In CI (.ci/run sets CI=true) scripts/install-deps installed it: missing is a failure. */
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("dataset-fashion-mnist not installed, and CI installs it (t/lib/ci.sh)");
        skip(); /* dataset-fashion-mnist not installed */
        return;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(train.n, 55000);
    assert_int_equal(val.n, 5000);
    /* Deterministic: the same split every time. */
    assert_int_equal(ct_fmnist_load_fit(NULL, 1.0 / 12, &again, &again_val, &err), 0);
    assert_memory_equal(val.y, again_val.y, val.n);
    assert_memory_equal(val.x, again_val.x, 784 * sizeof(float));
    ct_dataset_free(&train);
    ct_dataset_free(&val);
    ct_dataset_free(&again);
    ct_dataset_free(&again_val);
    assert_int_equal(ct_fmnist_load_fit(NULL, 1.5, &train, &val, &err), CT_EINVAL);
}

static void test_sampler_shards(void **state)
{
    enum { N = 103, W = 4, BATCH = 8 };
    ct_sampler s[W];
    int count[N] = { 0 };
    ct_error err;
    uint32_t first_epoch0;

    for (int r = 0; r < W; r++) {
        assert_int_equal(ct_sampler_init(&s[r], N, BATCH, r, W, 1, 42, &err), 0);
        ct_sampler_set_epoch(&s[r], 0);
        assert_int_equal(s[r].per_rank, 26); /* ceil(103/4): padded to 104 */
        assert_int_equal(ct_sampler_steps(&s[r]), 4);
    }
    for (int r = 0; r < W; r++)
        for (size_t st = 0; st < ct_sampler_steps(&s[r]); st++) {
            const uint32_t *idx;
            int k = ct_sampler_batch(&s[r], st, &idx);

            assert_int_equal(k, st == 3 ? 2 : 8);
            for (int i = 0; i < k; i++)
                count[idx[i]]++;
        }
    /* Every sample once, exactly one padded duplicate. */
    int twice = 0;
    for (int i = 0; i < N; i++) {
        assert_true(count[i] == 1 || count[i] == 2);
        twice += count[i] == 2;
    }
    assert_int_equal(twice, 1);
    /* Reshuffled each epoch, reproducible from (seed, epoch). */
    first_epoch0 = s[0].order[0];
    ct_sampler_set_epoch(&s[0], 1);
    ct_sampler_set_epoch(&s[1], 1);
    assert_memory_not_equal(s[0].order, s[1].order, sizeof(uint32_t) * 26);
    ct_sampler_set_epoch(&s[0], 0);
    assert_int_equal(s[0].order[0], first_epoch0);
    for (int r = 0; r < W; r++)
        ct_sampler_free(&s[r]);
}

static void test_sampler_eval(void **state)
{
    ct_sampler a, b;
    ct_error err;

    assert_int_equal(ct_sampler_init(&a, 5, 2, 0, 2, 0, 0, &err), 0);
    assert_int_equal(ct_sampler_init(&b, 5, 2, 1, 2, 0, 0, &err), 0);
    assert_int_equal(a.per_rank + b.per_rank, 5); /* no padding: each sample counted once */
    assert_int_equal(a.order[2], 4);
    assert_int_equal(b.order[1], 3);
    ct_sampler_free(&b);
    assert_int_equal(ct_sampler_init(&b, 5, 2, 2, 2, 0, 0, &err), CT_EINVAL);
    ct_sampler_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_files),
        cmocka_unit_test(test_missing),
        cmocka_unit_test(test_wrong_magic),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_trailing),
        cmocka_unit_test(test_count_mismatch),
        cmocka_unit_test(test_wrong_dims),
        cmocka_unit_test(test_bad_label),
        cmocka_unit_test(test_cut_gzip_stream),
        cmocka_unit_test(test_huge_header),
        cmocka_unit_test(test_shape_before_data),
        cmocka_unit_test(test_fifo_refused),
        cmocka_unit_test(test_real_split),
        cmocka_unit_test(test_sampler_shards),
        cmocka_unit_test(test_sampler_eval),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, setup, teardown);
}
