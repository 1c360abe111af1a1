/* ddp: one process per device, gradients averaged across ranks by MPI over the PMIx-provided world.
 *
 * Any launcher: srun --mpi=pmix, mpirun and ctrain's own launchers all give each rank a PMIx
 * server, so MPI_Init joins the same world everywhere. Gradients are split into buckets from the
 * end of the array (backward fills them in that order); a bucket's non-blocking allreduce starts
 * the moment backward has produced all of it, and grad_sync waits for the rest — communication
 * overlaps the backward of earlier layers. MPI errors come back as return codes (MPI_ERRORS_RETURN)
 * and become messages naming the call; nothing aborts the job behind the user's back.
 *
 * On cuda the gradients live on the GPU and NCCL moves them (ddp_nccl.c): the same buckets, each
 * started by grad_ready; MPI still carries the small host-side collectives (metrics, barriers).
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
    size_t ready;        /* floats produced by backward so far this step */
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
    struct bucket *buckets;
    int n_buckets;
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
    d->bucket_mb = 1.0;
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

/* Buckets of about bucket_mb, laid from the end of the gradient array towards the start. */
static int plan_buckets(struct ddp *d, ct_error *err)
{
    size_t per = (size_t)(d->bucket_mb * 1024.0 * 1024.0 / sizeof(float));
    size_t end = d->n;
    int nb;

    if (per < 1)
        per = 1;
    nb = (int)((d->n + per - 1) / per);
    d->buckets = calloc((size_t)(nb > 0 ? nb : 1), sizeof(*d->buckets));
    if (!d->buckets)
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory for %d buckets", nb);
    for (int i = 0; i < nb; i++) {
        size_t len = end > per ? per : end;
        d->buckets[i].start = end - len;
        d->buckets[i].len = len;
        d->buckets[i].req = MPI_REQUEST_NULL;
        end -= len;
    }
    d->n_buckets = nb;
    return 0;
}

static int ddp_setup_model(ct_strategy *s, float *params, float *grads, size_t n, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    d->grads = grads;
    d->n = n;
    if (d->comm == MPI_COMM_NULL)
        return 0; /* one rank, no process group */
    /* Every rank starts from rank 0's initial weights. */
    if (d->nccl) {
        if ((rc = nccl_broadcast(d, params, n, err)))
            return rc;
        free(d->buckets);
        return plan_buckets(d, err);
    }
    rc = MPI_Bcast(params, (int)n, MPI_FLOAT, 0, d->comm);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, "MPI_Bcast of the initial parameters", err);
    free(d->buckets);
    return plan_buckets(d, err);
}

static int start_bucket(struct ddp *d, struct bucket *b, ct_error *err)
{
    int rc;

    if (d->nccl) {
        b->started = 1;
        return nccl_start(d, b, err);
    }
    rc = MPI_Iallreduce(MPI_IN_PLACE, d->grads + b->start, (int)b->len, MPI_FLOAT, MPI_SUM, d->comm, &b->req);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, "MPI_Iallreduce", err);
    b->started = 1;
    return 0;
}

static int ddp_grad_ready(ct_strategy *s, size_t offset, size_t count, ct_error *err)
{
    struct ddp *d = s->impl;
    size_t end = offset + count;
    int rc, flag;

    if (d->comm == MPI_COMM_NULL || s->world_size == 1)
        return 0;
    for (int i = 0; i < d->n_buckets; i++) {
        struct bucket *b = &d->buckets[i];
        size_t lo = b->start > offset ? b->start : offset;
        size_t hi = b->start + b->len < end ? b->start + b->len : end;
        if (lo >= hi)
            continue;
        b->ready += hi - lo;
        if (d->overlap && b->ready == b->len && !b->started && (rc = start_bucket(d, b, err)))
            return rc;
    }
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
    for (int i = 0; i < d->n_buckets; i++)
        if (!d->buckets[i].started && (rc = start_bucket(d, &d->buckets[i], err)))
            return rc;
    t0 = ct_time_now();
    if (d->nccl) {
        /* NCCL averaged in the collective (ncclAvg): nothing left to scale. */
        for (int i = 0; i < d->n_buckets; i++)
            d->buckets[i].ready = d->buckets[i].started = 0;
        rc = nccl_wait(d, err);
        s->exposed_comm_s += ct_time_now() - t0;
        return rc;
    }
    for (int i = 0; i < d->n_buckets; i++) {
        struct bucket *b = &d->buckets[i];
        rc = MPI_Wait(&b->req, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Wait on a gradient allreduce", err);
        b->ready = 0;
        b->started = 0;
    }
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
