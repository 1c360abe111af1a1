/* SPDX-License-Identifier: BSD-3-Clause */
/* stop_at_connect.so — a test LD_PRELOAD library (t/29): the process stops itself (SIGSTOP) at its
 * first connect() of a TCP socket to any port but MASTER_PORT, that is where gloo's pair first
 * connects to its peer in connectFullMesh, after this rank published its address in the store (on
 * MASTER_PORT, whose connections pass). The peer then waits for a connection that never comes: a
 * rank that died or hung while the ranks join, at a chosen moment instead of a lucky one. Never
 * installed: make tests builds it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>

static int stopped;

static int port_of(const struct sockaddr *addr)
{
    if (addr->sa_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)addr)->sin_port);
    if (addr->sa_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
    return -1;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    static int (*real)(int, const struct sockaddr *, socklen_t);
    const char *store = getenv("MASTER_PORT");
    int type = 0, port = addr ? port_of(addr) : -1;
    socklen_t tl = sizeof(type);

    if (!real)
        real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    if (!stopped && port > 0 && store && port != atoi(store) &&
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM) {
        stopped = 1;
        raise(SIGSTOP);
    }
    return real(fd, addr, len);
}
