/* SPDX-License-Identifier: BSD-3-Clause */
/* What a collectives component implements (mpi.c, gloo.c, nccl.c) and the handle they share;
 * internal to engine/collectives. */
#ifndef CTRAIN_COLL_IMPL_H
#define CTRAIN_COLL_IMPL_H

#include "engine/collectives/collectives.h"

#define CT_COLL_HOST 64      /* bytes of a rank's node name in hosts[] */
#define CT_COLL_MAX_NAMED 32 /* missing ranks a roll call names (the rest are counted) */

/* A roll call's outcome, which coll.c words (the same words on every library). */
enum ct_coll_found {
    CT_COLL_MISSING,          /* ranks[] did not arrive (of the world) */
    CT_COLL_MISSING_RELAYED,  /* ranks[] did not arrive, as rank 0 found and told this rank */
    CT_COLL_NONE_AT_ZERO,     /* rank 0 heard every rank after its deadline */
    CT_COLL_NONE_RELAYED,     /* rank 0 told this rank it found every rank waiting */
    CT_COLL_NONE,             /* every rank answered after the deadline (gloo's store) */
    CT_COLL_ZERO_SILENT,      /* rank 0 never asked or answered */
    CT_COLL_ZERO_STORE_SILENT /* rank 0's store does not answer */
};

struct ct_coll_verdict {
    enum ct_coll_found found;
    int total;                /* ranks missing */
    int ranks[CT_COLL_MAX_NAMED];
    int late;                 /* some of the missing wait in another collective */
    double timeout;           /* the timeout that passed, for the message */
    const char *store;        /* CT_COLL_ZERO_STORE_SILENT: the store's address */
};

struct ct_coll_ops {
    const char *name;
    int sums;                 /* allreduce sums (1) or averages (0) */
    int bf16;                 /* moves bf16 */
    int (*open)(ct_coll *c, const struct ct_coll_setup *su, ct_error *err);
    long (*allreduce)(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, ct_error *err);
    long (*broadcast)(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, int root, ct_error *err);
    long (*allgather)(ct_coll *c, void *buf, const size_t *counts, enum ct_coll_type t, ct_error *err);
    long (*reduce_scatter)(ct_coll *c, const void *send, void *recv, size_t count, enum ct_coll_type t,
                           ct_error *err);
    long (*gather)(ct_coll *c, const void *mine, void *whole, const size_t *counts, enum ct_coll_type t, int root,
                   ct_error *err);
    long (*exchange)(ct_coll *c, const struct ct_coll_msg *sends, int ns, const struct ct_coll_msg *recvs, int nr,
                     ct_error *err);
    long (*barrier)(ct_coll *c, ct_error *err);
    int (*sendrecv)(ct_coll *c, const void *sendbuf, size_t send_bytes, int to, void *recvbuf, size_t recv_bytes,
                    int from, ct_error *err);
    /* The number a wait for ticket gives the collective in messages and the trace (every rank's the
     * same), before waiting. */
    long (*number)(const ct_coll *c, long ticket);
    /* Wait for every collective up to ticket: 0; CT_ETIMEOUT once the timeout passed (or rank 0
     * started a roll call), then find_missing runs; or another error (err set). */
    int (*wait)(ct_coll *c, long ticket, const char *what, ct_error *err);
    /* The roll call after a timeout in collective c->seq: who did not arrive. NULL: the library's
     * own error stands. */
    void (*find_missing)(ct_coll *c, struct ct_coll_verdict *v);
    long (*last)(const ct_coll *c);
    int (*progress)(ct_coll *c, ct_error *err);   /* optional */
    void (*close)(ct_coll *c);
    int (*ends_job)(const ct_coll *c);            /* optional: NULL never */
    void (*destroy)(ct_coll *c);
};

struct ct_coll {
    const struct ct_coll_ops *ops;
    int rank, size, local_rank, node_rank;
    double timeout_s;           /* --collective-timeout; <= 0: none */
    long seq;                   /* the collective waited for last (the same number on every rank) */
    int broken;
    char *hosts;                /* [size][CT_COLL_HOST], each rank's node (NULL: not known) */
    ct_collective_trace *trace; /* NULL: none */
    ct_env_info env;
    char env_name[32];
    char strategy[64];
    char why[160];
    struct ct_coll *host;       /* nccl: the host library beside it (not owned) */
    void *impl;
};

extern const struct ct_coll_ops ct_coll_mpi, ct_coll_gloo, ct_coll_nccl;

/* gloo's TCPStore, where NCCL's id travels without a PMIx server (NULL for another library). */
struct ct_tcpstore *ct_coll_store(const ct_coll *c);
/* A failed start: marks the handle broken and gives the negative code to return. */
long ct_coll_failed(ct_coll *c, int rc);
/* The hosts of ranks[count] as " (on n2, n3)" into buf ("" when unknown). */
void ct_coll_host_list(const ct_coll *c, const int *ranks, int count, char *buf, size_t size);
/* Back off while polling: spin first, then sleep (a rank waiting for a stopped peer must not take
 * the cores of the ranks that still compute). */
void ct_coll_nap(double waited);

/* Without a PMIx server (store_open.c): rank 0 hosts the TCP store where bind says (unless
 * torchrun's agent hosts it), and every rank connects to MASTER_ADDR:MASTER_PORT with the run's key
 * prefix (the job's identity, then run_id), proving secret_file's bytes when one is given; *srv
 * (rank 0's) and *store, freed by the caller. */
struct ct_tcpstore_server;
struct ct_tcpstore;
struct ct_coll_store_setup {
    const ct_env_info *env;    /* MASTER_ADDR/PORT, the job's id */
    int rank, num_nodes;
    const char *run_id;        /* --run-id, "" none */
    const char *bind;          /* --store-bind: "" MASTER_ADDR's addresses, "all", ADDR[,ADDR] */
    const char *secret_file;   /* --store-secret-file, "" none */
};
int ct_coll_store_open(const struct ct_coll_store_setup *st, double timeout_s, struct ct_tcpstore_server **srv,
                       struct ct_tcpstore **store, ct_error *err);

#endif
