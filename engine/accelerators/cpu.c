/* SPDX-License-Identifier: BSD-3-Clause */
/* The cpu accelerator: always available; "devices" are processes on this node. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "engine/accelerators/accelerators.h"
#include "engine/accelerators/cpu_threads.h"
#include "engine/util/fsutil.h"

static int cpu_is_available(char *why, size_t why_size)
{
    if (why_size)
        why[0] = '\0';
    return 1;
}

static int cpu_device_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int cpu_set_device(int id, ct_error *err)
{
    return 0;
}

/* The limit in the cgroup file at /sys/fs/cgroup<dir><file>, or 0 ("max", unreadable, absent). */
static uint64_t cgroup_limit(const char *dir, size_t len, const char *file)
{
    char path[600], *text = NULL;
    uint64_t v = 0;
    ct_error ignored;

    snprintf(path, sizeof(path), "/sys/fs/cgroup%.*s%s", (int)len, dir, file);
    if (ct_fs_read_input(path, "a cgroup's memory limit", 64, &text, NULL, &ignored) == 0 &&
        sscanf(text, "%" SCNu64, &v) != 1)
        v = 0;
    free(text);
    return v;
}

/* The smallest memory limit of this process's cgroups (SLURM's task/cgroup, a container): v2's
 * memory.max, v1's memory.limit_in_bytes; 0 when none is set. */
static uint64_t cgroup_memory_limit(void)
{
    uint64_t limit = 0, v;
    char *text = NULL;
    ct_error ignored;

    if (ct_fs_read_input("/proc/self/cgroup", "the cgroup list", 64 << 10, &text, NULL, &ignored))
        return 0;
    for (char *line = text, *end; *line; line = *end ? end + 1 : end) {
        size_t len = strcspn(line, "\n");
        char *v1 = strstr(line, ":memory:/");

        end = line + len;
        if (!strncmp(line, "0::/", 4))
            v = cgroup_limit(line + 3, len - 3, "/memory.max");
        else if (v1 && v1 < end)
            v = cgroup_limit(v1 + 8, (size_t)(end - v1 - 8), "/memory.limit_in_bytes");
        else
            v = 0;
        if (v && (!limit || v < limit))
            limit = v;
    }
    free(text);
    return limit;
}

/* Resident and peak resident set size of this process, and the memory it may use: the machine's,
 * or less where its cgroup limits it. */
static int cpu_memory_stats(int id, ct_memstats *out)
{
    struct rusage ru;
    long pages = 0, rss_pages = 0;
    uint64_t limit;
    FILE *f = fopen("/proc/self/statm", "r");

    memset(out, 0, sizeof(*out));
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss_pages) != 2)
            rss_pages = 0;
        fclose(f);
    }
    out->used_bytes = (size_t)rss_pages * (size_t)sysconf(_SC_PAGESIZE);
    out->total_bytes = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    limit = cgroup_memory_limit();
    if (limit && limit < out->total_bytes)
        out->total_bytes = (size_t)limit;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        out->peak_bytes = (size_t)ru.ru_maxrss * 1024u;
    return 0;
}

/* The host model computes on the cpu itself: only the precision's GEMM input type is set (its
 * storage type was set when it was built). The
 * cpu engine has no loss scaling (16-mixed is refused by the connector before this). */
static int cpu_model_to_device(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err)
{
    int rc;

    *out = NULL;
    /* fp64 GEMMs only on a model stored in fp64 (64-true: set before, with its param_dtype). */
    if (where->loss_scaling || (where->gemm_dtype != CT_DTYPE_F32 && where->gemm_dtype != CT_DTYPE_BF16 &&
                                !(where->gemm_dtype == CT_DTYPE_F64 && host->param_dtype == CT_DTYPE_F64))) {
        ct_error_set(err, CT_ENOTAVAIL, "model-precision-unsupported",
                     "model %s on cpu computes in 32-true, bf16-mixed or 64-true only", host->name);
        return ct_error_hint(err, "use --precision 32-true, bf16-mixed or 64-true");
    }
    if ((rc = ct_model_set_gemm_dtype(host, where->gemm_dtype, err)))
        return rc;
    *out = host;
    return 0;
}

/* Its name is its descriptor's (engine/registry/accelerator_cpu.c): accelerators.c copies it in. */
const struct ct_accelerator_ops ct_accelerator_cpu = {
    .device_memory = 0,
    .model_to_device = cpu_model_to_device,
    .is_available = cpu_is_available,
    .device_count = cpu_device_count,
    .set_device = cpu_set_device,
    .memory_stats = cpu_memory_stats,
    .host_threads_setup = ct_cpu_threads_setup,
};
