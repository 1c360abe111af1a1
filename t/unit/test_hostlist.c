/* SPDX-License-Identifier: BSD-3-Clause */
/* SLURM hostlists: expansion and compression as SLURM defines them, malformed lists, and the
 * size a large cluster needs (100k hosts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctrain/error.h"
#include "ctrain/hostlist.h"
#include "ctrain/util.h"

/* Expand expr and compare with the expected names joined by single spaces. */
static void expect_hosts(const char *expr, const char *want)
{
    ct_hostlist *hl = NULL;
    ct_error err;
    char got[4096] = "";
    size_t len = 0;

    ct_error_clear(&err);
    assert_int_equal(ct_hostlist_expand(expr, &hl, &err), 0);
    for (size_t i = 0; i < ct_hostlist_count(hl); i++)
        len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s", i ? " " : "", ct_hostlist_get(hl, i));
    if (strcmp(got, want))
        fail_msg("'%s' expanded to '%s', want '%s'", expr, got, want);
    ct_hostlist_free(hl);
}

static void test_expand_forms(void **state)
{
    (void)state;
    expect_hosts("n1", "n1");
    expect_hosts("login1,login2", "login1 login2");
    expect_hosts("n[001-004,007]", "n001 n002 n003 n004 n007");
    expect_hosts("gpu-[1-2]", "gpu-1 gpu-2");
    expect_hosts("r[1-2]n[01-02]", "r1n01 r1n02 r2n01 r2n02");
    expect_hosts("a[1-2]b[3,5]c[7]", "a1b3c7 a2b3c7 a1b5c7 a2b5c7");
    expect_hosts("a[1-2]b[1-2]c[1-2]", "a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1 a1b2c2 a2b2c1 a2b2c2");
    expect_hosts("1.2.3.[089, 100-101]", "1.2.3.089 1.2.3.0100 1.2.3.0101");
    expect_hosts("n[+1-2],m[1 -2],k[1- 2]", "n01 n02 m01 m02 k1 k2");
    expect_hosts(",n1,,n2,", "n1 n2");
    expect_hosts("n[9-11]", "n9 n10 n11");
    expect_hosts("n[09-11]", "n09 n10 n11");
    expect_hosts("n[098-101]", "n098 n099 n100 n101");
    expect_hosts("n[0-2]", "n0 n1 n2");
    expect_hosts("[1-3]", "1 2 3");
    expect_hosts("n[1-2],ib[03-04],login", "n1 n2 ib03 ib04 login");
    expect_hosts("n[3,1,2]", "n3 n1 n2");
    expect_hosts("n1 n2", "n1 n2");
    expect_hosts("node-a.example.org,node-b", "node-a.example.org node-b");
    /* A suffix after the last bracket group, as SLURM takes it since 23.02.5 (22.05 refused it). */
    expect_hosts("node[1-2]-ib", "node1-ib node2-ib");
    expect_hosts("gpu-[01-02]-ib,login", "gpu-01-ib gpu-02-ib login");
    expect_hosts("a[1-2]b[3-4]c", "a1b3c a1b4c a2b3c a2b4c");
    expect_hosts("a[1-2]b[1-2]c[1-2]d", "a1b1c1d a1b1c2d a2b1c1d a2b1c2d a1b2c1d a1b2c2d a2b2c1d a2b2c2d");
    expect_hosts("[1-2]a", "1a 2a");
    expect_hosts("n[1-2]]", "n1] n2]");
}

static void expect_malformed(const char *expr, const char *what)
{
    ct_hostlist *hl = (ct_hostlist *)&hl;
    ct_error err;

    ct_error_clear(&err);
    if (ct_hostlist_expand(expr, &hl, &err) != CT_EINVAL)
        fail_msg("'%s' was accepted", expr);
    assert_null(hl);
    assert_string_equal(err.id, "hostlist-malformed");
    if (!strstr(err.msg, expr))
        fail_msg("message for '%s' does not name it: %s", expr, err.msg);
    if (!strstr(err.msg, what))
        fail_msg("message for '%s' does not say '%s': %s", expr, what, err.msg);
    assert_true(err.hint[0] != '\0');
}

static void test_malformed(void **state)
{
    (void)state;
    expect_malformed("n[1-3", "never closed");
    expect_malformed("n[", "never closed");
    expect_malformed("n[]", "empty brackets");
    expect_malformed("n[1,]", "',' before ']'");
    expect_malformed("n[a-b]", "expected a number");
    expect_malformed("n[[1]]", "'[' inside brackets");
    expect_malformed("n[1-]", "upper end");
    expect_malformed("n[5-3]", "backwards");
    expect_malformed("n[1-2;3]", "unexpected character");
    expect_malformed("n[1-2]x[", "never closed");
    expect_malformed("n[1 ]", "unexpected character");
    expect_malformed("n[1a-2]", "unexpected character");
    expect_malformed("n[1x2]", "'x' boxes");
    expect_malformed("n[1--2]", "upper end");
    expect_malformed("n[,1]", "empty entry");
    {
        char limit[32];
        snprintf(limit, sizeof(limit), "(%u)", CT_HOSTLIST_MAX_HOSTS);
        expect_malformed("n[0-99999999]", limit);
        expect_malformed("n[1-1048577]", "more hosts");
    }
    expect_malformed("n[0-99999999]", "more hosts");
    expect_malformed("a[0-9999]b[0-9999]", "more hosts");
    expect_malformed("n[1234567890123456789]", "at most 18 digits");
    /* A name whose later group is malformed frees the groups parsed before it (found by
     * t/fuzz/fuzz_connector.c; make check-asan's LeakSanitizer fails here without the fix). */
    expect_malformed("n[1-3][1-2+", "never closed");
    expect_malformed("n[1-3][1-2x", "never closed");
    expect_malformed("n[1-3]x[1", "never closed");
    expect_malformed("a[1]b[2]c[3", "never closed");
    /* Blanks only expanded to an empty list that compress wrote as "", which expand refuses
     * (found by t/fuzz/fuzz_hostlist.c's round trip). */
    expect_malformed(" ", "no host name");
    expect_malformed("\t\n", "no host name");
}

/* 1M names of 105 characters are within the host limit but over 64 MiB of names: refused before
 * the buffer grows to gigabytes (found by t/fuzz/fuzz_connector.c, malloc(2 GiB) in srun). */
static void test_too_many_bytes(void **state)
{
    char expr[160];
    ct_hostlist *hl = NULL;
    ct_error err;

    (void)state;
    snprintf(expr, sizeof(expr), "%.*s[000000-999999]", 99, "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"
             "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
    ct_error_clear(&err);
    assert_int_equal(ct_hostlist_expand(expr, &hl, &err), CT_EINVAL);
    assert_null(hl);
    assert_string_equal(err.id, "hostlist-too-long");
    assert_non_null(strstr(err.msg, "64 MiB"));
    assert_true(err.hint[0] != '\0');
}

static void test_empty(void **state)
{
    ct_hostlist *hl = NULL;
    ct_error err;

    (void)state;
    assert_int_equal(ct_hostlist_expand("", &hl, &err), CT_EINVAL);
    assert_int_equal(ct_hostlist_expand(NULL, &hl, &err), CT_EINVAL);
    assert_null(hl);
}

static void expect_compressed(const char *hosts, const char *want)
{
    ct_hostlist *hl = NULL;
    ct_error err;
    char *out = NULL;

    /* hosts is a plain comma list (no brackets), so expand only splits it. */
    assert_int_equal(ct_hostlist_expand(hosts, &hl, &err), 0);
    assert_int_equal(ct_hostlist_compress(hl, &out, &err), 0);
    if (strcmp(out, want))
        fail_msg("'%s' compressed to '%s', want '%s'", hosts, out, want);
    free(out);
    ct_hostlist_free(hl);
}

static void test_compress(void **state)
{
    (void)state;
    expect_compressed("n1", "n1");
    expect_compressed("n1,n2,n3,n5", "n[1-3,5]");
    expect_compressed("n001,n002,n003,n004,n007", "n[001-004,007]");
    expect_compressed("n9,n10,n11", "n[9-11]");
    expect_compressed("n09,n10,n11", "n[09-11]");
    expect_compressed("n1,n01", "n[1,01]");
    expect_compressed("n1,n2,m1,n3", "n[1-2],m1,n3");
    expect_compressed("gpu-1-ib,gpu-2-ib", "gpu-1-ib,gpu-2-ib");
    expect_compressed("login,n1,n2", "login,n[1-2]");
    expect_compressed("n3,n2,n1", "n[3,2,1]");
    expect_compressed("n1,n1", "n[1,1]");
}

static void test_round_trip(void **state)
{
    const char *forms[] = { "n[001-004,007]", "n[1-3,5],m1", "n[09-11]", "n[1-2],login", "x[0-99]", NULL };

    (void)state;
    for (int i = 0; forms[i]; i++) {
        ct_hostlist *hl = NULL;
        ct_error err;
        char *out = NULL;
        assert_int_equal(ct_hostlist_expand(forms[i], &hl, &err), 0);
        assert_int_equal(ct_hostlist_compress(hl, &out, &err), 0);
        assert_string_equal(out, forms[i]);
        free(out);
        ct_hostlist_free(hl);
    }
}

static void test_push_find(void **state)
{
    ct_hostlist *hl = ct_hostlist_new();
    ct_error err;
    char *out = NULL;

    (void)state;
    assert_non_null(hl);
    assert_int_equal(ct_hostlist_push(hl, "b7", &err), 0);
    assert_int_equal(ct_hostlist_push(hl, "b8", &err), 0);
    assert_int_equal(ct_hostlist_push(hl, "b[1]", &err), CT_EINVAL);
    assert_int_equal(ct_hostlist_push(hl, "", &err), CT_EINVAL);
    assert_int_equal(ct_hostlist_find(hl, "b8"), 1);
    assert_int_equal(ct_hostlist_find(hl, "b9"), -1);
    assert_null(ct_hostlist_get(hl, 2));
    assert_int_equal(ct_hostlist_compress(hl, &out, &err), 0);
    assert_string_equal(out, "b[7-8]");
    free(out);
    ct_hostlist_free(hl);
}

/* 100k hosts: one range, and 100k single-number ranges (every other number) compressed and
 * expanded again. The time is printed (about 0.02 s and 0.05 s on a 2-core VM); the 10 s limit
 * only catches a quadratic algorithm, even under valgrind. */
static void test_100k(void **state)
{
    ct_hostlist *hl = NULL, *back = NULL;
    ct_error err;
    char *out = NULL;
    double t0 = ct_time_now(), t1, t2, t3;

    (void)state;
    assert_int_equal(ct_hostlist_expand("n[000001-100000]", &hl, &err), 0);
    t1 = ct_time_now();
    assert_int_equal(ct_hostlist_count(hl), 100000);
    assert_string_equal(ct_hostlist_get(hl, 0), "n000001");
    assert_string_equal(ct_hostlist_get(hl, 99999), "n100000");
    ct_hostlist_free(hl);

    hl = ct_hostlist_new();
    for (int i = 0; i < 100000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "gpu%d", 2 * i);
        assert_int_equal(ct_hostlist_push(hl, name, &err), 0);
    }
    t2 = ct_time_now();
    assert_int_equal(ct_hostlist_compress(hl, &out, &err), 0);
    assert_int_equal(ct_hostlist_expand(out, &back, &err), 0);
    assert_int_equal(ct_hostlist_count(back), 100000);
    assert_string_equal(ct_hostlist_get(back, 99999), "gpu199998");
    t3 = ct_time_now();
    printf("# 100k hosts: expand one range %.3f s; compress + expand 100k ranges %.3f s\n", t1 - t0, t3 - t2);
    assert_true(t1 - t0 < 10.0);
    assert_true(t3 - t2 < 10.0);
    free(out);
    ct_hostlist_free(hl);
    ct_hostlist_free(back);
}

/* --- the same lists through SLURM's own parser ----------------------------------------------- */

/* scontrol show hostnames/hostlist needs a slurm.conf to read, not a running slurmctld: a minimal
 * one in a temporary directory is enough (checked with SLURM 22.05 and 24.11). Two SLURMs are
 * asked when there are two: the scontrol on PATH, and when that one is older than 23.02.5 (Debian
 * 12's 22.05), the Debian 13 root's 24.11 too (scripts/debian13; CTRAIN_DEBIAN13_ROOT, set by
 * t/20-hostlist.t), run with chroot. */
struct slurm {
    const char *root;     /* NULL: the scontrol on PATH; else run inside this root */
    char conf[128];       /* slurm.conf as scontrol sees it (inside root) */
    char dir[256];        /* its directory as this process sees it */
    int major, minor;
};

static int slurm_open(struct slurm *sl, const char *root)
{
    char tmpl[256];
    FILE *f;

    memset(sl, 0, sizeof(*sl));
    sl->root = root;
    snprintf(tmpl, sizeof(tmpl), "%s/tmp/ct-hostlist-XXXXXX", root ? root : "");
    if (!mkdtemp(tmpl))
        return -1;
    snprintf(sl->dir, sizeof(sl->dir), "%s", tmpl);
    snprintf(sl->conf, sizeof(sl->conf), "%s/slurm.conf", tmpl + (root ? strlen(root) : 0));
    snprintf(tmpl, sizeof(tmpl), "%s/slurm.conf", sl->dir);
    if (!(f = fopen(tmpl, "w")))
        return -1;
    fprintf(f, "ClusterName=hostlist\nSlurmctldHost=localhost\nNodeName=n1 State=UNKNOWN\nPartitionName=p Nodes=n1\n");
    return fclose(f);
}

static void slurm_close(struct slurm *sl)
{
    char path[300];

    if (!sl->dir[0])
        return;
    snprintf(path, sizeof(path), "%s/slurm.conf", sl->dir);
    unlink(path);
    rmdir(sl->dir);
    sl->dir[0] = '\0';
}

/* Run scontrol ARG1 ARG2 [ARG3]; out = its lines joined by spaces, or "ERROR" when it refused. */
static void scontrol_run(const struct slurm *sl, const char *a1, const char *a2, const char *a3, char *out,
                         size_t size)
{
    int fd[2], status = 0;
    size_t len = 0;
    ssize_t n;
    pid_t pid;

    assert_int_equal(pipe(fd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (!freopen("/dev/null", "w", stderr))
            _exit(127);
        setenv("SLURM_CONF", sl->conf, 1);
        if (sl->root)
            execlp("chroot", "chroot", sl->root, "scontrol", a1, a2, a3, (char *)NULL);
        else
            execlp("scontrol", "scontrol", a1, a2, a3, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    while (len + 1 < size && (n = read(fd[0], out + len, size - len - 1)) > 0)
        len += (size_t)n;
    close(fd[0]);
    out[len] = '\0';
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        fail_msg("scontrol could not be run%s%s (slurm-wlm is a test dependency: scripts/install-deps)",
                 sl->root ? " in " : "", sl->root ? sl->root : "");
    while (len && out[len - 1] == '\n')
        out[--len] = '\0';
    for (char *p = out; *p; p++)
        if (*p == '\n')
            *p = ' ';
    if (!WIFEXITED(status) || WEXITSTATUS(status) || !len)
        snprintf(out, size, "ERROR");
}

static void scontrol(const struct slurm *sl, const char *what, const char *expr, char *out, size_t size)
{
    scontrol_run(sl, "show", what, expr, out, size);
}

/* The version scontrol --version prints ("slurm-wlm 24.11.5", "slurm 22.05.8"). */
static void slurm_version(struct slurm *sl)
{
    char v[128];
    const char *p;

    scontrol_run(sl, "--version", NULL, NULL, v, sizeof(v));
    p = strchr(v, ' ');
    if (!p || sscanf(p + 1, "%d.%d", &sl->major, &sl->minor) != 2)
        fail_msg("scontrol --version%s said '%s'", sl->root ? " in the Debian 13 root" : "", v);
}

/* A suffix after the last ']' (scontrol 23.02.5 and later). */
static int slurm_takes_suffix(const struct slurm *sl)
{
    return sl->major > 23 || (sl->major == 23 && sl->minor >= 2);
}

/* ctrain's expansion of expr in scontrol's form ("ERROR" when refused). */
static void ctrain_hostnames(const char *expr, char *out, size_t size)
{
    ct_hostlist *hl = NULL;
    ct_error err;
    size_t len = 0;

    out[0] = '\0';
    if (ct_hostlist_expand(expr, &hl, &err)) {
        snprintf(out, size, "ERROR");
        return;
    }
    for (size_t i = 0; i < ct_hostlist_count(hl) && len < size; i++)
        len += (size_t)snprintf(out + len, size - len, "%s%s", i ? " " : "", ct_hostlist_get(hl, i));
    ct_hostlist_free(hl);
}

/* Accepted (or refused) alike by SLURM 22.05 and 24.11. */
static const char *const same_lists[] = {
    "n1", "n[1-3]", "n[01-03,5]", "n[9-11]", "n[009-011]", "n[9-010]", "n[098-101]", "n[1-3,2]",
    "n[3,1,2]", "n[1-2],n[1-2]", "r[1-2]n[1-2]", "r[1-2]n[01-02]", "a[1-2]b[3,5]c[7]",
    "a[1-2]b[1-2]c[1-2]", "a[1-2]b[3-4]c[5-6]d[7-8]", "x[01-02]y[1,3-4]z[9-10]", "n[1-3]-x[7,9]",
    "1.2.3.[089, 100-102]", "n[ 1-2]", "n[1 -2]", "n[1- 2]", "n[  1-2]", "n[+1-2]", "n[1-+2]",
    "[1-3]", "n[1-2] m[3-4]", "n[1-2]\tm", ",n1", "n1,", "n[1-2],,m", "n[1-00003]", "n[001-3]",
    "node-a.example.org,node-b", "n[0-2]", "a[1]b[2]c[3]", "n1-ib", "]n[1-2]", "a]b[1-2]", "n]",
    /* refused by both */
    "n[3-1]", "n[]", "n[1,]", "n[,1]", "n[1 ]", "n[1,2 ]", "n[1--2]", "n[a-b]", "n[0x1-2]", "n[1-2]x[]",
    "n[3-1]x", "n[1-2]x[a]",
    NULL,
};

/* Accepted since SLURM 23.02.5, refused by 22.05: text after the last ']'. ctrain takes them as
 * 24.11 does. */
static const char *const suffix_lists[] = {
    "gpu-[1-2]-ib", "node[1-2]-ib", "n[01-03]-ib,m[3-4]x", "n[1-2]x", "x[1-2]y[3-4]z", "[1-2]a",
    "a[1-2]b[3-4]c", "a[1-2]b[1-2]c[1-2]d", "r[1-2]-[3-4]-s", "n[1-2][3-4]x", "n[1-2]1", "n[1-2].ib",
    "n[1-2]]", "n[1-2]x]y", "n[1-2]-ib m[1-2]",
    NULL,
};

/* Lists of which SLURM makes names holding a '[' (24.11: "n[[1-2]]" is n[1] n[2]; "a[b[1-2]" is a[b1
 * a[b2 in both). No node name holds one (slurm.conf cannot name it): ctrain refuses them. */
static const char *const bracket_names[] = { "n[[1-2]]", "a[b[1-2]", NULL };

/* Each list expands as scontrol show hostnames expands it (the newer SLURM's expansion where
 * the two differ), or both refuse it; each plain list compresses as scontrol show hostlist does. */
static void compare(const struct slurm *sl, const char *const *lists, int newer, size_t *n)
{
    char want[4096], got[4096];

    for (int i = 0; lists[i]; i++) {
        scontrol(sl, "hostnames", lists[i], want, sizeof(want));
        ctrain_hostnames(lists[i], got, sizeof(got));
        if (newer && !slurm_takes_suffix(sl)) {
            if (strcmp(want, "ERROR"))
                fail_msg("'%s': SLURM %d.%02d's scontrol show hostnames gives '%s', expected a refusal",
                         lists[i], sl->major, sl->minor, want);
        } else if (strcmp(want, got)) {
            fail_msg("'%s': SLURM %d.%02d's scontrol show hostnames gives '%s', ctrain '%s'", lists[i],
                     sl->major, sl->minor, want, got);
        }
        (*n)++;
    }
}

static void test_same_as_scontrol(void **state)
{
    static const char *const plain[] = {
        "n1,n2,n3,n5", "n1,m1,n2", "n3,n1,n2", "n1,n1,n2", "n01,n02,n3", "n09,n10", "n9,n10",
        "n8,n9,n010", "a,b,a", "n1a,n2a", "r1n1,r1n2,r2n1", "n001,n002,n1000", "n1,n01", "x,n1,n2,x",
        "n0,n00,n000", "gpu1-ib,gpu2-ib", "n1,n3,n2,n4", "n099,n100,n101", "n08,n9", "login,n1,n2",
        "n1-ib,n2-ib,n3-ib", "a1b3c,a1b4c,a2b3c,a2b4c", "n1-1,n2-1", "n1x,n2x,n4x",
        NULL,
    };
    struct slurm slurms[2];
    const char *root = getenv("CTRAIN_DEBIAN13_ROOT");
    char path[512], want[4096], got[4096];
    size_t nslurm = 1, expanded = 0, compressed = 0;

    (void)state;
    assert_int_equal(slurm_open(&slurms[0], NULL), 0);
    slurm_version(&slurms[0]);
    snprintf(path, sizeof(path), "%s/usr/bin/scontrol", root ? root : "");
    if (!slurm_takes_suffix(&slurms[0]) && root && *root && access(path, X_OK) == 0) {
        assert_int_equal(slurm_open(&slurms[1], root), 0);
        slurm_version(&slurms[1]);
        nslurm = 2;
    }
    for (size_t s = 0; s < nslurm; s++) {
        const struct slurm *sl = &slurms[s];

        compare(sl, same_lists, 0, &expanded);
        compare(sl, suffix_lists, 1, &expanded);
        for (int i = 0; plain[i]; i++) {
            ct_hostlist *hl = NULL;
            ct_error err;
            char *out = NULL;

            scontrol(sl, "hostlist", plain[i], want, sizeof(want));
            assert_int_equal(ct_hostlist_expand(plain[i], &hl, &err), 0);
            assert_int_equal(ct_hostlist_compress(hl, &out, &err), 0);
            if (strcmp(want, out))
                fail_msg("'%s': SLURM %d.%02d's scontrol show hostlist gives '%s', ctrain '%s'", plain[i],
                         sl->major, sl->minor, want, out);
            free(out);
            ct_hostlist_free(hl);
            compressed++;
        }
        printf("# SLURM %d.%02d%s: %zu lists expanded and %zu compressed as its scontrol does\n", sl->major,
               sl->minor, sl->root ? " (Debian 13 root)" : "", expanded, compressed);
        expanded = compressed = 0;
    }
    if (nslurm == 1 && !slurm_takes_suffix(&slurms[0]))
        printf("# no Debian 13 root (scripts/debian13 setup): lists with a suffix checked against their "
               "expected expansion only\n");
    for (int i = 0; bracket_names[i]; i++) {
        ctrain_hostnames(bracket_names[i], got, sizeof(got));
        if (strcmp(got, "ERROR"))
            fail_msg("'%s' (names holding '[') was accepted: '%s'", bracket_names[i], got);
    }
    for (size_t s = 0; s < nslurm; s++)
        slurm_close(&slurms[s]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand_forms), cmocka_unit_test(test_malformed), cmocka_unit_test(test_empty),
        cmocka_unit_test(test_compress),     cmocka_unit_test(test_round_trip), cmocka_unit_test(test_push_find),
        cmocka_unit_test(test_100k), cmocka_unit_test(test_too_many_bytes),
        cmocka_unit_test(test_same_as_scontrol),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
