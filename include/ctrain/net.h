/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the network interface a task's communication libraries use.
 *
 * A pure function (engine/bind/net.c, libctrain-core) of the task's NIC from the binding plan, the
 * node's interfaces as getifaddrs() lists them and the node's own addresses: the SPANK plugin
 * gathers those and applies the answer; unit tests feed it topology files and made-up interfaces.
 *
 * Rules, in order:
 *   1. A fabric (OpenFabrics HCA: InfiniBand, RoCE, Omni-Path) nearest the task, from the plan:
 *      UCX_NET_DEVICES names its port ("mlx5_0:1") and NCCL_IB_HCA lists the node's HCAs. The socket
 *      interface (NCCL's bootstrap, Gloo, Open MPI's TCP) is the HCA's own interface (IPoIB) when it
 *      is up with an address here, else the node's Ethernet (rule 3).
 *   2. Another NIC of the plan (Ethernet, Slingshot): its interface, when it is up with an address
 *      here; else the node's Ethernet, and the reason says the topology's interface is not usable.
 *   3. The node's Ethernet: the up interface carrying one of the node's own addresses (SLURM's
 *      NodeAddr, or what its node name resolves to). Virtual NICs (veth, bridges) are no PCI devices
 *      and hwloc lists none: this finds them. A loopback interface only when the request allows it
 *      (rank 0's own address is a loopback one: every node of the step is this host).
 *   Nothing found: no socket interface at all, and the reason says why (never a guess).
 * Values, as the projects document them: NCCL_SOCKET_IFNAME "=eth0" (the = asks for that exact
 * name, not a prefix), GLOO_SOCKET_IFNAME and OMPI_MCA_btl_tcp_if_include "eth0",
 * UCX_NET_DEVICES "mlx5_0:1" or "eth0", NCCL_IB_HCA "=mlx5_0,mlx5_1".
 */
#ifndef CTRAIN_NET_H
#define CTRAIN_NET_H

#include "ctrain/bind.h"

/* One address of one interface, as getifaddrs() gives it. */
typedef struct ct_net_iface {
    char name[32];
    int up;          /* IFF_UP */
    int loopback;    /* IFF_LOOPBACK */
    char addr[64];   /* numeric IPv4 or IPv6 address ("10.0.0.2", "fe80::1"); "" for none */
} ct_net_iface;

typedef struct ct_net_request {
    const ct_bind_task *task;        /* the task's planned NIC; NULL: no plan (no NIC from hwloc) */
    const char *ib_hca;              /* the plan's node-wide NCCL_IB_HCA list; NULL or "" when none */
    const ct_net_iface *ifaces;
    int nifaces;
    const char *const *node_addrs;   /* the node's own addresses, numeric */
    int naddrs;
    int allow_loopback;              /* 1: every node of the step is this host */
} ct_net_request;

typedef struct ct_net_vars {
    char socket_ifname[40];   /* NCCL_SOCKET_IFNAME ("=eth0"); "" none */
    char ifname[32];          /* GLOO_SOCKET_IFNAME, OMPI_MCA_btl_tcp_if_include ("eth0"); "" none */
    char ucx_net_devices[48]; /* UCX_NET_DEVICES; "" none */
    char ib_hca[512];         /* NCCL_IB_HCA; "" none */
    char reason[512];         /* why: for the plugin's verbose log */
} ct_net_vars;

/* Fills out; returns 1 when a variable was chosen (a fabric without a usable socket interface sets
 * UCX_NET_DEVICES and NCCL_IB_HCA only), 0 when none (out->reason says why). */
int ct_net_choose(const ct_net_request *req, ct_net_vars *out);

#endif
