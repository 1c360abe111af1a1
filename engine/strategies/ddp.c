/* ddp: one process per device, gradients averaged across ranks by MPI over the PMIx-provided world.
 *
 * Any launcher: srun --mpi=pmix, mpirun and ctrain's own launchers all give each rank a PMIx
 * server, so MPI_Init joins the same world everywhere. Gradients are cut into buckets of whole
 * tensors from the end of the array (backward produces them in that order); a bucket's non-blocking
 * allreduce starts the moment backward has produced all of it, and grad_sync waits for the rest —
 * communication overlaps the backward of earlier layers. MPI errors come back as return codes
 * (MPI_ERRORS_RETURN) and become messages naming the call; nothing aborts the job behind the
 * user's back.
 *
 * On cuda the gradients live on the GPU and NCCL moves them (ddp_nccl.c): the same buckets, each
 * started as it closes; MPI still carries the small host-side collectives (metrics, barriers).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/util.h"
#include "engine/strategies/strategies.h"
#ifdef CT_HAVE_CUDA
#include "engine/strategies/ddp_nccl.h"
#endif

struct bucket {
    size_t start, len;   /* floats of grads[] */
    int started;
    MPI_Request req;
};

struct ddp {
    double bucket_mb;
    int overlap;
    int mpi_owner;       /* we called MPI_Init, so we finalize */
    MPI_Comm comm;
    float *grads;
    size_t n;
    struct bucket *buckets; /* this step's buckets, in the order they were cut */
    int n_buckets, cap_buckets;
    size_t pending_lo, pending_hi; /* announced gradients not yet in a bucket: [lo, hi) */
    size_t bucket_floats;
    struct ct_nccl *nccl;  /* cuda: gradients are device memory, reduced by NCCL */
};

/* --- the seam to NCCL (cuda builds); without CUDA these are never reached ---------------------- */
#ifdef CT_HAVE_CUDA
/* Bound on the NCCL bootstrap and each wait for a collective. */
#define NCCL_TIMEOUT_S 600.0

static int nccl_setup(ct_strategy *s, struct ddp *d, ct_error *err)
{
    if (strcmp(s->accelerator->name, "cuda"))
        return 0;
    return ct_nccl_create(s->global_rank, s->world_size, NCCL_TIMEOUT_S, &d->nccl, err);
}
static int nccl_broadcast(struct ddp *d, float *p, size_t n, ct_error *err) { return ct_nccl_broadcast(d->nccl, p, n, 0, err); }
static int nccl_start(struct ddp *d, struct bucket *b, ct_error *err)
{
    return ct_nccl_allreduce_start(d->nccl, d->grads + b->start, b->len, err);
}
static int nccl_wait(struct ddp *d, ct_error *err) { return ct_nccl_wait(d->nccl, err); }
static void nccl_free(struct ddp *d) { ct_nccl_free(d->nccl); d->nccl = NULL; }
#else
static int nccl_setup(ct_strategy *s, struct ddp *d, ct_error *err) { return 0; }
static int nccl_broadcast(struct ddp *d, float *p, size_t n, ct_error *err) { return CT_ENOTAVAIL; }
static int nccl_start(struct ddp *d, struct bucket *b, ct_error *err) { return CT_ENOTAVAIL; }
static int nccl_wait(struct ddp *d, ct_error *err) { return CT_ENOTAVAIL; }
static void nccl_free(struct ddp *d) { }
#endif

static int mpi_error(int rc, const char *call, ct_error *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof(text), "MPI error %d", rc);
    ct_error_set(err, CT_ECOMM, "mpi", "ddp: %s failed: %s", call, text);
    return ct_error_hint(err, "a peer rank probably died or lost its connection; see the other ranks' messages");
}

static int ddp_init(ct_strategy *s, ct_error *err)
{
    struct ddp *d = calloc(1, sizeof(*d));
    char buf[64];

    if (!d)
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory");
    d->bucket_mb = 0.5; /* the registry's default (engine/registry/registry.c) */
    d->overlap = 1;
    if (ct_options_get(s->options, "bucket_mb", buf, sizeof(buf)))
        ct_parse_double(buf, &d->bucket_mb);
    if (ct_options_get(s->options, "overlap", buf, sizeof(buf)))
        d->overlap = strcmp(buf, "0") != 0;
    d->comm = MPI_COMM_NULL;
    s->impl = d;
    return 0;
}

/* Ranks come from MPI; where the cluster environment knows the node layout (srun, mpirun, our
 * subprocess launcher) local and node ranks come from it, else (forked workers) all are local. */
static int ddp_setup_environment(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    int inited = 0, provided, rank, size, rc;

    if (s->world_size == 1 && !getenv("PMIX_RANK")) {
        /* One rank and no PMIx server: nothing to join; collectives are identities. */
        s->global_rank = s->local_rank = s->node_rank = 0;
        s->device = s->devices[0];
        return s->accelerator->set_device(s->device, err);
    }
    if (!getenv("PMIX_RANK")) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-no-pmix",
                     "ddp: %d ranks but no PMIx server to join them (cluster environment: %s)", s->world_size,
                     s->env_name);
        return ct_error_hint(err, "launch with srun --mpi=pmix, mpirun, or `ctrain fit --devices N` on one node");
    }
    MPI_Initialized(&inited);
    if (!inited) {
        /* A rank waiting in MPI_Wait spins; when ranks share cores with each other or with other
         * work, the spinning takes the cycles of the very peer it waits for (measured: 2 ranks on
         * 2 busy cores train 1.4x faster yielding). Yielding costs a syscall when a core is idle.
         * Open MPI reads it at MPI_Init; a value the user set wins. */
        setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Init_thread", err);
        d->mpi_owner = 1;
    }
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &d->comm);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, "MPI_Comm_dup", err);
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &rank);
    MPI_Comm_size(d->comm, &size);
    if (s->env_info.creates_processes_externally && size != s->world_size) {
        ct_error_set(err, CT_ECONFLICT, "ddp-world-mismatch",
                     "ddp: MPI sees %d ranks but the cluster environment %s says %d", size, s->env_name,
                     s->world_size);
        return ct_error_hint(err, "with srun use --mpi=pmix so MPI joins the step's tasks");
    }
    s->world_size = size;
    s->global_rank = rank;
    if (s->env_info.creates_processes_externally) {
        s->local_rank = s->env_info.local_rank;
        s->node_rank = s->env_info.node_rank;
    } else {
        s->local_rank = rank;
        s->node_rank = 0;
    }
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
static struct bucket *bucket_add(struct ddp *d, size_t start, size_t len, ct_error *err)
{
    struct bucket *b;

    if (d->n_buckets == d->cap_buckets) {
        int cap = d->cap_buckets ? 2 * d->cap_buckets : 8;
        struct bucket *nb = realloc(d->buckets, (size_t)cap * sizeof(*nb));

        if (!nb) {
            ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory for %d buckets", cap);
            return NULL;
        }
        d->buckets = nb;
        d->cap_buckets = cap;
    }
    b = &d->buckets[d->n_buckets++];
    memset(b, 0, sizeof(*b));
    b->start = start;
    b->len = len;
    b->req = MPI_REQUEST_NULL;
    return b;
}

static int ddp_setup_model(ct_strategy *s, float *params, float *grads, size_t n, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    d->grads = grads;
    d->n = n;
    if (d->comm == MPI_COMM_NULL)
        return 0; /* one rank, no process group */
    /* Every rank starts from rank 0's initial weights (on cuda they are in device memory). */
    if (d->nccl) {
        if ((rc = nccl_broadcast(d, params, n, err)))
            return rc;
    } else {
        rc = MPI_Bcast(params, (int)n, MPI_FLOAT, 0, d->comm);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Bcast of the initial parameters", err);
    }
    d->bucket_floats = (size_t)(d->bucket_mb * 1024.0 * 1024.0 / sizeof(float));
    if (d->bucket_floats < 1)
        d->bucket_floats = 1;
    d->n_buckets = 0;
    d->pending_lo = d->pending_hi = n;
    return 0;
}

static int start_bucket(ct_strategy *s, struct bucket *b, int in_backward, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    if (d->nccl) {
        if ((rc = nccl_start(d, b, err)))
            return rc;
    } else {
        rc = MPI_Iallreduce(MPI_IN_PLACE, d->grads + b->start, (int)b->len, MPI_FLOAT, MPI_SUM, d->comm, &b->req);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Iallreduce", err);
    }
    b->started = 1;
    s->grad_allreduces++;
    s->grad_allreduces_in_backward += in_backward;
    return 0;
}

/* Close the pending gradients into a bucket and, with overlap, start its allreduce now. */
static int close_bucket(ct_strategy *s, int start, ct_error *err)
{
    struct ddp *d = s->impl;
    struct bucket *b;

    if (d->pending_lo == d->pending_hi)
        return 0;
    b = bucket_add(d, d->pending_lo, d->pending_hi - d->pending_lo, err);
    if (!b)
        return CT_ENOMEM;
    d->pending_hi = d->pending_lo;
    /* The bucket holding the first tensor closes as backward ends: that one overlaps nothing. */
    return start ? start_bucket(s, b, b->start > 0, err) : 0;
}

static int ddp_grad_ready(ct_strategy *s, size_t offset, size_t count, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc, flag;

    if (d->comm == MPI_COMM_NULL || s->world_size == 1)
        return 0;
    if (offset + count != d->pending_lo) {
        ct_error_set(err, CT_EINTERNAL, "ddp-grad-order",
                     "ddp: gradient [%zu, %zu) announced after [%zu, %zu) was; backward must announce "
                     "every tensor, from the last to the first", offset, offset + count, d->pending_lo, d->n);
        return ct_error_hint(err, "this is a bug in ctrain; please report it");
    }
    if (d->pending_lo == d->pending_hi)
        d->pending_hi = offset + count;
    d->pending_lo = offset;
    if (d->pending_hi - d->pending_lo >= d->bucket_floats && (rc = close_bucket(s, d->overlap, err)))
        return rc;
    /* Open MPI progresses non-blocking collectives inside MPI calls: poke it between layers. */
    for (int i = 0; i < d->n_buckets; i++) {
        if (d->buckets[i].started && d->buckets[i].req != MPI_REQUEST_NULL) {
            rc = MPI_Test(&d->buckets[i].req, &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS)
                return mpi_error(rc, "MPI_Test", err);
        }
    }
    return 0;
}

static int ddp_grad_sync(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    float scale = 1.0f / (float)s->world_size;
    double t0;
    int rc;

    if (d->comm == MPI_COMM_NULL || s->world_size == 1)
        return 0;
    if ((rc = close_bucket(s, 0, err)))
        return rc;
    if (d->pending_lo != 0) {
        ct_error_set(err, CT_EINTERNAL, "ddp-grad-missing", "ddp: gradients [0, %zu) of %zu were never announced",
                     d->pending_lo, d->n);
        return ct_error_hint(err, "this is a bug in ctrain; please report it");
    }
    for (int i = 0; i < d->n_buckets; i++)
        if (!d->buckets[i].started && (rc = start_bucket(s, &d->buckets[i], 0, err)))
            return rc;
    t0 = ct_time_now();
    if (d->nccl) {
        /* NCCL averaged in the collective (ncclAvg): nothing left to scale. */
        rc = nccl_wait(d, err);
        d->n_buckets = 0;
        d->pending_lo = d->pending_hi = d->n;
        s->exposed_comm_s += ct_time_now() - t0;
        return rc;
    }
    for (int i = 0; i < d->n_buckets; i++) {
        struct bucket *b = &d->buckets[i];
        rc = MPI_Wait(&b->req, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Wait on a gradient allreduce", err);
        b->started = 0;
    }
    d->n_buckets = 0;
    d->pending_lo = d->pending_hi = d->n;
    s->exposed_comm_s += ct_time_now() - t0;
    for (size_t i = 0; i < d->n; i++)
        d->grads[i] *= scale;
    return 0;
}

static int ddp_barrier(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    if (d->comm == MPI_COMM_NULL)
        return 0;
    rc = MPI_Barrier(d->comm);
    return rc == MPI_SUCCESS ? 0 : mpi_error(rc, "MPI_Barrier", err);
}

static int ddp_broadcast(ct_strategy *s, void *buf, size_t bytes, int root, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    if (d->comm == MPI_COMM_NULL)
        return 0;
    rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, d->comm);
    return rc == MPI_SUCCESS ? 0 : mpi_error(rc, "MPI_Bcast", err);
}

static int ddp_reduce_sum(ct_strategy *s, double *values, int n, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    if (d->comm == MPI_COMM_NULL)
        return 0;
    rc = MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, d->comm);
    return rc == MPI_SUCCESS ? 0 : mpi_error(rc, "MPI_Allreduce of metrics", err);
}

static void ddp_teardown(ct_strategy *s)
{
    struct ddp *d = s->impl;
    int finalized = 0;

    if (!d)
        return;
    nccl_free(d);
    if (d->comm != MPI_COMM_NULL)
        MPI_Comm_free(&d->comm);
    MPI_Finalized(&finalized);
    if (d->mpi_owner && !finalized)
        MPI_Finalize();
    d->mpi_owner = 0;
}

static void ddp_destroy(ct_strategy *s)
{
    struct ddp *d = s->impl;

    if (!d)
        return;
    free(d->buckets);
    free(d);
    s->impl = NULL;
}

const struct ct_strategy_ops ct_strategy_ddp = {
    .name = "ddp",
    .init = ddp_init,
    .setup_environment = ddp_setup_environment,
    .setup_model = ddp_setup_model,
    .grad_ready = ddp_grad_ready,
    .grad_sync = ddp_grad_sync,
    .barrier = ddp_barrier,
    .broadcast = ddp_broadcast,
    .reduce_sum = ddp_reduce_sum,
    .teardown = ddp_teardown,
    .destroy = ddp_destroy,
};
