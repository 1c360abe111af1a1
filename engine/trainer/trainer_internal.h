/* SPDX-License-Identifier: BSD-3-Clause */
/* The Trainer's parts (internal to libctrain), each in its own file as Lightning's connectors:
 * trainer.c calls them top to bottom (build -> place -> fit or evaluate -> report). */
#ifndef CTRAIN_TRAINER_INTERNAL_H
#define CTRAIN_TRAINER_INTERNAL_H

#include <stddef.h>

#include "ctrain/connector.h"
#include "ctrain/trainer.h"
#include "engine/callbacks/callbacks.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/health/fit/hang.h"
#include "engine/health/fit/straggler.h"
#include "engine/loggers/loggers.h"
#include "engine/loops/loops.h"

enum ct_trainer_mode { CT_TRAINER_FIT, CT_TRAINER_VALIDATE, CT_TRAINER_TEST };

/* One fit/validate/test: what every rank's body is given. */
typedef struct ct_trainer_job {
    const ct_trainer_config *cfg;  /* checked once, before launching */
    const ct_plan *plan;           /* the connector's: model, its config, data module, deterministic */
    enum ct_trainer_mode mode;
    int requeue_signal;            /* --requeue-signal, parsed once (signal_connector.c) */
    int dump_signal;               /* --dump-signal, parsed once; 0: none */
} ct_trainer_job;

/* --- the run a rank owns (run.c) ---------------------------------------------------------------- */
/* Fill run's loop options and counters from the config; the job id from the cluster environment. */
void ct_run_options(ct_run *run, const ct_trainer_job *job);
/* The data module for the job's mode, the model built for its data (run->model, on the host), the
 * optimizer and the first weights (and --init-from's). */
int ct_run_build(ct_run *run, const ct_trainer_job *job, ct_error *err);
/* Lightning's model_to_device: the strategy has the accelerator make the model's implementation
 * (run->model from now on; ct_model_host(run->model) stays the host copy), then the batch buffers. */
int ct_run_place(ct_run *run, const ct_trainer_config *cfg, ct_error *err);
/* fit: the monitored metric, the host-gradient controls, the callbacks (the fit's own and cfg's), the
 * train sampler. */
int ct_run_prepare_fit(ct_run *run, const ct_trainer_config *cfg, ct_error *err);
/* Before rank 0's weights are broadcast (ct_run_place): every rank's flags, data identity and
 * parameter count are rank 0's, or every rank fails (CT_ECONFLICT), each that differs naming what
 * (engine/trainer/fingerprint.c). */
int ct_run_check_fingerprint(ct_run *run, ct_error *err);
/* Everything the run owns: data, models, optimizer, buffers, files. */
void ct_run_free(ct_run *run);

/* --- rank 0's steps, told to every rank (rank_zero.c) ---------------------------------------- */
/* rc of a step only rank 0 performed, broadcast: every rank returns an error when it failed. */
int ct_rank_zero_status(ct_run *run, int rc, ct_error *err);
/* Whether path is readable on rank 0, broadcast. */
int ct_rank_zero_file_exists(ct_run *run, const char *path, int *exists, ct_error *err);

/* --- checkpoints: which to resume or evaluate, the output directory (checkpoint_connector.c) --- */
/* fit: check the output directory, choose the checkpoint to resume (--ckpt-path, auto under SLURM)
 * and load it (weights only with --weights-only); *resumed: 1 when the run continues one. */
int ct_ckpt_connector_restore(ct_run *run, const ct_trainer_job *job, int *resumed, ct_error *err);
/* --- preflight (preflight.c) ------------------------------------------------------------------- */
/* The checks of ctrain preflight on every rank, from cfg's thresholds; rank 0 prints to out and
 * writes DIR/preflight.json. *named: nodes named (the same on every rank). */
int ct_trainer_run_preflight(ct_strategy *s, const ct_trainer_config *cfg, FILE *out, int *named, ct_error *err);
/* fit --preflight (nothing otherwise): the checks; a node named is an error, id preflight-named
 * (ctrain fit exits 3). */
int ct_trainer_fit_preflight(ct_strategy *s, const ct_trainer_job *job, ct_error *err);

/* Create the output directory (rank 0) and check it is this user's. */
int ct_ckpt_connector_make_root(const ct_trainer_config *cfg, ct_error *err);
/* fit: create the output directory and open metrics.csv and the TensorBoard file (rank 0). */
int ct_ckpt_connector_open_outputs(ct_run *run, const ct_trainer_config *cfg, int resumed, ct_error *err);
/* fit: the best checkpoint's weights for the test (best "" when none was kept). */
int ct_ckpt_connector_load_best(ct_run *run, const ct_trainer_config *cfg, char *best, size_t size, ct_error *err);
/* validate/test: load --ckpt-path (default best) into path. */
int ct_ckpt_connector_load_eval(ct_run *run, const ct_trainer_config *cfg, char *path, size_t size, ct_error *err);

/* --- catching the stop signals (stop.c) ------------------------------------------------------- */
/* "USR1", "SIGTERM", "15", ... (only signals that end a process by default). 0 or CT_EINVAL. */
int ct_stop_signal_parse(const char *name, int *sig);
/* Catch requeue_sig, SIGTERM and SIGINT: blocked in the calling thread (and the threads it starts
 * later) and read by a thread of their own, which records the signal (a second SIGINT ends the
 * process at once); a thread started before that does not block them records it in a handler.
 * *flags: what was caught, for the loops (run->signals). ct_stop_uninstall restores what was
 * there before. */
int ct_stop_install(int requeue_sig, const ct_stop_flags **flags, ct_error *err);
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

/* --- signals and the requeue (signal_connector.c) ---------------------------------------------- */
/* --requeue-signal into *sig (CT_EINVAL naming it). */
int ct_signal_connector_parse(const ct_trainer_config *cfg, int *sig, ct_error *err);
/* --dump-signal into *sig (0: none), refused when it is the requeue signal. */
int ct_signal_connector_parse_dump(const ct_trainer_config *cfg, int requeue_sig, int *sig, ct_error *err);
/* fit stopped on a signal (every rank after the same step, last.safetensors written): requeue the
 * SLURM job when asked, and return CT_EINTR ("fit-requeued"/"fit-stopped") or the requeue's error. */
int ct_signal_connector_finish(ct_run *run, const ct_trainer_config *cfg, ct_error *err);

/* --- what a run reports (summary.c) -------------------------------------------------------------- */
void ct_summary_flags_json(const ct_trainer_job *job, char *buf, size_t size);
void ct_summary_hparams_json(ct_run *run, const ct_trainer_config *cfg);
int ct_summary_write(const ct_trainer_job *job, const ct_trainer_result *res, const ct_run *run, ct_error *err);
void ct_result_init(ct_trainer_result *res);
void ct_result_model(ct_trainer_result *res, const ct_model *host);
void ct_result_fit(ct_trainer_result *res, const ct_run *run, const ct_eval_result *test, const char *best);
void ct_result_eval(ct_trainer_result *res, enum ct_trainer_mode mode, const ct_eval_result *r, long samples,
                    const char *path);

/* The strategy of a run (config.c), created from a copy of the plan whose collective timeout is
 * the config's (--collective-timeout: set once, before creation), then handed the TCP store's
 * settings (--run-id, --store-bind, --store-secret-file). fit/validate/test and preflight alike. */
int ct_trainer_strategy_create(const ct_trainer_config *cfg, const ct_plan *plan, ct_strategy **out, ct_error *err);

#endif
