/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — a key-value store that speaks PyTorch's TCPStore wire protocol (the server without
 * libuv, torch/csrc/distributed/c10d/TCPStoreBackend.cpp and TCPStore.cpp as of PyTorch 2.6), so
 * ranks rendezvous through MASTER_ADDR:MASTER_PORT where PyTorch's launchers put them: under
 * torchrun ctrain's workers join the agent's own store, elsewhere rank 0 hosts one that torch
 * clients can use too.
 *
 * The protocol, little-endian as the hosts that run it: a query is one byte of type, then its
 * arguments; a string or byte vector is a uint64 length and the bytes. A connection's first query
 * is VALIDATE with the uint32 0x3C85F7CE (anything else: the server drops it). Replies: GET and
 * COMPARE_SET a vector, ADD, DELETE_KEY and GETNUMKEYS an int64, CHECK a byte (0 ready, 1 not),
 * WAIT a byte once every key exists (0) or after CANCEL_WAIT (1), PING its uint32 back; SET,
 * APPEND and MULTI_SET none. A GET of a missing key makes the server drop the connection.
 * PyTorch's client prefixes every key with "/"; ct_tcpstore does the same, so both see one store.
 *
 * libctrain only: a POSIX socket and a thread, nothing else.
 */
#ifndef CTRAIN_TCPSTORE_H
#define CTRAIN_TCPSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/error.h"

/* The query types, by value on the wire (PyTorch's detail::QueryType). */
enum ct_tcpstore_query {
    CT_TCPSTORE_VALIDATE = 0,
    CT_TCPSTORE_SET,
    CT_TCPSTORE_COMPARE_SET,
    CT_TCPSTORE_GET,
    CT_TCPSTORE_ADD,
    CT_TCPSTORE_CHECK,
    CT_TCPSTORE_WAIT,
    CT_TCPSTORE_GETNUMKEYS,
    CT_TCPSTORE_DELETE_KEY,
    CT_TCPSTORE_APPEND,
    CT_TCPSTORE_MULTI_GET,
    CT_TCPSTORE_MULTI_SET,
    CT_TCPSTORE_CANCEL_WAIT,
    CT_TCPSTORE_PING,
    CT_TCPSTORE_N_QUERIES
};

#define CT_TCPSTORE_MAGIC 0x3C85F7CEu
/* The largest key or value either side accepts: a bound, so a corrupt length cannot make the
 * server allocate without limit (PyTorch's own has none). */
#define CT_TCPSTORE_MAX_VALUE ((uint64_t)1 << 30)

/* ---------------------------------------------------------------- the server */

typedef struct ct_tcpstore_server ct_tcpstore_server;

/* Listen on every interface at port (0: one the kernel picks) and serve from a thread of this
 * process until ct_tcpstore_server_stop. rank names the caller in errors (a port in use). */
int ct_tcpstore_server_start(int port, int rank, ct_tcpstore_server **out, ct_error *err);

/* Where a store listens (issue 48 item 2): the addresses, not every interface. */
#define CT_TCPSTORE_MAX_LISTEN 32
#define CT_TCPSTORE_ADDR_LEN 64     /* a numeric address, an IPv6 one with its "%scope" */
typedef struct ct_tcpstore_bind {
    int all;                        /* every interface (in6addr_any), as ct_tcpstore_server_start */
    int n;
    char addr[CT_TCPSTORE_MAX_LISTEN][CT_TCPSTORE_ADDR_LEN];   /* numeric: "10.0.0.1", "fd00::2" */
    int optional;                   /* addresses of the interfaces: one that will not bind (IPv6 still
                                       tentative) is left out, as long as one binds */
    char notice[640];               /* a line for rank 0's user ("" none): what was bound and why */
} ct_tcpstore_bind;

/* Where rank 0's store should listen for MASTER_ADDR master_addr, given how (bind: NULL or "" for
 * MASTER_ADDR's own addresses, "all", or "ADDR[,ADDR...]", names or addresses) over num_nodes nodes
 * (0: unknown). MASTER_ADDR's addresses that are this host's; when they are all loopback — a
 * Debian host resolves its own name to 127.0.1.1 through /etc/hosts while the other nodes reach it
 * by another — and the run spans more than one node (or may), this host's other interface
 * addresses too (those of the interfaces GLOO_SOCKET_IFNAME names when set), with a notice; when
 * none is this host's (an address translated in front of it), the addresses this host routes to
 * them from, with a notice. CT_EINVAL naming the input when it does not resolve. */
int ct_tcpstore_bind_plan(const char *master_addr, const char *bind, int num_nodes, int rank, ct_tcpstore_bind *out,
                          ct_error *err);
/* ct_tcpstore_server_start on the plan's addresses (NULL: every interface), and with a shared
 * secret (NULL: none, PyTorch's protocol exactly) every client must prove it holds it before any
 * query (issue 48 item 3: HMAC-SHA256 challenge and response, engine/store/auth.h); one that does
 * not is dropped and said on stderr. CT_ENOTAVAIL when a secret is given to a ctrain built without
 * libcrypto. The secret is copied. */
#define CT_TCPSTORE_SECRET_MIN 16
#define CT_TCPSTORE_SECRET_MAX 4096
int ct_tcpstore_server_start_on(const ct_tcpstore_bind *bind, const void *secret, size_t secret_len, int port,
                                int rank, ct_tcpstore_server **out, ct_error *err);
/* The addresses it listens on, "127.0.0.1, ::1" ("every interface"), for messages. */
const char *ct_tcpstore_server_listening(const ct_tcpstore_server *srv);
int ct_tcpstore_server_port(const ct_tcpstore_server *srv);
/* Close every connection, end the thread, free. NULL is fine. */
void ct_tcpstore_server_stop(ct_tcpstore_server *srv);


/* ---------------------------------------------------------------- the client */

typedef struct ct_tcpstore ct_tcpstore;

/* Connect to host:port (a name or address) and validate, trying again while nothing listens
 * there yet, for up to timeout_s; that timeout also bounds every later wait. prefix (NULL or "")
 * scopes the keys as PyTorch's PrefixStore does ("/worker/attempt_0" under torchrun's agent
 * store). rank names the caller in errors. */
int ct_tcpstore_connect(const char *host, int port, const char *prefix, int rank, double timeout_s,
                        ct_tcpstore **out, ct_error *err);
/* The same, proving the store's secret after VALIDATE (NULL: none) and checking that the store
 * holds it too: an error naming the store when either proof fails. */
int ct_tcpstore_connect_auth(const char *host, int port, const char *prefix, int rank, double timeout_s,
                             const void *secret, size_t secret_len, ct_tcpstore **out, ct_error *err);
void ct_tcpstore_close(ct_tcpstore *c);
/* Bound every later wait by timeout_s instead (> 0): a short one to ask the store once a rank is
 * known to be stopped — the store itself may be in that rank's process. */
void ct_tcpstore_set_timeout(ct_tcpstore *c, double timeout_s);
/* The store's address as "host:port" ("[::1]:29500"), for messages. */
const char *ct_tcpstore_address(const ct_tcpstore *c);
/* This end's address of the connection ("10.1.2.3", "::1"): the one this host reaches the store
 * by, so the one the other ranks most likely reach it by. 0, or -1 when it cannot be read. */
int ct_tcpstore_local_address(const ct_tcpstore *c, char *buf, size_t size);

int ct_tcpstore_set(ct_tcpstore *c, const char *key, const void *val, size_t len, ct_error *err);
/* Wait (within the timeout) until key exists, then its value: *val malloc'd (and NUL-terminated
 * past *len, for text), free()d by the caller. */
int ct_tcpstore_get(ct_tcpstore *c, const char *key, void **val, size_t *len, ct_error *err);
int ct_tcpstore_add(ct_tcpstore *c, const char *key, int64_t delta, int64_t *out, ct_error *err);
/* Set key to desired if its value is expected (or it is missing and expected is empty); *cur
 * (malloc'd) gets the value after, or expected when the key was missing and expected not empty. */
int ct_tcpstore_compare_set(ct_tcpstore *c, const char *key, const void *expected, size_t elen,
                            const void *desired, size_t dlen, void **cur, size_t *clen, ct_error *err);
int ct_tcpstore_append(ct_tcpstore *c, const char *key, const void *val, size_t len, ct_error *err);
/* *ready = 1 when every key exists. */
int ct_tcpstore_check(ct_tcpstore *c, const char *const *keys, int n, int *ready, ct_error *err);
/* Until every key exists; CT_ETIMEOUT naming them after timeout_s (<= 0: the connection's). */
int ct_tcpstore_wait(ct_tcpstore *c, const char *const *keys, int n, double timeout_s, ct_error *err);
int ct_tcpstore_delete(ct_tcpstore *c, const char *key, int *deleted, ct_error *err);
int ct_tcpstore_num_keys(ct_tcpstore *c, int64_t *n, ct_error *err);
int ct_tcpstore_multi_set(ct_tcpstore *c, const char *const *keys, const void *const *vals,
                          const size_t *lens, int n, ct_error *err);
/* Waits for the keys first, as PyTorch's multiGet; vals[i] malloc'd. */
int ct_tcpstore_multi_get(ct_tcpstore *c, const char *const *keys, int n, void **vals, size_t *lens,
                          ct_error *err);
int ct_tcpstore_ping(ct_tcpstore *c, ct_error *err);

#endif
