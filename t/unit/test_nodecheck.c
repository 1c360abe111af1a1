/* SPDX-License-Identifier: BSD-3-Clause */
/* A node's own checks (--ctrain-preflight, include/ctrain/nodecheck.h) on a made-up /proc and /sys:
 * /dev/zero and /dev/full stand in for two GPUs' device files (character devices anyone can stat),
 * a process "holds" one through a symlink in its fd directory, as /proc shows an open file. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctrain/nodecheck.h"

static char root[512], proc[600], sys_[600];

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void mkdirs(const char *fmt, const char *a)
{
    char cmd[1400];

    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s'", root, a);
    (void)fmt;
    assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
    char path[1200];

    (void)state;
    snprintf(root, sizeof(root), "%s/ct-nodecheck-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(root));
    snprintf(proc, sizeof(proc), "%s/proc", root);
    snprintf(sys_, sizeof(sys_), "%s/sys", root);
    mkdirs("", "proc/100/fd");
    mkdirs("", "proc/200/fd");
    mkdirs("", "sys/class/infiniband/mlx5_0/ports/1");
    snprintf(path, sizeof(path), "%s/meminfo", proc);
    put(path, "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8192000 kB\n");
    snprintf(path, sizeof(path), "%s/100/comm", proc);
    put(path, "slurmstepd\n");
    snprintf(path, sizeof(path), "%s/200/comm", proc);
    put(path, "python3\n");
    /* process 100 (the checker) holds /dev/zero: never a finding */
    snprintf(path, sizeof(path), "%s/100/fd/7", proc);
    assert_int_equal(symlink("/dev/zero", path), 0);
    snprintf(path, sizeof(path), "%s/class/infiniband/mlx5_0/ports/1/state", sys_);
    put(path, "4: ACTIVE\n");
    return 0;
}

static int teardown(void **state)
{
    char cmd[700];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd);
}

static const ct_nodecheck_iface ifaces[] = {
    { "lo", 1, 1, 1 }, { "eth0", 1, 1, 1 }, { "ib0", 1, 0, 1 }, { "eth1", 0, 0, 0 }, { "eth2", 1, 1, 0 },
};

static ct_nodecheck_input healthy(const ct_nodecheck_gpu *gpus, int ngpus)
{
    ct_nodecheck_input in = {
        .node = "n1", .gpus = gpus, .ngpus = ngpus, .hca = "mlx5_0", .ifname = "eth0", .ifaces = ifaces,
        .nifaces = 5, .run_dir = root, .mem_needed_mb = 1024, .self = 100, .proc_root = proc, .sys_root = sys_,
    };
    return in;
}

static void test_healthy(void **state)
{
    ct_nodecheck_gpu gpus[] = { { 0, "/dev/zero", 1 }, { 1, "/dev/full", 1 } };
    ct_nodecheck_input in = healthy(gpus, 2);
    ct_nodecheck_result r;
    char want[1200];

    (void)state;
    assert_int_equal(ct_nodecheck_run(&in, &r), 0);
    snprintf(want, sizeof(want), "2 GPUs present and free, mlx5_0 port 1 4: ACTIVE, eth0 up, %s writable, 8000 MiB free",
             root);
    assert_string_equal(r.summary, want);
    /* in two steps (the GPUs as root, the rest as the user): the same result */
    in.checks = CT_NODECHECK_GPUS;
    assert_int_equal(ct_nodecheck_run(&in, &r), 0);
    assert_string_equal(r.summary, "2 GPUs present and free");
    in.checks = CT_NODECHECK_NET | CT_NODECHECK_RUN_DIR | CT_NODECHECK_MEMORY;
    assert_int_equal(ct_nodecheck_more(&in, &r), 0);
    assert_string_equal(r.summary, want);
}

static void test_cpu_node(void **state)
{
    ct_nodecheck_input in = healthy(NULL, 0);
    ct_nodecheck_result r;

    (void)state;
    in.hca = NULL;
    in.run_dir = NULL;
    assert_int_equal(ct_nodecheck_run(&in, &r), 0);
    assert_non_null(strstr(r.summary, "no GPU in this step, eth0 up, 8000 MiB free"));
}

static void test_gpu_missing_and_unmapped(void **state)
{
    ct_nodecheck_gpu gpus[] = { { 0, "/dev/zero", 1 }, { 3, "/dev/ctrain-no-such-gpu3", 1 }, { 5, NULL, 0 },
                                { 6, "/etc/hostname", 1 } };
    ct_nodecheck_input in = healthy(gpus, 4);
    ct_nodecheck_result r;
    char line[2048];

    (void)state;
    assert_int_equal(ct_nodecheck_run(&in, &r), 3);
    ct_nodecheck_join(&r, line, sizeof(line));
    assert_string_equal(line, "GPU 3 (/dev/ctrain-no-such-gpu3): no such device file; GPU 5: not in the node's "
                              "topology; GPU 6 (/etc/hostname): not a character device");
}

static void test_gpu_held(void **state)
{
    ct_nodecheck_gpu gpus[] = { { 0, "/dev/zero", 1 }, { 1, "/dev/full", 1 } };
    ct_nodecheck_input in = healthy(gpus, 2);
    ct_nodecheck_result r;
    char path[1200];

    (void)state;
    snprintf(path, sizeof(path), "%s/200/fd/12", proc);
    assert_int_equal(symlink("/dev/full", path), 0);
    snprintf(path, sizeof(path), "%s/200/fd/13", proc);
    assert_int_equal(symlink("/dev/full", path), 0);
    assert_int_equal(ct_nodecheck_run(&in, &r), 1);
    assert_string_equal(r.bad[0], "GPU 1 (/dev/full): held open by process 200 (python3), not of this step");
    /* the checker's own fds are no finding: process 100 holds /dev/zero */
    in.self = 200;
    assert_int_equal(ct_nodecheck_run(&in, &r), 1);
    assert_string_equal(r.bad[0], "GPU 0 (/dev/zero): held open by process 100 (slurmstepd), not of this step");
    unlink(path);
    snprintf(path, sizeof(path), "%s/200/fd/12", proc);
    unlink(path);
}

static void test_network(void **state)
{
    ct_nodecheck_input in = healthy(NULL, 0);
    ct_nodecheck_result r;
    char path[1200];

    (void)state;
    in.ifname = "ib0";
    assert_int_equal(ct_nodecheck_run(&in, &r), 1);
    assert_string_equal(r.bad[0], "interface ib0: no carrier (link down)");
    in.ifname = "eth1";
    assert_int_equal(ct_nodecheck_run(&in, &r), 1);
    assert_string_equal(r.bad[0], "interface eth1: down");
    in.ifname = "eth2";
    assert_int_equal(ct_nodecheck_run(&in, &r), 1);
    assert_string_equal(r.bad[0], "interface eth2: no address");
    in.ifname = "eth9";
    assert_int_equal(ct_nodecheck_run(&in, &r), 1);
    assert_string_equal(r.bad[0], "interface eth9: not on this node");
    in.ifname = "";
    assert_int_equal(ct_nodecheck_run(&in, &r), 1);
    in.ifname = "eth0";
    in.hca = "mlx5_1";
    assert_int_equal(ct_nodecheck_run(&in, &r), 1);
    assert_string_equal(r.bad[0], "fabric mlx5_1: no port ACTIVE (no such device in sysfs)");
    in.hca = "mlx5_0";
    snprintf(path, sizeof(path), "%s/class/infiniband/mlx5_0/ports/1/state", sys_);
    put(path, "1: DOWN\n");
    assert_int_equal(ct_nodecheck_run(&in, &r), 1);
    assert_string_equal(r.bad[0], "fabric mlx5_0: no port ACTIVE (port 1 1: DOWN)");
    put(path, "4: ACTIVE\n");
}

static void test_run_dir_and_memory(void **state)
{
    ct_nodecheck_input in = healthy(NULL, 0);
    ct_nodecheck_result r;
    char dir[1200];

    (void)state;
    snprintf(dir, sizeof(dir), "%s/no-such-dir", root);
    in.run_dir = dir;
    assert_int_equal(ct_nodecheck_run(&in, &r), 1);
    assert_non_null(strstr(r.bad[0], "/no-such-dir: cannot create a file (No such file or directory)"));
    in.run_dir = root;
    in.mem_needed_mb = 9000;
    assert_int_equal(ct_nodecheck_run(&in, &r), 1);
    assert_string_equal(r.bad[0], "memory: 8000 MiB available, the step needs 9000 MiB");
    /* the check leaves nothing in the run directory */
    snprintf(dir, sizeof(dir), "ls -A '%s' | grep -q ctrain-preflight", root);
    assert_int_not_equal(system(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthy),
        cmocka_unit_test(test_cpu_node),
        cmocka_unit_test(test_gpu_missing_and_unmapped),
        cmocka_unit_test(test_gpu_held),
        cmocka_unit_test(test_network),
        cmocka_unit_test(test_run_dir_and_memory),
    };
    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests_name("nodecheck", tests, setup, teardown);
}
