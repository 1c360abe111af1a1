/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the binding planner: which GPUs, cores and NIC each task of a node gets.
 *
 * A pure function of its inputs (engine/bind/, libctrain-core; hwloc only to discover): a topology, the CPUs and
 * GPUs SLURM allocated, the number of tasks on the node and the CPUs per task give one binding per
 * local task. Same inputs, same plan. The SPANK plugin only applies the plan; `ctrain bind` prints it.
 *
 * Rules, in order (README's "What the binding chooses, and why" gives the reasons):
 *   0. GPUs: PCI devices with a compute OS device (NVML, CUDA, RSMI, OpenCL, Level Zero); else PCI
 *      devices that are GPUs by vendor and class (NVIDIA display-class, AMD 3D/display-other and
 *      GCN-or-later VGA; a BMC's VGA never), named by PCI bus id; else compute OS devices on no
 *      PCI device. With NVIDIA
 *      GPUs present, only those. Numbered in PCI bus order.
 *   1. Domains are the NUMA nodes or packages (whichever level has more objects) with allowed CPUs,
 *      in hwloc's logical order; NUMA nodes whose CPUs intersect are one domain (KNL's MCDRAM).
 *      Tasks go to the level above first (packages) in proportion to weight, then to the domains
 *      inside it, neighbouring domains merged when it has fewer tasks than domains; with fewer
 *      tasks than packages, whole packages merge. The weight: the allocated GPUs when there are at
 *      least as many GPUs as tasks, else the allowed cores. Neighbouring local ranks share a domain.
 *      A GPU local to one domain belongs there; one local to several (attached to the machine) is
 *      spread over them in PCI order; one near no allowed CPU is used only when the local ones are
 *      fewer than the tasks.
 *   2. Inside a group, its allowed cores are split into contiguous, disjoint chunks, one per task, and
 *      its GPUs (in PCI bus order) are split the same way: every GPU goes to at most one task.
 *   3. The NIC: high-speed fabrics (OpenFabrics devices; Slingshot, BXI) before Ethernet; among them
 *      the one sharing the task's first GPU's PCIe switch, else its host bridge, else local to the
 *      task's cores (deeper locality first), then the nearest PCI bus, then the least used so far.
 *      NCCL_IB_HCA is one node-wide list of the high-speed HCAs (ct_bind_plan_ib_hca).
 * Documented behaviour when resources are short (never an error):
 *   - fewer GPUs than tasks: each GPU still goes to one task only; the other tasks get no GPU
 *     (cuda_visible_devices "") and their reason says so;
 *   - more tasks than cores: tasks get disjoint hardware threads (PUs) instead of whole cores;
 *   - more tasks than PUs: PUs are shared round robin, one thread each, and the reason says
 *     "oversubscribed";
 *   - cpus_per_task larger than a task's share: the task gets its share and the reason says so.
 * CUDA numbering: GPUs are numbered in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID); when every
 * GPU of a task has a known UUID (NVML's NVIDIAUUID), cuda_visible_devices lists UUIDs instead,
 * which stay right when SLURM hides other GPUs with cgroups.
 */
#ifndef CTRAIN_BIND_H
#define CTRAIN_BIND_H

#include "ctrain/error.h"

#define CT_BIND_MAX_GPUS 64

/* A node topology with its I/O devices (GPUs, NICs). */
typedef struct ct_topology ct_topology;

enum ct_topology_flags {
    CT_TOPOLOGY_IO = 1  /* also GPUs and NICs (PCI and OS devices); without it: CPUs and memory only,
                           which discovers several times faster (no PCI scan) */
};

/* Load an hwloc XML file, or discover this machine when xml_path is NULL. */
int ct_topology_load(const char *xml_path, unsigned flags, ct_topology **out, ct_error *err);
/* ct_topology_load of this machine in two halves, for a caller that discovers in a thread of its
 * own: ct_topology_prepare in the calling thread (it chooses hwloc's plugins through the process's
 * environment, which no other thread may change meanwhile), then ct_topology_discover once, in any
 * one thread (hwloc's reads of /sys and /proc). On failure ct_topology_discover leaves topo to be
 * freed; ct_topology_free either way. */
int ct_topology_prepare(unsigned flags, ct_topology **out, ct_error *err);
int ct_topology_discover(ct_topology *topo, ct_error *err);
/* 1 when every CPU of the list (OS indexes, e.g. 0-7,16) is an allowed PU of the topology: hwloc
 * leaves out the PUs its discovering process's cpuset excluded. */
int ct_topology_allows(const ct_topology *topo, const char *cpus);
void ct_topology_free(ct_topology *topo);
/* Number of GPUs found (one per PCI device, whatever the OS devices). */
int ct_topology_gpu_count(const ct_topology *topo);
/* The node summary: the planner's whole view of a loaded topology (CPU sets of the allowed PUs,
 * NUMA nodes, packages and cores; GPUs and NICs with their locality and PCI position) as a file,
 * which the binding reads without hwloc (engine/bind/node_summary.h). Written for this node (its
 * boot id and host name) and version (the caller's CTRAIN_VERSION), root-owned, mode 0644, whole
 * (a temporary file renamed). */
int ct_topology_summary_write(ct_topology *topo, const char *version, const char *path, ct_error *err);
/* The topology of a summary this node wrote at this boot with this version, with `flags`'s devices
 * (a summary discovered with CT_TOPOLOGY_IO serves a step without: its devices are left out), from
 * the same source (source: the topology file the caller would load, unchanged since; NULL: discovery).
 * CT_ENOENT when there is none, CT_EFORMAT naming the file and what differs when it does not serve:
 * the caller loads or discovers instead. Plans made on it equal those on the topology it was written
 * from. */
int ct_topology_summary_read(const char *path, unsigned flags, const char *version, const char *source,
                             ct_topology **out, ct_error *err);

typedef struct ct_bind_request {
    const char *allowed_cpus; /* OS indexes of allowed PUs as a list ("0-7,16"); NULL: all allowed */
    const char *gpus;         /* allocated GPUs: NULL: every GPU of the topology; "": none; else a comma
                                 list of CUDA indexes in PCI bus order ("0,3"), OS device names
                                 ("nvml3") or UUIDs ("GPU-…") */
    int ntasks;               /* tasks on this node, >= 1 */
    int cpus_per_task;        /* PUs per task (SLURM's --cpus-per-task); 0: an even share */
} ct_bind_request;

typedef struct ct_bind_task {
    int local_rank;
    int *cpus;                /* OS indexes of the PUs, ascending */
    int ncpus;
    char gpus[CT_BIND_MAX_GPUS][32]; /* OS device names, e.g. "nvml3" */
    int ngpus;
    char cuda_visible_devices[1024]; /* "3" or "GPU-…,GPU-…"; "" when no GPU */
    char cuda_local_devices[1024];   /* the same GPUs numbered among the allocated ones ("1" for the
                                        second allocated GPU): what a task sees when the step's
                                        cgroup hides the other GPUs (ConstrainDevices=yes) */
    char nic[32];             /* OpenFabrics or network device, e.g. "mlx5_0"; "" when none */
    int nic_is_openfabrics;   /* 1: nic is an HCA (NCCL_IB_HCA); 0: a network interface */
    char netdev[32];          /* network interface on or nearest the NIC (NCCL_SOCKET_IFNAME); "" none */
    char ucx_net_devices[48]; /* UCX_NET_DEVICES: "mlx5_0:1" for an HCA, else the interface; "" none */
    int threads;              /* OMP_NUM_THREADS */
    char reason[512];
} ct_bind_task;

typedef struct ct_bind_plan ct_bind_plan;

/* The planner. Fails only on malformed requests (CT_EINVAL naming the field: an unknown GPU, a CPU
 * list that does not parse or has no CPU of the topology, ntasks < 1). */
int ct_bind_plan_create(const ct_topology *topo, const ct_bind_request *req, ct_bind_plan **out,
                        ct_error *err);
int ct_bind_plan_ntasks(const ct_bind_plan *plan);
const ct_bind_task *ct_bind_plan_task(const ct_bind_plan *plan, int local_rank);
/* 1 when every GPU of the task is in list (the forms of ct_bind_request.gpus: what SLURM gave the
 * task), 0 when one is not; CT_EINVAL when the list names a GPU the topology lacks. */
int ct_bind_task_gpus_in(const ct_topology *topo, const ct_bind_task *task, const char *list, ct_error *err);
/* NCCL_IB_HCA for every task of the node: "=mlx5_0,mlx5_1" (exact names) listing the node's
 * high-speed OpenFabrics devices, the same for all ranks (NCCL needs one list); "" when none. */
const char *ct_bind_plan_ib_hca(const ct_bind_plan *plan);
/* {"tasks":[{"local_rank":0,"cpus":[…],"gpus":[…],"cuda_visible_devices":"…","cuda_local_devices":"…",
 *  "nic":"…"|null,"netdev":"…"|null,"ucx_net_devices":"…"|null,"threads":N,"reason":"…"}],
 *  "nccl_ib_hca":"=mlx5_0,…"|null} as a malloc'd string. */
char *ct_bind_plan_to_json(const ct_bind_plan *plan);
void ct_bind_plan_free(ct_bind_plan *plan);

#endif
