/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — Checkpoint IO: how named tensors and metadata reach disk.
 *
 * The Strategy decides who writes (rank 0 under DDP) and calls this; the format (safetensors) lives
 * behind these function pointers. Writes are atomic: temp file in the same directory, fsync,
 * rename, fsync the directory — a kill at any moment leaves the previous file loadable.
 */
#ifndef CTRAIN_CHECKPOINT_IO_H
#define CTRAIN_CHECKPOINT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/dtype.h"
#include "ctrain/error.h"

/* A GPT has 4 + 12 per layer tensors (engine/models/gpt: 64 layers at most), plus the optimizer's. */
#define CT_CKPT_MAX_TENSORS 1024
#define CT_CKPT_MAX_META    64
#define CT_CKPT_MAX_SHAPE   4

typedef struct ct_ckpt_tensor {
    char name[64];
    int dtype;                     /* enum ct_dtype */
    int ndim;
    int64_t shape[CT_CKPT_MAX_SHAPE];
    void *data;                    /* save: caller's; load: caller-provided buffer to fill */
    size_t nbytes;
} ct_ckpt_tensor;

typedef struct ct_ckpt_meta {
    char key[64];
    char value[1024];
} ct_ckpt_meta;

typedef struct ct_ckpt {
    int n_tensors;
    ct_ckpt_tensor tensors[CT_CKPT_MAX_TENSORS];
    int n_meta;
    ct_ckpt_meta meta[CT_CKPT_MAX_META];
    /* Filled by load: a 64-bit hash of the header as read (length and JSON), and of the header then
     * every tensor's bytes read, in the order of tensors[]. Equal digests: the same bytes were read
     * (every rank of a run compares them with rank 0's before training). */
    uint64_t header_digest;
    uint64_t digest;
} ct_ckpt;

/* The name a checkpoint gives a type it stores: safetensors' "F32", "F64", "BF16", "F16" (the
 * metadata of ctrain's format records the parameters' type by the same names); NULL for a type no
 * checkpoint stores. */
const char *ct_ckpt_dtype_name(int dtype);
/* The type (enum ct_dtype) of such a name; -1 for another name or NULL. */
int ct_ckpt_dtype_parse(const char *name);

/* Registered under its descriptor's name (engine/registry/checkpoint_io_NAME.c). */
struct ct_checkpoint_io_ops {
    int (*save)(const char *path, const ct_ckpt *ckpt, ct_error *err);
    /* Load into the buffers already in ckpt->tensors (names, dtypes and shapes must match exactly:
     * a checkpoint for another model shape is CT_EFORMAT naming the tensor); metadata is filled. */
    int (*load)(const char *path, ct_ckpt *ckpt, ct_error *err);
    /* What the file holds, without its data: every tensor's name, dtype, shape and nbytes (data
     * NULL) and the metadata, after the same checks as load (another library's checkpoint:
     * --init-from). */
    int (*list)(const char *path, ct_ckpt *ckpt, ct_error *err);
};

/* The safetensors implementation (engine/checkpoint_io/safetensors.c). Tensors in the file that
 * the caller did not ask for are ignored (e.g. optimizer state when only weights are loaded). */
extern const struct ct_checkpoint_io_ops ct_checkpoint_io_safetensors;

#endif
