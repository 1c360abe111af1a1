/* SPDX-License-Identifier: BSD-3-Clause */
/* The TCPStore server: PyTorch 2.6's TCPStoreMasterDaemon semantics (see include/ctrain/tcpstore.h)
 * on one thread of the hosting rank. Unlike PyTorch's, which reads a query with blocking recv once
 * poll says a byte arrived, every connection here is non-blocking with an input buffer, and a
 * query runs only once all of it is there: a client that stalls mid-query stalls only itself.
 *
 * Anyone who can reach the port can connect (SECURITY.md), so what one client can cost is bounded
 * (issue 48 item 3): a query's framing is scanned once, resuming where the last read ended (a
 * half-sent MULTI_SET of 32 MiB was parsed again from its start on every read: seconds of CPU); a
 * connection that has not sent VALIDATE within HANDSHAKE_S is dropped, and beyond MAX_PENDING such
 * connections the oldest goes; at MAX_CONNS new ones are closed at once; out of descriptors
 * (EMFILE), the oldest pending connection is dropped and the listening socket rests a moment
 * instead of waking the thread again at once (it spun at full CPU); the bytes buffered over all
 * connections are capped (IN_TOTAL_MAX). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctrain/tcpstore.h"
#include "ctrain/util.h"
#include "engine/store/auth.h"
#include "engine/store/wire.h"

struct entry {
    uint8_t *key, *val;
    size_t klen, vlen;
    struct entry *next;
};

/* Where the scan of the first pending query stands: its framing is walked once over all reads. */
struct frame {
    int started;         /* the header is read: vecs and tail are known */
    size_t off;          /* bytes of the query scanned */
    uint64_t vecs;       /* length-prefixed strings still to come */
    size_t tail;         /* fixed bytes after them (ADD's delta) */
};

struct conn {
    int fd;
    int validated;       /* its first query was VALIDATE with the magic number */
    int auth;            /* with a secret: 0 nothing yet, 1 AUTH_HELLO answered, 2 authenticated */
    uint8_t nonce_c[CT_TCPSTORE_NONCE], nonce_s[CT_TCPSTORE_NONCE];
    char peer[80];       /* "10.0.0.2:40112", for the log */
    int dead;
    double born;         /* ct_time_now() at accept: the handshake's deadline runs from here */
    struct frame fr;
    uint8_t *in;
    size_t in_len, in_cap;
    struct wbuf out;
    size_t out_off;      /* bytes of out already sent */
    uint8_t **wait_keys; /* keys its WAIT still waits for */
    size_t *wait_klen;
    int n_wait;
};

struct ct_tcpstore_server {
    int listen_fd[CT_TCPSTORE_MAX_LISTEN];
    int n_listen;
    int port;
    char listening[CT_TCPSTORE_MAX_LISTEN * (CT_TCPSTORE_ADDR_LEN + 2)];   /* "127.0.0.1, ::1" */
    int ctl[2];          /* writing a byte to ctl[1] stops the thread */
    pthread_t thread;
    int started;
    struct conn **conns;
    int n_conns, cap_conns;
    struct entry **table;
    size_t n_buckets, n_keys;
    size_t in_total;     /* input buffers' bytes over all connections */
    double listen_rest;  /* ct_time_now() until which the listening socket is not polled (EMFILE) */
    int rank;            /* the hosting rank, for the log */
    uint8_t *secret;     /* NULL: no authentication, PyTorch's protocol exactly */
    size_t secret_len;
    long drops_logged, drops_quiet;   /* clients dropped for want of authentication: lines, and since the last */
    double last_log;
};

#define HANDSHAKE_S 5.0                          /* VALIDATE is a client's first bytes: one round trip */
#define MAX_PENDING 256                          /* connections not validated yet */
#define MAX_CONNS 65536
#define IN_TOTAL_MAX (CT_TCPSTORE_MAX_VALUE + ((size_t)64 << 20))   /* one largest value, and room */
#define LISTEN_REST_S 0.1
#define DROP_LOG_FIRST 10                         /* then one line a minute at most: a scan cannot flood the log */
#define DROP_LOG_EVERY_S 60.0

/* Past the handshake: validated, and authenticated when the store has a secret. */
static int conn_ready(const struct ct_tcpstore_server *s, const struct conn *c)
{
    return c->validated && (!s->secret || c->auth == 2);
}

/* A client dropped for want of authentication: said on rank 0's stderr, with its address. */
static void auth_drop(struct ct_tcpstore_server *s, struct conn *c, const char *why)
{
    double now = ct_time_now();

    c->dead = 1;
    if (s->drops_logged >= DROP_LOG_FIRST && now - s->last_log < DROP_LOG_EVERY_S) {
        s->drops_quiet++;
        return;
    }
    if (s->drops_quiet)
        fprintf(stderr, "ctrain: rank %d: TCP store: dropped a client from %s: %s (and %ld more since the last such "
                "line)\n", s->rank, c->peer, why, s->drops_quiet);
    else
        fprintf(stderr, "ctrain: rank %d: TCP store: dropped a client from %s: %s\n", s->rank, c->peer, why);
    s->drops_logged++;
    s->drops_quiet = 0;
    s->last_log = now;
}

/* ---------------------------------------------------------------- the table */

static size_t key_hash(const uint8_t *k, size_t n)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ k[i]) * 1099511628211ull;
    return (size_t)h;
}

static struct entry **slot_of(struct ct_tcpstore_server *s, const uint8_t *k, size_t n)
{
    struct entry **e = &s->table[key_hash(k, n) % s->n_buckets];
    while (*e && ((*e)->klen != n || memcmp((*e)->key, k, n)))
        e = &(*e)->next;
    return e;
}

static struct entry *kv_find(struct ct_tcpstore_server *s, const uint8_t *k, size_t n)
{
    return *slot_of(s, k, n);
}

static void kv_grow(struct ct_tcpstore_server *s)
{
    size_t nb = s->n_buckets * 2;
    struct entry **t = calloc(nb, sizeof(*t));
    if (!t)
        return;   /* longer chains, still correct */
    for (size_t i = 0; i < s->n_buckets; i++) {
        for (struct entry *e = s->table[i], *next; e; e = next) {
            next = e->next;
            size_t h = key_hash(e->key, e->klen) % nb;
            e->next = t[h];
            t[h] = e;
        }
    }
    free(s->table);
    s->table = t;
    s->n_buckets = nb;
}

/* Replace (or with append, extend) key's value; -1 out of memory. */
static int kv_put(struct ct_tcpstore_server *s, const uint8_t *k, size_t kn, const uint8_t *v, size_t vn,
                  int append)
{
    struct entry **slot = slot_of(s, k, kn), *e = *slot;
    uint8_t *val;

    if (e && append) {
        val = realloc(e->val, e->vlen + vn + 1);
        if (!val)
            return -1;
        memcpy(val + e->vlen, v, vn);
        e->val = val;
        e->vlen += vn;
        return 0;
    }
    val = malloc(vn + 1);
    if (!val)
        return -1;
    memcpy(val, v, vn);
    if (e) {
        free(e->val);
        e->val = val;
        e->vlen = vn;
        return 0;
    }
    e = calloc(1, sizeof(*e));
    if (!e || !(e->key = malloc(kn + 1))) {
        free(e);
        free(val);
        return -1;
    }
    memcpy(e->key, k, kn);
    e->klen = kn;
    e->val = val;
    e->vlen = vn;
    *slot = e;
    if (++s->n_keys > s->n_buckets * 2)
        kv_grow(s);
    return 0;
}

static int kv_delete(struct ct_tcpstore_server *s, const uint8_t *k, size_t n)
{
    struct entry **slot = slot_of(s, k, n), *e = *slot;
    if (!e)
        return 0;
    *slot = e->next;
    free(e->key);
    free(e->val);
    free(e);
    s->n_keys--;
    return 1;
}

/* ---------------------------------------------------------------- waiting clients */

static void conn_wait_clear(struct conn *c)
{
    for (int i = 0; i < c->n_wait; i++)
        free(c->wait_keys[i]);
    free(c->wait_keys);
    free(c->wait_klen);
    c->wait_keys = NULL;
    c->wait_klen = NULL;
    c->n_wait = 0;
}

/* key was set: each connection waiting for it has one key fewer to wait for; at none, it is told
 * STOP_WAITING (0). */
static void wake_waiters(struct ct_tcpstore_server *s, const uint8_t *k, size_t n)
{
    for (int i = 0; i < s->n_conns; i++) {
        struct conn *c = s->conns[i];
        int had = c->n_wait, j = 0;
        for (int w = 0; w < c->n_wait; w++) {
            if (c->wait_klen[w] == n && !memcmp(c->wait_keys[w], k, n)) {
                free(c->wait_keys[w]);
                continue;
            }
            c->wait_keys[j] = c->wait_keys[w];
            c->wait_klen[j++] = c->wait_klen[w];
        }
        c->n_wait = j;
        if (had && !j) {
            conn_wait_clear(c);
            wbuf_u8(&c->out, 0);
        }
    }
}

/* ---------------------------------------------------------------- queries */

static void conn_flush(struct conn *c);

/* Reading a query's keys (CHECK, WAIT, MULTI_GET): a uint64 count, then the strings. */
static int read_keys(struct rbuf *r, const uint8_t ***keys, size_t **lens, uint64_t *n)
{
    if (rbuf_take(r, n, 8))
        return -1;
    if (*n > CT_TCPSTORE_MAX_VALUE / 8) {
        r->bad = 1;
        return -1;
    }
    *keys = calloc(*n ? *n : 1, sizeof(**keys));
    *lens = calloc(*n ? *n : 1, sizeof(**lens));
    if (!*keys || !*lens)
        return -1;
    for (uint64_t i = 0; i < *n; i++)
        if (rbuf_vec(r, &(*keys)[i], &(*lens)[i]))
            return -1;
    return 0;
}

static int all_exist(struct ct_tcpstore_server *s, const uint8_t **keys, const size_t *lens, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!kv_find(s, keys[i], lens[i]))
            return 0;
    return 1;
}

static int q_wait(struct ct_tcpstore_server *s, struct conn *c, const uint8_t **keys, const size_t *lens,
                  uint64_t n)
{
    if (all_exist(s, keys, lens, n)) {
        wbuf_u8(&c->out, 0);
        return 0;
    }
    conn_wait_clear(c);
    c->wait_keys = calloc(n, sizeof(*c->wait_keys));
    c->wait_klen = calloc(n, sizeof(*c->wait_klen));
    if (!c->wait_keys || !c->wait_klen)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        if (kv_find(s, keys[i], lens[i]))
            continue;
        if (!(c->wait_keys[c->n_wait] = malloc(lens[i] + 1)))
            return -1;
        memcpy(c->wait_keys[c->n_wait], keys[i], lens[i]);
        c->wait_klen[c->n_wait++] = lens[i];
    }
    return 0;
}

/* CHECK, WAIT and MULTI_GET: the queries over a list of keys. */
static int q_keys(struct ct_tcpstore_server *s, struct conn *c, struct rbuf *r, uint8_t type)
{
    const uint8_t **keys = NULL;
    size_t *lens = NULL;
    uint64_t n = 0;
    int rc = -1;

    if (read_keys(r, &keys, &lens, &n))
        goto fail;
    if (type == CT_TCPSTORE_CHECK) {
        wbuf_u8(&c->out, all_exist(s, keys, lens, n) ? 0 : 1);
    } else if (type == CT_TCPSTORE_WAIT) {
        if (q_wait(s, c, keys, lens, n))
            goto fail;
    } else {
        /* PyTorch's client waits for the keys first; a missing one drops the connection there too. */
        if (!all_exist(s, keys, lens, n))
            goto fail;
        for (uint64_t i = 0; i < n; i++) {
            struct entry *e = kv_find(s, keys[i], lens[i]);
            wbuf_vec(&c->out, e->val, e->vlen);
        }
    }
    rc = 0;
fail:
    free(keys);
    free(lens);
    return rc;
}

static int q_compare_set(struct ct_tcpstore_server *s, struct conn *c, const uint8_t *k, size_t kn,
                         const uint8_t *cur, size_t cn, const uint8_t *want, size_t wn)
{
    struct entry *e = kv_find(s, k, kn);

    if (!e) {
        /* As PyTorch: a missing key is set only when the expected value is empty, and the reply
         * is then the new value, else the expected one. */
        if (cn)
            wbuf_vec(&c->out, cur, cn);
        else if (kv_put(s, k, kn, want, wn, 0))
            return -1;
        else
            wbuf_vec(&c->out, want, wn);
        return 0;
    }
    if (e->vlen == cn && !memcmp(e->val, cur, cn) && kv_put(s, k, kn, want, wn, 0))
        return -1;
    e = kv_find(s, k, kn);
    wbuf_vec(&c->out, e->val, e->vlen);
    return 0;
}

/* ADD: the value is a decimal integer as text (what PyTorch's std::stoll reads). */
static int q_add(struct ct_tcpstore_server *s, struct conn *c, const uint8_t *k, size_t kn, int64_t delta)
{
    struct entry *e = kv_find(s, k, kn);
    char text[32];
    int64_t v = delta;

    if (e) {
        char num[32], *end;
        if (e->vlen == 0 || e->vlen >= sizeof(num))
            return -1;
        memcpy(num, e->val, e->vlen);
        num[e->vlen] = '\0';
        errno = 0;
        long long old = strtoll(num, &end, 10);
        if (end == num || errno)
            return -1;
        v = (int64_t)((uint64_t)old + (uint64_t)delta);
    }
    int len = snprintf(text, sizeof(text), "%lld", (long long)v);
    if (kv_put(s, k, kn, (const uint8_t *)text, (size_t)len, 0))
        return -1;
    wbuf_put(&c->out, &v, 8);
    wake_waiters(s, k, kn);
    return 0;
}

static int q_multi_set(struct ct_tcpstore_server *s, struct rbuf *r)
{
    uint64_t n = 0;
    size_t start;

    if (rbuf_take(r, &n, 8))
        return -1;
    /* The whole query must be here before any key is set: a pass to check, one to apply. */
    start = r->off;
    for (int pass = 0; pass < 2; pass++) {
        r->off = start;
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *k, *v;
            size_t kn, vn;
            if (rbuf_vec(r, &k, &kn) || rbuf_vec(r, &v, &vn))
                return -1;
            if (pass == 1) {
                if (kv_put(s, k, kn, v, vn, 0))
                    return -1;
                wake_waiters(s, k, kn);
            }
        }
    }
    return 0;
}

/* The queries with one key first. */
static int q_one_key(struct ct_tcpstore_server *s, struct conn *c, struct rbuf *r, uint8_t type)
{
    const uint8_t *k, *v, *w;
    size_t kn, vn, wn;
    int64_t delta = 0;

    if (rbuf_vec(r, &k, &kn))
        return -1;
    switch (type) {
    case CT_TCPSTORE_SET:
    case CT_TCPSTORE_APPEND:
        if (rbuf_vec(r, &v, &vn) || kv_put(s, k, kn, v, vn, type == CT_TCPSTORE_APPEND))
            return -1;
        wake_waiters(s, k, kn);
        return 0;
    case CT_TCPSTORE_COMPARE_SET:
        if (rbuf_vec(r, &v, &vn) || rbuf_vec(r, &w, &wn))
            return -1;
        return q_compare_set(s, c, k, kn, v, vn, w, wn);
    case CT_TCPSTORE_GET: {
        struct entry *e = kv_find(s, k, kn);
        if (!e)
            return -1;   /* as PyTorch: the client waits first; a GET of nothing ends it */
        wbuf_vec(&c->out, e->val, e->vlen);
        return 0;
    }
    case CT_TCPSTORE_ADD:
        if (rbuf_take(r, &delta, 8))
            return -1;
        return q_add(s, c, k, kn, delta);
    default: {   /* DELETE_KEY */
        int64_t n = kv_delete(s, k, kn);
        wbuf_put(&c->out, &n, 8);
        return 0;
    }
    }
}

/* The store has a secret and c has not proven it yet: AUTH_HELLO, then AUTH_PROOF (auth.h); any
 * other query drops it, with the reason logged. */
static int q_auth(struct ct_tcpstore_server *s, struct conn *c, struct rbuf *r, uint8_t type)
{
    uint8_t mac[CT_TCPSTORE_MAC], proof[CT_TCPSTORE_MAC];

    if (type == CT_TCPSTORE_AUTH_HELLO && c->auth == 0) {
        if (rbuf_take(r, c->nonce_c, CT_TCPSTORE_NONCE) || ct_store_auth_random(c->nonce_s, CT_TCPSTORE_NONCE) ||
            ct_store_auth_mac(s->secret, s->secret_len, "server", c->nonce_c, c->nonce_s, mac))
            return -1;
        wbuf_put(&c->out, c->nonce_s, CT_TCPSTORE_NONCE);
        wbuf_put(&c->out, mac, CT_TCPSTORE_MAC);
        c->auth = 1;
        return 0;
    }
    if (type == CT_TCPSTORE_AUTH_PROOF && c->auth == 1) {
        if (rbuf_take(r, proof, CT_TCPSTORE_MAC) ||
            ct_store_auth_mac(s->secret, s->secret_len, "client", c->nonce_s, c->nonce_c, mac))
            return -1;
        if (!ct_store_auth_equal(proof, mac)) {
            wbuf_u8(&c->out, 1);
            conn_flush(c);   /* the refusal first: the client can say why */
            auth_drop(s, c, "its proof does not match this store's secret (another --store-secret-file?)");
            return -1;
        }
        c->auth = 2;
        wbuf_u8(&c->out, 0);
        return 0;
    }
    auth_drop(s, c, type == CT_TCPSTORE_AUTH_HELLO || type == CT_TCPSTORE_AUTH_PROOF
                        ? "its authentication came out of order"
                        : "it sent a query before authenticating (a client without the store's secret: "
                          "--store-secret-file)");
    return -1;
}

/* One query from r: 0 done (r->off past it), -1 with r->short_ (wait for more bytes) or not
 * (drop the connection: malformed, unknown, or what PyTorch's server throws on). */
static int query(struct ct_tcpstore_server *s, struct conn *c, struct rbuf *r)
{
    uint8_t type = 0;
    uint32_t u32 = 0;

    if (rbuf_take(r, &type, 1))
        return -1;
    if (!c->validated) {
        /* PyTorch drops a connection whose first query is not a valid VALIDATE. */
        if (type != CT_TCPSTORE_VALIDATE || rbuf_take(r, &u32, 4) || u32 != CT_TCPSTORE_MAGIC)
            return -1;
        c->validated = 1;
        return 0;
    }
    if (s->secret && c->auth != 2)
        return q_auth(s, c, r, type);
    switch (type) {
    case CT_TCPSTORE_VALIDATE:
        return rbuf_take(r, &u32, 4) || u32 != CT_TCPSTORE_MAGIC ? -1 : 0;
    case CT_TCPSTORE_PING:
        if (rbuf_take(r, &u32, 4))
            return -1;
        wbuf_u32(&c->out, u32);
        return 0;
    case CT_TCPSTORE_SET: case CT_TCPSTORE_COMPARE_SET: case CT_TCPSTORE_GET:
    case CT_TCPSTORE_ADD: case CT_TCPSTORE_DELETE_KEY: case CT_TCPSTORE_APPEND:
        return q_one_key(s, c, r, type);
    case CT_TCPSTORE_CHECK: case CT_TCPSTORE_WAIT: case CT_TCPSTORE_MULTI_GET:
        return q_keys(s, c, r, type);
    case CT_TCPSTORE_MULTI_SET:
        return q_multi_set(s, r);
    case CT_TCPSTORE_GETNUMKEYS: {
        int64_t n = (int64_t)s->n_keys;
        wbuf_put(&c->out, &n, 8);
        return 0;
    }
    case CT_TCPSTORE_CANCEL_WAIT:
        conn_wait_clear(c);
        wbuf_u8(&c->out, 1);   /* WAIT_CANCELED */
        return 0;
    default:
        return -1;
    }
}

/* ---------------------------------------------------------------- connections */

static void conn_free(struct conn *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    conn_wait_clear(c);
    free(c->in);
    free(c->out.p);
    free(c);
}

static void conn_flush(struct conn *c)
{
    while (!c->dead && c->out_off < c->out.len) {
        ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            c->dead = 1;
            return;
        }
        c->out_off += (size_t)n;
    }
    if (c->out_off == c->out.len)
        c->out.len = c->out_off = 0;
}

/* The framing of the query at p (len bytes so far), from where f stands: 1 and *qlen when it is
 * whole, 0 when more bytes must come, -1 when it is malformed (unknown type, a count or a length
 * past the bound). Each byte is looked at once, however the query is split over reads. */
static int frame_scan(struct frame *f, const uint8_t *p, size_t len, int auth, size_t *qlen)
{
    if (!f->started) {
        size_t head = 1;
        uint64_t n = 0, per = 0;

        if (len < 1)
            return 0;
        switch (p[0]) {
        case CT_TCPSTORE_VALIDATE: case CT_TCPSTORE_PING:     head = 5; break;
        case CT_TCPSTORE_GETNUMKEYS: case CT_TCPSTORE_CANCEL_WAIT: break;
        case CT_TCPSTORE_GET: case CT_TCPSTORE_DELETE_KEY:   f->vecs = 1; break;
        case CT_TCPSTORE_SET: case CT_TCPSTORE_APPEND:       f->vecs = 2; break;
        case CT_TCPSTORE_COMPARE_SET:                        f->vecs = 3; break;
        case CT_TCPSTORE_ADD:                                f->vecs = 1, f->tail = 8; break;
        case CT_TCPSTORE_CHECK: case CT_TCPSTORE_WAIT: case CT_TCPSTORE_MULTI_GET: head = 9, per = 1; break;
        case CT_TCPSTORE_MULTI_SET:                          head = 9, per = 2; break;
        case CT_TCPSTORE_AUTH_HELLO: case CT_TCPSTORE_AUTH_PROOF:
            if (!auth)
                return -1;   /* a store without a secret knows PyTorch's queries only */
            head = 1 + CT_TCPSTORE_NONCE;
            break;
        default:
            return -1;
        }
        if (len < head) {
            f->vecs = f->tail = 0;
            return 0;
        }
        if (per) {
            memcpy(&n, p + 1, 8);
            if (n > CT_TCPSTORE_MAX_VALUE / 8)
                return -1;
            f->vecs = n * per;
        }
        f->off = head;
        f->started = 1;
    }
    while (f->vecs) {
        uint64_t l;

        if (len - f->off < 8)
            return 0;
        memcpy(&l, p + f->off, 8);
        if (l > CT_TCPSTORE_MAX_VALUE)
            return -1;
        if (len - f->off - 8 < l)
            return 0;
        f->off += 8 + (size_t)l;
        f->vecs--;
    }
    if (len - f->off < f->tail)
        return 0;
    *qlen = f->off + f->tail;
    memset(f, 0, sizeof(*f));
    return 1;
}

/* Run every whole query in the input; keep the rest for the next read. */
static void conn_run(struct ct_tcpstore_server *s, struct conn *c)
{
    size_t used = 0, qlen = 0;

    while (!c->dead && used < c->in_len) {
        struct rbuf r = { .p = c->in + used };
        int whole;

        /* PyTorch drops a connection whose first query is not VALIDATE: at its first byte here. */
        if (!c->validated && c->in[used] != CT_TCPSTORE_VALIDATE) {
            c->dead = 1;
            break;
        }
        if ((whole = frame_scan(&c->fr, c->in + used, c->in_len - used, s->secret != NULL, &qlen)) <= 0) {
            if (whole < 0)
                c->dead = 1;
            break;
        }
        r.len = qlen;
        if (query(s, c, &r) || r.off != qlen) {
            c->dead = 1;
            break;
        }
        used += qlen;
    }
    if (c->out.oom)
        c->dead = 1;
    if (used) {
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len -= used;
    }
}

static void conn_read(struct ct_tcpstore_server *s, struct conn *c)
{
    int eof = 0;

    while (!eof) {
        if (c->in_cap - c->in_len < 65536) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
            uint8_t *p;
            /* A single query is at most a few values of CT_TCPSTORE_MAX_VALUE; all connections'
             * buffers together at most IN_TOTAL_MAX (a client that would pass it is dropped). */
            if (cap > 4 * CT_TCPSTORE_MAX_VALUE || s->in_total - c->in_cap + cap > IN_TOTAL_MAX ||
                !(p = realloc(c->in, cap))) {
                c->dead = 1;
                return;
            }
            s->in_total += cap - c->in_cap;
            c->in = p;
            c->in_cap = cap;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0)
            eof = 1;   /* the peer closed (or failed) */
        else
            c->in_len += (size_t)n;
    }
    /* What came before the end still counts: a client's last SET, then close, is a common end. */
    conn_run(s, c);
    if (eof)
        c->dead = 1;   /* its waits go with it */
}

/* "10.0.0.2:40112", "[fd00::2]:40112" */
static void peer_text(const struct sockaddr_storage *ss, socklen_t len, char *buf, size_t size)
{
    char host[64] = "?", port[16] = "?";

    (void)getnameinfo((const struct sockaddr *)ss, len, host, sizeof(host), port, sizeof(port),
                      NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(buf, size, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
}

/* Drop the connection that has waited longest without validating; 0 when there is none. */
static int drop_oldest_pending(struct ct_tcpstore_server *s)
{
    struct conn *old = NULL;

    for (int i = 0; i < s->n_conns; i++)
        if (!conn_ready(s, s->conns[i]) && !s->conns[i]->dead && (!old || s->conns[i]->born < old->born))
            old = s->conns[i];
    if (!old)
        return 0;
    old->dead = 1;
    close(old->fd);   /* its descriptor now: the accept that failed for want of one may succeed */
    old->fd = -1;
    return 1;
}

static int pending(const struct ct_tcpstore_server *s)
{
    int n = 0;

    for (int i = 0; i < s->n_conns; i++)
        n += !conn_ready(s, s->conns[i]) && !s->conns[i]->dead;
    return n;
}

static void srv_accept(struct ct_tcpstore_server *s, int listen_fd)
{
    for (;;) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        int fd = accept4(listen_fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of descriptors or memory: the connection stays queued and the socket readable,
             * so polling it again at once would spin. Make room and rest. */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                drop_oldest_pending(s);
                s->listen_rest = ct_time_now() + LISTEN_REST_S;
            }
            return;
        }
        if (s->n_conns >= MAX_CONNS) {
            close(fd);
            continue;
        }
        if (pending(s) >= MAX_PENDING)
            drop_oldest_pending(s);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (s->n_conns == s->cap_conns) {
            int cap = s->cap_conns ? s->cap_conns * 2 : 16;
            struct conn **p = realloc(s->conns, (size_t)cap * sizeof(*p));
            if (!p) {
                close(fd);
                continue;
            }
            s->conns = p;
            s->cap_conns = cap;
        }
        struct conn *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->born = ct_time_now();
        peer_text(&peer, plen, c->peer, sizeof(c->peer));
        s->conns[s->n_conns++] = c;
    }
}

/* Connections past their handshake's deadline are dropped; the milliseconds until the next
 * deadline (or the listening socket's rest) ends, -1 when none is pending. */
static int srv_deadlines(struct ct_tcpstore_server *s)
{
    double now = ct_time_now(), next = -1;

    for (int i = 0; i < s->n_conns; i++) {
        struct conn *c = s->conns[i];

        if (conn_ready(s, c) || c->dead)
            continue;
        if (now >= c->born + HANDSHAKE_S) {
            if (s->secret)
                auth_drop(s, c, "it did not authenticate within the handshake's 5 s");
            c->dead = 1;
        }
        else if (next < 0 || c->born + HANDSHAKE_S < next)
            next = c->born + HANDSHAKE_S;
    }
    if (s->listen_rest > now && (next < 0 || s->listen_rest < next))
        next = s->listen_rest;
    return next < 0 ? -1 : (int)((next - now) * 1000) + 1;
}

static void srv_reap(struct ct_tcpstore_server *s)
{
    int j = 0;
    for (int i = 0; i < s->n_conns; i++) {
        if (s->conns[i]->dead) {
            s->in_total -= s->conns[i]->in_cap;
            conn_free(s->conns[i]);
        } else {
            s->conns[j++] = s->conns[i];
        }
    }
    s->n_conns = j;
}

static void *srv_main(void *arg)
{
    struct ct_tcpstore_server *s = arg;
    struct pollfd *fds = NULL;
    int cap = 0;

    for (;;) {
        int base = 1 + s->n_listen, n = s->n_conns + base, timeout;
        if (n > cap) {
            struct pollfd *p = realloc(fds, (size_t)n * sizeof(*p));
            if (!p) {
                usleep(10000);   /* try again: the store must not vanish while ranks use it */
                continue;
            }
            fds = p;
            cap = n;
        }
        timeout = srv_deadlines(s);
        srv_reap(s);
        n = s->n_conns + base;
        fds[0] = (struct pollfd){ .fd = s->ctl[0], .events = POLLIN };
        /* A negative descriptor is not polled: the listening sockets rest after EMFILE. */
        for (int l = 0; l < s->n_listen; l++)
            fds[1 + l] = (struct pollfd){ .fd = s->listen_rest > ct_time_now() ? -1 : s->listen_fd[l],
                                          .events = POLLIN };
        for (int i = 0; i < s->n_conns; i++)
            fds[i + base] = (struct pollfd){ .fd = s->conns[i]->fd,
                                             .events = POLLIN | (s->conns[i]->out.len ? POLLOUT : 0) };
        if (poll(fds, (nfds_t)n, timeout) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[0].revents)
            break;
        /* Connections first (their indices are this poll's), then new ones. */
        for (int i = 0; i < n - base; i++) {
            struct conn *c = s->conns[i];
            if (fds[i + base].revents & (POLLIN | POLLHUP | POLLERR))
                conn_read(s, c);
        }
        for (int i = 0; i < s->n_conns; i++)
            conn_flush(s->conns[i]);
        srv_reap(s);
        for (int l = 0; l < s->n_listen; l++)
            if (fds[1 + l].fd >= 0 && (fds[1 + l].revents & POLLIN))
                srv_accept(s, s->listen_fd[l]);
    }
    free(fds);
    return NULL;
}

/* ---------------------------------------------------------------- start and stop */

static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (getsockname(fd, (struct sockaddr *)&ss, &len))
        return -1;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

/* A listening socket on ss (its port set): 0, or -1 with *err_no. */
static int listen_one(const struct sockaddr_storage *ss, socklen_t len, int *fd_out, int *err_no)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;

    if (fd < 0)
        goto fail;
    if (ss->ss_family == AF_INET6) {
        /* Every interface: IPv4 too through mapped addresses (as PyTorch's master); one address:
         * that address only. */
        int v6only = IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr) ? 0 : 1;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)ss, len) || listen(fd, 1024))
        goto fail;
    *fd_out = fd;
    return 0;
fail:
    *err_no = errno;
    if (fd >= 0)
        close(fd);
    return -1;
}

static void set_port(struct sockaddr_storage *ss, int port)
{
    if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

/* Every interface, IPv6 and IPv4 where the host has IPv6 (as PyTorch's master), else IPv4. */
static int listen_all(struct ct_tcpstore_server *s, int port, int *err_no)
{
    struct sockaddr_storage ss = { 0 };
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;

    a6->sin6_family = AF_INET6;
    a6->sin6_addr = in6addr_any;
    set_port(&ss, port);
    if (!listen_one(&ss, sizeof(*a6), &s->listen_fd[0], err_no))
        return s->n_listen = 1, 0;
    if (*err_no != EAFNOSUPPORT)
        return -1;
    memset(&ss, 0, sizeof(ss));
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_ANY);
    set_port(&ss, port);
    if (listen_one(&ss, sizeof(*a4), &s->listen_fd[0], err_no))
        return -1;
    s->n_listen = 1;
    return 0;
}

/* The plan's addresses, all on one port (the first's, when port is 0); *bad the one that failed. */
static int listen_on(struct ct_tcpstore_server *s, const ct_tcpstore_bind *b, int port, int *err_no, const char **bad)
{
    for (int i = 0; i < b->n; i++) {
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_NUMERICHOST | AI_PASSIVE }, *ai = NULL;
        struct sockaddr_storage ss = { 0 };
        socklen_t len;
        int fd;

        if (getaddrinfo(b->addr[i], NULL, &hints, &ai) || !ai || ai->ai_addrlen > sizeof(ss)) {
            if (ai)
                freeaddrinfo(ai);
            *err_no = EINVAL;
            *bad = b->addr[i];
            return -1;
        }
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        len = ai->ai_addrlen;
        freeaddrinfo(ai);
        set_port(&ss, port);
        if (listen_one(&ss, len, &fd, err_no)) {
            if (b->optional && *err_no == EADDRNOTAVAIL)
                continue;   /* an interface's address not usable now (IPv6 still tentative) */
            *bad = b->addr[i];
            return -1;
        }
        s->listen_fd[s->n_listen++] = fd;
        if (!port)
            port = bound_port(fd);
        size_t used = strlen(s->listening);
        snprintf(s->listening + used, sizeof(s->listening) - used, "%s%s", used ? ", " : "", b->addr[i]);
    }
    if (!s->n_listen) {
        *err_no = EADDRNOTAVAIL;
        *bad = b->n ? b->addr[0] : "(none)";
        return -1;
    }
    return 0;
}

static int start_failed(int rank, int port, int e, const char *bad, ct_error *err)
{
    if (e == EADDRNOTAVAIL || (bad && e == EINVAL)) {
        ct_error_set(err, CT_EINVAL, "store-listen", "rank %d: cannot host the TCP store at %s: %s", rank, bad,
                     e == EINVAL ? "not a numeric address" : "not an address of this host");
        return ct_error_hint(err, "set MASTER_ADDR to this host's name or address (rank 0's), or choose the addresses "
                             "with --store-bind ADDR[,ADDR] (or all)");
    }
    ct_error_set(err, e == EADDRINUSE ? CT_ECONFLICT : CT_ECOMM, "store-listen",
                 "rank %d: cannot host the TCP store on port %d%s%s: %s", rank, port, bad ? " at " : "",
                 bad ? bad : "", strerror(e));
    return ct_error_hint(err, e == EADDRINUSE ? "another process listens there: set MASTER_PORT to a free port"
                                              : "check MASTER_PORT and that this host may listen on it");
}

int ct_tcpstore_server_start_on(const ct_tcpstore_bind *bind, const void *secret, size_t secret_len, int port,
                                int rank, ct_tcpstore_server **out, ct_error *err)
{
    struct ct_tcpstore_server *s;
    const char *bad = NULL;
    int e = 0, rc;

    *out = NULL;
    if (port < 0 || port > 65535) {
        rc = ct_error_set(err, CT_EINVAL, "store-port", "rank %d: MASTER_PORT %d is not a TCP port", rank, port);
        ct_error_hint(err, "give a port from 1 to 65535");
        return rc;
    }
    if (!(s = calloc(1, sizeof(*s))) || !(s->table = calloc(64, sizeof(*s->table)))) {
        free(s);
        return ct_error_set(err, CT_ENOMEM, NULL, "rank %d: out of memory for the TCP store", rank);
    }
    s->n_buckets = 64;
    s->ctl[0] = s->ctl[1] = -1;
    s->rank = rank;
    if (secret && !ct_store_auth_available()) {
        rc = ct_error_set(err, CT_ENOTAVAIL, "store-secret", "rank %d: a TCP store secret was given, but this ctrain "
                          "was built without libcrypto", rank);
        ct_error_hint(err, "install libssl-dev (scripts/install-deps) and rebuild, or run without --store-secret-file");
        goto fail;
    }
    if (secret) {
        if (!(s->secret = malloc(secret_len ? secret_len : 1))) {
            rc = ct_error_set(err, CT_ENOMEM, NULL, "rank %d: out of memory for the TCP store", rank);
            goto fail;
        }
        memcpy(s->secret, secret, secret_len);
        s->secret_len = secret_len;
    }
    if (!bind || bind->all) {
        snprintf(s->listening, sizeof(s->listening), "every interface");
        if (listen_all(s, port, &e)) {
            rc = start_failed(rank, port, e, NULL, err);
            goto fail;
        }
    } else if (listen_on(s, bind, port, &e, &bad)) {
        rc = start_failed(rank, port, e, bad, err);
        goto fail;
    }
    s->port = bound_port(s->listen_fd[0]);
    if (pipe2(s->ctl, O_CLOEXEC)) {
        rc = ct_error_set(err, CT_ECOMM, NULL, "rank %d: TCP store: pipe: %s", rank, strerror(errno));
        goto fail;
    }
    if ((e = pthread_create(&s->thread, NULL, srv_main, s))) {
        rc = ct_error_set(err, CT_ECOMM, NULL, "rank %d: TCP store: cannot start its thread: %s", rank, strerror(e));
        goto fail;
    }
    s->started = 1;
    *out = s;
    return 0;
fail:
    ct_tcpstore_server_stop(s);
    return rc;
}

int ct_tcpstore_server_start(int port, int rank, ct_tcpstore_server **out, ct_error *err)
{
    return ct_tcpstore_server_start_on(NULL, NULL, 0, port, rank, out, err);
}

const char *ct_tcpstore_server_listening(const ct_tcpstore_server *srv)
{
    return srv ? srv->listening : "";
}

int ct_tcpstore_server_port(const ct_tcpstore_server *srv)
{
    return srv->port;
}

void ct_tcpstore_server_stop(ct_tcpstore_server *s)
{
    if (!s)
        return;
    if (s->started) {
        ssize_t w;
        do
            w = write(s->ctl[1], "", 1);
        while (w < 0 && errno == EINTR);
        pthread_join(s->thread, NULL);
    }
    for (int i = 0; i < s->n_conns; i++)
        conn_free(s->conns[i]);
    free(s->conns);
    for (size_t i = 0; s->table && i < s->n_buckets; i++) {
        for (struct entry *e = s->table[i], *next; e; e = next) {
            next = e->next;
            free(e->key);
            free(e->val);
            free(e);
        }
    }
    free(s->table);
    if (s->secret)
        explicit_bzero(s->secret, s->secret_len);
    free(s->secret);
    for (int l = 0; l < s->n_listen; l++)
        close(s->listen_fd[l]);
    if (s->ctl[0] >= 0)
        close(s->ctl[0]);
    if (s->ctl[1] >= 0)
        close(s->ctl[1]);
    free(s);
}
