/* SPDX-License-Identifier: BSD-3-Clause */
/* What ddp.c shares with the strategies built on it (ddp_sharded.c): its state, the bucketed
 * gradient exchange and the ops a variant reuses. The collectives themselves are engine/collectives'
 * (one table over every library); ddp keeps the buckets and their overlap with backward. */
#ifndef CTRAIN_DDP_INTERNAL_H
#define CTRAIN_DDP_INTERNAL_H

#include "engine/collectives/collectives.h"
#include "engine/strategies/strategies.h"

struct bucket {
    size_t start, len;   /* elements of grads[] */
    int started;
};

struct ddp {
    double bucket_mb;
    int overlap;
    int find_unused;     /* a gradient range backward never announced counts as zero (Lightning's
                          * find_unused_parameters=True); without it that is an error naming it */
    char asked[16];      /* option backend= (auto, or a library's name) */
    char backend[16];    /* what it resolved to in this rank (ct_coll_choose) */
    char backend_why[160];
    ct_coll *coll;       /* the process group (NULL: one rank, none: collectives are identities) */
    ct_coll *model_coll; /* the model's arrays: coll itself, or device memory's library beside it */
    float *grads;        /* of esize-byte elements (fp64 under 64-true: see grad_at in ddp.c) */
    size_t n;
    size_t esize;        /* bytes per gradient element */
    enum ct_coll_type type; /* the gradients' element type on the wire */
    struct bucket *buckets; /* this step's buckets, in the order they were cut */
    int n_buckets, cap_buckets;
    size_t pending_lo, pending_hi; /* announced gradients not yet in a bucket: [lo, hi) */
    size_t bucket_floats;
    /* How a closed bucket's reduction starts (ddp: an allreduce in place; ddp_sharded stage 2: the
     * parts of a reduce-scatter into this rank's shard). The ranks' gradients are summed where the
     * library sums (ct_coll_sums): each rank's backward already divided by the global count
     * (ct_strategy_grad_ranks), which saves a pass over every gradient each step. */
    int (*start_reduce)(ct_strategy *s, int bucket, ct_error *err);
    /* Optional: after every bucket's collectives completed (stage 2: the sum of the received
     * contributions into this rank's shard). */
    void (*finish_reduce)(ct_strategy *s);
    void *sharded;         /* ddp_sharded's state (ddp_sharded.c) */
    /* Values posted to ride on this step's gradient exchange (ct_strategy_post_with_grads): their
     * allreduce starts with backward's first announcement and is waited for with the buckets. */
    double *posted;
    int n_posted;
    int posted_started;
};

/* One rank and no process group: collectives are identities. */
int ct_ddp_single(const struct ddp *d);
/* Wait for c's collectives up to ticket within --collective-timeout, recording where this rank
 * waits (the host group's only); a negative ticket is a start's failure, returned as it is. */
int ct_ddp_wait(ct_strategy *s, ct_coll *c, long ticket, const char *what, ct_error *err);

/* ddp's own ops (ct_strategy_ddp, strategies.h) are what a variant builds on: ddp_sharded copies
 * them and overrides what sharding changes, calling ddp's where it extends them. */

#endif
