/* SPDX-License-Identifier: BSD-3-Clause */
/* The cpu accelerator: always available; "devices" are processes on this node. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "engine/accelerators/accelerators.h"
#include "engine/accelerators/cpu_threads.h"

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

/* Resident and peak resident set size of this process, and the machine's memory. */
static int cpu_memory_stats(int id, ct_memstats *out)
{
    struct rusage ru;
    long pages = 0, rss_pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    memset(out, 0, sizeof(*out));
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss_pages) != 2)
            rss_pages = 0;
        fclose(f);
    }
    out->used_bytes = (size_t)rss_pages * (size_t)sysconf(_SC_PAGESIZE);
    out->total_bytes = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
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
