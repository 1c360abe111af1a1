/* SPDX-License-Identifier: BSD-3-Clause */
/* ddp: one process per device, gradients summed across ranks (each rank's backward took its share of the
 * global mean; NCCL averages) by MPI over the PMIx-provided world.
 *
 * Any launcher: srun --mpi=pmix, mpirun and ctrain's own launchers all give each rank a PMIx
 * server, so MPI_Init joins the same world everywhere. Gradients are cut into buckets of whole
 * tensors from the end of the array (backward produces them in that order); a bucket's non-blocking
 * allreduce starts the moment backward has produced all of it, and grad_sync waits for the rest —
 * communication overlaps the backward of earlier layers. MPI errors come back as return codes
 * (MPI_ERRORS_RETURN) and become messages naming the call; nothing aborts the job behind the
 * user's back.
 *
 * Collective timeout: every collective is non-blocking and waited for with a deadline
 * (ct_strategy_set_collective_timeout). When it passes, the ranks find out who never arrived on a
 * second communicator: rank 0 asks every rank which collective it waits in, the ranks that wait
 * answer, rank 0 sends them the list of the silent ones, and every rank fails with the same message.
 * A rank that times out and hears nothing from rank 0 names rank 0. After that (or any MPI error)
 * the communicator is broken: teardown skips MPI_Finalize (it would wait for the missing rank) and
 * freeing the strategy calls MPI_Abort, which makes srun, mpirun or ctrain's launcher end the job.
 *
 * On cuda the gradients live on the GPU and NCCL moves them (ddp_nccl.c): the same buckets, each
 * started as it closes; MPI still carries the small host-side collectives (metrics, barriers).
 *
 * Without a PMIx server (torchrun, Kubeflow, processes started by hand) the backend is gloo
 * (option backend=, Lightning's process_group_backend): the ranks meet in a TCPStore at
 * MASTER_ADDR:MASTER_PORT, as PyTorch's env:// rendezvous, and gloo sums each bucket as it
 * closes. gloo's collectives block, so (as PyTorch's ProcessGroupGloo) they run on a worker thread
 * that owns the gloo context, in the order the buckets closed, while backward goes on; grad_sync
 * waits for them (overlap=0: no thread, each bucket summed in grad_sync). Its context's timeout
 * (--collective-timeout) bounds every one; the wait reports a failure on the main thread, where
 * the roll call in the store names the missing ranks.
 */
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
#include "engine/nn/bf16_inline.h"
#include "engine/events/event.h"
#include "engine/strategies/ddp_gloo.h"
#include "engine/strategies/ddp_internal.h"


/* ---------------------------------------------------------------- collective timeout */

static void sleep_for(double waited)
{
    /* Spin first (a collective usually completes in microseconds), then back off: a rank waiting
     * for a stopped peer must not take the cores from the ranks that still compute. */
    if (waited > 1.0)
        usleep(2000);
    else if (waited > 0.01)
        usleep(100);
}

/* "1, 3 and 7" (+ " and N more") into buf. */
static void rank_list(const int *ranks, int count, int total, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int i = 0; i < count && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%d", i == 0 ? "" : i == count - 1 && total == count ? " and " : ", ",
                                ranks[i]);
    if (total > count && len < size)
        snprintf(buf + len, size - len, " and %d more", total - count);
}

/* " (on n2)", " (on n2, n3)": the distinct hosts of those ranks, into buf ("" when unknown). On a
 * cluster the lost host is what an admin looks at first (a cut link, a dead node). */
static void host_list(const struct ddp *d, const int *ranks, int count, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    if (!d->hosts)
        return;
    for (int i = 0; i < count && len < size; i++) {
        const char *h = d->hosts + (size_t)ranks[i] * CT_DDP_HOST;
        int seen = 0;

        for (int j = 0; j < i; j++)
            seen |= !strcmp(h, d->hosts + (size_t)ranks[j] * CT_DDP_HOST);
        if (!seen)
            len += (size_t)snprintf(buf + len, size - len, "%s%s", len == 0 ? " (on " : ", ", h);
    }
    if (len > 0 && len < size)
        snprintf(buf + len, size - len, ")");
}

/* Every rank's node name into d->hosts (ct_node_name: SLURM's name for it in a step, else the host
 * name, as MPI_Get_processor_name gives it). Without it a timeout still names the ranks. */
static void gather_hosts(struct ddp *d, int size)
{
    char mine[CT_DDP_HOST] = "";

    d->hosts = calloc((size_t)size, CT_DDP_HOST);
    if (!d->hosts)
        return;
    ct_node_name(mine, sizeof(mine));
    if (MPI_Allgather(mine, CT_DDP_HOST, MPI_CHAR, d->hosts, CT_DDP_HOST, MPI_CHAR, d->fault_comm) != MPI_SUCCESS) {
        free(d->hosts);
        d->hosts = NULL;
    }
}

/* The missing ranks into the caller's trace, for the hang record (engine/health/fit/hang.c). */
static void trace_missing(struct ddp *d, const int *ranks, int count)
{
    if (!d->trace)
        return;
    d->trace->timed_out = 1;
    d->trace->n_missing = count;
    for (int i = 0; i < count && i < CT_TRACE_MAX_MISSING; i++) {
        d->trace->missing[i] = ranks[i];
        ct_str_copy(d->trace->missing_host[i], sizeof(d->trace->missing_host[i]),
                    d->hosts ? d->hosts + (size_t)ranks[i] * CT_DDP_HOST : "");
    }
    ct_sv_event_missing(d->trace->seq, d->trace->what, d->trace->missing, d->trace->missing_host, d->trace->n_missing);
}

static int timeout_error(struct ddp *d, const char *what, double timeout, const char *who, ct_error *err)
{
    d->broken = 1;
    if (d->trace)
        d->trace->timed_out = 1;
    ct_error_set(err, CT_ETIMEOUT, "collective-timeout", "ddp: %s (collective #%ld) did not complete within %g s: %s",
                 what, d->seq, timeout, who);
    return ct_error_hint(err, "that rank is stopped (SIGSTOP), hung or dead; ending every rank. If it is only slow "
                              "(a long checkpoint write), raise --collective-timeout");
}

/* Rank 0 after its deadline: ask every rank, collect answers for `window` seconds, tell those that
 * answered who did not. */
static int zero_find_missing(struct ddp *d, int size, const char *what, double timeout, double window, ct_error *err)
{
    long *answer = calloc((size_t)size, sizeof(long));
    MPI_Request *reqs = calloc((size_t)size * 2, sizeof(MPI_Request));
    int verdict[1 + MAX_NAMED], heard = 1, missing = 0, late = 0;
    char list[512], hosts[256], who[800];
    double end;

    if (!answer || !reqs) {
        free(answer);
        free(reqs);
        return timeout_error(d, what, timeout, "(out of memory finding the missing ranks)", err);
    }
    for (int r = 0; r < size; r++) {
        answer[r] = r == 0 ? d->seq : -1;
        reqs[r] = reqs[size + r] = MPI_REQUEST_NULL;
        if (r > 0)
            MPI_Isend(&d->seq, 1, MPI_LONG, r, TAG_QUERY, d->fault_comm, &reqs[r]);
    }
    end = ct_time_now() + window;
    while (heard < size && ct_time_now() < end) {
        MPI_Status st;
        long v;
        int flag = 0;

        MPI_Iprobe(MPI_ANY_SOURCE, TAG_HERE, d->fault_comm, &flag, &st);
        if (!flag) {
            usleep(1000);
            continue;
        }
        MPI_Recv(&v, 1, MPI_LONG, st.MPI_SOURCE, TAG_HERE, d->fault_comm, MPI_STATUS_IGNORE);
        if (answer[st.MPI_SOURCE] < 0)
            heard++;
        answer[st.MPI_SOURCE] = v;
    }
    for (int r = 1; r < size; r++) {
        if (answer[r] == d->seq)
            continue;
        if (answer[r] >= 0)
            late++;
        if (missing < MAX_NAMED)
            verdict[1 + missing] = r;
        missing++;
    }
    verdict[0] = missing;
    trace_missing(d, verdict + 1, missing < MAX_NAMED ? missing : MAX_NAMED);
    for (int r = 1; r < size; r++)
        if (answer[r] >= 0)
            MPI_Isend(verdict, 1 + MAX_NAMED, MPI_INT, r, TAG_VERDICT, d->fault_comm, &reqs[size + r]);
    /* Let the verdicts leave before this process goes on to abort; never wait on a silent rank. */
    end = ct_time_now() + 2.0;
    for (int r = 1; r < size; r++)
        while (reqs[size + r] != MPI_REQUEST_NULL && ct_time_now() < end) {
            int done = 0;
            MPI_Test(&reqs[size + r], &done, MPI_STATUS_IGNORE);
            if (!done)
                usleep(1000);
        }
    rank_list(verdict + 1, missing < MAX_NAMED ? missing : MAX_NAMED, missing, list, sizeof(list));
    host_list(d, verdict + 1, missing < MAX_NAMED ? missing : MAX_NAMED, hosts, sizeof(hosts));
    if (missing == 0)
        snprintf(who, sizeof(who), "every rank answered rank 0 after the deadline (a rank was slower than the timeout)");
    else
        snprintf(who, sizeof(who), "rank%s %s of %d did not arrive%s%s", missing == 1 ? "" : "s", list, size, hosts,
                 late ? " (some wait in another collective)" : "");
    free(answer);
    free(reqs);
    return timeout_error(d, what, timeout, who, err);
}

/* A rank other than 0, once rank 0 asked (or its own deadline passed): answer, then wait for the
 * verdict. No word from rank 0 within `window` means rank 0 is the one missing. */
static int other_await_verdict(struct ddp *d, int asked, const char *what, double timeout, double window, ct_error *err)
{
    double end = ct_time_now() + window;
    int verdict[1 + MAX_NAMED], zero = 0;
    char list[512], hosts[256], who[800];

    for (;;) {
        int flag = 0;

        if (!asked) {
            MPI_Iprobe(0, TAG_QUERY, d->fault_comm, &flag, MPI_STATUS_IGNORE);
            if (flag) {
                long q;
                MPI_Recv(&q, 1, MPI_LONG, 0, TAG_QUERY, d->fault_comm, MPI_STATUS_IGNORE);
                MPI_Send(&d->seq, 1, MPI_LONG, 0, TAG_HERE, d->fault_comm);
                asked = 1;
                end = ct_time_now() + window + 5.0;
            }
        }
        MPI_Iprobe(0, TAG_VERDICT, d->fault_comm, &flag, MPI_STATUS_IGNORE);
        if (flag)
            break;
        if (ct_time_now() >= end) {
            host_list(d, &zero, 1, hosts, sizeof(hosts));
            trace_missing(d, &zero, 1);
            snprintf(who, sizeof(who), "rank 0%s did not arrive and did not answer (other ranks may be missing too)",
                     hosts);
            return timeout_error(d, what, timeout, who, err);
        }
        usleep(1000);
    }
    MPI_Recv(verdict, 1 + MAX_NAMED, MPI_INT, 0, TAG_VERDICT, d->fault_comm, MPI_STATUS_IGNORE);
    trace_missing(d, verdict + 1, verdict[0] <= 0 ? 0 : verdict[0] < MAX_NAMED ? verdict[0] : MAX_NAMED);
    if (verdict[0] <= 0)
        return timeout_error(d, what, timeout, "rank 0 found every rank waiting (a rank was slower than the timeout)",
                             err);
    rank_list(verdict + 1, verdict[0] < MAX_NAMED ? verdict[0] : MAX_NAMED, verdict[0], list, sizeof(list));
    host_list(d, verdict + 1, verdict[0] < MAX_NAMED ? verdict[0] : MAX_NAMED, hosts, sizeof(hosts));
    snprintf(who, sizeof(who), "rank%s %s did not arrive%s (as rank 0 found)", verdict[0] == 1 ? "" : "s", list, hosts);
    return timeout_error(d, what, timeout, who, err);
}

static int wait_deadline(ct_strategy *s, MPI_Request *reqs, int n, const char *what, ct_error *err);

/* Wait for the requests of one collective, within the timeout. Every rank calls this once per
 * collective, in the same order, so d->seq names the same collective everywhere. The caller's trace
 * says which one this rank waits in while it waits (plain stores: a hang dump reads them). */
int ct_ddp_wait(ct_strategy *s, MPI_Request *reqs, int n, const char *what, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    d->trace = s->trace;
    if (d->trace) {
        d->trace->seq = d->seq + 1;
        d->trace->what = what;
        d->trace->wait_since = ct_time_now();
        d->trace->waiting = 1;
    }
    rc = wait_deadline(s, reqs, n, what, err);
    if (d->trace && !rc)
        d->trace->waiting = 0;
    return rc;
}

static int wait_deadline(ct_strategy *s, MPI_Request *reqs, int n, const char *what, ct_error *err)
{
    struct ddp *d = s->impl;
    double timeout = s->collective_timeout_s, t0 = ct_time_now();
    /* Long enough for every waiting rank to notice rank 0's question, short beside the timeout. */
    double window = timeout < 1 ? 1 : timeout > 10 ? 10 : timeout;
    double listen_after = timeout > 0 && timeout < 2 ? timeout / 4 : 0.5;
    int rank = s->global_rank, size = s->world_size;

    d->seq++;
    for (;;) {
        int done = 0, flag = 0, rc;
        double waited;

        rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            d->broken = 1;
            return ct_ddp_mpi_error(rc, what, err);
        }
        if (done)
            return 0;
        waited = ct_time_now() - t0;
        /* Rank 0 asks only after its own deadline: a rank waiting this long listens for it. */
        if (rank != 0 && waited > listen_after) {
            MPI_Iprobe(0, TAG_QUERY, d->fault_comm, &flag, MPI_STATUS_IGNORE);
            if (flag)
                return other_await_verdict(d, 0, what, timeout, window, err);
        }
        if (timeout > 0 && waited >= timeout)
            return rank == 0 ? zero_find_missing(d, size, what, timeout, window, err)
                             : other_await_verdict(d, 0, what, timeout, window, err);
        sleep_for(waited);
    }
}

/* --- the seam to gloo: ranks without a PMIx server ----------------------------------------------- */

/* One rank and no process group: collectives are identities. */
int ct_ddp_single(const struct ddp *d) { return d->comm == MPI_COMM_NULL && !d->gloo; }

/* A gloo call's result; a failed one leaves the group broken (no more collectives). */
static int gloo_call(struct ddp *d, int rc)
{
    if (rc)
        d->broken = 1;
    return rc;
}

#ifdef CT_HAVE_GLOO
/* Bound on the store's and gloo's waits when --collective-timeout is 0 (as PyTorch's 30 min is too
 * long to wait for a rank that never started). */
#define GLOO_TIMEOUT_S 300.0

/* The store's keys of the roll call after a gloo timeout: every rank that timed out in collective
 * #seq sets its own; a rank that does not within the window is missing. Each rank's host is set
 * once at the start. */
static void roll_key(char *buf, size_t size, long seq, int rank) { snprintf(buf, size, "timeout/%ld/%d", seq, rank); }
static void host_key(char *buf, size_t size, int rank) { snprintf(buf, size, "host/%d", rank); }

/* Where rank r runs, from the store, into d->hosts (allocated here: gloo has no MPI_Allgather of
 * the names at start, and asking only for the missing ranks costs nothing while all is well). */
static void store_host(struct ddp *d, int size, int r)
{
    char key[32];
    const char *const keys[1] = { key };
    void *val = NULL;
    size_t len = 0;
    int ready = 0;
    ct_error ignored;

    if (!d->hosts && !(d->hosts = calloc((size_t)size, CT_DDP_HOST)))
        return;
    host_key(key, sizeof(key), r);
    if (ct_tcpstore_check(d->store, keys, 1, &ready, &ignored) == 0 && ready &&
        ct_tcpstore_get(d->store, key, &val, &len, &ignored) == 0)
        ct_str_copy(d->hosts + (size_t)r * CT_DDP_HOST, CT_DDP_HOST, val);
    free(val);
    if (!d->hosts[(size_t)r * CT_DDP_HOST])
        ct_str_copy(d->hosts + (size_t)r * CT_DDP_HOST, CT_DDP_HOST, "?");
}

/* After gloo timed out in collective #d->seq (what): answer the roll call in the store, wait for
 * the others for a window, and name those that never answered, with their hosts, as the MPI path
 * does. The store may live in a stopped rank 0 (it is rank 0's unless torchrun's agent hosts it):
 * when it does not answer, rank 0 is named. */
static int gloo_find_missing(ct_strategy *s, struct ddp *d, const char *what, ct_error *err)
{
    double timeout = s->collective_timeout_s > 0 ? s->collective_timeout_s : GLOO_TIMEOUT_S;
    double window = timeout < 1 ? 1 : timeout > 10 ? 10 : timeout, end;
    int size = s->world_size, missing = 0, named[MAX_NAMED], zero = 0, ready = 0;
    char key[48], list[512], hosts[256], who[800];
    const char *const keys[1] = { key };
    ct_error ignored;

    ct_tcpstore_set_timeout(d->store, window);
    roll_key(key, sizeof(key), d->seq, s->global_rank);
    /* A set has no reply in PyTorch's protocol: the ping's says whether the store still serves. */
    if (ct_tcpstore_set(d->store, key, "1", 1, &ignored) != 0 || ct_tcpstore_ping(d->store, &ignored) != 0) {
        trace_missing(d, &zero, 1);
        snprintf(who, sizeof(who), "rank 0 (on %s) did not arrive, and its store at %s does not answer (other ranks "
                 "may be missing too)", s->env_info.main_address, ct_tcpstore_address(d->store));
        return timeout_error(d, what, timeout, who, err);
    }
    end = ct_time_now() + window;
    for (int r = 0; r < size; r++) {
        int rc = 0;

        roll_key(key, sizeof(key), d->seq, r);
        ready = r == s->global_rank;
        /* The window runs once for all: a rank that answered is seen at once. */
        while (!ready && (rc = ct_tcpstore_check(d->store, keys, 1, &ready, &ignored)) == 0 && !ready &&
               ct_time_now() < end)
            usleep(50 * 1000);
        if (rc != 0)
            break; /* the store stopped answering meanwhile: name those found so far */
        if (ready)
            continue;
        if (missing < MAX_NAMED)
            named[missing] = r;
        missing++;
    }
    if (missing == 0) {
        trace_missing(d, NULL, 0);
        return timeout_error(d, what, timeout, "every rank answered after the deadline (a rank was slower than the "
                             "timeout)", err);
    }
    for (int i = 0; i < missing && i < MAX_NAMED; i++)
        store_host(d, size, named[i]);
    trace_missing(d, named, missing < MAX_NAMED ? missing : MAX_NAMED);
    rank_list(named, missing < MAX_NAMED ? missing : MAX_NAMED, missing, list, sizeof(list));
    host_list(d, named, missing < MAX_NAMED ? missing : MAX_NAMED, hosts, sizeof(hosts));
    snprintf(who, sizeof(who), "rank%s %s of %d did not arrive%s", missing == 1 ? "" : "s", list, size, hosts);
    return timeout_error(d, what, timeout, who, err);
}

/* Wait for gloo's collectives up to ticket (they run in order, on the context's worker thread
 * unless overlap=0). Tickets count the collectives as d->seq does, the same on every rank: a
 * timeout in one finds who is missing in the roll call of its number. */
int ct_ddp_gloo_wait(ct_strategy *s, long ticket, const char *what, ct_error *err)
{
    struct ddp *d = s->impl;
    long failed = ticket;
    int rc;

    /* Where this rank waits, for a hang record, as ct_ddp_wait says it. */
    d->trace = s->trace;
    if (d->trace) {
        d->trace->seq = ticket;
        d->trace->what = what;
        d->trace->wait_since = ct_time_now();
        d->trace->waiting = 1;
    }
    rc = ct_gloo_wait(d->gloo, ticket, &failed, err);
    if (d->trace && !rc)
        d->trace->waiting = 0;
    if (d->seq < (rc ? failed : ticket))
        d->seq = rc ? failed : ticket;
    if (rc == CT_ETIMEOUT && d->store)
        return d->broken = 1, gloo_find_missing(s, d, what, err);
    return gloo_call(d, rc);
}
#else
int ct_ddp_gloo_wait(ct_strategy *s, long ticket, const char *what, ct_error *err)
{
    (void)ticket;
    (void)what;
    /* Never reached: without gloo there is no context to wait on (gloo_setup refuses the backend). */
    ct_error_set(err, CT_EINTERNAL, "ddp-no-gloo", "ddp: a gloo collective in a ctrain built without gloo");
    return gloo_call(s->impl, ct_error_hint(err, "this is a bug in ctrain; please report it"));
}
#endif

#ifdef CT_HAVE_GLOO

/* This rank's host name in the store, for a timeout's message on the other ranks. */
static void publish_host(struct ddp *d, int rank)
{
    char key[32], name[CT_DDP_HOST] = "";
    ct_error ignored;

    if (ct_node_name(name, sizeof(name)) && !name[0])
        return;
    host_key(key, sizeof(key), rank);
    (void)ct_tcpstore_set(d->store, key, name, strlen(name), &ignored);
}

static int gloo_setup(ct_strategy *s, struct ddp *d, ct_error *err)
{
    double timeout = s->collective_timeout_s > 0 ? s->collective_timeout_s : GLOO_TIMEOUT_S;
    const char *addr = s->env_info.main_address;
    int port = s->env_info.main_port, rc;

    if (!addr[0] || port <= 0) {
        ct_error_set(err, CT_EINVAL, "ddp-gloo-address", "ddp (gloo): rank %d: no MASTER_ADDR/MASTER_PORT to meet "
                     "the other ranks at (cluster environment: %s)", s->global_rank, s->env_name);
        return ct_error_hint(err, ct_env_pmix_started(NULL, NULL) ? "a PMIx server started these ranks: use backend=mpi (or auto), "
                             "or set MASTER_ADDR and MASTER_PORT, the same on every rank"
                             : "set MASTER_ADDR and MASTER_PORT to rank 0's host and a free port on it, the same "
                             "on every rank");
    }
    if ((rc = ct_strategy_store_open(s, timeout, &d->store_srv, &d->store, err)))
        return rc;
    /* overlap (ddp_sharded: always) runs the collectives on the context's worker thread. */
    rc = ct_gloo_create(d->store, s->global_rank, s->world_size, timeout, d->overlap, &d->gloo, err);
    if ((rc = gloo_call(d, rc)))
        return rc;
    publish_host(d, s->global_rank);
    return 0;
}
#else
static int gloo_setup(ct_strategy *s, struct ddp *d, ct_error *err)
{
    ct_error_set(err, CT_ENOTAVAIL, "ddp-no-gloo", "%s: backend %s%s, but this ctrain was built without gloo%s",
                 s->ops->name, d->backend == CT_DDP_NCCL ? "nccl" : "gloo", d->backend_why,
                 d->backend == CT_DDP_NCCL ? " (which carries the host-side values where no PMIx server is)" : "");
    return ct_error_hint(err, "install libgloo-dev (scripts/install-deps) and rebuild, or launch with a PMIx "
                         "server (srun --mpi=pmix, mpirun) for backend=mpi");
}
#endif

static void gloo_free(struct ddp *d)
{
#ifdef CT_HAVE_GLOO
    ct_gloo_free(d->gloo);
#endif
    d->gloo = NULL;
    ct_tcpstore_close(d->store);
    d->store = NULL;
    ct_tcpstore_server_stop(d->store_srv);
    d->store_srv = NULL;
}

/* --- the seam to NCCL: when the accelerator keeps the model in device memory ------------------ */
/* Bound on the NCCL bootstrap and each wait when --collective-timeout is 0. */
#define NCCL_TIMEOUT_S 600.0

static int nccl_setup(ct_strategy *s, struct ddp *d, ct_error *err)
{
    if (!s->accelerator->device_memory)
        return 0;
    /* --collective-timeout bounds NCCL's waits too (0 means wait forever: keep NCCL's own bound).
     * Without a PMIx server the id travels through the store gloo_setup joined (d->store). */
    return ct_nccl_create(s->global_rank, s->world_size,
                          s->collective_timeout_s > 0 ? s->collective_timeout_s : NCCL_TIMEOUT_S, d->store, &d->nccl,
                          err);
}
static int nccl_broadcast(struct ddp *d, float *p, size_t n, ct_error *err) { return ct_nccl_broadcast(d->nccl, p, n, 0, err); }
static int nccl_start(struct ddp *d, struct bucket *b, ct_error *err)
{
    return ct_nccl_allreduce_start(d->nccl, d->grads + b->start, b->len, err);
}
static int nccl_wait(struct ddp *d, ct_error *err) { return ct_nccl_wait(d->nccl, err); }
static void nccl_free(struct ddp *d) { ct_nccl_free(d->nccl); d->nccl = NULL; }

int ct_ddp_mpi_error(int rc, const char *call, ct_error *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof(text), "MPI error %d", rc);
    ct_error_set(err, CT_ECOMM, "mpi", "ddp: %s failed: %s", call, text);
    return ct_error_hint(err, "a peer rank probably died or lost its connection; see the other ranks' messages");
}

/* A 0/1 option; dflt where the strategy's schema lacks the key (ddp_sharded has no overlap). */
static int option_flag(const ct_config *opts, const char *key, int dflt)
{
    const char *v = ct_config_text(opts, key);

    return v[0] ? strcmp(v, "0") != 0 : dflt;
}

static int parse_backend(const char *v, enum ct_ddp_backend *out, ct_error *err)
{
    static const char *const names[] = { "auto", "mpi", "gloo", "nccl", NULL };

    if (!v[0]) {
        *out = CT_DDP_AUTO;   /* a variant whose schema has no backend */
        return 0;
    }
    for (int i = 0; names[i]; i++) {
        if (!strcmp(v, names[i])) {
            *out = (enum ct_ddp_backend)i;
            return 0;
        }
    }
    ct_error_set(err, CT_EINVAL, "ddp-backend", "ddp: backend '%s' is not one of auto, mpi, gloo, nccl", v);
    return ct_error_hint(err, "e.g. --strategy ddp:backend=gloo; auto takes mpi where a PMIx server started the "
                         "ranks, else gloo on cpu and nccl on cuda");
}

static int ct_ddp_init(ct_strategy *s, ct_error *err)
{
    struct ddp *d;
    ct_config opts;
    int rc;

    /* The values and their defaults are the descriptor's schema (engine/registry/strategy_ddp.c). */
    if ((rc = ct_strategy_options(s, &opts, err)))
        return rc;
    if (!(d = calloc(1, sizeof(*d))))
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory");
    d->bucket_mb = ct_config_double(&opts, "bucket_mb");
    d->overlap = option_flag(&opts, "overlap", 1);
    d->find_unused = option_flag(&opts, "find_unused", 0);
    if ((rc = parse_backend(ct_config_text(&opts, "backend"), &d->backend, err))) {
        free(d);
        return rc;
    }
    d->reqs_per_bucket = 1;
    d->comm = MPI_COMM_NULL;
    d->fault_comm = MPI_COMM_NULL;
    d->mpi_sum = MPI_SUM;
    s->impl = d;
    return 0;
}

/* The cluster environment the connector chose is the authority on the rank layout when it started
 * the processes (srun, mpirun, torchrun, ctrain's subprocess launcher); MPI's answer must agree
 * with it. Workers forked by the fork launcher have no environment of their own: MPI numbers them,
 * all on this node. */
static int check_mpi_layout(ct_strategy *s, int rank, int size, ct_error *err)
{
    if (!s->env_info.creates_processes_externally) {
        if (size != s->world_size) {
            ct_error_set(err, CT_ECONFLICT, "ddp-world-mismatch", "ddp: MPI sees %d ranks but the plan has %d", size,
                         s->world_size);
            return ct_error_hint(err, "launch the ranks with ctrain's own launcher, srun --mpi=pmix or mpirun");
        }
        s->global_rank = rank;
        s->local_rank = rank;
        s->node_rank = 0;
        return 0;
    }
    if (size != s->world_size) {
        ct_error_set(err, CT_ECONFLICT, "ddp-world-mismatch",
                     "ddp: MPI sees %d ranks but the cluster environment %s says %d", size, s->env_name,
                     s->world_size);
        return ct_error_hint(err, "with srun use --mpi=pmix so MPI joins the step's tasks");
    }
    if (rank != s->global_rank) {
        ct_error_set(err, CT_ECONFLICT, "ddp-rank-mismatch",
                     "ddp: MPI numbers this process rank %d but the cluster environment %s says rank %d", rank,
                     s->env_name, s->global_rank);
        return ct_error_hint(err, "launch with srun --mpi=pmix or mpirun so MPI's ranks are the launcher's");
    }
    s->local_rank = s->env_info.local_rank;
    s->node_rank = s->env_info.node_rank;
    return 0;
}

/* The launcher's RANK and LOCAL_RANK against MPI's numbering, asked of the environment
 * (ct_env_check_launcher_ranks). MPI's local rank is this rank's place among the ranks on its
 * host (gather_hosts). */
static int check_launcher_ranks(ct_strategy *s, const struct ddp *d, int rank, ct_error *err)
{
    const char *host = d->hosts ? d->hosts + (size_t)rank * CT_DDP_HOST : NULL;
    int local = d->hosts ? 0 : -1;

    for (int r = 0; host && r < rank; r++)
        local += !strcmp(d->hosts + (size_t)r * CT_DDP_HOST, host);
    return ct_env_check_launcher_ranks(NULL, NULL, &s->env_info, rank, local, host, "ddp", err);
}

/* backend=auto: mpi where a PMIx server started the ranks (MPI_Init joins them), else gloo on cpu
 * and nccl on cuda; then whether the backend can work here. */
static int resolve_backend(ct_strategy *s, struct ddp *d, ct_error *err)
{
    static const char *const names[] = { "auto", "mpi", "gloo", "nccl" };
    int pmix = ct_env_pmix_started(NULL, NULL), cuda = s->accelerator->device_memory;
    const char *name;

    if (d->backend == CT_DDP_AUTO) {
        d->backend = pmix ? CT_DDP_MPI : cuda ? CT_DDP_NCCL : CT_DDP_GLOO;
        snprintf(d->backend_why, sizeof(d->backend_why), " (auto: %s, accelerator %s)",
                 pmix ? "a PMIx server started the ranks" : "no PMIx server", s->accelerator_name);
    }
    name = names[d->backend];
    if (d->backend == CT_DDP_GLOO && cuda) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-backend", "%s: backend gloo%s runs on cpu tensors only, and the "
                     "accelerator is cuda", s->ops->name, d->backend_why);
        return ct_error_hint(err, "use --accelerator cpu, or launch with a PMIx server (srun --mpi=pmix, mpirun) "
                             "for nccl");
    }
    if (d->backend == CT_DDP_NCCL && !cuda) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-backend", "ddp: backend nccl needs the cuda accelerator, this run's "
                     "is %s", s->accelerator_name);
        return ct_error_hint(err, "use --accelerator cuda, or backend=gloo or mpi on cpu");
    }
    if (d->backend == CT_DDP_MPI && !pmix) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-no-pmix",
                     "ddp: %d ranks but no PMIx server to join them (cluster environment: %s), which backend %s%s "
                     "needs", s->world_size, s->env_name, name, d->backend_why);
        return ct_error_hint(err, cuda ? "launch with srun --mpi=pmix, mpirun, or `ctrain fit --devices N` on one node"
                                       : "launch with srun --mpi=pmix, mpirun, or `ctrain fit --devices N` on one "
                                         "node; or use --strategy ddp:backend=gloo to meet at MASTER_ADDR:MASTER_PORT");
    }
    return 0;
}

/* Ranks come from MPI; where the cluster environment knows the node layout (srun, mpirun, our
 * subprocess launcher) local and node ranks come from it, else (forked workers) all are local. */
static int ct_ddp_setup_environment(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    int inited = 0, provided, rank, size, rc;

    if (s->world_size == 1 && !ct_env_pmix_started(NULL, NULL)) {
        /* One rank and no PMIx server: nothing to join; collectives are identities. */
        s->global_rank = s->local_rank = s->node_rank = 0;
        s->device = s->devices[0];
        return s->accelerator->set_device(s->device, err);
    }
    if ((rc = resolve_backend(s, d, err)))
        return rc;
    if (d->backend == CT_DDP_GLOO || (d->backend == CT_DDP_NCCL && !ct_env_pmix_started(NULL, NULL))) {
        /* The launcher's layout is the only one there is: no MPI to number the ranks. Under nccl
         * (cuda, no PMIx server: compiled, not yet run on a GPU) gloo carries the host-side values
         * (metrics, the stop agreement, broadcasts) and its store NCCL's id, as PyTorch's
         * process groups share one store. */
        s->local_rank = s->env_info.local_rank;
        s->node_rank = s->env_info.node_rank;
        s->device = s->devices[s->local_rank < s->n_devices ? s->local_rank : 0];
        if ((rc = s->accelerator->set_device(s->device, err)) || (rc = gloo_setup(s, d, err)))
            return rc;
        return d->backend == CT_DDP_NCCL ? nccl_setup(s, d, err) : 0;
    }
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
            return ct_ddp_mpi_error(rc, "MPI_Init_thread", err);
        d->mpi_owner = 1;
    }
    /* MPI_Init's last barrier does not hold rank 0 under srun, and under Open MPI 5 a message to a
     * rank still inside MPI_Init crashes it (ctrain/pmix.h): every rank leaves MPI_Init before
     * MPI_Comm_dup sends the first one. */
    if ((rc = ct_pmix_after_mpi_init(s->collective_timeout_s, err)))
        return rc;
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &d->comm);
    if (rc != MPI_SUCCESS)
        return ct_ddp_mpi_error(rc, "MPI_Comm_dup", err);
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &d->fault_comm);
    if (rc != MPI_SUCCESS)
        return ct_ddp_mpi_error(rc, "MPI_Comm_dup", err);
    MPI_Comm_set_errhandler(d->fault_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &rank);
    MPI_Comm_size(d->comm, &size);
    gather_hosts(d, size);
    if ((rc = check_mpi_layout(s, rank, size, err)) || (rc = check_launcher_ranks(s, d, rank, err)))
        return rc;
    s->device = s->devices[s->local_rank < s->n_devices ? s->local_rank : 0];
    if ((rc = s->accelerator->set_device(s->device, err)))
        return rc;
    return nccl_setup(s, d, err);
}

/* Buckets are whole tensors, as in PyTorch's DDP: backward announces tensors from the end of the
 * gradient array towards the start, and a bucket closes once it holds bucket_mb or more. A bucket
 * cut by bytes would straddle a tensor (the first layer's weights are most of an MLP) and could
 * start only when backward is over; whole tensors let the later layers' buckets start while
 * backward still computes the earlier ones. The announcements are the same on every rank, so every
 * rank cuts the same buckets and starts the same allreduces in the same order. */
/* Append a bucket; its index, or -1 when out of memory. */
static int bucket_add(struct ddp *d, size_t start, size_t len, ct_error *err)
{
    struct bucket *b;

    /* reqs_per_bucket slots a bucket, and one beyond the buckets: grad_sync waits for the posted
     * values' request with them. */
    if (d->n_buckets + 1 >= d->cap_buckets) {
        int cap = d->cap_buckets ? 2 * d->cap_buckets : 8;
        struct bucket *nb = realloc(d->buckets, (size_t)cap * sizeof(*nb));
        MPI_Request *nr = nb ? realloc(d->reqs, ((size_t)cap * (size_t)d->reqs_per_bucket + 1) * sizeof(*nr)) : NULL;

        if (nb)
            d->buckets = nb;
        if (!nb || !nr) {
            ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory for %d buckets", cap);
            return -1;
        }
        d->reqs = nr;
        d->cap_buckets = cap;
    }
    b = &d->buckets[d->n_buckets];
    memset(b, 0, sizeof(*b));
    b->start = start;
    b->len = len;
    for (int k = 0; k < d->reqs_per_bucket; k++)
        d->reqs[d->n_buckets * d->reqs_per_bucket + k] = MPI_REQUEST_NULL;
    return d->n_buckets++;
}

/* bf16-true's allreduce: MPI has no bf16 type, so the gradients travel as MPI_UINT16_T and this op
 * adds two of them in fp32 and rounds the sum to bf16 (nearest, ties to even). Declared commutative
 * so Open MPI keeps its usual algorithms. With 2 ranks the result is the fp32 sum rounded once; with
 * more, each partial sum is rounded as it is combined (as PyTorch's DDP does for a bf16 model,
 * gloo and NCCL alike); every rank receives the same bits either way. Widening to fp32 for the
 * exchange would round once at any world size but send twice the bytes. */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    const uint16_t *a = in;
    uint16_t *b = inout;

    (void)type;
    for (int i = 0; i < *len; i++)
        b[i] = ct_bf16_store(ct_bf16_load(a[i]) + ct_bf16_load(b[i]));
}

/* Element i of the gradient array, whatever its type. */
static void *grad_at(const struct ddp *d, size_t i) { return (char *)d->grads + i * d->esize; }

static int ct_ddp_setup_model(ct_strategy *s, void *params, void *grads, size_t n, ct_error *err)
{
    struct ddp *d = s->impl;
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;

    if (d->gloo && s->param_dtype == CT_DTYPE_BF16) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-dtype", "%s: backend gloo exchanges fp32 or fp64 gradients only",
                     s->ops->name);
        return ct_error_hint(err, "use --precision 32-true, bf16-mixed or 64-true, or backend=mpi under a PMIx "
                             "server for bf16-true");
    }
    if (s->param_dtype != CT_DTYPE_F32 && s->param_dtype != CT_DTYPE_F64 &&
        !(s->param_dtype == CT_DTYPE_BF16 && !d->nccl)) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-dtype", "%s exchanges fp32, fp64 or (on cpu) bf16 gradients only",
                     s->ops->name);
        return ct_error_hint(err, "use --precision 32-true, bf16-mixed, 64-true or bf16-true");
    }
    d->grads = grads;
    d->n = n;
    d->esize = ct_dtype_size(s->param_dtype);
    /* The collectives run in the parameters' own type: 64-true's allreduce sums fp64, bf16-true's
     * bf16 (2 bytes an element on the wire, as PyTorch's DDP on a bf16 model). */
    d->mpi_type = s->param_dtype == CT_DTYPE_F64 ? MPI_DOUBLE : s->param_dtype == CT_DTYPE_BF16 ? MPI_UINT16_T
                                                                                                  : MPI_FLOAT;
    d->mpi_sum = MPI_SUM;
    if (ct_ddp_single(d))
        return 0; /* one rank, no process group */
    if (s->param_dtype == CT_DTYPE_BF16 && !d->gloo && (rc = MPI_Op_create(bf16_sum, 1, &d->mpi_sum)) != MPI_SUCCESS) {
        d->mpi_sum = MPI_SUM;
        return ct_ddp_mpi_error(rc, "MPI_Op_create of the bf16 sum", err);
    }
    /* MPI sums the ranks' gradients (NCCL averages them: ncclAvg), so over MPI every rank's
     * backward takes the mean over the global batch: the sum is then the average, with no pass
     * of its own (one over every gradient was 6% of a 2-rank step in `perf record`). For a
     * power-of-two world the result is the same bits as averaging after the sum. */
    s->grad_ranks = d->nccl ? 1 : s->world_size;
    /* Every rank starts from rank 0's initial weights (on cuda they are in device memory). */
    if (d->nccl) {
        if ((rc = nccl_broadcast(d, params, n, err)))
            return rc;
    } else if (d->gloo) {
        if ((rc = ct_ddp_gloo_wait(s, ct_gloo_broadcast_start(d->gloo, params, n * d->esize, 0),
                                   "the broadcast of the initial parameters", err)))
            return rc;
    } else {
        rc = MPI_Ibcast(params, (int)n, d->mpi_type, 0, d->comm, &req);
        if (rc != MPI_SUCCESS)
            return d->broken = 1, ct_ddp_mpi_error(rc, "MPI_Ibcast of the initial parameters", err);
        if ((rc = ct_ddp_wait(s, &req, 1, "the broadcast of the initial parameters", err)))
            return rc;
    }
    d->bucket_floats = (size_t)(d->bucket_mb * 1024.0 * 1024.0 / (double)d->esize);
    if (d->bucket_floats < 1)
        d->bucket_floats = 1;
    d->n_buckets = 0;
    d->pending_lo = d->pending_hi = n;
    return 0;
}

static int start_bucket(ct_strategy *s, int i, int in_backward, ct_error *err)
{
    struct ddp *d = s->impl;
    struct bucket *b = &d->buckets[i];
    int rc;

    if (d->nccl) {
        if ((rc = nccl_start(d, b, err)))
            return rc;
    } else if (d->gloo && d->start_reduce) {
        if ((rc = d->start_reduce(s, i, err)))
            return rc;
    } else if (d->gloo) {
        /* Handed to the context's worker thread, which sums it while backward goes on (overlap=0:
         * no thread, summed here, in grad_sync); a failure is seen in grad_sync's wait. */
        (void)ct_gloo_allreduce_start(d->gloo, grad_at(d, b->start), b->len, d->esize);
    } else if (d->start_reduce) {
        if ((rc = d->start_reduce(s, i, err)))
            return rc;
    } else {
        rc = MPI_Iallreduce(MPI_IN_PLACE, grad_at(d, b->start), (int)b->len, d->mpi_type, d->mpi_sum, d->comm,
                            &d->reqs[i]);
        if (rc != MPI_SUCCESS)
            return d->broken = 1, ct_ddp_mpi_error(rc, "MPI_Iallreduce", err);
    }
    b->started = 1;
    if (s->trace)
        s->trace->bucket = i;
    s->grad_allreduces++;
    s->grad_allreduces_in_backward += in_backward;
    return 0;
}

/* Close the pending gradients into a bucket and, with overlap, start its allreduce now. */
static int close_bucket(ct_strategy *s, int start, ct_error *err)
{
    struct ddp *d = s->impl;
    int i;

    if (d->pending_lo == d->pending_hi)
        return 0;
    i = bucket_add(d, d->pending_lo, d->pending_hi - d->pending_lo, err);
    if (i < 0)
        return CT_ENOMEM;
    d->pending_hi = d->pending_lo;
    /* The bucket holding the first tensor closes as backward ends: that one overlaps nothing. */
    return start ? start_bucket(s, i, d->buckets[i].start > 0, err) : 0;
}

/* The posted values' allreduce, in flight beside the gradient buckets. */
static int start_posted(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    if (d->gloo) {
        d->posted_started = 1;
        (void)ct_gloo_allreduce_start(d->gloo, d->posted, (size_t)d->n_posted, sizeof(double));
        return 0;
    }
    rc = MPI_Iallreduce(MPI_IN_PLACE, d->posted, d->n_posted, MPI_DOUBLE, MPI_SUM, d->comm, &d->posted_req);
    if (rc != MPI_SUCCESS)
        return d->broken = 1, ct_ddp_mpi_error(rc, "MPI_Iallreduce of the posted values", err);
    d->posted_started = 1;
    return 0;
}

static int ct_ddp_post_with_grads(ct_strategy *s, double *values, int n)
{
    struct ddp *d = s->impl;

    if (ct_ddp_single(d) || s->world_size == 1)
        return 0; /* one rank: the sums are the values */
    d->posted = values;
    d->n_posted = n;
    d->posted_started = 0;
    return 0;
}

/* Gradients [lo, hi) backward skipped (announced nothing for): zeros under find_unused, which then
 * count as announced; otherwise an error naming the range. */
static int skipped_grads(struct ddp *d, size_t lo, size_t hi, ct_error *err)
{
    if (d->find_unused && !d->nccl) {
        memset(grad_at(d, lo), 0, d->esize * (hi - lo));
        return 0;
    }
    ct_error_set(err, CT_EINVAL, "ddp-grad-missing", "ddp: the model's backward gave no gradient to parameters "
                 "[%zu, %zu) of %zu (the parameter array's offsets)", lo, hi, d->n);
    if (d->nccl)
        return ct_error_hint(err, "on cuda every parameter needs a gradient: announce each tensor in backward, "
                             "from the last to the first (zeros for a parameter forward did not use)");
    return ct_error_hint(err, "a model that leaves parameters without a gradient runs with --strategy "
                         "ddp_find_unused_parameters_true (they count as zero); or announce each tensor, from "
                         "the last to the first");
}

static int ct_ddp_grad_ready(ct_strategy *s, size_t offset, size_t count, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc, flag;

    if (ct_ddp_single(d) || s->world_size == 1)
        return 0;
    if (offset + count < d->pending_lo && (rc = skipped_grads(d, offset + count, d->pending_lo, err)))
        return rc;
    if (offset + count < d->pending_lo)
        count = d->pending_lo - offset; /* the skipped range rides with this one, as zeros */
    if (offset + count != d->pending_lo) {
        ct_error_set(err, CT_EINTERNAL, "ddp-grad-order",
                     "ddp: gradient [%zu, %zu) announced after [%zu, %zu) was; backward must announce "
                     "every tensor, from the last to the first", offset, offset + count, d->pending_lo, d->n);
        return ct_error_hint(err, "announce each gradient range once, from the last tensor to the first");
    }
    if (d->posted && !d->posted_started && (rc = start_posted(s, err)))
        return rc;
    if (d->pending_lo == d->pending_hi)
        d->pending_hi = offset + count;
    d->pending_lo = offset;
    if (d->pending_hi - d->pending_lo >= d->bucket_floats && (rc = close_bucket(s, d->overlap, err)))
        return rc;
    /* Open MPI progresses non-blocking collectives inside MPI calls: poke it between layers. */
    for (int i = 0; i < d->n_buckets * d->reqs_per_bucket; i++) {
        if (d->reqs[i] != MPI_REQUEST_NULL) {
            rc = MPI_Test(&d->reqs[i], &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS)
                return d->broken = 1, ct_ddp_mpi_error(rc, "MPI_Test", err);
        }
    }
    return 0;
}

static int ct_ddp_grad_sync(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    double t0;
    int rc, nreqs;

    if (ct_ddp_single(d) || s->world_size == 1)
        return 0;
    /* Everything from here is communication backward did not hide: the buckets started here (a
     * blocking gloo allreduce under overlap=0 runs inside its start) and the waits. */
    t0 = ct_time_now();
    if ((rc = close_bucket(s, 0, err)))
        return rc;
    if (d->pending_lo != 0) {
        /* the first tensors never announced: zeros in one more bucket, or the error */
        if ((rc = skipped_grads(d, 0, d->pending_lo, err)))
            return rc;
        d->pending_hi = d->pending_lo;
        d->pending_lo = 0;
        if ((rc = close_bucket(s, 0, err)))
            return rc;
    }
    for (int i = 0; i < d->n_buckets; i++)
        if (!d->buckets[i].started && (rc = start_bucket(s, i, 0, err)))
            return rc;
    if (d->posted && !d->posted_started && (rc = start_posted(s, err)))
        return rc;
    if (d->nccl) {
        /* NCCL averaged in the collective (ncclAvg): nothing left to scale. The posted values went
         * over MPI, or gloo without a PMIx server. */
        rc = nccl_wait(d, err);
        if (!rc && d->posted)
            rc = d->gloo ? ct_ddp_gloo_wait(s, ct_gloo_last(d->gloo), "the allreduce of the posted values", err)
                         : ct_ddp_wait(s, &d->posted_req, 1, "the allreduce of the posted values", err);
        d->posted = NULL;
        d->n_buckets = 0;
        d->pending_lo = d->pending_hi = d->n;
        s->exposed_comm_s += ct_time_now() - t0;
        return rc;
    }
    if (d->gloo) {
        /* The collectives complete in the order they started: the last one's end is every one's. */
        rc = ct_ddp_gloo_wait(s, ct_gloo_last(d->gloo), d->start_reduce ? "the gradient reduce-scatter"
                              : "the gradient allreduce", err);
        s->exposed_comm_s += ct_time_now() - t0;
        if (!rc && d->finish_reduce)
            d->finish_reduce(s);
        for (int i = 0; i < d->n_buckets; i++)
            d->buckets[i].started = 0;
        d->posted = NULL;
        d->n_buckets = 0;
        d->pending_lo = d->pending_hi = d->n;
        return rc;
    }
    /* The posted values complete with the buckets: no synchronisation point of their own. */
    nreqs = d->n_buckets * d->reqs_per_bucket;
    if (d->posted)
        d->reqs[nreqs] = d->posted_req;
    if ((rc = ct_ddp_wait(s, d->reqs, nreqs + (d->posted != NULL), d->start_reduce ?
                          "the gradient reduce-scatter" : "the gradient allreduce", err)))
        return rc;
    d->posted = NULL;
    if (s->trace)
        s->trace->bucket = -1;
    for (int i = 0; i < d->n_buckets; i++) {
        d->buckets[i].started = 0;
    }
    d->n_buckets = 0;
    d->pending_lo = d->pending_hi = d->n;
    s->exposed_comm_s += ct_time_now() - t0;
    if (d->finish_reduce)
        d->finish_reduce(s);
    return 0;
}

static int ct_ddp_broadcast(ct_strategy *s, void *buf, size_t bytes, int root, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    MPI_Request req = MPI_REQUEST_NULL;

    if (ct_ddp_single(d))
        return 0;
    if (d->gloo)
        return ct_ddp_gloo_wait(s, ct_gloo_broadcast_start(d->gloo, buf, bytes, root), "a broadcast", err);
    rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, d->comm, &req);
    if (rc != MPI_SUCCESS)
        return d->broken = 1, ct_ddp_mpi_error(rc, "MPI_Ibcast", err);
    return ct_ddp_wait(s, &req, 1, "a broadcast", err);
}

static int ct_ddp_reduce_sum(ct_strategy *s, double *values, int n, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    MPI_Request req = MPI_REQUEST_NULL;

    if (ct_ddp_single(d))
        return 0;
    if (d->gloo)
        return ct_ddp_gloo_wait(s, ct_gloo_allreduce_start(d->gloo, values, (size_t)n, sizeof(double)),
                                "an allreduce", err);
    rc = MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, d->comm, &req);
    if (rc != MPI_SUCCESS)
        return d->broken = 1, ct_ddp_mpi_error(rc, "MPI_Iallreduce of metrics", err);
    return ct_ddp_wait(s, &req, 1, "an allreduce of metrics", err);
}

/* A pair's exchange: not a collective, so outside d->seq and the who-is-missing protocol (every
 * rank would have to take part); past the timeout it names the peer and breaks the world. */
static int p2p_wait(ct_strategy *s, MPI_Request *reqs, int to, int from, ct_error *err)
{
    struct ddp *d = s->impl;
    double t0 = ct_time_now(), timeout = s->collective_timeout_s;

    for (;;) {
        int done = 0, rc = MPI_Testall(2, reqs, &done, MPI_STATUSES_IGNORE);
        double waited = ct_time_now() - t0;

        if (rc != MPI_SUCCESS)
            return d->broken = 1, ct_ddp_mpi_error(rc, "a point-to-point exchange (MPI_Isend/MPI_Irecv)", err);
        if (done)
            return 0;
        if (timeout > 0 && waited >= timeout) {
            d->broken = 1;
            ct_error_set(err, CT_ETIMEOUT, "ddp-timeout", "ddp: rank %d: a point-to-point exchange with rank %d did not "
                         "complete within %.0f s (--collective-timeout)", s->global_rank, to >= 0 ? to : from, timeout);
            return ct_error_hint(err, "that rank is stopped, dead or cut off; see its node");
        }
        sleep_for(waited);
    }
}

static int ct_ddp_sendrecv(ct_strategy *s, const void *sendbuf, size_t send_bytes, int to, void *recvbuf,
                           size_t recv_bytes, int from, ct_error *err)
{
    struct ddp *d = s->impl;
    MPI_Request reqs[2] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL };
    int rc;

    if (ct_ddp_single(d))
        return 0;
    if (d->gloo)
        return gloo_call(d, ct_gloo_sendrecv(d->gloo, sendbuf, send_bytes, to, recvbuf, recv_bytes, from, err));
    if (send_bytes > INT_MAX || recv_bytes > INT_MAX)
        return ct_error_set(err, CT_EINVAL, "ddp-p2p-size", "ddp: a point-to-point message of more than 2 GiB");
    if (from >= 0 && (rc = MPI_Irecv(recvbuf, (int)recv_bytes, MPI_BYTE, from, TAG_P2P, d->comm, &reqs[0])) != MPI_SUCCESS)
        return d->broken = 1, ct_ddp_mpi_error(rc, "MPI_Irecv", err);
    if (to >= 0 &&
        (rc = MPI_Isend((void *)sendbuf, (int)send_bytes, MPI_BYTE, to, TAG_P2P, d->comm, &reqs[1])) != MPI_SUCCESS)
        return d->broken = 1, ct_ddp_mpi_error(rc, "MPI_Isend", err);
    return p2p_wait(s, reqs, to, from, err);
}

static void ct_ddp_teardown(ct_strategy *s)
{
    struct ddp *d = s->impl;
    int finalized = 0;

    if (!d)
        return;
    /* A broken world cannot finalize (MPI_Finalize waits for every rank): destroy aborts it. */
    if (d->broken)
        return;
    gloo_free(d);
    nccl_free(d);
    if (d->mpi_sum != MPI_SUM && d->mpi_sum != MPI_OP_NULL)
        MPI_Op_free(&d->mpi_sum);
    if (d->comm != MPI_COMM_NULL)
        MPI_Comm_free(&d->comm);
    if (d->fault_comm != MPI_COMM_NULL)
        MPI_Comm_free(&d->fault_comm);
    MPI_Finalized(&finalized);
    if (d->mpi_owner && !finalized)
        MPI_Finalize();
    d->mpi_owner = 0;
}

/* Seconds MPI_Abort may take before this rank ends by itself. */
#define ABORT_WAIT_S 5

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

/* MPI to abort: this process joined MPI (or owns it) and the world broke. Without MPI (gloo, or
 * nccl without a PMIx server) the other ranks' collective timeout ends them instead. */
static int ct_ddp_ends_job(const ct_strategy *s)
{
    const struct ddp *d = s->impl;

    return d && d->broken && !(d->comm == MPI_COMM_NULL && !d->mpi_owner);
}

static void ct_ddp_destroy(ct_strategy *s)
{
    struct ddp *d = s->impl;

    if (!d)
        return;
    /* After a timeout or a failed collective: end the whole job now (srun, mpirun and ctrain's
     * launchers all turn MPI_Abort into ending every rank), after the caller printed why. The abort
     * goes through the PMIx server to the launcher; on a rank cut off from it (a pulled cable: srun
     * and slurmctld are on the other side) it waits for network timeouts, so it gets ABORT_WAIT_S
     * and then this rank exits anyway: the launcher ends the others when it hears. */
    if (d->comm == MPI_COMM_NULL && !d->mpi_owner) {
        nccl_free(d);
        gloo_free(d);
    } else if (ct_ddp_ends_job(s)) {
        signal(SIGALRM, abort_stuck);
        alarm(ABORT_WAIT_S);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    free(d->hosts);
    free(d->buckets);
    free(d->reqs);
    free(d);
    s->impl = NULL;
}

const struct ct_strategy_ops ct_strategy_ddp = {
    .init = ct_ddp_init,
    .setup_environment = ct_ddp_setup_environment,
    .setup_model = ct_ddp_setup_model,
    .grad_ready = ct_ddp_grad_ready,
    .grad_sync = ct_ddp_grad_sync,
    .post_with_grads = ct_ddp_post_with_grads,
    .broadcast = ct_ddp_broadcast,
    .reduce_sum = ct_ddp_reduce_sum,
    .sendrecv = ct_ddp_sendrecv,
    .teardown = ct_ddp_teardown,
    .ends_job = ct_ddp_ends_job,
    .destroy = ct_ddp_destroy,
};

const struct ct_strategy_ops *ct_strategy_ddp_ops(void)
{
    return &ct_strategy_ddp;
}
