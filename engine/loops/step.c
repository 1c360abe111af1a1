/* SPDX-License-Identifier: BSD-3-Clause */
/* The training step, below the epoch loop: forward, the micro-batches of an accumulation window,
 * gradient readiness handed to the strategy, clipping. The evaluation loop's forward is here too. */
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
 * sum to each range just before announcing it, so the exchange still overlaps its backward. A
 * strategy that accumulates itself (fsdp: ct_strategy_accumulates) hears every micro-batch. */
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

    if (run->window > 1 && run->accum) {
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

/* Backward's: fsdp gathers the unit again (released after its forward). */
static int params_needed_backward(void *ctx, size_t offset, size_t count)
{
    ct_run *run = ctx;

    return ct_strategy_params_needed_backward(run->strategy, offset, count, &run->step_err);
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

/* Post this rank's stop flags (run->signals, the Trainer's catcher's record) to ride on the
 * training step's gradient exchange: the next ct_run_stop_agreed decides from those sums without a
 * collective of its own. */
static void stop_post(ct_run *run)
{
    const ct_stop_flags *f = run->signals;

    run->stop_sums[0] = f && f->signal ? 1 : 0;
    run->stop_sums[1] = f && f->requeue ? 1 : 0;
    run->stop_sums[2] = run->loss_bad ? 1 : 0;
    ct_strategy_post_with_grads(run->strategy, run->stop_sums, 3);
    run->stop_posted = 1;
}

int ct_run_loss_read(void *model, int back, double *loss_sum, ct_error *err)
{
    return ct_model_loss_read(model, back, loss_sum, err);
}

/* A model that keeps its loss on the device trains with it read a step late, one batch a window
 * (an accumulation window reads each micro-batch's loss at once, as on the host). */
static int loss_deferred(const ct_run *run)
{
    return run->window == 1 && ct_model_defers_loss(run->model);
}

/* The forward of a deferred step: the previous step's loss is read now that this one's forward is
 * enqueued (sums->loss gets it, run->loss_of its step, -1 when none was pending), and whether it was
 * finite rides on this step's gradient exchange: a non-finite loss stops the run one step late. */
static int forward_deferred(ct_run *run, ct_model_sums *sums, ct_error *err)
{
    double loss = NAN;
    int64_t of = -1;
    int got, rc;

    ct_model_defer_loss(run->model, 1);
    rc = ct_run_forward(run, sums, err);
    ct_model_defer_loss(run->model, 0);
    if (rc || (rc = ct_loss_lag_advance(&run->loss_lag, run->st.global_step, sums->count, ct_run_loss_read, run->model,
                                        &loss, &of, &got, err)))
        return rc;
    sums->loss = run->deferred_loss = got ? loss : NAN; /* the previous step's mean, not this one's sum */
    run->loss_of = got ? of : -1;
    return 0;
}

/* One micro-batch: forward, then backward of the gradient of the window's mean loss. */
static int micro_step(ct_run *run, size_t batch, int k, double window_samples, ct_model_sums *sums, ct_error *err)
{
    const uint32_t *idx;
    int count = ct_sampler_batch(&run->train_sampler, batch, &idx);
    double terms;
    int rc;

    ct_callbacks_phase(run, CT_FIT_PHASE_DATA);
    if ((rc = ct_datamodule_gather(run->data, CT_SPLIT_TRAIN, idx, count, &run->batch, err)))
        return rc;
    ct_callbacks_phase(run, CT_FIT_PHASE_FORWARD);
    run->loss_of = run->st.global_step;
    if ((rc = loss_deferred(run) ? forward_deferred(run, sums, err) : ct_run_forward(run, sums, err)))
        return rc;
    /* run->step_err is clear: ct_run_forward cleared it and forward succeeded. */
    run->micro = k;
    run->loss_bad = (k > 0 && run->loss_bad) || (run->loss_of >= 0 && !isfinite(sums->loss));
    if (k == run->window - 1) {
        run->stop_posted = 0;
        if (run->stop_enabled)
            stop_post(run);
    }
    /* The gradient of the mean loss over the global batch of the whole window: every rank's batch
     * has the same number of loss terms (samples or tokens), a sample the same number, so the
     * window's terms on this rank times the ranks the strategy sums over without averaging
     * (ct_strategy_grad_ranks). One batch: its own count, exactly as without accumulation. */
    terms = run->window == 1 ? sums->count : sums->count / count * window_samples;
    ct_callbacks_phase(run, CT_FIT_PHASE_BACKWARD);
    ct_strategy_memory_sample(run->strategy); /* forward's peak of parameters (ddp: all of them) */
    if (k > 0 && !run->accum && (rc = ct_strategy_grad_window(run->strategy, k, err)))
        return rc;
    if ((rc = ct_model_backward(run->model, terms * ct_strategy_grad_ranks(run->strategy), params_needed_backward,
                                grad_ready, run, err))) {
        if (run->step_err.code) /* the strategy refused a bucket or a gather, not the model */
            *err = run->step_err;
        return rc;
    }
    ct_strategy_memory_sample(run->strategy); /* backward's peak of gradients (ddp: all of them) */
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

int ct_training_step(ct_run *run, size_t first, int n, double *loss, int64_t *loss_of, double *samples,
                     ct_error *err)
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
    ct_callbacks_phase(run, CT_FIT_PHASE_ALLREDUCE);
    if ((rc = ct_strategy_grad_sync(run->strategy, err)))
        return rc;
    ct_callbacks_phase(run, CT_FIT_PHASE_OPTIMIZER);
    if ((rc = clip_gradients(run, (run->st.global_step + 1) % run->opt.log_every_n_steps == 0, err)) ||
        (rc = ct_strategy_optimizer_step(run->strategy, run->model, run->optim, &skipped, err)))
        return rc;
    *loss = loss_deferred(run) ? run->deferred_loss : loss_sum / terms;
    *loss_of = run->loss_of;
    *samples = window_samples;
    return 0;
}

/* Two numbers summed over the ranks: [ranks that got a stop signal, ranks that got the requeue
 * signal] (the third posted, non-finite losses, is the epoch loop's loss check). They ride on the
 * previous step's gradient exchange when it posted them (a separate collective would stop every
 * rank once more per step); else (the first step of an epoch) an allreduce of their own. A signal
 * that comes after the post is seen one step later. */
int ct_run_stop_agreed(ct_run *run, ct_error *err)
{
    const ct_stop_flags *f = run->signals;
    double v[2] = { f && f->signal ? 1 : 0, f && f->requeue ? 1 : 0 };
    int sig, rc;

    if (run->stop_posted) {
        v[0] = run->stop_sums[0];
        v[1] = run->stop_sums[1];
        run->stop_posted = 0;
    } else if ((rc = ct_strategy_reduce_sum(run->strategy, v, 2, err))) {
        return rc;
    }
    if (v[0] < 0.5)
        return 0;
    /* This rank's own signal as it stands now (it may have come during the exchange). */
    sig = f ? f->signal : 0;
    run->stop.agreed = 1;
    run->stop.requeue = v[1] > 0.5;
    run->stop.signal = sig ? sig : (run->stop.requeue && f ? f->requeue_signal : 0);
    run->stop.local = sig != 0;
    return 1;
}

/* --- the training loss of a model that keeps it on the device, read one step late (loops.h) ---
 * Reading each step's loss as soon as its forward is enqueued would make the host wait for the
 * device every step; read during the next step it is on the host already (the device has moved on
 * to that step's forward), and the steps' work queues back to back. */
static int lag_read(ct_loss_lag *l, int back, ct_loss_read_fn read, void *ctx, double *loss, int64_t *of, int *got,
                    ct_error *err)
{
    double sum;
    int rc;

    *got = 0;
    if (!l->pending)
        return 0;
    l->pending = 0;
    if ((rc = read(ctx, back, &sum, err)))
        return rc;
    *loss = sum / l->terms;
    *of = l->step;
    *got = 1;
    return 0;
}

int ct_loss_lag_advance(ct_loss_lag *l, int64_t step, double terms, ct_loss_read_fn read, void *ctx, double *loss,
                        int64_t *of, int *got, ct_error *err)
{
    int rc = lag_read(l, 1, read, ctx, loss, of, got, err);

    if (rc)
        return rc;
    l->pending = 1;
    l->terms = terms;
    l->step = step;
    return 0;
}

int ct_loss_lag_drain(ct_loss_lag *l, ct_loss_read_fn read, void *ctx, double *loss, int64_t *of, int *got,
                      ct_error *err)
{
    return lag_read(l, 0, read, ctx, loss, of, got, err);
}
