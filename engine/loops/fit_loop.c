/* SPDX-License-Identifier: BSD-3-Clause */
/* The fit loop: epochs of training (the epoch loop), validation at the end (loops/validate.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/loops/loops.h"

/* A stretch of training ended without a validation of its own (--val-check-interval): at the
 * epoch's end or at --max-steps, last.safetensors where training stands (at the start of the next
 * epoch after a whole one), unless a validation at this very step saved it. */
static int end_stretch(ct_run *run, size_t batches_per_epoch, ct_error *err)
{
    ct_progress_state *st = &run->st;
    char path[1100];

    if ((size_t)st->step_in_epoch >= batches_per_epoch) {
        st->epoch++;
        st->step_in_epoch = 0;
    } else if (st->global_step % run->opt.val_check_interval == 0) {
        return 0;
    }
    snprintf(path, sizeof(path), "%s/last.safetensors", run->opt.root_dir);
    ct_hang_enter(CT_PHASE_CHECKPOINT);
    return ct_run_save_checkpoint(run, path, err);
}

/* Stopped on a signal: no validation (the time left may be short), last.safetensors where the
 * counters stand, inside the epoch or not; resuming from it continues bit for bit. */
static int save_on_stop(ct_run *run, ct_error *err)
{
    char path[1100], sig[32];

    snprintf(path, sizeof(path), "%s/last.safetensors", run->opt.root_dir);
    ct_hang_enter(CT_PHASE_CHECKPOINT);
    if (run->straggler_stop) {
        ct_progress_line(run, "ctrain: straggler: stopping at epoch %lld step %lld; saving %s",
                         (long long)run->st.epoch + 1, (long long)run->st.global_step, path);
        return ct_run_save_checkpoint(run, path, err);
    }
    ct_progress_line(run, "ctrain: %s: stopping at epoch %lld step %lld; saving %s",
                     ct_signal_name(run->stop.signal, sig, sizeof(sig)), (long long)run->st.epoch + 1,
                     (long long)run->st.global_step, path);
    return ct_run_save_checkpoint(run, path, err);
}

int ct_fit_loop_run(ct_run *run, ct_error *err)
{
    ct_progress_state *st = &run->st;
    int rc;

    /* Resumed after an early stop: as Lightning, training goes on with the stopper's count kept,
     * so the next validation without improvement stops it again. */
    st->early_stopped = 0;
    if ((rc = ct_straggler_start(run, err)))
        return rc;
    while (st->epoch < run->opt.max_epochs &&
           !(run->opt.max_steps >= 0 && st->global_step >= run->opt.max_steps)) {
        size_t steps = ct_sampler_steps(&run->train_sampler);
        int64_t before = st->global_step, epoch = st->epoch;

        if ((rc = ct_epoch_loop_run(run, err)))
            return rc;
        if (run->stop.agreed || run->straggler_stop)
            return save_on_stop(run, err);
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
            return save_on_stop(run, err);
        if (st->early_stopped)
            return 0;
    }
    return 0;
}
