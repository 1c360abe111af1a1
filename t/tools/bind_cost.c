/* SPDX-License-Identifier: BSD-3-Clause */
/* bind_cost [N] — what a step's binding costs in slurmstepd, in-process, on this machine: hwloc's
 * discovery with I/O (what a step without a node summary runs, in a thread of its own) against
 * reading the node summary (what it runs instead), each followed by the plan of 2 tasks; the
 * median of N (default 200) of each, in microseconds. The summary is written to a temporary file
 * first. scripts/bench/README.md gives the figures. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "ctrain/bind.h"

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* One load (discovery when path is NULL, else the summary at path) and a plan of 2 tasks: µs. */
static double one(const char *path, ct_error *err)
{
    ct_bind_request req = { .ntasks = 2 };
    ct_topology *t = NULL;
    ct_bind_plan *plan = NULL;
    double t0 = now_us();
    int rv = path ? ct_topology_summary_read(path, CT_TOPOLOGY_IO, "bind_cost", NULL, &t, err)
                  : ct_topology_load(NULL, CT_TOPOLOGY_IO, &t, err);

    if (rv == 0)
        rv = ct_bind_plan_create(t, &req, &plan, err);
    ct_bind_plan_free(plan);
    ct_topology_free(t);
    return rv == 0 ? now_us() - t0 : -1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200;
    char path[] = "/tmp/ctrain-bind-cost-XXXXXX";
    double *d = calloc((size_t)(n > 0 ? n : 1), sizeof(double)), *s = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    ct_topology *t = NULL;
    ct_error err;
    int fd = mkstemp(path);

    if (n < 1 || !d || !s || fd < 0) {
        fprintf(stderr, "bind_cost: give a positive count (and a writable /tmp)\n");
        return 2;
    }
    close(fd);
    if (ct_topology_load(NULL, CT_TOPOLOGY_IO, &t, &err) != 0 || ct_topology_summary_write(t, "bind_cost", path, &err) != 0) {
        fprintf(stderr, "bind_cost: %s\n", err.msg);
        unlink(path);
        return 1;
    }
    ct_topology_free(t);
    for (int i = 0; i < n; i++) {
        d[i] = one(NULL, &err);
        s[i] = one(path, &err);
        if (d[i] < 0 || s[i] < 0) {
            fprintf(stderr, "bind_cost: %s\n", err.msg);
            unlink(path);
            return 1;
        }
    }
    unlink(path);
    qsort(d, (size_t)n, sizeof(double), cmp);
    qsort(s, (size_t)n, sizeof(double), cmp);
    printf("hwloc discovery with I/O + plan of 2 tasks: median %.0f us\n", d[n / 2]);
    printf("node summary read + plan of 2 tasks:       median %.1f us\n", s[n / 2]);
    free(d);
    free(s);
    return 0;
}
