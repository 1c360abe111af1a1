/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the Trainer: fit, validate and test a registered model (--model, default the MLP) on a
 * registered data module (--datamodule, default the model's: Fashion-MNIST for the MLP).
 *
 * --deterministic is the connector's (ct_connector_flags.deterministic, recorded in the plan).
 *
 * The caller calls ct_engine_init() once, then creates the connector (ct_connector_create) from the
 * accelerator/strategy/precision flags; the Trainer creates the strategy from its plan
 * (ct_strategy_create_from_plan), runs its rank body through ct_strategy_launch, so one code
 * path serves the external, subprocess and fork launchers, and frees it before returning. After
 * a collective timeout under MPI, freeing it ends the job (MPI_Abort): the Trainer then prints the
 * error to stderr first (ct_strategy_free_reported), since nothing after the free runs.
 * Every rank trains its shard; rank 0 alone writes metrics.csv, checkpoints and summary.json, and
 * its result comes back to the caller (through a pipe under the fork launcher).
 *
 * Outputs in default_root_dir (created when missing; default "runs"):
 *   metrics.csv         step,epoch,train_loss,val_loss,val_acc,lr,samples_per_sec,grad_norm[,val_<metric>...]
 *   events.out.tfevents.*  the same scalars and the hyper-parameters for TensorBoard
 *   last.safetensors    after every epoch (and when fit stops inside one)
 *   best.safetensors    the checkpoint with the best monitored metric so far (--monitor: default
 *                       val_acc, or val_loss for a model without accuracy, e.g. a language model);
 *                       with --save-top-k K > 1 also the K best as epoch=E-step=S.safetensors
 *   summary.json        at the end of fit: epochs, steps, world_size, train_samples_per_sec,
 *                       val_acc, test_acc (test runs on best.safetensors), ...
 *
 * Signals (fit): the requeue signal (default SIGUSR1), SIGTERM and SIGINT make every rank stop
 * after the same step; rank 0 saves last.safetensors there. After the requeue signal inside a
 * SLURM job (and unless auto_requeue is 0) the job is requeued through libslurm. ct_trainer_fit
 * then returns CT_EINTR with err->id "fit-requeued" or "fit-stopped" (the CLI exits 75), or an
 * error naming the failed requeue ("requeue-failed", the checkpoint is written all the same).
 * The stop signals are read by a thread of ctrain's, never by a handler on a computing thread
 * (oneDNN's JIT kernels cannot take one: see engine/trainer/stop.c). A program that calls
 * ct_trainer_hold_stop_signals() first thing in main() also keeps a stop that comes during
 * start-up (and so do the ranks ctrain's own launchers start from it): the run then stops at
 * its first step boundary with a checkpoint, instead of the signal's default action.
 */
#ifndef CTRAIN_TRAINER_H
#define CTRAIN_TRAINER_H

#include <stdint.h>

#include "ctrain/callback.h"
#include "ctrain/connector.h"
#include "ctrain/error.h"

#define CT_TRAINER_PATH_MAX 1024
#define CT_TRAINER_MAX_CALLBACKS 8

enum ct_trainer_progress {
    CT_TRAINER_PROGRESS_AUTO = 0, /* a live bar when stdout is a TTY, plain lines otherwise */
    CT_TRAINER_PROGRESS_BAR,
    CT_TRAINER_PROGRESS_PLAIN,
    CT_TRAINER_PROGRESS_OFF
};

/* One field per trainer flag (ctrain fit --help). ct_trainer_config_default fills the defaults. */
typedef struct ct_trainer_config {
    int max_epochs;                 /* --max-epochs, default 5 */
    long max_steps;                 /* --max-steps, default -1 (no limit) */
    int batch_size;                 /* --batch-size, per rank, default 128 */
    double lr;                      /* --lr, default 1e-3: the peak of the schedule */
    char lr_schedule[16];           /* --lr-schedule cosine|constant, default cosine (to 0 at the end) */
    char optimizer[16];             /* --optimizer adamw|sgd, default adamw */
    double weight_decay;            /* --weight-decay, default -1: adamw 0.01, sgd 0 */
    double momentum;                /* --momentum (sgd), default 0.9 */
    uint64_t seed;                  /* --seed, default 42 */
    char default_root_dir[CT_TRAINER_PATH_MAX]; /* --default-root-dir, default "runs": the user's own,
                                       not writable by others unless sticky (else refused) */
    char ckpt_path[CT_TRAINER_PATH_MAX];  /* --ckpt-path: "" (fit: "auto" in a SLURM job, else from
                                             scratch; validate/test: "best"), "auto" (fit: resume
                                             last.safetensors when this job wrote it, else start
                                             fresh), "last", "best" or a file */
    char init_from[CT_TRAINER_PATH_MAX];  /* --init-from: fit starts from this Hugging Face checkpoint's
                                             weights (the model's config must hold them: the CLI
                                             derives --model-config from the file); "" none. A
                                             resumed checkpoint (--ckpt-path) wins over it. */
    int weights_only;               /* --weights-only: fit loads only ckpt_path's weights and starts a
                                       new run (fine-tuning); no resume checks */
    char requeue_signal[16];        /* --requeue-signal, default "USR1": stop, checkpoint, requeue */
    char dump_signal[16];           /* --dump-signal: writes every rank's hang record, stops nothing; "" (default):
                                     * USR2, none when USR2 is the requeue signal; "none": off */
    int auto_requeue;               /* 1 (default); 0: --no-auto-requeue (stop and checkpoint only) */
    double collective_timeout;      /* --collective-timeout seconds, default 300: a collective that
                                       takes longer ends every rank, naming the missing ones */
    int log_every_n_steps;          /* --log-every-n-steps, default 50 */
    int checkpoint_every_n_steps;   /* --checkpoint-every-n-steps, default 0 (epoch ends only) */
    int async_checkpoint;           /* --async-checkpoint: last.safetensors written by a background thread */
    enum ct_trainer_progress progress; /* --progress auto|bar|plain|off */
    char data_dir[CT_TRAINER_PATH_MAX]; /* --data, default /usr/share/datasets/fashion-mnist */
    double val_fraction;            /* --val-fraction, default 1/12 */
    /* Lightning's trainer controls (README, "Training controls"). */
    int accumulate_grad_batches;    /* --accumulate-grad-batches, default 1: an optimizer step every N batches */
    double gradient_clip_val;       /* --gradient-clip-val, default 0 (no clipping) */
    char gradient_clip_algorithm[8]; /* --gradient-clip-algorithm norm|value, default "" (norm) */
    long val_check_interval;        /* --val-check-interval N optimizer steps, default 0: at epoch ends */
    double limit_val_batches;       /* --limit-val-batches: a count (limit_val_is_count) or a fraction, default 1.0 */
    int limit_val_is_count;
    long warmup_steps;              /* --warmup-steps, default 0: linear warm-up before the schedule */
    double min_lr;                  /* --min-lr, default 0: where the cosine decay ends */
    int min_lr_set;
    char monitor[32];               /* --monitor, default "" (val_acc, or val_loss for a model without accuracy) */
    char mode[8];                   /* --mode min|max, default "" (max for val_acc, min otherwise) */
    int save_top_k;                 /* --save-top-k, default 1 (best.safetensors); -1: every validation; 0: none */
    int early_stopping_patience;    /* --early-stopping-patience, default 0 (off) */
    int tensorboard;                /* 1 (default): TensorBoard event files beside metrics.csv */
    /* Preflight (ctrain preflight, fit --preflight; README "Preflight"): a node is named when its
     * figure is this far from the median of the nodes. */
    int preflight;                  /* --preflight: fit runs the checks before its first step */
    char preflight_checks[64];      /* --preflight-checks, default "all" (compute,network,allreduce) */
    double preflight_compute_factor;   /* --preflight-compute-factor, default 3: GEMM rate < median / 3 */
    double preflight_latency_factor;   /* --preflight-latency-factor, default 4: latency > 4 x median ... */
    double preflight_latency_floor_ms; /* --preflight-latency-floor, default 5: ... and > median + 5 ms */
    double preflight_bandwidth_factor; /* --preflight-bandwidth-factor, default 4: bandwidth < median / 4 */
    /* Stragglers during fit (README "Stragglers"). */
    char on_straggler[8];           /* --on-straggler off|warn|stop|exclude, default "off" */
    int straggler_every;            /* --straggler-every N optimizer steps, default 8 */
    double straggler_factor;        /* --straggler-factor X, default 2: busy > 2 x the median node's */
    int straggler_windows;          /* --straggler-windows K, default 3 windows in a row */
    /* The TCP store of ddp without a PMIx server (README "ddp without a PMIx server"). */
    char run_id[66];                /* --run-id, default $CTRAIN_RUN_ID or "": its keys' prefix beside the job's
                                       id; letters, digits, '.', '_', '-' */
    char store_bind[256];           /* --store-bind, default $CTRAIN_STORE_BIND or "": where rank 0's store
                                       listens ("" MASTER_ADDR's addresses, "all", or ADDR[,ADDR...]) */
    char store_secret_file[CT_TRAINER_PATH_MAX]; /* --store-secret-file, default $CTRAIN_STORE_SECRET_FILE or
                                       "": a file only this user can read, whose bytes every store client
                                       must prove it holds */
    /* The program's own callbacks (include/ctrain/callback.h; ct_trainer_add_callback), called in
     * this order after the loggers' hooks and before the checkpoints'. Every rank runs the program
     * and sets them alike; each rank's callback state is its own. fit only. */
    ct_callback callbacks[CT_TRAINER_MAX_CALLBACKS];
    int n_callbacks;
} ct_trainer_config;

/* What a run reports (rank 0's; plain data so it can cross a pipe). NaN where not measured. */
typedef struct ct_trainer_result {
    int filled;                     /* 1 when a rank-0 body filled it (0 in a subprocess supervisor) */
    int epochs;                     /* completed epochs */
    long steps;                     /* optimizer steps (global step) */
    int world_size;
    double train_samples_per_sec;   /* all ranks together, training steps only, this run */
    double train_loss;              /* mean over the last logging interval */
    double val_loss, val_acc;       /* at the last validation */
    double best_val_acc;
    double test_loss, test_acc;
    long eval_samples;              /* validate/test: samples evaluated */
    /* The model's own metrics (ct_model_info.metric_names), at the last validation and on test. */
    int n_metrics;
    char metric_names[4][24];
    double val_metrics[4], test_metrics[4];
    char model[320];                /* "mlp 784-512-256-10" */
    char best_checkpoint[CT_TRAINER_PATH_MAX];     /* fit: best.safetensors, which the test ran on ("" none) */
    char evaluated_checkpoint[CT_TRAINER_PATH_MAX]; /* validate/test: the checkpoint evaluated */
    char last_checkpoint[CT_TRAINER_PATH_MAX];
    char summary_path[CT_TRAINER_PATH_MAX];
    /* fit: rank 0's measured peaks of resident memory (mincore, not computed), as summary.json's
     * "memory" object: mem_names[i] ("param_bytes_peak", ..., "activation_bytes_peak" when the
     * model measures its activation buffers) and its bytes. */
    int n_mem;
    char mem_names[6][32];
    double mem_bytes[6];
} ct_trainer_result;

void ct_trainer_config_default(ct_trainer_config *cfg);

/* Add a callback of the program's own to a fit (Lightning's Trainer(callbacks=[...])): its hooks are
 * called with self on every rank. CT_EINVAL when ops is NULL or CT_TRAINER_MAX_CALLBACKS are added. */
int ct_trainer_add_callback(ct_trainer_config *cfg, const ct_callback_ops *ops, void *self, ct_error *err);

/* Check the config on its own (ranges, names). fit/validate/test check the config they are given
 * (this, and --requeue-signal), once, before launching anything: a caller need not. */
int ct_trainer_config_check(const ct_trainer_config *cfg, ct_error *err);

/* Train (resuming from ckpt_path when set), then test best.safetensors on the test set. */
int ct_trainer_fit(const ct_trainer_config *cfg, ct_connector *conn, ct_trainer_result *res, ct_error *err);
/* Block the signals --requeue-signal may name in the calling thread, before the program starts
 * any thread; ct_trainer_fit then unblocks those it does not catch. Call it only in a program
 * that goes on to ct_trainer_fit (as `ctrain fit` does). */
void ct_trainer_hold_stop_signals(void);
/* The preflight checks on every rank (ctrain preflight): a GEMM rate per rank, latency and
 * bandwidth between nodes, a timed allreduce; rank 0 prints the table and writes
 * default_root_dir/preflight.json. *named: nodes that failed a check or are outliers (0: all
 * passed). Returns 0 when the checks ran, whatever they found. */
int ct_trainer_preflight(const ct_trainer_config *cfg, ct_connector *conn, int *named, ct_error *err);
/* Evaluate a checkpoint (ckpt_path; default best) on the validation split. */
int ct_trainer_validate(const ct_trainer_config *cfg, ct_connector *conn, ct_trainer_result *res, ct_error *err);
/* Evaluate a checkpoint (ckpt_path; default best) on the official test set. */
int ct_trainer_test(const ct_trainer_config *cfg, ct_connector *conn, ct_trainer_result *res, ct_error *err);

#endif
