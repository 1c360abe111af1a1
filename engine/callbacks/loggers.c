/* SPDX-License-Identifier: BSD-3-Clause */
/* The loggers as one callback: a metrics.csv row (and the same scalars in TensorBoard's file) at
 * each log step and validation, the progress display after each step, a validation's line and the
 * line that says why the fit stops early. What they write is engine/loggers'. */
#include <math.h>
#include <stdio.h>

#include "ctrain/util.h"
#include "engine/callbacks/callbacks.h"
#include "engine/loggers/loggers.h"

static int on_train_batch_end(void *self, ct_run *run, const ct_batch_end *b, ct_error *err)
{
    (void)self;
    (void)err;
    if (b->logging)
        ct_logger_row(run, b->loss, NULL, b->lr, b->samples_per_sec, b->grad_norm);
    ct_progress_step(run, b->steps_per_epoch, b->total_steps, b->loss, b->samples_per_sec);
    return 0;
}

/* A validation's line, and early stopping's when it ended the fit (the callback before this one). */
static void report(ct_run *run, const ct_validation_end *v)
{
    const ct_model_info *info = &run->model->info;
    ct_progress_state *st = &run->st;
    char extra[200], acc[32] = "";

    extra[0] = '\0';
    for (int i = 0, used = 0; i < info->n_metrics && used < (int)sizeof(extra); i++)
        used += snprintf(extra + used, sizeof(extra) - (size_t)used, " val_%s %.4f", info->metric_names[i],
                         v->val->metrics[i]);
    if (info->has_accuracy)
        snprintf(acc, sizeof(acc), " val_acc %.4f", v->val->acc);
    ct_progress_line(run, "ctrain: epoch %lld step %lld: val_loss %.4f%s%s%s", (long long)v->trained_epoch + 1,
                     (long long)st->global_step, v->val->loss, acc, extra, v->improved && v->has_val ? " (best)" : "");
    if (st->early_stopped)
        ct_progress_line(run, "ctrain: early stopping: %s did not improve in %lld validations (--early-stopping-"
                         "patience %d); best %.6g", run->opt.monitor_name, (long long)st->wait_count,
                         run->opt.patience, st->best_score);
}

static int on_validation_end(void *self, ct_run *run, const ct_validation_end *v, ct_error *err)
{
    (void)self;
    (void)err;
    ct_logger_row(run, NAN, v->has_val ? v->val : NULL, ct_optim_get_config(run->optim)->lr, NAN, NAN);
    report(run, v);
    return 0;
}

/* Why the fit stops here; the checkpoint callback saves last.safetensors next. */
static int on_signal(void *self, ct_run *run, const ct_stop_event *s, ct_error *err)
{
    char path[1100], sig[32];

    (void)self;
    (void)err;
    snprintf(path, sizeof(path), "%s/last.safetensors", run->opt.root_dir);
    ct_progress_line(run, "ctrain: %s: stopping at epoch %lld step %lld; saving %s",
                     s->by ? s->by : ct_signal_name(s->signal, sig, sizeof(sig)), (long long)run->st.epoch + 1,
                     (long long)run->st.global_step, path);
    return 0;
}

const ct_callback_ops ct_loggers_callback = {
    .name = "loggers",
    .on_train_batch_end = on_train_batch_end,
    .on_validation_end = on_validation_end,
    .on_signal = on_signal,
};
