/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — making a node summary (engine/bind/node_summary.h) from hwloc's topology; node_summary_read.c
 * writes and reads it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/util.h"
#include "engine/bind/node_summary.h"
#include "engine/bind/topology_internal.h"

static void set_put(uint64_t *words, unsigned nwords, hwloc_const_bitmap_t cs)
{
    unsigned id;

    hwloc_bitmap_foreach_begin(id, cs)
        if (id / 64 < nwords)
            words[id / 64] |= 1ull << (id % 64);
    hwloc_bitmap_foreach_end();
}

static void bridges_put(struct ct_node_summary_dev *d, hwloc_obj_t pcidev)
{
    for (hwloc_obj_t x = pcidev ? pcidev->parent : NULL;
         x && x->type == HWLOC_OBJ_BRIDGE && d->nbridges < CT_NODE_SUMMARY_MAX_BRIDGES; x = x->parent) {
        d->bridge[d->nbridges] = x->gp_index;
        d->bridge_host[d->nbridges++] = x->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
    }
}

static void pci_put(struct ct_node_summary_dev *d, hwloc_obj_t pcidev)
{
    d->has_pci = pcidev != NULL;
    if (pcidev) {
        d->pci[0] = pcidev->attr->pcidev.domain;
        d->pci[1] = pcidev->attr->pcidev.bus;
        d->pci[2] = pcidev->attr->pcidev.dev;
        d->pci[3] = pcidev->attr->pcidev.func;
    }
    bridges_put(d, pcidev);
}

/* Sets of one level, in logical order, from set number *at on. */
static void level_put(hwloc_topology_t hw, hwloc_obj_type_t type, int n, uint64_t *sets, unsigned nw, int *at)
{
    for (int i = 0; i < n; i++)
        set_put(sets + (size_t)(*at)++ * nw, nw, hwloc_get_obj_by_type(hw, type, (unsigned)i)->cpuset);
}

static void devs_put(const struct ct_found *t, ct_node_summary *s, uint64_t *sets, int at)
{
    struct ct_node_summary_dev *g = (struct ct_node_summary_dev *)s->gpus, *n = (struct ct_node_summary_dev *)s->nics;
    unsigned nw = s->head->nwords;

    for (int i = 0; i < t->ngpus; i++, at++) {
        ct_str_copy(g[i].name, sizeof(g[i].name), t->gpus[i].name);
        ct_str_copy(g[i].uuid, sizeof(g[i].uuid), t->gpus[i].uuid);
        pci_put(&g[i], t->gpus[i].pcidev);
        memcpy(g[i].pci, t->gpus[i].pci, sizeof(g[i].pci)); /* kept for OS devices with a bus id too */
        g[i].cuda_index = t->gpus[i].cuda_index;
        g[i].locality = at;
        g[i].locality_depth = t->gpus[i].locality->depth;
        set_put(sets + (size_t)at * nw, nw, t->gpus[i].locality->cpuset);
    }
    for (int i = 0; i < t->nnics; i++, at++) {
        ct_str_copy(n[i].name, sizeof(n[i].name), t->nics[i].name);
        ct_str_copy(n[i].netdev, sizeof(n[i].netdev), t->nics[i].netdev);
        pci_put(&n[i], t->nics[i].pcidev);
        n[i].openfabrics = t->nics[i].openfabrics;
        n[i].fabric = t->nics[i].fabric;
        n[i].locality = at;
        n[i].locality_depth = t->nics[i].locality->depth;
        set_put(sets + (size_t)at * nw, nw, t->nics[i].locality->cpuset);
    }
}

/* The OS indexes of one level's objects (the planner's "NUMA 3", "package 1"). */
static void os_put(hwloc_topology_t hw, hwloc_obj_type_t type, int n, uint32_t *out)
{
    for (int i = 0; i < n; i++)
        out[i] = hwloc_get_obj_by_type(hw, type, (unsigned)i)->os_index;
}

/* The head: counts of every level, this node's identity, the source. */
static void head_fill(const struct ct_found *f, unsigned flags, const char *source, struct ct_node_summary_head *h)
{
    hwloc_topology_t hw = f->hw;
    int ncores = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE), last;

    memcpy(h->magic, CT_NODE_SUMMARY_MAGIC, sizeof(h->magic));
    h->format = CT_NODE_SUMMARY_FORMAT;
    h->flags = flags;
    /* Unreadable: left empty, which no reader's identity matches. */
    if (ct_node_summary_identity(h->boot_id, sizeof(h->boot_id), h->host, sizeof(h->host)) != 0)
        h->boot_id[0] = h->host[0] = '\0';
    h->source_mtime_ns = h->source_size = -1;
    if (source) {
        ct_str_copy(h->source, sizeof(h->source), source);
        ct_node_summary_source_stat(source, &h->source_mtime_ns, &h->source_size);
    }
    last = hwloc_bitmap_last(hwloc_topology_get_complete_cpuset(hw));
    h->nwords = last < 0 ? 1u : (unsigned)last / 64 + 1;
    h->units_are_cores = ncores > 0;
    h->nnuma = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    h->npackages = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PACKAGE);
    h->nunits = ncores > 0 ? ncores : hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU);
    h->nnuma = h->nnuma < 0 ? 0 : h->nnuma;
    h->npackages = h->npackages < 0 ? 0 : h->npackages;
    h->ngpus = f->ngpus;
    h->nnics = f->nnics;
    h->nsets = 1 + h->nnuma + h->npackages + h->nunits + h->ngpus + h->nnics;
    h->size = (uint32_t)ct_node_summary_size(h);
}

int ct_node_summary_make(const struct ct_found *f, unsigned flags, const char *source, ct_node_summary *out,
                         ct_error *err)
{
    hwloc_topology_t hw = f->hw;
    struct ct_node_summary_head h;
    uint64_t *sets;
    int at = 0;

    memset(out, 0, sizeof(*out));
    memset(&h, 0, sizeof(h));
    head_fill(f, flags, source, &h);
    if (!(out->head = calloc(1, h.size)))
        return ct_error_set(err, CT_ENOMEM, "topology-cache", "no memory for the node summary");
    memcpy(out->head, &h, sizeof(h));
    ct_node_summary_bind(out);
    sets = (uint64_t *)out->sets;
    set_put(sets + (size_t)at++ * h.nwords, h.nwords, hwloc_topology_get_allowed_cpuset(hw));
    level_put(hw, HWLOC_OBJ_NUMANODE, h.nnuma, sets, h.nwords, &at);
    level_put(hw, HWLOC_OBJ_PACKAGE, h.npackages, sets, h.nwords, &at);
    level_put(hw, h.units_are_cores ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU, h.nunits, sets, h.nwords, &at);
    devs_put(f, out, sets, at);
    os_put(hw, HWLOC_OBJ_NUMANODE, h.nnuma, (uint32_t *)out->os_index);
    os_put(hw, HWLOC_OBJ_PACKAGE, h.npackages, (uint32_t *)out->os_index + h.nnuma);
    out->head->checksum = ct_node_summary_checksum(out->head, h.size);
    return 0;
}
