/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the loops: fit loop -> epoch loop -> validation -> training step; the evaluation loop (ct_run in run.h).
 *
 * Internal to libctrain. The Trainer (engine/trainer) builds a ct_run, attaches its callbacks and
 * hands it to the loops; the loops call the Strategy directly (gradients, collectives) and never
 * include the Trainer. Everything that watches a fit — the loggers (metrics.csv, progress,
 * TensorBoard), the checkpoints (last, best, top-k), early stopping, the hang and straggler
 * watchers, a user's own — is a callback the loops reach through the run's table alone
 * (engine/run/callbacks.h; the callbacks themselves are engine/callbacks/, beside the loops).
 */
#ifndef CTRAIN_LOOPS_H
#define CTRAIN_LOOPS_H

#include "engine/run/callbacks.h"
#include "engine/run/run.h"

/* --- the fit loop (engine/loops/fit_loop.c) --------------------------------------------------- */
/* Train from run->st until max_epochs, max_steps or early stopping (run->st.early_stopped),
 * validating at each epoch end (or every val_check_interval optimizer steps). When the ranks agree
 * to stop on a signal (run->stop_enabled) or a watcher stops the fit, the callbacks' on_signal saves
 * last.safetensors where training stands and it returns 0 with run->stop.agreed (or
 * run->straggler_stop) set. on_fit_start before the first step; on_fit_end, or on_exception with the
 * error, at the end. */
int ct_fit_loop_run(ct_run *run, ct_error *err);

/* --- the training epoch loop (engine/loops/epoch_loop.c) ------------------------------------ */
/* The learning rate of optimizer step `step` (from 0) of a fit of total_steps steps. */
double ct_lr_at(const ct_loop_options *o, int64_t step, long total_steps);
/* Steps the whole fit takes: max_epochs epochs of steps_per_epoch, capped by max_steps. */
long ct_fit_total_steps(const ct_loop_options *o, size_t steps_per_epoch);
/* Train the rest of epoch run->st.epoch; returns 0 at the epoch end, when max_steps is reached, or
 * when a validation inside it stopped fit early. */
int ct_epoch_loop_run(ct_run *run, ct_error *err);
/* Batches in the accumulation window that starts at batch `batch` of an epoch of `batches`: up to
 * the next multiple of accumulate (Lightning: batch_progress.ready % accumulate == 0) or the
 * epoch's end. */
int ct_window_size(const ct_loop_options *o, size_t batch, size_t batches);
/* Optimizer steps of an epoch of `batches` batches. */
size_t ct_epoch_opt_steps(const ct_loop_options *o, size_t batches);

/* --- validation, below the epoch loop (engine/loops/validate.c) -------------------------------- */
/* After an optimizer step or a stretch of training: validate, measure the monitored metric and
 * whether it improved, then the callbacks' on_validation_end (early stopping sets
 * run->st.early_stopped; the checkpoints save last, best and the top-k). */
int ct_fit_validate(ct_run *run, size_t batches_per_epoch, ct_error *err);

/* --- the training step, below validation and the evaluation loop (engine/loops/step.c) -------- */
/* One optimizer step on the batches first .. first + n - 1 of the epoch (an accumulation window):
 * forward and backward of each (the last one's gradients announced to the strategy as they are
 * ready, the others summed on this rank: Lightning's no_sync), grad_sync, clipping, update.
 * *loss gets the window's mean loss and *loss_of the step's global index (from 0), *samples the
 * samples it trained on this rank. A model that keeps its loss on the device (ct_model_defers_loss),
 * with one batch a window: *loss is the previous step's (*loss_of one less; -1 when none is pending,
 * the first step or the first after a drain), read without waiting; this step's stays pending in
 * run->loss_lag until the next step or a drain (the epoch loop's loss_drain). */
int ct_training_step(ct_run *run, size_t first, int n, double *loss, int64_t *loss_of, double *samples,
                     ct_error *err);
/* --- a training loss read one step late (engine/loops/step.c) ------------------------------ */
/* Reads the loss sum of a forward whose loss stayed on the device: back 0 the last one, back 1 the
 * one before it (ct_model_loss_read for the run's model). */
typedef int (*ct_loss_read_fn)(void *ctx, int back, double *loss_sum, ct_error *err);
/* ct_model_loss_read of model (a ct_model) as a ct_loss_read_fn. */
int ct_run_loss_read(void *model, int back, double *loss_sum, ct_error *err);
/* Step `step`'s forward, of `terms` loss terms, is enqueued: the step pending before it is read
 * (back 1: the device is past its forward by now, so the read does not wait), *loss its mean per
 * term, *of its step and *got 1; *got 0 when none was pending. Step `step` is pending after. */
int ct_loss_lag_advance(ct_loss_lag *l, int64_t step, double terms, ct_loss_read_fn read, void *ctx, double *loss,
                        int64_t *of, int *got, ct_error *err);
/* The pending step's loss (back 0), waited for, as above; *got 0 when none. None is pending after. */
int ct_loss_lag_drain(ct_loss_lag *l, ct_loss_read_fn read, void *ctx, double *loss, int64_t *of, int *got,
                      ct_error *err);

/* Forward on run->batch, announcing the parameters it reads to the strategy (training and
 * evaluation alike). */
int ct_run_forward(ct_run *run, ct_model_sums *sums, ct_error *err);
/* A collective at a step boundary: 1 when any rank got a stop signal (run->signals; run->stop
 * filled, the same on every rank), 0 when none, or an error code. The training step posts this
 * rank's flags to ride on its gradient exchange, and the next call decides from those sums without
 * a collective of its own. */
int ct_run_stop_agreed(ct_run *run, ct_error *err);

/* --- the evaluation loop (engine/loops/eval_loop.c) ------------------------------------------- */
/* Loss, accuracy and the model's metrics over the whole of a split, sharded over the ranks and
 * reduced. */
int ct_eval_loop_run(ct_run *run, enum ct_split split, ct_eval_result *out, ct_error *err);
/* The same over the first batches of each rank's shard as --limit-val-batches says (validation in
 * fit): a count, or a fraction of the batches (at least one when it is above 0). */
int ct_eval_loop_run_limited(ct_run *run, enum ct_split split, ct_eval_result *out, ct_error *err);


#endif
