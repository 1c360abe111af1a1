/* SPDX-License-Identifier: BSD-3-Clause */
/* ModelCheckpoint, as Lightning's: last.safetensors after each validation, at the end of a training
 * stretch the fit loop does not validate, every --checkpoint-every-n-steps and when the fit stops
 * early; best.safetensors when the monitored metric improved; with --save-top-k K the K best as
 * epoch=E-step=S.safetensors, the one pushed out removed. The kept files are the run's counters
 * (run->st.top_k), which checkpoints carry. It saves through engine/checkpoint. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/callbacks/callbacks.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/util/fsutil.h"

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

/* root_dir/last.safetensors where training stands; the hang record says so first. It may be
 * written in the background (with --async-checkpoint the strategy's checkpoint IO is the
 * asynchronous wrapper); best and the top-k files are written at once: the top-k eviction unlinks a
 * file right after a save, which must not race a pending rename, and the end of fit tests best. */
static int save_last(ct_run *run, ct_error *err)
{
    char path[1100];

    snprintf(path, sizeof(path), "%s/last.safetensors", run->opt.root_dir);
    ct_callbacks_phase(run, CT_FIT_PHASE_CHECKPOINT);
    return ct_run_save_checkpoint(run, path, 1, err);
}

/* The callbacks before this one (the loggers) have logged the validation; the top-k entry is
 * decided before any file is written, so each file carries the list it belongs to. */
static int on_validation_end(void *self, ct_run *run, const ct_validation_end *v, ct_error *err)
{
    char path[1400], evicted[96];
    int in_top_k = top_k_update(run, v->score, evicted, sizeof(evicted)), rc;

    (void)self;
    if ((rc = save_last(run, err)))
        return rc;
    if (v->improved && run->opt.save_top_k != 0) {
        snprintf(path, sizeof(path), "%s/best.safetensors", run->opt.root_dir);
        if ((rc = ct_run_save_checkpoint(run, path, 0, err)))
            return rc;
    }
    if (in_top_k) {
        snprintf(path, sizeof(path), "%s/epoch=%lld-step=%lld.safetensors", run->opt.root_dir,
                 (long long)v->trained_epoch, (long long)run->st.global_step);
        if ((rc = ct_run_save_checkpoint(run, path, 0, err)))
            return rc;
        snprintf(path, sizeof(path), "%s/%s", run->opt.root_dir, evicted);
        if (evicted[0] && run->is_zero)
            ct_fs_remove(path);   /* a file, or a sharded checkpoint's directory */
    }
    return 0;
}

/* --checkpoint-every-n-steps: inside an epoch, at a step no validation follows (a validation saves
 * last.safetensors itself; an epoch's end is the fit loop's). */
static int on_train_batch_end(void *self, ct_run *run, const ct_batch_end *b, ct_error *err)
{
    int every = run->opt.checkpoint_every_n_steps;

    (void)self;
    if (b->validating || every <= 0 || run->st.global_step % every || (size_t)run->st.step_in_epoch >= b->steps_per_epoch)
        return 0;
    return save_last(run, err);
}

/* A stretch of training ended without a validation of its own (--val-check-interval): at the
 * epoch's end or at --max-steps, unless a validation at this very step saved it. */
static int on_train_epoch_end(void *self, ct_run *run, const ct_epoch_end *e, ct_error *err)
{
    (void)self;
    return e->validated ? 0 : save_last(run, err);
}

/* Stopped early: no validation (the time left may be short), last.safetensors where the counters
 * stand, inside the epoch or not; resuming from it continues bit for bit. */
static int on_signal(void *self, ct_run *run, const ct_stop_event *s, ct_error *err)
{
    (void)self;
    (void)s;
    return save_last(run, err);
}

const ct_callback_ops ct_model_checkpoint_callback = {
    .name = "model_checkpoint",
    .on_train_batch_end = on_train_batch_end,
    .on_train_epoch_end = on_train_epoch_end,
    .on_validation_end = on_validation_end,
    .on_signal = on_signal,
};
