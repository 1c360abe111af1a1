/* SPDX-License-Identifier: BSD-3-Clause */
/* The TCPStore client: PyTorch 2.6's TCPStore (is_master=False) over one connection. Every send
 * and receive is bounded by the connection's timeout, so a store that is gone or silent is an
 * error naming its address and this rank, never a hang. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ctrain/tcpstore.h"
#include "ctrain/util.h"
#include "engine/store/auth.h"
#include "engine/store/wire.h"

struct ct_tcpstore {
    int fd;
    int rank;
    double timeout_s;
    char addr[300];      /* "host:port", for messages */
    char prefix[256];    /* "/" + PrefixStore's prefix + "/", or "/" as PyTorch's keyPrefix_ */
    struct wbuf q;       /* the query being built */
};

static const char *hint_reach = "check that MASTER_ADDR and MASTER_PORT are the same on every rank and that "
                                "rank 0 (or torchrun's agent) is running and reachable from this host";

/* ---------------------------------------------------------------- I/O within a deadline */

static int io_fail(ct_tcpstore *c, int code, const char *what, ct_error *err)
{
    int rc = ct_error_set(err, code, "store-io", "rank %d: the TCP store at %s: %s", c->rank, c->addr, what);
    ct_error_hint(err, "%s", hint_reach);
    return rc;
}

/* Wait for events on the socket until deadline: 1 ready, 0 timed out, -1 failed. */
static int io_poll(ct_tcpstore *c, short events, double deadline)
{
    for (;;) {
        double left = deadline - ct_time_now();
        if (left <= 0)
            return 0;
        struct pollfd p = { .fd = c->fd, .events = events };
        int n = poll(&p, 1, left > 3600 ? 3600000 : (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n > 0)
            return 1;
    }
}

static int send_query(ct_tcpstore *c, ct_error *err)
{
    double deadline = ct_time_now() + c->timeout_s;
    size_t off = 0;
    int rc = 0;

    if (c->q.oom)
        rc = ct_error_set(err, CT_ENOMEM, NULL, "rank %d: out of memory for a TCP store query", c->rank);
    while (!rc && off < c->q.len) {
        ssize_t n = send(c->fd, c->q.p + off, c->q.len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int p = io_poll(c, POLLOUT, deadline);
            if (p == 0)
                rc = io_fail(c, CT_ETIMEOUT, "sending a query timed out", err);
            else if (p < 0)
                rc = io_fail(c, CT_ECOMM, strerror(errno), err);
            continue;
        }
        rc = io_fail(c, CT_ECOMM, n < 0 ? strerror(errno) : "connection closed", err);
    }
    c->q.len = 0;
    c->q.oom = 0;
    return rc;
}

/* n bytes of reply; *timed_out (when not NULL) set instead of an error on timeout. */
static int recv_exact(ct_tcpstore *c, void *dst, size_t n, double deadline, int *timed_out, ct_error *err)
{
    size_t off = 0;

    while (off < n) {
        ssize_t r = recv(c->fd, (char *)dst + off, n - off, MSG_DONTWAIT);
        if (r > 0) {
            off += (size_t)r;
            continue;
        }
        if (r == 0)
            return io_fail(c, CT_ECOMM, "the store closed the connection (a GET of a missing key, or the store "
                           "ended)", err);
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return io_fail(c, CT_ECOMM, strerror(errno), err);
        int p = io_poll(c, POLLIN, deadline);
        if (p < 0)
            return io_fail(c, CT_ECOMM, strerror(errno), err);
        if (p == 0) {
            if (timed_out && off == 0) {
                *timed_out = 1;
                return 0;
            }
            return io_fail(c, CT_ETIMEOUT, "no reply within the timeout", err);
        }
    }
    return 0;
}

static int recv_value(ct_tcpstore *c, void *dst, size_t n, ct_error *err)
{
    return recv_exact(c, dst, n, ct_time_now() + c->timeout_s, NULL, err);
}

static int recv_vec(ct_tcpstore *c, void **val, size_t *len, ct_error *err)
{
    uint64_t n = 0;
    uint8_t *p;
    int rc;

    *val = NULL;
    if ((rc = recv_value(c, &n, 8, err)))
        return rc;
    if (n > CT_TCPSTORE_MAX_VALUE)
        return io_fail(c, CT_EFORMAT, "a reply longer than 1 GiB (not a TCP store?)", err);
    if (!(p = malloc((size_t)n + 1)))
        return ct_error_set(err, CT_ENOMEM, NULL, "rank %d: out of memory for a TCP store value", c->rank);
    if ((rc = recv_value(c, p, (size_t)n, err))) {
        free(p);
        return rc;
    }
    p[n] = '\0';
    *val = p;
    *len = (size_t)n;
    return 0;
}

/* ---------------------------------------------------------------- queries */

static void put_key(ct_tcpstore *c, const char *key)
{
    size_t pl = strlen(c->prefix), kl = strlen(key);
    wbuf_u64(&c->q, pl + kl);
    wbuf_put(&c->q, c->prefix, pl);
    wbuf_put(&c->q, key, kl);
}

static void put_keys(ct_tcpstore *c, const char *const *keys, int n)
{
    wbuf_u64(&c->q, (uint64_t)n);
    for (int i = 0; i < n; i++)
        put_key(c, keys[i]);
}

int ct_tcpstore_set(ct_tcpstore *c, const char *key, const void *val, size_t len, ct_error *err)
{
    wbuf_u8(&c->q, CT_TCPSTORE_SET);
    put_key(c, key);
    wbuf_vec(&c->q, val, len);
    return send_query(c, err);
}

int ct_tcpstore_append(ct_tcpstore *c, const char *key, const void *val, size_t len, ct_error *err)
{
    wbuf_u8(&c->q, CT_TCPSTORE_APPEND);
    put_key(c, key);
    wbuf_vec(&c->q, val, len);
    return send_query(c, err);
}

int ct_tcpstore_add(ct_tcpstore *c, const char *key, int64_t delta, int64_t *out, ct_error *err)
{
    int64_t v = 0;
    int rc;

    wbuf_u8(&c->q, CT_TCPSTORE_ADD);
    put_key(c, key);
    wbuf_put(&c->q, &delta, 8);
    if ((rc = send_query(c, err)) || (rc = recv_value(c, &v, 8, err)))
        return rc;
    if (out)
        *out = v;
    return 0;
}

int ct_tcpstore_compare_set(ct_tcpstore *c, const char *key, const void *expected, size_t elen,
                            const void *desired, size_t dlen, void **cur, size_t *clen, ct_error *err)
{
    int rc;

    wbuf_u8(&c->q, CT_TCPSTORE_COMPARE_SET);
    put_key(c, key);
    wbuf_vec(&c->q, expected, elen);
    wbuf_vec(&c->q, desired, dlen);
    if ((rc = send_query(c, err)))
        return rc;
    return recv_vec(c, cur, clen, err);
}

int ct_tcpstore_check(ct_tcpstore *c, const char *const *keys, int n, int *ready, ct_error *err)
{
    uint8_t r = 0;
    int rc;

    wbuf_u8(&c->q, CT_TCPSTORE_CHECK);
    put_keys(c, keys, n);
    if ((rc = send_query(c, err)) || (rc = recv_value(c, &r, 1, err)))
        return rc;
    *ready = r == 0;
    return 0;
}

static void keys_text(char *buf, size_t size, const char *const *keys, int n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s'%s'", i ? ", " : "", keys[i]);
}

/* After a WAIT timed out: CANCEL_WAIT, whose WAIT_CANCELED (1) may follow a STOP_WAITING (0) that
 * crossed it, as PyTorch's doWait reads them. */
static int wait_cancel(ct_tcpstore *c, const char *const *keys, int n, double timeout_s, ct_error *err)
{
    uint8_t r = 0;
    char names[512];
    int rc;

    wbuf_u8(&c->q, CT_TCPSTORE_CANCEL_WAIT);
    if ((rc = send_query(c, err)) || (rc = recv_value(c, &r, 1, err)))
        return rc;
    if (r == 0 && (rc = recv_value(c, &r, 1, err)))
        return rc;
    if (r != 1)
        return io_fail(c, CT_EFORMAT, "an unexpected reply to CANCEL_WAIT", err);
    keys_text(names, sizeof(names), keys, n);
    rc = ct_error_set(err, CT_ETIMEOUT, "store-wait", "rank %d: waited %.0f s for %s in the TCP store at %s",
                      c->rank, timeout_s, names, c->addr);
    ct_error_hint(err, "the ranks that set them did not arrive: check every rank started with the same "
                  "MASTER_ADDR, MASTER_PORT and WORLD_SIZE, or raise the timeout");
    return rc;
}

int ct_tcpstore_wait(ct_tcpstore *c, const char *const *keys, int n, double timeout_s, ct_error *err)
{
    int timed_out = 0, rc;
    uint8_t r = 0;

    if (timeout_s <= 0)
        timeout_s = c->timeout_s;
    wbuf_u8(&c->q, CT_TCPSTORE_WAIT);
    put_keys(c, keys, n);
    if ((rc = send_query(c, err)) ||
        (rc = recv_exact(c, &r, 1, ct_time_now() + timeout_s, &timed_out, err)))
        return rc;
    if (timed_out)
        return wait_cancel(c, keys, n, timeout_s, err);
    if (r != 0)
        return io_fail(c, CT_EFORMAT, "an unexpected reply to WAIT", err);
    return 0;
}

int ct_tcpstore_get(ct_tcpstore *c, const char *key, void **val, size_t *len, ct_error *err)
{
    int rc;

    *val = NULL;
    if ((rc = ct_tcpstore_wait(c, &key, 1, 0, err)))
        return rc;
    wbuf_u8(&c->q, CT_TCPSTORE_GET);
    put_key(c, key);
    if ((rc = send_query(c, err)))
        return rc;
    return recv_vec(c, val, len, err);
}

int ct_tcpstore_delete(ct_tcpstore *c, const char *key, int *deleted, ct_error *err)
{
    int64_t n = 0;
    int rc;

    wbuf_u8(&c->q, CT_TCPSTORE_DELETE_KEY);
    put_key(c, key);
    if ((rc = send_query(c, err)) || (rc = recv_value(c, &n, 8, err)))
        return rc;
    if (deleted)
        *deleted = n == 1;
    return 0;
}

int ct_tcpstore_num_keys(ct_tcpstore *c, int64_t *n, ct_error *err)
{
    int rc;

    wbuf_u8(&c->q, CT_TCPSTORE_GETNUMKEYS);
    if ((rc = send_query(c, err)))
        return rc;
    return recv_value(c, n, 8, err);
}

int ct_tcpstore_multi_set(ct_tcpstore *c, const char *const *keys, const void *const *vals,
                          const size_t *lens, int n, ct_error *err)
{
    wbuf_u8(&c->q, CT_TCPSTORE_MULTI_SET);
    wbuf_u64(&c->q, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        put_key(c, keys[i]);
        wbuf_vec(&c->q, vals[i], lens[i]);
    }
    return send_query(c, err);
}

int ct_tcpstore_multi_get(ct_tcpstore *c, const char *const *keys, int n, void **vals, size_t *lens,
                          ct_error *err)
{
    int rc;

    for (int i = 0; i < n; i++)
        vals[i] = NULL;
    if ((rc = ct_tcpstore_wait(c, keys, n, 0, err)))
        return rc;
    wbuf_u8(&c->q, CT_TCPSTORE_MULTI_GET);
    put_keys(c, keys, n);
    if ((rc = send_query(c, err)))
        return rc;
    for (int i = 0; i < n; i++) {
        if ((rc = recv_vec(c, &vals[i], &lens[i], err))) {
            for (int j = 0; j < i; j++) {
                free(vals[j]);
                vals[j] = NULL;
            }
            return rc;
        }
    }
    return 0;
}

int ct_tcpstore_ping(ct_tcpstore *c, ct_error *err)
{
    uint32_t nonce = (uint32_t)getpid(), back = 0;
    int rc;

    wbuf_u8(&c->q, CT_TCPSTORE_PING);
    wbuf_u32(&c->q, nonce);
    if ((rc = send_query(c, err)) || (rc = recv_value(c, &back, 4, err)))
        return rc;
    if (back != nonce)
        return io_fail(c, CT_EFORMAT, "PING came back with another number (not a TCP store?)", err);
    return 0;
}

/* ---------------------------------------------------------------- connecting */

/* One try at each of the name's addresses: the connected socket, or -1 with *err_no. */
static int try_connect(const struct addrinfo *ai, double deadline, int *err_no)
{
    for (; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            *err_no = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            return fd;
        if (errno == EINPROGRESS) {
            double left = deadline - ct_time_now();
            struct pollfd p = { .fd = fd, .events = POLLOUT };
            int e = 0;
            socklen_t el = sizeof(e);
            /* A second per try at most: a host that drops packets gets tried again, not waited on. */
            int n = poll(&p, 1, left < 1 ? (left > 0 ? (int)(left * 1000) + 1 : 0) : 1000);
            if (n > 0 && !getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) && e == 0)
                return fd;
            *err_no = n == 0 ? ETIMEDOUT : e ? e : errno;
        } else {
            *err_no = errno;
        }
        close(fd);
    }
    return -1;
}

static int resolve(ct_tcpstore *c, const char *host, int port, struct addrinfo **ai, ct_error *err)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    char service[16];
    int rc, g;

    snprintf(service, sizeof(service), "%d", port);
    if ((g = getaddrinfo(host, service, &hints, ai)) == 0)
        return 0;
    rc = ct_error_set(err, CT_EINVAL, "store-address", "rank %d: MASTER_ADDR '%s' does not resolve: %s",
                      c->rank, host, gai_strerror(g));
    ct_error_hint(err, "set MASTER_ADDR to the host name or address of rank 0's host (or torchrun's "
                  "rendezvous host)");
    return rc;
}

/* Connect, retrying with backoff while nothing listens yet (rank 0 may start last). */
static int dial(ct_tcpstore *c, const char *host, int port, ct_error *err)
{
    struct addrinfo *ai = NULL;
    double deadline = ct_time_now() + c->timeout_s, wait_s = 0.05;
    int rc, e = 0;

    if ((rc = resolve(c, host, port, &ai, err)))
        return rc;
    while ((c->fd = try_connect(ai, deadline, &e)) < 0 && ct_time_now() + wait_s < deadline) {
        struct timespec ts = { (time_t)wait_s, (long)((wait_s - (double)(time_t)wait_s) * 1e9) };
        nanosleep(&ts, NULL);
        wait_s = wait_s * 2 > 1 ? 1 : wait_s * 2;
    }
    freeaddrinfo(ai);
    if (c->fd >= 0) {
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return 0;
    }
    rc = ct_error_set(err, CT_ETIMEOUT, "store-connect", "rank %d: cannot reach the TCP store at %s within %.0f s: %s",
                      c->rank, c->addr, c->timeout_s, strerror(e));
    ct_error_hint(err, "%s", hint_reach);
    return rc;
}

void ct_tcpstore_set_timeout(ct_tcpstore *c, double timeout_s)
{
    if (c && timeout_s > 0)
        c->timeout_s = timeout_s;
}

const char *ct_tcpstore_address(const ct_tcpstore *c) { return c ? c->addr : ""; }

/* The error of an authentication that failed: rc's message kept as the cause. */
static int auth_fail(ct_tcpstore *c, const char *why, ct_error *err)
{
    char cause[256];
    int rc;

    snprintf(cause, sizeof(cause), "%s", err->code ? err->msg : "");
    rc = ct_error_set(err, CT_ECONFLICT, "store-auth", "rank %d: the TCP store at %s %s%s%s%s", c->rank, c->addr, why,
                      cause[0] ? " (" : "", cause, cause[0] ? ")" : "");
    ct_error_hint(err, "give every rank, rank 0 too, the same --store-secret-file (a store without one closes the "
                  "connection at the first step)");
    return rc;
}

/* Prove the secret and check the store's proof (engine/store/auth.h). */
static int authenticate(ct_tcpstore *c, const void *secret, size_t len, ct_error *err)
{
    uint8_t nc[CT_TCPSTORE_NONCE], reply[CT_TCPSTORE_NONCE + CT_TCPSTORE_MAC], mac[CT_TCPSTORE_MAC], verdict = 1;

    if (ct_store_auth_random(nc, sizeof(nc)))
        return ct_error_set(err, CT_EIO, "store-auth", "rank %d: no random bytes for the store's authentication",
                            c->rank);
    wbuf_u8(&c->q, CT_TCPSTORE_AUTH_HELLO);
    wbuf_put(&c->q, nc, sizeof(nc));
    ct_error_clear(err);
    if (send_query(c, err) || recv_value(c, reply, sizeof(reply), err))
        return auth_fail(c, "did not answer this rank's authentication: it holds no secret, or is not ctrain's", err);
    if (ct_store_auth_mac(secret, len, "server", nc, reply, mac) ||
        !ct_store_auth_equal(mac, reply + CT_TCPSTORE_NONCE)) {
        ct_error_clear(err);
        return auth_fail(c, "does not hold this rank's secret (its proof does not match)", err);
    }
    if (ct_store_auth_mac(secret, len, "client", reply, nc, mac))
        return ct_error_set(err, CT_EINTERNAL, "store-auth", "rank %d: HMAC failed", c->rank);
    wbuf_u8(&c->q, CT_TCPSTORE_AUTH_PROOF);
    wbuf_put(&c->q, mac, sizeof(mac));
    if (send_query(c, err) || recv_value(c, &verdict, 1, err) || verdict != 0) {
        if (!err->code)
            ct_error_set(err, CT_ECONFLICT, "store-auth", "refused");
        return auth_fail(c, "refused this rank's proof of its secret", err);
    }
    return 0;
}

int ct_tcpstore_connect(const char *host, int port, const char *prefix, int rank, double timeout_s,
                        ct_tcpstore **out, ct_error *err)
{
    return ct_tcpstore_connect_auth(host, port, prefix, rank, timeout_s, NULL, 0, out, err);
}

int ct_tcpstore_connect_auth(const char *host, int port, const char *prefix, int rank, double timeout_s,
                             const void *secret, size_t secret_len, ct_tcpstore **out, ct_error *err)
{
    ct_tcpstore *c;
    int rc;

    *out = NULL;
    if (!host || !*host) {
        rc = ct_error_set(err, CT_EINVAL, "store-address", "rank %d: no MASTER_ADDR for the TCP store", rank);
        ct_error_hint(err, "set MASTER_ADDR (and MASTER_PORT) to where rank 0 runs");
        return rc;
    }
    if (port <= 0 || port > 65535) {
        rc = ct_error_set(err, CT_EINVAL, "store-port", "rank %d: MASTER_PORT %d is not a TCP port", rank, port);
        ct_error_hint(err, "give a port from 1 to 65535");
        return rc;
    }
    if (!(c = calloc(1, sizeof(*c))))
        return ct_error_set(err, CT_ENOMEM, NULL, "rank %d: out of memory", rank);
    c->fd = -1;
    if (secret && !ct_store_auth_available()) {
        rc = ct_error_set(err, CT_ENOTAVAIL, "store-secret", "rank %d: a TCP store secret was given, but this ctrain "
                          "was built without libcrypto", rank);
        ct_error_hint(err, "install libssl-dev (scripts/install-deps) and rebuild, or run without --store-secret-file");
        goto fail;
    }
    c->rank = rank;
    c->timeout_s = timeout_s > 0 ? timeout_s : 300;
    snprintf(c->addr, sizeof(c->addr), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    /* PyTorch's TCPStore puts "/" before every key; a PrefixStore puts its prefix and "/" first. */
    if ((size_t)snprintf(c->prefix, sizeof(c->prefix), "/%s%s", prefix ? prefix : "",
                         prefix && *prefix ? "/" : "") >= sizeof(c->prefix)) {
        rc = ct_error_set(err, CT_EINVAL, "store-prefix", "rank %d: TCP store key prefix '%s' is too long", rank, prefix);
        goto fail;
    }
    if ((rc = dial(c, host, port, err)))
        goto fail;
    /* As PyTorch's client: VALIDATE first (the server drops anyone else), then a PING whose echo
     * proves a TCP store, not some other service, answers there. */
    wbuf_u8(&c->q, CT_TCPSTORE_VALIDATE);
    wbuf_u32(&c->q, CT_TCPSTORE_MAGIC);
    if ((rc = send_query(c, err)) || (secret && (rc = authenticate(c, secret, secret_len, err))) ||
        (rc = ct_tcpstore_ping(c, err)))
        goto fail;
    *out = c;
    return 0;
fail:
    ct_tcpstore_close(c);
    return rc;
}

int ct_tcpstore_local_address(const ct_tcpstore *c, char *buf, size_t size)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    const void *addr;

    if (!c || c->fd < 0 || getsockname(c->fd, (struct sockaddr *)&ss, &len))
        return -1;
    if (ss.ss_family == AF_INET)
        addr = &((const struct sockaddr_in *)&ss)->sin_addr;
    else if (ss.ss_family == AF_INET6)
        addr = &((const struct sockaddr_in6 *)&ss)->sin6_addr;
    else
        return -1;
    return inet_ntop(ss.ss_family, addr, buf, (socklen_t)size) ? 0 : -1;
}

void ct_tcpstore_close(ct_tcpstore *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->q.p);
    free(c);
}
