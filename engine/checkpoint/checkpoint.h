/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — a run's state as a checkpoint (engine/checkpoint/checkpoint.c): weights, optimizer
 * state, counters, the PRNG and the flags, written and read through the strategy (rank 0 writes,
 * every rank loads). The loops call these; this file reads the run (engine/run/run.h) and calls
 * the strategy, never the loops. */
#ifndef CTRAIN_CHECKPOINT_CHECKPOINT_H
#define CTRAIN_CHECKPOINT_CHECKPOINT_H

#include <stddef.h>

#include "ctrain/error.h"
#include "engine/run/run.h"

/* Save the run's weights, optimizer state and counters through the strategy (rank 0 writes). */
int ct_run_save_checkpoint(ct_run *run, const char *path, ct_error *err);
/* Wait for the pending asynchronous write (ct_strategy_checkpoint_wait), timed with the saves. */
int ct_run_checkpoint_wait(ct_run *run, ct_error *err);
/* How a restore checks the file before it loads it (meta.c's rules). */
typedef struct ct_ckpt_restore {
    int weights_only;   /* the weights only (validate, test, fit --weights-only): no optimizer state, no counters */
    int deterministic;  /* --deterministic: the world size, batch size and threads must be the file's */
    int same_job;       /* --ckpt-path auto: this SLURM job must have written it */
} ct_ckpt_restore;
/* Load a checkpoint into the run: its metadata read once and checked against the run, then its
 * tensors (every rank reads the file; all agree on the verdict). */
int ct_run_restore_checkpoint(ct_run *run, const char *path, const ct_ckpt_restore *how, ct_error *err);

#endif
