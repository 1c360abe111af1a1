/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — PMIx client: rank discovery and key-value exchange.
 *
 * A process started by srun --mpi=pmix, Open MPI's mpirun or ctrain's own launcher finds a PMIx
 * server through the PMIX_* variables its launcher set. ct_pmix_client_init connects to it and
 * reads the layout of the job once; the accessors then answer from memory. put / commit /
 * fence / get is the exchange ranks use for anything they must agree on (a run id, an output
 * directory, later the NCCL unique id).
 *
 * PMIx_Init is reference-counted by libpmix, so a client here and Open MPI's MPI_Init in the same
 * process share one connection; init and finalize in pairs, MPI_Finalize before the last
 * ct_pmix_client_finalize.
 */
#ifndef CTRAIN_PMIX_H
#define CTRAIN_PMIX_H

#include <stddef.h>

#include "ctrain/error.h"

typedef struct ct_pmix_client ct_pmix_client;

/* Longest key ct_pmix_put accepts (PMIx allows 511; ctrain's keys are short names). */
#define CT_PMIX_KEY_MAX 255

/* 1 when the variables a PMIx server gives its clients are present (PMIX_RANK, PMIX_NAMESPACE and
 * one of PMIX_SERVER_URI41/4/3/21/2/PMIX_SERVER_URI). Reads through get (a ct_getenv_fn of
 * ctrain/environment.h), so it works on fixtures. */
int ct_pmix_client_present(const char *(*get)(const char *name, void *ctx), void *ctx);

/* Connect to the PMIx server named by the environment and read the job's layout.
 * No server: CT_ENOTAVAIL with a hint; a server that refuses: CT_ECOMM. */
int ct_pmix_client_init(ct_pmix_client **out, ct_error *err);

/* The process's shared client: connected by the first call, kept until exit, when an atexit
 * handler finalizes it (after the program's MPI_Finalize). Code that may run before MPI_Init
 * (the pmix cluster environment) uses this one: under Open MPI 4.1, once PMIx is fully finalized
 * it cannot be initialised again in the process (MPI_Init then fails "getting local rank failed");
 * under Open MPI 5, ct_pmix_client_before_mpi_init finalizes it first.
 * ct_pmix_client_finalize on it does nothing. */
int ct_pmix_client_shared(ct_pmix_client **out, ct_error *err);

/* 1 when the MPI ctrain is built against needs the process's PMIx client finalized before MPI_Init:
 * Open MPI 5 and later check PMIx_Initialized() first and fail at once ("An error occurred in
 * MPI_Init_thread on a NULL communicator") in a process whose client is connected, where Open MPI
 * 4.1 shares the connection (and cannot start after a full PMIx_Finalize). 0 for Open MPI 4. */
int ct_pmix_mpi_init_needs_finalized(void);

/* Call right before MPI_Init. Under Open MPI 5 the shared client reads the layout through a child
 * process and connects only at its first put/commit/fence/get (after MPI_Init, on top of MPI's
 * connection): a process that connected, finalized and connects again (MPI_Init) races with the
 * server. This finalizes the shared client if it did connect (the next ct_pmix_client_shared
 * connects again); under Open MPI 4.1 it does nothing. A client of ct_pmix_client_init is its
 * owner's to finalize. */
void ct_pmix_client_before_mpi_init(void);

/* Call right after MPI_Init, before any message on MPI_COMM_WORLD: a fence over every rank
 * through the PMIx server (the shared client) that ends only once every rank has left MPI_Init.
 * Open MPI 5 (5.0.7) adds MPI_COMM_WORLD to its ob1 messaging layer after its modex fence and
 * then trusts a fence without data as MPI_Init's last barrier; under srun --mpi=pmix (SLURM 22.05
 * and 24.11, measured) such a fence lets rank 0 go at once. Rank 0's first message then reaches a
 * rank still waiting for the modex, which crashes (SIGSEGV in mca_pml_ob1_recv_frag_callback_match:
 * 3 of 150 two-node runs of an allreduce under load). This fence collects data, which srun's plugin
 * does hold every rank for. timeout_s <= 0 waits forever; a rank that never leaves MPI_Init:
 * CT_ETIMEOUT. */
int ct_pmix_after_mpi_init(double timeout_s, ct_error *err);

/* Layout of the job, read at init. */
int ct_pmix_client_rank(const ct_pmix_client *c);        /* 0 .. size-1 */
int ct_pmix_client_size(const ct_pmix_client *c);        /* processes in the job (PMIX_JOB_SIZE) */
int ct_pmix_client_local_rank(const ct_pmix_client *c);  /* 0 .. local_size-1 on this node */
int ct_pmix_client_local_size(const ct_pmix_client *c);  /* processes of the job on this node */
int ct_pmix_client_node_rank(const ct_pmix_client *c);   /* index of this node, 0 .. num_nodes-1 */
int ct_pmix_client_num_nodes(const ct_pmix_client *c);
/* 1 when every node runs local_size processes of the job. */
int ct_pmix_client_equal_per_node(const ct_pmix_client *c);
const char *ct_pmix_client_hostname(const ct_pmix_client *c);     /* this process's node */
const char *ct_pmix_client_rank0_host(const ct_pmix_client *c);   /* node of rank 0 */
const char *ct_pmix_client_nspace(const ct_pmix_client *c);       /* the job's namespace */
const char *ct_pmix_client_job_id(const ct_pmix_client *c);       /* PMIX_JOBID, else the namespace */

/* Publish len bytes under key (visible to the other ranks after commit + fence). */
int ct_pmix_put(ct_pmix_client *c, const char *key, const void *buf, size_t len, ct_error *err);
/* Send what was put to the local server. */
int ct_pmix_commit(ct_pmix_client *c, ct_error *err);
/* Barrier over every rank of the job that also collects what each put and committed.
 * timeout_s <= 0 waits forever; when it expires: CT_ETIMEOUT, and the client refuses further
 * exchanges (some ranks may still be inside the fence). */
int ct_pmix_fence(ct_pmix_client *c, double timeout_s, ct_error *err);
/* Copy what rank put under key, as the last fence collected it, into buf (cap bytes); *len = its
 * size. Never waits on the server. Not found: CT_ENOENT;
 * larger than cap: CT_EINVAL with *len set to the size needed. */
int ct_pmix_get(ct_pmix_client *c, int rank, const char *key, void *buf, size_t cap, size_t *len,
                ct_error *err);

/* Disconnect (PMIx_Finalize) and free. NULL and the shared client are fine (no-op). */
void ct_pmix_client_finalize(ct_pmix_client *c);

#endif
