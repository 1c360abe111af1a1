/* SPDX-License-Identifier: BSD-3-Clause */
/* The Trainer: builds a run from the config and the strategy, runs it on every rank through the
 * strategy's launcher, and reports rank 0's result. See include/ctrain/trainer.h. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ctrain/data.h"
#include "ctrain/datamodule.h"
#include "ctrain/engine.h"
#include "ctrain/model.h"
#include "ctrain/nn.h"
#include "ctrain/registry.h"
#include "ctrain/trainer.h"
#include "ctrain/util.h"
#include "engine/loops/hf_io.h"
#include "engine/loops/loops.h"
#include "engine/nn/gemm.h"
#include "engine/trainer/deterministic.h"
#include "engine/trainer/requeue.h"
#include "engine/util/fsutil.h"

#define EVAL_BATCH 1000

enum mode { MODE_FIT, MODE_VALIDATE, MODE_TEST };

struct body_arg {
    const ct_trainer_config *cfg;
    enum mode mode;
    const ct_plan *plan;       /* the connector's: model, its config, the data module */
};

void ct_trainer_config_default(ct_trainer_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_epochs = 5;
    cfg->max_steps = -1;
    cfg->batch_size = 128;
    cfg->lr = 1e-3;
    snprintf(cfg->optimizer, sizeof(cfg->optimizer), "adamw");
    snprintf(cfg->lr_schedule, sizeof(cfg->lr_schedule), "cosine");
    cfg->weight_decay = -1;
    cfg->momentum = 0.9;
    cfg->hidden[0] = 512;
    cfg->hidden[1] = 256;
    cfg->n_hidden = 2;
    cfg->seed = 42;
    snprintf(cfg->default_root_dir, sizeof(cfg->default_root_dir), "runs");
    cfg->log_every_n_steps = 50;
    cfg->progress = CT_TRAINER_PROGRESS_AUTO;
    cfg->val_fraction = 1.0 / 12.0;
    snprintf(cfg->requeue_signal, sizeof(cfg->requeue_signal), "USR1");
    cfg->auto_requeue = 1;
    cfg->collective_timeout = 300;
    cfg->accumulate_grad_batches = 1;
    cfg->limit_val_batches = 1.0;
    cfg->save_top_k = 1;
    cfg->tensorboard = 1;
}

/* Lightning's trainer controls on their own and against each other (README, "Training controls");
 * the monitored metric is checked against the model's metrics once it is built (resolve_monitor). */
static int check_controls(const ct_trainer_config *cfg, ct_error *err)
{
    if (cfg->accumulate_grad_batches < 1)
        return ct_error_set(err, CT_EINVAL, "trainer-accumulate", "--accumulate-grad-batches %d must be at least 1",
                            cfg->accumulate_grad_batches);
    if (!(cfg->gradient_clip_val >= 0) || !isfinite(cfg->gradient_clip_val)) {
        ct_error_set(err, CT_EINVAL, "trainer-gradient-clip", "--gradient-clip-val %g must be a positive number",
                     cfg->gradient_clip_val);
        return ct_error_hint(err, "e.g. --gradient-clip-val 1.0 (0, the default, clips nothing)");
    }
    if (cfg->gradient_clip_algorithm[0] && strcmp(cfg->gradient_clip_algorithm, "norm") &&
        strcmp(cfg->gradient_clip_algorithm, "value")) {
        ct_error_set(err, CT_EINVAL, "trainer-gradient-clip", "--gradient-clip-algorithm '%s' is not an algorithm",
                     cfg->gradient_clip_algorithm);
        return ct_error_hint(err, "use norm (the default: scale the whole gradient to that L2 norm) or value "
                                  "(clamp each value)");
    }
    if (cfg->gradient_clip_algorithm[0] && cfg->gradient_clip_val == 0) {
        ct_error_set(err, CT_EINVAL, "trainer-gradient-clip-algorithm-alone",
                     "--gradient-clip-algorithm %s without --gradient-clip-val clips nothing", cfg->gradient_clip_algorithm);
        return ct_error_hint(err, "add --gradient-clip-val X (the largest norm or value), or drop the algorithm");
    }
    if (cfg->val_check_interval < 0)
        return ct_error_set(err, CT_EINVAL, "trainer-val-check-interval",
                            "--val-check-interval %ld must be a number of optimizer steps (>= 1)", cfg->val_check_interval);
    if (!(cfg->limit_val_batches >= 0) || (!cfg->limit_val_is_count && cfg->limit_val_batches > 1)) {
        ct_error_set(err, CT_EINVAL, "trainer-limit-val-batches", "--limit-val-batches %g is neither a count of "
                     "batches nor a fraction in [0.0, 1.0]", cfg->limit_val_batches);
        return ct_error_hint(err, "write a count as an integer (--limit-val-batches 50) and a fraction with a point "
                                  "(--limit-val-batches 0.25)");
    }
    if (cfg->warmup_steps < 0)
        return ct_error_set(err, CT_EINVAL, "trainer-warmup-steps", "--warmup-steps %ld must be >= 0", cfg->warmup_steps);
    if (cfg->max_steps >= 0 && cfg->warmup_steps > cfg->max_steps) {
        ct_error_set(err, CT_EINVAL, "trainer-warmup-steps", "--warmup-steps %ld is longer than --max-steps %ld",
                     cfg->warmup_steps, cfg->max_steps);
        return ct_error_hint(err, "warm up over a part of the fit (llm.c: a few percent of the steps)");
    }
    if (!(cfg->min_lr >= 0) || !isfinite(cfg->min_lr) || cfg->min_lr >= cfg->lr) {
        ct_error_set(err, CT_EINVAL, "trainer-min-lr", "--min-lr %g must be >= 0 and below --lr %g", cfg->min_lr,
                     cfg->lr);
        return ct_error_hint(err, "the cosine decays from --lr to --min-lr (llm.c and nanoGPT: lr / 10)");
    }
    if (cfg->min_lr_set && !strcmp(cfg->lr_schedule, "constant")) {
        ct_error_set(err, CT_EINVAL, "trainer-min-lr-constant", "--min-lr with --lr-schedule constant: a constant "
                     "schedule has no end value");
        return ct_error_hint(err, "use --lr-schedule cosine (the default) or drop --min-lr");
    }
    if (cfg->mode[0] && strcmp(cfg->mode, "min") && strcmp(cfg->mode, "max")) {
        ct_error_set(err, CT_EINVAL, "trainer-mode", "--mode '%s' is not min or max", cfg->mode);
        return ct_error_hint(err, "min: lower is better (losses); max: higher is better (accuracy)");
    }
    if (cfg->save_top_k < -1 || cfg->save_top_k > CT_TOP_K_MAX) {
        ct_error_set(err, CT_EINVAL, "trainer-save-top-k", "--save-top-k %d is outside [-1, %d]", cfg->save_top_k,
                     CT_TOP_K_MAX);
        return ct_error_hint(err, "-1 keeps every validation's checkpoint, 0 none, K the K best");
    }
    if (cfg->early_stopping_patience < 0)
        return ct_error_set(err, CT_EINVAL, "trainer-early-stopping-patience",
                            "--early-stopping-patience %d must be >= 0 (0: off)", cfg->early_stopping_patience);
    if (cfg->early_stopping_patience > 0 && strcmp(cfg->monitor, "train_loss") &&
        (cfg->val_fraction == 0 || cfg->limit_val_batches == 0)) {
        ct_error_set(err, CT_EINVAL, "trainer-early-stopping-no-val", "--early-stopping-patience %d watches %s, but "
                     "%s leaves no validation", cfg->early_stopping_patience,
                     cfg->monitor[0] ? cfg->monitor : "the validation metric",
                     cfg->val_fraction == 0 ? "--val-fraction 0" : "--limit-val-batches 0");
        return ct_error_hint(err, "keep a validation set, or --monitor train_loss");
    }
    return 0;
}

int ct_trainer_config_check(const ct_trainer_config *cfg, ct_error *err)
{
    enum ct_optim_kind kind;
    int sig;

    if (cfg->max_epochs < 1)
        return ct_error_set(err, CT_EINVAL, "trainer-max-epochs", "--max-epochs %d must be at least 1",
                            cfg->max_epochs);
    if (cfg->max_steps < -1)
        return ct_error_set(err, CT_EINVAL, "trainer-max-steps", "--max-steps %ld must be -1 (no limit) or >= 0",
                            cfg->max_steps);
    if (cfg->batch_size < 1 || cfg->batch_size > 65536)
        return ct_error_set(err, CT_EINVAL, "trainer-batch-size", "--batch-size %d is outside [1, 65536]",
                            cfg->batch_size);
    if (!(cfg->lr > 0) || !isfinite(cfg->lr))
        return ct_error_set(err, CT_EINVAL, "trainer-lr", "--lr %g must be a positive number", cfg->lr);
    if (ct_optim_parse_kind(cfg->optimizer, &kind)) {
        ct_error_set(err, CT_EINVAL, "trainer-optimizer", "--optimizer '%s' is not an optimizer", cfg->optimizer);
        return ct_error_hint(err, "use --optimizer adamw or --optimizer sgd");
    }
    if (strcmp(cfg->lr_schedule, "cosine") && strcmp(cfg->lr_schedule, "constant")) {
        ct_error_set(err, CT_EINVAL, "trainer-lr-schedule", "--lr-schedule '%s' is not a schedule", cfg->lr_schedule);
        return ct_error_hint(err, "use --lr-schedule cosine or --lr-schedule constant");
    }
    if (cfg->n_hidden < 0 || cfg->n_hidden > CT_TRAINER_MAX_HIDDEN)
        return ct_error_set(err, CT_EINVAL, "trainer-hidden", "--hidden: at most %d hidden layers",
                            CT_TRAINER_MAX_HIDDEN);
    for (int i = 0; i < cfg->n_hidden; i++)
        if (cfg->hidden[i] < 1 || cfg->hidden[i] > 65536)
            return ct_error_set(err, CT_EINVAL, "trainer-hidden", "--hidden: width %d is outside [1, 65536]",
                                cfg->hidden[i]);
    if (cfg->log_every_n_steps < 1)
        return ct_error_set(err, CT_EINVAL, "trainer-log-every", "--log-every-n-steps %d must be at least 1",
                            cfg->log_every_n_steps);
    if (cfg->checkpoint_every_n_steps < 0)
        return ct_error_set(err, CT_EINVAL, "trainer-ckpt-every", "--checkpoint-every-n-steps %d must be >= 0",
                            cfg->checkpoint_every_n_steps);
    if (!(cfg->val_fraction >= 0 && cfg->val_fraction < 1))
        return ct_error_set(err, CT_EINVAL, "trainer-val-fraction", "--val-fraction %g is outside [0, 1)",
                            cfg->val_fraction);
    if (ct_stop_signal_parse(cfg->requeue_signal, &sig)) {
        ct_error_set(err, CT_EINVAL, "trainer-requeue-signal", "--requeue-signal '%s' is not a signal ctrain can "
                     "stop on", cfg->requeue_signal);
        return ct_error_hint(err, "use USR1 (default), USR2, TERM, INT, HUP, XCPU, ALRM or QUIT, as in "
                                  "#SBATCH --signal=USR1@90");
    }
    if (!(cfg->collective_timeout >= 0) || !isfinite(cfg->collective_timeout))
        return ct_error_set(err, CT_EINVAL, "trainer-collective-timeout",
                            "--collective-timeout %g must be a number of seconds (0: wait forever)",
                            cfg->collective_timeout);
    if (!cfg->default_root_dir[0])
        return ct_error_set(err, CT_EINVAL, "trainer-root-dir", "--default-root-dir must not be empty");
    if (cfg->weights_only && (!cfg->ckpt_path[0] || !strcmp(cfg->ckpt_path, "auto"))) {
        ct_error_set(err, CT_EINVAL, "trainer-weights-only", "--weights-only needs the checkpoint to load (--ckpt-path "
                     "%s)", cfg->ckpt_path[0] ? "auto resumes" : "not given");
        return ct_error_hint(err, "give --ckpt-path last, best or a FILE with --weights-only");
    }
    return check_controls(cfg, err);
}

/* --monitor against the model's metrics: val_loss, train_loss, val_acc (models with accuracy) or
 * val_<metric> (the model's own, e.g. val_bpb); the default is what best.safetensors always kept,
 * val_acc or val_loss. --mode defaults to max for accuracy and min for the rest. */
static int resolve_monitor(ct_run *run, const ct_trainer_config *cfg, ct_error *err)
{
    const ct_model_info *info = &run->model->info;
    ct_loop_options *o = &run->opt;
    const char *name = cfg->monitor[0] ? cfg->monitor : info->has_accuracy ? "val_acc" : "val_loss";
    char known[160];
    size_t used;

    snprintf(o->monitor_name, sizeof(o->monitor_name), "%s", name);
    o->monitor = CT_MON_VAL_METRIC;
    o->monitor_metric = -1;
    if (!strcmp(name, "val_loss"))
        o->monitor = CT_MON_VAL_LOSS;
    else if (!strcmp(name, "train_loss"))
        o->monitor = CT_MON_TRAIN_LOSS;
    else if (!strcmp(name, "val_acc") && info->has_accuracy)
        o->monitor = CT_MON_VAL_ACC;
    for (int i = 0; i < info->n_metrics && o->monitor == CT_MON_VAL_METRIC; i++)
        if (!strncmp(name, "val_", 4) && !strcmp(name + 4, info->metric_names[i]))
            o->monitor_metric = i;
    if (o->monitor == CT_MON_VAL_METRIC && o->monitor_metric < 0) {
        used = (size_t)snprintf(known, sizeof(known), "val_loss, train_loss%s", info->has_accuracy ? ", val_acc" : "");
        for (int i = 0; i < info->n_metrics && used < sizeof(known); i++)
            used += (size_t)snprintf(known + used, sizeof(known) - used, ", val_%s", info->metric_names[i]);
        ct_error_set(err, CT_EINVAL, "trainer-monitor", "--monitor %s: model %s logs no such metric", name,
                     run->model->name);
        return ct_error_hint(err, "monitor one of %s", known);
    }
    o->monitor_max = cfg->mode[0] ? !strcmp(cfg->mode, "max") : o->monitor == CT_MON_VAL_ACC;
    return 0;
}

/* Accumulation, clipping and the gradient norm work on gradients in host memory; a model whose
 * device implementation keeps them on the device (cuda) does not offer that yet. */
static int check_host_gradients(ct_run *run, const ct_trainer_config *cfg, ct_error *err)
{
    run->grads_on_host = ct_model_host(run->model) == run->model;
    if (run->grads_on_host || (cfg->accumulate_grad_batches == 1 && cfg->gradient_clip_val == 0))
        return 0;
    ct_error_set(err, CT_ENOTAVAIL, "trainer-controls-device", "--%s: model %s on %s keeps its gradients in device "
                 "memory, where ctrain does not accumulate or clip them yet",
                 cfg->accumulate_grad_batches > 1 ? "accumulate-grad-batches" : "gradient-clip-val", run->model->name,
                 ct_strategy_accelerator_name(run->strategy));
    return ct_error_hint(err, "train with a larger --batch-size instead, or on --accelerator cpu");
}

/* The hyper-parameters TensorBoard's hparams plugin shows: the run's flags, then where it ran. */
static void hparams_json(ct_run *run, const ct_trainer_config *cfg)
{
    cJSON *o = cJSON_Parse(run->opt.flags_json);
    char *text;

    if (!o)
        return;
    cJSON_DeleteItemFromObject(o, "hidden");
    cJSON_AddStringToObject(o, "gradient_clip_algorithm", cfg->gradient_clip_algorithm[0] ? cfg->gradient_clip_algorithm
                                                                                         : "norm");
    cJSON_AddNumberToObject(o, "val_check_interval", (double)cfg->val_check_interval);
    cJSON_AddStringToObject(o, "monitor", run->opt.monitor_name);
    cJSON_AddNumberToObject(o, "world_size", run->world);
    cJSON_AddStringToObject(o, "strategy", ct_strategy_name(run->strategy) ? ct_strategy_name(run->strategy) : "");
    if (ct_strategy_precision(run->strategy))
        cJSON_AddStringToObject(o, "precision", ct_strategy_precision(run->strategy)->name);
    text = cJSON_PrintUnformatted(o);
    snprintf(run->opt.hparams_json, sizeof(run->opt.hparams_json), "%s", text ? text : "{}");
    free(text);
    cJSON_Delete(o);
}

/* "last" / "best" name files in the root directory; anything else is a path. */
static void resolve_ckpt(const ct_trainer_config *cfg, const char *given, char *out, size_t size)
{
    if (!strcmp(given, "last") || !strcmp(given, "best"))
        snprintf(out, size, "%s/%s.safetensors", cfg->default_root_dir, given);
    else
        snprintf(out, size, "%s", given);
}

static int mkdir_p(const char *dir, ct_error *err)
{
    char path[CT_TRAINER_PATH_MAX];

    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + 1;; p++) {
        char c = *p;

        if (c != '/' && c != '\0')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) && errno != EEXIST) {
            ct_error_set(err, CT_EIO, "trainer-root-dir", "--default-root-dir %s: cannot create %s: %s", dir, path,
                         strerror(errno));
            return ct_error_hint(err, "choose a writable directory");
        }
        *p = c;
        if (c == '\0')
            break;
    }
    return 0;
}

static int root_dir_ok(const ct_trainer_config *cfg, ct_error *err)
{
    return ct_fs_check_dir(cfg->default_root_dir, "--default-root-dir", err);
}

/* One thread team per rank: share the cores among the ranks of a node, unless the user chose.
 * Two teams follow the rule: OpenBLAS's (its own pthreads) and OpenMP's, which runs oneDNN's GEMMs
 * (Debian's libdnnl is built on OpenMP) and the step's element-wise passes. OMP_NUM_THREADS, when
 * set, is libgomp's own; OPENBLAS_NUM_THREADS alone sets both. */
static void set_blas_threads(ct_strategy *s)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nodes = ct_strategy_num_nodes(s) > 0 ? ct_strategy_num_nodes(s) : 1;
    int per_node = (ct_strategy_world_size(s) + nodes - 1) / nodes;
    const char *ob = getenv("OPENBLAS_NUM_THREADS");
    long threads, v;

    if (ct_gemm_forked_after_teams()) {
        /* a ddp_fork worker of a program that already trained on several threads */
        ct_gemm_set_threads(1);
        if (ct_strategy_is_global_zero(s))
            fprintf(stderr, "ctrain: note: the program trained on OpenMP threads before ddp_fork forked its "
                    "workers, which cannot start them again (libgomp): each worker computes on 1 thread; "
                    "--strategy ddp starts fresh workers that use their share of the cores\n");
    } else if (getenv("OMP_NUM_THREADS")) {
        return;
    }
    if (ob) {
        if (ct_parse_long(ob, 1, 4096, &v) == 0)
            ct_gemm_set_threads((int)v);
        return;
    }
    threads = cpus / (per_node > 0 ? per_node : 1);
    openblas_set_num_threads(threads > 0 ? (int)threads : 1);
    ct_gemm_set_threads(threads > 0 ? (int)threads : 1);
}

static void flags_json(const ct_trainer_config *cfg, const ct_plan *plan, char *buf, size_t size)
{
    cJSON *o = cJSON_CreateObject(), *h = cJSON_AddArrayToObject(o, "hidden");
    char *s;

    cJSON_AddNumberToObject(o, "max_epochs", cfg->max_epochs);
    cJSON_AddNumberToObject(o, "max_steps", (double)cfg->max_steps);
    cJSON_AddNumberToObject(o, "batch_size", cfg->batch_size);
    cJSON_AddNumberToObject(o, "lr", cfg->lr);
    cJSON_AddStringToObject(o, "lr_schedule", cfg->lr_schedule);
    cJSON_AddStringToObject(o, "optimizer", cfg->optimizer);
    cJSON_AddNumberToObject(o, "weight_decay", cfg->weight_decay);
    cJSON_AddNumberToObject(o, "momentum", cfg->momentum);
    for (int i = 0; i < cfg->n_hidden; i++)
        cJSON_AddItemToArray(h, cJSON_CreateNumber(cfg->hidden[i]));
    cJSON_AddNumberToObject(o, "seed", (double)cfg->seed);
    cJSON_AddBoolToObject(o, "deterministic", cfg->deterministic);
    cJSON_AddNumberToObject(o, "val_fraction", cfg->val_fraction);
    cJSON_AddNumberToObject(o, "accumulate_grad_batches", cfg->accumulate_grad_batches);
    cJSON_AddNumberToObject(o, "gradient_clip_val", cfg->gradient_clip_val);
    cJSON_AddNumberToObject(o, "warmup_steps", (double)cfg->warmup_steps);
    cJSON_AddNumberToObject(o, "min_lr", cfg->min_lr);
    cJSON_AddStringToObject(o, "model", plan->model);
    cJSON_AddStringToObject(o, "model_config", plan->model_config);
    cJSON_AddStringToObject(o, "datamodule", plan->datamodule);
    s = cJSON_PrintUnformatted(o);
    snprintf(buf, size, "%s", s ? s : "{}");
    free(s);
    cJSON_Delete(o);
}

/* Everything one rank owns. */
struct rank_state {
    ct_run run;
    ct_datamodule *data;
    ct_model *host;            /* the model on the host: init, checkpoints */
    ct_model *model;           /* its implementation on this rank's device (host itself on cpu) */
    ct_optim *optim;
};

static void rank_state_free(struct rank_state *rs)
{
    ct_logger_close(&rs->run);
    ct_tb_close(&rs->run);
    free(rs->run.accum);
    ct_sampler_free(&rs->run.train_sampler);
    ct_model_free_batch(rs->model, &rs->run.batch);
    if (rs->model != rs->host)
        ct_model_free(rs->model);
    ct_model_free(rs->host);
    ct_optim_free(rs->optim);
    ct_datamodule_free(rs->data);
}

/* The model's config: --model-config, with --hidden W,W folded in as the mlp's hidden=W-W. */
static int model_config(const ct_trainer_config *cfg, const ct_plan *plan, char *out, size_t size, ct_error *err)
{
    const ct_registry_entry *model = ct_registry_find(CT_REG_MODEL, plan->model);
    size_t used = (size_t)snprintf(out, size, "%s", plan->model_config);

    if (!cfg->hidden_set)
        return 0;
    /* --hidden W,W is hidden=W-W: for a model whose schema takes that key (the mlp). */
    if (!model || !ct_config_key_find(model->config, "hidden")) {
        ct_error_set(err, CT_EINVAL, "trainer-hidden", "--hidden sets the mlp's layers, but --model is %s", plan->model);
        return ct_error_hint(err, "use --model-config for %s (ctrain plan --list shows its keys)", plan->model);
    }
    if (strstr(plan->model_config, "hidden=")) {
        ct_error_set(err, CT_EINVAL, "trainer-hidden", "--hidden and --model-config hidden=... both set the layers");
        return ct_error_hint(err, "give one of them");
    }
    used += (size_t)snprintf(out + used, size - used, "%shidden=%s", used ? "," : "", cfg->n_hidden ? "" : "none");
    for (int i = 0; i < cfg->n_hidden && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%d", i ? "-" : "", cfg->hidden[i]);
    return 0;
}

/* The data module for this mode, then the model built for its data, the optimizer and the first
 * weights. The data module learns the model's input (token windows take the model's length). */
static int build_model(struct rank_state *rs, const ct_trainer_config *cfg, const struct body_arg *ba,
                       ct_error *err)
{
    unsigned splits = ba->mode == MODE_FIT ? CT_SPLITS_FIT | CT_SPLITS_TEST
                    : ba->mode == MODE_TEST ? CT_SPLITS_TEST : CT_SPLITS_FIT;
    int eval_batch = ct_model_eval_batch(ba->plan->model, EVAL_BATCH);
    int max_batch = cfg->batch_size > eval_batch ? cfg->batch_size : eval_batch;
    const struct ct_precision_ops *prec = ct_strategy_precision(rs->run.strategy);
    char config[1024];
    ct_optim_config oc;
    enum ct_optim_kind kind;
    int rc;

    if ((rc = model_config(cfg, ba->plan, config, sizeof(config), err)) ||
        (rc = ct_datamodule_open(ba->plan->datamodule, cfg->data_dir, cfg->val_fraction, splits, &rs->data, err)))
        return rc;
    /* What a checkpoint records so that a resume cannot mix two runs. */
    snprintf(rs->run.opt.datamodule, sizeof(rs->run.opt.datamodule), "%s", ba->plan->datamodule);
    snprintf(rs->run.opt.model_config, sizeof(rs->run.opt.model_config), "%s", config);
    rs->run.opt.val_fraction = cfg->val_fraction;
    if (ba->mode == MODE_FIT &&
        (rc = ct_datamodule_identity(ba->plan->datamodule, cfg->data_dir, rs->run.opt.data_identity,
                                     sizeof(rs->run.opt.data_identity), err)))
        return rc;
    if ((rc = ct_model_create(ba->plan->model, config, ct_datamodule_info(rs->data), max_batch, &rs->host, err)) ||
        (rc = ct_datamodule_setup(rs->data, &rs->host->x, &rs->host->y, err)))
        return rc;
    /* A "-true" precision stores the model in its type (64-true: fp64) before anything is drawn. */
    if (prec && (rc = ct_model_set_param_dtype(rs->host, prec->param_dtype, err)))
        return rc;
    /* Sizes are known once the data has the model's input (token windows of its length). */
    if (ba->mode == MODE_FIT && ct_datamodule_size(rs->data, CT_SPLIT_TRAIN) < (size_t)rs->run.world)
        return ct_error_set(err, CT_EINVAL, "trainer-val-fraction",
                            "--val-fraction %g leaves %zu training samples for %d ranks", cfg->val_fraction,
                            ct_datamodule_size(rs->data, CT_SPLIT_TRAIN), rs->run.world);
    /* A model may evaluate in smaller batches than the default (long sequences). */
    rs->run.eval_batch = eval_batch;
    ct_optim_parse_kind(cfg->optimizer, &kind);
    ct_optim_config_default(&oc, kind);
    oc.lr = cfg->lr;
    if (cfg->weight_decay >= 0)
        oc.weight_decay = cfg->weight_decay;
    if (kind == CT_OPTIM_SGD)
        oc.momentum = cfg->momentum;
    oc.dtype = rs->host->param_dtype; /* state and update in the parameters' type */
    if ((rc = ct_optim_create(&oc, rs->host->num_params, &rs->optim, err)))
        return rc;
    rs->run.optim = rs->optim;
    /* Initialise from the seed; rank 0's values win anyway (setup_model broadcasts them). */
    ct_rng_seed(&rs->run.rng, cfg->seed);
    ct_model_init(rs->host, &rs->run.rng);
    /* Pretrained weights over the initialisation (every rank reads them; rank 0's win anyway). */
    if (ba->mode == MODE_FIT && cfg->init_from[0])
        return ct_hf_load(rs->host, cfg->init_from, err);
    return 0;
}

/* The SLURM job this process belongs to ("" outside SLURM). The batch script's environment has it,
 * so do srun's tasks and ranks of ctrain's own launcher started inside a job. */
static const char *slurm_job_id(void)
{
    const char *id = getenv("SLURM_JOB_ID");

    if (!id || !*id)
        id = getenv("SLURM_JOBID");
    return id ? id : "";
}

/* Lightning's model_to_device: the strategy has the accelerator make the model's implementation for
 * the precision (on cpu the host model itself), then the batch buffers it reads from. */
static int place_model(struct rank_state *rs, ct_strategy *s, const ct_trainer_config *cfg, ct_error *err)
{
    int max_batch = cfg->batch_size > rs->run.eval_batch ? cfg->batch_size : rs->run.eval_batch;
    int rc;

    if ((rc = ct_strategy_model_to_device(s, rs->host, rs->optim, max_batch, &rs->model, err)))
        return rc;
    rs->run.model = rs->model;
    return ct_model_batch_buffers(rs->model, &rs->run.batch, err);
}

static void fill_options(ct_run *run, const ct_trainer_config *cfg, const ct_plan *plan)
{
    ct_loop_options *o = &run->opt;

    o->max_epochs = cfg->max_epochs;
    o->max_steps = cfg->max_steps;
    o->batch_size = cfg->batch_size;
    o->lr = cfg->lr;
    o->lr_schedule = strcmp(cfg->lr_schedule, "constant") ? CT_LR_COSINE : CT_LR_CONSTANT;
    o->log_every_n_steps = cfg->log_every_n_steps;
    o->checkpoint_every_n_steps = cfg->checkpoint_every_n_steps;
    o->seed = cfg->seed;
    o->accumulate = cfg->accumulate_grad_batches;
    o->clip = cfg->gradient_clip_val == 0 ? CT_CLIP_NONE
              : strcmp(cfg->gradient_clip_algorithm, "value") ? CT_CLIP_NORM : CT_CLIP_VALUE;
    o->clip_val = cfg->gradient_clip_val;
    o->val_check_interval = cfg->val_check_interval;
    o->limit_val = cfg->limit_val_batches;
    o->limit_val_is_count = cfg->limit_val_is_count;
    o->warmup_steps = cfg->warmup_steps;
    o->min_lr = cfg->min_lr;
    o->save_top_k = cfg->save_top_k;
    o->patience = cfg->early_stopping_patience;
    o->tensorboard = cfg->tensorboard;
    run->last_grad_norm = NAN;
    snprintf(o->root_dir, sizeof(o->root_dir), "%s", cfg->default_root_dir);
    snprintf(o->job_id, sizeof(o->job_id), "%s", slurm_job_id());
    flags_json(cfg, plan, o->flags_json, sizeof(o->flags_json));
    switch (cfg->progress) {
    case CT_TRAINER_PROGRESS_BAR:   run->use_bar = 1; break;
    case CT_TRAINER_PROGRESS_PLAIN: run->use_plain = 1; break;
    case CT_TRAINER_PROGRESS_OFF:   break;
    default:
        if (isatty(STDOUT_FILENO))
            run->use_bar = 1;
        else
            run->use_plain = 1;
    }
    run->st.best_val_acc = -1;
    run->st.best_val_loss = NAN;
    run->st.best_score = NAN;
    for (int i = 0; i < CT_MODEL_MAX_METRICS; i++)
        run->st.last_val_metrics[i] = NAN;
    run->st.last_val_acc = run->st.last_val_loss = run->st.last_train_loss = NAN;
}

/* A step only rank 0 performs (creating files): its status is broadcast so every rank stops
 * together instead of the others waiting forever in the next collective. */
static int zero_only_status(ct_run *run, int rc, ct_error *err)
{
    int status = rc;
    ct_error bcast_err;

    if (ct_strategy_broadcast(run->strategy, &status, sizeof(status), 0, &bcast_err))
        return *err = bcast_err, bcast_err.code;
    if (status && !run->is_zero)
        return ct_error_set(err, status, "trainer-rank0", "rank 0 failed to prepare the output directory");
    return status;
}

/* Loss scaling's record (16-mixed) and the memory of the device when it has its own. */
static void add_device_summary(cJSON *o, ct_strategy *s, const ct_run *run)
{
    ct_memstats ms;
    int64_t skipped = 0;
    double scale = 1.0;

    if (ct_strategy_precision(s) && ct_strategy_precision(s)->loss_scaling) {
        if (run->model->ops->stats)
            run->model->ops->stats(run->model, &skipped, &scale);
        cJSON_AddNumberToObject(o, "overflow_skipped_steps", (double)skipped);
        cJSON_AddNumberToObject(o, "loss_scale", scale);
    }
    if (ct_strategy_device_memory(s, &ms) == 0) {
        cJSON_AddNumberToObject(o, "device_memory_peak_bytes", (double)ms.peak_bytes);
        cJSON_AddNumberToObject(o, "device_memory_total_bytes", (double)ms.total_bytes);
    }
}

static int write_summary(const ct_trainer_config *cfg, ct_strategy *s, const ct_trainer_result *res,
                         const ct_run *run, ct_error *err)
{
    char path[CT_TRAINER_PATH_MAX + 32], key[48];
    const ct_model *host = ct_model_host(run->model);
    cJSON *o = cJSON_CreateObject();
    char *text, *line;
    long allreduces, in_backward, gathers, overlapped;
    int rc;

    cJSON_AddNumberToObject(o, "epochs", res->epochs);
    cJSON_AddNumberToObject(o, "steps", (double)res->steps);
    cJSON_AddNumberToObject(o, "world_size", res->world_size);
    cJSON_AddNumberToObject(o, "train_samples_per_sec", isfinite(res->train_samples_per_sec) ? res->train_samples_per_sec : 0);
#define NUM_OR_NULL(key, v) (isfinite(v) ? cJSON_AddNumberToObject(o, key, v) : cJSON_AddNullToObject(o, key))
    NUM_OR_NULL("train_loss", res->train_loss);
    NUM_OR_NULL("val_loss", res->val_loss);
    NUM_OR_NULL("val_acc", res->val_acc);
    NUM_OR_NULL("best_val_acc", res->best_val_acc);
    NUM_OR_NULL("test_loss", res->test_loss);
    NUM_OR_NULL("test_acc", res->test_acc);
    for (int i = 0; i < res->n_metrics; i++) {
        snprintf(key, sizeof(key), "val_%s", res->metric_names[i]);
        NUM_OR_NULL(key, res->val_metrics[i]);
        snprintf(key, sizeof(key), "test_%s", res->metric_names[i]);
        NUM_OR_NULL(key, res->test_metrics[i]);
    }
#undef NUM_OR_NULL
    cJSON_AddStringToObject(o, "best_checkpoint", res->best_checkpoint);
    cJSON_AddStringToObject(o, "last_checkpoint", res->last_checkpoint);
    cJSON_AddStringToObject(o, "model", host->describe);
    cJSON_AddStringToObject(o, "model_name", host->name);
    cJSON_AddStringToObject(o, "data", ct_datamodule_info(run->data)->description);
    cJSON_AddStringToObject(o, "optimizer", cfg->optimizer);
    cJSON_AddNumberToObject(o, "batch_size", cfg->batch_size);
    cJSON_AddNumberToObject(o, "lr", cfg->lr);
    cJSON_AddNumberToObject(o, "seed", (double)cfg->seed);
    /* What a --deterministic run is reproducible under (engine/trainer/deterministic.h). */
    cJSON_AddBoolToObject(o, "deterministic", cfg->deterministic);
    cJSON_AddNumberToObject(o, "blas_threads", run->opt.blas_threads);
    cJSON_AddStringToObject(o, "strategy", ct_strategy_name(s) ? ct_strategy_name(s) : "");
    cJSON_AddStringToObject(o, "accelerator", ct_strategy_accelerator_name(s) ? ct_strategy_accelerator_name(s) : "");
    if (ct_strategy_precision(s))
        cJSON_AddStringToObject(o, "precision", ct_strategy_precision(s)->name);
    add_device_summary(o, s, run);
    cJSON_AddNumberToObject(o, "train_seconds", run->train_seconds);
    /* Lightning's controls: whether early stopping ended fit, and the monitored metric's best. */
    cJSON_AddBoolToObject(o, "early_stopped", run->st.early_stopped);
    cJSON_AddStringToObject(o, "monitor", run->opt.monitor_name);
    if (isfinite(run->st.best_score))
        cJSON_AddNumberToObject(o, "best_score", run->st.best_score);
    /* Rank 0's view of the gradient exchange: waiting time and how many allreduces overlapped backward. */
    ct_strategy_grad_allreduces(s, &allreduces, &in_backward);
    cJSON_AddNumberToObject(o, "exposed_comm_seconds", ct_strategy_exposed_comm_seconds(s));
    cJSON_AddNumberToObject(o, "grad_allreduces", (double)allreduces);
    cJSON_AddNumberToObject(o, "grad_allreduces_in_backward", (double)in_backward);
    /* ... and of a sharded strategy's parameter all-gather: pieces, and those forward overlapped. */
    ct_strategy_param_gathers(s, &gathers, &overlapped);
    cJSON_AddNumberToObject(o, "param_gathers", (double)gathers);
    cJSON_AddNumberToObject(o, "param_gathers_overlapped", (double)overlapped);
    /* Rank 0's optimizer state: a sharded strategy holds 1/world of it. */
    cJSON_AddNumberToObject(o, "optimizer_state_bytes_per_rank", (double)ct_optim_state_bytes(run->optim));
    cJSON_AddNumberToObject(o, "wall_seconds", ct_time_now() - run->start_time);
    text = cJSON_Print(o);
    cJSON_Delete(o);
    if (text && (line = realloc(text, strlen(text) + 2)) != NULL)
        text = strcat(line, "\n");
    snprintf(path, sizeof(path), "%s/summary.json", cfg->default_root_dir);
    if (!text)
        return ct_error_set(err, CT_ENOMEM, "trainer-summary", "%s: out of memory", path);
    /* Exclusive temp beside it, renamed over it: a name planted there is never followed. */
    rc = ct_fs_write_atomic(path, text, strlen(text), err);
    free(text);
    return rc;
}

static int file_exists_on_zero(ct_run *run, const char *path, int *exists, ct_error *err)
{
    *exists = run->is_zero ? access(path, R_OK) == 0 : 0;
    return ct_strategy_broadcast(run->strategy, exists, sizeof(*exists), 0, err);
}

/* --ckpt-path auto: last.safetensors when it exists and this SLURM job wrote it (the job was
 * requeued), nothing when it does not exist. One written by another job (or outside SLURM) is
 * neither resumed nor overwritten silently: the user says which. Fills resume ("" = from scratch). */
static int choose_auto(ct_run *run, const ct_trainer_config *cfg, char *resume, size_t size, ct_error *err)
{
    char path[CT_TRAINER_PATH_MAX + 32], writer[64];
    const char *job = run->opt.job_id;
    int exists, rc;

    snprintf(path, sizeof(path), "%s/last.safetensors", cfg->default_root_dir);
    if ((rc = file_exists_on_zero(run, path, &exists, err)))
        return rc;
    if (!exists)
        return 0;
    /* Its job id is easy to copy: a file another user owns (or a link to one) is not resumed. */
    rc = run->is_zero ? ct_fs_check_owned(path, "--ckpt-path auto:", err) : 0;
    if ((rc = zero_only_status(run, rc, err)))
        return rc;
    if ((rc = ct_run_checkpoint_meta(run, path, "slurm_job_id", writer, sizeof(writer), err)))
        return rc;
    if (job[0] && strcmp(writer, job)) {
        ct_error_set(err, CT_ECONFLICT, "ckpt-auto-other-job",
                     "--ckpt-path auto: %s was written by %s%s, not by this job %s", path,
                     writer[0] ? "SLURM job " : "a run outside SLURM", writer, job);
        return ct_error_hint(err, "pass --ckpt-path last to resume it, or another --default-root-dir to start fresh");
    }
    snprintf(resume, size, "%s", path);
    return 0;
}

/* Which checkpoint fit resumes from ("" = none). Under SLURM the default is auto, so a requeued
 * job picks up where it was stopped. */
static int choose_resume(ct_run *run, const ct_trainer_config *cfg, char *resume, size_t size, ct_error *err)
{
    const char *mode = cfg->ckpt_path[0] ? cfg->ckpt_path : run->opt.job_id[0] ? "auto" : "";

    resume[0] = '\0';
    if (!strcmp(mode, "auto"))
        return choose_auto(run, cfg, resume, size, err);
    if (mode[0])
        resolve_ckpt(cfg, mode, resume, size);
    return 0;
}

/* Every rank stopped after the same step and rank 0 saved last.safetensors. Requeue the job when
 * the requeue signal came inside SLURM (rank 0 asks slurmctld; every rank learns the outcome),
 * then end fit with CT_EINTR: the CLI exits 75. */
static int finish_stopped(ct_run *run, const ct_trainer_config *cfg, ct_error *err)
{
    char sig[32], where[CT_TRAINER_PATH_MAX + 160];
    const char *job = run->opt.job_id;
    int want = run->stop.requeue && cfg->auto_requeue && job[0];
    int status = 0, rc;
    ct_error rq;

    ct_error_clear(&rq);
    ct_stop_signal_name(run->stop.signal, sig, sizeof(sig));
    snprintf(where, sizeof(where), "stopped by %s%s at epoch %lld, step %lld; checkpoint %s/last.safetensors written",
             sig, run->stop.local ? "" : " (on another rank)", (long long)run->st.epoch + 1,
             (long long)run->st.global_step, cfg->default_root_dir);
    /* Said before asking: SLURM ends the job's processes (and srun, which carries their output) as
     * soon as the requeue is accepted, so nothing printed after it is sure to be seen. */
    if (want)
        ct_progress_line(run, "ctrain: %s; requeueing SLURM job %s", where, job);
    if (want && run->is_zero)
        status = ct_slurm_requeue(job, &rq);
    if (want && (rc = ct_strategy_broadcast(run->strategy, &status, sizeof(status), 0, err)))
        return rc;
    if (want && status) {
        if (run->is_zero) {
            ct_error_set(err, status, rq.id, "%s; but the job was not requeued: %s", where, rq.msg);
            return ct_error_hint(err, "%s", rq.hint);
        }
        ct_error_set(err, status, "requeue-failed", "%s; rank 0 could not requeue job %s", where, job);
        return ct_error_hint(err, "see rank 0's message");
    }
    if (want) {
        ct_error_set(err, CT_EINTR, "fit-requeued", "%s; SLURM job %s requeued", where, job);
        return ct_error_hint(err, "the job starts again under the same id and resumes from that checkpoint "
                                  "(--ckpt-path auto)");
    }
    ct_error_set(err, CT_EINTR, "fit-stopped", "%s", where);
    if (!job[0])
        return ct_error_hint(err, "not in a SLURM job, so nothing was requeued; run the same command with "
                                  "--ckpt-path last to continue");
    if (!cfg->auto_requeue)
        return ct_error_hint(err, "--no-auto-requeue: job %s was not requeued; resubmit with --ckpt-path last "
                                  "to continue", job);
    return ct_error_hint(err, "%s is not the requeue signal (--requeue-signal %s), so job %s was not requeued; "
                              "resubmit with --ckpt-path last to continue", sig, cfg->requeue_signal, job);
}

static int run_fit(struct rank_state *rs, const ct_trainer_config *cfg, ct_trainer_result *res, ct_error *err)
{
    ct_run *run = &rs->run;
    char resume[CT_TRAINER_PATH_MAX + 32], best[CT_TRAINER_PATH_MAX + 32];
    ct_eval_result test;
    int rc, exists = 0;

    run->data = rs->data;
    if ((rc = resolve_monitor(run, cfg, err)) || (rc = check_host_gradients(run, cfg, err)))
        return rc;
    if (cfg->accumulate_grad_batches > 1 &&
        !(run->accum = calloc(run->model->num_params, ct_dtype_size(run->model->param_dtype))))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for the accumulated gradients (%zu elements)",
                            run->model->num_params);
    hparams_json(run, cfg);
    /* The run's directory must be this user's before anything in it is trusted or written. */
    rc = run->is_zero && access(cfg->default_root_dir, F_OK) == 0 ? root_dir_ok(cfg, err) : 0;
    if ((rc = zero_only_status(run, rc, err)) || (rc = choose_resume(run, cfg, resume, sizeof(resume), err)))
        return rc;
    if (resume[0] && cfg->weights_only) {
        /* Fine-tuning: the weights only; counters, optimizer and logs start anew. */
        if ((rc = ct_run_load_checkpoint(run, resume, 1, err)))
            return rc;
        ct_progress_line(run, "ctrain: loaded the weights of %s; a new run starts (--weights-only)", resume);
        resume[0] = '\0';
    } else if (resume[0]) {
        if ((rc = ct_run_load_checkpoint(run, resume, 0, err))) {
            if (rc == CT_ENOENT)
                ct_error_hint(err, "--ckpt-path %s: no such checkpoint; start without --ckpt-path, or pass "
                                   "the --default-root-dir of the run to resume", cfg->ckpt_path[0] ? cfg->ckpt_path : "auto");
            return rc;
        }
        if (cfg->deterministic && (rc = ct_deterministic_check_resume(run, resume, err)))
            return rc;
        ct_progress_line(run, "ctrain: resumed from %s at epoch %lld, step %lld", resume,
                         (long long)run->st.epoch + 1, (long long)run->st.global_step);
    }
    rc = run->is_zero ? mkdir_p(cfg->default_root_dir, err) : 0;
    if (!rc && run->is_zero)
        rc = root_dir_ok(cfg, err);
    if (!rc)
        rc = ct_logger_open(run, resume[0] != '\0', err);
    if (!rc)
        rc = ct_tb_open(run, resume[0] ? run->st.global_step : -1, err);
    if ((rc = zero_only_status(run, rc, err)))
        return rc;
    if ((rc = ct_sampler_init(&run->train_sampler, ct_datamodule_size(rs->data, CT_SPLIT_TRAIN), cfg->batch_size,
                              run->rank, run->world,
                              ct_datamodule_info(rs->data)->train_order == CT_ORDER_SEQUENTIAL ? CT_SAMPLER_SEQUENTIAL
                                                                                              : CT_SAMPLER_SHUFFLE,
                              cfg->seed, err)))
        return rc;
    if ((rc = ct_fit_loop_run(run, err)))
        return rc;
    if (run->stop.agreed)
        return finish_stopped(run, cfg, err);

    /* Test the best checkpoint (the current weights when fit trained nothing and none exists). */
    snprintf(best, sizeof(best), "%s/best.safetensors", cfg->default_root_dir);
    if ((rc = file_exists_on_zero(run, best, &exists, err)))
        return rc;
    if (exists && (rc = ct_run_load_checkpoint(run, best, 1, err)))
        return rc;
    if ((rc = ct_eval_loop_run(run, CT_SPLIT_TEST, &test, err)))
        return rc;
    res->test_loss = test.loss;
    res->test_acc = test.acc;
    for (int i = 0; i < res->n_metrics; i++) {
        res->test_metrics[i] = test.metrics[i];
        res->val_metrics[i] = run->st.last_val_metrics[i];
    }
    res->epochs = (int)run->st.epoch;
    res->steps = (long)run->st.global_step;
    res->train_samples_per_sec = run->train_seconds > 0 ? run->train_samples / run->train_seconds : NAN;
    res->train_loss = run->st.last_train_loss;
    res->val_loss = run->st.last_val_loss;
    res->val_acc = run->st.last_val_acc;
    res->best_val_acc = run->st.best_val_acc >= 0 ? run->st.best_val_acc : NAN;
    snprintf(res->best_checkpoint, sizeof(res->best_checkpoint), "%s", exists ? best : "");
    snprintf(res->last_checkpoint, sizeof(res->last_checkpoint), "%s/last.safetensors", cfg->default_root_dir);
    snprintf(res->summary_path, sizeof(res->summary_path), "%s/summary.json", cfg->default_root_dir);
    rc = run->is_zero ? write_summary(cfg, run->strategy, res, run, err) : 0;
    return zero_only_status(run, rc, err);
}

static int run_eval(struct rank_state *rs, const ct_trainer_config *cfg, enum mode mode, ct_trainer_result *res,
                    ct_error *err)
{
    ct_run *run = &rs->run;
    enum ct_split split = mode == MODE_TEST ? CT_SPLIT_TEST : CT_SPLIT_VAL;
    char path[CT_TRAINER_PATH_MAX + 32];
    ct_eval_result r;
    int rc;

    run->data = rs->data;
    resolve_ckpt(cfg, cfg->ckpt_path[0] ? cfg->ckpt_path : "best", path, sizeof(path));
    if ((rc = ct_run_load_checkpoint(run, path, 1, err))) {
        if (rc == CT_ENOENT)
            ct_error_hint(err, "run 'ctrain fit --default-root-dir %s' first, or pass --ckpt-path FILE",
                          cfg->default_root_dir);
        return rc;
    }
    if (ct_datamodule_size(rs->data, split) == 0)
        return ct_error_set(err, CT_EINVAL, "trainer-no-val", "validate: --val-fraction 0 leaves no validation set");
    if ((rc = ct_eval_loop_run(run, split, &r, err)))
        return rc;
    for (int i = 0; i < res->n_metrics; i++)
        (mode == MODE_TEST ? res->test_metrics : res->val_metrics)[i] = r.metrics[i];
    if (mode == MODE_TEST) {
        res->test_loss = r.loss;
        res->test_acc = r.acc;
    } else {
        res->val_loss = r.loss;
        res->val_acc = r.acc;
    }
    res->eval_samples = (long)ct_datamodule_size(rs->data, split);
    snprintf(res->best_checkpoint, sizeof(res->best_checkpoint), "%s", path);
    return 0;
}

/* The model's metric names and description into the result (plain data: it crosses a pipe). */
static void result_model(ct_trainer_result *res, const ct_model *host)
{
    res->n_metrics = host->info.n_metrics < 4 ? host->info.n_metrics : 4;
    for (int i = 0; i < res->n_metrics; i++)
        snprintf(res->metric_names[i], sizeof(res->metric_names[i]), "%s", host->info.metric_names[i]);
    snprintf(res->model, sizeof(res->model), "%s %s", host->name, host->describe);
}

static void result_init(ct_trainer_result *res)
{
    memset(res, 0, sizeof(*res));
    res->train_samples_per_sec = res->train_loss = res->val_loss = res->val_acc = NAN;
    res->best_val_acc = res->test_loss = res->test_acc = NAN;
    for (int i = 0; i < 4; i++)
        res->val_metrics[i] = res->test_metrics[i] = NAN;
}

/* The requeue signal (--requeue-signal, checked by ct_trainer_config_check) and SIGTERM/SIGINT only
 * set a flag from here on; the fit loop looks at it at every step boundary. */
static int catch_stop_signals(const ct_trainer_config *cfg, ct_error *err)
{
    int sig = SIGUSR1;

    ct_stop_signal_parse(cfg->requeue_signal, &sig);
    return ct_stop_install(sig, err);
}

static int rank_body(ct_strategy *s, void *arg, void *result, size_t result_size, ct_error *err)
{
    const struct body_arg *ba = arg;
    const ct_trainer_config *cfg = ba->cfg;
    struct rank_state rs;
    ct_trainer_result res;
    int rc;

    memset(&rs, 0, sizeof(rs));
    result_init(&res);
    rs.run.start_time = ct_time_now();
    ct_strategy_set_collective_timeout(s, cfg->collective_timeout);
    /* fit: catch the stop signals before the slow start (rendezvous, data, model): a requeue signal
     * that comes then is kept, and the ranks stop at the first step boundary with a checkpoint,
     * instead of the signal's default action ending the job without a requeue. */
    if (ba->mode == MODE_FIT && (rc = catch_stop_signals(cfg, err)))
        return rc;
    if ((rc = ct_strategy_setup_environment(s, err))) {
        ct_stop_uninstall();
        return rc;
    }
    rs.run.strategy = s;
    rs.run.rank = ct_strategy_global_rank(s);
    rs.run.world = ct_strategy_world_size(s);
    rs.run.is_zero = ct_strategy_is_global_zero(s);
    res.world_size = rs.run.world;
    fill_options(&rs.run, cfg, ba->plan);
    set_blas_threads(s);
    rs.run.opt.blas_threads = openblas_get_num_threads();
    if ((rc = build_model(&rs, cfg, ba, err)) || (rc = place_model(&rs, s, cfg, err)))
        goto out;
    result_model(&res, rs.host);
    /* The strategy sees the arrays the step computes in (device memory when the device has its own). */
    if ((rc = ct_strategy_setup_model(s, rs.model->params, rs.model->grads, rs.model->num_params,
                                      rs.model->param_dtype, err)))
        goto out;
    if (ba->mode == MODE_FIT) {
        rs.run.stop_enabled = 1;
        rc = run_fit(&rs, cfg, &res, err);
    } else {
        rc = run_eval(&rs, cfg, ba->mode, &res, err);
    }
    if (!rc && rs.run.is_zero && result && result_size >= sizeof(res)) {
        res.filled = 1;
        memcpy(result, &res, sizeof(res));
    }
out:
    ct_stop_uninstall();
    ct_logger_close(&rs.run);
    ct_tb_close(&rs.run);
    ct_strategy_teardown(s);
    rank_state_free(&rs);
    return rc;
}

static int launch(const ct_trainer_config *cfg, enum mode mode, ct_connector *conn, ct_trainer_result *res,
                  ct_error *err)
{
    struct body_arg ba = { cfg, mode, ct_connector_plan(conn) };
    ct_strategy *s;
    int is_supervisor = 0, sig = SIGUSR1, rc;

    result_init(res);
    if ((rc = ct_trainer_config_check(cfg, err)))
        return rc;
    if (!(s = ct_strategy_from_connector(conn, err)))
        return err && err->code ? err->code : CT_EINTERNAL;
    /* Under ctrain's own launcher the supervisor must pass the requeue signal on to the ranks. */
    ct_stop_signal_parse(cfg->requeue_signal, &sig);
    ct_strategy_set_forward_signal(s, sig);
    return ct_strategy_launch(s, rank_body, &ba, res, sizeof(*res), &is_supervisor, err);
}

int ct_trainer_fit(const ct_trainer_config *cfg, ct_connector *conn, ct_trainer_result *res, ct_error *err)
{
    return launch(cfg, MODE_FIT, conn, res, err);
}

int ct_trainer_validate(const ct_trainer_config *cfg, ct_connector *conn, ct_trainer_result *res, ct_error *err)
{
    return launch(cfg, MODE_VALIDATE, conn, res, err);
}

int ct_trainer_test(const ct_trainer_config *cfg, ct_connector *conn, ct_trainer_result *res, ct_error *err)
{
    return launch(cfg, MODE_TEST, conn, res, err);
}
