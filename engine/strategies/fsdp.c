/* SPDX-License-Identifier: BSD-3-Clause */
/* fsdp: fully sharded data parallel (Lightning's FSDPStrategy, PyTorch FSDP: ZeRO stage 3) on cpu,
 * over ddp's process group and collectives (ddp.c, ddp_internal.h; the library of backend=).
 *
 * Units. A unit is a contiguous range of the parameter array: each range the model announces in
 * forward (need: GPT's embeddings, each block, the final layer norm; the MLP's layers), or under
 * min_num_params consecutive ones joined up to that size (join_units). They are read off the first
 * forward, while every rank still holds the whole array rank 0 broadcast, so no model is named
 * here; a model that does not announce is one unit (all gathered, nothing freed).
 * Each unit is cut into world parts, rank r holding part r of every unit (its shard, fp32,
 * persistent): the shards of the parameters (pshard), of the reduced gradients (gshard) and the
 * optimizer's state (ct_optim_shard_ranges) are the concatenation of this rank's parts, unit after
 * unit, so each rank holds 1/world of every one of them.
 *
 * A step (full_shard). Before a unit's forward its parts are all-gathered into the model's own
 * parameter array; as forward moves to the next unit the earlier one is released: the pages wholly
 * its own move into a pool slot (ct_pages_pool: page tables moved, nothing zeroed) for the next
 * unit's all-gather to take, the rest go back to the system (madvise(MADV_DONTNEED)), and what the
 * prefetch did not take goes back too before memory is sampled. The
 * next units' all-gathers start early (prefetch), at most limit_all_gathers in flight. Backward
 * announces each unit again (need, last unit first) and it is gathered again; once the unit's
 * gradients are all announced (ready) its parameters are released and its gradients
 * reduce-scattered into gshard — sent to each part's owner and summed in rank order, while backward
 * computes the unit before it; when that exchange is over the unit's whole-gradient pages are
 * released as well. The first unit (the root, as PyTorch's root FSDP unit) stays gathered from
 * forward's start to backward's end: a tied weight (GPT's LM head is its token embedding) lives
 * there. The update runs on the shards; every unit is then released and the first ones' all-gathers
 * start for the next forward.
 * hybrid_shard (PyTorch's HYBRID_SHARD): full_shard within each node, replicated across nodes. The
 * nodes are the step's layout (each rank's node index from the cluster environment, all-gathered
 * at setup_model; every node the same number of ranks, else refused); a unit is cut into the
 * node's parts, so its all-gather is an exchange among the node's ranks and never crosses a node;
 * the gradients are reduce-scattered within the node (summed in rank order), then each node's sum
 * of a part is exchanged with the ranks of the same place on the other nodes and summed in node
 * order — the same bits on every copy; what crosses the link is 1/(ranks a node) of a flat
 * allreduce's per rank. That exchange starts once the node's sum is made and is finished one unit
 * later, while backward computes. The optimizer state is the node's parts. One node: full_shard.
 * shard_grad_op (ZeRO 2): the parameters stay gathered from forward through backward (no
 * re-gather), released after their backward. no_shard: ddp through the same path (each unit's
 * gradients allreduced as its backward ends, nothing released, the optimizer whole).
 *
 * Checkpoints. state_dict_type=sharded (the default, Lightning's): each rank writes its shards as
 * they are (shard_layout says which ranges of the array they hold; engine/checkpoint/sharded.c),
 * nothing gathered. state_dict_type=full: anything that reads the array whole gathers every unit
 * first (params_whole), the optimizer's shards are gathered to rank 0 and put in the parameters'
 * order, one file that ddp and single_device load. Either way a load writes the array whole and
 * each rank takes its parts again (params_written, shard_of).
 *
 * Memory is measured (ct_strategy_memory_sample): the model's arrays with mincore, as each unit is
 * gathered, plus the shards (resident).
 *
 * cpu, 32-true only (the descriptor says so): the shards and exchanges are fp32 arrays.
 * Gradient accumulation (accumulate_grad_batches > 1): every micro-batch's gradients are exchanged
 * unit by unit as its backward goes and added to this rank's shards (accumulates, grad_window), as
 * PyTorch's FSDP does outside no_sync; the units are released as in a step of one micro-batch.
 */
#include <cblas.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#include "ctrain/util.h"
#include "engine/strategies/ddp_internal.h"
#include "engine/strategies/fsdp_auto.h"
#include "engine/util/pages.h"

enum { FULL_SHARD = 0, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, AUTO_SHARD };
enum { U_RELEASED = 0, U_GATHERING, U_GATHERED };

struct unit {
    size_t lo, hi;    /* [lo, hi) of the parameter array */
    size_t *counts;   /* counts[k]: the part of the group's k-th rank, the parts in group order */
    size_t part_lo;   /* this rank's part: [part_lo, part_lo + counts[me]) */
    size_t local;     /* its first element in this rank's shards */
    int state;        /* U_* */
    long gather;      /* U_GATHERING: its all-gather's ticket */
    long reduce;      /* its gradients' exchange in flight (0: none) */
    long cross;       /* hybrid_shard: its node's sum's exchange across the nodes in flight (0: none) */
    int reduced;      /* this step: the exchange started */
    int grad_live;    /* backward announced it and its gradients' exchange is not finished */
    int grad_fresh;   /* grad_live since this announcement: its gradient pages not yet taken */
};

struct fsdp {
    int mode;         /* FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD */
    /* The shard group: the ranks a unit is cut over, this rank's place in it (me), and the replicas:
     * the ranks holding this rank's parts, one a group (the world and this rank alone, but under
     * hybrid_shard on several nodes: the node's ranks, and the same place on every node). */
    int group_n, me, *group;
    int rep_n, rep_me, *reps;
    int *node_of, *place_of; /* [world]: each rank's group (node) and place in it */
    float *xrecv;     /* hybrid_shard: every node's sum of this rank's parts, rep_n rows a unit (ct_pages_alloc) */
    size_t xrecv_bytes;
    int limit;        /* all-gathers in flight, at most */
    int sharded_ckpt; /* state_dict_type=sharded: each rank saves its own shards (shard_layout) */
    size_t min_params; /* min_num_params: announced ranges joined into units of at least this (0: none) */
    struct unit *units;
    int n_units, cap_units;
    int discovering;  /* 1 until the first forward's announcements are units */
    size_t seen;      /* discovering: how far forward announced */
    float *params, *grads;
    size_t n;
    float *pshard, *gshard;
    size_t local_n;   /* this rank's parts of every unit */
    float *recv;      /* the peers' parts of this rank's gradients, (world - 1) rows a unit (ct_pages_alloc) */
    size_t recv_bytes;
    struct ct_coll_msg *sends, *recvs;
    size_t grad_lo;   /* backward: the lowest gradient offset announced this step */
    int micro;        /* the micro-batch of an accumulation window backward is in (0: the first) */
    ct_pages_pool pool; /* released units' parameter pages, for the next all-gathers (no faults) */
    long done;        /* every collective up to this ticket is over */
};

static struct fsdp *fsdp_of(ct_strategy *s) { return ((struct ddp *)s->impl)->sharded; }
/* This rank's place in its shard group (its global rank but under hybrid_shard on several nodes). */
static int me(const ct_strategy *s) { return ((const struct fsdp *)((const struct ddp *)s->impl)->sharded)->me; }
/* Whether forward releases the units it has left (full_shard and hybrid_shard). */
static int frees_forward(const struct fsdp *z) { return z->mode == FULL_SHARD || z->mode == HYBRID_SHARD; }

static int fsdp_init(ct_strategy *s, ct_error *err)
{
    struct fsdp *z = calloc(1, sizeof(*z));
    const char *mode;
    ct_config opts;
    int rc;

    if (!z)
        return ct_error_set(err, CT_ENOMEM, NULL, "fsdp: out of memory");
    if ((rc = ct_strategy_ddp.init(s, err)) || (rc = ct_strategy_options(s, &opts, err))) {
        free(z);
        return rc;
    }
    ((struct ddp *)s->impl)->sharded = z;
    /* The values and defaults are the descriptor's (engine/registry/strategy_fsdp.c). */
    mode = ct_config_text(&opts, "sharding_strategy");
    z->mode = !strcmp(mode, "shard_grad_op") ? SHARD_GRAD_OP
              : !strcmp(mode, "no_shard")    ? NO_SHARD
              : !strcmp(mode, "hybrid_shard") ? HYBRID_SHARD
              : !strcmp(mode, "auto")         ? AUTO_SHARD
                                              : FULL_SHARD;
    z->me = s->global_rank;
    z->limit = ct_config_int(&opts, "limit_all_gathers");
    z->sharded_ckpt = !strcmp(ct_config_text(&opts, "state_dict_type"), "sharded");
    z->min_params = (size_t)ct_config_int(&opts, "min_num_params");
    if (z->limit < 1)
        z->limit = 1;
    z->discovering = 1;
    return 0;
}

/* --- units ------------------------------------------------------------------------------------ */

static int unit_add(struct fsdp *z, size_t lo, size_t hi, ct_error *err)
{
    if (z->n_units == z->cap_units) {
        int cap = z->cap_units ? 2 * z->cap_units : 16;
        struct unit *u = realloc(z->units, (size_t)cap * sizeof(*u));

        if (!u)
            return ct_error_set(err, CT_ENOMEM, NULL, "fsdp: out of memory for %d units", cap);
        z->units = u;
        z->cap_units = cap;
    }
    memset(&z->units[z->n_units], 0, sizeof(z->units[0]));
    z->units[z->n_units].lo = lo;
    z->units[z->n_units].hi = hi;
    z->n_units++;
    return 0;
}

/* The unit holding parameter i (units tile the array in order). */
static int unit_of(const struct fsdp *z, size_t i)
{
    int a = 0, b = z->n_units - 1;

    while (a < b) {
        int m = (a + b + 1) / 2;

        if (z->units[m].lo <= i)
            a = m;
        else
            b = m - 1;
    }
    return a;
}

/* One rank, or no_shard: every rank holds whole units (no parts). */
static int sharded(const ct_strategy *s, const struct fsdp *z)
{
    return z->mode != NO_SHARD && s->world_size > 1 && !ct_ddp_single(s->impl);
}

/* The shard groups from the ranks' nodes (node[q]: rank q's node index, SLURM's SLURM_NODEID as the
 * cluster environment gave it; all 0 but under hybrid_shard): a group is a node's ranks in rank
 * order, numbered by their first rank; every group the same size, or an error. */
static int group_ranks(ct_strategy *s, struct fsdp *z, const int *node, ct_error *err)
{
    int world = s->world_size, n_groups = 0, *size = calloc((size_t)world, sizeof(int));
    int *id = calloc((size_t)world, sizeof(int)); /* id[g]: group g's node index */
    int rc = 0;

    z->node_of = calloc((size_t)world, sizeof(int));
    z->place_of = calloc((size_t)world, sizeof(int));
    if (!size || !id || !z->node_of || !z->place_of) {
        rc = ct_error_set(err, CT_ENOMEM, NULL, "fsdp: out of memory for the shard groups of %d ranks", world);
        goto out;
    }
    for (int q = 0; q < world; q++) {
        int g = 0;

        while (g < n_groups && id[g] != node[q])
            g++;
        if (g == n_groups)
            id[n_groups++] = node[q];
        z->node_of[q] = g;
        z->place_of[q] = size[g]++;
    }
    for (int g = 1; g < n_groups && !rc; g++)
        if (size[g] != size[0]) {
            ct_error_set(err, CT_EINVAL, "fsdp-hybrid-uneven", "fsdp: sharding_strategy=hybrid_shard needs the same "
                         "number of ranks on every node; the step has %d on its first node and %d on its node %d",
                         size[0], size[g], g + 1);
            rc = ct_error_hint(err, "give every node the same number of tasks (srun --ntasks-per-node), or use "
                               "sharding_strategy=full_shard");
        }
    if (rc)
        goto out;
    z->group_n = size[0];
    z->rep_n = n_groups;
    z->me = z->place_of[s->global_rank];
    z->rep_me = z->node_of[s->global_rank];
    z->group = calloc((size_t)z->group_n, sizeof(int));
    z->reps = calloc((size_t)z->rep_n, sizeof(int));
    if (!z->group || !z->reps) {
        rc = ct_error_set(err, CT_ENOMEM, NULL, "fsdp: out of memory for the shard groups of %d ranks", world);
        goto out;
    }
    for (int q = 0; q < world; q++) {
        if (z->node_of[q] == z->rep_me)
            z->group[z->place_of[q]] = q;
        if (z->place_of[q] == z->me)
            z->reps[z->node_of[q]] = q;
    }
out:
    free(size);
    free(id);
    return rc;
}

/* The memory this rank may use: its accelerator's capacity (cpu: the host's, or its cgroup's limit). */
static uint64_t memory_limit(const ct_strategy *s)
{
    ct_memstats st = { 0 };

    return s->accelerator->memory_stats && s->accelerator->memory_stats(s->device, &st) == 0 ? st.total_bytes : 0;
}

/* sharding_strategy=auto (fsdp_auto.c), on the numbers every rank gathered: a node's ranks
 * together hold every part of the parameters, gradients and optimizer state. */
static int auto_mode(ct_strategy *s, const int64_t *info, int world)
{
    uint64_t state = (uint64_t)fsdp_of(s)->n *
                     (2 * ct_dtype_size(s->param_dtype) +
                      (uint64_t)ct_optim_num_states(s->optim) * ct_dtype_size(ct_optim_dtype(s->optim)));

    return ct_fsdp_auto_hybrid(info, world, state, s->choice, sizeof(s->choice)) ? HYBRID_SHARD : FULL_SHARD;
}

/* The shard groups: the world, but under hybrid_shard each node's ranks, the nodes told by an
 * all-gather of each rank's node index (the layout SLURM gave the step: every rank learns every
 * other's) and, for auto, the memory it may use. One node: the world, as full_shard. */
static int shard_groups(ct_strategy *s, struct fsdp *z, ct_error *err)
{
    struct ddp *d = s->impl;
    int world = s->world_size, rc = 0, *node = calloc((size_t)world, sizeof(int));
    int64_t *info = calloc((size_t)world * 2, sizeof(int64_t)); /* each rank's node index and memory */
    size_t *counts = calloc((size_t)world, sizeof(size_t));

    if (!node || !counts || !info) {
        rc = ct_error_set(err, CT_ENOMEM, NULL, "fsdp: out of memory for the shard groups of %d ranks", world);
        goto out;
    }
    if ((z->mode == HYBRID_SHARD || z->mode == AUTO_SHARD) && world > 1 && !ct_ddp_single(d)) {
        for (int q = 0; q < world; q++)
            counts[q] = 2 * sizeof(int64_t);
        info[2 * s->global_rank] = ct_coll_node_rank(d->coll);
        info[2 * s->global_rank + 1] = z->mode == AUTO_SHARD ? (int64_t)memory_limit(s) : 0;
        rc = ct_ddp_wait(s, d->coll, ct_coll_allgather_start(d->coll, info, counts, CT_COLL_BYTE, err),
                         "the all-gather of the ranks' nodes", err);
        z->done = ct_coll_last(d->coll);
        if (!rc && z->mode == AUTO_SHARD)
            z->mode = auto_mode(s, info, world);
        for (int q = 0; q < world && z->mode == HYBRID_SHARD; q++)
            node[q] = (int)info[2 * q];
    }
    if (z->mode == AUTO_SHARD) /* one rank: nothing to shard over */
        z->mode = FULL_SHARD;
    if (!rc)
        rc = group_ranks(s, z, node, err);
out:
    free(node);
    free(info);
    free(counts);
    return rc;
}

/* Every unit's parts, this rank's shards and the optimizer state of its parts, once the units are
 * known. The whole array is here (rank 0's, broadcast at setup_model, or a checkpoint's). */
static int shard_units(ct_strategy *s, struct fsdp *z, ct_error *err)
{
    int world = z->group_n;
    size_t *lo = NULL, *count = NULL;
    int rc = 0;

    if (sharded(s, z) && (rc = ct_coll_check_count(z->n, "fsdp-too-large", "fsdp: %zu parameters", err)))
        return ct_error_hint(err, "use --strategy ddp");
    z->local_n = 0;
    for (int v = 0; v < z->n_units; v++) {
        struct unit *u = &z->units[v];
        size_t len = u->hi - u->lo;

        if (!(u->counts = calloc((size_t)world, sizeof(size_t))))
            return ct_error_set(err, CT_ENOMEM, NULL, "fsdp: out of memory for unit %d", v);
        u->part_lo = u->lo + len * (size_t)me(s) / (size_t)world;
        for (int r = 0; r < world; r++)
            u->counts[r] = u->lo + len * (size_t)(r + 1) / (size_t)world - (u->lo + len * (size_t)r / (size_t)world);
        u->local = z->local_n;
        z->local_n += u->counts[me(s)];
        u->state = U_GATHERED;
    }
    if (!sharded(s, z))
        return 0;
    z->pshard = malloc((z->local_n ? z->local_n : 1) * sizeof(float));
    z->gshard = calloc(z->local_n ? z->local_n : 1, sizeof(float));
    z->sends = calloc((size_t)s->world_size, sizeof(*z->sends));
    z->recvs = calloc((size_t)s->world_size, sizeof(*z->recvs));
    lo = calloc((size_t)z->n_units, sizeof(size_t));
    count = calloc((size_t)z->n_units, sizeof(size_t));
    /* Reserved, not committed: a unit's rows hold pages only while its exchange is in flight. */
    z->recv_bytes = ((size_t)(world - 1) * z->local_n + 1) * sizeof(float);
    z->recv = ct_pages_alloc(z->recv_bytes);
    /* hybrid_shard over nodes: every node's sum of this rank's parts, a unit's rows while its
     * exchange across the nodes is in flight. */
    z->xrecv_bytes = ((size_t)z->rep_n * z->local_n + 1) * sizeof(float);
    z->xrecv = z->rep_n > 1 ? ct_pages_alloc(z->xrecv_bytes) : NULL;
    if (!z->pshard || !z->gshard || !z->sends || !z->recvs || !lo || !count || !z->recv ||
        (z->rep_n > 1 && !z->xrecv)) {
        rc = ct_error_set(err, CT_ENOMEM, NULL, "fsdp: out of memory for the shards of %zu parameters", z->local_n);
        goto out;
    }
    for (int v = 0; v < z->n_units; v++) {
        const struct unit *u = &z->units[v];

        memcpy(z->pshard + u->local, z->params + u->part_lo, u->counts[me(s)] * sizeof(float));
        lo[v] = u->part_lo;
        count[v] = u->counts[me(s)];
    }
    /* From here this rank keeps the optimizer state of its parts only. */
    rc = ct_optim_shard_ranges(s->optim, lo, count, z->n_units, err);
out:
    free(lo);
    free(count);
    return rc;
}

/* Whether unit w's pages of array (0: parameters, 1: gradients) may go: its parameters released, or
 * its gradients not live (reduced, or not yet written by this backward: it overwrites them). */
static int unit_free(const struct fsdp *z, int w, int array)
{
    return array ? !z->units[w].grad_live : z->units[w].state == U_RELEASED;
}

/* Unit v's pages of base (params or grads) back to the system, with the pages it shares with its
 * neighbours when every unit on them may go too (units are not page-aligned: a small model's
 * boundary pages would otherwise stay). */
static void release_unit(struct fsdp *z, float *base, int v, int array)
{
    uintptr_t ps = ct_pages_size(), p0 = (uintptr_t)base, lo = p0 + z->units[v].lo * sizeof(float),
              hi = p0 + z->units[v].hi * sizeof(float);
    uintptr_t a = lo & ~(ps - 1), b = (hi + ps - 1) & ~(ps - 1);
    int ok;

    /* [a, lo) and [hi, b): the boundary pages' parts in other units (or outside the array: kept). */
    if (a < lo) {
        ok = a >= p0;
        for (int w = v - 1; ok && w >= 0 && p0 + z->units[w].hi * sizeof(float) > a; w--)
            ok = unit_free(z, w, array);
        a = ok ? a : lo;
    }
    if (b > hi) {
        ok = b <= p0 + z->n * sizeof(float);
        for (int w = v + 1; ok && w < z->n_units && p0 + z->units[w].lo * sizeof(float) < b; w++)
            ok = unit_free(z, w, array);
        b = ok ? b : hi;
    }
    ct_pages_release((void *)a, (size_t)(b - a));
}

/* The unit's parameter pages leave: those wholly its own into the pool while a slot is free (the
 * next unit's all-gather takes them), the rest back to the system. Its parts are in the shards. */
static void release_params(struct fsdp *z, struct unit *u)
{
    u->state = U_RELEASED;
    ct_pages_pool_put(&z->pool, z->params + u->lo, (u->hi - u->lo) * sizeof(float));
    release_unit(z, z->params, (int)(u - z->units), 0);
}

/* The first forward's announcements become the units: each range a unit, a gap or the rest of the
 * array after the last one joins the unit after it (or is the last). */
static int discover(struct fsdp *z, size_t offset, size_t count, ct_error *err)
{
    size_t end = offset + count;

    if (end <= z->seen)
        return 0;
    z->seen = end;
    return unit_add(z, z->n_units ? z->units[z->n_units - 1].hi : 0, end, err);
}

/* min_num_params (PyTorch's size_based_auto_wrap_policy): consecutive units joined until each holds
 * at least min parameters; a shorter rest joins the last one. The first unit stays the root. */
static void join_units(struct fsdp *z, size_t min)
{
    int k = 0;

    if (!min)
        return;
    for (int v = 0; v < z->n_units; v++) {
        if (k > 0 && z->units[k - 1].hi - z->units[k - 1].lo < min)
            z->units[k - 1].hi = z->units[v].hi;
        else
            z->units[k++] = z->units[v];
    }
    if (k > 1 && z->units[k - 1].hi - z->units[k - 1].lo < min) {
        z->units[k - 2].hi = z->units[k - 1].hi;
        k--;
    }
    z->n_units = k;
}

/* A slot for each all-gather that may be in flight and one for the unit being left, each as large
 * as the largest unit. Without a pool (no address space) units fault their pages in. */
static void init_pool(struct fsdp *z)
{
    size_t most = 0;

    for (int v = 0; v < z->n_units; v++)
        most = z->units[v].hi - z->units[v].lo > most ? z->units[v].hi - z->units[v].lo : most;
    (void)ct_pages_pool_init(&z->pool, z->limit + 1, most * sizeof(float));
}

static int discovered(ct_strategy *s, struct fsdp *z, ct_error *err)
{
    int rc;

    if (!z->discovering)
        return 0;
    z->discovering = 0;
    if (z->seen < z->n && (rc = unit_add(z, z->seen, z->n, err)))
        return rc;
    join_units(z, z->min_params);
    if ((rc = shard_units(s, z, err)) || !sharded(s, z))
        return rc;
    /* The set-up is over (rank 0's whole array, read once by the first forward): from here on the
     * units are held as in every later step — the gradients written by backward (it overwrites
     * them), the root and the last unit (backward starts there) gathered, the rest released. */
    ct_pages_release(z->grads, z->n * sizeof(float));
    init_pool(z);
    for (int v = 1; v < z->n_units - 1; v++)
        release_params(z, &z->units[v]);
    return 0;
}

/* --- gathering and releasing ------------------------------------------------------------------- */

/* Wait for every collective up to ticket: the units whose all-gather it covers are gathered. */
static int wait_to(ct_strategy *s, struct fsdp *z, long ticket, const char *what, ct_error *err)
{
    int rc;

    if (ticket <= z->done)
        return 0;
    if ((rc = ct_ddp_wait(s, ((struct ddp *)s->impl)->coll, ticket, what, err)))
        return rc;
    z->done = ticket;
    for (int v = 0; v < z->n_units; v++)
        if (z->units[v].state == U_GATHERING && z->units[v].gather <= ticket)
            z->units[v].state = U_GATHERED;
    return 0;
}

static int start_gather(ct_strategy *s, struct fsdp *z, int v, ct_error *err)
{
    struct unit *u = &z->units[v];
    long t;

    /* Pages a release left in the pool, where one holds enough (what is there is overwritten). */
    if (u->state == U_RELEASED)
        ct_pages_pool_take(&z->pool, z->params + u->lo, (u->hi - u->lo) * sizeof(float));
    memcpy(z->params + u->part_lo, z->pshard + u->local, u->counts[me(s)] * sizeof(float));
    if (z->rep_n == 1) {
        t = ct_coll_allgather_start(((struct ddp *)s->impl)->coll, z->params + u->lo, u->counts, CT_COLL_F32, err);
    } else {
        /* hybrid_shard: the node's ranks only; this rank's part to each, theirs in place. */
        size_t at = u->lo;
        int ns = 0, nr = 0;

        for (int k = 0; k < z->group_n; at += u->counts[k], k++) {
            if (k == me(s))
                continue;
            if (u->counts[me(s)])
                z->sends[ns++] = (struct ct_coll_msg){ z->params + u->part_lo, u->counts[me(s)] * sizeof(float),
                                                       z->group[k] };
            if (u->counts[k])
                z->recvs[nr++] = (struct ct_coll_msg){ z->params + at, u->counts[k] * sizeof(float), z->group[k] };
        }
        t = ct_coll_exchange_start(((struct ddp *)s->impl)->coll, z->sends, ns, z->recvs, nr, err);
    }
    if (t < 0)
        return (int)t;
    u->gather = t;
    u->state = U_GATHERING;
    s->param_gathers++;
    return 0;
}

static int in_flight(const struct fsdp *z)
{
    int k = 0;

    for (int v = 0; v < z->n_units; v++)
        k += z->units[v].state == U_GATHERING;
    return k;
}

/* Prefetch from unit v on, in direction step (+1 forward, -1 backward): released units' all-gathers
 * started while fewer than limit are in flight. */
static int prefetch(ct_strategy *s, struct fsdp *z, int v, int step, ct_error *err)
{
    int rc;

    for (; v >= 0 && v < z->n_units && in_flight(z) < z->limit; v += step)
        if (z->units[v].state == U_RELEASED && (rc = start_gather(s, z, v, err)))
            return rc;
    return 0;
}

/* Units first..last gathered, the next ones (in direction step) prefetched; then the wait. */
static int gather_units(ct_strategy *s, struct fsdp *z, int first, int last, int step, ct_error *err)
{
    long ticket = 0;
    int rc, overlapped = 0;

    for (int v = first; v <= last; v++)
        if (z->units[v].state == U_RELEASED && (rc = start_gather(s, z, v, err)))
            return rc;
    if ((rc = prefetch(s, z, step > 0 ? last + 1 : first - 1, step, err)))
        return rc;
    for (int v = first; v <= last; v++)
        if (z->units[v].state == U_GATHERING && z->units[v].gather > ticket)
            ticket = z->units[v].gather;
    overlapped = ticket > 0 && ticket < ct_coll_last(((struct ddp *)s->impl)->coll);
    if (ticket && (rc = wait_to(s, z, ticket, "the all-gather of a unit's parameters", err)))
        return rc;
    s->param_gathers_overlapped += overlapped;
    /* What arrived made room: the next units start now, while these compute. */
    if ((rc = prefetch(s, z, step > 0 ? last + 1 : first - 1, step, err)))
        return rc;
    /* The pages the prefetch did not take go back: the pool moves pages from a release to the
     * next all-gather, it keeps none beside the units in use. */
    ct_pages_pool_trim(&z->pool);
    ct_strategy_memory_sample(s);
    return 0;
}

static int fsdp_params_needed(ct_strategy *s, size_t offset, size_t count, ct_error *err)
{
    struct fsdp *z = fsdp_of(s);
    int first, last, rc;

    if (!z->params || !count)
        return 0;
    if (z->discovering && offset >= z->seen)
        return discover(z, offset, count, err);
    if ((rc = discovered(s, z, err)))
        return rc;
    if (!sharded(s, z))
        return 0;
    first = unit_of(z, offset);
    last = unit_of(z, offset + count - 1);
    /* full_shard: the units forward has left (but the root) go back to the system. */
    for (int v = 1; v < first && frees_forward(z); v++)
        if (z->units[v].state == U_GATHERED)
            release_params(z, &z->units[v]);
    return gather_units(s, z, first, last, +1, err);
}

static int finish_reduce(ct_strategy *s, struct fsdp *z, int v, ct_error *err);

static int fsdp_params_needed_backward(ct_strategy *s, size_t offset, size_t count, ct_error *err)
{
    struct fsdp *z = fsdp_of(s);
    int first, last, rc;

    if (!z->params || !count)
        return 0;
    if ((rc = discovered(s, z, err)) || !sharded(s, z))
        return rc;
    first = unit_of(z, offset);
    last = unit_of(z, offset + count - 1);
    for (int v = first; v <= last; v++) {
        z->units[v].grad_fresh = !z->units[v].grad_live;
        z->units[v].grad_live = 1; /* backward writes its gradients from here */
    }
    if ((rc = gather_units(s, z, first, last, -1, err)))
        return rc;
    /* The exchange of the units after these (started as their backward ended) is finished before
     * these units' gradients are written: a unit's whole gradients and the peers' parts of it are
     * then never resident beside the next unit's. */
    for (int v = last + 1; v < z->n_units; v++)
        if (z->units[v].reduce && (rc = finish_reduce(s, z, v, err)))
            return rc;
    /* Backward overwrites a gradient (the model contract): the pages that unit's release just left
     * in the pool serve as these units' gradients, instead of faulting in zeroed ones — once, at the
     * unit's first announcement (a unit of several announced ranges holds gradients by its second). */
    for (int v = first; v <= last; v++)
        if (z->units[v].grad_fresh) {
            z->units[v].grad_fresh = 0;
            ct_pages_pool_take(&z->pool, z->grads + z->units[v].lo,
                               (z->units[v].hi - z->units[v].lo) * sizeof(float));
        }
    return 0;
}

/* --- the gradients ----------------------------------------------------------------------------- */

/* Unit v's gradients, final on every rank: each part to its owner (no_shard: allreduced in place). */
static int start_reduce(ct_strategy *s, struct fsdp *z, int v, ct_error *err)
{
    struct ddp *d = s->impl;
    struct unit *u = &z->units[v];
    size_t mine = u->counts[me(s)], at = u->lo;
    int ns = 0, nr = 0;
    long t;

    if (!sharded(s, z)) {
        t = ct_coll_allreduce_start(d->coll, z->grads + u->lo, u->hi - u->lo, CT_COLL_F32, err);
    } else {
        /* the peers' parts arrive on pages the last unit's exchange left in the pool */
        if (mine)
            ct_pages_pool_take(&z->pool, z->recv + (size_t)(z->group_n - 1) * u->local,
                               (size_t)(z->group_n - 1) * mine * sizeof(float));
        /* Within the shard group (hybrid_shard: the node); across the nodes after (finish_reduce). */
        for (int q = 0; q < z->group_n; at += u->counts[q], q++) {
            if (q == me(s))
                continue;
            if (u->counts[q])
                z->sends[ns++] = (struct ct_coll_msg){ z->grads + at, u->counts[q] * sizeof(float), z->group[q] };
            if (mine)
                z->recvs[nr++] = (struct ct_coll_msg){ z->recv + (size_t)(z->group_n - 1) * u->local +
                                                       (size_t)(q < me(s) ? q : q - 1) * mine,
                                                       mine * sizeof(float), z->group[q] };
        }
        t = ct_coll_exchange_start(d->coll, z->sends, ns, z->recvs, nr, err);
    }
    if (t < 0)
        return (int)t;
    u->reduce = t;
    u->reduced = 1;
    s->grad_allreduces++;
    s->grad_allreduces_in_backward += v > 0;
    return 0;
}

/* hybrid_shard: the node's sum of this rank's part of unit v (its row of xrows) to the ranks of the
 * same place on the other nodes, theirs into their rows; finish_cross adds them. */
static int start_cross(ct_strategy *s, struct fsdp *z, int v, ct_error *err)
{
    struct unit *u = &z->units[v];
    size_t mine = u->counts[me(s)];
    float *xrows = z->xrecv + (size_t)z->rep_n * u->local;
    int ns = 0, nr = 0;
    long t;

    for (int n = 0; n < z->rep_n && mine; n++) {
        if (n == z->rep_me)
            continue;
        z->sends[ns++] = (struct ct_coll_msg){ xrows + (size_t)z->rep_me * mine, mine * sizeof(float), z->reps[n] };
        z->recvs[nr++] = (struct ct_coll_msg){ xrows + (size_t)n * mine, mine * sizeof(float), z->reps[n] };
    }
    t = ct_coll_exchange_start(((struct ddp *)s->impl)->coll, z->sends, ns, z->recvs, nr, err);
    if (t < 0)
        return (int)t;
    u->cross = t;
    return 0;
}

/* Unit v's exchange across the nodes is over: every node's sum added in node order into gshard (onto
 * the window's earlier micro-batches' sum after the first), so every node's copy of the part has the
 * same bits; its rows of xrecv released. */
static int finish_cross(ct_strategy *s, struct fsdp *z, int v, ct_error *err)
{
    struct unit *u = &z->units[v];
    size_t mine = u->counts[me(s)];
    float *xrows = z->xrecv ? z->xrecv + (size_t)z->rep_n * u->local : NULL, *out = z->gshard + u->local;
    int rc;

    if (!u->cross)
        return 0;
    if ((rc = wait_to(s, z, u->cross, "the exchange of a unit's gradients across the nodes", err)))
        return rc;
    u->cross = 0;
    for (int n = 0; n < z->rep_n && mine; n++) {
        if (n == 0 && z->micro == 0)
            memcpy(out, xrows, mine * sizeof(float));
        else
            cblas_saxpy((int)mine, 1.0f, xrows + (size_t)n * mine, 1, out, 1);
    }
    ct_strategy_memory_sample(s);
    ct_pages_release(xrows, (size_t)z->rep_n * mine * sizeof(float));
    return 0;
}

/* Unit v's exchange is over: its part summed in rank order into gshard, onto the earlier
 * micro-batches' sum after a window's first (hybrid_shard: the node's sum into its row of xrecv,
 * and the exchange across the nodes started), its whole gradients' pages and its rows of recv
 * released. */
static int finish_reduce(ct_strategy *s, struct fsdp *z, int v, ct_error *err)
{
    struct unit *u = &z->units[v];
    size_t mine = u->counts[me(s)];
    float *rows = z->recv + (size_t)(z->group_n - 1) * u->local, *out = z->gshard + u->local;
    float *sum = z->xrecv ? z->xrecv + (size_t)z->rep_n * u->local + (size_t)z->rep_me * mine : out;
    int rc;

    if (!u->reduce)
        return 0;
    if ((rc = wait_to(s, z, u->reduce, sharded(s, z) ? "the reduce-scatter of a unit's gradients"
                                                     : "the allreduce of a unit's gradients", err)))
        return rc;
    u->reduce = 0;
    if (!sharded(s, z))
        return 0;
    for (int q = 0; q < z->group_n && mine; q++) {
        const float *part = q == me(s) ? z->grads + u->part_lo : rows + (size_t)(q < me(s) ? q : q - 1) * mine;

        if (q == 0 && (z->micro == 0 || sum != out))
            memcpy(sum, part, mine * sizeof(float));
        else
            cblas_saxpy((int)mine, 1.0f, part, 1, sum, 1);
    }
    /* The node's sum crosses the link once, to the same place on each other node, while backward
     * computes the unit before (finish_cross). */
    if (z->xrecv && (rc = start_cross(s, z, v, err)))
        return rc;
    ct_strategy_memory_sample(s);
    u->grad_live = 0;
    ct_pages_pool_put(&z->pool, z->grads + u->lo, (u->hi - u->lo) * sizeof(float));
    release_unit(z, z->grads, v, 1);
    ct_pages_pool_put(&z->pool, rows, (size_t)(z->group_n - 1) * mine * sizeof(float));
    ct_pages_release(rows, (size_t)(z->group_n - 1) * mine * sizeof(float));
    return 0;
}

/* Backward announces gradients last first: a unit whose first element is reached is complete. */
static int fsdp_grad_ready(ct_strategy *s, size_t offset, size_t count, ct_error *err)
{
    struct fsdp *z = fsdp_of(s);
    struct ddp *d = s->impl;
    int rc;

    if (ct_ddp_single(d) || s->world_size == 1)
        return 0;
    if ((rc = discovered(s, z, err)))
        return rc;
    if (offset + count != z->grad_lo) {
        ct_error_set(err, CT_EINTERNAL, "fsdp-grad-order", "fsdp: gradient [%zu, %zu) announced after [%zu, %zu) "
                     "was; backward must announce every tensor, from the last to the first", offset, offset + count,
                     z->grad_lo, z->n);
        return ct_error_hint(err, "announce each gradient range once, from the last tensor to the first");
    }
    z->grad_lo = offset;
    if (d->posted && !d->posted_started) {
        long t = ct_coll_allreduce_start(d->coll, d->posted, (size_t)d->n_posted, CT_COLL_F64, err);

        if (t < 0)
            return (int)t;
        d->posted_started = 1;
    }
    for (int v = z->n_units - 1; v >= 0 && z->units[v].lo >= offset; v--) {
        if (z->units[v].reduced)
            continue;
        /* Backward is done with the unit: its parameters go (the root's too, at backward's end). */
        if (sharded(s, z) && z->units[v].state == U_GATHERED)
            release_params(z, &z->units[v]);
        /* The exchange of the unit after it has overlapped this unit's backward: finished (and its
         * pages released) before this one's starts, so one unit's exchange is in flight at a time. */
        if ((v + 2 < z->n_units && (rc = finish_cross(s, z, v + 2, err))) ||
            (v + 1 < z->n_units && (rc = finish_reduce(s, z, v + 1, err))))
            return rc;
        if ((rc = start_reduce(s, z, v, err)))
            return rc;
    }
    return ct_coll_progress(d->coll, err);
}

/* A backward's every unit announced (else an error): their exchanges finished into gshard, ready
 * for the next backward. */
static int backward_done(ct_strategy *s, struct fsdp *z, ct_error *err)
{
    int rc = 0;

    if (z->grad_lo != 0) {
        ct_error_set(err, CT_EINVAL, "fsdp-grad-missing", "fsdp: the model's backward gave no gradient to "
                     "parameters [0, %zu) of %zu (the parameter array's offsets)", z->grad_lo, z->n);
        return ct_error_hint(err, "fsdp needs a gradient for every parameter: announce each tensor in backward, "
                             "from the last to the first (zeros for a parameter forward did not use)");
    }
    for (int v = z->n_units - 1; v >= 0 && !rc; v--)
        rc = finish_reduce(s, z, v, err);
    for (int v = z->n_units - 1; v >= 0 && !rc; v--)
        rc = finish_cross(s, z, v, err);
    for (int v = 0; v < z->n_units; v++)
        z->units[v].reduced = 0;
    z->grad_lo = z->n;
    return rc;
}

/* Sharded: each micro-batch's gradients are exchanged as its backward goes and added to the shards
 * (a whole copy to sum them in would be as large as ddp's gradients). no_shard: the step sums them. */
static int fsdp_accumulates(const ct_strategy *s) { return sharded(s, fsdp_of((ct_strategy *)s)); }

/* Before micro-batch k's backward: the last one's exchanges (overlapping this forward) finished. */
static int fsdp_grad_window(ct_strategy *s, int micro, ct_error *err)
{
    struct fsdp *z = fsdp_of(s);
    double t0 = ct_time_now();
    int rc;

    if (ct_ddp_single(s->impl) || s->world_size == 1)
        return 0;
    if (!(rc = discovered(s, z, err)))
        rc = backward_done(s, z, err);
    s->exposed_comm_s += ct_time_now() - t0;
    z->micro = micro;
    return rc;
}

static int fsdp_grad_sync(ct_strategy *s, ct_error *err)
{
    struct fsdp *z = fsdp_of(s);
    struct ddp *d = s->impl;
    double t0;
    int rc = 0;

    if (ct_ddp_single(d) || s->world_size == 1)
        return 0;
    if ((rc = discovered(s, z, err)))
        return rc;
    t0 = ct_time_now();
    rc = backward_done(s, z, err);
    z->micro = 0;
    if (!rc && d->posted && !d->posted_started) {
        long t = ct_coll_allreduce_start(d->coll, d->posted, (size_t)d->n_posted, CT_COLL_F64, err);

        rc = t < 0 ? (int)t : 0;
    }
    if (!rc && d->posted)
        rc = wait_to(s, z, ct_coll_last(d->coll), "the allreduce of the posted values", err);
    s->exposed_comm_s += ct_time_now() - t0;
    d->posted = NULL;
    d->posted_started = 0;
    return rc;
}

static void fsdp_grad_view(ct_strategy *s, void **grads, size_t *count, int *partial)
{
    struct fsdp *z = fsdp_of(s);

    if (!z->discovering && sharded(s, z)) {
        *grads = z->gshard;
        *count = z->local_n;
        *partial = z->rep_me ? 2 : 1; /* the first node's ranks count the norm's parts */
    }
}

/* --- the update, the whole array, the optimizer's shards ---------------------------------------- */

/* Wait for what is in flight (every all-gather): the dispatchers' rule before another collective. */
static int fsdp_params_sync(ct_strategy *s, ct_error *err)
{
    struct ddp *d = s->impl;
    struct fsdp *z = d ? d->sharded : NULL;

    if (!z || !d->coll || ct_coll_broken(d->coll) || z->discovering)
        return 0;
    for (int v = 0; v < z->n_units; v++)
        if (z->units[v].state == U_GATHERING)
            return wait_to(s, z, ct_coll_last(d->coll), "the all-gather of a unit's parameters", err);
    return 0;
}

static int fsdp_setup_model(ct_strategy *s, void *params, void *grads, size_t n, ct_error *err)
{
    struct fsdp *z = fsdp_of(s);
    int rc;

    if (!s->optim) {
        ct_error_set(err, CT_EINTERNAL, "fsdp-no-optimizer", "fsdp: setup_model before model_to_device");
        return ct_error_hint(err, "this is a bug in ctrain; please report it");
    }
    if (s->param_dtype != CT_DTYPE_F32) {
        ct_error_set(err, CT_ENOTAVAIL, "fsdp-dtype", "fsdp: parameters stored in fp32 only (--precision 32-true)");
        return ct_error_hint(err, "use --strategy ddp for this precision");
    }
    z->params = params;
    z->grads = grads;
    z->n = z->grad_lo = n;
    ct_pages_small_pages(params, n * sizeof(float));
    ct_pages_small_pages(grads, n * sizeof(float));
    if ((rc = ct_strategy_ddp.setup_model(s, params, grads, n, err)))
        return rc;
    return shard_groups(s, z, err);
}

static int fsdp_optimizer_step(ct_strategy *s, ct_model *model, ct_optim *optim, int *skipped, ct_error *err)
{
    struct fsdp *z = fsdp_of(s);
    int rc;

    *skipped = 0;
    if (model->ops->optim_step || model->params != (void *)z->params) {
        ct_error_set(err, CT_ENOTAVAIL, "fsdp-device-model", "fsdp: model %s updates its own device arrays",
                     model->name);
        return ct_error_hint(err, "use --strategy ddp on this accelerator");
    }
    if ((rc = discovered(s, z, err)) || (rc = fsdp_params_sync(s, err)))
        return rc;
    if (!sharded(s, z)) {
        ct_optim_step(optim, z->params, z->grads);
        return 0;
    }
    ct_optim_step(optim, z->pshard, z->gshard);
    /* Every gathered copy is stale now; the first units start arriving for the next forward. */
    for (int v = 0; v < z->n_units; v++)
        if (z->units[v].state == U_GATHERED)
            release_params(z, &z->units[v]);
    return prefetch(s, z, 0, +1, err);
}

/* Every unit released (its parameters are in the shards), none in flight. */
static int release_all(ct_strategy *s, struct fsdp *z, ct_error *err)
{
    int rc = fsdp_params_sync(s, err);

    for (int v = 0; v < z->n_units && !rc; v++)
        if (z->units[v].state == U_GATHERED)
            release_params(z, &z->units[v]);
    return rc;
}

static int fsdp_params_whole(ct_strategy *s, int whole, ct_error *err)
{
    struct fsdp *z = fsdp_of(s);
    int rc;

    if (!z->params || (rc = discovered(s, z, err)) || !sharded(s, z))
        return 0;
    if (!whole)
        return release_all(s, z, err);
    for (int v = 0; v < z->n_units; v++)
        if (z->units[v].state == U_RELEASED && (rc = start_gather(s, z, v, err)))
            return rc;
    return fsdp_params_sync(s, err);
}

static int fsdp_params_written(ct_strategy *s, ct_error *err)
{
    struct fsdp *z = fsdp_of(s);
    int rc;

    if (!z->params || z->discovering || !sharded(s, z))
        return 0; /* the units are cut from the whole array at the first forward */
    if ((rc = fsdp_params_sync(s, err)))
        return rc;
    for (int v = 0; v < z->n_units; v++) {
        struct unit *u = &z->units[v];

        memcpy(z->pshard + u->local, z->params + u->part_lo, u->counts[me(s)] * sizeof(float));
        u->state = U_GATHERED;
    }
    return release_all(s, z, err);
}

static void fsdp_shard_of(ct_strategy *s, const void *whole, void *mine)
{
    struct fsdp *z = fsdp_of(s);

    for (int v = 0; v < z->n_units; v++)
        memcpy((float *)mine + z->units[v].local, (const float *)whole + z->units[v].part_lo,
               z->units[v].counts[me(s)] * sizeof(float));
}

/* Rank q's part of unit u in a gather to rank 0: its part when q is in rank 0's shard group (the
 * first node's under hybrid_shard, whose ranks hold every part), else none. */
static size_t owner_count(const struct fsdp *z, const struct unit *u, int q)
{
    return z->node_of[q] ? 0 : u->counts[z->place_of[q]];
}

/* rank's part of every unit, unit after unit: the order of pshard and of the optimizer's shards
 * (engine/checkpoint/sharded.c writes them as they are). hybrid_shard on several nodes writes the
 * whole file (0 for every rank): each node holds every part, and a rank file per replica would
 * cover the array more than once. */
static int fsdp_shard_layout(ct_strategy *s, int rank, size_t *ranges, int max, const void **mine)
{
    struct fsdp *z = fsdp_of(s);
    int n = 0;

    if (!z->sharded_ckpt || !z->params || z->discovering || !sharded(s, z) || rank < 0 || rank >= s->world_size ||
        z->rep_n > 1)
        return 0; /* before the first forward no unit is known: the whole file */
    for (int v = 0; v < z->n_units; v++) {
        const struct unit *u = &z->units[v];
        size_t before = 0;

        if (!u->counts[rank])
            continue;
        for (int r = 0; r < rank; r++)
            before += u->counts[r];
        if (ranges && n < max) {
            ranges[2 * n] = u->lo + before;
            ranges[2 * n + 1] = u->counts[rank];
        }
        n++;
    }
    if (mine)
        *mine = z->pshard;
    return n;
}

/* One state array's parts to rank 0, then into the parameters' order. */
static int fsdp_gather_shards(ct_strategy *s, const void *mine, void *whole, ct_error *err)
{
    struct fsdp *z = fsdp_of(s);
    struct ddp *d = s->impl;
    size_t *counts = calloc((size_t)s->world_size, sizeof(size_t));
    /* every rank's: a library may gather to all of them (gloo's allgatherv) */
    float *all = malloc((z->n ? z->n : 1) * sizeof(float));
    size_t at = 0;
    int rc;

    if (!counts || !all) {
        free(counts);
        free(all);
        return ct_error_set(err, CT_ENOMEM, NULL, "fsdp: out of memory gathering the optimizer state");
    }
    for (int v = 0; v < z->n_units; v++)
        for (int q = 0; q < s->world_size; q++)
            counts[q] += owner_count(z, &z->units[v], q);
    rc = ct_ddp_wait(s, d->coll, ct_coll_gather_start(d->coll, mine, all, counts, CT_COLL_F32, 0, err),
                     "the gather of the optimizer state", err);
    for (int q = 0; q < s->world_size && !rc && s->global_rank == 0; q++)
        for (int v = 0; v < z->n_units; v++) {
            const struct unit *u = &z->units[v];
            size_t before = 0;

            for (int r = 0; r < q; r++)
                before += owner_count(z, u, r);
            memcpy((float *)whole + u->lo + before, all + at, owner_count(z, u, q) * sizeof(float));
            at += owner_count(z, u, q);
        }
    if (!rc)
        z->done = ct_coll_last(d->coll);
    free(counts);
    free(all);
    return rc;
}

static int fsdp_resident(ct_strategy *s, size_t bytes[3])
{
    struct fsdp *z = fsdp_of(s);

    if (z->discovering)
        return 1;
    bytes[0] += ct_pages_resident(z->pshard, z->local_n * sizeof(float)) + ct_pages_pool_resident(&z->pool);
    bytes[1] += ct_pages_resident(z->gshard, z->local_n * sizeof(float)) + ct_pages_resident(z->recv, z->recv_bytes) +
                ct_pages_resident(z->xrecv, z->xrecv ? z->xrecv_bytes : 0);
    return 0;
}

static void fsdp_destroy(ct_strategy *s)
{
    struct ddp *d = s->impl;
    struct fsdp *z = d ? d->sharded : NULL;

    if (z) {
        for (int v = 0; v < z->n_units; v++)
            free(z->units[v].counts);
        free(z->units);
        free(z->pshard);
        free(z->gshard);
        ct_pages_free(z->recv, z->recv_bytes);
        ct_pages_free(z->xrecv, z->xrecv_bytes);
        ct_pages_pool_free(&z->pool);
        free(z->group);
        free(z->reps);
        free(z->node_of);
        free(z->place_of);
        free(z->sends);
        free(z->recvs);
        free(z);
        d->sharded = NULL;
    }
    ct_strategy_ddp.destroy(s);
}

const struct ct_strategy_ops *ct_strategy_fsdp_ops(void)
{
    static struct ct_strategy_ops ops;

    if (!ops.init) {
        ops = ct_strategy_ddp;
        ops.init = fsdp_init;
        ops.setup_model = fsdp_setup_model;
        ops.grad_ready = fsdp_grad_ready;
        ops.grad_sync = fsdp_grad_sync;
        ops.accumulates = fsdp_accumulates;
        ops.grad_window = fsdp_grad_window;
        ops.grad_view = fsdp_grad_view;
        ops.params_needed = fsdp_params_needed;
        ops.params_needed_backward = fsdp_params_needed_backward;
        ops.params_sync = fsdp_params_sync;
        ops.params_whole = fsdp_params_whole;
        ops.params_written = fsdp_params_written;
        ops.shard_of = fsdp_shard_of;
        ops.resident = fsdp_resident;
        ops.optimizer_step = fsdp_optimizer_step;
        ops.gather_shards = fsdp_gather_shards;
        ops.shard_layout = fsdp_shard_layout;
        ops.destroy = fsdp_destroy;
    }
    return &ops;
}
