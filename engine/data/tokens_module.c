/* SPDX-License-Identifier: BSD-3-Clause */
/* The "tokens" data module: llm.c token shards DIR/train.bin and DIR/val.bin (ctrain tokenize)
 * through the shard reader (engine/data/tokens.c). A sample is a window of the model's T tokens:
 * x i32[T] the tokens, y i32[T] the next ones; training visits the windows in order (sharded
 * round-robin over the ranks by the engine's sampler, as llm.c's loader does). The test split is
 * DIR/test.bin when it exists, else val.bin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/datamodule.h"
#include "engine/data/datamodules.h"
#include "engine/data/tokens.h"

struct tokens {
    ct_datamodule dm;
    char path[CT_SPLIT_N][1100];
    ct_token_windows w[CT_SPLIT_N];
    int loaded[CT_SPLIT_N];
};

static void tokens_destroy(ct_datamodule *dm)
{
    struct tokens *t = dm->impl;

    for (int i = 0; i < CT_SPLIT_N; i++)
        free(t->w[i].tokens);
    free(t);
}

/* The model's windows: x and y i32[T]; every loaded split must hold at least one. */
static int tokens_setup(ct_datamodule *dm, const ct_tensor_spec *x, const ct_tensor_spec *y, ct_error *err)
{
    struct tokens *t = dm->impl;
    char want[64];
    int rc;

    if (x->dtype != CT_DTYPE_I32 || x->ndim != 1 || x->shape[0] < 1 || y->dtype != CT_DTYPE_I32 ||
        y->ndim != 1 || y->shape[0] != x->shape[0]) {
        ct_error_set(err, CT_EINVAL, "data-model-mismatch",
                     "the model takes x %s, but the tokens data module gives windows of tokens (i32[T])",
                     ct_tensor_spec_str(x, want, sizeof(want)));
        return ct_error_hint(err, "use a language model (--model gpt) with --datamodule tokens");
    }
    for (int i = 0; i < CT_SPLIT_N; i++)
        if (t->loaded[i] && (rc = ct_token_windows_set_len(&t->w[i], (int)x->shape[0], t->path[i], err)))
            return rc;
    dm->info.x = *x;
    dm->info.y = *y;
    return 0;
}

static size_t tokens_size(const ct_datamodule *dm, enum ct_split s)
{
    const struct tokens *t = dm->impl;

    return (unsigned)s < CT_SPLIT_N && t->loaded[s] ? t->w[s].count : 0;
}

static int tokens_gather(const ct_datamodule *dm, enum ct_split s, const uint32_t *idx, int count, ct_batch *b,
                         ct_error *err)
{
    const struct tokens *t = dm->impl;

    if ((unsigned)s >= CT_SPLIT_N || !t->loaded[s] || !t->w[s].seq_len)
        return ct_error_set(err, CT_EINTERNAL, "", "tokens: split %d is not set up", (int)s);
    ct_token_windows_gather(&t->w[s], idx, count, b->x.data, b->y.data);
    b->count = count;
    b->x.spec = dm->info.x;
    b->y.spec = dm->info.y;
    return 0;
}

static const struct ct_datamodule_ops tokens_ops = {
    .setup = tokens_setup,
    .size = tokens_size,
    .gather = tokens_gather,
    .destroy = tokens_destroy,
};

static int load(struct tokens *t, enum ct_split s, const char *dir, const char *file, ct_error *err)
{
    int rc;

    snprintf(t->path[s], sizeof(t->path[s]), "%s/%s", dir, file);
    if ((rc = ct_tokens_read(t->path[s], 0, &t->w[s].tokens, &t->w[s].n, err))) {
        if (rc == CT_ENOENT)
            ct_error_hint(err, "write %s/train.bin and val.bin with: ctrain tokenize --input FILE --output-dir %s",
                          dir, dir);
        return rc;
    }
    t->loaded[s] = 1;
    return 0;
}

static int tokens_open(const char *dir, double val_fraction, unsigned splits, ct_datamodule **out, ct_error *err)
{
    struct tokens *t;
    char test[1100];
    ct_data_info *info;
    int rc = 0, max_token = -1, max_split = 0;
    int64_t shortest = -1;
    const char *shard[CT_SPLIT_N];

    *out = NULL;
    if (!dir || !dir[0]) {
        ct_error_set(err, CT_EINVAL, "data-missing", "--datamodule tokens needs --data DIR (train.bin, val.bin)");
        return ct_error_hint(err, "ctrain tokenize --input FILE --output-dir DIR, then --data DIR");
    }
    if (!(t = calloc(1, sizeof(*t))))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory");
    t->dm.ops = &tokens_ops;
    t->dm.impl = t;
    snprintf(test, sizeof(test), "%s/test.bin", dir);
    if (splits & CT_SPLITS_FIT)
        rc = load(t, CT_SPLIT_TRAIN, dir, "train.bin", err);
    if (!rc && (splits & CT_SPLITS_FIT))
        rc = load(t, CT_SPLIT_VAL, dir, "val.bin", err);
    if (!rc && (splits & CT_SPLITS_TEST))
        rc = load(t, CT_SPLIT_TEST, dir, access(test, R_OK) == 0 ? "test.bin" : "val.bin", err);
    if (rc) {
        tokens_destroy(&t->dm);
        return rc;
    }
    /* What the model must cover: the largest token, and the longest window every split holds. */
    for (int s = 0; s < CT_SPLIT_N; s++) {
        if (!t->loaded[s])
            continue;
        for (size_t i = 0; i < t->w[s].n; i++)
            if (t->w[s].tokens[i] > max_token) {
                max_token = t->w[s].tokens[i];
                max_split = s;
            }
        if (shortest < 0 || (int64_t)t->w[s].n - 1 < shortest)
            shortest = (int64_t)t->w[s].n - 1;
    }
    info = &t->dm.info;
    info->x.dtype = info->y.dtype = CT_DTYPE_I32;
    info->x.ndim = info->y.ndim = 1;
    info->x.shape[0] = info->y.shape[0] = 0; /* any T: the model's */
    info->classes = max_token + 1;
    info->max_len = shortest > 0 ? shortest : 0;
    info->train_order = CT_ORDER_SEQUENTIAL;
    /* The shard holding the largest token comes first: a model's vocabulary error quotes it. */
    shard[CT_SPLIT_TRAIN] = "train.bin";
    shard[CT_SPLIT_VAL] = "val.bin";
    shard[CT_SPLIT_TEST] = access(test, R_OK) == 0 ? "test.bin" : "val.bin";
    snprintf(info->description, sizeof(info->description), "tokens %s: %zu train / %zu val / %zu test tokens, "
             "the largest %d in %s", dir, t->w[CT_SPLIT_TRAIN].n, t->w[CT_SPLIT_VAL].n, t->w[CT_SPLIT_TEST].n,
             max_token, shard[max_split]);
    *out = &t->dm;
    return 0;
}

const struct ct_datamodule_class ct_datamodule_tokens = { .open = tokens_open };
