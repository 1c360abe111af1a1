/* The cpu accelerator: always available; "devices" are processes on this node. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "engine/accelerators/accelerators.h"

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

const struct ct_accelerator_ops ct_accelerator_cpu = {
    .name = "cpu",
    .is_available = cpu_is_available,
    .device_count = cpu_device_count,
    .set_device = cpu_set_device,
    .memory_stats = cpu_memory_stats,
};
