/* The fit loop: epochs of training, each followed by validation and checkpoints. */
#include <math.h>
#include <stdio.h>

#include "engine/loops/loops.h"

/* After an epoch (or a stop inside one): validate, checkpoint last and, when better, best. */
static int end_of_training_stretch(ct_run *run, size_t steps_per_epoch, ct_error *err)
{
    ct_progress_state *st = &run->st;
    char path[1100];
    double val_loss = NAN, val_acc = NAN;
    int64_t trained_epoch = st->epoch;
    int improved, rc;

    if (run->val->n > 0 && (rc = ct_eval_loop_run(run, run->val, &val_loss, &val_acc, err)))
        return rc;
    /* A finished epoch is stored as "the next epoch, step 0": resuming starts a fresh epoch. */
    if ((size_t)st->step_in_epoch >= steps_per_epoch) {
        st->epoch++;
        st->step_in_epoch = 0;
    }
    st->last_val_loss = val_loss;
    st->last_val_acc = val_acc;
    /* Without a validation set every checkpoint is the best one. */
    improved = run->val->n == 0 || !(val_acc <= st->best_val_acc);
    if (improved && run->val->n > 0)
        st->best_val_acc = val_acc;
    ct_logger_row(run, NAN, val_loss, val_acc, ct_optim_get_config(run->optim)->lr, NAN);
    ct_progress_line(run, "ctrain: epoch %lld step %lld: val_loss %.4f val_acc %.4f%s",
                     (long long)trained_epoch + 1, (long long)st->global_step, val_loss, val_acc,
                     improved && run->val->n > 0 ? " (best)" : "");
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
