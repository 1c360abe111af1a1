/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the loops: fit loop -> epoch loop -> training step; the evaluation loop.
 *
 * Internal to libctrain. The Trainer (engine/trainer) builds a ct_run and hands it to the loops;
 * the loops call the Strategy directly (gradients, collectives, checkpoints) and never include the
 * Trainer. Every rank runs the same loops; only the global-zero rank writes files and prints.
 */
#ifndef CTRAIN_LOOPS_H
#define CTRAIN_LOOPS_H

#include <stdint.h>
#include <stdio.h>

#include "engine/data/sampler.h"
#include "ctrain/datamodule.h"
#include "ctrain/dtype.h"
#include "ctrain/error.h"
#include "ctrain/model.h"
#include "ctrain/nn.h"
#include "ctrain/strategy.h"

enum ct_lr_schedule {
    CT_LR_COSINE = 0,  /* after the warm-up, min_lr + (lr - min_lr) * (1 + cos(pi * t)) / 2, t from 0 to 1 */
    CT_LR_CONSTANT
};

enum ct_clip_algorithm { CT_CLIP_NONE = 0, CT_CLIP_NORM, CT_CLIP_VALUE };

/* The metric checkpoints and early stopping watch (Lightning's ModelCheckpoint / EarlyStopping). */
enum ct_monitor_kind { CT_MON_VAL_LOSS = 0, CT_MON_VAL_ACC, CT_MON_VAL_METRIC, CT_MON_TRAIN_LOSS };

#define CT_TOP_K_MAX 12 /* --save-top-k K files tracked in a checkpoint's metadata */

/* What the loops need to know from the user's flags (the Trainer maps its config onto this). */
typedef struct ct_loop_options {
    int max_epochs;
    long max_steps;            /* -1: no limit */
    int batch_size;            /* per rank */
    double lr;                 /* peak learning rate */
    enum ct_lr_schedule lr_schedule;
    int log_every_n_steps;
    int checkpoint_every_n_steps; /* 0: checkpoint at epoch ends (and when fit stops) only */
    int async_checkpoint;      /* last.safetensors written by a background thread (--async-checkpoint) */
    uint64_t seed;
    char root_dir[1024];
    char flags_json[1024];     /* the run's flags, stored in checkpoint metadata */
    char job_id[64];           /* SLURM_JOB_ID of this run, stored in checkpoint metadata ("" outside SLURM) */
    int supervised;            /* a step of ctrain supervise, which excludes bad nodes itself (no requeue) */
    int blas_threads;          /* the BLAS threads of each rank, stored in checkpoint metadata */
    int accumulate;            /* batches per optimizer step (--accumulate-grad-batches) */
    enum ct_clip_algorithm clip;
    double clip_val;
    long val_check_interval;   /* validate every N optimizer steps; 0: at epoch ends */
    double limit_val;          /* evaluation batches per rank: a count (limit_val_is_count) or a fraction */
    int limit_val_is_count;
    long warmup_steps;
    double min_lr;
    enum ct_monitor_kind monitor;
    int monitor_metric;        /* CT_MON_VAL_METRIC: index into the model's metric names */
    char monitor_name[32];     /* "val_loss", ... */
    int monitor_max;           /* 1: higher is better */
    int save_top_k;            /* -1: keep every one; 0: no best checkpoint */
    int patience;              /* early stopping: validations without improvement; 0: off */
    int tensorboard;
    char hparams_json[2048];   /* the hyper-parameters for TensorBoard's hparams plugin */
    /* What decides the data order and split and what is trained: recorded in a checkpoint, and
     * resuming under another value is refused (engine/loops/checkpoint.c). */
    char datamodule[32];
    char data_identity[128];   /* ct_datamodule_identity of --data; "" when not taken (eval) */
    double val_fraction;
    char model_config[1024];   /* the model's resolved configuration */
    /* Straggler detection (engine/loops/straggler.c): off, warn or stop; every N optimizer steps
     * the ranks' busy and waiting times are gathered; a node whose busy time per step is above
     * factor x the median node's for windows windows in a row is named. */
    enum ct_on_straggler { CT_STRAGGLER_OFF = 0, CT_STRAGGLER_WARN, CT_STRAGGLER_STOP, CT_STRAGGLER_EXCLUDE } on_straggler;
    int straggler_every;
    double straggler_factor;
    int straggler_windows;
} ct_loop_options;

/* One of the --save-top-k checkpoints. */
typedef struct ct_top_k_entry {
    double score;
    char name[96];             /* file name in root_dir */
} ct_top_k_entry;

/* A stop every rank agreed on at a step boundary (engine/loops/stop.c). */
typedef struct ct_stop_state {
    int agreed;                /* the fit loop stopped after this step and saved last.safetensors */
    int requeue;               /* some rank got the requeue signal */
    int signal;                /* this rank's signal, else the requeue signal, else 0 */
    int local;                 /* this rank got a signal itself */
} ct_stop_state;

/* Training counters: everything a checkpoint needs to resume exactly. */
typedef struct ct_progress_state {
    int64_t epoch;             /* the epoch being (or about to be) trained, from 0 */
    int64_t step_in_epoch;     /* batches already trained in that epoch (Lightning's batch_idx; an
                                  optimizer step takes --accumulate-grad-batches of them) */
    int64_t global_step;       /* optimizer steps since the start of training */
    double best_val_acc;       /* -1: none yet (models with accuracy: the best checkpoint's) */
    double best_val_loss;      /* NaN: none yet (models without accuracy: the best checkpoint's) */
    double last_val_acc, last_val_loss;
    double last_val_metrics[CT_MODEL_MAX_METRICS];
    double last_train_loss;
    double best_score;         /* the monitored metric's best value so far (NaN: none) */
    int64_t wait_count;        /* early stopping: validations since the best (Lightning's wait_count) */
    int early_stopped;         /* early stopping ended fit (kept in checkpoints, as Lightning's stopped_epoch) */
    int n_top_k;
    ct_top_k_entry top_k[CT_TOP_K_MAX];
} ct_progress_state;

/* What an evaluation gives: mean loss per term, accuracy (NaN for a model without one) and the
 * model's own metrics (ct_model_info.metric_names), all over the whole split and every rank. */
typedef struct ct_eval_result {
    double loss, acc;
    double metrics[CT_MODEL_MAX_METRICS];
    double count;              /* loss terms evaluated (samples or tokens) */
} ct_eval_result;

typedef struct ct_run {
    ct_strategy *strategy;
    int rank, world, is_zero;
    ct_loop_options opt;
    /* The model the step runs: its implementation on this rank's device (ct_model_host(model) is
     * the host copy that checkpoints read and write; on cpu they are the same). */
    ct_model *model;
    ct_optim *optim;
    ct_rng rng;                /* the run's PRNG (initialisation); saved in checkpoints */
    ct_datamodule *data;
    ct_sampler train_sampler;
    /* One batch, allocated once for the largest batch (training or evaluation). */
    ct_batch batch;
    int eval_batch;
    ct_progress_state st;
    /* Measurements of this process's run. */
    double train_seconds;      /* inside training steps only */
    double train_samples;      /* samples trained by all ranks (this run) */
    int64_t steps_this_run;
    double start_time;
    /* Checkpoint saves (every file) and how long they held the training loop up, the wait for the
     * last asynchronous write at the end of fit included (summary.json). */
    int64_t ckpt_saves;
    double ckpt_blocking_s;
    double ckpt_end_wait_s;     /* of which the wait for the last asynchronous write, at the end */
    FILE *metrics;             /* metrics.csv, global zero only */
    int bar_active;            /* a progress bar line is on screen */
    int use_bar, use_plain;    /* --progress: a live bar, or plain lines (neither: off) */
    ct_error step_err;         /* filled by the grad-ready callback */
    int stop_enabled;          /* fit: look for stop signals at step boundaries */
    ct_stop_state stop;
    /* The flags riding on the step's gradient exchange, summed over the ranks: [a stop signal, the
     * requeue signal, a non-finite training loss in the window]. */
    double stop_sums[3];
    int loss_bad;              /* this rank's window so far had a non-finite loss */
    int stop_posted;           /* stop_sums holds the last step's sums, not yet looked at */
    /* Gradient accumulation: the sum of the window's earlier micro-batches' gradients (NULL when
     * accumulate is 1), and where the micro-batch that runs now stands in its window. */
    void *accum;
    int micro, window;
    int grads_on_host;         /* the model computes in host memory (accumulation, clipping, norms) */
    double last_grad_norm;     /* of the last optimizer step (before clipping); NaN: not measured */
    struct ct_tb_writer *tb;   /* TensorBoard event file, global zero only (engine/loops/tensorboard.c) */
    /* Straggler detection (engine/loops/straggler.c): its state (NULL: off), the nodes named so far
     * (for summary.json), those slow in the last window (metrics.csv's stragglers column), and
     * whether --on-straggler stop ended the fit. */
    struct ct_straggler *strag;
#define CT_MAX_STRAGGLERS 8
    struct ct_straggler_named {
        char node[64];
        int rank;              /* the node's slowest rank */
        int64_t step;          /* the optimizer step it was named at */
        double busy_ms, median_ms; /* its busy time per step, the median node's, in that window */
    } stragglers[CT_MAX_STRAGGLERS];
    int n_stragglers;
    char straggling_now[256];
    int straggler_stop;
    double straggler_seconds;   /* spent in the windows' gathers and judgement (summary.json) */
} ct_run;

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

/* --- hang forensics (engine/loops/hang.c, diagnose.c) --------------------------------------- */
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

/* --- stragglers (engine/loops/straggler.c) ---------------------------------------------------- */
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

/* --- checkpoints (engine/loops/checkpoint.c) -------------------------------------------------- */
/* Save the run's weights, optimizer state and counters through the strategy (rank 0 writes). */
int ct_run_save_checkpoint(ct_run *run, const char *path, ct_error *err);
/* Wait for the pending asynchronous write (ct_strategy_checkpoint_wait), timed with the saves. */
int ct_run_checkpoint_wait(ct_run *run, ct_error *err);
/* A checkpoint's metadata value for key ("" when absent) without loading tensors; every rank reads. */
int ct_run_checkpoint_meta(ct_run *run, const char *path, const char *key, char *out, size_t size, ct_error *err);
/* Load a checkpoint into the run. weights_only: skip optimizer state and counters (validate/test). */
int ct_run_load_checkpoint(ct_run *run, const char *path, int weights_only, ct_error *err);

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
