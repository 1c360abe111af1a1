/* SPDX-License-Identifier: BSD-3-Clause */
/* The run's state as a checkpoint: weights and optimizer state as tensors, counters, the PRNG and
 * the flags in __metadata__. The strategy decides who writes (rank 0) and every rank loads. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/util.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/format.h"
#include "engine/checkpoint/meta.h"
#include "engine/checkpoint/sharded.h"

/* What the parameters are stored in, as the metadata records it ("F32", "F64": the checkpoint's
 * dtype names); a checkpoint written before ctrain recorded it holds F32. */
static const char *storage_name(int dtype)
{
    const char *name = ct_ckpt_dtype_name(dtype);

    return name ? name : ct_ckpt_dtype_name(CT_DTYPE_F32);
}

static const char *precision_name(ct_run *run)
{
    const struct ct_precision_ops *p = ct_strategy_precision(run->strategy);

    return p ? p->name : "32-true";
}

/* The tensors of the run: the model's, then (optim: not weights only) the optimizer's whole
 * arrays as the strategy handed them (ct_strategy_optimizer_state_get), each "optimizer.<name>".
 * More than a checkpoint holds (a very deep model): CT_EINVAL, nothing written past the array. */
static int describe_tensors(ct_run *run, ct_ckpt *c, const ct_optim_state_list *optim, ct_error *err)
{
    const ct_model *host = ct_model_host(run->model);
    int states = optim ? optim->n : 0;

    if (host->n_tensors + states > CT_CKPT_MAX_TENSORS) {
        ct_error_set(err, CT_EINVAL, "ckpt-too-many-tensors", "model %s has %d tensors (+%d optimizer states); a "
                     "checkpoint holds at most %d", host->name, host->n_tensors, states, CT_CKPT_MAX_TENSORS);
        return ct_error_hint(err, "use fewer layers");
    }
    ct_ckpt_model_tensors_add(c, host);
    for (int i = 0; i < states; i++) {
        const ct_optim_state_entry *e = &optim->states[i];
        int64_t n = (int64_t)e->numel;
        char name[64];

        snprintf(name, sizeof(name), "optimizer.%s", e->name);
        ct_ckpt_tensor_add(c, name, e->data, e->dtype, 1, &n, e->numel);
    }
    return 0;
}

/* A decimal count as fit_loop prints one: digits only, no sign, no leading zero. */
static const char *skip_count(const char *p)
{
    const char *start = p;

    while (*p >= '0' && *p <= '9')
        p++;
    return p == start || (*start == '0' && p - start > 1) ? NULL : p;
}

/* name is one fit_loop writes for a top-k checkpoint: epoch=N-step=M.safetensors, of a step this
 * checkpoint has reached (step M <= its global step: a later step's file does not exist yet, and the
 * run will write it for an entry of its own, which the tampered one would then evict). */
static int top_k_name_ok(const char *name, int64_t global_step)
{
    const char *p = name, *step;

    if (strncmp(p, "epoch=", 6) || !(p = skip_count(p + 6)) || strncmp(p, "-step=", 6) || !(p = skip_count(step = p + 6)))
        return 0;
    return !strcmp(p, ".safetensors") && strtoll(step, NULL, 10) <= global_step;
}

/* Whether name is among the first n entries already (a list naming one file twice would have it
 * removed while the other entry still names it). */
static int top_k_listed(const ct_progress_state *st, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(st->top_k[i].name, name))
            return 1;
    return 0;
}

/* Back from the metadata; a checkpoint that monitored another metric (or none: older files)
 * leaves them fresh, as Lightning does when the monitor changed. */
static void restore_callbacks(ct_run *run, const ct_ckpt_record *theirs, const ct_ckpt_record *mine)
{
    ct_progress_state *st = &run->st;
    char buf[sizeof(theirs->top_k)], *save = NULL;

    if (!(theirs->has & CT_CKPT_BIT(CT_CKPT_F_MONITOR)) || strcmp(theirs->monitor, mine->monitor))
        return;
    if (theirs->has & CT_CKPT_BIT(CT_CKPT_F_BEST_SCORE))
        st->best_score = theirs->best_score;
    if ((theirs->has & ~theirs->bad) & CT_CKPT_BIT(CT_CKPT_F_WAIT_COUNT))
        st->wait_count = theirs->wait_count;
    st->early_stopped = theirs->early_stopped;
    st->n_top_k = 0;
    snprintf(buf, sizeof(buf), "%s", theirs->top_k);
    for (char *tok = strtok_r(buf, ";", &save); tok && st->n_top_k < CT_TOP_K_MAX; tok = strtok_r(NULL, ";", &save)) {
        ct_top_k_entry *e = &st->top_k[st->n_top_k];
        char *sp = strchr(tok, ' ');

        if (!sp)
            continue;
        *sp = '\0';
        /* Only the names fit_loop gives top-k checkpoints: eviction unlinks them, and a tampered
         * list must not name last.safetensors, best.safetensors, metrics.csv or another file. */
        if (ct_parse_double(tok, &e->score) || !top_k_name_ok(sp + 1, st->global_step) ||
            strlen(sp + 1) >= sizeof(e->name) || top_k_listed(st, st->n_top_k, sp + 1))
            continue;
        snprintf(e->name, sizeof(e->name), "%s", sp + 1);
        st->n_top_k++;
    }
}

/* The run as a checkpoint's metadata: what a save writes, and what a restore compares the file's
 * against (meta.c's table says which fields must match). */
static void describe_run(ct_run *run, ct_ckpt_record *r)
{
    const ct_model *host = ct_model_host(run->model);
    const ct_progress_state *st = &run->st;
    const ct_loop_options *o = &run->opt;
    size_t used = 0;

    memset(r, 0, sizeof(*r));
    r->has = CT_CKPT_ALL_FIELDS;
    if (run->model->info.has_accuracy)
        r->has &= ~CT_CKPT_BIT(CT_CKPT_F_BEST_VAL_LOSS);
    snprintf(r->format, sizeof(r->format), "%s", CT_CKPT_FORMAT);
    snprintf(r->model, sizeof(r->model), "%s %s", host->name, host->describe);
    snprintf(r->optimizer, sizeof(r->optimizer), "%s", ct_optim_kind_name(ct_optim_get_config(run->optim)->kind));
    snprintf(r->precision, sizeof(r->precision), "%s", precision_name(run));
    snprintf(r->param_dtype, sizeof(r->param_dtype), "%s", storage_name(host->param_dtype));
    r->optimizer_steps = ct_optim_steps(run->optim);
    r->epoch = st->epoch;
    r->step_in_epoch = st->step_in_epoch;
    r->global_step = st->global_step;
    r->best_val_acc = st->best_val_acc;
    r->best_val_loss = st->best_val_loss;
    r->val_acc = st->last_val_acc;
    r->val_loss = st->last_val_loss;
    r->world_size = run->world;
    r->batch_size = o->batch_size;
    r->blas_threads = o->blas_threads;
    r->gemm_threads = o->gemm_threads;
    r->seed = o->seed;
    memcpy(r->rng, run->rng.s, sizeof(r->rng));
    snprintf(r->flags, sizeof(r->flags), "%s", o->flags_json);
    snprintf(r->slurm_job_id, sizeof(r->slurm_job_id), "%s", o->job_id);
    /* the state of Lightning's ModelCheckpoint and EarlyStopping callbacks: the monitored metric,
     * its best value, the validations since it improved, whether fit stopped early, the top-k files */
    snprintf(r->monitor, sizeof(r->monitor), "%s %s", o->monitor_name, o->monitor_max ? "max" : "min");
    r->best_score = st->best_score;
    r->wait_count = st->wait_count;
    r->early_stopped = st->early_stopped;
    for (int i = 0; i < st->n_top_k && used < sizeof(r->top_k); i++)
        used += (size_t)snprintf(r->top_k + used, sizeof(r->top_k) - used, "%s%.17g %s", i ? ";" : "",
                                 st->top_k[i].score, st->top_k[i].name);
    snprintf(r->datamodule, sizeof(r->datamodule), "%s", o->datamodule);
    snprintf(r->data, sizeof(r->data), "%s", o->data_identity);
    r->val_fraction = o->val_fraction;
    snprintf(r->model_config, sizeof(r->model_config), "%s", o->model_config);
}

/* The strategy saves shards (fsdp's state_dict_type=sharded, once its units are known): decided
 * from every rank's layout, which every rank knows, so all take the same path (a rank may hold no
 * part of a model smaller than the world). */
static int saves_sharded(ct_run *run)
{
    for (int r = 0; r < run->world; r++)
        if (ct_strategy_shard_layout(run->strategy, r, NULL, 0, NULL) > 0)
            return 1;
    return 0;
}

static int save_checkpoint(ct_run *run, const char *path, int may_defer, ct_error *err)
{
    ct_ckpt *c = calloc(1, sizeof(*c));
    ct_ckpt_record *r = malloc(sizeof(*r));
    ct_optim_state_list optim;
    int rc;

    if (!c || !r) {
        free(c);
        free(r);
        return ct_error_set(err, CT_ENOMEM, "", "out of memory saving %s", path);
    }
    if ((rc = ct_model_to_host(run->model, run->optim, err)))
        goto out;
    /* state_dict_type=sharded: each rank writes its own shards, nothing gathered */
    if (saves_sharded(run)) {
        describe_run(run, r);
        rc = ct_ckpt_sharded_save(run, path, r, err);
        goto out;
    }
    if ((rc = ct_strategy_params_whole(run->strategy, 1, err)) ||
        (rc = ct_strategy_optimizer_state_get(run->strategy, run->optim, 1, &optim, err)))
        goto out;
    if ((rc = describe_tensors(run, c, &optim, err)))
        goto out_optim;
    describe_run(run, r);
    ct_ckpt_record_write(r, c);
    rc = ct_strategy_save_checkpoint(run->strategy, path, c, may_defer, err);
    if (!rc) /* the file (or the asynchronous writer's copy) has the parameters: fsdp frees them */
        rc = ct_strategy_params_whole(run->strategy, 0, err);
out_optim:
    ct_optim_state_list_free(&optim);
out:
    free(r);
    free(c);
    return rc;
}

/* The run's timing handle, made at its first use (without memory the saves go untimed). */
static ct_ckpt_timing *timing(ct_run *run)
{
    if (!run->ckpt_timing)
        run->ckpt_timing = calloc(1, sizeof(*run->ckpt_timing));
    return run->ckpt_timing;
}

ct_ckpt_timing ct_run_checkpoint_timing(const ct_run *run)
{
    ct_ckpt_timing none = { 0, 0, 0 };

    return run->ckpt_timing ? *run->ckpt_timing : none;
}

void ct_run_checkpoint_free(ct_run *run)
{
    free(run->ckpt_timing);
    run->ckpt_timing = NULL;
}

/* Every save timed, for summary.json: how long it held the training loop up (synchronous: the
 * whole write and fsync; --async-checkpoint: the copy into host memory, and any wait for the
 * previous write still running). */
int ct_run_save_checkpoint(ct_run *run, const char *path, int may_defer, ct_error *err)
{
    double t0 = ct_time_now();
    int rc = save_checkpoint(run, path, may_defer, err);
    ct_ckpt_timing *t = timing(run);

    if (t) {
        t->blocking_s += ct_time_now() - t0;
        t->saves++;
    }
    return rc;
}

/* The wait for the last asynchronous write holds the run up too: it counts with the saves'. */
int ct_run_checkpoint_wait(ct_run *run, ct_error *err)
{
    double t0 = ct_time_now();
    int rc = ct_strategy_checkpoint_wait(run->strategy, err);
    ct_ckpt_timing *t = timing(run);

    if (t) {
        t->blocking_s += ct_time_now() - t0;
        t->end_wait_s += ct_time_now() - t0;
    }
    return rc;
}

/* The counters, the PRNG and the callbacks' state back from the metadata (checked whole). */
static void restore_counters(ct_run *run, const ct_ckpt_record *theirs, const ct_ckpt_record *mine)
{
    ct_progress_state *st = &run->st;

    st->epoch = theirs->epoch;
    st->step_in_epoch = theirs->step_in_epoch;
    st->global_step = theirs->global_step;
    memcpy(run->rng.s, theirs->rng, sizeof(theirs->rng));
    st->best_val_acc = theirs->best_val_acc;
    st->best_val_loss = theirs->best_val_loss;
    ct_optim_set_steps(run->optim, theirs->optimizer_steps);
    restore_callbacks(run, theirs, mine);
}

/* Every rank loads the checkpoint itself; all must have read the same bytes, and all must learn
 * when one could not read it (else the others wait for it in the next collective until the
 * timeout). Rank 0's status and digest go to every rank, then a sum says how many failed and how
 * many read other bytes: every rank returns the same verdict. */
static int agree_on_file(ct_run *run, const char *path, int rc, uint64_t digest, ct_error *err)
{
    struct { int32_t rc; uint32_t pad; uint64_t digest; } zero = { rc, 0, digest };
    double v[2];
    ct_error e;
    int crc;

    if (run->world <= 1)
        return rc;
    ct_error_clear(&e);
    if ((crc = ct_strategy_broadcast(run->strategy, &zero, sizeof(zero), 0, &e)) == 0) {
        v[0] = rc != 0;
        v[1] = rc == 0 && zero.rc == 0 && zero.digest != digest;
        crc = ct_strategy_reduce_sum(run->strategy, v, 2, &e);
    }
    if (rc)
        return rc;   /* this rank's own message says more */
    if (crc) {
        *err = e;
        return crc;
    }
    if (v[0] > 0) {
        ct_error_set(err, zero.rc ? zero.rc : CT_EIO, "ckpt-rank-failed", "%s: %.0f of %d ranks could not load it",
                     path, v[0], run->world);
        return ct_error_hint(err, "%s", zero.rc ? "see rank 0's message" : "see the failing ranks' messages");
    }
    if (v[1] > 0) {
        ct_error_set(err, CT_ECONFLICT, "ckpt-differs", "%s: %.0f of %d ranks read other bytes than rank 0 (a "
                     "run directory local to each node, or the file replaced while the ranks read it)", path, v[1],
                     run->world);
        return ct_error_hint(err, "put --default-root-dir on a file system every node shares, or the same "
                                  "checkpoint on each node, and run again");
    }
    return 0;
}

/* The restore, one way down: the header and metadata read once (strategy -> checkpoint IO) and
 * checked whole against the run's own record (meta.c's table: whose file, which model, what a
 * resume must match), every rank agreeing; then the tensors read into the model and the optimizer's
 * arrays, checked, and the counters set from the metadata already read. */
int ct_run_restore_checkpoint(ct_run *run, const char *path, const ct_ckpt_restore *how, ct_error *err)
{
    ct_ckpt *c = calloc(1, sizeof(*c));
    ct_ckpt_record *theirs = malloc(sizeof(*theirs)), *mine = malloc(sizeof(*mine));
    ct_optim_state_list optim = { 0 };
    unsigned rules = CT_CKPT_RULE_LOAD | (how->weights_only ? 0 : CT_CKPT_RULE_RESUME) |
                     (how->deterministic ? CT_CKPT_RULE_DETERMINISTIC : 0) | (how->same_job ? CT_CKPT_RULE_JOB : 0);
    const struct ct_checkpoint_io_ops *io = ct_strategy_checkpoint_io(run->strategy);
    const ct_model *host = ct_model_host(run->model);
    int sharded = ct_ckpt_sharded_is(path);
    uint64_t header;
    int rc;

    if (!c || !theirs || !mine) {
        rc = ct_error_set(err, CT_ENOMEM, "", "out of memory loading %s", path);
        goto out;
    }
    /* First pass, no tensors: the header is validated and the metadata read, so a checkpoint of
     * another model gets a message about the model rather than about one tensor. */
    rc = sharded ? ct_ckpt_sharded_meta(io, path, c, err) : ct_strategy_load_checkpoint(run->strategy, path, c, err);
    if (!rc) {
        ct_ckpt_record_read(c, theirs);   /* theirs->text points into c, until c is reused below */
        describe_run(run, mine);
        rc = ct_ckpt_record_check(theirs, mine, run->opt.model_schema, rules, path, err);
    }
    header = c->header_digest;
    if ((rc = agree_on_file(run, path, rc, header, err)))
        goto out;
    /* The optimizer's whole arrays to read into: the strategy takes them back once read. */
    if (!how->weights_only && (rc = ct_strategy_optimizer_state_get(run->strategy, run->optim, 0, &optim, err)))
        goto out;
    memset(c, 0, sizeof(*c));
    memset(theirs->text, 0, sizeof(theirs->text));
    rc = describe_tensors(run, c, how->weights_only ? NULL : &optim, err);
    if (!rc && sharded && host->param_dtype != CT_DTYPE_F32) {
        rc = ct_error_set(err, CT_EINVAL, "ckpt-sharded", "%s: a sharded checkpoint holds F32 parameters, this run's "
                          "are %s", path, storage_name(host->param_dtype));
        ct_error_hint(err, "resume with --precision 32-true");
    } else if (!rc && sharded) { /* every rank file read, checked and scattered into the whole arrays */
        rc = ct_ckpt_sharded_load(io, path, c, host->params, host->num_params, err);
    } else if (!rc) {
        rc = ct_strategy_load_checkpoint(run->strategy, path, c, err);
    }
    /* The checks above were made on the first read: the second must be of the same file. */
    if (!rc && c->header_digest != header)
        rc = ct_error_set(err, CT_EIO, "ckpt-changed", "%s changed while it was read (replaced by another "
                          "writer?)", path);
    rc = agree_on_file(run, path, rc, c->digest, err);
    /* Every rank read the same bytes: all refuse non-finite weights alike. */
    if (!rc)
        rc = ct_ckpt_check_finite(path, c, err);
    if (rc) {
        ct_optim_state_list_free(&optim);
        goto out;
    }
    if (!how->weights_only) {
        ct_strategy_optimizer_state_put(run->strategy, run->optim, &optim);
        restore_counters(run, theirs, mine);
    }
    /* fsdp takes its shards of the parameters from the whole array just read */
    if (!(rc = ct_strategy_params_written(run->strategy, err)))
        rc = ct_model_from_host(run->model, run->optim, err);
out:
    free(mine);
    free(theirs);
    free(c);
    return rc;
}
