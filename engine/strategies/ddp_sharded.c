/* SPDX-License-Identifier: BSD-3-Clause */
/* ddp_sharded: ddp whose optimizer state (stage 1) and reduced gradients (stage 2) are partitioned
 * over the ranks, as ZeRO does (Lightning's ddp_sharded / DeepSpeed stages 1 and 2).
 *
 * The parameter array is cut into world contiguous shards, rank r owning [n*r/W, n*(r+1)/W). The
 * engine's optimizer keeps the state of this rank's shard only (ct_optim_shard at setup_model), so
 * each rank holds 1/world of it. Gradients go through ddp's buckets, started as backward announces
 * them and waited for with ddp's collective timeout (ddp.c, ddp_internal.h):
 *  - stage 1: each bucket is allreduced as in ddp; the rank reads its shard of the result;
 *  - stage 2: each bucket is reduce-scattered: every rank sends each peer the part of the bucket
 *    inside the peer's shard and receives the peers' parts of its own (point to point, started as
 *    the bucket closes), then sums them in rank order into a shard-sized array — the reduced
 *    gradients are partitioned too, and each rank moves half the bytes an allreduce moves. (A
 *    library's own non-blocking reduce-scatter reduced the whole bucket to rank 0 and scattered it:
 *    rank 0 added everything and each rank sent the whole bucket; measured 1.2x slower steps here.)
 * The strategy owns the update: each rank updates its shard of the parameters with its shard of
 * the state, then an all-gather gives every rank the whole parameters for the next forward. The
 * all-gather runs in pieces of bucket_mb from the first parameter on, started after the update and
 * waited for as forward announces the tensors it reads (ct_strategy_params_needed): the later
 * layers' pieces arrive while the earlier layers compute. Anything else that touches the
 * parameters or the communicator first waits for all of them (params_sync, strategy.c).
 * Checkpoints hold the whole state: the shards are gathered to rank 0, which writes one file that
 * ddp and single_device load as well (and back: each rank keeps its shard of a whole file).
 *
 * On every cpu backend (option backend=, as ddp's) the exchanges are the collectives layer's
 * (engine/collectives): the point-to-point parts as one exchange per bucket and an all-gather per
 * piece, started in order (a threaded library runs them on its worker while backward and forward go
 * on). The shards, and so what each rank owns and what a checkpoint holds, are the same on every
 * library.
 *
 * cpu only (the registry entry says so): on cuda the connector refuses it; the device-memory
 * variant is not written.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/util.h"
#include "engine/strategies/ddp_internal.h"
#include "engine/util/pages.h"

struct sharded {
    int stage;       /* 1: optimizer state partitioned; 2: reduced gradients too */
    float *params;
    size_t *counts;  /* counts[r]: floats of rank r's shard */
    size_t *displs;  /* displs[r]: its first float */
    float *grad_shard; /* stage 2: this rank's reduced gradients, counts[rank] floats */
    /* stage 2: what the peers send of this rank's shard, (world - 1) rows of counts[rank] floats,
     * peer q's in row q (q < rank) or q - 1 (q > rank). */
    float *received;
    /* The parameter all-gather in pieces: piece i is [piece_lo[i], piece_lo[i + 1]) of params,
     * piece_counts[i][r] rank r's part of it (after the parts of the ranks before it). */
    int n_pieces;
    size_t *piece_lo;
    size_t **piece_counts;
    long *piece_tickets; /* each piece's all-gather */
    struct ct_coll_msg *sends, *recvs; /* stage 2: scratch, one bucket's messages */
    int next_piece;    /* the first piece not yet waited for; n_pieces: none in flight */
    int forward_began; /* forward announced its first tensor since the pieces started */
};

static int sharded_init(ct_strategy *s, ct_error *err)
{
    struct sharded *z = calloc(1, sizeof(*z));
    struct ddp *d;
    ct_config opts;
    int rc;

    if (!z)
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp_sharded: out of memory");
    if ((rc = ct_strategy_ddp.init(s, err)) || (rc = ct_strategy_options(s, &opts, err))) {
        free(z);
        return rc;
    }
    d = s->impl;
    d->sharded = z;
    /* The default is the descriptor's (engine/registry/strategy_ddp_sharded.c). */
    z->stage = ct_config_int(&opts, "stage") == 1 ? 1 : 2;
    return 0;
}

static size_t my_lo(const ct_strategy *s, const struct sharded *z) { return (size_t)z->displs[s->global_rank]; }
static size_t my_count(const ct_strategy *s, const struct sharded *z) { return (size_t)z->counts[s->global_rank]; }

/* The part of [a, b) inside rank q's shard: [*x, *y), empty when *y <= *x. */
static void shard_part(const struct sharded *z, int q, size_t a, size_t b, size_t *x, size_t *y)
{
    size_t qlo = z->displs[q], qhi = qlo + z->counts[q];

    *x = a > qlo ? a : qlo;
    *y = b < qhi ? b : qhi;
}

/* Stage 2: reduce-scatter bucket i [a, b): send each peer the part inside its shard, receive each
 * peer's part of this rank's shard, as one exchange; finish_reduce_scatter sums them in rank order.
 * Every rank starts the buckets in the same order, so the exchanges match. */
static int start_reduce_scatter(ct_strategy *s, int i, ct_error *err)
{
    struct ddp *d = s->impl;
    struct sharded *z = d->sharded;
    size_t a = d->buckets[i].start, b = a + d->buckets[i].len, lo = my_lo(s, z), mine = my_count(s, z), x, y;
    int me = s->global_rank, ns = 0, nr = 0;
    long t;

    for (int q = 0; q < s->world_size; q++) {
        shard_part(z, q, a, b, &x, &y);
        if (q != me && y > x)
            z->sends[ns++] = (struct ct_coll_msg){ d->grads + x, (y - x) * sizeof(float), q };
    }
    shard_part(z, me, a, b, &x, &y);
    for (int q = 0; q < s->world_size && y > x; q++)
        if (q != me)
            z->recvs[nr++] = (struct ct_coll_msg){ z->received + (size_t)(q < me ? q : q - 1) * mine + (x - lo),
                                                   (y - x) * sizeof(float), q };
    t = ct_coll_exchange_start(d->coll, z->sends, ns, z->recvs, nr, err);
    return t < 0 ? (int)t : 0;
}

/* Stage 2, every part arrived: this rank's shard is the sum over the ranks, in rank order (the
 * same order whatever arrived first). */
static void finish_reduce_scatter(ct_strategy *s)
{
    struct ddp *d = s->impl;
    struct sharded *z = d->sharded;
    size_t mine = my_count(s, z);
    int me = s->global_rank;

    for (int q = 0; q < s->world_size && mine > 0; q++) {
        const float *part = q == me ? d->grads + my_lo(s, z) : z->received + (size_t)(q < me ? q : q - 1) * mine;

        if (q == 0)
            memcpy(z->grad_shard, part, mine * sizeof(float));
        else
            cblas_saxpy((int)mine, 1.0f, part, 1, z->grad_shard, 1);
    }
}

/* Cut the parameters into all-gather pieces of about piece floats, with each rank's part of each. */
static int make_pieces(ct_strategy *s, struct sharded *z, size_t n, size_t piece, ct_error *err)
{
    int world = s->world_size;

    z->n_pieces = (int)((n + piece - 1) / piece);
    z->piece_lo = calloc((size_t)z->n_pieces + 1, sizeof(size_t));
    z->piece_counts = calloc((size_t)z->n_pieces, sizeof(size_t *));
    z->piece_tickets = calloc((size_t)z->n_pieces, sizeof(long));
    if (!z->piece_lo || !z->piece_counts || !z->piece_tickets)
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp_sharded: out of memory for %d all-gather pieces", z->n_pieces);
    for (int i = 0; i < z->n_pieces; i++) {
        size_t a = (size_t)i * piece, b = a + piece < n ? a + piece : n, x, y;

        z->piece_lo[i] = a;
        z->piece_lo[i + 1] = b;
        if (!(z->piece_counts[i] = calloc((size_t)world, sizeof(size_t))))
            return ct_error_set(err, CT_ENOMEM, NULL, "ddp_sharded: out of memory for all-gather piece %d", i);
        for (int r = 0; r < world; r++) {
            shard_part(z, r, a, b, &x, &y);
            z->piece_counts[i][r] = y > x ? y - x : 0;
        }
    }
    z->next_piece = z->n_pieces; /* nothing in flight */
    return 0;
}

/* Wait for the pieces of the all-gather up to (not including) piece `until`, in order. */
static int wait_pieces(ct_strategy *s, struct sharded *z, int until, int in_forward, ct_error *err)
{
    struct ddp *d = s->impl;
    int rc;

    for (; z->next_piece < until; z->next_piece++) {
        const char *what = "the all-gather of the parameters";

        if ((rc = ct_ddp_wait(s, d->coll, z->piece_tickets[z->next_piece], what, err)))
            return rc;
        s->param_gathers_overlapped += in_forward && z->forward_began;
    }
    return 0;
}

/* Forward reads [offset, offset + count): the pieces up to its end must be here. */
static int sharded_params_needed(ct_strategy *s, size_t offset, size_t count, ct_error *err)
{
    struct ddp *d = s->impl;
    struct sharded *z = d->sharded;
    int until = z->next_piece, rc;

    while (until < z->n_pieces && z->piece_lo[until] < offset + count)
        until++;
    rc = wait_pieces(s, z, until, 1, err);
    z->forward_began = 1;
    return rc;
}

static int sharded_params_sync(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    struct sharded *z = d ? d->sharded : NULL;

    if (!z || ct_coll_broken(d->coll))
        return 0;
    return wait_pieces(s, z, z->n_pieces, 0, err);
}

/* Every piece's all-gather, in order, none waited for: forward waits for each as it reaches it. */
static int start_pieces(ct_strategy *s, struct sharded *z, ct_error *err)
{
    struct ddp *d = s->impl;

    for (int i = 0; i < z->n_pieces; i++) {
        z->piece_tickets[i] = ct_coll_allgather_start(d->coll, z->params + z->piece_lo[i], z->piece_counts[i],
                                                      CT_COLL_F32, err);
        if (z->piece_tickets[i] < 0) {
            /* The pieces started so far are in flight on a broken group: nothing waits for them. */
            z->next_piece = z->n_pieces;
            return (int)z->piece_tickets[i];
        }
        s->param_gathers++;
    }
    z->next_piece = 0;
    z->forward_began = 0;
    return 0;
}

static int sharded_setup_model(ct_strategy *s, void *params, void *grads, size_t n, ct_error *err)
{
    struct ddp *d = s->impl;
    struct sharded *z = d->sharded;
    int world = s->world_size, rc;

    if (!s->optim) {
        ct_error_set(err, CT_EINTERNAL, "ddp-sharded-no-optimizer", "ddp_sharded: setup_model before model_to_device");
        return ct_error_hint(err, "this is a bug in ctrain; please report it");
    }
    /* Its reduce-scatter, shard update and all-gather are written for fp32 arrays. */
    if (s->param_dtype != CT_DTYPE_F32) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-sharded-dtype", "ddp_sharded: parameters stored in fp32 only "
                     "(--precision 32-true or bf16-mixed)");
        return ct_error_hint(err, "use --strategy ddp for this precision");
    }
    if ((rc = ct_coll_check_count(n, "ddp-sharded-too-large", "ddp_sharded: %zu parameters", err)))
        return ct_error_hint(err, "use --strategy ddp");
    if ((rc = ct_strategy_ddp.setup_model(s, params, grads, n, err)))
        return rc;
    z->params = params;
    z->counts = calloc((size_t)world, sizeof(size_t));
    z->displs = calloc((size_t)world, sizeof(size_t));
    if (!z->counts || !z->displs)
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp_sharded: out of memory");
    for (int r = 0; r < world; r++) {
        size_t lo = n * (size_t)r / (size_t)world, hi = n * (size_t)(r + 1) / (size_t)world;

        z->displs[r] = lo;
        z->counts[r] = hi - lo;
    }
    if ((rc = make_pieces(s, z, n, d->bucket_floats, err)))
        return rc;
    /* From here this rank keeps the optimizer state of its shard only. */
    if ((rc = ct_optim_shard(s->optim, my_lo(s, z), my_count(s, z), err)))
        return rc;
    if (z->stage == 2) {
        z->grad_shard = calloc(my_count(s, z) ? my_count(s, z) : 1, sizeof(float));
        /* each peer's part of this rank's shard arrives here */
        z->received = calloc((size_t)(world - 1) * my_count(s, z) + 1, sizeof(float));
        z->sends = calloc((size_t)world, sizeof(*z->sends));
        z->recvs = calloc((size_t)world, sizeof(*z->recvs));
        if (!z->grad_shard || !z->received || !z->sends || !z->recvs)
            return ct_error_set(err, CT_ENOMEM, NULL, "ddp_sharded: out of memory for the gradient shard");
        d->start_reduce = start_reduce_scatter;
        d->finish_reduce = finish_reduce_scatter;
    }
    return 0;
}

/* Stage 2 on several ranks: the update reads this rank's reduced shard only. */
static void sharded_grad_view(ct_strategy *s, void **grads, size_t *count, int *partial)
{
    struct ddp *d = s->impl;
    struct sharded *z = d->sharded;

    if (z->stage == 2 && s->world_size > 1 && !ct_ddp_single(d)) {
        *grads = z->grad_shard;
        *count = my_count(s, z);
        *partial = 1;
    }
}

/* Update this rank's shard, then every rank gathers the whole parameters. */
static int sharded_optimizer_step(ct_strategy *s, ct_model *model, ct_optim *optim, int *skipped, ct_error *err)
{
    struct ddp *d = s->impl;
    struct sharded *z = d->sharded;
    size_t lo = my_lo(s, z);
    int rc;

    *skipped = 0;
    /* Forward waited for every piece; this guards the update against one still arriving. */
    if ((rc = sharded_params_sync(s, err)))
        return rc;
    if (model->ops->optim_step || model->params != z->params) {
        ct_error_set(err, CT_ENOTAVAIL, "ddp-sharded-device-model",
                     "ddp_sharded: model %s updates its own device arrays", model->name);
        return ct_error_hint(err, "use --strategy ddp on this accelerator");
    }
    /* One rank reduces nothing (grad_sync is an identity): its shard is every gradient. */
    ct_optim_step(optim, z->params + lo, z->stage == 2 && s->world_size > 1 ? z->grad_shard : d->grads + lo);
    if (ct_ddp_single(d))
        return 0;
    return start_pieces(s, z, err);
}

/* Its own arrays of reduced gradients (stage 2), for the measured memory. */
static int sharded_resident(ct_strategy *s, size_t bytes[3])
{
    struct ddp *d = s->impl;
    struct sharded *z = d->sharded;
    size_t mine = z->counts ? my_count(s, z) : 0;

    bytes[1] += ct_pages_resident(z->grad_shard, mine * sizeof(float)) +
                ct_pages_resident(z->received, (size_t)(s->world_size - 1) * mine * sizeof(float));
    return 0;
}

/* One state array's shards to rank 0 (a checkpoint). */
static int sharded_gather_shards(ct_strategy *s, const void *mine, void *whole, ct_error *err)
{
    struct ddp *d = s->impl;
    struct sharded *z = d->sharded;

    if (ct_ddp_single(d)) {
        memcpy(whole, mine, my_count(s, z) * sizeof(float));
        return 0;
    }
    return ct_ddp_wait(s, d->coll, ct_coll_gather_start(d->coll, mine, whole, z->counts, CT_COLL_F32, 0, err),
                       "the gather of the optimizer state", err);
}

static void sharded_destroy(ct_strategy *s)
{
    struct ddp *d = s->impl;
    struct sharded *z = d ? d->sharded : NULL;

    if (z) {
        free(z->counts);
        free(z->displs);
        free(z->grad_shard);
        free(z->received);
        for (int k = 0; k < z->n_pieces && z->piece_counts; k++)
            free(z->piece_counts[k]);
        free(z->piece_counts);
        free(z->piece_lo);
        free(z->piece_tickets);
        free(z->sends);
        free(z->recvs);
        free(z);
        d->sharded = NULL;
    }
    ct_strategy_ddp.destroy(s);
}

/* ddp's ops, with what sharding changes: the options, the model's partition, the gradients this rank
 * reads, the parameters' all-gather, the update and the optimizer state's gather, and freeing it. */
const struct ct_strategy_ops *ct_strategy_ddp_sharded_ops(void)
{
    static struct ct_strategy_ops ops;
    static int built;

    if (!built) {
        built = 1;
        ops = ct_strategy_ddp;
        ops.init = sharded_init;
        ops.setup_model = sharded_setup_model;
        ops.grad_view = sharded_grad_view;
        ops.params_needed = sharded_params_needed;
        ops.params_sync = sharded_params_sync;
        ops.optimizer_step = sharded_optimizer_step;
        ops.gather_shards = sharded_gather_shards;
        ops.resident = sharded_resident;
        ops.destroy = sharded_destroy;
    }
    return &ops;
}
