/* SPDX-License-Identifier: BSD-3-Clause */
/* Where rank 0's TCP store listens (issue 48 item 2): MASTER_ADDR's addresses on this host, not
 * every interface, so a client that reaches this host by another address (another network, a
 * container's bridge) finds nothing there. See ct_tcpstore_bind_plan in include/ctrain/tcpstore.h.
 *
 * The hard case is Debian's: /etc/hosts gives a host's own name 127.0.1.1, so rank 0 resolving
 * MASTER_ADDR=<its node> gets a loopback address while the other nodes resolve the same name to a
 * real one (DNS, or their own /etc/hosts). Binding 127.0.1.1 alone would leave them unable to
 * connect, and nothing on this host says which of its addresses they use: the store then listens
 * on the loopback addresses and on this host's other interface addresses (those GLOO_SOCKET_IFNAME
 * names when set: the interface the ranks talk on), and says so. Still not every interface: an
 * address added later, or one of another network namespace, is not served. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctrain/tcpstore.h"

/* The numeric text of sa (with "%ifname" for a scoped IPv6 address); -1 when not IP. */
static int addr_text(const struct sockaddr *sa, char *buf, size_t size)
{
    socklen_t len = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);

    if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
        return -1;
    return getnameinfo(sa, len, buf, (socklen_t)size, NULL, 0, NI_NUMERICHOST) ? -1 : 0;
}

static int is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

/* 1 when sa is one of this host's addresses: a socket can be bound to it. */
static int is_local(const struct sockaddr *sa, socklen_t len)
{
    struct sockaddr_storage ss = { 0 };
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

    if (fd < 0 || len > sizeof(ss)) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    memcpy(&ss, sa, len);
    if (ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
    else
        ((struct sockaddr_in *)&ss)->sin_port = 0;
    ok = bind(fd, (struct sockaddr *)&ss, len) == 0 || errno != EADDRNOTAVAIL;
    close(fd);
    return ok;
}

/* Add text to the plan once; -1 when the plan is full. */
static int plan_add(ct_tcpstore_bind *b, const char *text)
{
    for (int i = 0; i < b->n; i++)
        if (!strcmp(b->addr[i], text))
            return 0;
    if (b->n == CT_TCPSTORE_MAX_LISTEN)
        return -1;
    snprintf(b->addr[b->n++], sizeof(b->addr[0]), "%s", text);
    return 0;
}

static int plan_add_sa(ct_tcpstore_bind *b, const struct sockaddr *sa)
{
    char text[CT_TCPSTORE_ADDR_LEN];

    return addr_text(sa, text, sizeof(text)) ? 0 : plan_add(b, text);
}

/* ifname is one of GLOO_SOCKET_IFNAME's (a comma-separated list), or it is not set. */
static int ifname_chosen(const char *ifname)
{
    const char *want = getenv("GLOO_SOCKET_IFNAME");
    size_t n = strlen(ifname);

    if (!want || !*want)
        return 1;
    for (const char *p = want; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, ifname, n) && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

/* This host's addresses other than loopback and IPv6 link-local (no client reaches those by a
 * name); the number added, -1 when the plan is full. */
static int add_interfaces(ct_tcpstore_bind *b)
{
    struct ifaddrs *list = NULL;
    int added = 0;

    if (getifaddrs(&list))
        return 0;
    for (struct ifaddrs *i = list; i; i = i->ifa_next) {
        const struct sockaddr *sa = i->ifa_addr;
        int before = b->n;

        if (!sa || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK) || is_loopback(sa) ||
            (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) || !ifname_chosen(i->ifa_name))
            continue;
        if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)sa)->sin6_addr))
            continue;
        if (plan_add_sa(b, sa)) {
            added = -1;
            break;
        }
        added += b->n > before;
    }
    freeifaddrs(list);
    return added;
}

/* The local address this host sends to sa from (a UDP socket's route, nothing sent). */
static int add_route_source(ct_tcpstore_bind *b, const struct sockaddr *sa, socklen_t len)
{
    struct sockaddr_storage me;
    socklen_t mlen = sizeof(me);
    int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = -1;

    if (fd < 0)
        return -1;
    if (!connect(fd, sa, len) && !getsockname(fd, (struct sockaddr *)&me, &mlen))
        rc = plan_add_sa(b, (struct sockaddr *)&me);
    close(fd);
    return rc;
}

static void list_text(const ct_tcpstore_bind *b, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < b->n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", b->addr[i]);
}

/* --store-bind ADDR[,ADDR...]: every address of each name. */
static int plan_given(const char *bind, int rank, ct_tcpstore_bind *b, ct_error *err)
{
    char buf[1024], *save = NULL;

    if (snprintf(buf, sizeof(buf), "%s", bind) >= (int)sizeof(buf))
        return ct_error_set(err, CT_EINVAL, "store-bind", "--store-bind is longer than %zu characters",
                            sizeof(buf) - 1);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
        int g = getaddrinfo(tok, NULL, &hints, &ai);

        if (g) {
            ct_error_set(err, CT_EINVAL, "store-bind", "rank %d: --store-bind '%s': '%s' does not resolve: %s", rank,
                         bind, tok, gai_strerror(g));
            return ct_error_hint(err, "give this host's addresses or names, comma-separated, or all");
        }
        for (struct addrinfo *a = ai; a; a = a->ai_next) {
            if (plan_add_sa(b, a->ai_addr)) {
                freeaddrinfo(ai);
                ct_error_set(err, CT_EINVAL, "store-bind", "rank %d: --store-bind '%s' gives more than %d addresses",
                             rank, bind, CT_TCPSTORE_MAX_LISTEN);
                return ct_error_hint(err, "give fewer, or --store-bind all");
            }
        }
        freeaddrinfo(ai);
    }
    if (!b->n) {
        ct_error_set(err, CT_EINVAL, "store-bind", "rank %d: --store-bind '%s' names no address", rank, bind);
        return ct_error_hint(err, "give this host's addresses or names, comma-separated, or all");
    }
    return 0;
}

/* MASTER_ADDR resolves to loopback addresses only, on a run of several nodes (or maybe): those,
 * and this host's interface addresses, with a notice. */
static int plan_loopback_name(const char *master, ct_tcpstore_bind *b)
{
    char loops[256], all[CT_TCPSTORE_MAX_LISTEN * (CT_TCPSTORE_ADDR_LEN + 2)];
    const char *ifs = getenv("GLOO_SOCKET_IFNAME");
    int n_loop = b->n, added;

    list_text(b, loops, sizeof(loops));
    added = add_interfaces(b);
    if (added < 0) {
        b->all = 1;
        snprintf(b->notice, sizeof(b->notice), "MASTER_ADDR '%s' is %s (loopback) on this host and it has more than "
                 "%d other addresses: the TCP store listens on every interface; choose with --store-bind ADDR",
                 master, loops, CT_TCPSTORE_MAX_LISTEN - n_loop);
        return 0;
    }
    b->optional = 1;
    list_text(b, all, sizeof(all));
    snprintf(b->notice, sizeof(b->notice), "MASTER_ADDR '%s' is %s (loopback) on this host, which the other nodes "
             "cannot reach: the TCP store listens on %s (this host's %s addresses); choose with --store-bind "
             "ADDR[,ADDR] or all", master, loops, all, ifs && *ifs ? "GLOO_SOCKET_IFNAME interfaces'" : "interface");
    return 0;
}

int ct_tcpstore_bind_plan(const char *master, const char *bind, int num_nodes, int rank, ct_tcpstore_bind *b,
                          ct_error *err)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL, *num = NULL;
    int g = 0, n_local = 0, n_loop = 0, literal;

    memset(b, 0, sizeof(*b));
    if (bind && !strcmp(bind, "all")) {
        b->all = 1;
        return 0;
    }
    if (bind && *bind)
        return plan_given(bind, rank, b, err);
    if (!master || !*master || (g = getaddrinfo(master, NULL, &hints, &ai))) {
        ct_error_set(err, CT_EINVAL, "store-address", "rank %d: MASTER_ADDR '%s' does not resolve on rank 0's host%s%s",
                     rank, master ? master : "", master && *master ? ": " : "",
                     master && *master ? gai_strerror(g) : "");
        return ct_error_hint(err, "set MASTER_ADDR to rank 0's host name or address");
    }
    hints.ai_flags = AI_NUMERICHOST;
    literal = !getaddrinfo(master, NULL, &hints, &num);
    if (num)
        freeaddrinfo(num);
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        if (!is_local(a->ai_addr, a->ai_addrlen))
            continue;
        n_local++;
        n_loop += is_loopback(a->ai_addr);
        (void)plan_add_sa(b, a->ai_addr);   /* a name's few addresses: the plan has room */
    }
    if (n_local == 0) {
        /* An address translated in front of this host (a service's, a NAT's): the addresses this
         * host reaches it from, where what is sent to it arrives. */
        char all[256];
        for (struct addrinfo *a = ai; a; a = a->ai_next)
            (void)add_route_source(b, a->ai_addr, a->ai_addrlen);
        freeaddrinfo(ai);
        if (!b->n) {
            ct_error_set(err, CT_EINVAL, "store-address", "rank %d: MASTER_ADDR '%s' is no address of this host, "
                         "and no route leads there", rank, master);
            return ct_error_hint(err, "set MASTER_ADDR to rank 0's host (this one), or choose the addresses with "
                                 "--store-bind ADDR[,ADDR] or all");
        }
        list_text(b, all, sizeof(all));
        snprintf(b->notice, sizeof(b->notice), "MASTER_ADDR '%s' is no address of this host (one translated in front "
                 "of it?): the TCP store listens on %s, where this host reaches it from; choose with --store-bind "
                 "ADDR[,ADDR] or all", master, all);
        return 0;
    }
    freeaddrinfo(ai);
    /* A loopback literal, or one node: the user's loopback is what the ranks use. */
    if (n_loop < n_local || literal || num_nodes == 1)
        return 0;
    return plan_loopback_name(master, b);
}
