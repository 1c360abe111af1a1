/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the fit's own callbacks (engine/callbacks): the hang and straggler watchers, early
 * stopping, the loggers and ModelCheckpoint, each a ct_callback_ops over the parts below it
 * (engine/health/fit, engine/loggers, engine/checkpoint).
 *
 * Internal to libctrain. Beside the loops, which never include this: the loops call the run's
 * table (engine/run/callbacks.h); the Trainer attaches these to it (ct_fit_callbacks_attach).
 */
#ifndef CTRAIN_CALLBACKS_CALLBACKS_H
#define CTRAIN_CALLBACKS_CALLBACKS_H

#include "ctrain/callback.h"
#include "engine/run/callbacks.h"
#include "engine/run/run.h"

extern const ct_callback_ops ct_hang_callback;             /* watchers.c */
extern const ct_callback_ops ct_straggler_callback;        /* watchers.c */
extern const ct_callback_ops ct_early_stopping_callback;   /* early_stopping.c */
extern const ct_callback_ops ct_loggers_callback;          /* loggers.c */
extern const ct_callback_ops ct_model_checkpoint_callback; /* model_checkpoint.c */

/* CTRAIN_TEST_DATA_STALL (tests only), read once: a callback that stalls a rank's data phase. */
int ct_test_data_stall_attach(ct_run *run, ct_error *err);

/* The fit's table, in the order its hooks are called: hang, the test's stall, straggler, early
 * stopping, the loggers, the user's callbacks (user[n_user]), ModelCheckpoint last (it saves what
 * the others decided). */
int ct_fit_callbacks_attach(ct_run *run, const ct_callback *user, int n_user, ct_error *err);

#endif
