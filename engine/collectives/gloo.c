/* SPDX-License-Identifier: BSD-3-Clause */
/* The gloo component: ranks without a PMIx server (torchrun, Kubeflow, processes started by hand)
 * meet in a TCPStore at MASTER_ADDR:MASTER_PORT, as PyTorch's env:// rendezvous, and gloo (PyTorch's
 * CPU collectives library, gloo_lib.cc behind a C interface) runs the collectives. gloo's collectives
 * block, so (as PyTorch's ProcessGroupGloo) they run on a worker thread that owns the gloo context,
 * in the order they started, while the caller computes (threaded=0: no thread, each runs in its
 * start). Its context's timeout (--collective-timeout) bounds every one; a wait reports a failure on
 * the calling thread, where the roll call in the store names the missing ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/envs.h"
#include "ctrain/tcpstore.h"
#include "ctrain/util.h"
#include "engine/collectives/coll_impl.h"
#include "engine/collectives/gloo_lib.h"

struct gloo {
    struct ct_gloo *gloo;
    ct_tcpstore_server *store_srv;
    ct_tcpstore *store;
    double barrier;      /* the barrier's value (an allreduce of it) */
};

/* The store's keys of the roll call after a gloo timeout: every rank that timed out in collective
 * #seq sets its own; a rank that does not within the window is missing. Each rank's host is set
 * once at the start. */
static void roll_key(char *buf, size_t size, long seq, int rank) { snprintf(buf, size, "timeout/%ld/%d", seq, rank); }
static void host_key(char *buf, size_t size, int rank) { snprintf(buf, size, "host/%d", rank); }

/* This rank's host name in the store, for a timeout's message on the other ranks. */
static void publish_host(struct gloo *g, int rank)
{
    char key[32], name[CT_COLL_HOST] = "";
    ct_error ignored;

    if (ct_node_name(name, sizeof(name)) && !name[0])
        return;
    host_key(key, sizeof(key), rank);
    (void)ct_tcpstore_set(g->store, key, name, strlen(name), &ignored);
}

static int gloo_open(ct_coll *c, const struct ct_coll_setup *su, ct_error *err)
{
    double timeout = ct_coll_library_bound(c->timeout_s);
    const char *addr = c->env.main_address;
    int port = c->env.main_port, rc;
    struct ct_coll_store_setup st = { &c->env, c->rank, su->num_nodes, su->store_run_id ? su->store_run_id : "",
                                      su->store_bind ? su->store_bind : "",
                                      su->store_secret_file ? su->store_secret_file : "" };
    struct gloo *g;

#ifndef CT_HAVE_GLOO
    int nccl = !strcmp(su->backend, "nccl");

    ct_error_set(err, CT_ENOTAVAIL, "ddp-no-gloo", "%s: backend %s%s, but this ctrain was built without gloo%s",
                 c->strategy, nccl ? "nccl" : "gloo", c->why,
                 nccl ? " (which carries the host-side values where no PMIx server is)" : "");
    return ct_error_hint(err, "install libgloo-dev (scripts/install-deps) and rebuild, or launch with a PMIx "
                         "server (srun --mpi=pmix, mpirun) for backend=mpi");
#endif
    if (!addr[0] || port <= 0) {
        ct_error_set(err, CT_EINVAL, "ddp-gloo-address", "ddp (gloo): rank %d: no MASTER_ADDR/MASTER_PORT to meet "
                     "the other ranks at (cluster environment: %s)", c->rank, c->env_name);
        return ct_error_hint(err, ct_env_pmix_started(NULL, NULL) ? "a PMIx server started these ranks: use backend=mpi (or auto), "
                             "or set MASTER_ADDR and MASTER_PORT, the same on every rank"
                             : "set MASTER_ADDR and MASTER_PORT to rank 0's host and a free port on it, the same "
                             "on every rank");
    }
    if (!(g = calloc(1, sizeof(*g))))
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp (gloo): out of memory");
    c->impl = g;
    if ((rc = ct_coll_store_open(&st, timeout, &g->store_srv, &g->store, err)))
        return rc;
    if ((rc = ct_gloo_create(g->store, c->rank, c->size, timeout, su->threaded, &g->gloo, err))) {
        c->broken = 1;
        return rc;
    }
    publish_host(g, c->rank);
    return 0;
}

struct ct_tcpstore *ct_coll_store(const ct_coll *c)
{
    return c && c->ops == &ct_coll_gloo && c->impl ? ((const struct gloo *)c->impl)->store : NULL;
}

static struct ct_gloo *ctx(const ct_coll *c) { return ((const struct gloo *)c->impl)->gloo; }

/* gloo sums float and double; a type it cannot add is refused before anything starts. */
static long no_type(ct_coll *c, enum ct_coll_type t, ct_error *err)
{
    ct_error_set(err, CT_ENOTAVAIL, "ddp-dtype", "%s: backend gloo adds fp32 or fp64 only (asked %zu-byte elements)",
                 c->strategy, ct_coll_type_size(t));
    return ct_error_hint(err, "use backend=mpi under a PMIx server for bf16");
}

static long gloo_allreduce(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, ct_error *err)
{
    if (t != CT_COLL_F32 && t != CT_COLL_F64)
        return no_type(c, t, err);
    return ct_gloo_allreduce_start(ctx(c), buf, count, ct_coll_type_size(t));
}

static long gloo_broadcast(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, int root, ct_error *err)
{
    (void)err;
    return ct_gloo_broadcast_start(ctx(c), buf, count * ct_coll_type_size(t), root);
}

static long gloo_allgather(ct_coll *c, void *buf, const size_t *counts, enum ct_coll_type t, ct_error *err)
{
    (void)err;
    return ct_gloo_allgatherv_start(ctx(c), buf, counts, ct_coll_type_size(t));
}

static long gloo_reduce_scatter(ct_coll *c, const void *send, void *recv, size_t count, enum ct_coll_type t,
                                ct_error *err)
{
    if (t != CT_COLL_F32 && t != CT_COLL_F64)
        return no_type(c, t, err);
    return ct_gloo_reduce_scatter_start(ctx(c), send, recv, count, ct_coll_type_size(t));
}

/* gloo has no gatherv: every rank gathers the whole array (each has one to fill), its own part in
 * place. A checkpoint's cost, not a step's. */
static long gloo_gather(ct_coll *c, const void *mine, void *whole, const size_t *counts, enum ct_coll_type t, int root,
                        ct_error *err)
{
    size_t at = 0, esize = ct_coll_type_size(t);

    (void)root;
    (void)err;
    for (int r = 0; r < c->rank; r++)
        at += counts[r];
    memcpy((char *)whole + at * esize, mine, counts[c->rank] * esize);
    return ct_gloo_allgatherv_start(ctx(c), whole, counts, esize);
}

static long gloo_exchange(ct_coll *c, const struct ct_coll_msg *sends, int ns, const struct ct_coll_msg *recvs, int nr,
                          ct_error *err)
{
    struct ct_gloo_msg *m = calloc((size_t)(ns + nr) + 1, sizeof(*m));
    long ticket;

    if (!m)
        return ct_coll_failed(c, ct_error_set(err, CT_ENOMEM, NULL, "ddp (gloo): out of memory for an exchange"));
    for (int i = 0; i < ns + nr; i++) {
        const struct ct_coll_msg *g = i < ns ? &sends[i] : &recvs[i - ns];

        m[i] = (struct ct_gloo_msg){ g->buf, g->bytes, g->peer };
    }
    ticket = ct_gloo_exchange_start(ctx(c), m, ns, m + ns, nr); /* copies them */
    free(m);
    return ticket;
}

static long gloo_barrier(ct_coll *c, ct_error *err)
{
    struct gloo *g = c->impl;

    (void)err;
    g->barrier = 0;
    return ct_gloo_allreduce_start(g->gloo, &g->barrier, 1, sizeof(double));
}

static int gloo_sendrecv(ct_coll *c, const void *sendbuf, size_t send_bytes, int to, void *recvbuf, size_t recv_bytes,
                         int from, ct_error *err)
{
    int rc = ct_gloo_sendrecv(ctx(c), sendbuf, send_bytes, to, recvbuf, recv_bytes, from, err);

    if (rc)
        c->broken = 1;
    return rc;
}

/* Tickets count the collectives as MPI's waits do, the same on every rank: a timeout in one
 * finds who is missing in the roll call of its number. */
static long gloo_number(const ct_coll *c, long ticket)
{
    (void)c;
    return ticket;
}

static int gloo_wait(ct_coll *c, long ticket, const char *what, ct_error *err)
{
    long failed = ticket;
    int rc = ct_gloo_wait(ctx(c), ticket, &failed, err);

    (void)what;
    if (c->seq < (rc ? failed : ticket))
        c->seq = rc ? failed : ticket;
    return rc;
}

/* Where rank r runs, from the store, into c->hosts (allocated here: gloo has no MPI_Allgather of
 * the names at start, and asking only for the missing ranks costs nothing while all is well). */
static void store_host(ct_coll *c, struct gloo *g, int r)
{
    char key[32];
    const char *const keys[1] = { key };
    void *val = NULL;
    size_t len = 0;
    int ready = 0;
    ct_error ignored;

    if (!c->hosts && !(c->hosts = calloc((size_t)c->size, CT_COLL_HOST)))
        return;
    host_key(key, sizeof(key), r);
    if (ct_tcpstore_check(g->store, keys, 1, &ready, &ignored) == 0 && ready &&
        ct_tcpstore_get(g->store, key, &val, &len, &ignored) == 0)
        ct_str_copy(c->hosts + (size_t)r * CT_COLL_HOST, CT_COLL_HOST, val);
    free(val);
    if (!c->hosts[(size_t)r * CT_COLL_HOST])
        ct_str_copy(c->hosts + (size_t)r * CT_COLL_HOST, CT_COLL_HOST, "?");
}

/* After gloo timed out in collective #c->seq: answer the roll call in the store, wait for the others
 * for a window, and name those that never answered, with their hosts. The store may live in a
 * stopped rank 0 (it is rank 0's unless torchrun's agent hosts it): when it does not answer, rank 0
 * is named. */
static void gloo_find_missing(ct_coll *c, struct ct_coll_verdict *v)
{
    struct gloo *g = c->impl;
    double timeout = ct_coll_library_bound(c->timeout_s);
    double window = timeout < 1 ? 1 : timeout > 10 ? 10 : timeout, end;
    int ready = 0;
    char key[48];
    const char *const keys[1] = { key };
    ct_error ignored;

    v->timeout = timeout;
    ct_tcpstore_set_timeout(g->store, window);
    roll_key(key, sizeof(key), c->seq, c->rank);
    /* A set has no reply in PyTorch's protocol: the ping's says whether the store still serves. */
    if (ct_tcpstore_set(g->store, key, "1", 1, &ignored) != 0 || ct_tcpstore_ping(g->store, &ignored) != 0) {
        v->found = CT_COLL_ZERO_STORE_SILENT;
        v->total = 1;
        v->ranks[0] = 0;
        v->store = ct_tcpstore_address(g->store);
        return;
    }
    end = ct_time_now() + window;
    for (int r = 0; r < c->size; r++) {
        int rc = 0;

        roll_key(key, sizeof(key), c->seq, r);
        ready = r == c->rank;
        /* The window runs once for all: a rank that answered is seen at once. */
        while (!ready && (rc = ct_tcpstore_check(g->store, keys, 1, &ready, &ignored)) == 0 && !ready &&
               ct_time_now() < end)
            usleep(50 * 1000);
        if (rc != 0)
            break; /* the store stopped answering meanwhile: name those found so far */
        if (ready)
            continue;
        if (v->total < CT_COLL_MAX_NAMED)
            v->ranks[v->total] = r;
        v->total++;
    }
    v->found = v->total ? CT_COLL_MISSING : CT_COLL_NONE;
    for (int i = 0; i < v->total && i < CT_COLL_MAX_NAMED; i++)
        store_host(c, g, v->ranks[i]);
}

static long gloo_last(const ct_coll *c) { return ct_gloo_last(ctx(c)); }

static void gloo_close(ct_coll *c)
{
    struct gloo *g = c->impl;

    if (!g)
        return;
    ct_gloo_free(g->gloo);
    g->gloo = NULL;
    ct_tcpstore_close(g->store);
    g->store = NULL;
    ct_tcpstore_server_stop(g->store_srv);
    g->store_srv = NULL;
}

/* Without MPI there is nothing to abort: the other ranks' collective timeout ends them. */
static void gloo_destroy(ct_coll *c)
{
    gloo_close(c);
    free(c->impl);
    c->impl = NULL;
}

const struct ct_coll_ops ct_coll_gloo = {
    .name = "gloo",
    .sums = 1,
    .bf16 = 0,
    .open = gloo_open,
    .allreduce = gloo_allreduce,
    .broadcast = gloo_broadcast,
    .allgather = gloo_allgather,
    .reduce_scatter = gloo_reduce_scatter,
    .gather = gloo_gather,
    .exchange = gloo_exchange,
    .barrier = gloo_barrier,
    .sendrecv = gloo_sendrecv,
    .number = gloo_number,
    .wait = gloo_wait,
    .find_missing = gloo_find_missing,
    .last = gloo_last,
    .close = gloo_close,
    .destroy = gloo_destroy,
};
