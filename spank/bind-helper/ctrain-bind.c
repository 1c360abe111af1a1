/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain-bind.so: libctrain-core's binding planner for the SPANK plugin, loaded by ctrain.so
 * (spank/bind.c) only into the slurmstepd of a step that binds. It links libctrain-core and hwloc
 * and exports one symbol, this table (spank/bind-helper/ctrain-bind.map). */
#include "spank/bind.h"

#ifndef CTRAIN_VERSION
#error "CTRAIN_VERSION is set by the Makefile (from the file VERSION)"
#endif

extern const struct ct_spank_bind_ops ct_spank_bind_table;

/* The step's topology, kept to the process's exit (spank/bind.h). Here, not in ctrain.so: SLURM
 * unloads ctrain.so after slurm_spank_exit, ctrain-bind.so stays loaded (RTLD_NODELETE), so the
 * topology stays reachable. */
static ct_topology *retired;

static void topology_retire(ct_topology *topo)
{
    if (retired)
        ct_topology_free(topo);
    else
        retired = topo;
}

const struct ct_spank_bind_ops ct_spank_bind_table = {
    .version = CTRAIN_VERSION,
    .size = sizeof(struct ct_spank_bind_ops),
    .topology_prepare = ct_topology_prepare,
    .topology_discover = ct_topology_discover,
    .topology_load = ct_topology_load,
    .topology_allows = ct_topology_allows,
    .topology_gpu_count = ct_topology_gpu_count,
    .topology_free = ct_topology_free,
    .topology_retire = topology_retire,
    .plan_create = ct_bind_plan_create,
    .plan_task = ct_bind_plan_task,
    .plan_ib_hca = ct_bind_plan_ib_hca,
    .plan_free = ct_bind_plan_free,
    .task_gpus_in = ct_bind_task_gpus_in,
    .gres_map = ct_gres_map,
};
