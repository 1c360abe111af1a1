/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — sharded checkpoints (engine/checkpoint/sharded.c): a checkpoint that is a directory, one
 * file of shards per rank that wrote it and one index, written atomically as a whole, loaded whole
 * by any strategy at any world size (resharding). */
#ifndef CTRAIN_CHECKPOINT_SHARDED_H
#define CTRAIN_CHECKPOINT_SHARDED_H

#include <stddef.h>

#include "ctrain/checkpoint_io.h"
#include "ctrain/error.h"
#include "engine/checkpoint/meta.h"
#include "engine/run/run.h"

/* The index's name inside the directory; each rank's file is rank-NNNNN.safetensors. */
#define CT_CKPT_SHARDED_INDEX "index.safetensors"

/* path names a directory (a sharded checkpoint, or a directory that is none: the load says). */
int ct_ckpt_sharded_is(const char *path);
/* Save: every rank writes its shards (ct_strategy_shard_layout) of the parameters and of the
 * optimizer's arrays into a fresh temporary directory beside path, reads them back for their
 * checksums; rank 0 writes the index (the ranges, the checksums, meta: the run's metadata) last
 * and renames the directory into place, exchanging it with an older one. A collective; every rank
 * returns the same verdict. */
int ct_ckpt_sharded_save(ct_run *run, const char *path, const ct_ckpt_record *meta, ct_error *err);
/* The index's metadata into c (no tensors), its header digest in c->header_digest. */
int ct_ckpt_sharded_meta(const struct ct_checkpoint_io_ops *io, const char *path, ct_ckpt *c, ct_error *err);
/* The tensors c names (params: the model's parameter array, n fp32 elements, which c's model
 * tensors point into; "optimizer.NAME": whole state arrays of n elements) from every shard file,
 * each checked against the index's checksum. c->header_digest and c->digest: the index's. */
int ct_ckpt_sharded_load(const struct ct_checkpoint_io_ops *io, const char *path, ct_ckpt *c, float *params,
                         size_t n, ct_error *err);

#endif
