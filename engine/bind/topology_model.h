/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the topology as the planner sees it, without hwloc: a node model (engine/bind/node_summary.h)
 * that topology.c makes from hwloc's discovery or an XML file, or that ct_topology_summary_read
 * reads from the node summary file. The planner, the GRES mapping and what the SPANK plugin calls in
 * slurmstepd use only this, so that a step planned from the file loads no hwloc. */
#ifndef CTRAIN_BIND_TOPOLOGY_MODEL_H
#define CTRAIN_BIND_TOPOLOGY_MODEL_H

#include "ctrain/bind.h"
#include "engine/bind/node_summary.h"

#define CT_TOPO_MAX_DEVS CT_NODE_SUMMARY_MAX_DEVS

struct ct_topology {
    ct_node_summary model;   /* the node: CPU sets, GPUs and NICs (model.head NULL until discovered) */
    int ngpus, nnics;        /* the devices planned on: the model's, none when loaded without CT_TOPOLOGY_IO */
    unsigned flags;          /* CT_TOPOLOGY_* it was loaded with */
    void *hw;                /* topology.c's hwloc topology, NULL when read from a node summary */
    void (*hw_free)(void *hw);
};

/* Set number i of the model (node_summary.h gives their order). */
static inline const uint64_t *ct_topology_set(const ct_topology *t, int i)
{
    return t->model.sets + (size_t)i * t->model.head->nwords;
}

#endif
