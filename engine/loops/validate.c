/* SPDX-License-Identifier: BSD-3-Clause */
/* Validation and its callbacks, below the epoch loop: the monitored metric, top-k checkpoints and
 * early stopping (Lightning's ModelCheckpoint / EarlyStopping), after each epoch or every
 * --val-check-interval optimizer steps. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/loops/loops.h"

/* The monitored metric's value in this validation (NaN: not measured). */
static double monitored(const ct_run *run, const ct_eval_result *val)
{
    switch (run->opt.monitor) {
    case CT_MON_VAL_ACC:    return val->acc;
    case CT_MON_VAL_METRIC: return val->metrics[run->opt.monitor_metric];
    case CT_MON_TRAIN_LOSS: return run->st.last_train_loss;
    default:                return val->loss;
    }
}

static int better(const ct_run *run, double a, double b)
{
    return run->opt.monitor_max ? a > b : a < b;
}

/* --save-top-k K > 1 (or -1): whether this validation's checkpoint enters the K best, and the
 * entry it pushes out (its file is removed once the new one is written). As Lightning's
 * ModelCheckpoint: a place while fewer than K are kept, else strictly better than the worst. */
static int top_k_update(ct_run *run, double score, char *evicted, size_t size)
{
    ct_progress_state *st = &run->st;
    int k = run->opt.save_top_k, worst = 0;
    ct_top_k_entry *e;

    evicted[0] = '\0';
    if (k == 1 || k == 0 || isnan(score))
        return 0;
    if (k < 0) /* every one, none removed: nothing to track */
        return 1;
    for (int i = 1; i < st->n_top_k; i++)
        if (better(run, st->top_k[worst].score, st->top_k[i].score))
            worst = i;
    if (st->n_top_k >= k && !better(run, score, st->top_k[worst].score))
        return 0;
    if (st->n_top_k >= k) {
        snprintf(evicted, size, "%s", st->top_k[worst].name);
        e = &st->top_k[worst];
    } else {
        e = &st->top_k[st->n_top_k++];
    }
    e->score = score;
    snprintf(e->name, sizeof(e->name), "epoch=%lld-step=%lld.safetensors",
             (long long)(st->step_in_epoch ? st->epoch : st->epoch - 1), (long long)st->global_step);
    return 1;
}

static void report(ct_run *run, int64_t trained_epoch, const ct_eval_result *val, int has_val, int improved)
{
    const ct_model_info *info = &run->model->info;
    ct_progress_state *st = &run->st;
    char extra[200], acc[32] = "";

    extra[0] = '\0';
    for (int i = 0, used = 0; i < info->n_metrics && used < (int)sizeof(extra); i++)
        used += snprintf(extra + used, sizeof(extra) - (size_t)used, " val_%s %.4f", info->metric_names[i],
                         val->metrics[i]);
    if (info->has_accuracy)
        snprintf(acc, sizeof(acc), " val_acc %.4f", val->acc);
    ct_progress_line(run, "ctrain: epoch %lld step %lld: val_loss %.4f%s%s%s", (long long)trained_epoch + 1,
                     (long long)st->global_step, val->loss, acc, extra, improved && has_val ? " (best)" : "");
    if (st->early_stopped)
        ct_progress_line(run, "ctrain: early stopping: %s did not improve in %lld validations (--early-stopping-"
                         "patience %d); best %.6g", run->opt.monitor_name, (long long)st->wait_count,
                         run->opt.patience, st->best_score);
}

int ct_fit_validate(ct_run *run, size_t batches_per_epoch, ct_error *err)
{
    ct_progress_state *st = &run->st;
    const ct_model_info *info = &run->model->info;
    int has_val = ct_datamodule_size(run->data, CT_SPLIT_VAL) > 0 &&
                  !(run->opt.limit_val == 0), in_top_k, improved, rc;
    char path[1400], evicted[96];
    ct_eval_result val;
    int64_t trained_epoch = st->epoch;
    double score;

    ct_hang_enter(CT_PHASE_VALIDATION);
    val.loss = val.acc = NAN;
    for (int i = 0; i < CT_MODEL_MAX_METRICS; i++)
        val.metrics[i] = NAN;
    if (has_val && (rc = ct_eval_loop_run_limited(run, CT_SPLIT_VAL, &val, err)))
        return rc;
    /* Stopped during validation: nothing measured, nothing recorded; the fit loop saves where the
     * counters stand (an epoch's end validates again on resuming). */
    if (run->stop.agreed)
        return 0;
    /* A finished epoch is stored as "the next epoch, step 0": resuming starts a fresh epoch. */
    if ((size_t)st->step_in_epoch >= batches_per_epoch) {
        st->epoch++;
        st->step_in_epoch = 0;
    }
    st->last_val_loss = val.loss;
    st->last_val_acc = val.acc;
    for (int i = 0; i < CT_MODEL_MAX_METRICS; i++)
        st->last_val_metrics[i] = val.metrics[i];
    /* Without a validation set (and a validation metric monitored) every checkpoint is the best
     * one and nothing stops early. */
    score = monitored(run, &val);
    if (!has_val && run->opt.monitor != CT_MON_TRAIN_LOSS)
        improved = 1;
    else
        improved = !isnan(score) && (isnan(st->best_score) || better(run, score, st->best_score));
    if (improved && !isnan(score))
        st->best_score = score;
    /* Early stopping as Lightning's EarlyStopping: wait_count validations without improvement;
     * stop when it reaches the patience. A metric not measured yet (train_loss before the first
     * logged row) counts neither way. */
    if (improved)
        st->wait_count = 0;
    else if (!isnan(score) && run->opt.patience > 0 && ++st->wait_count >= run->opt.patience)
        st->early_stopped = 1;
    if (has_val && info->has_accuracy && !(val.acc <= st->best_val_acc))
        st->best_val_acc = val.acc;
    if (has_val && (isnan(st->best_val_loss) || val.loss < st->best_val_loss))
        st->best_val_loss = val.loss;
    in_top_k = top_k_update(run, score, evicted, sizeof(evicted));
    ct_logger_row(run, NAN, has_val ? &val : NULL, ct_optim_get_config(run->optim)->lr, NAN, NAN);
    report(run, trained_epoch, &val, has_val, improved);
    snprintf(path, sizeof(path), "%s/last.safetensors", run->opt.root_dir);
    ct_hang_enter(CT_PHASE_CHECKPOINT);   /* for the saves below */
    if ((rc = ct_run_save_checkpoint(run, path, err)))
        return rc;
    if (improved && run->opt.save_top_k != 0) {
        snprintf(path, sizeof(path), "%s/best.safetensors", run->opt.root_dir);
        if ((rc = ct_run_save_checkpoint(run, path, err)))
            return rc;
    }
    if (in_top_k) {
        snprintf(path, sizeof(path), "%s/epoch=%lld-step=%lld.safetensors", run->opt.root_dir,
                 (long long)trained_epoch, (long long)st->global_step);
        if ((rc = ct_run_save_checkpoint(run, path, err)))
            return rc;
        snprintf(path, sizeof(path), "%s/%s", run->opt.root_dir, evicted);
        if (evicted[0] && run->is_zero)
            unlink(path);
    }
    return 0;
}
