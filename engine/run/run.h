/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — ct_run, what the Trainer hands the loops, and its options (ct_loop_options) and state.
 *
 * Internal to libctrain, in a folder of its own below the loops, the loggers, the checkpoint code
 * and the fit's health checks: each of those reads a run, and the loops reach the others only
 * through the run's callback table (engine/run/callbacks.h; the public side is
 * include/ctrain/callback.h). The loops' functions are declared in engine/loops/loops.h.
 */
#ifndef CTRAIN_RUN_RUN_H
#define CTRAIN_RUN_RUN_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/data/sampler.h"
#include "ctrain/callback.h"
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
    uint64_t seed;
    char root_dir[1024];
    char flags_json[1024];     /* the run's flags, stored in checkpoint metadata */
    char job_id[64];           /* SLURM_JOB_ID of this run, stored in checkpoint metadata ("" outside SLURM) */
    int supervised;            /* a step of ctrain supervise, which excludes bad nodes itself (no requeue) */
    int blas_threads;          /* the BLAS threads of each rank, stored in checkpoint metadata */
    int gemm_threads;          /* its OpenMP team (oneDNN's GEMMs, the element-wise passes): the same */
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
     * resuming under another value is refused (engine/checkpoint/checkpoint.c). */
    char datamodule[32];
    char data_identity[128];   /* ct_datamodule_identity of --data; "" when not taken (eval) */
    double val_fraction;
    char model_config[CT_CONFIG_TEXT_MAX]; /* the model's configuration (the plan's, as text) */
    const ct_config_key *model_schema;     /* its schema: a checkpoint's text is compared by value */
    /* Straggler detection (engine/health/fit/straggler.c): off, warn or stop; every N optimizer steps
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

/* What the stop signals left on this rank, written by the Trainer's signal catcher
 * (engine/trainer/stop.c, from a signal handler or its thread) and read by the loops at step
 * boundaries through run->signals. The catcher owns it; the loops get a read-only view, so the
 * dependency points down (Trainer -> loops) and the loops never call the Trainer. */
typedef struct ct_stop_flags {
    volatile sig_atomic_t signal;   /* the first stop signal, 0 when none */
    volatile sig_atomic_t requeue;  /* the requeue signal came (first or later) */
    int requeue_signal;             /* --requeue-signal */
} ct_stop_flags;

/* A stop every rank agreed on at a step boundary (ct_run_stop_agreed, engine/loops/step.c). */
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

/* ct_eval_result: what an evaluation gives (include/ctrain/callback.h). */

/* The training loss of a model that keeps it on the device (ct_model_defers_loss): each step's is read
 * during the next step, once that step's forward is enqueued, or waited for at a drain point
 * (logging, validation, a checkpoint, the epoch loop's end). engine/loops/step.c. */
typedef struct ct_loss_lag {
    int pending;               /* a step's loss is still on the device */
    double terms;              /* its loss terms */
    int64_t step;              /* its optimizer step (global, from 0) */
} ct_loss_lag;

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
    /* The checkpoint saves' timings, behind their handle (engine/checkpoint/checkpoint.h; NULL
     * until the first save). */
    struct ct_ckpt_timing *ckpt_timing;
    /* The loggers' state (metrics.csv, TensorBoard's file, the progress display), behind their
     * handle (engine/loggers/loggers.h; NULL outside fit: they write nothing). */
    struct ct_loggers *loggers;
    ct_error step_err;         /* filled by the grad-ready callback */
    int stop_enabled;          /* fit: look for stop signals at step boundaries */
    const ct_stop_flags *signals; /* the catcher's record (fit; NULL: none caught) */
    ct_stop_state stop;
    /* The flags riding on the step's gradient exchange, summed over the ranks: [a stop signal, the
     * requeue signal, a non-finite training loss in the window]. */
    double stop_sums[3];
    int loss_bad;              /* this rank's window so far had a non-finite loss */
    int stop_posted;           /* stop_sums holds the last step's sums, not yet looked at */
    ct_loss_lag loss_lag;      /* a model keeping its loss on the device: the step not read yet */
    int64_t loss_of;           /* the step whose loss the last forward gave (-1: none, see loops.h) */
    double deferred_loss;      /* a deferred step: the previous step's mean loss (NaN: none) */
    /* Gradient accumulation: the sum of the window's earlier micro-batches' gradients (NULL when
     * accumulate is 1), and where the micro-batch that runs now stands in its window. */
    void *accum;
    int micro, window;
    int grads_on_host;         /* the model computes in host memory (accumulation, clipping, norms) */
    double last_grad_norm;     /* of the last optimizer step (before clipping); NaN: not measured */
    /* Straggler detection (engine/health/fit/straggler.c): its state behind its handle (NULL: off;
     * the nodes it named, for summary.json, through straggler.h), and whether --on-straggler stop
     * or exclude ended the fit (every rank alike, after the same step). */
    struct ct_straggler *strag;
    int straggler_stop;
    /* The callbacks the loops call (engine/run/callbacks.h), in the order they are called. */
    ct_callback callbacks[CT_RUN_MAX_CALLBACKS];
    int n_callbacks;
} ct_run;

#endif
