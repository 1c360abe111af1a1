/* Topology loading and the GPUs and NICs in it; see include/ctrain/bind.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/bind.h"
#include "ctrain/error.h"
#include "ctrain/util.h"
#include "engine/bind/topology_internal.h"

#define NVIDIA_VENDOR 0x10de

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
    return 3;
}

/* A GPU is defined by a GPU OS device (nvml*, card*, rsmi*, …) or a CUDA co-processor; OpenCL
 * devices only name functions of a card already counted. */
static int osdev_is_gpu(hwloc_obj_t o)
{
    if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU)
        return 1;
    return o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC && !strncmp(o->name, "cuda", 4);
}

static struct ct_gpu *gpu_for_pci(ct_topology *t, hwloc_obj_t pci, unsigned *vendors)
{
    struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;

    for (int i = 0; i < t->ngpus; i++)
        if (t->gpus[i].pci[0] == a->domain && t->gpus[i].pci[1] == a->bus &&
            t->gpus[i].pci[2] == a->dev && t->gpus[i].pci[3] == a->func)
            return &t->gpus[i];
    if (t->ngpus == CT_TOPO_MAX_DEVS)
        return NULL;
    struct ct_gpu *g = &t->gpus[t->ngpus];
    memset(g, 0, sizeof(*g));
    g->pci[0] = a->domain;
    g->pci[1] = a->bus;
    g->pci[2] = a->dev;
    g->pci[3] = a->func;
    g->locality = hwloc_get_non_io_ancestor_obj(t->hw, pci);
    vendors[t->ngpus] = a->vendor_id;
    t->ngpus++;
    return g;
}

static int gpu_cmp_pci(const void *pa, const void *pb)
{
    const struct ct_gpu *a = pa, *b = pb;

    for (int i = 0; i < 4; i++)
        if (a->pci[i] != b->pci[i])
            return a->pci[i] < b->pci[i] ? -1 : 1;
    return 0;
}

static void find_gpus(ct_topology *t)
{
    unsigned vendors[CT_TOPO_MAX_DEVS];
    int nvidia = 0, kept = 0;

    for (hwloc_obj_t o = hwloc_get_next_osdev(t->hw, NULL); o; o = hwloc_get_next_osdev(t->hw, o)) {
        hwloc_obj_t pci = pci_parent(o);
        struct ct_gpu *g;
        const char *uuid;

        if (!pci || !o->name || !osdev_is_gpu(o) || !(g = gpu_for_pci(t, pci, vendors)))
            continue;
        if (!g->name[0] || gpu_name_rank(o->name) < gpu_name_rank(g->name))
            ct_str_copy(g->name, sizeof(g->name), o->name);
        uuid = hwloc_obj_get_info_by_name(o, "NVIDIAUUID");
        if (uuid)
            ct_str_copy(g->uuid, sizeof(g->uuid), uuid);
    }
    /* CUDA numbers NVIDIA devices only: when there is one, a display adapter of another vendor
     * (card0 of a BMC) must not shift the indexes. */
    for (int i = 0; i < t->ngpus; i++)
        nvidia |= vendors[i] == NVIDIA_VENDOR;
    for (int i = 0; i < t->ngpus; i++)
        if (!nvidia || vendors[i] == NVIDIA_VENDOR)
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

static void find_nics(ct_topology *t)
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
        if (ofed)
            sibling_netdev(pci, n->netdev, sizeof(n->netdev));
        else
            ct_str_copy(n->netdev, sizeof(n->netdev), o->name);
        n->locality = hwloc_get_non_io_ancestor_obj(t->hw, o);
    }
}

int ct_topology_load(const char *xml_path, unsigned flags, ct_topology **out, ct_error *err)
{
    ct_topology *t = NULL;
    int rv = CT_ENOMEM;

    *out = NULL;
    if (xml_path && access(xml_path, R_OK) != 0) {
        ct_error_set(err, CT_ENOENT, "topology-missing", "topology file '%s': %s", xml_path, strerror(errno));
        ct_error_hint(err, "give an hwloc XML file (lstopo --of xml --whole-io FILE writes one)");
        return CT_ENOENT;
    }
    t = calloc(1, sizeof(*t));
    if (!t || hwloc_topology_init(&t->hw) != 0) {
        free(t);
        return ct_error_set(err, CT_ENOMEM, "out-of-memory", "loading the topology: out of memory");
    }
    /* The planner uses packages, NUMA nodes, cores and PUs: caches are not worth discovering. */
    hwloc_topology_set_cache_types_filter(t->hw, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_icache_types_filter(t->hw, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_io_types_filter(t->hw, (flags & CT_TOPOLOGY_IO) ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT
                                                                       : HWLOC_TYPE_FILTER_KEEP_NONE);
    /* On Linux, sysfs already gives packages, NUMA nodes, cores and PUs; the x86 CPUID backend
     * only adds cache details and triples the discovery time of every step launch. */
    if (!xml_path)
        hwloc_topology_set_components(t->hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
    if (xml_path && hwloc_topology_set_xml(t->hw, xml_path) != 0) {
        rv = ct_error_set(err, CT_EFORMAT, "topology-format", "topology file '%s' is not an hwloc XML file",
                          xml_path);
        ct_error_hint(err, "write one with 'lstopo --of xml --whole-io FILE' on the node");
        goto fail;
    }
    if (hwloc_topology_load(t->hw) != 0) {
        if (xml_path)
            rv = ct_error_set(err, CT_EFORMAT, "topology-format", "topology file '%s' is not a valid hwloc XML file",
                              xml_path);
        else
            rv = ct_error_set(err, CT_EIO, "topology-discovery", "discovering this machine's topology failed: %s",
                              strerror(errno));
        ct_error_hint(err, "check it with 'lstopo --input FILE'; write one with 'lstopo --of xml --whole-io FILE'");
        goto fail;
    }
    find_gpus(t);
    find_nics(t);
    *out = t;
    return 0;
fail:
    ct_topology_free(t);
    return rv;
}

void ct_topology_free(ct_topology *topo)
{
    if (!topo)
        return;
    if (topo->hw)
        hwloc_topology_destroy(topo->hw);
    free(topo);
}

int ct_topology_gpu_count(const ct_topology *topo)
{
    return topo->ngpus;
}
