/* SPDX-License-Identifier: BSD-3-Clause */
/* ddp's gloo backend (PyTorch's CPU collectives library, Debian's libgloo): a context of every rank
 * bootstrapped through a TCPStore (ctrain/tcpstore.h), and the two collectives ddp needs. C++ lives
 * in ddp_gloo.cc only, behind this C interface; built when libgloo-dev is present (CT_HAVE_GLOO). */
#ifndef CTRAIN_DDP_GLOO_H
#define CTRAIN_DDP_GLOO_H

#include <stddef.h>

#include "ctrain/error.h"
#include "ctrain/tcpstore.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ct_gloo;

/* Join size ranks as rank through store (every rank's address under the store's keys), with a
 * TCP pair to each. timeout_s bounds the bootstrap and every later collective: a rank that dies
 * makes the others fail with an error, not hang. threaded: the collectives run on a worker thread
 * of the context's own, in the order they were started (a gloo context is not for concurrent use:
 * every collective of it runs on that one thread), so a start returns at once and the caller
 * computes meanwhile (PyTorch's ProcessGroupGloo does the same); else each start runs its
 * collective before it returns. Either way the result is the same bits. */
int ct_gloo_create(ct_tcpstore *store, int rank, int size, double timeout_s, int threaded, struct ct_gloo **out,
                   ct_error *err);

/* Starting a collective gives its ticket: its number among the context's collectives (1, 2, ...,
 * the same on every rank that starts the same ones in the same order). The buffers belong to the
 * collective until a wait for its ticket returned. */

/* In place, summed over the ranks; esize 4 (float) or 8 (double). */
long ct_gloo_allreduce_start(struct ct_gloo *g, void *buf, size_t count, size_t esize);
/* One message of an exchange: bytes at buf, to or from rank peer. */
struct ct_gloo_msg {
    void *buf;
    size_t bytes;
    int peer;
};
/* Messages between pairs of ranks: every receive and send posted, then all waited for (ddp_sharded's
 * reduce-scatter, as over MPI: each rank sends each peer the part of a bucket inside the peer's
 * shard and sums what it receives in rank order, so both backends give the same bits). The send
 * buffers are read, the receive buffers written, until a wait for the ticket returned. Not gloo's
 * ReduceScatterHalvingDoubling: on every rank but 0 it moves the rank's part to the front of the
 * buffer with memcpy between overlapping ranges of it (gloo/reduce_scatter.h), which garbled the
 * part in about one run of three (t/39-ddp-sharded-gloo test 6; check-asan names the memcpy). */
long ct_gloo_exchange_start(struct ct_gloo *g, const struct ct_gloo_msg *sends, int nsends,
                            const struct ct_gloo_msg *recvs, int nrecvs);
/* In place: rank r's counts[r] elements of esize bytes, after those of the ranks before it, to
 * every rank. */
long ct_gloo_allgatherv_start(struct ct_gloo *g, void *buf, const size_t *counts, size_t esize);
/* send[size * count] summed over the ranks (esize 4: float, 8: double); this rank's block into
 * recv[count]: pairs of messages, the sum in rank order (as ct_gloo_exchange_start's note says). */
long ct_gloo_reduce_scatter_start(struct ct_gloo *g, const void *send, void *recv, size_t count, size_t esize);
long ct_gloo_broadcast_start(struct ct_gloo *g, void *buf, size_t bytes, int root);
/* Wait until every collective up to ticket has run (they complete in order). On failure: the
 * first error of the context (a collective after a failed one does not run) and, in *failed, the
 * ticket of the collective that failed. */
int ct_gloo_wait(struct ct_gloo *g, long ticket, long *failed, ct_error *err);
/* The ticket of the last collective started (0: none). */
long ct_gloo_last(const struct ct_gloo *g);

/* Blocking forms: start and wait. */
int ct_gloo_allreduce_sum(struct ct_gloo *g, void *buf, size_t count, size_t esize, ct_error *err);
int ct_gloo_broadcast(struct ct_gloo *g, void *buf, size_t bytes, int root, ct_error *err);
/* Point to point (ct_strategy_sendrecv): to/from -1 for none. Blocking (run on the worker, in
 * order with the collectives), within the context's timeout. */
int ct_gloo_sendrecv(struct ct_gloo *g, const void *sendbuf, size_t send_bytes, int to, void *recvbuf,
                     size_t recv_bytes, int from, ct_error *err);
/* After a wait for whatever was started (or with collectives in flight when the caller ends
 * anyway: they run to their timeout first); stops the thread. */
void ct_gloo_free(struct ct_gloo *g);

#ifdef __cplusplus
}
#endif

#endif
