/* SPDX-License-Identifier: BSD-3-Clause */
/* Validation, below the epoch loop: the monitored metric measured and whether it improved, after
 * each epoch or every --val-check-interval optimizer steps; then the callbacks' on_validation_end
 * (early stopping, the loggers, the top-k checkpoints: engine/callbacks). */
#include <math.h>
#include <stdio.h>
#include <string.h>

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

int ct_fit_validate(ct_run *run, size_t batches_per_epoch, ct_error *err)
{
    ct_progress_state *st = &run->st;
    const ct_model_info *info = &run->model->info;
    int has_val = ct_datamodule_size(run->data, CT_SPLIT_VAL) > 0 &&
                  !(run->opt.limit_val == 0), improved, rc;
    ct_validation_end ev;
    ct_eval_result val;
    int64_t trained_epoch = st->epoch;
    double score;

    ct_callbacks_phase(run, CT_FIT_PHASE_VALIDATION);
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
    if (has_val && info->has_accuracy && !(val.acc <= st->best_val_acc))
        st->best_val_acc = val.acc;
    if (has_val && (isnan(st->best_val_loss) || val.loss < st->best_val_loss))
        st->best_val_loss = val.loss;
    ev.val = &val;
    ev.has_val = has_val;
    ev.improved = improved;
    ev.score = score;
    ev.trained_epoch = trained_epoch;
    return ct_callbacks_validation_end(run, &ev, err);
}
