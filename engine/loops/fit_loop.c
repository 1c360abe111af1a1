/* SPDX-License-Identifier: BSD-3-Clause */
/* The fit loop: epochs of training (the epoch loop), validation at the end (loops/validate.c); the
 * callbacks (engine/run/callbacks.h) at the fit's start and end, a stretch's end and a stop. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ctrain/util.h"
#include "engine/loops/loops.h"

/* A stretch of training ended without a validation of its own (--val-check-interval): at the
 * epoch's end (the counters roll to the next epoch) or at --max-steps; the callbacks save
 * last.safetensors unless a validation at this very step did. */
static int end_stretch(ct_run *run, size_t batches_per_epoch, ct_error *err)
{
    ct_progress_state *st = &run->st;
    ct_epoch_end e = { 0 };

    if ((size_t)st->step_in_epoch >= batches_per_epoch) {
        st->epoch++;
        st->step_in_epoch = 0;
    } else if (st->global_step % run->opt.val_check_interval == 0) {
        e.validated = 1;
    }
    return ct_callbacks_train_epoch_end(run, &e, err);
}

/* Stopped on a signal every rank agreed on, or by a watcher: no validation (the time left may be
 * short); the callbacks say why and save last.safetensors where the counters stand, inside the
 * epoch or not; resuming from it continues bit for bit. */
static int stop_early(ct_run *run, ct_error *err)
{
    ct_stop_event s = { run->stop.signal, run->stop.requeue, run->straggler_stop ? "straggler" : NULL };

    return ct_callbacks_signal(run, &s, err);
}

static int fit_epochs(ct_run *run, ct_error *err)
{
    ct_progress_state *st = &run->st;
    int rc;

    /* Resumed after an early stop: as Lightning, training goes on with the stopper's count kept,
     * so the next validation without improvement stops it again. */
    st->early_stopped = 0;
    if ((rc = ct_callbacks_fit_start(run, err)))
        return rc;
    while (st->epoch < run->opt.max_epochs &&
           !(run->opt.max_steps >= 0 && st->global_step >= run->opt.max_steps)) {
        size_t steps = ct_sampler_steps(&run->train_sampler);
        int64_t before = st->global_step, epoch = st->epoch;

        if ((rc = ct_epoch_loop_run(run, err)))
            return rc;
        if (run->stop.agreed || run->straggler_stop)
            return stop_early(run, err);
        if (st->early_stopped)
            return 0;
        /* Nothing trained (an empty shard cannot happen with equal shards; guard anyway). */
        if (st->global_step == before && st->epoch == epoch && (size_t)st->step_in_epoch < steps)
            break;
        if (run->opt.val_check_interval > 0)
            rc = end_stretch(run, steps, err);
        else
            rc = ct_fit_validate(run, steps, err);
        if (rc)
            return rc;
        if (run->stop.agreed)          /* a stop signal during validation */
            return stop_early(run, err);
        if (st->early_stopped)
            return 0;
    }
    return 0;
}

int ct_fit_loop_run(ct_run *run, ct_error *err)
{
    int rc = fit_epochs(run, err);

    if (rc)
        ct_callbacks_exception(run, err);
    else
        rc = ct_callbacks_fit_end(run, err);
    return rc;
}
