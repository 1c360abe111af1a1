/* SPDX-License-Identifier: BSD-3-Clause */
/* The run one rank owns (a ct_run): its options from the config, its data module, model and
 * optimizer built for the job, the model placed on the rank's device, and freeing all of it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/nn.h"
#include "engine/checkpoint/hf_io.h"
#include "engine/nn/gemm.h"
#include "engine/trainer/flags.h"
#include "engine/trainer/trainer_internal.h"

#define EVAL_BATCH 1000

/* --progress: a live bar when stdout is a terminal (auto), else plain lines; off: neither. */
static int create_loggers(ct_run *run, enum ct_trainer_progress progress, ct_error *err)
{
    int bar = progress == CT_TRAINER_PROGRESS_BAR ||
              (progress != CT_TRAINER_PROGRESS_PLAIN && progress != CT_TRAINER_PROGRESS_OFF && isatty(STDOUT_FILENO));

    return ct_loggers_create(run, bar, !bar && progress != CT_TRAINER_PROGRESS_OFF, err);
}

void ct_run_options(ct_run *run, const ct_trainer_job *job)
{
    const ct_trainer_config *cfg = job->cfg;
    ct_loop_options *o = &run->opt;

    o->max_epochs = cfg->max_epochs;
    o->max_steps = cfg->max_steps;
    o->batch_size = cfg->batch_size;
    o->lr = cfg->lr;
    /* The names were checked against the flags' table (ct_trainer_config_check); its choices are
     * in the enums' order. */
    o->lr_schedule = ct_trainer_choice(ct_trainer_schedule_names, cfg->lr_schedule) == CT_LR_CONSTANT ? CT_LR_CONSTANT
                                                                                                    : CT_LR_COSINE;
    o->log_every_n_steps = cfg->log_every_n_steps;
    o->checkpoint_every_n_steps = cfg->checkpoint_every_n_steps;
    o->on_straggler = (enum ct_on_straggler)ct_trainer_choice(ct_trainer_straggler_names, cfg->on_straggler);
    o->straggler_every = cfg->straggler_every;
    o->straggler_factor = cfg->straggler_factor;
    o->straggler_windows = cfg->straggler_windows;
    o->seed = cfg->seed;
    o->accumulate = cfg->accumulate_grad_batches;
    o->clip = cfg->gradient_clip_val == 0 ? CT_CLIP_NONE
              : CT_CLIP_NORM + (ct_trainer_choice(ct_trainer_clip_names, cfg->gradient_clip_algorithm) == 1);
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
    /* The cluster environment the connector chose answers (envs/ read it into the plan). */
    snprintf(o->job_id, sizeof(o->job_id), "%s", job->plan->env.slurm_job_id);
    o->supervised = job->plan->env.ctrain_supervised;
    ct_summary_flags_json(job, o->flags_json, sizeof(o->flags_json));
    run->st.best_val_acc = -1;
    run->st.best_val_loss = NAN;
    run->st.best_score = NAN;
    for (int i = 0; i < CT_MODEL_MAX_METRICS; i++)
        run->st.last_val_metrics[i] = NAN;
    run->st.last_val_acc = run->st.last_val_loss = run->st.last_train_loss = NAN;
    /* The host's compute threads: the accelerator shares this node's cores among its ranks. */
    o->blas_threads = ct_strategy_host_threads_setup(run->strategy);
    o->gemm_threads = ct_gemm_get_threads();
}

static int make_optimizer(ct_run *run, const ct_trainer_config *cfg, ct_error *err)
{
    ct_optim_config oc;
    enum ct_optim_kind kind;

    ct_optim_parse_kind(cfg->optimizer, &kind);
    ct_optim_config_default(&oc, kind);
    oc.lr = cfg->lr;
    if (cfg->weight_decay >= 0)
        oc.weight_decay = cfg->weight_decay;
    if (kind == CT_OPTIM_SGD)
        oc.momentum = cfg->momentum;
    oc.dtype = run->model->param_dtype; /* state and update in the parameters' type */
    return ct_optim_create(&oc, run->model->num_params, &run->optim, err);
}

/* What a checkpoint records so that a resume cannot mix two runs: the model's configuration as
 * the text of the plan's typed value. */
static int record_identity(ct_run *run, const ct_trainer_job *job, ct_error *err)
{
    const ct_trainer_config *cfg = job->cfg;

    snprintf(run->opt.datamodule, sizeof(run->opt.datamodule), "%s", job->plan->datamodule->name);
    ct_config_print(&job->plan->model_config, run->opt.model_config, sizeof(run->opt.model_config));
    run->opt.model_schema = job->plan->model->config;
    run->opt.val_fraction = cfg->val_fraction;
    if (job->mode != CT_TRAINER_FIT)
        return 0;
    return ct_datamodule_identity(job->plan->datamodule, cfg->data_dir, run->opt.data_identity,
                                  sizeof(run->opt.data_identity), err);
}

/* The data module learns the model's input (token windows take the model's length). */
int ct_run_build(ct_run *run, const ct_trainer_job *job, ct_error *err)
{
    const ct_trainer_config *cfg = job->cfg;
    const ct_plan *plan = job->plan;
    unsigned splits = job->mode == CT_TRAINER_FIT ? CT_SPLITS_FIT | CT_SPLITS_TEST
                    : job->mode == CT_TRAINER_TEST ? CT_SPLITS_TEST : CT_SPLITS_FIT;
    /* A model may evaluate in smaller batches than the default (long sequences). */
    int eval_batch = ct_model_eval_batch(plan->model, EVAL_BATCH);
    int max_batch = cfg->batch_size > eval_batch ? cfg->batch_size : eval_batch;
    const struct ct_precision_ops *prec = ct_strategy_precision(run->strategy);
    int rc;

    if ((rc = ct_datamodule_open(plan->datamodule, cfg->data_dir, cfg->val_fraction, splits, &run->data, err)) ||
        (rc = record_identity(run, job, err)))
        return rc;
    if ((rc = ct_model_create_config(plan->model, &plan->model_config, ct_datamodule_info(run->data), max_batch,
                                     &run->model, err))) {
        /* With --init-from the model's shape is the file's: say which file it came from. */
        if (job->mode == CT_TRAINER_FIT && cfg->init_from[0])
            ct_error_prefix(err, "--init-from %s: ", cfg->init_from);
        return rc;
    }
    if ((rc = ct_datamodule_setup(run->data, &run->model->x, &run->model->y, err)))
        return rc;
    /* A "-true" precision stores the model in its type (64-true: fp64) before anything is drawn. */
    if (prec && (rc = ct_model_set_param_dtype(run->model, prec->param_dtype, err)))
        return rc;
    /* --activation-checkpointing: the activations laid out for recomputation, before any step (the
     * connector refused a model whose registry entry cannot). */
    if (plan->activation_checkpointing && (rc = ct_model_set_activation_checkpointing(run->model, 1, err)))
        return rc;
    /* Sizes are known once the data has the model's input (token windows of its length). */
    if (job->mode == CT_TRAINER_FIT && ct_datamodule_size(run->data, CT_SPLIT_TRAIN) < (size_t)run->world)
        return ct_error_set(err, CT_EINVAL, "trainer-val-fraction",
                            "--val-fraction %g leaves %zu training samples for %d ranks", cfg->val_fraction,
                            ct_datamodule_size(run->data, CT_SPLIT_TRAIN), run->world);
    run->eval_batch = eval_batch;
    if ((rc = make_optimizer(run, cfg, err)))
        return rc;
    /* Initialise from the seed; rank 0's values win anyway (setup_model broadcasts them). */
    ct_rng_seed(&run->rng, cfg->seed);
    ct_model_init(run->model, &run->rng);
    /* Pretrained weights over the initialisation (every rank reads them; rank 0's win anyway). */
    if (job->mode == CT_TRAINER_FIT && cfg->init_from[0])
        return ct_hf_load(run->model, cfg->init_from, err);
    return 0;
}

int ct_run_place(ct_run *run, const ct_trainer_config *cfg, ct_error *err)
{
    int max_batch = cfg->batch_size > run->eval_batch ? cfg->batch_size : run->eval_batch;
    ct_model *host = run->model, *device;
    int rc;

    /* Every rank runs rank 0's run (its flags, data and model), or none goes on: checked before
     * rank 0's weights are broadcast. */
    if (run->world > 1 && (rc = ct_run_check_fingerprint(run, err)))
        return rc;
    if ((rc = ct_strategy_model_to_device(run->strategy, host, run->optim, max_batch, &device, err)))
        return rc;
    run->model = device;
    if ((rc = ct_model_batch_buffers(run->model, &run->batch, err)))
        return rc;
    /* The strategy sees the arrays the step computes in (device memory when the device has its own). */
    return ct_strategy_setup_model(run->strategy, device->params, device->grads, device->num_params,
                                   device->param_dtype, err);
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
    o->monitor_max = cfg->mode[0] ? ct_trainer_choice(ct_trainer_mode_names, cfg->mode) == 1 : o->monitor == CT_MON_VAL_ACC;
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

int ct_run_prepare_fit(ct_run *run, const ct_trainer_config *cfg, ct_error *err)
{
    const ct_data_info *data = ct_datamodule_info(run->data);
    int rc;

    if ((rc = resolve_monitor(run, cfg, err)) || (rc = check_host_gradients(run, cfg, err)) ||
        (rc = create_loggers(run, cfg->progress, err)) ||
        (rc = ct_fit_callbacks_attach(run, cfg->callbacks, cfg->n_callbacks, err)) ||
        (cfg->async_checkpoint && (rc = ct_strategy_use_async_checkpoint_io(run->strategy, err))))
        return rc;
    /* the window's gradients summed here, unless the strategy sums them itself */
    if (cfg->accumulate_grad_batches > 1 && !ct_strategy_accumulates(run->strategy) &&
        !(run->accum = calloc(run->model->num_params, ct_dtype_size(run->model->param_dtype))))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for the accumulated gradients (%zu elements)",
                            run->model->num_params);
    ct_summary_hparams_json(run, cfg);
    return ct_sampler_init(&run->train_sampler, ct_datamodule_size(run->data, CT_SPLIT_TRAIN), cfg->batch_size,
                           run->rank, run->world,
                           data->train_order == CT_ORDER_SEQUENTIAL ? CT_SAMPLER_SEQUENTIAL : CT_SAMPLER_SHUFFLE,
                           cfg->seed, err);
}

void ct_run_free(ct_run *run)
{
    ct_model *host = run->model ? ct_model_host(run->model) : NULL;

    ct_callbacks_free(run);
    ct_loggers_free(run);
    ct_straggler_free(run);
    ct_run_checkpoint_free(run);
    free(run->accum);
    ct_sampler_free(&run->train_sampler);
    ct_model_free_batch(run->model, &run->batch);
    if (run->model != host)
        ct_model_free(run->model);
    ct_model_free(host);
    ct_optim_free(run->optim);
    ct_datamodule_free(run->data);
}
