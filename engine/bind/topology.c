/* SPDX-License-Identifier: BSD-3-Clause */
/* Topology loading and the GPUs and NICs in it; see include/ctrain/bind.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/bind.h"
#include "ctrain/error.h"
#include "ctrain/util.h"
#include "engine/bind/node_summary.h"
#include "engine/bind/topology_internal.h"

#define NVIDIA_VENDOR 0x10de
#define AMD_VENDOR    0x1002
#define HPE_VENDOR    0x17db /* Slingshot (Cassini) NICs */

static hwloc_obj_t pci_parent(hwloc_obj_t osdev)
{
    hwloc_obj_t p = osdev->parent;

    return p && p->type == HWLOC_OBJ_PCI_DEVICE ? p : NULL;
}

/* Which OS device names a GPU best: NVML's and CUDA's names match CUDA's view of the device. */
static int gpu_name_rank(const char *name)
{
    if (!strncmp(name, "nvml", 4))
        return 0;
    if (!strncmp(name, "cuda", 4))
        return 1;
    if (!strncmp(name, "rsmi", 4))
        return 2;
    if (!strncmp(name, "opencl", 6))
        return 3;
    return 4;
}

/* A compute device of a GPU: NVML, CUDA, RSMI, OpenCL, Level Zero. A DRM card/renderD device alone
 * is no proof: every display adapter has one, a BMC's VGA (ASPEED, Matrox) included. */
static int osdev_is_compute(hwloc_obj_t o)
{
    hwloc_obj_osdev_type_t t = o->attr->osdev.type;

    if (t != HWLOC_OBJ_OSDEV_GPU && t != HWLOC_OBJ_OSDEV_COPROC)
        return 0;
    return gpu_name_rank(o->name) < 4 || !strncmp(o->name, "ze", 2);
}

/* A PCI device that is a GPU by its ids: NVIDIA's display-class devices (NVIDIA makes no BMC
 * adapters); AMD's 3D and display-other classes (Instinct MI100 and later), and its VGA-class
 * devices from the GCN generation on (device ids from 0x6600: Radeon Instinct MI25/MI50/MI60 are
 * VGA class), not the older server VGA adapters (the ES1000, 0x515e, sits beside many BMCs). */
static int pci_is_gpu(hwloc_obj_t pci)
{
    unsigned cls = pci->attr->pcidev.class_id, vendor = pci->attr->pcidev.vendor_id;

    if (vendor == NVIDIA_VENDOR)
        return (cls >> 8) == 0x03;
    if (vendor == AMD_VENDOR)
        return cls == 0x0302 || cls == 0x0380 || (cls == 0x0300 && pci->attr->pcidev.device_id >= 0x6600);
    return 0;
}

static struct ct_gpu *gpu_add(struct ct_found *t, hwloc_obj_t pci, hwloc_obj_t near)
{
    struct ct_gpu *g;

    for (int i = 0; pci && i < t->ngpus; i++)
        if (t->gpus[i].pcidev == pci)
            return &t->gpus[i];
    if (t->ngpus == CT_TOPO_MAX_DEVS)
        return NULL;
    g = &t->gpus[t->ngpus++];
    memset(g, 0, sizeof(*g));
    g->pcidev = pci;
    if (pci) {
        g->pci[0] = pci->attr->pcidev.domain;
        g->pci[1] = pci->attr->pcidev.bus;
        g->pci[2] = pci->attr->pcidev.dev;
        g->pci[3] = pci->attr->pcidev.func;
        snprintf(g->name, sizeof(g->name), "%04x:%02x:%02x.%x", g->pci[0], g->pci[1], g->pci[2], g->pci[3]);
    }
    g->locality = hwloc_get_non_io_ancestor_obj(t->hw, near);
    return g;
}

/* Name the GPU after its best OS device and keep NVML's UUID. */
static void gpu_name(struct ct_gpu *g, hwloc_obj_t o)
{
    const char *uuid = hwloc_obj_get_info_by_name(o, "NVIDIAUUID");

    if (!g->name[0] || strchr(g->name, ':') || gpu_name_rank(o->name) < gpu_name_rank(g->name))
        ct_str_copy(g->name, sizeof(g->name), o->name);
    if (uuid)
        ct_str_copy(g->uuid, sizeof(g->uuid), uuid);
}

static int gpu_cmp_pci(const void *pa, const void *pb)
{
    const struct ct_gpu *a = pa, *b = pb;

    for (int i = 0; i < 4; i++)
        if (a->pci[i] != b->pci[i])
            return a->pci[i] < b->pci[i] ? -1 : 1;
    return 0;
}

/* GPUs, in three tiers, the first that finds any wins:
 *   1. PCI devices with a compute OS device (NVML, CUDA, RSMI, OpenCL, Level Zero);
 *   2. else PCI devices that are GPUs by vendor and class (Debian's hwloc has no NVML/CUDA
 *      backend, and without nvidia-drm there is no DRM card either), named by PCI bus id;
 *   3. else compute OS devices hwloc attached to no PCI device.
 * CUDA numbers NVIDIA devices only, in PCI bus order: when there is one, another vendor's
 * adapter must not shift the indexes. */
static void find_gpus(struct ct_found *t)
{
    hwloc_obj_t o;
    int nvidia = 0, kept = 0, tier;

    for (o = hwloc_get_next_osdev(t->hw, NULL); o; o = hwloc_get_next_osdev(t->hw, o)) {
        hwloc_obj_t pci = pci_parent(o);
        struct ct_gpu *g;

        if (o->name && pci && osdev_is_compute(o) && (g = gpu_add(t, pci, pci)))
            gpu_name(g, o);
    }
    tier = t->ngpus ? 1 : 2;
    for (o = hwloc_get_next_pcidev(t->hw, NULL); tier == 2 && o; o = hwloc_get_next_pcidev(t->hw, o))
        if (pci_is_gpu(o) && t->ngpus < CT_TOPO_MAX_DEVS)
            gpu_add(t, o, o);
    tier = t->ngpus ? tier : 3;
    for (o = hwloc_get_next_osdev(t->hw, NULL); tier == 3 && o; o = hwloc_get_next_osdev(t->hw, o)) {
        struct ct_gpu *g;

        if (o->name && !pci_parent(o) && osdev_is_compute(o) && (g = gpu_add(t, NULL, o)))
            gpu_name(g, o);
    }
    for (int i = 0; i < t->ngpus; i++)
        nvidia |= t->gpus[i].pcidev && t->gpus[i].pcidev->attr->pcidev.vendor_id == NVIDIA_VENDOR;
    for (int i = 0; i < t->ngpus; i++)
        if (!nvidia || (t->gpus[i].pcidev && t->gpus[i].pcidev->attr->pcidev.vendor_id == NVIDIA_VENDOR))
            t->gpus[kept++] = t->gpus[i];
    t->ngpus = kept;
    qsort(t->gpus, (size_t)t->ngpus, sizeof(t->gpus[0]), gpu_cmp_pci);
    for (int i = 0; i < t->ngpus; i++)
        t->gpus[i].cuda_index = i;
}

/* The network interface sharing a PCI device with an HCA (ib0 beside mlx5_0), else "". */
static void sibling_netdev(hwloc_obj_t pci, char *out, size_t size)
{
    out[0] = '\0';
    for (hwloc_obj_t c = pci ? pci->io_first_child : NULL; c; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && c->name) {
            ct_str_copy(out, size, c->name);
            return;
        }
}

static int pci_has_openfabrics(hwloc_obj_t pci)
{
    for (hwloc_obj_t c = pci ? pci->io_first_child : NULL; c; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
            return 1;
    return 0;
}

/* A high-speed fabric: an OpenFabrics device (InfiniBand, Omni-Path, RoCE, EFA), an InfiniBand or
 * fabric-class PCI device, a Slingshot NIC (HPE's vendor id; hsn*, cxi*) or a BXI interface. */
static int nic_is_fabric(hwloc_obj_t o, hwloc_obj_t pci)
{
    if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
        return 1;
    if (pci && (pci->attr->pcidev.vendor_id == HPE_VENDOR || pci->attr->pcidev.class_id == 0x0207 ||
                pci->attr->pcidev.class_id == 0x0208))
        return 1;
    return !strncmp(o->name, "hsn", 3) || !strncmp(o->name, "cxi", 3) || !strncmp(o->name, "bxi", 3);
}

static void find_nics(struct ct_found *t)
{
    for (hwloc_obj_t o = hwloc_get_next_osdev(t->hw, NULL); o; o = hwloc_get_next_osdev(t->hw, o)) {
        hwloc_obj_t pci = pci_parent(o);
        int ofed = o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
        struct ct_nic *n;

        if (!o->name || t->nnics == CT_TOPO_MAX_DEVS)
            continue;
        if (!ofed && o->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK)
            continue;
        /* A network interface of an HCA is reached through the HCA's entry. */
        if (!ofed && pci_has_openfabrics(pci))
            continue;
        n = &t->nics[t->nnics++];
        memset(n, 0, sizeof(*n));
        ct_str_copy(n->name, sizeof(n->name), o->name);
        n->openfabrics = ofed;
        n->fabric = nic_is_fabric(o, pci);
        n->pcidev = pci;
        if (ofed)
            sibling_netdev(pci, n->netdev, sizeof(n->netdev));
        else
            ct_str_copy(n->netdev, sizeof(n->netdev), o->name);
        n->locality = hwloc_get_non_io_ancestor_obj(t->hw, o);
    }
}

/* What a load does not need of hwloc's plugins (OpenCL, GL; PCI without CT_TOPOLOGY_IO; libxml2
 * unless a topology file is read) is left out of the topology's discovery by name. The process's
 * environment is not touched: HWLOC_PLUGINS_BLACKLIST would also spare loading their libraries,
 * but setenv/unsetenv race with getenv in the other threads of a multithreaded process
 * (slurmstepd's message and I/O threads read TZ and others while the plugin loads a topology;
 * a host program's threads likewise), and a freed environment entry is worth more than the 1.4 ms
 * the libraries cost. An admin's own HWLOC_PLUGINS_BLACKLIST still applies, hwloc reads it. */
static int init_without_plugins(hwloc_topology_t *hw, unsigned flags, int xml)
{
    static const char *const unneeded[] = { "opencl", "gl", "pci", "xml_libxml" };

    if (hwloc_topology_init(hw) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(unneeded) / sizeof(unneeded[0]); i++) {
        if ((i == 2 && (flags & CT_TOPOLOGY_IO)) || (i == 3 && xml))
            continue;
        hwloc_topology_set_components(*hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, unneeded[i]);
    }
    return 0;
}

/* The first half of a load: hwloc's topology set up (its plugins chosen, its filters, the file
 * named), nothing read yet. */
static void hw_destroy(void *hw)
{
    hwloc_topology_destroy(hw);
}

static int topology_prepare(const char *xml_path, unsigned flags, ct_topology **out, ct_error *err)
{
    ct_topology *t = NULL;
    hwloc_topology_t hw;
    int rv = CT_ENOMEM;

    *out = NULL;
    /* Whether this user can read it: the effective uid (slurmstepd runs the plugin's user_init as the
     * user, with root as real uid, which root_squash NFS refuses where the user may read). */
    if (xml_path && faccessat(AT_FDCWD, xml_path, R_OK, AT_EACCESS) != 0) {
        ct_error_set(err, CT_ENOENT, "topology-missing", "topology file '%s': %s", xml_path, strerror(errno));
        ct_error_hint(err, "give an hwloc XML file (lstopo --of xml --whole-io FILE writes one)");
        return CT_ENOENT;
    }
    t = calloc(1, sizeof(*t));
    if (!t || init_without_plugins(&hw, flags, xml_path != NULL) != 0) {
        free(t);
        return ct_error_set(err, CT_ENOMEM, "out-of-memory", "loading the topology: out of memory");
    }
    t->hw = hw;
    t->hw_free = hw_destroy;
    t->flags = flags;
    /* The planner uses packages, NUMA nodes, cores and PUs: caches are not worth discovering. */
    hwloc_topology_set_cache_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_icache_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_io_types_filter(hw, (flags & CT_TOPOLOGY_IO) ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT
                                                                    : HWLOC_TYPE_FILTER_KEEP_NONE);
    /* On Linux, sysfs already gives packages, NUMA nodes, cores and PUs; the x86 CPUID backend
     * only adds cache details and triples the discovery time of every step launch. */
    if (!xml_path)
        hwloc_topology_set_components(hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
    if (xml_path && hwloc_topology_set_xml(hw, xml_path) != 0) {
        rv = ct_error_set(err, CT_EFORMAT, "topology-format", "topology file '%s' is not an hwloc XML file",
                          xml_path);
        ct_error_hint(err, "write one with 'lstopo --of xml --whole-io FILE' on the node");
        goto fail;
    }
    *out = t;
    return 0;
fail:
    ct_topology_free(t);
    return rv;
}

/* The second half: the file read or the machine discovered, then its GPUs and NICs found, and the
 * planner's model made of them. */
static int topology_read(ct_topology *t, const char *xml_path, ct_error *err)
{
    struct ct_found *f;
    int rv;

    if (hwloc_topology_load(t->hw) != 0) {
        if (xml_path)
            rv = ct_error_set(err, CT_EFORMAT, "topology-format", "topology file '%s' is not a valid hwloc XML file",
                              xml_path);
        else
            rv = ct_error_set(err, CT_EIO, "topology-discovery", "discovering this machine's topology failed: %s",
                              strerror(errno));
        ct_error_hint(err, "check it with 'lstopo --input FILE'; write one with 'lstopo --of xml --whole-io FILE'");
        return rv;
    }
    if (!(f = calloc(1, sizeof(*f))))
        return ct_error_set(err, CT_ENOMEM, "out-of-memory", "loading the topology: out of memory");
    f->hw = t->hw;
    find_gpus(f);
    find_nics(f);
    rv = ct_node_summary_make(f, t->flags, xml_path, &t->model, err);
    t->ngpus = f->ngpus;
    t->nnics = f->nnics;
    free(f);
    return rv;
}

int ct_topology_load(const char *xml_path, unsigned flags, ct_topology **out, ct_error *err)
{
    ct_topology *t = NULL;
    int rv;

    *out = NULL;
    if ((rv = topology_prepare(xml_path, flags, &t, err)) != 0)
        return rv;
    if ((rv = topology_read(t, xml_path, err)) != 0) {
        ct_topology_free(t);
        return rv;
    }
    *out = t;
    return 0;
}

int ct_topology_prepare(unsigned flags, ct_topology **out, ct_error *err)
{
    return topology_prepare(NULL, flags, out, err);
}

int ct_topology_discover(ct_topology *topo, ct_error *err)
{
    return topology_read(topo, NULL, err);
}
