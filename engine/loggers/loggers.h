/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the loggers: metrics.csv and the progress display (logger.c), TensorBoard's event file
 * (tensorboard.c). Global zero only writes.
 *
 * Internal to libctrain. Below the loops, which call them after each step and validation: they read
 * the run (engine/run/run.h: its counters, options and model) and write files, and call nothing
 * of the loops, the strategy's collectives or the Trainer (t/90 places them so).
 */
#ifndef CTRAIN_LOGGERS_H
#define CTRAIN_LOGGERS_H

#include <stdint.h>

#include "engine/run/run.h"

/* --- the loggers' state (logger.c): run->loggers, an opaque handle ------------------------------ */
/* Create it (fit only): --progress as a live bar (use_bar) or plain lines (use_plain), neither: off.
 * Without one (validate, test) every function below writes nothing. */
int ct_loggers_create(ct_run *run, int use_bar, int use_plain, ct_error *err);
/* Close metrics.csv and the TensorBoard file and free the handle. */
void ct_loggers_free(ct_run *run);
/* The nodes slow in the straggler check's last window ("" none; ';' between): metrics.csv's
 * stragglers column from the next row on (the straggler check, engine/health/fit, sets it). */
void ct_logger_set_stragglers(ct_run *run, const char *nodes);

/* --- metrics.csv (logger.c) ------------------------------------------------------------------- */
/* Open root_dir/metrics.csv (append: a resumed run, its rows after the checkpoint's step cut). */
int ct_logger_open(ct_run *run, int append, ct_error *err);
void ct_logger_close(ct_run *run);
/* One metrics.csv row (and the same scalars in the TensorBoard file); NaN fields are left empty;
 * val NULL: no validation in this row. The model's own metrics (val_<name>) are columns after
 * grad_norm. */
void ct_logger_row(ct_run *run, double train_loss, const ct_eval_result *val, double lr, double samples_per_sec,
                   double grad_norm);

/* --- progress (logger.c) ---------------------------------------------------------------------- */
/* Progress after a step (bar or periodic plain line). */
void ct_progress_step(ct_run *run, size_t steps_per_epoch, long total_steps, double loss,
                      double samples_per_sec);
/* A line of its own (ends a bar line first). Global zero only; nothing with --progress off. */
void ct_progress_line(ct_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line on stderr whatever --progress (off included), "ctrain: " and fmt (ends a bar line first).
 * Global zero only. */
void ct_progress_say(ct_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --- TensorBoard (tensorboard.c) -------------------------------------------------------------- */
/* Open the run's event file beside metrics.csv (global zero only; nothing when opt.tensorboard is
 * 0). resume_step >= 0: a resumed run: the newest event file is cut after its last record of a
 * step <= resume_step and appended to, so no step appears twice; -1: a new file. */
int ct_tb_open(ct_run *run, int64_t resume_step, ct_error *err);
void ct_tb_close(ct_run *run);
/* A scalar at the run's global step (no-op without a writer). */
void ct_tb_scalar(ct_run *run, const char *tag, double value);
/* Flush what was written since the last flush (after each metrics row). */
void ct_tb_flush(ct_run *run);

#endif
