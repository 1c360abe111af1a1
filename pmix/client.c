/* SPDX-License-Identifier: BSD-3-Clause */
/* PMIx client: layout and key-value exchange; see include/ctrain/pmix.h.
 *
 * Servers differ in what they publish. srun's PMIx plugin, Open MPI's mpirun (orte/prte) and
 * ctrain's own server all give PMIX_JOB_SIZE, PMIX_LOCAL_RANK and PMIX_LOCAL_SIZE, but not all of
 * them PMIX_NODEID, PMIX_NUM_NODES or PMIX_HOSTNAME for every rank: each of those has a fallback
 * computed from the node list (PMIx_Resolve_nodes) and the local peers (PMIx_Resolve_peers).
 */
#define _GNU_SOURCE   /* pipe2, close_range */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mpi.h>
#include <pmix.h>

#include "ctrain/pmix.h"
#include "ctrain/util.h"

struct ct_pmix_client {
    pmix_proc_t me;
    int rank, size, local_rank, local_size, node_rank, num_nodes, equal_per_node;
    char hostname[256];
    char rank0_host[256];
    char job_id[PMIX_MAX_NSLEN + 1];
    int broken;              /* a fence timed out: the exchange is no longer in step */
    int shared;              /* the process's shared client: finalized at exit only */
    int detached;            /* layout read by a child process; no connection from this one yet */
    /* fence completion, signalled from the PMIx progress thread */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct fence_wait *pending;
};

/* One fence in flight; freed by whichever of waiter and callback comes last. */
struct fence_wait {
    pthread_mutex_t *lock;
    pthread_cond_t *cond;
    int done;
    int abandoned;           /* the waiter gave up (timeout): the callback frees */
    pmix_status_t status;
};

static const char *const uri_vars[] = {
    "PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3", "PMIX_SERVER_URI21",
    "PMIX_SERVER_URI2", "PMIX_SERVER_URI", NULL
};

int ct_pmix_client_present(const char *(*get)(const char *name, void *ctx), void *ctx)
{
    if (!get("PMIX_RANK", ctx) || !get("PMIX_NAMESPACE", ctx))
        return 0;
    for (int i = 0; uri_vars[i]; i++)
        if (get(uri_vars[i], ctx))
            return 1;
    return 0;
}

/* Integer value of any integer-typed PMIx value (servers differ: uint16, uint32, rank, ...). */
static int value_to_long(const pmix_value_t *v, long *out)
{
    switch (v->type) {
    case PMIX_UINT8:     *out = v->data.uint8; return 0;
    case PMIX_UINT16:    *out = v->data.uint16; return 0;
    case PMIX_UINT32:    *out = (long)v->data.uint32; return 0;
    case PMIX_UINT64:    *out = (long)v->data.uint64; return 0;
    case PMIX_INT8:      *out = v->data.int8; return 0;
    case PMIX_INT16:     *out = v->data.int16; return 0;
    case PMIX_INT32:     *out = v->data.int32; return 0;
    case PMIX_INT64:     *out = (long)v->data.int64; return 0;
    case PMIX_INT:       *out = v->data.integer; return 0;
    case PMIX_UINT:      *out = (long)v->data.uint; return 0;
    case PMIX_SIZE:      *out = (long)v->data.size; return 0;
    case PMIX_PROC_RANK: *out = (long)v->data.rank; return 0;
    case PMIX_STRING:    return ct_parse_long(v->data.string, 0, 1L << 30, out);
    default:             return CT_EFORMAT;
    }
}

/* PMIx_Get from the local store only: job data arrives at init, so never wait on the server. */
static pmix_status_t get_local(const ct_pmix_client *c, pmix_rank_t rank, const char *key,
                               pmix_value_t **val)
{
    pmix_proc_t p;
    pmix_info_t info;
    bool yes = true;
    pmix_status_t rc;

    PMIX_LOAD_PROCID(&p, c->me.nspace, rank);
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &yes, PMIX_BOOL);
    rc = PMIx_Get(&p, key, &info, 1, val);
    PMIX_INFO_DESTRUCT(&info);
    return rc;
}

static int get_long(const ct_pmix_client *c, pmix_rank_t rank, const char *key, long *out)
{
    pmix_value_t *val = NULL;
    int rc;

    if (get_local(c, rank, key, &val) != PMIX_SUCCESS || !val)
        return CT_ENOENT;
    rc = value_to_long(val, out);
    PMIX_VALUE_RELEASE(val);
    return rc;
}

static int get_string(const ct_pmix_client *c, pmix_rank_t rank, const char *key, char *dst,
                      size_t size)
{
    pmix_value_t *val = NULL;
    int rc = CT_ENOENT;

    if (get_local(c, rank, key, &val) != PMIX_SUCCESS || !val)
        return CT_ENOENT;
    if (val->type == PMIX_STRING && val->data.string && *val->data.string)
        rc = ct_str_copy(dst, size, val->data.string) < 0 ? CT_EFORMAT : 0;
    PMIX_VALUE_RELEASE(val);
    return rc;
}

/* Index of name in a comma-separated list, or -1. */
static int list_index(const char *list, const char *name, int *count)
{
    int idx = -1, n = 0;
    size_t len = strlen(name);

    for (const char *p = list; p && *p; n++) {
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        if (l == len && !strncmp(p, name, len) && idx < 0)
            idx = n;
        if (!end) {
            n++;
            break;
        }
        p = end + 1;
    }
    if (count)
        *count = n;
    return idx;
}

/* The short form of a host name also matches ("n1" for "n1.cluster"). */
static int node_index(const char *nodes, const char *host, int *count)
{
    char shorthost[256];
    int idx = list_index(nodes, host, count);

    if (idx >= 0)
        return idx;
    ct_str_copy(shorthost, sizeof(shorthost), host);
    shorthost[strcspn(shorthost, ".")] = '\0';
    return list_index(nodes, shorthost, count);
}

/* Node index, node count and equal-per-node from the node list, for servers that leave out
 * PMIX_NODEID / PMIX_NUM_NODES. */
static void read_nodes(ct_pmix_client *c)
{
    char *nodes = NULL;
    long v;
    int count = 0, idx;

    c->equal_per_node = 1;
    if (PMIx_Resolve_nodes(c->me.nspace, &nodes) != PMIX_SUCCESS || !nodes)
        nodes = NULL;
    idx = nodes ? node_index(nodes, c->hostname, &count) : -1;
    if (get_long(c, c->me.rank, PMIX_NODEID, &v) == 0)
        c->node_rank = (int)v;
    else
        c->node_rank = idx >= 0 ? idx : 0;
    if (get_long(c, PMIX_RANK_WILDCARD, PMIX_NUM_NODES, &v) == 0 && v > 0)
        c->num_nodes = (int)v;
    else
        c->num_nodes = count > 0 ? count : 1;
    /* Equal tasks per node: every node's peer count equals ours. */
    for (const char *p = nodes; p && *p;) {
        char node[256];
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        pmix_proc_t *procs = NULL;
        size_t np = 0;

        snprintf(node, sizeof(node), "%.*s", (int)l, p);
        if (PMIx_Resolve_peers(node, c->me.nspace, &procs, &np) == PMIX_SUCCESS) {
            if ((int)np != c->local_size)
                c->equal_per_node = 0;
            PMIX_PROC_FREE(procs, np);
        }
        if (!end)
            break;
        p = end + 1;
    }
    free(nodes);
}

/* Local rank and size; fallback: our position among the local peers. */
static void read_local(ct_pmix_client *c)
{
    char peers[8192];
    char me[16];
    long v;
    int count = 0, idx;

    peers[0] = '\0';
    get_string(c, PMIX_RANK_WILDCARD, PMIX_LOCAL_PEERS, peers, sizeof(peers));
    snprintf(me, sizeof(me), "%d", c->rank);
    idx = peers[0] ? list_index(peers, me, &count) : -1;
    if (get_long(c, c->me.rank, PMIX_LOCAL_RANK, &v) == 0)
        c->local_rank = (int)v;
    else
        c->local_rank = idx >= 0 ? idx : 0;
    if (get_long(c, PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, &v) == 0 && v > 0)
        c->local_size = (int)v;
    else
        c->local_size = count > 0 ? count : 1;
}

/* The lock and condition variable the client's callbacks signal; the condition waits on the
 * monotonic clock (timeouts must not jump with the wall clock). */
static void sync_init(ct_pmix_client *c)
{
    pthread_condattr_t a;

    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cond, &a);
    pthread_condattr_destroy(&a);
}

static int read_layout(ct_pmix_client *c, ct_error *err)
{
    long v;

    c->rank = (int)c->me.rank;
    if (get_long(c, PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, &v) != 0 || v < 1) {
        if (get_long(c, PMIX_RANK_WILDCARD, PMIX_UNIV_SIZE, &v) != 0 || v < 1)
            return ct_error_set(err, CT_ECOMM, "pmix-no-job-size",
                                "the PMIx server of namespace '%s' gives no job size "
                                "(PMIX_JOB_SIZE, PMIX_UNIV_SIZE)", c->me.nspace);
    }
    c->size = (int)v;
    if (get_string(c, c->me.rank, PMIX_HOSTNAME, c->hostname, sizeof(c->hostname)) != 0 &&
        get_string(c, PMIX_RANK_WILDCARD, PMIX_HOSTNAME, c->hostname, sizeof(c->hostname)) != 0)
        gethostname(c->hostname, sizeof(c->hostname) - 1);
    if (get_string(c, 0, PMIX_HOSTNAME, c->rank0_host, sizeof(c->rank0_host)) != 0) {
        char *nodes = NULL;
        /* Without per-rank host names rank 0 is on the first node of the map. */
        if (PMIx_Resolve_nodes(c->me.nspace, &nodes) == PMIX_SUCCESS && nodes && *nodes) {
            nodes[strcspn(nodes, ",")] = '\0';
            ct_str_copy(c->rank0_host, sizeof(c->rank0_host), nodes);
        } else {
            ct_str_copy(c->rank0_host, sizeof(c->rank0_host), c->hostname);
        }
        free(nodes);
    }
    if (get_string(c, PMIX_RANK_WILDCARD, PMIX_JOBID, c->job_id, sizeof(c->job_id)) != 0)
        ct_str_copy(c->job_id, sizeof(c->job_id), c->me.nspace);
    read_local(c);
    read_nodes(c);
    return 0;
}

static const char *process_getenv(const char *name, void *ctx)
{
    return getenv(name);
}

int ct_pmix_client_init(ct_pmix_client **out, ct_error *err)
{
    ct_pmix_client *c;
    pmix_status_t rc;

    *out = NULL;
    if (!ct_pmix_client_present(process_getenv, NULL))
        return ct_error_set(err, CT_ENOTAVAIL, "pmix-no-server",
                            "no PMIx server: PMIX_RANK, PMIX_NAMESPACE or PMIX_SERVER_URI* is not "
                            "set in the environment"),
               ct_error_hint(err, "start the ranks with 'srun --mpi=pmix', 'mpirun', or ctrain's "
                                  "own launcher ('ctrain fit --strategy ddp --devices N')");
    c = calloc(1, sizeof(*c));
    if (!c)
        return ct_error_set(err, CT_ENOMEM, "oom", "out of memory creating the PMIx client");
    rc = PMIx_Init(&c->me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        ct_error_set(err, CT_ECOMM, "pmix-init", "cannot connect to the PMIx server named by "
                     "PMIX_SERVER_URI* (namespace '%s', rank %s): %s",
                     getenv("PMIX_NAMESPACE"), getenv("PMIX_RANK"), PMIx_Error_string(rc));
        ct_error_hint(err, "the launcher that set these variables is gone or was started by "
                           "another user; unset PMIX_* to run as a single process");
        free(c);
        return CT_ECOMM;
    }
    sync_init(c);
    if (read_layout(c, err) != 0) {
        ct_pmix_client_finalize(c);
        return err ? err->code : CT_ECOMM;
    }
    *out = c;
    return 0;
}

int ct_pmix_client_rank(const ct_pmix_client *c) { return c->rank; }
int ct_pmix_client_size(const ct_pmix_client *c) { return c->size; }
int ct_pmix_client_local_rank(const ct_pmix_client *c) { return c->local_rank; }
int ct_pmix_client_local_size(const ct_pmix_client *c) { return c->local_size; }
int ct_pmix_client_node_rank(const ct_pmix_client *c) { return c->node_rank; }
int ct_pmix_client_num_nodes(const ct_pmix_client *c) { return c->num_nodes; }
int ct_pmix_client_equal_per_node(const ct_pmix_client *c) { return c->equal_per_node; }
const char *ct_pmix_client_hostname(const ct_pmix_client *c) { return c->hostname; }
const char *ct_pmix_client_rank0_host(const ct_pmix_client *c) { return c->rank0_host; }
const char *ct_pmix_client_nspace(const ct_pmix_client *c) { return c->me.nspace; }
const char *ct_pmix_client_job_id(const ct_pmix_client *c) { return c->job_id; }

static int check_key(const char *key, ct_error *err)
{
    if (!key || !*key || strlen(key) > CT_PMIX_KEY_MAX)
        return ct_error_set(err, CT_EINVAL, "pmix-key", "PMIx key '%s' is empty or longer than "
                            "%d characters", key ? key : "(null)", CT_PMIX_KEY_MAX);
    return 0;
}

static int check_usable(ct_pmix_client *c, const char *what, ct_error *err)
{
    pmix_status_t rc;

    if (c->broken)
        return ct_error_set(err, CT_ECOMM, "pmix-broken", "PMIx %s refused: an earlier fence "
                            "timed out, the ranks are no longer in step", what);
    /* A client whose layout a child read (ct_pmix_client_shared under Open MPI 5) connects at its
     * first exchange: after MPI_Init, on top of MPI's connection. */
    if (c->detached) {
        if ((rc = PMIx_Init(&c->me, NULL, 0)) != PMIX_SUCCESS)
            return ct_error_set(err, CT_ECOMM, "pmix-init", "PMIx %s: cannot connect to the PMIx "
                                "server: %s", what, PMIx_Error_string(rc));
        c->detached = 0;
    }
    return 0;
}

int ct_pmix_put(ct_pmix_client *c, const char *key, const void *buf, size_t len, ct_error *err)
{
    pmix_value_t v;
    pmix_status_t rc;

    if (check_key(key, err) || check_usable(c, "put", err))
        return err ? err->code : CT_EINVAL;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)buf;   /* PMIx_Put copies */
    v.data.bo.size = len;
    rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    if (rc != PMIX_SUCCESS)
        return ct_error_set(err, CT_ECOMM, "pmix-put", "PMIx_Put of key '%s' (%zu bytes) "
                            "failed: %s", key, len, PMIx_Error_string(rc));
    return 0;
}

int ct_pmix_commit(ct_pmix_client *c, ct_error *err)
{
    pmix_status_t rc;

    if (check_usable(c, "commit", err))
        return CT_ECOMM;
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS)
        return ct_error_set(err, CT_ECOMM, "pmix-commit", "PMIx_Commit failed: %s",
                            PMIx_Error_string(rc));
    return 0;
}

/* Runs on the PMIx progress thread. */
static void fence_done(pmix_status_t status, void *cbdata)
{
    struct fence_wait *w = cbdata;
    int free_it;

    pthread_mutex_lock(w->lock);
    w->status = status;
    w->done = 1;
    free_it = w->abandoned;
    pthread_cond_broadcast(w->cond);
    pthread_mutex_unlock(w->lock);
    if (free_it)
        free(w);
}

int ct_pmix_fence(ct_pmix_client *c, double timeout_s, ct_error *err)
{
    pmix_info_t info[2];
    bool yes = true;
    int tmo = timeout_s > 0 ? (int)(timeout_s + 0.999) : 0;
    struct fence_wait *w;
    struct timespec deadline;
    pmix_status_t rc;
    int timed_out = 0;

    if (check_usable(c, "fence", err))
        return CT_ECOMM;
    w = calloc(1, sizeof(*w));
    if (!w)
        return ct_error_set(err, CT_ENOMEM, "oom", "out of memory in PMIx fence");
    w->lock = &c->lock;
    w->cond = &c->cond;
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
    rc = PMIx_Fence_nb(NULL, 0, info, tmo > 0 ? 2 : 1, fence_done, w);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) {
        free(w);
        return ct_error_set(err, CT_ECOMM, "pmix-fence", "PMIx_Fence over the %d ranks of '%s' "
                            "failed to start: %s", c->size, c->me.nspace, PMIx_Error_string(rc));
    }
    /* Wait here rather than trust every server to honour PMIX_TIMEOUT. */
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += (time_t)timeout_s;
    deadline.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->lock);
    while (!w->done && !timed_out) {
        if (timeout_s > 0)
            timed_out = pthread_cond_timedwait(&c->cond, &c->lock, &deadline) == ETIMEDOUT;
        else
            pthread_cond_wait(&c->cond, &c->lock);
    }
    if (!w->done) {
        w->abandoned = 1;   /* fence_done frees it if it ever comes */
        c->broken = 1;
        pthread_mutex_unlock(&c->lock);
        ct_error_set(err, CT_ETIMEOUT, "pmix-fence-timeout", "PMIx fence of rank %d over the %d "
                     "ranks of '%s' timed out after %g s", c->rank, c->size, c->me.nspace,
                     timeout_s);
        return ct_error_hint(err, "a rank is stuck or did not reach the same exchange; check "
                                  "the other ranks' output, or raise the timeout");
    }
    rc = w->status;
    pthread_mutex_unlock(&c->lock);
    free(w);
    if (rc == PMIX_ERR_TIMEOUT) {
        c->broken = 1;
        ct_error_set(err, CT_ETIMEOUT, "pmix-fence-timeout", "PMIx fence of rank %d over the %d "
                     "ranks of '%s' timed out after %g s (server)", c->rank, c->size,
                     c->me.nspace, timeout_s);
        return ct_error_hint(err, "a rank is stuck or did not reach the same exchange; check "
                                  "the other ranks' output, or raise the timeout");
    }
    if (rc != PMIX_SUCCESS)
        return ct_error_set(err, CT_ECOMM, "pmix-fence", "PMIx fence over the %d ranks of '%s' "
                            "failed: %s", c->size, c->me.nspace, PMIx_Error_string(rc));
    return 0;
}

/* The longest a get waits for the server to answer for a key the fence did not bring here. */
#define GET_SERVER_TIMEOUT_S 5

int ct_pmix_get(ct_pmix_client *c, int rank, const char *key, void *buf, size_t cap, size_t *len,
                ct_error *err)
{
    pmix_proc_t p;
    pmix_value_t *val = NULL;
    pmix_info_t info;
    bool yes = true;
    pmix_status_t rc;
    int ret = 0;

    *len = 0;
    if (check_key(key, err) || check_usable(c, "get", err))
        return err ? err->code : CT_EINVAL;
    if (rank < 0 || rank >= c->size)
        return ct_error_set(err, CT_EINVAL, "pmix-rank", "PMIx get of key '%s' from rank %d: "
                            "the job has ranks 0..%d", key, rank, c->size - 1);
    PMIX_LOAD_PROCID(&p, c->me.nspace, (pmix_rank_t)rank);
    /* Read what the collecting fence brought: a key nobody put is "not found" at once, instead
     * of a request to the server that waits for it to appear (mpirun's server does). PMIx 5
     * keeps what the fence collected from local peers in the server, not in the client: a key
     * not found locally is asked for, with a bound on the wait. */
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &yes, PMIX_BOOL);
    rc = PMIx_Get(&p, key, &info, 1, &val);
    PMIX_INFO_DESTRUCT(&info);
    if (rc == PMIX_ERR_NOT_FOUND) {
        int tmo = GET_SERVER_TIMEOUT_S;

        PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &tmo, PMIX_INT);
        rc = PMIx_Get(&p, key, &info, 1, &val);
        PMIX_INFO_DESTRUCT(&info);
    }
    if (rc == PMIX_ERR_NOT_FOUND || rc == PMIX_ERR_TIMEOUT || (rc == PMIX_SUCCESS && !val))
        return ct_error_set(err, CT_ENOENT, "pmix-get-missing", "rank %d published no key '%s' "
                            "(%s)", rank, key, PMIx_Error_string(rc)),
               ct_error_hint(err, "every rank must put and commit the key before the fence");
    if (rc != PMIX_SUCCESS)
        return ct_error_set(err, CT_ECOMM, "pmix-get", "PMIx_Get of key '%s' from rank %d "
                            "failed: %s", key, rank, PMIx_Error_string(rc));
    if (val->type != PMIX_BYTE_OBJECT) {
        ret = ct_error_set(err, CT_EFORMAT, "pmix-get-type", "key '%s' of rank %d is not a byte "
                           "object (PMIx type %d)", key, rank, (int)val->type);
    } else {
        *len = val->data.bo.size;
        if (val->data.bo.size > cap)
            ret = ct_error_set(err, CT_EINVAL, "pmix-get-size", "key '%s' of rank %d holds %zu "
                               "bytes, more than the %zu given", key, rank, val->data.bo.size, cap);
        else if (val->data.bo.size)
            memcpy(buf, val->data.bo.bytes, val->data.bo.size);
    }
    PMIX_VALUE_RELEASE(val);
    return ret;
}

/* Under Open MPI 5 a process must not be connected to PMIx when it calls MPI_Init. So a child
 * process connects as this rank, reads the layout and sends it back; this process connects only at
 * its first exchange (check_usable).
 *
 * The child stays connected, idle, until this process has exited, and only then finalizes. PMIx
 * servers up to 5.0.9 (openpmix issue 4113) count any connection of a rank that closes, even a
 * finalized one, as that rank leaving every collective open over its namespace: a reader that
 * finalized early, while another rank of the node was already in MPI_Init's fences, let those
 * fences complete without this rank (the btl then found no address for it: "unable to reach each
 * other"), or made this rank's next fence join a finished one of another kind
 * (PMIX_ERR_INVALID_ARG), or hang. By the time this process has exited, every collective it took
 * part in is over. */
static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len) {
        ssize_t r = read(fd, p, len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

/* Every descriptor from 3 up closed but keep_a and keep_b (both 3 or more, different). */
static void close_all_but(int keep_a, int keep_b)
{
    unsigned lo = (unsigned)(keep_a < keep_b ? keep_a : keep_b), hi = (unsigned)(keep_a < keep_b ? keep_b : keep_a);
    DIR *d;
    struct dirent *e;

    if (close_range(hi + 1, ~0U, 0) == 0) {
        if (lo > 3)
            close_range(3, lo - 1, 0);
        if (hi > lo + 1)
            close_range(lo + 1, hi - 1, 0);
        return;
    }
    /* Kernels before 5.9 have no close_range: the open ones, as /proc lists them. */
    if (!(d = opendir("/proc/self/fd")))
        return;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);

        if (fd >= 3 && fd != keep_a && fd != keep_b && fd != dirfd(d))
            close(fd);
    }
    closedir(d);
}

/* The reader child: nothing of the parent's but its pipes (it outlives the parent by a moment, and
 * must hold neither its output nor its sockets open), and deaf to the signals that stop a job step:
 * it ends when the parent has, by a clean finalize. */
static void reader_child(int answer_fd, int hold_fd, int parent_ends[2])
{
    ct_pmix_client *c = NULL;
    ct_error child_err;
    int rc, null_fd, sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE };
    char byte;

    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        signal(sigs[i], SIG_IGN);
    /* The parent's ends first: with the hold pipe's write end open here, it never reads end of file. */
    close(parent_ends[0]);
    close(parent_ends[1]);
    /* Its two ends above stdio (a parent started with stdin closed gets a pipe there), then stdio
     * on /dev/null and every other descriptor closed. */
    answer_fd = answer_fd < 3 ? fcntl(answer_fd, F_DUPFD, 3) : answer_fd;
    hold_fd = hold_fd < 3 ? fcntl(hold_fd, F_DUPFD, 3) : hold_fd;
    if (answer_fd < 0 || hold_fd < 0)
        _exit(1);   /* the parent reads end of file: "ended without an answer" */
    if ((null_fd = open("/dev/null", O_RDWR)) >= 0) {
        dup2(null_fd, 0);
        dup2(null_fd, 1);
        dup2(null_fd, 2);
    }
    close_all_but(answer_fd, hold_fd);
    ct_error_clear(&child_err);
    rc = ct_pmix_client_init(&c, &child_err);
    if (ct_write_all(answer_fd, &rc, sizeof(rc)) == 0)
        ct_write_all(answer_fd, rc == 0 ? (const void *)c : (const void *)&child_err,
                     rc == 0 ? sizeof(*c) : sizeof(child_err));
    close(answer_fd);
    if (rc == 0) {
        for (;;) {   /* until end of file: the parent (and all it forked) has gone */
            ssize_t r = read(hold_fd, &byte, 1);

            if (r == 0 || (r < 0 && errno != EINTR))
                break;
        }
        PMIx_Finalize(NULL, 0);
    }
    _exit(0);
}

static int client_init_detached(ct_pmix_client **out, ct_error *err)
{
    ct_pmix_client *c = NULL, got;
    ct_error child_err;
    int fd[2], hold[2], status = 0, rc;
    pid_t pid;

    *out = NULL;
    if (!ct_pmix_client_present(process_getenv, NULL))
        return ct_pmix_client_init(out, err);   /* says why, connects nothing */
    if (pipe2(fd, O_CLOEXEC) != 0)
        return ct_error_set(err, CT_EIO, "pmix-init", "pipe for the PMIx layout reader: %s", strerror(errno));
    if (pipe2(hold, O_CLOEXEC) != 0) {
        close(fd[0]);
        close(fd[1]);
        return ct_error_set(err, CT_EIO, "pmix-init", "pipe for the PMIx layout reader: %s", strerror(errno));
    }
    pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        close(hold[0]);
        close(hold[1]);
        return ct_error_set(err, CT_EIO, "pmix-init", "fork of the PMIx layout reader: %s", strerror(errno));
    }
    if (pid == 0)
        reader_child(fd[1], hold[0], (int[2]){ fd[0], hold[1] });
    close(fd[1]);
    close(hold[0]);
    rc = read_all(fd[0], &status, sizeof(status));
    if (rc == 0 && status == 0)
        rc = read_all(fd[0], &got, sizeof(got));
    else if (rc == 0)
        rc = read_all(fd[0], &child_err, sizeof(child_err));
    close(fd[0]);
    if (rc != 0 || status != 0) {
        close(hold[1]);   /* the child finalizes (if connected) and ends */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    /* On success hold[1] stays open, close-on-exec, for the life of this process; the child,
     * reparented when this process ends, is then reaped by init or the step's subreaper. */
    if (rc != 0)
        return ct_error_set(err, CT_ECOMM, "pmix-init", "the PMIx layout reader (pid %ld) ended without "
                            "an answer", (long)pid);
    if (status != 0) {
        if (err)
            *err = child_err;
        return status;
    }
    if (!(c = calloc(1, sizeof(*c))))
        return ct_error_set(err, CT_ENOMEM, "oom", "out of memory creating the PMIx client");
    *c = got;
    c->detached = 1;
    c->pending = NULL;
    sync_init(c);
    *out = c;
    return 0;
}

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static ct_pmix_client *shared_client;

static void shared_at_exit(void)
{
    ct_pmix_client *c = shared_client;

    shared_client = NULL;
    if (c) {
        c->shared = 0;
        ct_pmix_client_finalize(c);
    }
}

int ct_pmix_client_shared(ct_pmix_client **out, ct_error *err)
{
    int rc = 0;

    pthread_mutex_lock(&shared_lock);
    if (!shared_client) {
        static int at_exit_set;

        /* Once MPI_Init has connected, a client connects on top of MPI's connection; a child
         * forked then would inherit that connection. */
        rc = ct_pmix_mpi_init_needs_finalized() && !PMIx_Initialized() ?
                 client_init_detached(&shared_client, err) : ct_pmix_client_init(&shared_client, err);
        if (rc == 0) {
            shared_client->shared = 1;
            if (!at_exit_set++)
                atexit(shared_at_exit);
        }
    }
    *out = shared_client;
    pthread_mutex_unlock(&shared_lock);
    return rc;
}

int ct_pmix_mpi_init_needs_finalized(void)
{
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
    return 1;
#else
    return 0;
#endif
}

void ct_pmix_client_before_mpi_init(void)
{
    ct_pmix_client *c;

    if (!ct_pmix_mpi_init_needs_finalized())
        return;
    pthread_mutex_lock(&shared_lock);
    c = shared_client;
    if (c && c->detached)
        c = NULL;    /* never connected from this process: nothing to end */
    else
        shared_client = NULL;
    pthread_mutex_unlock(&shared_lock);
    if (c) {
        c->shared = 0;
        ct_pmix_client_finalize(c);
    }
}

int ct_pmix_after_mpi_init(double timeout_s, ct_error *err)
{
    ct_pmix_client *c;
    int rc;

    if ((rc = ct_pmix_client_shared(&c, err)))
        return rc;
    /* A fence that collects data: srun's PMIx plugin (SLURM 22.05 and 24.11, measured) lets rank 0
     * out of a fence without data at once, while the other ranks still wait. */
    if ((rc = ct_pmix_fence(c, timeout_s, err)))
        ct_error_prefix(err, "waiting for every rank to leave MPI_Init: ");
    return rc;
}

void ct_pmix_client_finalize(ct_pmix_client *c)
{
    if (!c || c->shared)
        return;
    if (!c->detached)
        PMIx_Finalize(NULL, 0);
    /* A fence abandoned by a timeout may still hold the lock's address: keep it alive. */
    if (!c->broken) {
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        free(c);
    }
}
