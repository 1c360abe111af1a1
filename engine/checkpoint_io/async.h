/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — Lightning's AsyncCheckpointIO: a checkpoint IO wrapped so that its saves are written by a
 * thread of its own (engine/checkpoint_io/async.c). The save copies the checkpoint's tensors and
 * metadata into host memory the wrapper keeps, starts the thread, which writes the copy through the
 * wrapped IO (the same atomic write: temp file, fsync, rename), and returns: the caller trains on.
 * One write at a time: a save waits for the write pending first, and its failure is that save's.
 * A crash mid-write leaves the previous file (the rename never happened). The strategy holds the
 * wrapper when the Trainer installed it (--async-checkpoint) and decides who writes (rank 0). */
#ifndef CTRAIN_CHECKPOINT_IO_ASYNC_H
#define CTRAIN_CHECKPOINT_IO_ASYNC_H

#include "ctrain/checkpoint_io.h"
#include "ctrain/error.h"

typedef struct ct_async_checkpoint_io ct_async_checkpoint_io;

/* The wrapper of inner (not copied: it outlives the wrapper). */
int ct_async_checkpoint_io_new(const struct ct_checkpoint_io_ops *inner, ct_async_checkpoint_io **out, ct_error *err);
/* Wait for the write pending, then copy ckpt and start writing it to path. A failed earlier write
 * is returned (and nothing started); CT_ENOMEM when the copy does not fit. */
int ct_async_checkpoint_io_save(ct_async_checkpoint_io *a, const char *path, const ct_ckpt *ckpt, ct_error *err);
/* Wait for the write pending: its status (0 when none was pending; a NULL wrapper has none). */
int ct_async_checkpoint_io_wait(ct_async_checkpoint_io *a, ct_error *err);
/* Seconds its thread spent writing, the writes waited for so far (0 for NULL). */
double ct_async_checkpoint_io_write_seconds(const ct_async_checkpoint_io *a);
/* Wait for the write pending (its failure is lost: say it first) and free the wrapper; NULL is a no-op. */
void ct_async_checkpoint_io_free(ct_async_checkpoint_io *a);

#endif
