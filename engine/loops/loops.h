/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the loops: fit loop -> epoch loop -> validation -> training step; the evaluation loop (ct_run in run.h).
 *
 * Internal to libctrain. The Trainer (engine/trainer) builds a ct_run and hands it to the loops;
 * the loops call the Strategy directly (gradients, collectives, checkpoints) and never include the
 * Trainer. Every rank runs the same loops; only the global-zero rank writes files and prints.
 */
#ifndef CTRAIN_LOOPS_H
#define CTRAIN_LOOPS_H

#include "engine/checkpoint/checkpoint.h"   /* the loops save and load through it */
#include "engine/loops/run.h"

/* --- stopping on a signal (engine/loops/stop.c) ----------------------------------------------- */
/* "USR1", "SIGTERM", "15", ... (only signals that end a process by default). 0 or CT_EINVAL. */
int ct_stop_signal_parse(const char *name, int *sig);
/* "SIGUSR1" into buf. */
const char *ct_stop_signal_name(int sig, char *buf, size_t size);
/* Catch requeue_sig, SIGTERM and SIGINT: blocked in the calling thread (and the threads it starts
 * later) and read by a thread of their own, which records the signal (a second SIGINT ends the
 * process at once); a thread started before that does not block them records it in a handler.
 * ct_stop_uninstall restores what was there before. */
int ct_stop_install(int requeue_sig, ct_error *err);
/* The hang-dump signal (0: none), read by the same thread: each one writes this rank's hang record
 * (ct_hang_dump) and training goes on. Before ct_stop_install. */
void ct_stop_set_dump_signal(int sig);
void ct_stop_uninstall(void);
/* Block every signal --requeue-signal may name, in the calling thread: the first thing `ctrain
 * fit` does, so that a stop that comes during start-up waits for ct_stop_install instead of
 * ending the process (the ranks ctrain's launchers start inherit the mask). */
void ct_stop_block_early(void);
/* After ct_stop_block_early: unblock those of them fit does not catch (all but requeue_sig,
 * SIGTERM and SIGINT). Without ct_stop_block_early, nothing. */
void ct_stop_keep_blocked(int requeue_sig);   /* the dump signal (ct_stop_set_dump_signal) stays blocked too */
/* A collective at a step boundary: 1 when any rank got a stop signal (run->stop filled, the same
 * on every rank), 0 when none, or an error code. */
int ct_run_stop_agreed(ct_run *run, ct_error *err);
/* Post this rank's stop flags to ride on the training step's gradient exchange: the next
 * ct_run_stop_agreed then decides from those sums without a collective of its own. */
void ct_run_stop_post(ct_run *run);

/* --- hang forensics (engine/health/hang.c, diagnose.c) -------------------------------------- */
/* Where a rank is, in the order a step runs them (a later phase is further on). */
enum ct_phase {
    CT_PHASE_START = 0, CT_PHASE_DATA, CT_PHASE_FORWARD, CT_PHASE_BACKWARD, CT_PHASE_ALLREDUCE,
    CT_PHASE_OPTIMIZER, CT_PHASE_CHECKPOINT, CT_PHASE_VALIDATION, CT_PHASE_DONE, CT_PHASE_N
};
const char *ct_hang_phase_name(int phase);
int ct_hang_phase_parse(const char *name);   /* -1: not a phase */
/* Start this rank's record (dumps go to root_dir/hang); returns the collective trace to hand the
 * strategy (ct_strategy_set_trace). */
ct_collective_trace *ct_hang_init(int rank, int world, const char *root_dir);
/* Once the run's directory is made and checked: move the record into DIR/hang/rank-R.live's shared
 * mapping (see engine/health/hang.c); returns the collective trace to hand the strategy again. */
ct_collective_trace *ct_hang_map(void);
/* The fit ended (ok: without an error): the phase is done; a fit that ended well removes its
 * live file (DIR/hang/rank-R.live), one that did not keeps it for ctrain diagnose. */
void ct_hang_finish(int ok);
/* The hot path: plain stores (and the vDSO clock), nothing else. */
void ct_hang_enter(int phase);
void ct_hang_step(int64_t step);
/* Write root_dir/hang/rank-R.json from a snapshot of the record (temp file, fsync, rename); reason:
 * "signal", "collective-timeout". 0, or -1 (said on stderr). Not from a signal handler. */
int ct_hang_dump(const char *reason);
/* After a collective timeout: dump; rank 0 waits a moment for the others' records and prints the
 * diagnosis, the others linger as long so that their abort does not end rank 0 first. */
void ct_hang_after_timeout(int is_zero);
/* Read dir/hang/rank-*.json (and, for a rank of the latest run that wrote none, its rank-R.live) and
 * print which ranks are behind, where and since when: 0 when every rank is at the same point, 1
 * when some are behind, or an error code (dir missing, a record unreadable, naming it). */
int ct_hang_diagnose(const char *dir, FILE *out, ct_error *err);

/* --- the fit loop (engine/loops/fit_loop.c) --------------------------------------------------- */
/* Train from run->st until max_epochs, max_steps or early stopping (run->st.early_stopped),
 * validating and checkpointing at each epoch end (or every val_check_interval optimizer steps).
 * When the ranks agree to stop on a signal (run->stop_enabled), save last.safetensors where training
 * stands and return 0 with run->stop.agreed set. */
int ct_fit_loop_run(ct_run *run, ct_error *err);

/* --- stragglers (engine/health/straggler.c) --------------------------------------------------- */
/* A collective, before the first step (nothing when --on-straggler is off): every rank's node. */
int ct_straggler_start(ct_run *run, ct_error *err);
/* After every optimizer step, on every rank, with the step's wall time: every straggler_every steps
 * one allreduce of each rank's busy and waiting time; a node named is logged (and, with stop,
 * run->straggler_stop set: the fit saves last.safetensors and ends). */
int ct_straggler_step(ct_run *run, double step_seconds, ct_error *err);
void ct_straggler_free(ct_run *run);

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

/* --- validation and its callbacks, below the epoch loop (engine/loops/validate.c) ------------- */
/* After an optimizer step or a stretch of training: validate, checkpoint (top-k by the monitored
 * metric), decide early stopping (run->st.early_stopped). */
int ct_fit_validate(ct_run *run, size_t batches_per_epoch, ct_error *err);

/* --- the training step, below validation and the evaluation loop (engine/loops/step.c) -------- */
/* One optimizer step on the batches first .. first + n - 1 of the epoch (an accumulation window):
 * forward and backward of each (the last one's gradients announced to the strategy as they are
 * ready, the others summed on this rank: Lightning's no_sync), grad_sync, clipping, update.
 * *loss gets the window's mean loss, *samples the samples it trained on this rank. */
int ct_training_step(ct_run *run, size_t first, int n, double *loss, double *samples, ct_error *err);
/* Forward on run->batch, announcing the parameters it reads to the strategy (training and
 * evaluation alike). */
int ct_run_forward(ct_run *run, ct_model_sums *sums, ct_error *err);

/* --- the evaluation loop (engine/loops/eval_loop.c) ------------------------------------------- */
/* Loss, accuracy and the model's metrics over the whole of a split, sharded over the ranks and
 * reduced. */
int ct_eval_loop_run(ct_run *run, enum ct_split split, ct_eval_result *out, ct_error *err);
/* The same over the first batches of each rank's shard as --limit-val-batches says (validation in
 * fit): a count, or a fraction of the batches (at least one when it is above 0). */
int ct_eval_loop_run_limited(ct_run *run, enum ct_split split, ct_eval_result *out, ct_error *err);

/* --- logging and progress (engine/loops/logger.c) --------------------------------------------- */
int ct_logger_open(ct_run *run, int append, ct_error *err);
void ct_logger_close(ct_run *run);
/* One metrics.csv row (and the same scalars in the TensorBoard file); NaN fields are left empty;
 * val NULL: no validation in this row. The model's own metrics (val_<name>) are columns after
 * grad_norm. */
void ct_logger_row(ct_run *run, double train_loss, const ct_eval_result *val, double lr, double samples_per_sec,
                   double grad_norm);

/* --- TensorBoard (engine/loops/tensorboard.c) -------------------------------------------------- */
/* Open the run's event file beside metrics.csv (global zero only; nothing when opt.tensorboard is
 * 0). resume_step >= 0: a resumed run: the newest event file is cut after its last record of a
 * step <= resume_step and appended to, so no step appears twice; -1: a new file. */
int ct_tb_open(ct_run *run, int64_t resume_step, ct_error *err);
void ct_tb_close(ct_run *run);
/* A scalar at the run's global step (no-op without a writer). */
void ct_tb_scalar(ct_run *run, const char *tag, double value);
/* Flush what was written since the last flush (after each metrics row). */
void ct_tb_flush(ct_run *run);
/* Progress after a step (bar or periodic plain line). */
void ct_progress_step(ct_run *run, size_t steps_per_epoch, long total_steps, double loss,
                      double samples_per_sec);
/* A line of its own (ends a bar line first). Global zero only; nothing with --progress off. */
void ct_progress_line(ct_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line on stderr whatever --progress (off included), "ctrain: " and fmt (ends a bar line first).
 * Global zero only. */
void ct_progress_say(ct_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
