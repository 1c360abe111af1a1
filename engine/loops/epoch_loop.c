/* The training epoch loop and the training step. */
#include <math.h>

#include "ctrain/util.h"
#include "engine/loops/loops.h"

/* Backward's "gradient ready" callback: hand each finished tensor to the strategy at once, so a
 * DDP strategy can start its bucket's allreduce while backward computes the earlier layers. */
static int grad_ready(void *ctx, size_t offset, size_t count)
{
    ct_run *run = ctx;

    return ct_strategy_grad_ready(run->strategy, offset, count, &run->step_err);
}

/* Forward's "parameters needed" callback: a sharded strategy waits for that part of its
 * all-gather of the updated parameters, so the rest keeps arriving while this layer computes. */
static int params_needed(void *ctx, size_t offset, size_t count)
{
    ct_run *run = ctx;

    return ct_strategy_params_needed(run->strategy, offset, count, &run->step_err);
}

int ct_run_forward(ct_run *run, ct_model_sums *sums, ct_error *err)
{
    int rc;

    ct_error_clear(&run->step_err);
    rc = ct_model_forward(run->model, &run->batch, params_needed, run, sums, err);
    if (rc && run->step_err.code) /* the strategy failed, not the model */
        *err = run->step_err;
    return rc;
}

int ct_training_step(ct_run *run, const uint32_t *idx, int count, double *loss, ct_error *err)
{
    ct_model_sums sums;
    int rc, skipped;

    if ((rc = ct_datamodule_gather(run->data, CT_SPLIT_TRAIN, idx, count, &run->batch, err)) ||
        (rc = ct_run_forward(run, &sums, err)))
        return rc;
    /* run->step_err is clear: ct_run_forward cleared it and forward succeeded. */
    run->stop_posted = 0;
    if (run->stop_enabled)
        ct_run_stop_post(run);
    /* The gradient of the mean loss over the global batch: every rank's batch has the same number
     * of loss terms (samples or tokens), so this rank's count times the ranks the strategy sums
     * over without averaging (ct_strategy_grad_ranks). */
    if ((rc = ct_model_backward(run->model, sums.count * ct_strategy_grad_ranks(run->strategy), grad_ready, run,
                                err))) {
        if (run->step_err.code) /* the strategy refused a bucket, not the model */
            *err = run->step_err;
        return rc;
    }
    /* grad_sync leaves every rank the mean gradient over the global batch. The strategy owns the
     * update (a sharded one updates its part of the parameters and gathers the rest). */
    if ((rc = ct_strategy_grad_sync(run->strategy, err)) ||
        (rc = ct_strategy_optimizer_step(run->strategy, run->model, run->optim, &skipped, err)))
        return rc;
    *loss = sums.loss / sums.count;
    return 0;
}

long ct_fit_total_steps(const ct_loop_options *o, size_t steps_per_epoch)
{
    long total = (long)steps_per_epoch * o->max_epochs;

    if (o->max_steps >= 0 && o->max_steps < total)
        total = o->max_steps;
    return total;
}

/* A function of the global step alone, so a resumed run continues the same curve. */
double ct_lr_at(const ct_loop_options *o, int64_t step, long total_steps)
{
    if (o->lr_schedule == CT_LR_CONSTANT || total_steps <= 0)
        return o->lr;
    return o->lr * 0.5 * (1.0 + cos(M_PI * (double)step / (double)total_steps));
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

int ct_epoch_loop_run(ct_run *run, ct_error *err)
{
    ct_progress_state *st = &run->st;
    size_t steps;
    long total;
    double loss_sum = 0, loss_n = 0, interval_samples = 0, interval_start = ct_time_now();
    int rc;

    run->stop_posted = 0; /* the first boundary of an epoch asks with a collective of its own */
    ct_sampler_set_epoch(&run->train_sampler, st->epoch);
    steps = ct_sampler_steps(&run->train_sampler);
    total = ct_fit_total_steps(&run->opt, steps);
    while ((size_t)st->step_in_epoch < steps) {
        const uint32_t *idx;
        int count;
        double loss, t0, sps, shown;

        if (run->opt.max_steps >= 0 && st->global_step >= run->opt.max_steps)
            break;
        /* A step boundary: every rank learns whether any got a stop signal, and all stop here
         * (from the flags the last step's gradient exchange carried, see stop.c). */
        if (run->stop_enabled && (rc = ct_run_stop_agreed(run, err)) != 0)
            return rc < 0 ? rc : 0;
        count = ct_sampler_batch(&run->train_sampler, (size_t)st->step_in_epoch, &idx);
        ct_optim_set_lr(run->optim, ct_lr_at(&run->opt, st->global_step, total));
        t0 = ct_time_now();
        if ((rc = ct_training_step(run, idx, count, &loss, err)))
            return rc;
        run->train_seconds += ct_time_now() - t0;
        run->train_samples += (double)count * run->world;
        run->steps_this_run++;
        interval_samples += (double)count * run->world;
        loss_sum += loss;
        loss_n += 1;
        st->step_in_epoch++;
        st->global_step++;
        sps = run->train_samples / run->train_seconds;
        shown = loss_sum / loss_n;
        if (st->global_step % run->opt.log_every_n_steps == 0) {
            double now = ct_time_now(), mean;

            if ((rc = reduce_loss(run, loss_sum, loss_n, &mean, err)))
                return rc;
            sps = interval_samples / (now - interval_start);
            st->last_train_loss = shown = mean;
            ct_logger_row(run, mean, NULL, ct_optim_get_config(run->optim)->lr, sps);
            loss_sum = loss_n = interval_samples = 0;
            interval_start = now;
        }
        ct_progress_step(run, steps, total, shown, sps);
        if (run->opt.checkpoint_every_n_steps > 0 && st->global_step % run->opt.checkpoint_every_n_steps == 0 &&
            (size_t)st->step_in_epoch < steps) {
            char path[1100];

            snprintf(path, sizeof(path), "%s/last.safetensors", run->opt.root_dir);
            if ((rc = ct_run_save_checkpoint(run, path, err)))
                return rc;
        }
    }
    return 0;
}
