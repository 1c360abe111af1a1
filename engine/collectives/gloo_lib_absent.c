/* SPDX-License-Identifier: BSD-3-Clause */
/* gloo_lib.h in a ctrain built without gloo (make GLOO=0, or no libgloo-dev): there is never a
 * context (gloo.c's open refuses backend gloo with a hint first), so nothing reaches these; they
 * exist so that gloo.c links, and each fails as a missing library would. */
#ifndef CT_HAVE_GLOO
#include "engine/collectives/gloo_lib.h"

static int absent(ct_error *err)
{
    ct_error_set(err, CT_ENOTAVAIL, "ddp-no-gloo", "ddp: this ctrain was built without gloo");
    return ct_error_hint(err, "install libgloo-dev (scripts/install-deps) and rebuild");
}

int ct_gloo_create(ct_tcpstore *store, int rank, int size, double timeout_s, int threaded, struct ct_gloo **out,
                   ct_error *err)
{
    (void)store;
    (void)rank;
    (void)size;
    (void)timeout_s;
    (void)threaded;
    *out = NULL;
    return absent(err);
}

long ct_gloo_allreduce_start(struct ct_gloo *g, void *buf, size_t count, size_t esize)
{
    (void)g;
    (void)buf;
    (void)count;
    (void)esize;
    return 0;
}

long ct_gloo_exchange_start(struct ct_gloo *g, const struct ct_gloo_msg *sends, int nsends,
                            const struct ct_gloo_msg *recvs, int nrecvs)
{
    (void)g;
    (void)sends;
    (void)nsends;
    (void)recvs;
    (void)nrecvs;
    return 0;
}

long ct_gloo_allgatherv_start(struct ct_gloo *g, void *buf, const size_t *counts, size_t esize)
{
    (void)g;
    (void)buf;
    (void)counts;
    (void)esize;
    return 0;
}

long ct_gloo_reduce_scatter_start(struct ct_gloo *g, const void *send, void *recv, size_t count, size_t esize)
{
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)esize;
    return 0;
}

long ct_gloo_broadcast_start(struct ct_gloo *g, void *buf, size_t bytes, int root)
{
    (void)g;
    (void)buf;
    (void)bytes;
    (void)root;
    return 0;
}

int ct_gloo_wait(struct ct_gloo *g, long ticket, long *failed, ct_error *err)
{
    (void)g;
    if (failed)
        *failed = ticket;
    return absent(err);
}

long ct_gloo_last(const struct ct_gloo *g)
{
    (void)g;
    return 0;
}

int ct_gloo_allreduce_sum(struct ct_gloo *g, void *buf, size_t count, size_t esize, ct_error *err)
{
    (void)g;
    (void)buf;
    (void)count;
    (void)esize;
    return absent(err);
}

int ct_gloo_broadcast(struct ct_gloo *g, void *buf, size_t bytes, int root, ct_error *err)
{
    (void)g;
    (void)buf;
    (void)bytes;
    (void)root;
    return absent(err);
}

int ct_gloo_sendrecv(struct ct_gloo *g, const void *sendbuf, size_t send_bytes, int to, void *recvbuf,
                     size_t recv_bytes, int from, ct_error *err)
{
    (void)g;
    (void)sendbuf;
    (void)send_bytes;
    (void)to;
    (void)recvbuf;
    (void)recv_bytes;
    (void)from;
    return absent(err);
}

void ct_gloo_free(struct ct_gloo *g)
{
    (void)g;
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int ct_ddp_gloo_present;
#endif
