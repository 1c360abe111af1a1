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
    CT_SPANK_BIND_PLANNER_OPS,
    .topology_prepare = ct_topology_prepare,
    .topology_discover = ct_topology_discover,
    .topology_load = ct_topology_load,
    .topology_retire = topology_retire,
};
