/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — a run's state as a checkpoint (engine/checkpoint/checkpoint.c): weights, optimizer
 * state, counters, the PRNG and the flags, written and read through the strategy (rank 0 writes,
 * every rank loads). The loops call these; this file reads the run (engine/run/run.h) and calls
 * the strategy, never the loops. */
#ifndef CTRAIN_CHECKPOINT_CHECKPOINT_H
#define CTRAIN_CHECKPOINT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/error.h"
#include "engine/run/run.h"

/* Rank 0's checkpoint saves (every file: last, best, top-k) and how long they held the training
 * loop up (synchronous: the whole write and fsync; --async-checkpoint: the copy into host memory and
 * any wait for the previous write), the wait for the last asynchronous write at the end of fit
 * included, and that wait alone (summary.json). */
typedef struct ct_ckpt_timing {
    int64_t saves;
    double blocking_s;
    double end_wait_s;
} ct_ckpt_timing;
/* The run's so far (zeros before any save). */
ct_ckpt_timing ct_run_checkpoint_timing(const ct_run *run);
/* Its handle freed (ct_run_free). */
void ct_run_checkpoint_free(ct_run *run);

/* Save the run's weights, optimizer state and counters through the strategy (rank 0 writes).
 * may_defer: the file may be written in the background, by the strategy's checkpoint IO when it is
 * the asynchronous wrapper (--async-checkpoint). A strategy that saves shards (fsdp's
 * state_dict_type=sharded) makes path a directory instead, every rank writing its own file, at once
 * (engine/checkpoint/sharded.c). */
int ct_run_save_checkpoint(ct_run *run, const char *path, int may_defer, ct_error *err);
/* Wait for the pending asynchronous write (ct_strategy_checkpoint_wait), timed with the saves. */
int ct_run_checkpoint_wait(ct_run *run, ct_error *err);
/* How a restore checks the file before it loads it (meta.c's rules). */
typedef struct ct_ckpt_restore {
    int weights_only;   /* the weights only (validate, test, fit --weights-only): no optimizer state, no counters */
    int deterministic;  /* --deterministic: the world size, batch size and threads must be the file's */
    int same_job;       /* --ckpt-path auto: this SLURM job must have written it */
} ct_ckpt_restore;
/* Load a checkpoint into the run: its metadata read once and checked against the run, then its
 * tensors (every rank reads the file, or every file of a sharded checkpoint's directory; all agree
 * on the verdict). */
int ct_run_restore_checkpoint(ct_run *run, const char *path, const ct_ckpt_restore *how, ct_error *err);

#endif
