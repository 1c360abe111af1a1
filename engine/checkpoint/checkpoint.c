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

/* The state of Lightning's ModelCheckpoint and EarlyStopping callbacks: the monitored metric, its
 * best value, the validations since it improved, whether fit stopped early, the top-k files. */
static void add_callbacks(ct_run *run, ct_ckpt *c)
{
    const ct_progress_state *st = &run->st;
    char topk[1024];
    size_t used = 0;

    ct_ckpt_meta_add(c, "monitor", "%s %s", run->opt.monitor_name, run->opt.monitor_max ? "max" : "min");
    ct_ckpt_meta_add(c, "best_score", "%.17g", st->best_score);
    ct_ckpt_meta_add(c, "wait_count", "%" PRId64, st->wait_count);
    ct_ckpt_meta_add(c, "early_stopped", "%d", st->early_stopped);
    topk[0] = '\0';
    for (int i = 0; i < st->n_top_k && used < sizeof(topk); i++)
        used += (size_t)snprintf(topk + used, sizeof(topk) - used, "%s%.17g %s", i ? ";" : "", st->top_k[i].score,
                                 st->top_k[i].name);
    ct_ckpt_meta_add(c, "top_k", "%s", topk);
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
static void restore_callbacks(ct_run *run, const ct_ckpt *c)
{
    ct_progress_state *st = &run->st;
    const char *mon = ct_ckpt_meta_get(c, "monitor"), *best = ct_ckpt_meta_get(c, "best_score");
    const char *wait = ct_ckpt_meta_get(c, "wait_count"), *stopped = ct_ckpt_meta_get(c, "early_stopped");
    const char *topk = ct_ckpt_meta_get(c, "top_k");
    char mine[64], buf[1024], *save = NULL;
    long n;

    snprintf(mine, sizeof(mine), "%s %s", run->opt.monitor_name, run->opt.monitor_max ? "max" : "min");
    if (!mon || strcmp(mon, mine))
        return;
    if (best && ct_parse_double(best, &st->best_score))
        st->best_score = NAN;
    if (wait && !ct_parse_long(wait, 0, INT64_MAX, &n))
        st->wait_count = n;
    st->early_stopped = stopped && !strcmp(stopped, "1");
    st->n_top_k = 0;
    snprintf(buf, sizeof(buf), "%s", topk ? topk : "");
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

static int is_last(const char *path)
{
    const char *base = strrchr(path, '/');

    return !strcmp(base ? base + 1 : path, "last.safetensors");
}

static int save_checkpoint(ct_run *run, const char *path, ct_error *err)
{
    ct_ckpt *c = calloc(1, sizeof(*c));
    const ct_optim_config *oc = ct_optim_get_config(run->optim);
    const ct_model *host = ct_model_host(run->model);
    ct_optim_state_list optim;
    int rc;

    if (!c)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory saving %s", path);
    if ((rc = ct_model_to_host(run->model, run->optim, err)) ||
        (rc = ct_strategy_optimizer_state_get(run->strategy, run->optim, 1, &optim, err))) {
        free(c);
        return rc;
    }
    if ((rc = describe_tensors(run, c, &optim, err))) {
        ct_optim_state_list_free(&optim);
        free(c);
        return rc;
    }
    ct_ckpt_meta_add(c, "format", CT_CKPT_FORMAT);
    ct_ckpt_meta_add(c, "model", "%s %s", host->name, host->describe);
    ct_ckpt_meta_add(c, "optimizer", "%s", ct_optim_kind_name(oc->kind));
    ct_ckpt_meta_add(c, "precision", "%s", precision_name(run));
    ct_ckpt_meta_add(c, "param_dtype", "%s", storage_name(host->param_dtype));
    ct_ckpt_meta_add(c, "optimizer_steps", "%" PRId64, ct_optim_steps(run->optim));
    ct_ckpt_meta_add(c, "epoch", "%" PRId64, run->st.epoch);
    ct_ckpt_meta_add(c, "step_in_epoch", "%" PRId64, run->st.step_in_epoch);
    ct_ckpt_meta_add(c, "global_step", "%" PRId64, run->st.global_step);
    ct_ckpt_meta_add(c, "best_val_acc", "%.17g", run->st.best_val_acc);
    if (!run->model->info.has_accuracy)
        ct_ckpt_meta_add(c, "best_val_loss", "%.17g", run->st.best_val_loss);
    ct_ckpt_meta_add(c, "val_acc", "%.17g", run->st.last_val_acc);
    ct_ckpt_meta_add(c, "val_loss", "%.17g", run->st.last_val_loss);
    ct_ckpt_meta_add(c, "world_size", "%d", run->world);
    ct_ckpt_meta_add(c, "batch_size", "%d", run->opt.batch_size);
    ct_ckpt_meta_add(c, "blas_threads", "%d", run->opt.blas_threads);
    ct_ckpt_meta_add(c, "gemm_threads", "%d", run->opt.gemm_threads);
    ct_ckpt_meta_add(c, "seed", "%" PRIu64, run->opt.seed);
    ct_ckpt_meta_add(c, "rng", "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, run->rng.s[0], run->rng.s[1],
             run->rng.s[2], run->rng.s[3]);
    ct_ckpt_meta_add(c, "flags", "%s", run->opt.flags_json);
    ct_ckpt_meta_add(c, "slurm_job_id", "%s", run->opt.job_id);
    add_callbacks(run, c);
    ct_ckpt_meta_add(c, "datamodule", "%s", run->opt.datamodule);
    ct_ckpt_meta_add(c, "data", "%s", run->opt.data_identity);
    ct_ckpt_meta_add(c, "val_fraction", "%.17g", run->opt.val_fraction);
    ct_ckpt_meta_add(c, "model_config", "%s", run->opt.model_config);
    /* --async-checkpoint writes last.safetensors in the background (the saves at step boundaries
     * and on a stop); best and the top-k files stay synchronous: the top-k eviction unlinks a file
     * right after a save, which must not race a pending rename. */
    if (run->opt.async_checkpoint && is_last(path))
        rc = ct_strategy_save_checkpoint_async(run->strategy, path, c, err);
    else
        rc = ct_strategy_save_checkpoint(run->strategy, path, c, err);
    ct_optim_state_list_free(&optim);
    free(c);
    return rc;
}

/* Every save timed, for summary.json: how long it held the training loop up (synchronous: the
 * whole write and fsync; --async-checkpoint: the copy into host memory, and any wait for the
 * previous write still running). */
int ct_run_save_checkpoint(ct_run *run, const char *path, ct_error *err)
{
    double t0 = ct_time_now();
    int rc = save_checkpoint(run, path, err);

    run->ckpt_blocking_s += ct_time_now() - t0;
    run->ckpt_saves++;
    return rc;
}

/* The wait for the last asynchronous write holds the run up too: it counts with the saves'. */
int ct_run_checkpoint_wait(ct_run *run, ct_error *err)
{
    double t0 = ct_time_now();
    int rc = ct_strategy_checkpoint_wait(run->strategy, err);

    run->ckpt_blocking_s += ct_time_now() - t0;
    run->ckpt_end_wait_s += ct_time_now() - t0;
    return rc;
}

/* A count in the metadata: no run reaches 10^12 epochs, steps, ranks or samples a batch, and the
 * bound leaves room for the arithmetic on them (an epoch of INT64_MAX wrapped to negative). */
#define CKPT_COUNT_MAX 1000000000000L

static int need_int(const char *path, const ct_ckpt *c, const char *key, int64_t *out, ct_error *err)
{
    const char *v = ct_ckpt_meta_get(c, key);
    long n;

    if (!v || ct_parse_long(v, 0, CKPT_COUNT_MAX, &n)) {
        ct_error_set(err, CT_EFORMAT, "ckpt-meta", "%s: metadata %s is %s%s%s", path, key, v ? "'" : "missing",
                     v ? v : "", v ? "', not a count from 0 to 10^12" : "");
        return ct_error_hint(err, "the file was altered or damaged: use another checkpoint");
    }
    *out = n;
    return 0;
}

/* The parameters' storage type is the precision's (64-true: F64): a checkpoint stored in another
 * cannot be loaded into this run's arrays, nor resumed (its optimizer state is of that type too).
 * Precisions that store alike (32-true, bf16-mixed) resume each other, as before. A checkpoint
 * written before ctrain recorded it holds F32. */
static int check_storage(ct_run *run, const char *path, const ct_ckpt *c, int weights_only, ct_error *err)
{
    const char *theirs = ct_ckpt_meta_get(c, "param_dtype"), *prec = ct_ckpt_meta_get(c, "precision");
    const char *mine = storage_name(ct_model_host(run->model)->param_dtype);

    theirs = theirs ? theirs : storage_name(CT_DTYPE_F32);
    if (!strcmp(theirs, mine))
        return 0;
    ct_error_set(err, weights_only ? CT_EFORMAT : CT_ECONFLICT, "ckpt-resume-mismatch",
                 "%s: the checkpoint stores its parameters in %s (--precision %s), this run stores them in %s "
                 "(--precision %s)", path, theirs, prec ? prec : "32-true", mine, precision_name(run));
    return ct_error_hint(err, "%s with --precision %s", weights_only ? "load it" : "resume",
                         prec ? prec : "32-true");
}

/* The flags that build the checkpoint's model, from its metadata: the model's own hint when its
 * class has one (the flags that set its shape), else --model and --model-config. */
static int model_hint(const ct_ckpt *c, ct_error *err)
{
    const char *model = ct_ckpt_meta_get(c, "model"), *config = ct_ckpt_meta_get(c, "model_config");
    size_t name = model ? strcspn(model, " ") : 0;
    char known[32];
    const char *hint;

    if (!name)
        return ct_error_hint(err, "use the --model and --model-config of the run that wrote it");
    snprintf(known, sizeof(known), "%.*s", (int)name, model);
    if ((hint = ct_model_shape_hint(ct_registry_find(CT_REG_MODEL, known))))
        return ct_error_hint(err, "%s", hint);
    return ct_error_hint(err, "use the flags of the run that wrote it: --model %.*s%s%s", (int)name, model,
                         config && config[0] ? " --model-config " : "", config && config[0] ? config : "");
}

/* The metadata checks that give a clear message before any tensor is compared. */
static int check_header(ct_run *run, const char *path, const ct_ckpt *c, int weights_only, ct_error *err)
{
    const char *model = ct_ckpt_meta_get(c, "model"), *opt = ct_ckpt_meta_get(c, "optimizer");
    const char *mine = ct_optim_kind_name(ct_optim_get_config(run->optim)->kind);
    const ct_model *host = ct_model_host(run->model);
    char want[320];

    int rc;

    snprintf(want, sizeof(want), "%s %s", host->name, host->describe);
    if ((rc = ct_ckpt_format_check(c, "", path, err)))
        return rc;
    if (!model || strcmp(model, want)) {
        /* Resuming another model is a conflict of this run's flags with the checkpoint's (exit 2). */
        ct_error_set(err, weights_only ? CT_EFORMAT : CT_ECONFLICT, "ckpt-model", "%s: checkpoint is for model %s, "
                     "this run builds %s", path, model ? model : "(missing)", want);
        return model_hint(c, err);
    }
    if (!weights_only && (!opt || strcmp(opt, mine))) {
        ct_error_set(err, CT_EFORMAT, "ckpt-optimizer", "%s: checkpoint has %s optimizer state, this run uses %s",
                     path, opt ? opt : "no", mine);
        return ct_error_hint(err, "resume with --optimizer %s", opt ? opt : "of the run that wrote it");
    }
    return check_storage(run, path, c, weights_only, err);
}

/* One setting the checkpoint recorded against this run's; a checkpoint written before ctrain
 * recorded it (no key) is not compared, nor data that could not be identified (streamed: ""). */
static int same_setting(const char *path, const ct_ckpt *c, const char *key, const char *mine, const char *flag,
                        ct_error *err)
{
    const char *theirs = ct_ckpt_meta_get(c, key);

    if (!theirs || !strcmp(theirs, mine) || (!strcmp(key, "data") && (!theirs[0] || !mine[0])))
        return 0;
    ct_error_set(err, CT_ECONFLICT, "ckpt-resume-mismatch", "%s: the checkpoint's run has %s %s%s%s, this run "
                 "has %s%s%s: resuming would mix two runs", path, flag, theirs[0] ? "" : "'", theirs,
                 theirs[0] ? "" : "'", mine[0] ? "" : "'", mine, mine[0] ? "" : "'");
    return ct_error_hint(err, "resume with the checkpoint's %s, or add --weights-only to load its weights and start "
                              "a new run (in another --default-root-dir to keep this one)", flag);
}

/* The checkpoint's --model-config as this run prints its own (the same keys and values in the
 * same order, "hidden=64," as "hidden=64"), so a checkpoint whose text was recorded as given
 * resumes under the same values; text the schema refuses stays as it is, and differs. */
static const char *config_as_mine(const ct_loop_options *o, const char *theirs, char *buf, size_t size)
{
    ct_config parsed;
    ct_error ignored;

    if (!theirs || !o->model_schema ||
        ct_config_parse(o->model_schema, "--model-config", "checkpoint", theirs, &parsed, &ignored) != 0)
        return theirs;
    return ct_config_print(&parsed, buf, size);
}

/* What decides the data order, the split and what is trained must be the checkpoint's: another
 * seed reshuffles the rest of the epoch (samples repeated and skipped), another split or data
 * moves samples between training and validation and compares best_val_acc across two sets. */
static int check_same_run(ct_run *run, const char *path, const ct_ckpt *c, ct_error *err)
{
    const ct_loop_options *o = &run->opt;
    char seed[32], vf[32], cfg[CT_CONFIG_TEXT_MAX];
    const char *theirs_vf = ct_ckpt_meta_get(c, "val_fraction");
    const char *theirs_cfg = config_as_mine(o, ct_ckpt_meta_get(c, "model_config"), cfg, sizeof(cfg));
    double d;
    int rc;

    snprintf(seed, sizeof(seed), "%" PRIu64, o->seed);
    snprintf(vf, sizeof(vf), "%.17g", o->val_fraction);
    /* val_fraction compares as a number ("0.1" and "0.10000000000000001" are one value). */
    if (theirs_vf && ct_parse_double(theirs_vf, &d) == 0 && d == o->val_fraction)
        theirs_vf = NULL;
    if ((rc = same_setting(path, c, "seed", seed, "--seed", err)) ||
        (rc = same_setting(path, c, "datamodule", o->datamodule, "--datamodule", err)) ||
        (rc = same_setting(path, c, "data", o->data_identity, "--data (its files)", err)) ||
        (theirs_vf && (rc = same_setting(path, c, "val_fraction", vf, "--val-fraction", err))) ||
        (theirs_cfg && strcmp(theirs_cfg, o->model_config) &&
         (rc = same_setting(path, c, "model_config", o->model_config, "--model-config", err))))
        return rc;
    return 0;
}

static int restore_counters(ct_run *run, const char *path, const ct_ckpt *c, ct_error *err)
{
    ct_progress_state *st = &run->st;
    int64_t opt_steps, world, batch;
    const char *rng = ct_ckpt_meta_get(c, "rng"), *best = ct_ckpt_meta_get(c, "best_val_acc");
    const char *best_loss = ct_ckpt_meta_get(c, "best_val_loss");
    int rc;

    if ((rc = need_int(path, c, "epoch", &st->epoch, err)) ||
        (rc = need_int(path, c, "step_in_epoch", &st->step_in_epoch, err)) ||
        (rc = need_int(path, c, "global_step", &st->global_step, err)) ||
        (rc = need_int(path, c, "optimizer_steps", &opt_steps, err)) ||
        (rc = need_int(path, c, "world_size", &world, err)) || (rc = need_int(path, c, "batch_size", &batch, err)))
        return rc;
    /* Inside an epoch the sample order depends on the shards and the batch: another world size or
     * batch size cannot continue that epoch exactly. At an epoch boundary both may change. */
    if (st->step_in_epoch > 0 && (world != run->world || batch != run->opt.batch_size)) {
        ct_error_set(err, CT_ECONFLICT, "ckpt-resume-layout",
                     "%s: stopped inside epoch %" PRId64 " with %" PRId64 " ranks x batch %" PRId64
                     "; this run has %d x %d", path, st->epoch + 1, world, batch, run->world, run->opt.batch_size);
        return ct_error_hint(err, "resume with the same world size and --batch-size");
    }
    if (!rng || strlen(rng) != 64 ||
        sscanf(rng, "%16" SCNx64 "%16" SCNx64 "%16" SCNx64 "%16" SCNx64, &run->rng.s[0], &run->rng.s[1],
               &run->rng.s[2], &run->rng.s[3]) != 4)
        return ct_error_set(err, CT_EFORMAT, "ckpt-meta", "%s: metadata rng is missing or malformed", path);
    if (!best || ct_parse_double(best, &st->best_val_acc))
        st->best_val_acc = -1;
    if (!best_loss || ct_parse_double(best_loss, &st->best_val_loss))
        st->best_val_loss = NAN;
    ct_optim_set_steps(run->optim, opt_steps);
    restore_callbacks(run, c);
    return 0;
}

int ct_run_checkpoint_meta(ct_run *run, const char *path, const char *key, char *out, size_t size, ct_error *err)
{
    ct_ckpt *c = calloc(1, sizeof(*c));
    const char *v;
    int rc;

    if (!c)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory reading %s", path);
    /* No tensors described: the header and metadata only. */
    if (!(rc = ct_strategy_load_checkpoint(run->strategy, path, c, err))) {
        v = ct_ckpt_meta_get(c, key);
        snprintf(out, size, "%s", v ? v : "");
    }
    free(c);
    return rc;
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

int ct_run_load_checkpoint(ct_run *run, const char *path, int weights_only, ct_error *err)
{
    ct_ckpt *c = calloc(1, sizeof(*c));
    ct_optim_state_list optim = { 0 };
    uint64_t header;
    int rc;

    if (!c)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory loading %s", path);
    /* First pass, no tensors: the header is validated and the metadata read, so a checkpoint of
     * another model gets a message about the model rather than about one tensor. */
    rc = ct_strategy_load_checkpoint(run->strategy, path, c, err);
    if (!rc)
        rc = check_header(run, path, c, weights_only, err);
    if (!rc && !weights_only)
        rc = check_same_run(run, path, c, err);
    header = c->header_digest;
    if ((rc = agree_on_file(run, path, rc, header, err)))
        goto out;
    /* The optimizer's whole arrays to read into: the strategy takes them back once read. */
    if (!weights_only && (rc = ct_strategy_optimizer_state_get(run->strategy, run->optim, 0, &optim, err)))
        goto out;
    rc = describe_tensors(run, c, weights_only ? NULL : &optim, err);
    if (!rc)
        rc = ct_strategy_load_checkpoint(run->strategy, path, c, err);
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
    if (!weights_only)
        ct_strategy_optimizer_state_put(run->strategy, run->optim, &optim);
    if (!weights_only)
        rc = restore_counters(run, path, c, err);
    if (!rc)
        rc = ct_model_from_host(run->model, run->optim, err);
out:
    free(c);
    return rc;
}
