/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the data-module seam: what a model trains on (Lightning's LightningDataModule).
 *
 * A data module owns a dataset's train / val / test splits and hands out batches of typed tensors:
 * x (the input) and y (the target), each [count, per-sample shape...]. Built in:
 *   "fashion-mnist"  x f32 [784] normalised images, y u8 [] class labels (classes 10), shuffled
 *                    every epoch; --data DIR holding the IDX files (default
 *                    /usr/share/datasets/fashion-mnist).
 *   "tokens"         llm.c token shards DIR/train.bin and DIR/val.bin (written by ctrain tokenize):
 *                    x i32 [T] tokens, y i32 [T] the next tokens, windows taken in order;
 *                    T is the model's (setup()).
 * The engine's sampler (engine/data/sampler.h) shards sample indices over the ranks: each rank
 * gathers its own indices with gather(); a data module never needs to know its rank.
 *
 * Life of a data module inside one rank:
 *   open(dir, val_fraction, splits)  read or map what the run needs (fit: train+val; test: test)
 *   info                              what the data is, for the model's create()
 *   setup(x, y)                       the model's per-sample input spec: adapt (token windows of
 *                                     the model's T) or refuse with a message naming both
 *   size(split), gather(split, ...)   the samples of a split and batches of them
 * Data modules register by name (CT_REG_DATAMODULE); `--datamodule NAME` picks one (default: the
 * model's), `--data DIR` where its files are (default: the entry's default_dir).
 */
#ifndef CTRAIN_DATAMODULE_H
#define CTRAIN_DATAMODULE_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/dtype.h"
#include "ctrain/error.h"
#include "ctrain/registry.h"

#define CT_BATCH_MAX_DIMS 4

/* One typed tensor's per-sample shape: ndim 0 is a scalar per sample (a class label). A shape
 * entry 0 in ct_data_info means "any length" (token streams: the model chooses T). */
typedef struct ct_tensor_spec {
    enum ct_dtype dtype;
    int ndim;
    int64_t shape[CT_BATCH_MAX_DIMS - 1];
} ct_tensor_spec;

/* A typed tensor of a batch: [count, spec.shape...] elements of spec.dtype at data. */
typedef struct ct_batch_tensor {
    ct_tensor_spec spec;
    void *data;
} ct_batch_tensor;

/* A batch: count samples of x and y. The buffers belong to whoever made the batch (the model on
 * its device may provide pinned memory, ct_model_batch_buffers); gather() only fills them. */
typedef struct ct_batch {
    int count;
    ct_batch_tensor x, y;
} ct_batch;

enum ct_split {
    CT_SPLIT_TRAIN = 0,
    CT_SPLIT_VAL,
    CT_SPLIT_TEST,
    CT_SPLIT_N
};
/* Which splits open() must load (a bit per split). */
#define CT_SPLITS_FIT  ((1u << CT_SPLIT_TRAIN) | (1u << CT_SPLIT_VAL))
#define CT_SPLITS_TEST (1u << CT_SPLIT_TEST)

/* How the training split is visited (the engine's sampler does it; see engine/data/sampler.h). */
enum ct_train_order {
    CT_ORDER_SHUFFLE = 0,   /* a new permutation every epoch (images) */
    CT_ORDER_SEQUENTIAL     /* in order, sharded round-robin over ranks (token windows, as llm.c) */
};

/* What the data is, filled by open(). */
typedef struct ct_data_info {
    ct_tensor_spec x, y;    /* per sample; a 0 in a shape: any length (the model picks it in setup) */
    int64_t classes;        /* y (and integer x) values lie in [0, classes): 10, or the vocabulary 256 */
    int64_t max_len;        /* sequences: the longest window every loaded split can give; 0 otherwise */
    enum ct_train_order train_order;
    char description[128];  /* "Fashion-MNIST 55000/5000/10000 images", for logs and summary.json */
} ct_data_info;

typedef struct ct_datamodule ct_datamodule;

/* What an implementation provides for an open data module. */
struct ct_datamodule_ops {
    /* The model's per-sample input (x) and target (y): 0, or CT_EINVAL (id "data-model-mismatch")
     * naming what the model wants and what the data holds. May change sizes (token windows). */
    int (*setup)(ct_datamodule *dm, const ct_tensor_spec *x, const ct_tensor_spec *y, ct_error *err);
    /* Samples in a split (0 when not loaded or empty). */
    size_t (*size)(const ct_datamodule *dm, enum ct_split split);
    /* Copy samples idx[0..count) of split into b->x.data and b->y.data (each with room for count
     * samples) and set b->count and the specs. Must not allocate: it runs every step. */
    int (*gather)(const ct_datamodule *dm, enum ct_split split, const uint32_t *idx, int count, ct_batch *b,
                  ct_error *err);
    void (*destroy)(ct_datamodule *dm);
};

/* An open data module. Implementations fill it in open(); the engine only reads it. */
struct ct_datamodule {
    const struct ct_datamodule_ops *ops;
    ct_data_info info;
    void *impl;
};

/* What a data module registers (ct_registry_set_ops(CT_REG_DATAMODULE, name, &class)). */
struct ct_datamodule_class {
    /* dir: --data, or NULL for the registry entry's default_dir. val_fraction: --val-fraction (for
     * data with no validation split of its own). splits: CT_SPLITS_* bits to load. Missing files:
     * CT_ENOENT; wrong content: CT_EFORMAT; the message names the file, the hint what to do. */
    int (*open)(const char *dir, double val_fraction, unsigned splits, ct_datamodule **out, ct_error *err);
};

/* --- what the engine calls (engine/data/datamodule.c) ----------------------------------------- */
/* Open the data module of registry entry dm (the plan's; CT_ENOTAVAIL when its class is not linked). */
int ct_datamodule_open(const ct_registry_entry *dm, const char *dir, double val_fraction, unsigned splits,
                       ct_datamodule **out, ct_error *err);
int ct_datamodule_setup(ct_datamodule *dm, const ct_tensor_spec *x, const ct_tensor_spec *y, ct_error *err);
size_t ct_datamodule_size(const ct_datamodule *dm, enum ct_split split);
int ct_datamodule_gather(const ct_datamodule *dm, enum ct_split split, const uint32_t *idx, int count,
                         ct_batch *b, ct_error *err);
const ct_data_info *ct_datamodule_info(const ct_datamodule *dm);
void ct_datamodule_free(ct_datamodule *dm);

/* What identifies the data of data module dm (its registry entry) in directory dir (NULL or "": the module's default,
 * as ct_datamodule_open; "" out when it has none), wherever it lies: its regular files (not hidden) by
 * name, size and their first and last 64 KiB, as "N files, B bytes, fnv1a64 HEX"; "" when a file
 * there is a FIFO, socket or device (streamed data cannot be identified). A checkpoint records it;
 * resuming on other data is refused. A moved or copied data directory keeps it. */
int ct_datamodule_identity(const ct_registry_entry *dm, const char *dir, char *out, size_t size, ct_error *err);
/* Elements of one sample of spec (the product of its shape; 1 for a scalar). */
size_t ct_tensor_spec_numel(const ct_tensor_spec *spec);
/* "f32[784]", "u8[]", "i32[128]" into buf. */
const char *ct_tensor_spec_str(const ct_tensor_spec *spec, char *buf, size_t size);

#endif
