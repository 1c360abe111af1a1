/* The fit loop: epochs of training, each followed by validation and checkpoints. */
#include <math.h>
#include <stdio.h>

#include "engine/loops/loops.h"

/* After an epoch (or a stop inside one): validate, checkpoint last and, when better, best. */
static int end_of_training_stretch(ct_run *run, size_t steps_per_epoch, ct_error *err)
{
    ct_progress_state *st = &run->st;
    const ct_model_info *info = &run->model->info;
    int has_val = ct_datamodule_size(run->data, CT_SPLIT_VAL) > 0;
    char path[1100], extra[160];
    ct_eval_result val;
    int64_t trained_epoch = st->epoch;
    int improved, rc;

    val.loss = val.acc = NAN;
    for (int i = 0; i < CT_MODEL_MAX_METRICS; i++)
        val.metrics[i] = NAN;
    if (has_val && (rc = ct_eval_loop_run(run, CT_SPLIT_VAL, &val, err)))
        return rc;
    /* A finished epoch is stored as "the next epoch, step 0": resuming starts a fresh epoch. */
    if ((size_t)st->step_in_epoch >= steps_per_epoch) {
        st->epoch++;
        st->step_in_epoch = 0;
    }
    st->last_val_loss = val.loss;
    st->last_val_acc = val.acc;
    for (int i = 0; i < CT_MODEL_MAX_METRICS; i++)
        st->last_val_metrics[i] = val.metrics[i];
    /* Without a validation set every checkpoint is the best one. The best: the highest accuracy, or
     * the lowest loss for a model without accuracy (a language model). */
    if (info->has_accuracy)
        improved = !has_val || !(val.acc <= st->best_val_acc);
    else
        improved = !has_val || isnan(st->best_val_loss) || val.loss < st->best_val_loss;
    if (improved && has_val && info->has_accuracy)
        st->best_val_acc = val.acc;
    if (improved && has_val && !info->has_accuracy)
        st->best_val_loss = val.loss;
    ct_logger_row(run, NAN, has_val ? &val : NULL, ct_optim_get_config(run->optim)->lr, NAN);
    extra[0] = '\0';
    for (int i = 0, used = 0; i < info->n_metrics && used < (int)sizeof(extra); i++)
        used += snprintf(extra + used, sizeof(extra) - (size_t)used, " val_%s %.4f", info->metric_names[i],
                         val.metrics[i]);
    if (info->has_accuracy)
        ct_progress_line(run, "ctrain: epoch %lld step %lld: val_loss %.4f val_acc %.4f%s%s",
                         (long long)trained_epoch + 1, (long long)st->global_step, val.loss, val.acc, extra,
                         improved && has_val ? " (best)" : "");
    else
        ct_progress_line(run, "ctrain: epoch %lld step %lld: val_loss %.4f%s%s", (long long)trained_epoch + 1,
                         (long long)st->global_step, val.loss, extra, improved && has_val ? " (best)" : "");
    snprintf(path, sizeof(path), "%s/last.safetensors", run->opt.root_dir);
    if ((rc = ct_run_save_checkpoint(run, path, err)))
        return rc;
    if (improved) {
        snprintf(path, sizeof(path), "%s/best.safetensors", run->opt.root_dir);
        if ((rc = ct_run_save_checkpoint(run, path, err)))
            return rc;
    }
    return 0;
}

/* Stopped on a signal: no validation (the time left may be short), last.safetensors where the
 * counters stand, inside the epoch or not; resuming from it continues bit for bit. */
static int save_on_stop(ct_run *run, ct_error *err)
{
    char path[1100], sig[32];

    snprintf(path, sizeof(path), "%s/last.safetensors", run->opt.root_dir);
    ct_progress_line(run, "ctrain: %s: stopping at epoch %lld step %lld; saving %s",
                     ct_stop_signal_name(run->stop.signal, sig, sizeof(sig)), (long long)run->st.epoch + 1,
                     (long long)run->st.global_step, path);
    return ct_run_save_checkpoint(run, path, err);
}

int ct_fit_loop_run(ct_run *run, ct_error *err)
{
    ct_progress_state *st = &run->st;
    int rc;

    while (st->epoch < run->opt.max_epochs &&
           !(run->opt.max_steps >= 0 && st->global_step >= run->opt.max_steps)) {
        size_t steps = ct_sampler_steps(&run->train_sampler);
        int64_t before = st->global_step;

        if ((rc = ct_epoch_loop_run(run, err)))
            return rc;
        if (run->stop.agreed)
            return save_on_stop(run, err);
        /* Nothing trained (an empty shard cannot happen with equal shards; guard anyway). */
        if (st->global_step == before && (size_t)st->step_in_epoch < steps)
            break;
        if ((rc = end_of_training_stretch(run, steps, err)))
            return rc;
    }
    return 0;
}
