/* SPDX-License-Identifier: BSD-3-Clause */
/* Output files (engine/util/fsutil.c): the exclusive temp gets the user's umask without ctrain
 * changing it (umask(0) to read it would change it for every thread meanwhile); an atomic write
 * syncs the directory after the rename (else a crash may bring the old file back); a file with a
 * second name (a hard link planted in a shared sticky directory) is neither truncated nor appended to;
 * a directory replaces a file and a file a directory, atomically (sharded checkpoints).
 * umask and fsync are interposed here to count what the library calls. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctrain/util.h"
#include "engine/util/fsutil.h"

static int umask_calls, dir_fsyncs;
static char dir[] = "/tmp/ctrain-test-fsutil-XXXXXX";

mode_t umask(mode_t mask)
{
    umask_calls++;
    return (mode_t)syscall(SYS_umask, mask);
}

int fsync(int fd)
{
    struct stat st;

    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
        dir_fsyncs++;
    return (int)syscall(SYS_fsync, fd);
}

static int setup(void **state)
{
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[300];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd);
}

static void test_temp_mode_without_umask(void **state)
{
    char path[512], tmp[600];
    struct stat st;
    mode_t old = (mode_t)syscall(SYS_umask, 027);
    int fd;

    snprintf(path, sizeof(path), "%s/a.json", dir);
    umask_calls = 0;
    fd = ct_fs_create_temp(path, tmp, sizeof(tmp));
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_int_equal(umask_calls, 0);
    assert_int_equal(strncmp(tmp, path, strlen(path)), 0);
    assert_int_equal(strlen(tmp), strlen(path) + strlen(CT_FS_TEMP_SUFFIX) + CT_FS_TEMP_RANDOM);
    close(fd);
    unlink(tmp);
    syscall(SYS_umask, old);
}

static void test_atomic_syncs_dir(void **state)
{
    char path[512], buf[16] = "";
    ct_error err;
    FILE *f;

    snprintf(path, sizeof(path), "%s/summary.json", dir);
    dir_fsyncs = 0;
    assert_int_equal(ct_fs_write_atomic(path, "{}\n", 3, &err), 0);
    assert_true(dir_fsyncs >= 1);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_string_equal(buf, "{}\n");
}

static void test_output_refuses_hard_link(void **state)
{
    char path[512], other[512];
    struct stat st;
    ct_error err;
    int fd;

    snprintf(other, sizeof(other), "%s/precious", dir);
    snprintf(path, sizeof(path), "%s/metrics.csv", dir);
    fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "keep\n", 5), 5);
    close(fd);
    assert_int_equal(link(other, path), 0);
    for (int append = 0; append < 2; append++) {
        assert_int_equal(ct_fs_open_output(path, append, &err), -1);
        assert_string_equal(err.id, "fs-file-links");
        assert_int_equal(stat(other, &st), 0);
        assert_int_equal(st.st_size, 5);
    }
    unlink(path);
    fd = ct_fs_open_output(path, 0, &err);
    assert_true(fd >= 0);
    close(fd);
}

static void put(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* A sharded checkpoint (issue 52 item 3): its temporary directory gets the user's umask without
 * ctrain changing it; ct_fs_replace puts a directory where a file was and a file where a directory
 * was, the older one removed; ct_fs_remove_stale_temps removes a killed save's temporary directory
 * and nothing else. */
static void test_replace_dir_and_file(void **state)
{
    char path[512], tmp[600], f[700], keep[512];
    struct stat st;
    mode_t old = (mode_t)syscall(SYS_umask, 027);

    (void)state;
    snprintf(path, sizeof(path), "%s/last.safetensors", dir);
    snprintf(keep, sizeof(keep), "%s/last.safetensors.tmp.kept", dir); /* not six characters: not a temp */
    put(path, "file\n");
    put(keep, "keep\n");
    umask_calls = 0;
    assert_int_equal(ct_fs_create_temp_dir(path, tmp, sizeof(tmp)), 0);
    assert_int_equal(umask_calls, 0);
    assert_int_equal(stat(tmp, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0750);
    snprintf(f, sizeof(f), "%s/rank-00000.safetensors", tmp);
    put(f, "shard\n");
    assert_int_equal(ct_fs_replace(tmp, path), 0);      /* a directory over a file */
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(access(tmp, F_OK), -1);            /* the older file removed */
    snprintf(f, sizeof(f), "%s/rank-00000.safetensors", path);
    assert_int_equal(access(f, F_OK), 0);
    assert_true(ct_fs_create_temp(path, tmp, sizeof(tmp)) >= 0);
    assert_int_equal(ct_fs_replace(tmp, path), 0);      /* a file over a directory */
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(ct_fs_create_temp_dir(path, tmp, sizeof(tmp)), 0);   /* a killed save's */
    snprintf(f, sizeof(f), "%s/rank-00001.safetensors", tmp);
    put(f, "shard\n");
    ct_fs_remove_stale_temps(path);
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(access(keep, F_OK), 0);
    assert_int_equal(access(path, F_OK), 0);
    unlink(keep);
    unlink(path);
    syscall(SYS_umask, old);
}

/* ct_str_escape (issue 48 item 5): C0, DEL, C1 and bytes that are not UTF-8 escaped; text, UTF-8
 * included, kept; a cut never leaves half an escape or half a character. */
static void test_escape(void **state)
{
    char out[64];

    (void)state;
    assert_string_equal(ct_str_escape(out, sizeof(out), "node-01.cluster"), "node-01.cluster");
    assert_string_equal(ct_str_escape(out, sizeof(out), "a\033]0;x\007b\r\n\t\177"), "a\\x1b]0;x\\x07b\\x0d\\x0a\\x09\\x7f");
    assert_string_equal(ct_str_escape(out, sizeof(out), "n\xc2\x9b" "2J"), "n\\u009b2J");      /* C1 CSI */
    assert_string_equal(ct_str_escape(out, sizeof(out), "n\x9b" "2J"), "n\\x9b2J");            /* a lone CSI byte */
    assert_string_equal(ct_str_escape(out, sizeof(out), "caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");
    assert_string_equal(ct_str_escape(out, sizeof(out), "\xe0\x80\xaf"), "\\xe0\\x80\\xaf");    /* overlong '/' */
    assert_string_equal(ct_str_escape(out, 6, "ab\033cd"), "ab");                              /* not "ab\x1" */
    assert_string_equal(ct_str_escape(out, 4, "ab\xc3\xa9"), "ab");                            /* not half of é */
    assert_string_equal(ct_str_escape(out, sizeof(out), NULL), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temp_mode_without_umask),
        cmocka_unit_test(test_atomic_syncs_dir),
        cmocka_unit_test(test_output_refuses_hard_link),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_replace_dir_and_file),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests_name("fsutil", tests, setup, teardown);
}
