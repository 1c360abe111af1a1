/* SPDX-License-Identifier: BSD-3-Clause */
/* The mpi component: MPI over the PMIx-provided world. Any launcher (srun --mpi=pmix, mpirun and
 * ctrain's own) gives each rank a PMIx server, so MPI_Init joins the same world everywhere. Every
 * collective is non-blocking; its requests wait, in start order, for ct_coll_wait. MPI errors come
 * back as return codes (MPI_ERRORS_RETURN) and become messages naming the call; nothing aborts the
 * job behind the user's back.
 *
 * The roll call after a timeout runs on a second communicator: rank 0 asks every rank which
 * collective it waits in, the ranks that wait answer, rank 0 sends them the list of the silent
 * ones, and every rank fails with the same message. A rank that times out and hears nothing from
 * rank 0 names rank 0. After that (or any MPI error) the communicator is broken: closing skips
 * MPI_Finalize (it would wait for the missing rank) and freeing calls MPI_Abort, which makes srun,
 * mpirun or ctrain's launcher end the job. */
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/envs.h"
#include "ctrain/pmix.h"
#include "ctrain/util.h"
#include "engine/collectives/coll_impl.h"
#include "engine/nn/bf16_inline.h"

/* Tags on the fault communicator, then on the training one. */
#define TAG_QUERY    1 /* rank 0 -> r: which collective do you wait in? (long: rank 0's number) */
#define TAG_HERE     2 /* r -> rank 0: this one (long) */
#define TAG_VERDICT  3 /* rank 0 -> r: int[1 + MAX_NAMED]: count of missing ranks, the first ones */
#define TAG_EXCHANGE 4 /* ct_coll_exchange_start's messages (ddp_sharded's gradient parts) */
#define TAG_P2P      5 /* ct_coll_sendrecv */
#define MAX_NAMED CT_COLL_MAX_NAMED

/* Seconds MPI_Abort may take before this rank ends by itself. */
#define ABORT_WAIT_S 5

struct mpi {
    MPI_Comm comm;       /* the collectives */
    MPI_Comm fault_comm; /* the who-is-missing exchange, apart from the training traffic */
    MPI_Op bf16_sum;     /* MPI has no bf16: ours (bf16_sum) */
    int owner;           /* we called MPI_Init, so we finalize */
    long started;        /* tickets handed out */
    /* Requests in flight, in start order: each with its collective's ticket and the scratch it
     * keeps (counts and displacements) until it completes. */
    MPI_Request *reqs;
    long *tickets;
    void **scratch;
    int n, cap;
};

static int mpi_error(ct_coll *c, int rc, const char *call, ct_error *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;

    c->broken = 1;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof(text), "MPI error %d", rc);
    ct_error_set(err, CT_ECOMM, "mpi", "ddp: %s failed: %s", call, text);
    return ct_error_hint(err, "a peer rank probably died or lost its connection; see the other ranks' messages");
}

/* bf16-true's allreduce: the gradients travel as MPI_UINT16_T and this op adds two of them in fp32
 * and rounds the sum to bf16 (nearest, ties to even). Declared commutative so Open MPI keeps its
 * usual algorithms. With 2 ranks the result is the fp32 sum rounded once; with more, each partial
 * sum is rounded as it is combined (as PyTorch's DDP does for a bf16 model, gloo and NCCL alike);
 * every rank receives the same bits either way. Widening to fp32 for the exchange would round once
 * at any world size but send twice the bytes. */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    const uint16_t *a = in;
    uint16_t *b = inout;

    (void)type;
    for (int i = 0; i < *len; i++)
        b[i] = ct_bf16_store(ct_bf16_load(a[i]) + ct_bf16_load(b[i]));
}

static MPI_Datatype mpi_type(enum ct_coll_type t)
{
    return t == CT_COLL_F64 ? MPI_DOUBLE : t == CT_COLL_F32 ? MPI_FLOAT : t == CT_COLL_BF16 ? MPI_UINT16_T : MPI_BYTE;
}

static MPI_Op mpi_sum(const struct mpi *m, enum ct_coll_type t) { return t == CT_COLL_BF16 ? m->bf16_sum : MPI_SUM; }

/* A slot for one more request of ticket (the caller fills it); NULL when out of memory. */
static MPI_Request *slot(struct mpi *m, long ticket, void *scratch)
{
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 16;
        MPI_Request *r = realloc(m->reqs, (size_t)cap * sizeof(*r));
        long *t = r ? realloc(m->tickets, (size_t)cap * sizeof(*t)) : NULL;
        void **s = t ? realloc(m->scratch, (size_t)cap * sizeof(*s)) : NULL;

        if (r)
            m->reqs = r;
        if (t)
            m->tickets = t;
        if (!s)
            return NULL;
        m->scratch = s;
        m->cap = cap;
    }
    m->reqs[m->n] = MPI_REQUEST_NULL;
    m->tickets[m->n] = ticket;
    m->scratch[m->n] = scratch;
    return &m->reqs[m->n++];
}

/* The result of starting one collective of one request. */
static long started(ct_coll *c, int rc, const char *call, ct_error *err)
{
    struct mpi *m = c->impl;

    if (rc != MPI_SUCCESS)
        return (long)mpi_error(c, rc, call, err);
    return m->started;
}

static MPI_Request *next(ct_coll *c, void *scratch, ct_error *err)
{
    struct mpi *m = c->impl;
    MPI_Request *r = slot(m, m->started + 1, scratch);

    if (!r) {
        free(scratch);
        c->broken = 1;
        ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory for a collective's request");
        return NULL;
    }
    m->started++;
    return r;
}

static long mpi_allreduce(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, ct_error *err)
{
    struct mpi *m = c->impl;
    MPI_Request *r = next(c, NULL, err);

    if (!r)
        return CT_ENOMEM;
    return started(c, MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, mpi_type(t), mpi_sum(m, t), m->comm, r),
                   "MPI_Iallreduce", err);
}

static long mpi_broadcast(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, int root, ct_error *err)
{
    struct mpi *m = c->impl;
    MPI_Request *r = next(c, NULL, err);

    if (!r)
        return CT_ENOMEM;
    return started(c, MPI_Ibcast(buf, (int)count, mpi_type(t), root, m->comm, r), "MPI_Ibcast", err);
}

/* counts[] as MPI's ints and their displacements, in one allocation (kept until completion). */
static int *int_counts(const ct_coll *c, const size_t *counts)
{
    int *v = malloc((size_t)c->size * 2 * sizeof(int)), at = 0;

    for (int r = 0; v && r < c->size; r++) {
        v[r] = (int)counts[r];
        v[c->size + r] = at;
        at += v[r];
    }
    return v;
}

static long mpi_allgather(ct_coll *c, void *buf, const size_t *counts, enum ct_coll_type t, ct_error *err)
{
    struct mpi *m = c->impl;
    int *v = int_counts(c, counts), same = 1;
    MPI_Request *r;

    if (!v)
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory for an all-gather");
    for (int q = 1; q < c->size; q++)
        same &= v[q] == v[0];
    if (!(r = next(c, v, err)))
        return CT_ENOMEM;
    if (same) /* in place, every rank's part the same size */
        return started(c, MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, v[0], mpi_type(t), m->comm, r),
                       "MPI_Iallgather", err);
    return started(c, MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, v, v + c->size, mpi_type(t), m->comm, r),
                   "MPI_Iallgatherv", err);
}

static long mpi_reduce_scatter(ct_coll *c, const void *send, void *recv, size_t count, enum ct_coll_type t,
                               ct_error *err)
{
    struct mpi *m = c->impl;
    MPI_Request *r = next(c, NULL, err);

    if (!r)
        return CT_ENOMEM;
    return started(c, MPI_Ireduce_scatter_block(send, recv, (int)count, mpi_type(t), mpi_sum(m, t), m->comm, r),
                   "MPI_Ireduce_scatter_block", err);
}

static long mpi_gather(ct_coll *c, const void *mine, void *whole, const size_t *counts, enum ct_coll_type t, int root,
                       ct_error *err)
{
    struct mpi *m = c->impl;
    int *v = int_counts(c, counts);
    MPI_Request *r;

    if (!v)
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory for a gather");
    if (!(r = next(c, v, err)))
        return CT_ENOMEM;
    return started(c, MPI_Igatherv(mine, v[c->rank], mpi_type(t), whole, v, v + c->size, mpi_type(t), root, m->comm, r),
                   "MPI_Igatherv", err);
}

/* Every send, then every receive, all under one ticket; MPI keeps the order of messages between
 * two ranks, so one tag matches the exchanges started in the same order everywhere. */
static long mpi_exchange(ct_coll *c, const struct ct_coll_msg *sends, int ns, const struct ct_coll_msg *recvs, int nr,
                         ct_error *err)
{
    struct mpi *m = c->impl;
    long ticket = m->started + 1;
    int rc = MPI_SUCCESS;

    for (int i = 0; i < ns + nr && rc == MPI_SUCCESS; i++) {
        const struct ct_coll_msg *g = i < ns ? &sends[i] : &recvs[i - ns];
        MPI_Request *r = slot(m, ticket, NULL);

        if (!r) {
            c->broken = 1;
            return ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory for an exchange's requests");
        }
        rc = i < ns ? MPI_Isend(g->buf, (int)g->bytes, MPI_BYTE, g->peer, TAG_EXCHANGE, m->comm, r)
                    : MPI_Irecv(g->buf, (int)g->bytes, MPI_BYTE, g->peer, TAG_EXCHANGE, m->comm, r);
    }
    m->started = ticket;
    return started(c, rc, "MPI_Isend/MPI_Irecv of a gradient part", err);
}

static long mpi_barrier(ct_coll *c, ct_error *err)
{
    struct mpi *m = c->impl;
    MPI_Request *r = next(c, NULL, err);

    if (!r)
        return CT_ENOMEM;
    return started(c, MPI_Ibarrier(m->comm, r), "MPI_Ibarrier", err);
}

/* The requests of collectives up to ticket: a prefix of the start order. */
static int prefix(const struct mpi *m, long ticket)
{
    int k = 0;

    while (k < m->n && m->tickets[k] <= ticket)
        k++;
    return k;
}

static void drop(struct mpi *m, int k)
{
    if (k <= 0)
        return; /* nothing started: the arrays may not exist (memmove from NULL is undefined) */
    for (int i = 0; i < k; i++)
        free(m->scratch[i]);
    memmove(m->reqs, m->reqs + k, (size_t)(m->n - k) * sizeof(*m->reqs));
    memmove(m->tickets, m->tickets + k, (size_t)(m->n - k) * sizeof(*m->tickets));
    memmove(m->scratch, m->scratch + k, (size_t)(m->n - k) * sizeof(*m->scratch));
    m->n -= k;
}

static long mpi_number(const ct_coll *c, long ticket)
{
    (void)ticket;
    return c->seq + 1;
}

/* Every rank waits once per collective, so the number counts waits. Rank 0 asks only after its own
 * deadline: a rank waiting this long listens for it. */
static int mpi_wait(ct_coll *c, long ticket, const char *what, ct_error *err)
{
    struct mpi *m = c->impl;
    double timeout = c->timeout_s, t0 = ct_time_now();
    double listen_after = timeout > 0 && timeout < 2 ? timeout / 4 : 0.5;
    int k = prefix(m, ticket);

    c->seq++;
    for (;;) {
        int done = 0, flag = 0, rc;
        double waited;

        rc = MPI_Testall(k, m->reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_error(c, rc, what, err);
        if (done) {
            drop(m, k);
            return 0;
        }
        waited = ct_time_now() - t0;
        if (c->rank != 0 && waited > listen_after) {
            MPI_Iprobe(0, TAG_QUERY, m->fault_comm, &flag, MPI_STATUS_IGNORE);
            if (flag)
                return CT_ETIMEOUT;
        }
        if (timeout > 0 && waited >= timeout)
            return CT_ETIMEOUT;
        ct_coll_nap(waited);
    }
}

/* Rank 0 after its deadline: ask every rank, collect answers for `window` seconds, tell those that
 * answered who did not. */
static void zero_find_missing(ct_coll *c, struct mpi *m, double window, struct ct_coll_verdict *v)
{
    int size = c->size, verdict[1 + MAX_NAMED], heard = 1, missing = 0;
    long *answer = calloc((size_t)size, sizeof(long));
    MPI_Request *reqs = calloc((size_t)size * 2, sizeof(MPI_Request));
    double end;

    if (!answer || !reqs) {
        free(answer);
        free(reqs);
        v->found = CT_COLL_NONE_AT_ZERO;
        return;
    }
    for (int r = 0; r < size; r++) {
        answer[r] = r == 0 ? c->seq : -1;
        reqs[r] = reqs[size + r] = MPI_REQUEST_NULL;
        if (r > 0)
            MPI_Isend(&c->seq, 1, MPI_LONG, r, TAG_QUERY, m->fault_comm, &reqs[r]);
    }
    end = ct_time_now() + window;
    while (heard < size && ct_time_now() < end) {
        MPI_Status st;
        long a;
        int flag = 0;

        MPI_Iprobe(MPI_ANY_SOURCE, TAG_HERE, m->fault_comm, &flag, &st);
        if (!flag) {
            usleep(1000);
            continue;
        }
        MPI_Recv(&a, 1, MPI_LONG, st.MPI_SOURCE, TAG_HERE, m->fault_comm, MPI_STATUS_IGNORE);
        if (answer[st.MPI_SOURCE] < 0)
            heard++;
        answer[st.MPI_SOURCE] = a;
    }
    for (int r = 1; r < size; r++) {
        if (answer[r] == c->seq)
            continue;
        if (answer[r] >= 0)
            v->late++;
        if (missing < MAX_NAMED)
            verdict[1 + missing] = r;
        missing++;
    }
    verdict[0] = missing;
    for (int r = 1; r < size; r++)
        if (answer[r] >= 0)
            MPI_Isend(verdict, 1 + MAX_NAMED, MPI_INT, r, TAG_VERDICT, m->fault_comm, &reqs[size + r]);
    /* Let the verdicts leave before this process goes on to abort; never wait on a silent rank. */
    end = ct_time_now() + 2.0;
    for (int r = 1; r < size; r++)
        while (reqs[size + r] != MPI_REQUEST_NULL && ct_time_now() < end) {
            int done = 0;
            MPI_Test(&reqs[size + r], &done, MPI_STATUS_IGNORE);
            if (!done)
                usleep(1000);
        }
    v->found = missing ? CT_COLL_MISSING : CT_COLL_NONE_AT_ZERO;
    v->total = missing;
    memcpy(v->ranks, verdict + 1, (size_t)(missing < MAX_NAMED ? missing : MAX_NAMED) * sizeof(int));
    free(answer);
    free(reqs);
}

/* A rank other than 0, once rank 0 asked (or its own deadline passed): answer, then wait for the
 * verdict. No word from rank 0 within `window` means rank 0 is the one missing. */
static void other_await_verdict(ct_coll *c, struct mpi *m, double window, struct ct_coll_verdict *v)
{
    double end = ct_time_now() + window;
    int verdict[1 + MAX_NAMED], asked = 0;

    for (;;) {
        int flag = 0;

        if (!asked) {
            MPI_Iprobe(0, TAG_QUERY, m->fault_comm, &flag, MPI_STATUS_IGNORE);
            if (flag) {
                long q;
                MPI_Recv(&q, 1, MPI_LONG, 0, TAG_QUERY, m->fault_comm, MPI_STATUS_IGNORE);
                MPI_Send(&c->seq, 1, MPI_LONG, 0, TAG_HERE, m->fault_comm);
                asked = 1;
                end = ct_time_now() + window + 5.0;
            }
        }
        MPI_Iprobe(0, TAG_VERDICT, m->fault_comm, &flag, MPI_STATUS_IGNORE);
        if (flag)
            break;
        if (ct_time_now() >= end) {
            v->found = CT_COLL_ZERO_SILENT;
            v->total = 1;
            v->ranks[0] = 0;
            return;
        }
        usleep(1000);
    }
    MPI_Recv(verdict, 1 + MAX_NAMED, MPI_INT, 0, TAG_VERDICT, m->fault_comm, MPI_STATUS_IGNORE);
    v->found = verdict[0] <= 0 ? CT_COLL_NONE_RELAYED : CT_COLL_MISSING_RELAYED;
    v->total = verdict[0] <= 0 ? 0 : verdict[0];
    memcpy(v->ranks, verdict + 1, (size_t)(v->total < MAX_NAMED ? v->total : MAX_NAMED) * sizeof(int));
}

static void mpi_find_missing(ct_coll *c, struct ct_coll_verdict *v)
{
    double timeout = c->timeout_s;
    /* Long enough for every waiting rank to notice rank 0's question, short beside the timeout. */
    double window = timeout < 1 ? 1 : timeout > 10 ? 10 : timeout;

    if (c->rank == 0)
        zero_find_missing(c, c->impl, window, v);
    else
        other_await_verdict(c, c->impl, window, v);
}

/* A pair's exchange: not a collective, so outside the count and the roll call (every rank would
 * have to take part); past the timeout it names the peer and breaks the world. */
static int p2p_wait(ct_coll *c, MPI_Request *reqs, int to, int from, ct_error *err)
{
    double t0 = ct_time_now(), timeout = c->timeout_s;

    for (;;) {
        int done = 0, rc = MPI_Testall(2, reqs, &done, MPI_STATUSES_IGNORE);
        double waited = ct_time_now() - t0;

        if (rc != MPI_SUCCESS)
            return mpi_error(c, rc, "a point-to-point exchange (MPI_Isend/MPI_Irecv)", err);
        if (done)
            return 0;
        if (timeout > 0 && waited >= timeout) {
            c->broken = 1;
            ct_error_set(err, CT_ETIMEOUT, "ddp-timeout", "ddp: rank %d: a point-to-point exchange with rank %d did not "
                         "complete within %.0f s (--collective-timeout)", c->rank, to >= 0 ? to : from, timeout);
            return ct_error_hint(err, "that rank is stopped, dead or cut off; see its node");
        }
        ct_coll_nap(waited);
    }
}

static int mpi_sendrecv(ct_coll *c, const void *sendbuf, size_t send_bytes, int to, void *recvbuf, size_t recv_bytes,
                        int from, ct_error *err)
{
    struct mpi *m = c->impl;
    MPI_Request reqs[2] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL };
    int rc;

    if (send_bytes > INT_MAX || recv_bytes > INT_MAX)
        return ct_error_set(err, CT_EINVAL, "ddp-p2p-size", "ddp: a point-to-point message of more than 2 GiB");
    if (from >= 0 && (rc = MPI_Irecv(recvbuf, (int)recv_bytes, MPI_BYTE, from, TAG_P2P, m->comm, &reqs[0])) != MPI_SUCCESS)
        return mpi_error(c, rc, "MPI_Irecv", err);
    if (to >= 0 &&
        (rc = MPI_Isend((void *)sendbuf, (int)send_bytes, MPI_BYTE, to, TAG_P2P, m->comm, &reqs[1])) != MPI_SUCCESS)
        return mpi_error(c, rc, "MPI_Isend", err);
    return p2p_wait(c, reqs, to, from, err);
}

/* Open MPI progresses non-blocking collectives inside MPI calls: a poke between layers. */
static int mpi_progress(ct_coll *c, ct_error *err)
{
    struct mpi *m = c->impl;
    int flag, rc;

    for (int i = 0; i < m->n; i++)
        if (m->reqs[i] != MPI_REQUEST_NULL && (rc = MPI_Test(&m->reqs[i], &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
            return mpi_error(c, rc, "MPI_Test", err);
    return 0;
}

static long mpi_last(const ct_coll *c) { return ((const struct mpi *)c->impl)->started; }

/* --- joining -------------------------------------------------------------------------------------- */

/* Every rank's node name into c->hosts (ct_node_name: SLURM's name for it in a step, else the host
 * name, as MPI_Get_processor_name gives it). Without it a timeout still names the ranks. */
static void gather_hosts(ct_coll *c, struct mpi *m, int size)
{
    char mine[CT_COLL_HOST] = "";

    c->hosts = calloc((size_t)size, CT_COLL_HOST);
    if (!c->hosts)
        return;
    ct_node_name(mine, sizeof(mine));
    if (MPI_Allgather(mine, CT_COLL_HOST, MPI_CHAR, c->hosts, CT_COLL_HOST, MPI_CHAR, m->fault_comm) != MPI_SUCCESS) {
        free(c->hosts);
        c->hosts = NULL;
    }
}

/* The cluster environment the connector chose is the authority on the rank layout when it started
 * the processes (srun, mpirun, torchrun, ctrain's subprocess launcher); MPI's answer must agree
 * with it. Workers forked by the fork launcher have no environment of their own: MPI numbers them,
 * all on this node. */
static int check_mpi_layout(ct_coll *c, int rank, int size, ct_error *err)
{
    if (!c->env.creates_processes_externally) {
        if (size != c->size) {
            ct_error_set(err, CT_ECONFLICT, "ddp-world-mismatch", "ddp: MPI sees %d ranks but the plan has %d", size,
                         c->size);
            return ct_error_hint(err, "launch the ranks with ctrain's own launcher, srun --mpi=pmix or mpirun");
        }
        c->rank = rank;
        c->local_rank = rank;
        c->node_rank = 0;
        return 0;
    }
    if (size != c->size) {
        ct_error_set(err, CT_ECONFLICT, "ddp-world-mismatch",
                     "ddp: MPI sees %d ranks but the cluster environment %s says %d", size, c->env_name, c->size);
        return ct_error_hint(err, "with srun use --mpi=pmix so MPI joins the step's tasks");
    }
    if (rank != c->rank) {
        ct_error_set(err, CT_ECONFLICT, "ddp-rank-mismatch",
                     "ddp: MPI numbers this process rank %d but the cluster environment %s says rank %d", rank,
                     c->env_name, c->rank);
        return ct_error_hint(err, "launch with srun --mpi=pmix or mpirun so MPI's ranks are the launcher's");
    }
    c->local_rank = c->env.local_rank;
    c->node_rank = c->env.node_rank;
    return 0;
}

/* The launcher's RANK and LOCAL_RANK against MPI's numbering, asked of the environment
 * (ct_env_check_launcher_ranks). MPI's local rank is this rank's place among the ranks on its
 * host (gather_hosts). */
static int check_launcher_ranks(ct_coll *c, int rank, ct_error *err)
{
    const char *host = c->hosts ? c->hosts + (size_t)rank * CT_COLL_HOST : NULL;
    int local = c->hosts ? 0 : -1;

    for (int r = 0; host && r < rank; r++)
        local += !strcmp(c->hosts + (size_t)r * CT_COLL_HOST, host);
    return ct_env_check_launcher_ranks(NULL, NULL, &c->env, rank, local, host, "ddp", err);
}

static int mpi_open(ct_coll *c, const struct ct_coll_setup *su, ct_error *err)
{
    struct mpi *m = calloc(1, sizeof(*m));
    int inited = 0, provided, rank, size, rc;

    (void)su;
    if (!m)
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory");
    m->comm = m->fault_comm = MPI_COMM_NULL;
    m->bf16_sum = MPI_OP_NULL;
    c->impl = m;
    MPI_Initialized(&inited);
    if (!inited) {
        /* A rank waiting in MPI_Wait spins; when ranks share cores with each other or with other
         * work, the spinning takes the cycles of the very peer it waits for (measured: 2 ranks on
         * 2 busy cores train 1.4x faster yielding). Yielding costs a syscall when a core is idle.
         * Open MPI reads it at MPI_Init; a value the user set wins. */
        setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
        /* Open MPI's non-blocking allreduce (libnbc) runs an in-place one, or any on fewer than 4
         * ranks, as a binomial reduce to rank 0 and a broadcast back: rank 0 adds everything while
         * the others wait, then sends the whole result. Rabenseifner's reduce-scatter + all-gather
         * shares the additions and the copies between the ranks (libnbc falls back to its ring for
         * counts below the ranks):
         * 2 ranks, 2 MiB in place, 0.53 ms -> 0.29 ms (scripts/bench/allreduce-algorithms). Every
         * rank still ends with the same bits. */
        setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
        /* Open MPI 5 starts only in a process whose PMIx client (the pmix environment's) is gone. */
        ct_pmix_client_before_mpi_init();
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS)
            return mpi_error(c, rc, "MPI_Init_thread", err);
        m->owner = 1;
    }
    /* MPI_Init's last barrier does not hold rank 0 under srun, and under Open MPI 5 a message to a
     * rank still inside MPI_Init crashes it (ctrain/pmix.h): every rank leaves MPI_Init before
     * MPI_Comm_dup sends the first one. */
    if ((rc = ct_pmix_after_mpi_init(c->timeout_s, err)))
        return rc;
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &m->comm)) != MPI_SUCCESS)
        return mpi_error(c, rc, "MPI_Comm_dup", err);
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &m->fault_comm)) != MPI_SUCCESS)
        return mpi_error(c, rc, "MPI_Comm_dup", err);
    MPI_Comm_set_errhandler(m->fault_comm, MPI_ERRORS_RETURN);
    if ((rc = MPI_Op_create(bf16_sum, 1, &m->bf16_sum)) != MPI_SUCCESS) {
        m->bf16_sum = MPI_OP_NULL;
        return mpi_error(c, rc, "MPI_Op_create of the bf16 sum", err);
    }
    MPI_Comm_rank(m->comm, &rank);
    MPI_Comm_size(m->comm, &size);
    gather_hosts(c, m, size);
    if ((rc = check_mpi_layout(c, rank, size, err)) || (rc = check_launcher_ranks(c, rank, err)))
        return rc;
    return 0;
}

static void mpi_close(ct_coll *c)
{
    struct mpi *m = c->impl;
    int finalized = 0;

    if (!m)
        return;
    if (m->bf16_sum != MPI_OP_NULL)
        MPI_Op_free(&m->bf16_sum);
    if (m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    if (m->fault_comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->fault_comm);
    MPI_Finalized(&finalized);
    if (m->owner && !finalized)
        MPI_Finalize();
    m->owner = 0;
}

static void abort_stuck(int sig)
{
    static const char msg[] = "ctrain: MPI_Abort did not return: the launcher cannot be reached (a cut link, a dead "
                              "node?); this rank exits on its own\n";

    (void)sig;
    if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
        /* nothing more to say */
    }
    _exit(1);
}

/* This process joined MPI (or owns it): a broken world ends the job. */
static int mpi_ends_job(const ct_coll *c) { return c->impl != NULL; }

/* After a timeout or a failed collective: end the whole job now (srun, mpirun and ctrain's
 * launchers all turn MPI_Abort into ending every rank), after the caller printed why. The abort
 * goes through the PMIx server to the launcher; on a rank cut off from it (a pulled cable: srun
 * and slurmctld are on the other side) it waits for network timeouts, so it gets ABORT_WAIT_S and
 * then this rank exits anyway: the launcher ends the others when it hears. */
static void mpi_destroy(ct_coll *c)
{
    struct mpi *m = c->impl;

    if (c->broken && m) {
        signal(SIGALRM, abort_stuck);
        alarm(ABORT_WAIT_S);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (m) {
        drop(m, m->n);
        free(m->reqs);
        free(m->tickets);
        free(m->scratch);
        free(m);
    }
    c->impl = NULL;
}

const struct ct_coll_ops ct_coll_mpi = {
    .name = "mpi",
    .sums = 1,
    .bf16 = 1,
    .open = mpi_open,
    .allreduce = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .allgather = mpi_allgather,
    .reduce_scatter = mpi_reduce_scatter,
    .gather = mpi_gather,
    .exchange = mpi_exchange,
    .barrier = mpi_barrier,
    .sendrecv = mpi_sendrecv,
    .number = mpi_number,
    .wait = mpi_wait,
    .find_missing = mpi_find_missing,
    .last = mpi_last,
    .progress = mpi_progress,
    .close = mpi_close,
    .ends_job = mpi_ends_job,
    .destroy = mpi_destroy,
};
