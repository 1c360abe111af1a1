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
/* A checkpoint's metadata value for key ("" when absent) without loading tensors; every rank reads. */
int ct_run_checkpoint_meta(ct_run *run, const char *path, const char *key, char *out, size_t size, ct_error *err);
/* Load a checkpoint into the run. weights_only: skip optimizer state and counters (validate/test). */
int ct_run_load_checkpoint(ct_run *run, const char *path, int weights_only, ct_error *err);

#endif
