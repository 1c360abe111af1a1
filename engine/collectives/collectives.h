/* SPDX-License-Identifier: BSD-3-Clause */
/* The collectives under every strategy (Lightning's process group): one table of operations with an
 * implementation per library, each a component in a file of its own — mpi.c (MPI over the
 * PMIx-provided world), gloo.c (PyTorch's CPU library, ranks meeting in a TCPStore at
 * MASTER_ADDR:MASTER_PORT), nccl.c (device memory on cuda; compiled, not yet run on a GPU). A
 * strategy opens one by the backend's name and calls ct_coll_<verb>; it never names a library.
 *
 * Every collective starts non-blocking and gives a ticket (1, 2, ... in the order started, the same
 * on every rank that starts the same ones); ct_coll_wait(ticket) waits for it and every one before
 * it, within the collective timeout. When the timeout passes, the layer finds the ranks that never
 * arrived (each library's roll call: messages on a second MPI communicator, keys in gloo's store)
 * and every waiting rank fails with the same message naming them and their nodes (coll.c); the
 * handle is broken from then on. A start's failure is returned as a negative ct_error code, err
 * set. The buffers belong to the collective until a wait for its ticket returned. */
#ifndef CTRAIN_COLLECTIVES_H
#define CTRAIN_COLLECTIVES_H

#include <stddef.h>

#include "ctrain/collective_trace.h"
#include "ctrain/environment.h"
#include "ctrain/error.h"

/* The bound of a library's own waits (gloo's context, its store, NCCL's bootstrap) where the
 * collective timeout is 0 ("wait forever"), in seconds. (--collective-timeout's default is the
 * plan's, CT_PLAN_COLLECTIVE_TIMEOUT_S in include/ctrain/connector.h.) */
#define CT_COLL_TIMEOUT_S 300
/* The bound a library's own waits get for a collective timeout of timeout_s (<= 0: none). */
double ct_coll_library_bound(double timeout_s);

typedef struct ct_coll ct_coll;

/* Element types: sums add them (bf16 in fp32, rounded back); bytes are only moved. */
enum ct_coll_type { CT_COLL_F32, CT_COLL_F64, CT_COLL_BF16, CT_COLL_BYTE };
size_t ct_coll_type_size(enum ct_coll_type t);

/* One message of an exchange between pairs of ranks: bytes at buf, to or from rank peer. */
struct ct_coll_msg {
    void *buf;
    size_t bytes;
    int peer;
};

/* What opening a library needs: the plan's layout and the strategy's settings. */
struct ct_coll_setup {
    const char *backend;       /* "mpi", "gloo" or "nccl" (device memory, beside a host library) */
    const char *why;           /* why this backend (" (auto: ...)" or ""), for messages */
    const char *strategy;      /* the strategy's name, for messages */
    int rank, world;           /* the plan's (mpi checks them against MPI's numbering) */
    const ct_env_info *env;    /* the cluster environment as the connector read it */
    const char *env_name;
    double timeout_s;          /* --collective-timeout (<= 0: none) */
    int threaded;              /* gloo: run the collectives on a worker thread (overlap) */
    int device_memory;         /* the model lives in device memory: its arrays get nccl */
    /* The TCP store where no PMIx server is (gloo, nccl's id): the run's nodes and the store's
     * settings (--run-id, --store-bind, --store-secret-file; NULL as ""). */
    int num_nodes;
    const char *store_run_id, *store_bind, *store_secret_file;
};

/* Which backend a strategy's backend= option (asked: auto, mpi, gloo, nccl; "" as auto) takes in
 * this rank: auto is mpi where a PMIx server started the ranks, else gloo on cpu and nccl on cuda
 * (the connector's plan says the same ahead of the launch); then whether it can work here. Its name
 * into backend, why auto chose it (" (auto: ...)", "" otherwise) into why. */
struct ct_coll_choice {
    const char *asked;
    const char *strategy, *accelerator, *env_name;
    int device_memory;         /* the accelerator keeps the model in device memory (cuda) */
    int world;
};
int ct_coll_choose(const struct ct_coll_choice *q, char *backend, size_t size, char *why, size_t why_size,
                   ct_error *err);

/* Whether asked names a backend ("" is auto), before any rank joins: an error naming it if not. */
int ct_coll_check_backend(const char *asked, ct_error *err);

/* Open the library named by su->backend for host memory (mpi or gloo; for nccl the host library
 * that carries its small values: mpi where a PMIx server started the ranks, else gloo). */
int ct_coll_open(const struct ct_coll_setup *su, ct_coll **out, ct_error *err);
/* The collectives of the model's arrays: where they live in device memory (su->device_memory) an
 * nccl communicator beside host, else host itself (*out == host). Free both (host last). */
int ct_coll_open_model(ct_coll *host, const struct ct_coll_setup *su, ct_coll **out, ct_error *err);
/* The rank layout the library found (mpi: MPI's numbering, checked against the environment). */
int ct_coll_rank(const ct_coll *c);
int ct_coll_local_rank(const ct_coll *c);
int ct_coll_node_rank(const ct_coll *c);
const char *ct_coll_name(const ct_coll *c);
/* 1 when an allreduce sums over the ranks, 0 when it averages (nccl's ncclAvg). */
int ct_coll_sums(const ct_coll *c);
/* Whether the library moves bf16 (sums in fp32, rounded). */
int ct_coll_has_bf16(const ct_coll *c);
/* 0 when it does; else an error naming the library, with a hint. */
int ct_coll_check_bf16(const ct_coll *c, ct_error *err);
/* n elements within every library's counts (an int's); else an error with id and what (a format
 * with one %zu, n) "... exceed MPI's int counts". */
int ct_coll_check_count(size_t n, const char *id, const char *what, ct_error *err);
/* Where waits record this rank's place (NULL: nowhere) and the timeout they keep (<= 0: none). */
void ct_coll_watch(ct_coll *c, ct_collective_trace *trace, double timeout_s);

/* In place, summed (or averaged: ct_coll_sums) over the ranks. */
long ct_coll_allreduce_start(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, ct_error *err);
/* buf[count] of root's to every rank. */
long ct_coll_broadcast_start(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, int root, ct_error *err);
/* In place: rank r's counts[r] elements, after those of the ranks before it, to every rank. */
long ct_coll_allgather_start(ct_coll *c, void *buf, const size_t *counts, enum ct_coll_type t, ct_error *err);
/* send[world * count] summed over the ranks; this rank's block (the rank-th count) into recv. */
long ct_coll_reduce_scatter_start(ct_coll *c, const void *send, void *recv, size_t count, enum ct_coll_type t,
                                  ct_error *err);
/* mine (counts[rank] elements) into whole at the place of this rank's, on root (other ranks may
 * get whole too). */
long ct_coll_gather_start(ct_coll *c, const void *mine, void *whole, const size_t *counts, enum ct_coll_type t,
                          int root, ct_error *err);
/* Messages between pairs: every receive and send posted at once, completing together. */
long ct_coll_exchange_start(ct_coll *c, const struct ct_coll_msg *sends, int nsends, const struct ct_coll_msg *recvs,
                            int nrecvs, ct_error *err);
/* Wait for every collective up to ticket (<= 0: nothing); what names it in messages and the trace. */
int ct_coll_wait(ct_coll *c, long ticket, const char *what, ct_error *err);
/* The ticket of the last collective started (0: none). */
long ct_coll_last(const ct_coll *c);
/* Let the library progress what is in flight (MPI progresses inside its calls); cheap. */
int ct_coll_progress(ct_coll *c, ct_error *err);
/* Every rank arrives before any leaves. */
int ct_coll_barrier(ct_coll *c, const char *what, ct_error *err);
/* Point to point (to/from -1 for none), within the timeout; not a collective (no roll call). */
int ct_coll_sendrecv(ct_coll *c, const void *sendbuf, size_t send_bytes, int to, void *recvbuf, size_t recv_bytes,
                     int from, ct_error *err);
/* A collective failed or timed out: no more collectives on it. */
int ct_coll_broken(const ct_coll *c);
/* Freeing it will end the job (MPI_Abort) because it is broken. */
int ct_coll_ends_job(const ct_coll *c);
/* Leave the group cleanly (MPI_Finalize where we initialised MPI); nothing when broken. */
void ct_coll_close(ct_coll *c);
/* Free; when broken and ct_coll_ends_job, end the job (MPI_Abort). NULL is fine. */
void ct_coll_free(ct_coll *c);

#endif
