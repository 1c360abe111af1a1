/* SPDX-License-Identifier: BSD-3-Clause */
/* The training epoch loop (the training step is loops/step.c, validation loops/validate.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/nn/bf16_inline.h"
#include "engine/loops/loops.h"

int ct_window_size(const ct_loop_options *o, size_t batch, size_t batches)
{
    size_t n = (size_t)o->accumulate - batch % (size_t)o->accumulate;

    return (int)(batch + n > batches ? batches - batch : n);
}

size_t ct_epoch_opt_steps(const ct_loop_options *o, size_t batches)
{
    return (batches + (size_t)o->accumulate - 1) / (size_t)o->accumulate;
}


/* Lightning's EarlyStopping(check_finite=True): a non-finite training loss ends the run before
 * anything is logged, validated or saved from the step, so last.safetensors stays the last good
 * checkpoint. Whether any rank's loss was non-finite rode on the step's gradient exchange (every
 * rank decides alike, with no collective of its own); without that post, this rank's own loss. */
static int loss_nonfinite(ct_run *run, double loss, double bad, int64_t of, ct_error *err)
{
    ct_error_set(err, CT_EFORMAT, "fit-loss-nonfinite", "the training loss is not finite (%s on this rank, %.0f of "
                 "%d ranks) at epoch %lld, step %lld: the run stops, saving nothing after the last good checkpoint",
                 isnan(loss) ? "nan" : isinf(loss) ? (loss > 0 ? "inf" : "-inf") : "finite", bad, run->world,
                 (long long)run->st.epoch + 1, (long long)of + 1);
    ct_error_outcome(err, CT_OUTCOME_NONFINITE);
    return ct_error_hint(err, "lower --lr, add --gradient-clip-val 1.0 or check the data; --ckpt-path last resumes "
                              "from %s/last.safetensors when it exists", run->opt.root_dir);
}

/* The loss of step `of` (the step just trained, or the one before it on a model that keeps its loss
 * on the device: ct_training_step). */
static int loss_finite(ct_run *run, double loss, int64_t of, ct_error *err)
{
    double bad = run->stop_posted ? run->stop_sums[2] : !isfinite(loss);

    return bad < 0.5 ? 0 : loss_nonfinite(run, loss, bad, of, err);
}

/* A drain point of a model that keeps its loss on the device: before a log line, a validation, a
 * checkpoint and whatever ends the epoch loop, the loss of the step still pending is waited for,
 * every rank learns whether any rank's was non-finite (a collective of its own: the ranks reach the
 * same drain points) and it joins the interval's sum. Nothing pending (every cpu model): nothing. */
static int loss_drain(ct_run *run, double *loss_sum, double *loss_n, ct_error *err)
{
    double loss = NAN, bad;
    int64_t of = -1;
    int got, rc;

    if (!run->loss_lag.pending)
        return 0;
    if ((rc = ct_loss_lag_drain(&run->loss_lag, ct_run_loss_read, run->model, &loss, &of, &got,
                                err)) || !got)
        return rc;
    bad = !isfinite(loss);
    if ((rc = ct_strategy_reduce_sum(run->strategy, &bad, 1, err)))
        return rc;
    if (bad >= 0.5)
        return loss_nonfinite(run, loss, bad, of, err);
    *loss_sum += loss;
    *loss_n += 1;
    return 0;
}

long ct_fit_total_steps(const ct_loop_options *o, size_t steps_per_epoch)
{
    long total = (long)steps_per_epoch * o->max_epochs;

    if (o->max_steps >= 0 && o->max_steps < total)
        total = o->max_steps;
    return total;
}

/* A function of the global step alone, so a resumed run continues the same curve. llm.c's
 * schedule: a linear warm-up to lr over warmup_steps ((step + 1) / warmup), then the cosine from
 * lr down to min_lr at the last step (or lr held constant). */
double ct_lr_at(const ct_loop_options *o, int64_t step, long total_steps)
{
    double t;

    if (step < o->warmup_steps)
        return o->lr * (double)(step + 1) / (double)o->warmup_steps;
    if (o->lr_schedule == CT_LR_CONSTANT || total_steps <= o->warmup_steps)
        return o->lr;
    t = (double)(step - o->warmup_steps) / (double)(total_steps - o->warmup_steps);
    return o->min_lr + (o->lr - o->min_lr) * 0.5 * (1.0 + cos(M_PI * t));
}

/* Mean training loss over the ranks since the last log line (a collective: every rank logs at the
 * same global steps, so every rank calls it in the same order). */
static int reduce_loss(ct_run *run, double loss_sum, double n, double *mean, ct_error *err)
{
    double v[2] = { loss_sum, n };
    int rc = ct_strategy_reduce_sum(run->strategy, v, 2, err);

    *mean = v[1] > 0 ? v[0] / v[1] : NAN;
    return rc;
}

/* A step --checkpoint-every-n-steps saves at (inside an epoch; the checkpoint callback decides the
 * same): a drain point of its own. */
static int checkpoint_due(const ct_run *run, size_t batches)
{
    int every = run->opt.checkpoint_every_n_steps;

    return every > 0 && run->st.global_step % every == 0 && (size_t)run->st.step_in_epoch < batches;
}

static int epoch_steps(ct_run *run, ct_error *err)
{
    ct_progress_state *st = &run->st;
    size_t batches;
    long total;
    double loss_sum = 0, loss_n = 0, interval_samples = 0, interval_start = ct_time_now();
    int rc;

    run->stop_posted = 0; /* the first boundary of an epoch asks with a collective of its own */
    ct_sampler_set_epoch(&run->train_sampler, st->epoch);
    batches = ct_sampler_steps(&run->train_sampler);
    total = ct_fit_total_steps(&run->opt, ct_epoch_opt_steps(&run->opt, batches));
    while ((size_t)st->step_in_epoch < batches) {
        int n = ct_window_size(&run->opt, (size_t)st->step_in_epoch, batches), validated = 0;
        double loss, samples, t0;
        int64_t loss_of;
        ct_batch_end b;

        if (run->opt.max_steps >= 0 && st->global_step >= run->opt.max_steps)
            break;
        /* A step boundary: every rank learns whether any got a stop signal, and all stop here
         * (from the flags the last step's gradient exchange carried, see step.c). Never inside an
         * accumulation window: a checkpoint holds no half-summed gradients. */
        if (run->stop_enabled && (rc = ct_run_stop_agreed(run, err)) != 0)
            return rc < 0 ? rc : 0;
        ct_optim_set_lr(run->optim, ct_lr_at(&run->opt, st->global_step, total));
        t0 = ct_time_now();
        if ((rc = ct_training_step(run, (size_t)st->step_in_epoch, n, &loss, &loss_of, &samples, err)) ||
            (loss_of >= 0 && (rc = loss_finite(run, loss, loss_of, err))))
            return rc;
        run->train_seconds += ct_time_now() - t0;
        run->train_samples += samples * run->world;
        run->steps_this_run++;
        interval_samples += samples * run->world;
        if (loss_of >= 0) {
            loss_sum += loss;
            loss_n += 1;
        }
        st->step_in_epoch += n;
        st->global_step++;
        b.step_seconds = ct_time_now() - t0;
        b.loss = loss_n > 0 ? loss_sum / loss_n : st->last_train_loss;
        b.samples_per_sec = run->train_samples / run->train_seconds;
        b.logging = st->global_step % run->opt.log_every_n_steps == 0;
        b.lr = ct_optim_get_config(run->optim)->lr;
        b.grad_norm = run->last_grad_norm;
        b.steps_per_epoch = batches;
        b.total_steps = total;
        /* --val-check-interval: validation (and the monitored checkpoints, early stopping) every N
         * optimizer steps of the fit, epoch boundaries or not. */
        b.validating = run->opt.val_check_interval > 0 && st->global_step % run->opt.val_check_interval == 0;
        if (b.logging) {
            double now = ct_time_now();

            if ((rc = loss_drain(run, &loss_sum, &loss_n, err)) ||
                (rc = reduce_loss(run, loss_sum, loss_n, &b.loss, err)))
                return rc;
            b.samples_per_sec = interval_samples / (now - interval_start);
            st->last_train_loss = b.loss;
            loss_sum = loss_n = interval_samples = 0;
            interval_start = now;
        } else if (!b.validating && checkpoint_due(run, batches) && (rc = loss_drain(run, &loss_sum, &loss_n, err))) {
            return rc;
        }
        /* The watchers (a straggler stop ends the round: every rank after this step, and the fit
         * loop saves last.safetensors), the loggers, the checkpoints. */
        if ((rc = ct_callbacks_train_batch_end(run, &b, err)))
            return rc;
        if (run->straggler_stop)
            return 0;
        if (b.validating) {
            if ((rc = loss_drain(run, &loss_sum, &loss_n, err)) || (rc = ct_fit_validate(run, batches, err)))
                return rc;
            if (st->early_stopped || run->stop.agreed)
                return 0;
            validated = 1;
        }
        /* A validation at the epoch's last step rolled the counters to the next epoch. */
        if (validated && st->step_in_epoch == 0)
            break;
    }
    return 0;
}

int ct_epoch_loop_run(ct_run *run, ct_error *err)
{
    double loss_sum = 0, loss_n = 0;
    int rc = epoch_steps(run, err);

    /* Whatever ended the steps (the epoch's end, max_steps, a stop, the straggler check), the last
     * step's loss, if still on the device, is checked before the fit loop validates or saves. */
    return rc ? rc : loss_drain(run, &loss_sum, &loss_n, err);
}
