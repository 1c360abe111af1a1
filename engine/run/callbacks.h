/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the run's callback table (callbacks.c): what the loops call at each point of a fit.
 *
 * Internal to libctrain. The loops call these and nothing of the loggers, the checkpoint code or
 * the fit's health checks (t/90 checks it); the Trainer attaches the callbacks (engine/callbacks)
 * and the user's (include/ctrain/callback.h). Each function calls the hook of every callback that
 * has one, in the order they were added; the first error ends the round and is returned.
 */
#ifndef CTRAIN_RUN_CALLBACKS_H
#define CTRAIN_RUN_CALLBACKS_H

#include "ctrain/callback.h"
#include "engine/run/run.h"

/* Append a callback (CT_EINVAL when the table is full). self is freed with the run (ops->free). */
int ct_callbacks_add(ct_run *run, const ct_callback_ops *ops, void *self, ct_error *err);
/* Free every callback's state, last added first, and empty the table. */
void ct_callbacks_free(ct_run *run);

int ct_callbacks_fit_start(ct_run *run, ct_error *err);
void ct_callbacks_phase(ct_run *run, enum ct_fit_phase phase);
/* A watcher that stops the fit (run->straggler_stop) ends the round: the callbacks after it (the
 * loggers, the checkpoints) hear of this step no more; the fit loop's on_signal follows. */
int ct_callbacks_train_batch_end(ct_run *run, const ct_batch_end *b, ct_error *err);
int ct_callbacks_train_epoch_end(ct_run *run, const ct_epoch_end *e, ct_error *err);
int ct_callbacks_validation_end(ct_run *run, const ct_validation_end *v, ct_error *err);
int ct_callbacks_signal(ct_run *run, const ct_stop_event *s, ct_error *err);
int ct_callbacks_fit_end(ct_run *run, ct_error *err);
void ct_callbacks_exception(ct_run *run, const ct_error *err);

#endif
