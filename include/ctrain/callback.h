/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — callbacks, as Lightning has them: what a fit tells the parts that watch it.
 *
 * The loops (engine/loops) call one table of callbacks at fixed points of a fit and nothing else
 * of the parts that watch it: the loggers (metrics.csv, TensorBoard, the progress display), the
 * checkpoints (ModelCheckpoint: last, best and the top-k files), early stopping and the straggler
 * and hang watchers are each a callback with its state behind its own handle, attached by the
 * Trainer in this order: hang, straggler, early stopping, loggers, then the user's callbacks
 * (ct_trainer_config.callbacks), then ModelCheckpoint. A user program adds its own the same way
 * (examples/softmax_regression.c). Every rank calls every hook, in the same order; a callback that
 * writes files or prints does so on global zero only (ct_fit_counters.is_zero).
 *
 * The run itself is opaque here: a callback reads what it may through ct_run_counters().
 */
#ifndef CTRAIN_CALLBACK_H
#define CTRAIN_CALLBACK_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/error.h"
#include "ctrain/model.h"

typedef struct ct_run ct_run;

/* Where a training step is, in the order a step runs them (the hang record's phases). */
enum ct_fit_phase {
    CT_FIT_PHASE_START = 0, CT_FIT_PHASE_DATA, CT_FIT_PHASE_FORWARD, CT_FIT_PHASE_BACKWARD, CT_FIT_PHASE_ALLREDUCE,
    CT_FIT_PHASE_OPTIMIZER, CT_FIT_PHASE_CHECKPOINT, CT_FIT_PHASE_VALIDATION, CT_FIT_PHASE_DONE
};

/* The counters and options a callback may read (a copy, filled by ct_run_counters). */
typedef struct ct_fit_counters {
    int rank, world, is_zero;  /* this process; global zero writes files and prints */
    int64_t epoch;             /* the epoch being (or about to be) trained, from 0 */
    int64_t step_in_epoch;     /* batches trained in it */
    int64_t global_step;       /* optimizer steps since the start of training (a resumed run's included) */
    int max_epochs;
    long max_steps;            /* -1: no limit */
    double last_train_loss;    /* the mean over the ranks at the last logged step (NaN: none yet) */
    double last_val_loss, last_val_acc; /* the last validation's (NaN: none, or no accuracy) */
    double best_score;         /* the monitored metric's best value so far (NaN: none) */
    const char *monitor;       /* its name: "val_loss", ... */
    const char *root_dir;      /* --default-root-dir: where the run's files are */
} ct_fit_counters;
void ct_run_counters(const ct_run *run, ct_fit_counters *out);

/* What an evaluation gives: mean loss per term, accuracy (NaN for a model without one) and the
 * model's own metrics (ct_model_info.metric_names), all over the whole split and every rank. */
typedef struct ct_eval_result {
    double loss, acc;
    double metrics[CT_MODEL_MAX_METRICS];
    double count;              /* loss terms evaluated (samples or tokens) */
} ct_eval_result;

/* After each optimizer step (the counters already count it). */
typedef struct ct_batch_end {
    double step_seconds;       /* the step's wall time on this rank */
    double loss;               /* the training loss shown: the mean of the steps since the last log */
    double samples_per_sec;    /* all ranks' samples a second (over the log interval on a log step) */
    int logging;               /* a log step (--log-every-n-steps): loss is the mean over the ranks */
    double lr, grad_norm;      /* the step's learning rate, its gradient norm (NaN: not measured) */
    size_t steps_per_epoch;    /* batches in this epoch */
    long total_steps;          /* optimizer steps of the whole fit */
    int validating;            /* a validation follows at this step (--val-check-interval) */
} ct_batch_end;

/* After a training stretch the fit loop does not validate by itself: an epoch's end or --max-steps
 * under --val-check-interval (counters rolled to the next epoch at an epoch's end). */
typedef struct ct_epoch_end {
    int validated;             /* a validation at this very step already ran its callbacks */
} ct_epoch_end;

/* After each validation (counters rolled to the next epoch when it ended one). */
typedef struct ct_validation_end {
    const ct_eval_result *val; /* NaN where not measured */
    int has_val;               /* a validation set was evaluated */
    int improved;              /* the monitored metric improved (or nothing is measured to compare) */
    double score;              /* the monitored metric in this validation (NaN: not measured) */
    int64_t trained_epoch;     /* the epoch just trained, from 0 */
} ct_validation_end;

/* The fit stops early, on every rank alike, at a step boundary: a stop signal every rank agreed on,
 * or a watcher's stop (by "straggler"). */
typedef struct ct_stop_event {
    int signal;                /* this rank's signal, else the requeue signal, else 0 */
    int requeue;               /* some rank got the requeue signal */
    const char *by;            /* NULL: a signal; else the watcher that stopped the fit */
} ct_stop_event;

/* Every hook may be NULL. A hook returning non-zero (err filled) ends the fit with that error. */
typedef struct ct_callback_ops {
    const char *name;
    /* Lightning's on_fit_start: before the first step, every rank (a collective is allowed). */
    int (*on_fit_start)(void *self, ct_run *run, ct_error *err);
    /* Where the step is now (its data, forward, backward, ...): on the hot path, plain stores only. */
    void (*on_phase)(void *self, ct_run *run, enum ct_fit_phase phase);
    /* Lightning's on_train_batch_end, after each optimizer step. */
    int (*on_train_batch_end)(void *self, ct_run *run, const ct_batch_end *b, ct_error *err);
    /* Lightning's on_train_epoch_end, where the fit loop does not validate (ct_epoch_end). */
    int (*on_train_epoch_end)(void *self, ct_run *run, const ct_epoch_end *e, ct_error *err);
    /* Lightning's on_validation_end. */
    int (*on_validation_end)(void *self, ct_run *run, const ct_validation_end *v, ct_error *err);
    /* The fit stops early (ct_stop_event); a checkpoint of where training stands is saved here. */
    int (*on_signal)(void *self, ct_run *run, const ct_stop_event *s, ct_error *err);
    /* Lightning's on_fit_end: the fit loop ended without an error (a stop included). */
    int (*on_fit_end)(void *self, ct_run *run, ct_error *err);
    /* Lightning's on_exception: the fit loop ends with err. */
    void (*on_exception)(void *self, ct_run *run, const ct_error *err);
    /* The run is freed: release self (NULL: nothing to release). */
    void (*free)(void *self);
} ct_callback_ops;

/* A callback: its hooks and its state, handed back to each hook. */
typedef struct ct_callback {
    const ct_callback_ops *ops;
    void *self;
} ct_callback;

#define CT_RUN_MAX_CALLBACKS 16

#endif
