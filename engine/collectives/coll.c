/* SPDX-License-Identifier: BSD-3-Clause */
/* The collectives' table (collectives.h): which component a backend names, the calls through its
 * ops, the trace of where this rank waits, and the collective timeout's outcome in words — the roll
 * call's verdict becomes the one message every rank prints, whatever library found it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/envs.h"
#include "ctrain/util.h"
#include "engine/collectives/coll_impl.h"
#include "engine/events/event.h"

double ct_coll_library_bound(double timeout_s) { return timeout_s > 0 ? timeout_s : CT_COLL_TIMEOUT_S; }

size_t ct_coll_type_size(enum ct_coll_type t)
{
    return t == CT_COLL_F64 ? 8 : t == CT_COLL_F32 ? 4 : t == CT_COLL_BF16 ? 2 : 1;
}

void ct_coll_nap(double waited)
{
    if (waited > 1.0)
        usleep(2000);
    else if (waited > 0.01)
        usleep(100);
}

static const struct ct_coll_ops *component(const char *name)
{
    static const struct ct_coll_ops *const all[] = { &ct_coll_mpi, &ct_coll_gloo, &ct_coll_nccl };

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (!strcmp(all[i]->name, name))
            return all[i];
    return NULL;
}

static int open_with(const struct ct_coll_ops *ops, const struct ct_coll_setup *su, ct_coll *host, ct_coll **out,
                     ct_error *err)
{
    ct_coll *c = calloc(1, sizeof(*c));
    int rc;

    *out = NULL;
    if (!c)
        return ct_error_set(err, CT_ENOMEM, NULL, "%s: out of memory opening %s", su->strategy, ops->name);
    c->ops = ops;
    c->host = host;
    c->rank = host ? host->rank : su->rank;
    c->size = su->world;
    c->local_rank = su->env ? su->env->local_rank : 0;
    c->node_rank = su->env ? su->env->node_rank : 0;
    c->timeout_s = su->timeout_s;
    if (su->env)
        c->env = *su->env;
    ct_str_copy(c->env_name, sizeof(c->env_name), su->env_name ? su->env_name : "");
    ct_str_copy(c->strategy, sizeof(c->strategy), su->strategy ? su->strategy : "ddp");
    ct_str_copy(c->why, sizeof(c->why), su->why ? su->why : "");
    if ((rc = ops->open(c, su, err))) {
        /* A failed open leaves what it joined to free (a broken one to abort). */
        *out = c;
        return rc;
    }
    *out = c;
    return 0;
}

/* backend=auto: mpi where a PMIx server started the ranks (MPI_Init joins them), else gloo on cpu
 * and nccl on cuda; then whether the backend can work here. */
static const char *const backends[] = { "auto", "mpi", "gloo", "nccl", NULL };

static int backend_index(const char *asked)
{
    int i;

    for (i = 0; backends[i] && strcmp(asked[0] ? asked : "auto", backends[i]); i++)
        ;
    return backends[i] ? i : -1;
}

int ct_coll_check_backend(const char *asked, ct_error *err)
{
    if (backend_index(asked) >= 0)
        return 0;
    ct_error_set(err, CT_EINVAL, "ddp-backend", "ddp: backend '%s' is not one of auto, mpi, gloo, nccl", asked);
    return ct_error_hint(err, "e.g. --strategy ddp:backend=gloo; auto takes mpi where a PMIx server started the "
                         "ranks, else gloo on cpu and nccl on cuda");
}

int ct_coll_choose(const struct ct_coll_choice *q, char *backend, size_t size, char *why, size_t why_size,
                   ct_error *err)
{
    const char *const *names = backends;
    int pmix = ct_env_pmix_started(NULL, NULL), cuda = q->device_memory, i = backend_index(q->asked);

    if (i < 0)
        return ct_coll_check_backend(q->asked, err);
    why[0] = '\0';
    if (i == 0) {
        i = pmix ? 1 : cuda ? 3 : 2;
        snprintf(why, why_size, " (auto: %s, accelerator %s)", pmix ? "a PMIx server started the ranks" : "no PMIx server",
                 q->accelerator);
    }
    ct_str_copy(backend, size, names[i]);
    if (i == 2 && cuda) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-backend", "%s: backend gloo%s runs on cpu tensors only, and the "
                     "accelerator is cuda", q->strategy, why);
        return ct_error_hint(err, "use --accelerator cpu, or launch with a PMIx server (srun --mpi=pmix, mpirun) "
                             "for nccl");
    }
    if (i == 3 && !cuda) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-backend", "ddp: backend nccl needs the cuda accelerator, this run's "
                     "is %s", q->accelerator);
        return ct_error_hint(err, "use --accelerator cuda, or backend=gloo or mpi on cpu");
    }
    if (i == 1 && !pmix) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-no-pmix",
                     "ddp: %d ranks but no PMIx server to join them (cluster environment: %s), which backend %s%s "
                     "needs", q->world, q->env_name, names[i], why);
        return ct_error_hint(err, cuda ? "launch with srun --mpi=pmix, mpirun, or `ctrain fit --devices N` on one node"
                                       : "launch with srun --mpi=pmix, mpirun, or `ctrain fit --devices N` on one "
                                         "node; or use --strategy ddp:backend=gloo to meet at MASTER_ADDR:MASTER_PORT");
    }
    return 0;
}

int ct_coll_open(const struct ct_coll_setup *su, ct_coll **out, ct_error *err)
{
    const struct ct_coll_ops *ops = component(su->backend);

    if (ops == &ct_coll_nccl)
        ops = ct_env_pmix_started(NULL, NULL) ? &ct_coll_mpi : &ct_coll_gloo;
    if (!ops) {
        *out = NULL;
        ct_error_set(err, CT_EINVAL, "ddp-backend", "ddp: backend '%s' is not one of auto, mpi, gloo, nccl",
                     su->backend);
        return ct_error_hint(err, "e.g. --strategy ddp:backend=gloo");
    }
    return open_with(ops, su, NULL, out, err);
}

int ct_coll_open_model(ct_coll *host, const struct ct_coll_setup *su, ct_coll **out, ct_error *err)
{
    if (!su->device_memory) {
        *out = host;
        return 0;
    }
    return open_with(&ct_coll_nccl, su, host, out, err);
}

int ct_coll_rank(const ct_coll *c) { return c->rank; }
int ct_coll_local_rank(const ct_coll *c) { return c->local_rank; }
int ct_coll_node_rank(const ct_coll *c) { return c->node_rank; }
const char *ct_coll_name(const ct_coll *c) { return c->ops->name; }
int ct_coll_sums(const ct_coll *c) { return c->ops->sums; }
int ct_coll_has_bf16(const ct_coll *c) { return c->ops->bf16; }
int ct_coll_broken(const ct_coll *c) { return c && c->broken; }

void ct_coll_watch(ct_coll *c, ct_collective_trace *trace, double timeout_s)
{
    c->trace = trace;
    c->timeout_s = timeout_s;
}

long ct_coll_failed(ct_coll *c, int rc)
{
    c->broken = 1;
    return rc;
}

static long unsupported(ct_coll *c, const char *what, ct_error *err)
{
    ct_error_set(err, CT_ENOTAVAIL, "coll-unsupported", "%s: backend %s has no %s", c->strategy, c->ops->name, what);
    return (long)ct_error_hint(err, "use backend=mpi or gloo");
}

long ct_coll_allreduce_start(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, ct_error *err)
{
    return c->ops->allreduce(c, buf, count, t, err);
}

long ct_coll_broadcast_start(ct_coll *c, void *buf, size_t count, enum ct_coll_type t, int root, ct_error *err)
{
    return c->ops->broadcast(c, buf, count, t, root, err);
}

long ct_coll_allgather_start(ct_coll *c, void *buf, const size_t *counts, enum ct_coll_type t, ct_error *err)
{
    return c->ops->allgather(c, buf, counts, t, err);
}

long ct_coll_reduce_scatter_start(ct_coll *c, const void *send, void *recv, size_t count, enum ct_coll_type t,
                                  ct_error *err)
{
    return c->ops->reduce_scatter(c, send, recv, count, t, err);
}

long ct_coll_gather_start(ct_coll *c, const void *mine, void *whole, const size_t *counts, enum ct_coll_type t,
                          int root, ct_error *err)
{
    return c->ops->gather ? c->ops->gather(c, mine, whole, counts, t, root, err) : unsupported(c, "gather", err);
}

long ct_coll_exchange_start(ct_coll *c, const struct ct_coll_msg *sends, int nsends, const struct ct_coll_msg *recvs,
                            int nrecvs, ct_error *err)
{
    return c->ops->exchange ? c->ops->exchange(c, sends, nsends, recvs, nrecvs, err)
                            : unsupported(c, "point-to-point exchange", err);
}

int ct_coll_sendrecv(ct_coll *c, const void *sendbuf, size_t send_bytes, int to, void *recvbuf, size_t recv_bytes,
                     int from, ct_error *err)
{
    if (!c->ops->sendrecv)
        return (int)unsupported(c, "point-to-point exchange", err);
    return c->ops->sendrecv(c, sendbuf, send_bytes, to, recvbuf, recv_bytes, from, err);
}

int ct_coll_check_bf16(const ct_coll *c, ct_error *err)
{
    if (c->ops->bf16)
        return 0;
    ct_error_set(err, CT_ENOTAVAIL, "ddp-dtype", "%s: backend %s exchanges fp32 or fp64 gradients only", c->strategy,
                 c->ops->name);
    return ct_error_hint(err, "use --precision 32-true, bf16-mixed or 64-true, or backend=mpi under a PMIx "
                         "server for bf16-true");
}

/* MPI counts elements in an int: the bound every library keeps, so the shards are the same on all. */
int ct_coll_check_count(size_t n, const char *id, const char *what, ct_error *err)
{
    char text[160];

    if (n <= (size_t)2147483647)
        return 0;
    snprintf(text, sizeof(text), what, n);
    return ct_error_set(err, CT_EINVAL, id, "%s exceed MPI's int counts", text);
}

long ct_coll_last(const ct_coll *c) { return c->ops->last(c); }

int ct_coll_progress(ct_coll *c, ct_error *err) { return c->ops->progress ? c->ops->progress(c, err) : 0; }

/* --- the collective timeout's outcome ------------------------------------------------------------ */

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
void ct_coll_host_list(const ct_coll *c, const int *ranks, int count, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    if (!c->hosts)
        return;
    for (int i = 0; i < count && len < size; i++) {
        const char *h = c->hosts + (size_t)ranks[i] * CT_COLL_HOST;
        int seen = 0;

        for (int j = 0; j < i; j++)
            seen |= !strcmp(h, c->hosts + (size_t)ranks[j] * CT_COLL_HOST);
        if (!seen)
            len += (size_t)snprintf(buf + len, size - len, "%s%s", len == 0 ? " (on " : ", ", h);
    }
    if (len > 0 && len < size)
        snprintf(buf + len, size - len, ")");
}

/* The missing ranks into the caller's trace, for the hang record (engine/health/fit/hang.c). */
static void trace_missing(ct_coll *c, const int *ranks, int count)
{
    if (!c->trace)
        return;
    c->trace->timed_out = 1;
    c->trace->n_missing = count;
    for (int i = 0; i < count && i < CT_TRACE_MAX_MISSING; i++) {
        c->trace->missing[i] = ranks[i];
        ct_str_copy(c->trace->missing_host[i], sizeof(c->trace->missing_host[i]),
                    c->hosts ? c->hosts + (size_t)ranks[i] * CT_COLL_HOST : "");
    }
    ct_sv_event_missing(c->trace->seq, c->trace->what, c->trace->missing, c->trace->missing_host, c->trace->n_missing);
}

/* The verdict in words: the phrases supervise and users read (engine/launchers/launcher.h). */
static int timeout_error(ct_coll *c, const char *what, const struct ct_coll_verdict *v, ct_error *err)
{
    int named = v->total < CT_COLL_MAX_NAMED ? v->total : CT_COLL_MAX_NAMED;
    char list[512], hosts[256], who[800];

    c->broken = 1;
    trace_missing(c, v->ranks, named);
    rank_list(v->ranks, named, v->total, list, sizeof(list));
    ct_coll_host_list(c, v->ranks, named, hosts, sizeof(hosts));
    switch (v->found) {
    case CT_COLL_MISSING:
        snprintf(who, sizeof(who), "rank%s %s of %d did not arrive%s%s", v->total == 1 ? "" : "s", list, c->size, hosts,
                 v->late ? " (some wait in another collective)" : "");
        break;
    case CT_COLL_MISSING_RELAYED:
        snprintf(who, sizeof(who), "rank%s %s did not arrive%s (as rank 0 found)", v->total == 1 ? "" : "s", list,
                 hosts);
        break;
    case CT_COLL_NONE_AT_ZERO:
        snprintf(who, sizeof(who), "every rank answered rank 0 after the deadline (a rank was slower than the timeout)");
        break;
    case CT_COLL_NONE_RELAYED:
        snprintf(who, sizeof(who), "rank 0 found every rank waiting (a rank was slower than the timeout)");
        break;
    case CT_COLL_NONE:
        snprintf(who, sizeof(who), "every rank answered after the deadline (a rank was slower than the timeout)");
        break;
    case CT_COLL_ZERO_SILENT:
        snprintf(who, sizeof(who), "rank 0%s did not arrive and did not answer (other ranks may be missing too)", hosts);
        break;
    case CT_COLL_ZERO_STORE_SILENT:
        snprintf(who, sizeof(who), "rank 0 (on %s) did not arrive, and its store at %s does not answer (other ranks "
                 "may be missing too)", c->env.main_address, v->store ? v->store : "?");
        break;
    }
    ct_error_set(err, CT_ETIMEOUT, "collective-timeout", "ddp: %s (collective #%ld) did not complete within %g s: %s",
                 what, c->seq, v->timeout, who);
    return ct_error_hint(err, "that rank is stopped (SIGSTOP), hung or dead; ending every rank. If it is only slow "
                              "(a long checkpoint write), raise --collective-timeout");
}

/* Every rank calls this once per collective it waits for, in the same order, so the collective's
 * number is the same everywhere. The trace says where this rank waits while it waits (plain
 * stores: a hang dump reads them). */
int ct_coll_wait(ct_coll *c, long ticket, const char *what, ct_error *err)
{
    struct ct_coll_verdict v;
    int rc;

    if (c->trace) {
        c->trace->seq = c->ops->number(c, ticket);
        c->trace->what = what;
        c->trace->wait_since = ct_time_now();
        c->trace->waiting = 1;
    }
    rc = c->ops->wait(c, ticket, what, err);
    if (c->trace && !rc)
        c->trace->waiting = 0;
    if (rc != CT_ETIMEOUT || !c->ops->find_missing) {
        if (rc)
            c->broken = 1;
        return rc;
    }
    memset(&v, 0, sizeof(v));
    v.timeout = c->timeout_s;
    c->ops->find_missing(c, &v);
    return timeout_error(c, what, &v, err);
}

int ct_coll_barrier(ct_coll *c, const char *what, ct_error *err)
{
    long t = c->ops->barrier ? c->ops->barrier(c, err) : unsupported(c, "barrier", err);

    return t < 0 ? (int)t : ct_coll_wait(c, t, what, err);
}

int ct_coll_ends_job(const ct_coll *c) { return c && c->broken && c->ops->ends_job && c->ops->ends_job(c); }

void ct_coll_close(ct_coll *c)
{
    if (c && !c->broken)
        c->ops->close(c);
}

void ct_coll_free(ct_coll *c)
{
    if (!c)
        return;
    c->ops->destroy(c);
    free(c->hosts);
    free(c);
}
