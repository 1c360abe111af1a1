/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the binding planner (libctrain-core's topology, plan and GPU mapping, on
 * hwloc) lives in a second shared object, ctrain-bind.so, beside ctrain.so: hwloc and what it
 * links (libudev, libm) are loaded into slurmstepd only by a step that binds, never into srun,
 * sbatch or salloc, nor into the slurmstepd of a step without --ctrain options. */
#ifndef CTRAIN_SPANK_BIND_H
#define CTRAIN_SPANK_BIND_H

#include <stddef.h>

#include "ctrain/bind.h"
#include "ctrain/error.h"
#include "ctrain/gres.h"

/* ctrain-bind.so's one exported symbol: these functions of libctrain-core, as linked there. */
#define CT_SPANK_BIND_SYMBOL "ct_spank_bind_table"
#define CT_SPANK_BIND_FILE "ctrain-bind.so"

struct ct_spank_bind_ops {
    const char *version; /* CTRAIN_VERSION: ctrain.so uses only the ctrain-bind.so of its own build */
    size_t size;         /* sizeof(struct ct_spank_bind_ops) */
    int (*topology_prepare)(unsigned flags, ct_topology **out, ct_error *err);
    int (*topology_discover)(ct_topology *topo, ct_error *err);
    int (*topology_load)(const char *xml_path, unsigned flags, ct_topology **out, ct_error *err);
    int (*topology_allows)(const ct_topology *topo, const char *cpus);
    int (*topology_gpu_count)(const ct_topology *topo);
    void (*topology_free)(ct_topology *topo);
    /* Keeps topo until the process exits (then the kernel frees it): destroying the process's last
     * hwloc topology unloads hwloc's plugins (OpenCL, GL, libxml2, libpciaccess and what they link),
     * 0.45-0.75 ms in slurm_spank_exit, which slurmstepd runs before it tells srun the step is
     * complete. One is kept; a second is freed at once. */
    void (*topology_retire)(ct_topology *topo);
    int (*plan_create)(const ct_topology *topo, const ct_bind_request *req, ct_bind_plan **out, ct_error *err);
    const ct_bind_task *(*plan_task)(const ct_bind_plan *plan, int local_rank);
    const char *(*plan_ib_hca)(const ct_bind_plan *plan);
    void (*plan_free)(ct_bind_plan *plan);
    int (*task_gpus_in)(const ct_topology *topo, const ct_bind_task *task, const char *list, ct_error *err);
    int (*gres_map)(const ct_topology *topo, const char *list, const ct_gres_files *files, const ct_gpu_dev *devs,
                    int ndevs, char *out, size_t size, char *why, size_t wsize, ct_error *err);
};

/* The members every table sets to the planner's own functions, written once: what differs between
 * ctrain-bind.so's table and the plugin's summary one (spank/summary.c) is where the topology comes
 * from (hwloc, or the summary file) and how it is let go. */
#define CT_SPANK_BIND_PLANNER_OPS                                                                        \
    .version = CTRAIN_VERSION, .size = sizeof(struct ct_spank_bind_ops), .topology_allows = ct_topology_allows,   \
    .topology_gpu_count = ct_topology_gpu_count, .topology_free = ct_topology_free,                      \
    .plan_create = ct_bind_plan_create, .plan_task = ct_bind_plan_task, .plan_ib_hca = ct_bind_plan_ib_hca, \
    .plan_free = ct_bind_plan_free, .task_gpus_in = ct_bind_task_gpus_in, .gres_map = ct_gres_map

/* ctrain-bind.so from the directory ctrain.so was loaded from (never a path from the environment:
 * the plugin runs as root in slurmstepd), loaded on the first call; NULL with err set when it
 * cannot be loaded or is of another build. Not thread-safe: one thread of slurmstepd at a time. */
const struct ct_spank_bind_ops *ct_spank_bind_open(ct_error *err);

/* Let it go (slurm_spank_exit): it stays mapped (RTLD_NODELETE) with the topology it keeps. */
void ct_spank_bind_close(void);

#endif
