/* SPDX-License-Identifier: BSD-3-Clause */
/* What a run reports: the flags JSON a checkpoint keeps, the hyper-parameters TensorBoard shows,
 * rank 0's ct_trainer_result and summary.json (rank 0 writes it at the end of fit). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ctrain/nn.h"
#include "ctrain/util.h"
#include "engine/trainer/flags.h"
#include "engine/trainer/trainer_internal.h"
#include "engine/util/fsutil.h"

/* The flags record ("flags" in a checkpoint's metadata; ctrain generate and export rebuild the model
 * from its model and model_config). Its "hidden" list, in every checkpoint since the first, is the
 * model config's key of that name when the model takes one (the MLP's layers), else empty. */
/* One flag of the table (flags.h) into the record, under its key, as its field's type. */
static void add_flag(cJSON *o, const ct_trainer_flag *f, const ct_trainer_job *job)
{
    const char *at = (const char *)job->cfg + f->offset;
    int hidden[CT_CONFIG_MAX_LIST], n;
    cJSON *h;

    switch (f->field) {
    case CT_TF_HIDDEN:
        h = cJSON_AddArrayToObject(o, f->json);
        n = ct_config_int_list(&job->plan->model_config, "hidden", hidden, CT_CONFIG_MAX_LIST);
        for (int i = 0; i < n; i++)
            cJSON_AddItemToArray(h, cJSON_CreateNumber(hidden[i]));
        return;
    case CT_TF_DETERMINISTIC: cJSON_AddBoolToObject(o, f->json, job->plan->deterministic); return;
    case CT_TF_ACTIVATION_CHECKPOINTING: cJSON_AddBoolToObject(o, f->json, job->plan->activation_checkpointing); return;
    case CT_TF_INT:  cJSON_AddNumberToObject(o, f->json, *(const int *)(const void *)at); return;
    case CT_TF_LONG: cJSON_AddNumberToObject(o, f->json, (double)*(const long *)(const void *)at); return;
    case CT_TF_U64:  cJSON_AddNumberToObject(o, f->json, (double)*(const uint64_t *)(const void *)at); return;
    case CT_TF_TEXT:
    case CT_TF_CHOICE: cJSON_AddStringToObject(o, f->json, at); return;
    default:         cJSON_AddNumberToObject(o, f->json, *(const double *)(const void *)at); return;
    }
}

void ct_summary_flags_json(const ct_trainer_job *job, char *buf, size_t size)
{
    const ct_plan *plan = job->plan;
    cJSON *o = cJSON_CreateObject();
    char *s, config[CT_CONFIG_TEXT_MAX];

    /* The Trainer's flags the record keeps, from the flags' table, in its order, but "hidden" first
     * (where every record since the first has it); then the plan's. */
    for (int hidden_pass = 1; hidden_pass >= 0; hidden_pass--)
        for (const ct_trainer_flag *f = ct_trainer_flags; f->key.key; f++)
            if (f->json && (f->field == CT_TF_HIDDEN) == hidden_pass)
                add_flag(o, f, job);
    cJSON_AddStringToObject(o, "model", plan->model->name);
    cJSON_AddStringToObject(o, "model_config", ct_config_print(&plan->model_config, config, sizeof(config)));
    cJSON_AddStringToObject(o, "datamodule", plan->datamodule->name);
    s = cJSON_PrintUnformatted(o);
    snprintf(buf, size, "%s", s ? s : "{}");
    free(s);
    cJSON_Delete(o);
}

/* The hyper-parameters TensorBoard's hparams plugin shows: the run's flags, then where it ran. */
void ct_summary_hparams_json(ct_run *run, const ct_trainer_config *cfg)
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

/* The memory rank 0 measured (memory_fill's rows), one object for every per-rank memory figure;
 * activation_bytes_peak is null when the model measures none. */
static void add_memory_summary(cJSON *o, const ct_trainer_result *res)
{
    cJSON *mem = cJSON_AddObjectToObject(o, "memory");
    int activations = 0;

    for (int i = 0; i < res->n_mem; i++) {
        cJSON_AddNumberToObject(mem, res->mem_names[i], res->mem_bytes[i]);
        activations |= !strcmp(res->mem_names[i], "activation_bytes_peak");
    }
    if (!activations)
        cJSON_AddNullToObject(mem, "activation_bytes_peak");
}

int ct_summary_write(const ct_trainer_job *job, const ct_trainer_result *res, const ct_run *run, ct_error *err)
{
    const ct_trainer_config *cfg = job->cfg;
    ct_strategy *s = run->strategy;
    char path[CT_TRAINER_PATH_MAX + 32], key[48];
    const ct_model *host = ct_model_host(run->model);
    const ct_ckpt_timing ckpt = ct_run_checkpoint_timing(run);
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
    /* What a --deterministic run is reproducible under (a resume checks them: engine/checkpoint/meta.c). */
    cJSON_AddBoolToObject(o, "deterministic", job->plan->deterministic);
    cJSON_AddBoolToObject(o, "activation_checkpointing", job->plan->activation_checkpointing);
    cJSON_AddNumberToObject(o, "blas_threads", run->opt.blas_threads);
    cJSON_AddNumberToObject(o, "gemm_threads", run->opt.gemm_threads);
    cJSON_AddStringToObject(o, "strategy", ct_strategy_name(s) ? ct_strategy_name(s) : "");
    if (ct_strategy_choice(s)[0])
        cJSON_AddStringToObject(o, "strategy_choice", ct_strategy_choice(s));
    cJSON_AddStringToObject(o, "accelerator", ct_strategy_accelerator_name(s) ? ct_strategy_accelerator_name(s) : "");
    if (ct_strategy_precision(s))
        cJSON_AddStringToObject(o, "precision", ct_strategy_precision(s)->name);
    add_device_summary(o, s, run);
    add_memory_summary(o, res);
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
    /* Rank 0's checkpoint saves: how long they held training up, and how long their files took to
     * write (in the background with --async-checkpoint; scripts/bench/async-checkpoint compares). */
    cJSON_AddNumberToObject(o, "checkpoint_saves", (double)ckpt.saves);
    cJSON_AddNumberToObject(o, "checkpoint_blocking_seconds", ckpt.blocking_s);
    cJSON_AddNumberToObject(o, "checkpoint_end_wait_seconds", ckpt.end_wait_s);
    cJSON_AddNumberToObject(o, "checkpoint_write_seconds", ct_strategy_checkpoint_write_seconds(s));
    if (run->opt.on_straggler != CT_STRAGGLER_OFF) {
        cJSON *a;

        cJSON_AddNumberToObject(o, "straggler_check_seconds", ct_straggler_seconds(run));
        a = cJSON_AddArrayToObject(o, "stragglers");

        for (int i = 0; i < ct_straggler_count(run); i++) {
            const struct ct_straggler_named *n = ct_straggler_at(run, i);
            cJSON *e = cJSON_CreateObject();

            cJSON_AddStringToObject(e, "node", n->node);
            cJSON_AddNumberToObject(e, "rank", n->rank);
            cJSON_AddNumberToObject(e, "step", (double)n->step);
            cJSON_AddNumberToObject(e, "busy_ms_per_step", n->busy_ms);
            cJSON_AddNumberToObject(e, "median_ms_per_step", n->median_ms);
            cJSON_AddItemToArray(a, e);
        }
    }
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

/* The model's metric names and description into the result (plain data: it crosses a pipe). */
void ct_result_model(ct_trainer_result *res, const ct_model *host)
{
    res->n_metrics = host->info.n_metrics < 4 ? host->info.n_metrics : 4;
    for (int i = 0; i < res->n_metrics; i++)
        snprintf(res->metric_names[i], sizeof(res->metric_names[i]), "%s", host->info.metric_names[i]);
    snprintf(res->model, sizeof(res->model), "%s %s", host->name, host->describe);
}

void ct_result_init(ct_trainer_result *res)
{
    memset(res, 0, sizeof(*res));
    res->train_samples_per_sec = res->train_loss = res->val_loss = res->val_acc = NAN;
    res->best_val_acc = res->test_loss = res->test_acc = NAN;
    for (int i = 0; i < 4; i++)
        res->val_metrics[i] = res->test_metrics[i] = NAN;
}

/* The measured memory peaks of this rank, one row each: summary.json's "memory" object and fit's
 * memory line (the strategy samples parameters, gradients and optimizer state:
 * ct_strategy_memory_sample; the model its activations: ct_model_activation_bytes). */
static const struct memory_row {
    const char *key;
    int kind;
} memory_rows[] = {
    { "param_bytes_peak", CT_MEM_PARAM },
    { "grad_bytes_peak", CT_MEM_GRAD },
    { "optim_bytes_peak", CT_MEM_OPTIM },
};

static void memory_fill(ct_trainer_result *res, const ct_run *run)
{
    size_t peaks[CT_MEM_KINDS], activations;
    int n = (int)(sizeof(memory_rows) / sizeof(memory_rows[0]));

    ct_strategy_memory_peaks(run->strategy, peaks);
    res->n_mem = 0;
    for (int i = 0; i < n && i < (int)(sizeof(res->mem_bytes) / sizeof(res->mem_bytes[0])); i++, res->n_mem++) {
        snprintf(res->mem_names[i], sizeof(res->mem_names[i]), "%s", memory_rows[i].key);
        res->mem_bytes[i] = (double)peaks[memory_rows[i].kind];
    }
    activations = ct_model_activation_bytes(run->model);
    if (activations > 0 && res->n_mem < (int)(sizeof(res->mem_bytes) / sizeof(res->mem_bytes[0]))) {
        snprintf(res->mem_names[res->n_mem], sizeof(res->mem_names[0]), "activation_bytes_peak");
        res->mem_bytes[res->n_mem++] = (double)activations;
    }
}

/* What fit measured, then tested on best (the evaluated file; "" when none was kept). */
void ct_result_fit(ct_trainer_result *res, const ct_run *run, const ct_eval_result *test, const char *best)
{
    const char *root = run->opt.root_dir;

    res->test_loss = test->loss;
    res->test_acc = test->acc;
    for (int i = 0; i < res->n_metrics; i++) {
        res->test_metrics[i] = test->metrics[i];
        res->val_metrics[i] = run->st.last_val_metrics[i];
    }
    res->epochs = (int)run->st.epoch;
    res->steps = (long)run->st.global_step;
    res->train_samples_per_sec = run->train_seconds > 0 ? run->train_samples / run->train_seconds : NAN;
    res->train_loss = run->st.last_train_loss;
    res->val_loss = run->st.last_val_loss;
    res->val_acc = run->st.last_val_acc;
    res->best_val_acc = run->st.best_val_acc >= 0 ? run->st.best_val_acc : NAN;
    snprintf(res->best_checkpoint, sizeof(res->best_checkpoint), "%s", best);
    snprintf(res->last_checkpoint, sizeof(res->last_checkpoint), "%s/last.safetensors", root);
    snprintf(res->summary_path, sizeof(res->summary_path), "%s/summary.json", root);
    memory_fill(res, run);
}

/* What validate/test measured on the checkpoint at path over split's samples. */
void ct_result_eval(ct_trainer_result *res, enum ct_trainer_mode mode, const ct_eval_result *r, long samples,
                    const char *path)
{
    for (int i = 0; i < res->n_metrics; i++)
        (mode == CT_TRAINER_TEST ? res->test_metrics : res->val_metrics)[i] = r->metrics[i];
    if (mode == CT_TRAINER_TEST) {
        res->test_loss = r->loss;
        res->test_acc = r->acc;
    } else {
        res->val_loss = r->loss;
        res->val_acc = r->acc;
    }
    res->eval_samples = samples;
    snprintf(res->evaluated_checkpoint, sizeof(res->evaluated_checkpoint), "%s", path);
}
