/* SPDX-License-Identifier: BSD-3-Clause */
/* The training epoch loop and the training step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/nn/bf16_inline.h"
#include "engine/loops/loops.h"

/* Backward's "gradient ready" callback: hand each finished tensor to the strategy at once, so a
 * DDP strategy can start its bucket's allreduce while backward computes the earlier layers.
 * Inside an accumulation window (Lightning's no_sync) the strategy hears nothing until the last
 * micro-batch: the earlier ones' gradients are summed into run->accum, and the last one adds that
 * sum to each range just before announcing it, so the exchange still overlaps its backward. */
/* a += g (add_to_g 0) or g += a (add_to_g 1) over count elements of type T. */
#define ACCUM(T, a, g, count, add_to_g)                                                                               \
    do {                                                                                                               \
        T *a_ = (T *)(a), *g_ = (T *)(g);                                                                              \
        for (size_t i_ = 0; i_ < (count); i_++)                                                                        \
            *((add_to_g) ? &g_[i_] : &a_[i_]) += (add_to_g) ? a_[i_] : g_[i_];                                         \
    } while (0)

/* bf16-true: the sum in fp32, stored rounded (PyTorch's .grad += of a bf16 tensor). */
static void accum_bf16(uint16_t *a, uint16_t *g, size_t count, int add_to_g)
{
    uint16_t *out = add_to_g ? g : a;

    for (size_t i = 0; i < count; i++)
        out[i] = ct_bf16_store(ct_bf16_load(a[i]) + ct_bf16_load(g[i]));
}

static int grad_ready(void *ctx, size_t offset, size_t count)
{
    ct_run *run = ctx;

    if (run->window > 1) {
        enum ct_dtype dt = run->model->param_dtype;
        size_t es = ct_dtype_size(dt);
        char *g = (char *)run->model->grads + offset * es, *a = (char *)run->accum + offset * es;
        int add_to_g = run->micro == run->window - 1;

        if (run->micro == 0)
            memcpy(a, g, count * es);
        else if (dt == CT_DTYPE_F64)
            ACCUM(double, a, g, count, add_to_g);
        else if (dt == CT_DTYPE_BF16)
            accum_bf16((uint16_t *)a, (uint16_t *)g, count, add_to_g);
        else
            ACCUM(float, a, g, count, add_to_g);
        if (run->micro < run->window - 1)
            return 0;
    }
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

int ct_window_size(const ct_loop_options *o, size_t batch, size_t batches)
{
    size_t n = (size_t)o->accumulate - batch % (size_t)o->accumulate;

    return (int)(batch + n > batches ? batches - batch : n);
}

size_t ct_epoch_opt_steps(const ct_loop_options *o, size_t batches)
{
    return (batches + (size_t)o->accumulate - 1) / (size_t)o->accumulate;
}

/* For tests only (t/93): CTRAIN_TEST_DATA_STALL=R:S makes rank R sleep in the data phase of
 * optimizer step S (from 0) for 60 s, as a rank blocked reading its data would (a FIFO is refused as
 * an input, so a test cannot block a read for real). Read once; nothing else reads it. */
static void test_data_stall(ct_run *run)
{
    static int parsed, rank = -1;
    static long step = -1;
    const char *v;

    if (!parsed) {
        parsed = 1;
        if ((v = getenv("CTRAIN_TEST_DATA_STALL")) && sscanf(v, "%d:%ld", &rank, &step) != 2)
            rank = -1;
    }
    if (rank == run->rank && step == run->st.global_step) {
        step = -1;
        sleep(60);
    }
}

/* One micro-batch: forward, then backward of the gradient of the window's mean loss. */
static int micro_step(ct_run *run, size_t batch, int k, double window_samples, ct_model_sums *sums, ct_error *err)
{
    const uint32_t *idx;
    int count = ct_sampler_batch(&run->train_sampler, batch, &idx);
    double terms;
    int rc;

    ct_hang_enter(CT_PHASE_DATA);
    test_data_stall(run);
    if ((rc = ct_datamodule_gather(run->data, CT_SPLIT_TRAIN, idx, count, &run->batch, err)))
        return rc;
    ct_hang_enter(CT_PHASE_FORWARD);
    if ((rc = ct_run_forward(run, sums, err)))
        return rc;
    /* run->step_err is clear: ct_run_forward cleared it and forward succeeded. */
    run->micro = k;
    run->loss_bad = (k > 0 && run->loss_bad) || !isfinite(sums->loss);
    if (k == run->window - 1) {
        run->stop_posted = 0;
        if (run->stop_enabled)
            ct_run_stop_post(run);
    }
    /* The gradient of the mean loss over the global batch of the whole window: every rank's batch
     * has the same number of loss terms (samples or tokens), a sample the same number, so the
     * window's terms on this rank times the ranks the strategy sums over without averaging
     * (ct_strategy_grad_ranks). One batch: its own count, exactly as without accumulation. */
    terms = run->window == 1 ? sums->count : sums->count / count * window_samples;
    ct_hang_enter(CT_PHASE_BACKWARD);
    if ((rc = ct_model_backward(run->model, terms * ct_strategy_grad_ranks(run->strategy), grad_ready, run, err))) {
        if (run->step_err.code) /* the strategy refused a bucket, not the model */
            *err = run->step_err;
        return rc;
    }
    return 0;
}

/* The norm of the reduced gradient (logged, and what norm clipping scales by), then clipping as
 * Lightning's clip_grad_norm_ / clip_grad_value_: a factor of clip / (norm + 1e-6) when below 1. */
static int clip_gradients(ct_run *run, int logging, ct_error *err)
{
    double norm;
    int rc;

    run->last_grad_norm = NAN;
    if (!run->grads_on_host || (run->opt.clip != CT_CLIP_NORM && !logging))
        goto value;
    if ((rc = ct_strategy_grad_norm(run->strategy, &norm, err)))
        return rc;
    run->last_grad_norm = norm;
    if (run->opt.clip == CT_CLIP_NORM && run->opt.clip_val / (norm + 1e-6) < 1)
        ct_strategy_grad_scale(run->strategy, run->opt.clip_val / (norm + 1e-6));
value:
    if (run->opt.clip == CT_CLIP_VALUE)
        ct_strategy_grad_clamp(run->strategy, run->opt.clip_val);
    return 0;
}

int ct_training_step(ct_run *run, size_t first, int n, double *loss, double *samples, ct_error *err)
{
    double window_samples = 0, loss_sum = 0, terms = 0;
    int rc, skipped;

    for (int k = 0; k < n; k++) {
        const uint32_t *idx;

        window_samples += ct_sampler_batch(&run->train_sampler, first + (size_t)k, &idx);
    }
    run->window = n;
    for (int k = 0; k < n; k++) {
        ct_model_sums sums;

        if ((rc = micro_step(run, first + (size_t)k, k, window_samples, &sums, err)))
            return rc;
        loss_sum += sums.loss;
        terms += sums.count;
    }
    /* grad_sync leaves every rank the mean gradient over the global batch. The strategy owns the
     * update (a sharded one updates its part of the parameters and gathers the rest). */
    ct_hang_enter(CT_PHASE_ALLREDUCE);
    if ((rc = ct_strategy_grad_sync(run->strategy, err)))
        return rc;
    ct_hang_enter(CT_PHASE_OPTIMIZER);
    if ((rc = clip_gradients(run, (run->st.global_step + 1) % run->opt.log_every_n_steps == 0, err)) ||
        (rc = ct_strategy_optimizer_step(run->strategy, run->model, run->optim, &skipped, err)))
        return rc;
    *loss = loss_sum / terms;
    *samples = window_samples;
    return 0;
}

/* Lightning's EarlyStopping(check_finite=True): a non-finite training loss ends the run before
 * anything is logged, validated or saved from the step, so last.safetensors stays the last good
 * checkpoint. Whether any rank's loss was non-finite rode on the step's gradient exchange (every
 * rank decides alike, with no collective of its own); without that post, this rank's own loss. */
static int loss_finite(ct_run *run, double loss, ct_error *err)
{
    double bad = run->stop_posted ? run->stop_sums[2] : !isfinite(loss);

    if (bad < 0.5)
        return 0;
    ct_error_set(err, CT_EFORMAT, "fit-loss-nonfinite", "the training loss is not finite (%s on this rank, %.0f of "
                 "%d ranks) at epoch %lld, step %lld: the run stops, saving nothing after the last good checkpoint",
                 isnan(loss) ? "nan" : isinf(loss) ? (loss > 0 ? "inf" : "-inf") : "finite", bad, run->world, (long long)run->st.epoch + 1, (long long)run->st.global_step + 1);
    return ct_error_hint(err, "lower --lr, add --gradient-clip-val 1.0 or check the data; --ckpt-path last resumes "
                              "from %s/last.safetensors when it exists", run->opt.root_dir);
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

int ct_epoch_loop_run(ct_run *run, ct_error *err)
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
        double loss, samples, t0, sps, shown;

        if (run->opt.max_steps >= 0 && st->global_step >= run->opt.max_steps)
            break;
        /* A step boundary: every rank learns whether any got a stop signal, and all stop here
         * (from the flags the last step's gradient exchange carried, see stop.c). Never inside an
         * accumulation window: a checkpoint holds no half-summed gradients. */
        if (run->stop_enabled && (rc = ct_run_stop_agreed(run, err)) != 0)
            return rc < 0 ? rc : 0;
        ct_optim_set_lr(run->optim, ct_lr_at(&run->opt, st->global_step, total));
        t0 = ct_time_now();
        if ((rc = ct_training_step(run, (size_t)st->step_in_epoch, n, &loss, &samples, err)) ||
            (rc = loss_finite(run, loss, err)))
            return rc;
        run->train_seconds += ct_time_now() - t0;
        run->train_samples += samples * run->world;
        run->steps_this_run++;
        interval_samples += samples * run->world;
        loss_sum += loss;
        loss_n += 1;
        st->step_in_epoch += n;
        st->global_step++;
        ct_hang_step(st->global_step);
        if ((rc = ct_straggler_step(run, ct_time_now() - t0, err)))
            return rc;
        if (run->straggler_stop)
            return 0; /* every rank after this step: the fit loop saves last.safetensors */
        sps = run->train_samples / run->train_seconds;
        shown = loss_sum / loss_n;
        if (st->global_step % run->opt.log_every_n_steps == 0) {
            double now = ct_time_now(), mean;

            if ((rc = reduce_loss(run, loss_sum, loss_n, &mean, err)))
                return rc;
            sps = interval_samples / (now - interval_start);
            st->last_train_loss = shown = mean;
            ct_logger_row(run, mean, NULL, ct_optim_get_config(run->optim)->lr, sps, run->last_grad_norm);
            loss_sum = loss_n = interval_samples = 0;
            interval_start = now;
        }
        ct_progress_step(run, batches, total, shown, sps);
        /* --val-check-interval: validation (and the monitored checkpoints, early stopping) every N
         * optimizer steps of the fit, epoch boundaries or not. */
        if (run->opt.val_check_interval > 0 && st->global_step % run->opt.val_check_interval == 0) {
            if ((rc = ct_fit_validate(run, batches, err)))
                return rc;
            if (st->early_stopped)
                return 0;
            validated = 1;
        }
        if (!validated && run->opt.checkpoint_every_n_steps > 0 &&
            st->global_step % run->opt.checkpoint_every_n_steps == 0 && (size_t)st->step_in_epoch < batches) {
            char path[1100];

            snprintf(path, sizeof(path), "%s/last.safetensors", run->opt.root_dir);
            if ((rc = ct_run_save_checkpoint(run, path, err)))
                return rc;
        }
        /* A validation at the epoch's last step rolled the counters to the next epoch. */
        if (validated && st->step_in_epoch == 0)
            break;
    }
    return 0;
}
