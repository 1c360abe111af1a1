/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the topology as the planner sees it: hwloc plus the GPUs and NICs found in it. */
#ifndef CTRAIN_BIND_TOPOLOGY_INTERNAL_H
#define CTRAIN_BIND_TOPOLOGY_INTERNAL_H

#include <hwloc.h>

#include "ctrain/bind.h"

#define CT_TOPO_MAX_DEVS 128

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

struct ct_topology {
    hwloc_topology_t hw;
    struct ct_gpu gpus[CT_TOPO_MAX_DEVS];
    int ngpus;
    struct ct_nic nics[CT_TOPO_MAX_DEVS];
    int nnics;
};

#endif
