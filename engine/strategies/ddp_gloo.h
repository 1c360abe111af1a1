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
 * makes the others fail with an error, not hang. */
int ct_gloo_create(ct_tcpstore *store, int rank, int size, double timeout_s, struct ct_gloo **out,
                   ct_error *err);
/* In place, summed over the ranks; esize 4 (float) or 8 (double). Blocking. */
int ct_gloo_allreduce_sum(struct ct_gloo *g, void *buf, size_t count, size_t esize, ct_error *err);
int ct_gloo_broadcast(struct ct_gloo *g, void *buf, size_t bytes, int root, ct_error *err);
/* Point to point (ct_strategy_sendrecv): to/from -1 for none. Blocking, within the context's
 * timeout. */
int ct_gloo_sendrecv(struct ct_gloo *g, const void *sendbuf, size_t send_bytes, int to, void *recvbuf,
                     size_t recv_bytes, int from, ct_error *err);
void ct_gloo_free(struct ct_gloo *g);

#ifdef __cplusplus
}
#endif

#endif
