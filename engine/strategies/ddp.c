/* SPDX-License-Identifier: BSD-3-Clause */
/* ddp: one process per device, gradients summed across ranks (each rank's backward took its share of
 * the global mean; a library that averages gets its own count) over the collectives of
 * engine/collectives: the backend option (Lightning's process_group_backend) names the library,
 * ct_coll_choose resolves auto in the rank, and ddp calls the one table.
 *
 * Gradients are cut into buckets of whole tensors from the end of the array (backward produces them
 * in that order); a bucket's non-blocking allreduce starts the moment backward has produced all of
 * it, and grad_sync waits for the rest — communication overlaps the backward of earlier layers
 * (overlap=0: every bucket starts in grad_sync). Where the model lives in device memory (cuda) its
 * arrays have a library of their own beside the host one (model_coll), which still carries the small
 * host-side values (metrics, the stop agreement, broadcasts).
 *
 * Collective timeout: every wait is bounded by --collective-timeout
 * (the plan's collective_timeout_s); when it passes, the collectives layer finds the ranks that
 * never arrived and every waiting rank fails with the same message. A broken group is not left
 * cleanly (teardown skips it) and freeing the strategy ends the job where the library can (an abort
 * every launcher turns into ending every rank); elsewhere the other ranks' timeout ends them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/envs.h"
#include "ctrain/util.h"
#include "engine/strategies/ddp_internal.h"

int ct_ddp_single(const struct ddp *d) { return d->coll == NULL; }

int ct_ddp_wait(ct_strategy *s, ct_coll *c, long ticket, const char *what, ct_error *err)
{
    struct ddp *d = s->impl;

    if (ticket < 0)
        return (int)ticket;
    /* The trace follows the host group's collectives, the numbers every rank's record shares. */
    ct_coll_watch(c, c == d->coll ? s->trace : NULL, s->collective_timeout_s);
    return ct_coll_wait(c, ticket, what, err);
}

/* A 0/1 option; dflt where the strategy's schema lacks the key (ddp_sharded has no overlap). */
static int option_flag(const ct_config *opts, const char *key, int dflt)
{
    const char *v = ct_config_text(opts, key);

    return v[0] ? strcmp(v, "0") != 0 : dflt;
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
    ct_str_copy(d->asked, sizeof(d->asked), ct_config_text(&opts, "backend"));
    if ((rc = ct_coll_check_backend(d->asked, err))) {
        free(d);
        return rc;
    }
    s->impl = d;
    return 0;
}

/* The library the backend names joins the ranks (its numbering, checked against the cluster
 * environment's, or the environment's layout where the library has none); then the device, and
 * the model's library where the model lives in device memory. */
static int ct_ddp_setup_environment(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    struct ct_coll_choice q = { d->asked, s->ops->name, s->accelerator_name, s->env_name,
                                s->accelerator->device_memory, s->world_size };
    struct ct_coll_setup su = { d->backend, d->backend_why, s->ops->name, s->global_rank, s->world_size,
                                &s->env_info, s->env_name, s->collective_timeout_s, d->overlap,
                                s->accelerator->device_memory, s->num_nodes, s->store_run_id, s->store_bind,
                                s->store_secret_file };
    int rc;

    if (s->world_size == 1 && !ct_env_pmix_started(NULL, NULL)) {
        /* One rank and no PMIx server: nothing to join; collectives are identities. */
        s->global_rank = s->local_rank = s->node_rank = 0;
        s->device = s->devices[0];
        return s->accelerator->set_device(s->device, err);
    }
    if ((rc = ct_coll_choose(&q, d->backend, sizeof(d->backend), d->backend_why, sizeof(d->backend_why), err)) ||
        (rc = ct_coll_open(&su, &d->coll, err)))
        return rc;
    s->global_rank = ct_coll_rank(d->coll);
    s->local_rank = ct_coll_local_rank(d->coll);
    s->node_rank = ct_coll_node_rank(d->coll);
    s->device = s->devices[s->local_rank < s->n_devices ? s->local_rank : 0];
    if ((rc = s->accelerator->set_device(s->device, err)))
        return rc;
    return ct_coll_open_model(d->coll, &su, &d->model_coll, err);
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

    if (d->n_buckets >= d->cap_buckets) {
        int cap = d->cap_buckets ? 2 * d->cap_buckets : 8;
        struct bucket *nb = realloc(d->buckets, (size_t)cap * sizeof(*nb));

        if (!nb) {
            ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory for %d buckets", cap);
            return -1;
        }
        d->buckets = nb;
        d->cap_buckets = cap;
    }
    b = &d->buckets[d->n_buckets];
    memset(b, 0, sizeof(*b));
    b->start = start;
    b->len = len;
    return d->n_buckets++;
}

/* Element i of the gradient array, whatever its type. */
static void *grad_at(const struct ddp *d, size_t i) { return (char *)d->grads + i * d->esize; }

static int ct_ddp_setup_model(ct_strategy *s, void *params, void *grads, size_t n, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    if (d->coll && s->param_dtype == CT_DTYPE_BF16 && (rc = ct_coll_check_bf16(d->coll, err)))
        return rc;
    if (s->param_dtype != CT_DTYPE_F32 && s->param_dtype != CT_DTYPE_F64 &&
        !(s->param_dtype == CT_DTYPE_BF16 && !(d->model_coll && !ct_coll_has_bf16(d->model_coll)))) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-dtype", "%s exchanges fp32, fp64 or (on cpu) bf16 gradients only",
                     s->ops->name);
        return ct_error_hint(err, "use --precision 32-true, bf16-mixed, 64-true or bf16-true");
    }
    d->grads = grads;
    d->n = n;
    d->esize = ct_dtype_size(s->param_dtype);
    /* The collectives run in the parameters' own type: 64-true's allreduce sums fp64, bf16-true's
     * bf16 (2 bytes an element on the wire, as PyTorch's DDP on a bf16 model). */
    d->type = s->param_dtype == CT_DTYPE_F64 ? CT_COLL_F64 : s->param_dtype == CT_DTYPE_BF16 ? CT_COLL_BF16
                                                                                            : CT_COLL_F32;
    if (ct_ddp_single(d))
        return 0; /* one rank, no process group */
    /* Where the library sums the ranks' gradients, every rank's backward takes the mean over the
     * global batch: the sum is then the average, with no pass of its own (one over every gradient
     * was 6% of a 2-rank step in `perf record`). For a power-of-two world the result is the same
     * bits as averaging after the sum. A library that averages counts one. */
    s->grad_ranks = ct_coll_sums(d->model_coll) ? s->world_size : 1;
    /* Every rank starts from rank 0's initial weights (on cuda they are in device memory). */
    if ((rc = ct_ddp_wait(s, d->model_coll, ct_coll_broadcast_start(d->model_coll, params, n, d->type, 0, err),
                          "the broadcast of the initial parameters", err)))
        return rc;
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
    long t;
    int rc;

    if (d->start_reduce) {
        if ((rc = d->start_reduce(s, i, err)))
            return rc;
    } else if ((t = ct_coll_allreduce_start(d->model_coll, grad_at(d, b->start), b->len, d->type, err)) < 0) {
        /* A threaded library sums it while backward goes on (overlap=0: in grad_sync); a
         * failure there is seen in grad_sync's wait. */
        return (int)t;
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

/* The posted values' allreduce, in flight beside the gradient buckets (on the host's library). */
static int start_posted(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    long t = ct_coll_allreduce_start(d->coll, d->posted, (size_t)d->n_posted, CT_COLL_F64, err);

    if (t < 0)
        return (int)t;
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
static int skipped_grads(ct_strategy *s, size_t lo, size_t hi, ct_error *err)
{
    struct ddp *d = s->impl;
    int device = s->accelerator->device_memory;

    if (d->find_unused && !device) {
        memset(grad_at(d, lo), 0, d->esize * (hi - lo));
        return 0;
    }
    ct_error_set(err, CT_EINVAL, "ddp-grad-missing", "ddp: the model's backward gave no gradient to parameters "
                 "[%zu, %zu) of %zu (the parameter array's offsets)", lo, hi, d->n);
    if (device)
        return ct_error_hint(err, "on cuda every parameter needs a gradient: announce each tensor in backward, "
                             "from the last to the first (zeros for a parameter forward did not use)");
    return ct_error_hint(err, "a model that leaves parameters without a gradient runs with --strategy "
                         "ddp_find_unused_parameters_true (they count as zero); or announce each tensor, from "
                         "the last to the first");
}

static int ct_ddp_grad_ready(ct_strategy *s, size_t offset, size_t count, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    if (ct_ddp_single(d) || s->world_size == 1)
        return 0;
    if (offset + count < d->pending_lo && (rc = skipped_grads(s, offset + count, d->pending_lo, err)))
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
    /* A library that progresses inside its calls gets a poke between layers. */
    return ct_coll_progress(d->model_coll, err);
}

/* Every bucket's collective and the posted values: one wait where one library carries both (the
 * collectives complete in the order they started: the last one's end is every one's). */
static int wait_grads(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    const char *what = d->start_reduce ? "the gradient reduce-scatter" : "the gradient allreduce";
    int rc;

    if (d->model_coll == d->coll)
        return ct_ddp_wait(s, d->coll, ct_coll_last(d->coll), what, err);
    if ((rc = ct_ddp_wait(s, d->model_coll, ct_coll_last(d->model_coll), what, err)) || !d->posted)
        return rc;
    return ct_ddp_wait(s, d->coll, ct_coll_last(d->coll), "the allreduce of the posted values", err);
}

static int ct_ddp_grad_sync(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    double t0;
    int rc;

    if (ct_ddp_single(d) || s->world_size == 1)
        return 0;
    /* Everything from here is communication backward did not hide: the buckets started here (a
     * blocking allreduce under overlap=0 runs inside its start) and the waits. */
    t0 = ct_time_now();
    if ((rc = close_bucket(s, 0, err)))
        return rc;
    if (d->pending_lo != 0) {
        /* the first tensors never announced: zeros in one more bucket, or the error */
        if ((rc = skipped_grads(s, 0, d->pending_lo, err)))
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
    rc = wait_grads(s, err);
    s->exposed_comm_s += ct_time_now() - t0;
    d->posted = NULL;
    if (!rc && s->trace)
        s->trace->bucket = -1;
    for (int i = 0; i < d->n_buckets; i++)
        d->buckets[i].started = 0;
    d->n_buckets = 0;
    d->pending_lo = d->pending_hi = d->n;
    if (!rc && d->finish_reduce)
        d->finish_reduce(s);
    return rc;
}

static int ct_ddp_broadcast(ct_strategy *s, void *buf, size_t bytes, int root, ct_error *err)
{
    struct ddp *d = s->impl;

    if (ct_ddp_single(d))
        return 0;
    return ct_ddp_wait(s, d->coll, ct_coll_broadcast_start(d->coll, buf, bytes, CT_COLL_BYTE, root, err),
                       "a broadcast", err);
}

static int ct_ddp_reduce_sum(ct_strategy *s, double *values, int n, ct_error *err)
{
    struct ddp *d = s->impl;

    if (ct_ddp_single(d))
        return 0;
    return ct_ddp_wait(s, d->coll, ct_coll_allreduce_start(d->coll, values, (size_t)n, CT_COLL_F64, err),
                       "an allreduce of metrics", err);
}

static int ct_ddp_sendrecv(ct_strategy *s, const void *sendbuf, size_t send_bytes, int to, void *recvbuf,
                           size_t recv_bytes, int from, ct_error *err)
{
    struct ddp *d = s->impl;

    if (ct_ddp_single(d))
        return 0;
    ct_coll_watch(d->coll, s->trace, s->collective_timeout_s);
    return ct_coll_sendrecv(d->coll, sendbuf, send_bytes, to, recvbuf, recv_bytes, from, err);
}

/* Leave the group cleanly; a broken one cannot (leaving waits for every rank): destroy ends the
 * job instead. */
static void ct_ddp_teardown(ct_strategy *s)
{
    struct ddp *d = s->impl;

    if (!d || ct_coll_broken(d->coll))
        return;
    if (d->model_coll != d->coll)
        ct_coll_close(d->model_coll);
    ct_coll_close(d->coll);
}

/* Freeing ends the job: the group broke and its library can end every rank (an abort). */
static int ct_ddp_ends_job(const ct_strategy *s)
{
    const struct ddp *d = s->impl;

    return d && ct_coll_ends_job(d->coll);
}

static void ct_ddp_destroy(ct_strategy *s)
{
    struct ddp *d = s->impl;

    if (!d)
        return;
    /* After a timeout or a failed collective the host library ends the job first (after the caller
     * printed why), before the model's library could wait on a missing peer. */
    ct_coll *host = d->coll, *model = d->model_coll != d->coll ? d->model_coll : NULL;

    if (ct_coll_ends_job(host)) {
        ct_coll_free(host);
        host = NULL;
    }
    ct_coll_free(model);
    ct_coll_free(host);
    free(d->buckets);
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
