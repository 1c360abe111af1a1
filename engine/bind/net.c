/* SPDX-License-Identifier: BSD-3-Clause */
/* The network interface of a task; the rules are in include/ctrain/net.h. */
#include <stdio.h>
#include <string.h>

#include "ctrain/net.h"
#include "ctrain/util.h"

#define SAY(out, ...) snprintf((out)->reason + strlen((out)->reason), \
                               sizeof((out)->reason) - strlen((out)->reason), __VA_ARGS__)

/* The interface is up and has an address here: only then can a library open a socket on it. */
static int usable(const ct_net_request *req, const char *name)
{
    for (int i = 0; name[0] && i < req->nifaces; i++)
        if (!strcmp(req->ifaces[i].name, name) && req->ifaces[i].up && req->ifaces[i].addr[0])
            return 1;
    return 0;
}

/* The up interface carrying one of the node's own addresses; NULL when none. */
static const ct_net_iface *node_iface(const ct_net_request *req, ct_net_vars *out)
{
    const ct_net_iface *lo = NULL;

    if (!req->naddrs) {
        SAY(out, "the node's own address is unknown");
        return NULL;
    }
    for (int a = 0; a < req->naddrs; a++)
        for (int i = 0; i < req->nifaces; i++) {
            const ct_net_iface *f = &req->ifaces[i];

            if (!f->up || strcmp(f->addr, req->node_addrs[a]))
                continue;
            if (!f->loopback) {
                SAY(out, "%s carries the node's address %s", f->name, f->addr);
                return f;
            }
            lo = lo ? lo : f;
        }
    if (lo && req->allow_loopback) {
        SAY(out, "%s carries the node's address %s (loopback: every node of the step is this host)", lo->name,
            lo->addr);
        return lo;
    }
    if (lo)
        SAY(out, "the node's address %s is on loopback (%s), which other hosts cannot reach", lo->addr, lo->name);
    else
        SAY(out, "no interface that is up carries the node's address %s", req->node_addrs[0]);
    return NULL;
}

static void set_socket(ct_net_vars *out, const char *name)
{
    snprintf(out->socket_ifname, sizeof(out->socket_ifname), "=%s", name);
    ct_str_copy(out->ifname, sizeof(out->ifname), name);
}

int ct_net_choose(const ct_net_request *req, ct_net_vars *out)
{
    const ct_bind_task *t = req->task;
    const ct_net_iface *eth;

    memset(out, 0, sizeof(*out));
    if (t && t->nic[0] && t->nic_is_openfabrics) {
        ct_str_copy(out->ucx_net_devices, sizeof(out->ucx_net_devices), t->ucx_net_devices);
        if (req->ib_hca)
            ct_str_copy(out->ib_hca, sizeof(out->ib_hca), req->ib_hca);
        SAY(out, "fabric %s; sockets: ", t->nic);
        if (usable(req, t->netdev)) {
            set_socket(out, t->netdev);
            SAY(out, "its interface %s", t->netdev);
            return 1;
        }
        if (t->netdev[0])
            SAY(out, "its interface %s is not up with an address here, so ", t->netdev);
    } else if (t && t->nic[0]) {
        if (usable(req, t->netdev)) {
            set_socket(out, t->netdev);
            ct_str_copy(out->ucx_net_devices, sizeof(out->ucx_net_devices), t->netdev);
            SAY(out, "%s from the topology", t->netdev);
            return 1;
        }
        SAY(out, "the topology's %s is not up with an address here, so ", t->netdev[0] ? t->netdev : t->nic);
    } else {
        SAY(out, "no network device in the topology, so ");
    }
    eth = node_iface(req, out);
    if (!eth)
        return out->ucx_net_devices[0] != '\0';
    set_socket(out, eth->name);
    if (!out->ucx_net_devices[0])
        ct_str_copy(out->ucx_net_devices, sizeof(out->ucx_net_devices), eth->name);
    return 1;
}
