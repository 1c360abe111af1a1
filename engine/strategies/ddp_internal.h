/* SPDX-License-Identifier: BSD-3-Clause */
/* What ddp.c shares with the strategies built on it (ddp_sharded.c): its state, the bucketed
 * gradient exchange, the collective-timeout wait and the ops a variant reuses. */
#ifndef CTRAIN_DDP_INTERNAL_H
#define CTRAIN_DDP_INTERNAL_H

#include <mpi.h>

#include "ctrain/tcpstore.h"
#include "engine/strategies/ddp_nccl.h"
#include "engine/strategies/strategies.h"

/* The collectives below the strategy (Lightning's process_group_backend), option backend=. */
enum ct_ddp_backend { CT_DDP_AUTO = 0, CT_DDP_MPI, CT_DDP_GLOO, CT_DDP_NCCL };

struct bucket {
    size_t start, len;   /* floats of grads[] */
    int started;
};

/* Tags on the fault communicator. */
#define TAG_QUERY   1    /* rank 0 -> r: which collective do you wait in? (long: rank 0's number) */
#define TAG_HERE    2    /* r -> rank 0: this one (long) */
#define TAG_VERDICT 3    /* rank 0 -> r: int[1 + MAX_NAMED]: count of missing ranks, the first ones */
#define TAG_REDUCE_SCATTER 4 /* on the training communicator: ddp_sharded's gradient parts */
#define TAG_P2P     5    /* on the training communicator: ct_strategy_sendrecv */
#define MAX_NAMED   32
#define CT_DDP_HOST 64   /* bytes of a rank's host name in struct ddp's hosts */

struct ddp {
    double bucket_mb;
    int overlap;
    int find_unused;     /* a gradient range backward never announced counts as zero (Lightning's
                          * find_unused_parameters=True); without it that is an error naming it */
    int mpi_owner;       /* we called MPI_Init, so we finalize */
    int broken;          /* a collective failed or timed out: abort instead of finalizing */
    long seq;            /* collectives waited for so far (the same count on every rank) */
    ct_collective_trace *trace; /* the caller's record of where this rank stands (NULL: none) */
    MPI_Comm fault_comm; /* the who-is-missing exchange, apart from the training traffic */
    char *hosts;         /* [size][CT_DDP_HOST]: each rank's host, so a timeout names the lost ones */
    MPI_Comm comm;
    float *grads;        /* of esize-byte elements (fp64 under 64-true: see grad_at in ddp.c) */
    size_t n;
    size_t esize;        /* bytes per gradient element */
    MPI_Datatype mpi_type; /* MPI_FLOAT, MPI_DOUBLE under 64-true, MPI_UINT16_T (bf16) under bf16-true */
    MPI_Op mpi_sum;        /* MPI_SUM, or under bf16-true ct_ddp_bf16_sum's op (MPI has no bf16) */
    struct bucket *buckets; /* this step's buckets, in the order they were cut */
    /* reqs[i * reqs_per_bucket ...]: bucket i's requests (ddp: its one allreduce; ddp_sharded
     * stage 2: its sends and receives), one array so one wait covers them all. */
    MPI_Request *reqs;
    int reqs_per_bucket;
    int n_buckets, cap_buckets;
    size_t pending_lo, pending_hi; /* announced gradients not yet in a bucket: [lo, hi) */
    size_t bucket_floats;
    struct ct_nccl *nccl;  /* cuda: gradients are device memory, reduced by NCCL */
    /* How a closed bucket's reduction starts (ddp: MPI_Iallreduce in place; ddp_sharded stage 2:
     * the parts of a reduce-scatter into this rank's shard). Over MPI the ranks' gradients are
     * summed, not averaged: each rank's backward already divided by the global count
     * (ct_strategy_grad_ranks), which saves a pass over every gradient each step. */
    int (*start_reduce)(ct_strategy *s, int bucket, ct_error *err);
    /* Optional: after every bucket's requests completed (stage 2: the sum of the received
     * contributions into this rank's shard). */
    void (*finish_reduce)(ct_strategy *s);
    void *sharded;         /* ddp_sharded's state (ddp_sharded.c) */
    /* Values posted to ride on this step's gradient exchange (ct_strategy_post_with_grads): their
     * allreduce starts with backward's first announcement and is waited for with the buckets. */
    double *posted;
    int n_posted;
    int posted_started;
    MPI_Request posted_req;
    /* backend=gloo: ranks joined through the TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 hosts it
     * unless torchrun's agent does), collectives by gloo; MPI is never initialised. */
    enum ct_ddp_backend backend;    /* as asked (auto until setup_environment resolves it) */
    char backend_why[160];          /* why auto chose what it did, for messages */
    struct ct_gloo *gloo;
    ct_tcpstore_server *store_srv;
    ct_tcpstore *store;
};

/* A failed MPI call as a ct_error naming it (and marking the world broken). */
int ct_ddp_mpi_error(int rc, const char *call, ct_error *err);
/* Wait for the requests of one collective within --collective-timeout; on timeout every waiting
 * rank fails naming the ranks that did not arrive. Every rank calls it once per collective. */
int ct_ddp_wait(ct_strategy *s, MPI_Request *reqs, int n, const char *what, ct_error *err);

/* One rank and no process group (no MPI communicator, no gloo context): collectives are
 * identities. */
int ct_ddp_single(const struct ddp *d);
/* backend=gloo: wait for the context's collectives up to ticket (ct_gloo_*_start), as ct_ddp_wait
 * does for MPI's requests: a timeout names the missing ranks (a roll call in the store). */
int ct_ddp_gloo_wait(ct_strategy *s, long ticket, const char *what, ct_error *err);

/* ddp's own ops (ct_strategy_ddp, strategies.h) are what a variant builds on: ddp_sharded copies
 * them and overrides what sharding changes, calling ddp's where it extends them. */

#endif
