/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the node summary: what the binding planner reads of a node's topology (PUs, cores,
 * NUMA nodes and packages as CPU sets; GPUs and NICs with their PCI position, the PCI bridges above
 * them and the CPUs near them), flat, for a file one discovery writes and later steps read without
 * hwloc. Written and read on the same node only: native byte order, the node's boot id and host name
 * inside. The reader (node_summary_read.c) includes no hwloc.
 *
 * The planner (plan.c) plans on this model: topology.c makes it from hwloc's discovery or an hwloc
 * XML file, ct_topology_summary_read (topology_model.c) from the file. What the fields cannot see,
 * and so what must rewrite the file (slurmd's start does: the SPANK plugin's init in slurmd): CPUs or devices
 * hot-plugged within one boot, a GPU or NIC driver loaded after the summary was written (no OS
 * devices then), gres.conf changes (the GRES mapping reads gres.conf per step and only the GPUs'
 * PCI bus ids from here). A boot, another node, another ctrain version, another topology file (or
 * the same one changed) and a summary without I/O for a step that needs it are refused by
 * ct_node_summary_read. */
#ifndef CTRAIN_BIND_NODE_SUMMARY_H
#define CTRAIN_BIND_NODE_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/bind.h"
#include "ctrain/error.h"

#define CT_NODE_SUMMARY_MAGIC "CTNODE\0\1"
#define CT_NODE_SUMMARY_FORMAT 2u
#define CT_NODE_SUMMARY_MAX_BRIDGES 8
#define CT_NODE_SUMMARY_MAX_DEVS 128 /* topology_internal.h's CT_TOPO_MAX_DEVS */
/* A summary larger than this is not one ctrain wrote (4,096 cores with every device: well under). */
#define CT_NODE_SUMMARY_MAX_SIZE (16u << 20)

/* A GPU or a NIC. Its CPUs are set number `locality` of the summary. */
struct ct_node_summary_dev {
    char name[32];
    char uuid[64];                 /* GPU: NVIDIAUUID or "" */
    char netdev[32];               /* NIC: its network interface or "" */
    uint32_t pci[4];               /* domain, bus, dev, func; valid when has_pci */
    int32_t has_pci;
    int32_t cuda_index;            /* GPU */
    int32_t openfabrics, fabric;   /* NIC */
    int32_t locality;              /* index of its CPU set */
    int32_t locality_depth;        /* hwloc depth of its closest non-I/O ancestor (NIC scoring) */
    int32_t nbridges;              /* PCI bridges above it, nearest first */
    int32_t bridge_host[CT_NODE_SUMMARY_MAX_BRIDGES]; /* 1: a host bridge, 0: a PCI-to-PCI bridge */
    uint64_t bridge[CT_NODE_SUMMARY_MAX_BRIDGES];     /* the bridges' hwloc global persistent indexes */
};

struct ct_node_summary_head {
    char magic[8];
    uint32_t format;
    uint32_t size;                 /* of the whole file */
    uint64_t checksum;             /* FNV-1a 64 of the whole file with this field 0 */
    char version[32];              /* CTRAIN_VERSION of the writer */
    char boot_id[40];              /* /proc/sys/kernel/random/boot_id of the writer */
    char host[64];                 /* uname's node name of the writer */
    char source[1024];             /* the hwloc XML file it was loaded from; "" discovered */
    int64_t source_mtime_ns;       /* that file's modification time and size */
    int64_t source_size;
    uint32_t flags;                /* CT_TOPOLOGY_* it was discovered with */
    uint32_t nwords;               /* 64-bit words of each CPU set */
    int32_t units_are_cores;       /* units are cores (1) or PUs (0: the topology has no cores) */
    int32_t nnuma, npackages, nunits, ngpus, nnics, nsets;
};

/* Sets in this order: [0] the allowed PUs, then the NUMA nodes, the packages, the units (in hwloc's
 * logical order), then one per GPU and one per NIC; after them the GPUs, then the NICs, then the OS
 * indexes of the NUMA nodes and of the packages (the planner's labels). */
typedef struct ct_node_summary {
    struct ct_node_summary_head *head;  /* the whole file, as read or made */
    const uint64_t *sets;
    const struct ct_node_summary_dev *gpus, *nics;
    const uint32_t *os_index;           /* nnuma, then npackages */
} ct_node_summary;

struct ct_found;

/* Of what topology.c found (hwloc's topology, its GPUs and NICs), for this node (boot id and host
 * name; left empty when unreadable, which no reader accepts). source: the XML file it was loaded
 * from, or NULL. The version is stamped by ct_node_summary_write. */
int ct_node_summary_make(const struct ct_found *f, unsigned flags, const char *source, ct_node_summary *out,
                         ct_error *err);
/* Stamped with version (the caller's CTRAIN_VERSION: libctrain-core is built without it; a summary
 * is read by the build that wrote it) and written whole to path (a temporary file beside it, then
 * renamed), mode 0644. */
int ct_node_summary_write(ct_node_summary *s, const char *version, const char *path, ct_error *err);
/* Read and validated: owned by root and writable by root only, magic, format, size, checksum, this
 * version, this boot, this host, discovered with `flags`, and from the same source (source: the
 * topology file the reader would load, unchanged since, or NULL for discovery). Any mismatch is an
 * error naming the file and what differs (CT_ENOENT when there is none, CT_EFORMAT otherwise): the
 * caller discovers instead. */
int ct_node_summary_read(const char *path, unsigned flags, const char *version, const char *source,
                         ct_node_summary *out, ct_error *err);
void ct_node_summary_free(ct_node_summary *s);

/* Helpers shared by the writer and the reader. */
uint64_t ct_node_summary_checksum(const void *buf, size_t size);
int ct_node_summary_identity(char *boot_id, size_t bsize, char *host, size_t hsize);
/* A topology file's modification time (ns) and size; -1 when it cannot be examined. */
int ct_node_summary_source_stat(const char *source, int64_t *mtime_ns, int64_t *size);
size_t ct_node_summary_size(const struct ct_node_summary_head *h);
void ct_node_summary_bind(ct_node_summary *s);

#endif
