/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd, the network variables: this node's own addresses and the
 * interface, fabric and variables each task's transports (NCCL, Gloo, UCX, Open MPI) are given
 * (include/ctrain/net.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "ctrain/util.h"
#include "spank/log.h"
#include "spank/remote_net.h"
#include "spank/step.h"

/* The numeric addresses a host name or address resolves to, into s->addrs. */
static int resolve_into(struct step *s, const char *host)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;

    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return 0;
    for (struct addrinfo *a = res; a && s->naddrs < 8; a = a->ai_next) {
        char buf[64];

        if (getnameinfo(a->ai_addr, a->ai_addrlen, buf, sizeof(buf), NULL, 0, NI_NUMERICHOST) != 0)
            continue;
        buf[strcspn(buf, "%")] = '\0'; /* fe80::1%eth0: getifaddrs gives the address alone */
        ct_str_copy(s->addrs[s->naddrs++], sizeof(s->addrs[0]), buf);
    }
    freeaddrinfo(res);
    return s->naddrs;
}

static int is_loopback(const char *addr)
{
    struct in_addr v4;
    struct in6_addr v6;

    if (inet_pton(AF_INET, addr, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, addr, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

/* This node's own addresses, to find the interface that carries them (its Ethernet): what its
 * SLURM node name resolves to, else its NodeAddr (asked of slurmctld, as for rank 0's node). The
 * node is the step's node list at this node's id. As root (init_post_opt): libslurm's calls. */
void ct_spank_step_addresses(struct step *s, char **env)
{
    struct ct_spank_rendezvous me = { 0 };
    struct ct_spank_step_node at = { s->job_id, s->step_id, s->node_id, 0, 0, 0 };
    ct_error err;
    char rank0[64] = "";

    s->naddrs = 0;
    if (resolve_into(s, s->rdv.address) > 0) /* rank 0's address: loopback means a one-host cluster */
        ct_str_copy(rank0, sizeof(rank0), s->addrs[0]);
    s->loopback_ok = rank0[0] && is_loopback(rank0);
    s->naddrs = 0;
    ct_spank_step_list_node(s, env, me.node, sizeof(me.node));
    if (!me.node[0]) {
        snprintf(s->addr_why, sizeof(s->addr_why), "this node's name is not known from SLURM_STEP_NODELIST%s",
                 s->het ? " in a heterogeneous step" : "");
        return;
    }
    if (!strcmp(me.node, s->rdv.node))
        ct_str_copy(me.address, sizeof(me.address), s->rdv.address);
    else if (ct_spank_node_address(&at, me.node, sizeof(me.node), me.address, sizeof(me.address), &err) != 0) {
        snprintf(s->addr_why, sizeof(s->addr_why), "%s", err.msg);
        return;
    }
    if (resolve_into(s, me.address) == 0)
        snprintf(s->addr_why, sizeof(s->addr_why), "node %s's address '%s' does not resolve", me.node, me.address);
}

/* This node's interfaces and their addresses, as the planner of include/ctrain/net.h takes them. */
static int node_ifaces(ct_net_iface *out, int max)
{
    struct ifaddrs *ifa = NULL;
    int n = 0;

    if (getifaddrs(&ifa) != 0)
        return 0;
    for (struct ifaddrs *i = ifa; i && n < max; i = i->ifa_next) {
        ct_net_iface *f = &out[n];
        socklen_t len;

        if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        len = i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        memset(f, 0, sizeof(*f));
        if (getnameinfo(i->ifa_addr, len, f->addr, sizeof(f->addr), NULL, 0, NI_NUMERICHOST) != 0)
            continue;
        f->addr[strcspn(f->addr, "%")] = '\0';
        ct_str_copy(f->name, sizeof(f->name), i->ifa_name);
        f->up = (i->ifa_flags & IFF_UP) != 0;
        f->loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
        n++;
    }
    freeifaddrs(ifa);
    return n;
}

/* One network variable, unless the user set it: then theirs is kept, and verbose says so. */
static int set_net(spank_t sp, const struct step *s, uint32_t rank, const char *name, const char *value)
{
    char have[512];

    if (!value[0])
        return 0;
    if (spank_getenv(sp, name, have, sizeof(have)) != ESPANK_ENV_NOEXIST) {
        if (s->bind == CT_SPANK_BIND_VERBOSE && strcmp(have, value))
            fprintf(stderr, "ctrain: net: rank %u: %s kept as set by the user (%s; ctrain's choice: %s)\n", rank,
                    name, have, value);
        ct_spank_info("rank %u: %s kept as set by the user (%s; ctrain's choice: %s)", rank, name, have, value);
        return 0;
    }
    return ct_spank_task_setenv(sp, name, value, 0);
}

/* The network variables of the task's NIC (include/ctrain/net.h), for NCCL, Gloo, UCX and Open
 * MPI's TCP transport; nothing, with the reason in the log, when no interface can be told. */
void ct_spank_network_choose(const struct step *s, const ct_bind_task *t, ct_net_vars *v)
{
    ct_net_iface ifaces[64];
    const char *addrs[8];
    ct_net_request req = { .task = t, .ib_hca = s->plan ? s->ops->plan_ib_hca(s->plan) : "", .ifaces = ifaces };

    for (int i = 0; i < s->naddrs; i++)
        addrs[i] = s->addrs[i];
    req.node_addrs = addrs;
    req.naddrs = s->naddrs;
    req.allow_loopback = s->loopback_ok;
    req.nifaces = node_ifaces(ifaces, 64);
    ct_net_choose(&req, v);
}

int ct_spank_network_apply(spank_t sp, const struct step *s, const ct_bind_task *t, uint32_t rank)
{
    ct_net_vars v;
    char have[8];

    ct_spank_network_choose(s, t, &v);
    if (!s->naddrs && s->addr_why[0])
        snprintf(v.reason + strlen(v.reason), sizeof(v.reason) - strlen(v.reason), " (%s)", s->addr_why);
    if (s->bind == CT_SPANK_BIND_VERBOSE)
        fprintf(stderr, "ctrain: net: rank %u (node %u): %s%s%s: %s\n", rank, s->node_id,
                v.ifname[0] ? v.ifname : "no socket interface", v.ucx_net_devices[0] ? ", UCX " : "",
                v.ucx_net_devices, v.reason);
    ct_spank_info("rank %u network: %s: %s", rank, v.ifname[0] ? v.ifname : "no socket interface", v.reason);
    if (!v.ifname[0] && !v.ucx_net_devices[0])
        ct_spank_error("rank %u: no network interface set for NCCL, Gloo, UCX or Open MPI: %s", rank, v.reason);
    if (set_net(sp, s, rank, "NCCL_IB_HCA", v.ib_hca) || set_net(sp, s, rank, "UCX_NET_DEVICES", v.ucx_net_devices) ||
        set_net(sp, s, rank, "NCCL_SOCKET_IFNAME", v.socket_ifname) ||
        set_net(sp, s, rank, "GLOO_SOCKET_IFNAME", v.ifname))
        return -1;
    /* Open MPI refuses an include list beside an exclude list: a user's exclude list stands. */
    if (spank_getenv(sp, "OMPI_MCA_btl_tcp_if_exclude", have, sizeof(have)) != ESPANK_ENV_NOEXIST) {
        if (v.ifname[0])
            ct_spank_info("rank %u: OMPI_MCA_btl_tcp_if_include not set: the user set OMPI_MCA_btl_tcp_if_exclude",
                          rank);
        return 0;
    }
    return set_net(sp, s, rank, "OMPI_MCA_btl_tcp_if_include", v.ifname);
}
