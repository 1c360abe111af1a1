/* SPDX-License-Identifier: BSD-3-Clause */
/* The host's compute threads: the cpu accelerator's, whatever device the model runs on (the host
 * computes the cpu model's GEMMs, and the data and checkpoints of the others). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/accelerators/cpu_threads.h"
#include "engine/nn/gemm.h"

/* One thread team per rank: share the cores among the ranks of a node, unless the user chose.
 * Two teams follow the rule: OpenBLAS's (its own pthreads) and OpenMP's, which runs oneDNN's GEMMs
 * (Debian's libdnnl is built on OpenMP) and the step's element-wise passes. OMP_NUM_THREADS, when
 * set, is libgomp's own; OPENBLAS_NUM_THREADS alone sets both. */
static void set_threads(int world, int nodes, int is_zero)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int per_node;
    const char *ob = getenv("OPENBLAS_NUM_THREADS");
    long threads, v;

    nodes = nodes > 0 ? nodes : 1;
    per_node = (world + nodes - 1) / nodes;
    if (ct_gemm_forked_after_teams()) {
        /* a ddp_fork worker of a program that already trained on several threads */
        ct_gemm_set_threads(1);
        if (is_zero)
            fprintf(stderr, "ctrain: note: the program trained on OpenMP threads before ddp_fork forked its "
                    "workers, which cannot start them again (libgomp): each worker computes on 1 thread; "
                    "--strategy ddp starts fresh workers that use their share of the cores\n");
    } else if (getenv("OMP_NUM_THREADS")) {
        return;
    }
    if (ob) {
        if (ct_parse_long(ob, 1, 4096, &v) == 0)
            ct_gemm_set_threads((int)v);
        return;
    }
    threads = cpus / (per_node > 0 ? per_node : 1);
    ct_gemm_set_blas_threads(threads > 0 ? (int)threads : 1);
    ct_gemm_set_threads(threads > 0 ? (int)threads : 1);
}

int ct_cpu_threads_setup(int world, int nodes, int is_zero)
{
    set_threads(world, nodes, is_zero);
    ct_gemm_blas_team();   /* the team's count, not the 1 a product inside a team left (gemm.h) */
    return openblas_get_num_threads();
}
