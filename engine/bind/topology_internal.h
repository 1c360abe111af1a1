/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — what topology.c finds in hwloc's topology (the GPUs and NICs, with their hwloc objects),
 * from which node_summary.c makes the planner's model (engine/bind/topology_model.h). Only these two
 * files include hwloc. */
#ifndef CTRAIN_BIND_TOPOLOGY_INTERNAL_H
#define CTRAIN_BIND_TOPOLOGY_INTERNAL_H

#include <hwloc.h>

#include "engine/bind/topology_model.h"

/* One GPU: see find_gpus() in topology.c for what counts as one. */
struct ct_gpu {
    char name[32];         /* preferred OS device name: nvml* > cuda* > rsmi* > others; else the PCI bus id */
    char uuid[64];         /* NVIDIAUUID when hwloc knows it, else "" */
    unsigned pci[4];       /* domain, bus, dev, func: CUDA's PCI_BUS_ID order */
    int cuda_index;        /* position in PCI bus order */
    hwloc_obj_t locality;  /* closest non-I/O ancestor */
    hwloc_obj_t pcidev;    /* its PCI device, NULL for an OS device without one */
};

/* One NIC: an OpenFabrics device or a network interface. */
struct ct_nic {
    char name[32];
    int openfabrics;
    int fabric;            /* high-speed: OpenFabrics (InfiniBand, Omni-Path, EFA, RoCE) or a Slingshot/BXI
                              interface; 0: plain Ethernet */
    char netdev[32];       /* network interface on the same PCI device, or this one */
    hwloc_obj_t locality;
    hwloc_obj_t pcidev;    /* its PCI device, NULL when none */
};

struct ct_found {
    hwloc_topology_t hw;
    struct ct_gpu gpus[CT_TOPO_MAX_DEVS];
    int ngpus;
    struct ct_nic nics[CT_TOPO_MAX_DEVS];
    int nnics;
};

#endif
