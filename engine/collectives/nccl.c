/* SPDX-License-Identifier: BSD-3-Clause */
/* The nccl component: the model's arrays in device memory (cuda), moved by NCCL (nccl_lib.c: one
 * communicator bootstrapped through PMIx, or through gloo's TCPStore where no PMIx server started
 * the ranks). It carries the gradient buckets and the initial broadcast; the small host-side values
 * (metrics, the stop agreement, barriers) go over the host library beside it (mpi or gloo, the
 * handle's host). An allreduce averages (ncclAvg). NCCL's own deadline bounds each wait: a dead or
 * stuck peer ends in a clear error and ncclCommAbort; there is no roll call.
 *
 * Status: compiled against the CUDA toolkit's headers, not yet run on a GPU. */
#include <stdlib.h>

#include "engine/collectives/coll_impl.h"
#include "engine/collectives/nccl_lib.h"

struct nccl {
    ct_nccl *nccl;
    long started;
};

static ct_nccl *comm(const ct_coll *c) { return ((const struct nccl *)c->impl)->nccl; }

static int nccl_open(ct_coll *c, const struct ct_coll_setup *su, ct_error *err)
{
    struct nccl *n = calloc(1, sizeof(*n));

    (void)su;
    if (!n)
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp (nccl): out of memory");
    c->impl = n;
    /* --collective-timeout bounds NCCL's waits too (0 means wait forever: keep a library bound).
     * Without a PMIx server the id travels through the host library's store (gloo's). */
    return ct_nccl_create(c->rank, c->size, ct_coll_library_bound(c->timeout_s), ct_coll_store(c->host), &n->nccl,
                          err);
}

static long ticket(ct_coll *c, int rc)
{
    struct nccl *n = c->impl;

    return rc ? ct_coll_failed(c, rc) : ++n->started;
}

static long float_only(ct_coll *c, enum ct_coll_type t, ct_error *err)
{
    ct_error_set(err, CT_ENOTAVAIL, "ddp-dtype", "%s: backend nccl moves fp32 only (asked %zu-byte elements)",
                 c->strategy, ct_coll_type_size(t));
    return ct_coll_failed(c, ct_error_hint(err, "use --precision 32-true or bf16-mixed on cuda"));
}

static long nccl_allreduce(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, ct_error *err)
{
    if (t != CT_COLL_F32)
        return float_only(c, t, err);
    return ticket(c, ct_nccl_allreduce_start(comm(c), buf, count, err));
}

/* NCCL's broadcast returns when done: its ticket is already complete. */
static long nccl_broadcast(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, int root, ct_error *err)
{
    if (t != CT_COLL_F32)
        return float_only(c, t, err);
    return ticket(c, ct_nccl_broadcast(comm(c), buf, count, root, err));
}

/* ncclAllGather: every rank's part the same size. */
static long nccl_allgather(ct_coll *c, void *buf, const size_t *counts, enum ct_coll_type t, ct_error *err)
{
    for (int r = 1; r < c->size; r++)
        if (counts[r] != counts[0]) {
            ct_error_set(err, CT_ENOTAVAIL, "coll-unsupported", "%s: backend nccl gathers parts of one size only",
                         c->strategy);
            return ct_coll_failed(c, ct_error_hint(err, "cut the array into equal parts (pad the last)"));
        }
    if (t != CT_COLL_F32)
        return float_only(c, t, err);
    return ticket(c, ct_nccl_allgather_start(comm(c), buf, counts[0], c->rank, err));
}

static long nccl_reduce_scatter(ct_coll *c, const void *send, void *recv, size_t count, enum ct_coll_type t,
                                ct_error *err)
{
    if (t != CT_COLL_F32)
        return float_only(c, t, err);
    return ticket(c, ct_nccl_reduce_scatter_start(comm(c), send, recv, count, err));
}

static long nccl_number(const ct_coll *c, long t)
{
    (void)c;
    return t;
}

/* Every collective started so far (NCCL's stream runs them in order). */
static int nccl_wait(ct_coll *c, long t, const char *what, ct_error *err)
{
    (void)what;
    if (c->seq < t)
        c->seq = t;
    return ct_nccl_wait(comm(c), err);
}

static long nccl_last(const ct_coll *c) { return ((const struct nccl *)c->impl)->started; }

static void nccl_close(ct_coll *c)
{
    struct nccl *n = c->impl;

    if (n) {
        ct_nccl_free(n->nccl);
        n->nccl = NULL;
    }
}

static void nccl_destroy(ct_coll *c)
{
    nccl_close(c);
    free(c->impl);
    c->impl = NULL;
}

const struct ct_coll_ops ct_coll_nccl = {
    .name = "nccl",
    .sums = 0,
    .bf16 = 0,
    .open = nccl_open,
    .allreduce = nccl_allreduce,
    .broadcast = nccl_broadcast,
    .allgather = nccl_allgather,
    .reduce_scatter = nccl_reduce_scatter,
    .number = nccl_number,
    .wait = nccl_wait,
    .last = nccl_last,
    .close = nccl_close,
    .destroy = nccl_destroy,
};
