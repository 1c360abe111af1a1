/* SPDX-License-Identifier: BSD-3-Clause */
/* Sharded checkpoints (fsdp's state_dict_type=sharded, Lightning's default for FSDP): the checkpoint
 * is a directory under the name a file would have (last.safetensors, as Lightning's last.ckpt becomes
 * a directory), holding
 *   rank-NNNNN.safetensors  rank N's shards: "params" and each "optimizer.NAME", F32, all of the
 *                           same length (the concatenation of its ranges of the parameter array);
 *   index.safetensors       written last: "shard_ranges" F64 [rows, 3] (rank, offset, count: in
 *                           each rank's concatenation order), "shard_digests" F64 [world, 2] (each
 *                           rank file's digest as the checkpoint IO computes it on a whole load,
 *                           high and low 32 bits) and the run's metadata, as a whole file carries it.
 * F64 holds the integers exactly (below 2^53): safetensors has no integer type ctrain's IO stores.
 *
 * Atomic as a whole: the files go into a fresh temporary directory beside the target (PATH.tmp.
 * XXXXXX, whose name rank 0 broadcasts), each rank reads its file back for the digest, a sum tells
 * rank 0 every rank's digest and failure, rank 0 writes the index, fsyncs and renames the directory
 * into place (RENAME_EXCHANGE with an older checkpoint, which is then removed). A kill at any moment
 * leaves the older checkpoint in place; a temporary directory is never named as a checkpoint.
 *
 * The load reads the index, checks the ranges tile the parameter array, reads every rank file whole
 * (its digest against the index's) and scatters its shards into the whole arrays: any strategy at
 * any world size then takes its own parts from them, as from a whole file. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrain/nn.h"
#include "ctrain/strategy.h"
#include "ctrain/util.h"
#include "engine/checkpoint/format.h"
#include "engine/checkpoint/meta.h"
#include "engine/checkpoint/sharded.h"
#include "engine/util/fsutil.h"

#define MAX_WORLD 65536
#define MAX_ROWS (1 << 22)

int ct_ckpt_sharded_is(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void rank_file(char *out, size_t size, const char *dir, int rank)
{
    snprintf(out, size, "%s/rank-%05d.safetensors", dir, rank);
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

    if (fd < 0)
        return -1;
    rc = fsync(fd);
    close(fd);
    return rc;
}

/* One shard file read whole: "params" and every other tensor it lists, each F32 of n elements, into
 * bufs (malloc'd, names in c's order: the same order at save and load, so the same digest). */
static int shard_read(const struct ct_checkpoint_io_ops *io, const char *file, size_t n, ct_ckpt *c, ct_error *err)
{
    int has_params = 0;

    memset(c, 0, sizeof(*c));
    if (io->list(file, c, err))
        return err->code ? err->code : CT_EFORMAT;
    for (int i = 0; i < c->n_tensors; i++) {
        ct_ckpt_tensor *t = &c->tensors[i];

        has_params |= !strcmp(t->name, "params");
        if (t->dtype != CT_DTYPE_F32 || t->ndim != 1 || t->shape[0] != (int64_t)n) {
            ct_error_set(err, CT_EFORMAT, "ckpt-shard", "%s: tensor %s is not F32 [%zu] as the index says", file,
                         t->name, n);
            return ct_error_hint(err, "the directory mixes files of several saves: resume from another checkpoint");
        }
    }
    if (!has_params) {
        ct_error_set(err, CT_EFORMAT, "ckpt-shard", "%s holds no tensor params: not a ctrain shard file", file);
        return ct_error_hint(err, "resume from another checkpoint");
    }
    for (int i = 0; i < c->n_tensors; i++)
        if (!(c->tensors[i].data = malloc(n ? n * sizeof(float) : 1))) {
            for (int j = 0; j < i; j++)
                free(c->tensors[j].data);
            c->n_tensors = 0;
            return ct_error_set(err, CT_ENOMEM, "", "out of memory reading %s", file);
        }
    if (io->load(file, c, err)) {
        for (int i = 0; i < c->n_tensors; i++)
            free(c->tensors[i].data);
        c->n_tensors = 0;
        return err->code ? err->code : CT_EIO;
    }
    return 0;
}

static void shard_free(ct_ckpt *c)
{
    for (int i = 0; i < c->n_tensors; i++)
        free(c->tensors[i].data);
    c->n_tensors = 0;
}

/* --- save ------------------------------------------------------------------------------------- */

/* This rank's file: its parameters' shard and the optimizer's, then read back for its digest. */
static int write_rank(ct_run *run, const char *dir, uint64_t *digest, ct_error *err)
{
    const struct ct_checkpoint_io_ops *io = ct_strategy_checkpoint_io(run->strategy);
    ct_ckpt *c = calloc(1, sizeof(*c));
    const void *mine = NULL;
    size_t lo, count, total, n = 0, *ranges = NULL;
    int k = ct_strategy_shard_layout(run->strategy, run->rank, NULL, 0, NULL), rc = 0;
    char file[1300];

    if (!c || !(ranges = malloc(2 * sizeof(size_t) * (size_t)(k ? k : 1)))) {
        rc = ct_error_set(err, CT_ENOMEM, "", "out of memory saving %s", dir);
        goto out;
    }
    ct_strategy_shard_layout(run->strategy, run->rank, ranges, k, &mine);
    for (int i = 0; i < k; i++)
        n += ranges[2 * i + 1];
    ct_optim_shard_range(run->optim, &lo, &count, &total);
    if (count != n || ct_optim_dtype(run->optim) != CT_DTYPE_F32) {
        rc = ct_error_set(err, CT_EINVAL, "ckpt-sharded", "sharded checkpoint: the optimizer's shard (%zu) is not "
                          "the parameters' (%zu)", count, n);
        ct_error_hint(err, "use --strategy fsdp:state_dict_type=full");
        goto out;
    }
    {
        int64_t shape = (int64_t)n;

        ct_ckpt_tensor_add(c, "params", (void *)mine, CT_DTYPE_F32, 1, &shape, n);
        for (int i = 0; i < ct_optim_num_states(run->optim); i++) {
            char name[64];

            snprintf(name, sizeof(name), "optimizer.%s", ct_optim_state_name(run->optim, i));
            ct_ckpt_tensor_add(c, name, ct_optim_state(run->optim, i), CT_DTYPE_F32, 1, &shape, n);
        }
    }
    rank_file(file, sizeof(file), dir, run->rank);
    if ((rc = io->save(file, c, err)) || (rc = shard_read(io, file, n, c, err)))
        goto out;
    *digest = c->digest;
    shard_free(c);
out:
    free(ranges);
    free(c);
    return rc;
}

/* Rank 0: the index, last, from every rank's layout and the digests the sum brought. */
static int write_index(ct_run *run, const char *dir, const ct_ckpt_record *meta, const double *sums, ct_error *err)
{
    const struct ct_checkpoint_io_ops *io = ct_strategy_checkpoint_io(run->strategy);
    ct_ckpt *c = calloc(1, sizeof(*c));
    double *table = NULL, *digests = malloc(2 * sizeof(double) * (size_t)run->world);
    size_t *ranges = NULL, rows = 0;
    int64_t shape[2];
    char file[1300];
    int rc = 0;

    for (int r = 0; r < run->world; r++)
        rows += (size_t)ct_strategy_shard_layout(run->strategy, r, NULL, 0, NULL);
    if (!c || !digests || !(table = malloc(3 * sizeof(double) * (rows ? rows : 1))) ||
        !(ranges = malloc(2 * sizeof(size_t) * (rows ? rows : 1)))) {
        rc = ct_error_set(err, CT_ENOMEM, "", "out of memory saving %s", dir);
        goto out;
    }
    rows = 0;
    for (int r = 0; r < run->world; r++) {
        int k = ct_strategy_shard_layout(run->strategy, r, ranges, INT32_MAX, NULL);

        for (int i = 0; i < k; i++, rows++) {
            table[3 * rows] = r;
            table[3 * rows + 1] = (double)ranges[2 * i];
            table[3 * rows + 2] = (double)ranges[2 * i + 1];
        }
        digests[2 * r] = sums[1 + 2 * r];
        digests[2 * r + 1] = sums[2 + 2 * r];
    }
    ct_ckpt_record_write(meta, c);
    shape[0] = (int64_t)rows;
    shape[1] = 3;
    ct_ckpt_tensor_add(c, "shard_ranges", table, CT_DTYPE_F64, 2, shape, 3 * rows);
    shape[0] = run->world;
    shape[1] = 2;
    ct_ckpt_tensor_add(c, "shard_digests", digests, CT_DTYPE_F64, 2, shape, 2 * (size_t)run->world);
    snprintf(file, sizeof(file), "%s/%s", dir, CT_CKPT_SHARDED_INDEX);
    rc = io->save(file, c, err);
out:
    free(ranges);
    free(table);
    free(digests);
    free(c);
    return rc;
}

/* Rank 0: tmp in place of path, atomically; an older checkpoint there (a directory or a whole
 * file) is exchanged with it, then removed (ct_fs_replace). */
static int put_in_place(const char *tmp, const char *path, ct_error *err)
{
    if (fsync_dir(tmp))
        return ct_error_set(err, CT_EIO, "ckpt-write", "%s: fsync: %s", tmp, strerror(errno));
    if (ct_fs_replace(tmp, path)) {
        ct_error_set(err, CT_EIO, "ckpt-write", "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
        return ct_error_hint(err, "check the file system of --default-root-dir (renameat2 needed); the previous "
                                  "checkpoint is untouched");
    }
    if (ct_fsync_parent_dir(path))
        return ct_error_set(err, CT_EIO, "ckpt-write", "%s: written, but syncing its directory failed: %s", path,
                            strerror(errno));
    return 0;
}

int ct_ckpt_sharded_save(ct_run *run, const char *path, const ct_ckpt_record *meta, ct_error *err)
{
    struct { int32_t rc; char dir[1200]; } tmp;
    double *sums = calloc(1 + 2 * (size_t)run->world, sizeof(double));
    uint64_t digest = 0;
    ct_error local;
    int rc = 0;

    ct_error_clear(&local);
    memset(&tmp, 0, sizeof(tmp));
    if (!sums)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory saving %s", path);
    if ((rc = ct_strategy_checkpoint_wait(run->strategy, err)))
        goto out;
    if (run->is_zero) {
        ct_fs_remove_stale_temps(path); /* the directories of killed saves */
        if (ct_fs_create_temp_dir(path, tmp.dir, sizeof(tmp.dir)))
            tmp.rc = ct_error_set(&local, CT_EIO, "ckpt-write", "%s: cannot make a temporary directory beside it: %s",
                                  path, strerror(errno));
    }
    if ((rc = ct_strategy_broadcast(run->strategy, &tmp, sizeof(tmp), 0, err)))
        goto out;
    if (tmp.rc) {
        if (run->is_zero)
            *err = local;
        else
            ct_error_set(err, tmp.rc, "ckpt-write", "%s: rank 0 could not make the checkpoint's directory", path);
        rc = tmp.rc;
        goto out;
    }
    tmp.dir[sizeof(tmp.dir) - 1] = '\0';
    /* Every rank's file, then one sum: who failed, and each rank's digest in its own slots. */
    rc = write_rank(run, tmp.dir, &digest, &local);
    sums[0] = rc != 0;
    sums[1 + 2 * run->rank] = (double)(digest >> 32);
    sums[2 + 2 * run->rank] = (double)(digest & 0xffffffffu);
    if ((rc = ct_strategy_reduce_sum(run->strategy, sums, 1 + 2 * run->world, err)))
        goto out;
    tmp.rc = 0;
    if (run->is_zero) {
        if (sums[0] > 0) {
            tmp.rc = local.code ? local.code : CT_EIO;
            if (!local.code)
                ct_error_set(&local, CT_EIO, "ckpt-write", "%s: %.0f of %d ranks could not write their shards", path,
                             sums[0], run->world);
        } else {
            tmp.rc = write_index(run, tmp.dir, meta, sums, &local);
            if (!tmp.rc)
                tmp.rc = put_in_place(tmp.dir, path, &local);
        }
        if (tmp.rc)
            ct_fs_remove(tmp.dir);
    }
    /* The verdict: rank 0's, on every rank. */
    if ((rc = ct_strategy_broadcast(run->strategy, &tmp.rc, sizeof(tmp.rc), 0, err)))
        goto out;
    if ((rc = tmp.rc)) {
        if (local.code)
            *err = local;
        else
            ct_error_set(err, rc, "ckpt-write", "%s: the sharded save failed (see rank 0's message)", path);
    }
out:
    free(sums);
    return rc;
}

/* --- load ------------------------------------------------------------------------------------- */

static void index_path(char *out, size_t size, const char *dir)
{
    snprintf(out, size, "%s/%s", dir, CT_CKPT_SHARDED_INDEX);
}

static int no_index(const char *path, ct_error *err)
{
    ct_error_set(err, CT_EFORMAT, "ckpt-sharded-index", "%s is a directory without %s: not a checkpoint (a sharded "
                 "save that did not finish, or a run directory)", path, CT_CKPT_SHARDED_INDEX);
    return ct_error_hint(err, "give --ckpt-path a checkpoint file, a sharded checkpoint directory, last or best");
}

int ct_ckpt_sharded_meta(const struct ct_checkpoint_io_ops *io, const char *path, ct_ckpt *c, ct_error *err)
{
    char file[1300];
    int rc;

    index_path(file, sizeof(file), path);
    if ((rc = io->load(file, c, err)) == CT_ENOENT && access(file, F_OK) != 0)
        return no_index(path, err);
    return rc;
}

static int row_cmp(const void *a, const void *b)
{
    double x = ((const double *)a)[1], y = ((const double *)b)[1];

    return x < y ? -1 : x > y;
}

/* The table's rows are integers in range and tile [0, n) exactly once. */
static int ranges_ok(const char *path, const double *table, size_t rows, int world, size_t n, ct_error *err)
{
    double *sorted = malloc(3 * sizeof(double) * (rows ? rows : 1));
    double at = 0;
    int ok = sorted != NULL;

    for (size_t i = 0; ok && i < rows; i++) {
        const double *t = &table[3 * i];

        ok = t[0] >= 0 && t[0] < world && t[0] == floor(t[0]) && t[1] >= 0 && t[1] == floor(t[1]) && t[2] >= 0 &&
             t[2] == floor(t[2]) && t[1] + t[2] <= (double)n;
    }
    if (ok) {
        memcpy(sorted, table, 3 * sizeof(double) * rows);
        qsort(sorted, rows, 3 * sizeof(double), row_cmp);
        for (size_t i = 0; ok && i < rows; i++) {
            ok = sorted[3 * i + 1] == at;
            at += sorted[3 * i + 2];
        }
        ok = ok && at == (double)n;
    }
    free(sorted);
    if (ok)
        return 0;
    ct_error_set(err, CT_EFORMAT, "ckpt-sharded-index", "%s/%s: its shard ranges do not cover the model's %zu "
                 "parameters once", path, CT_CKPT_SHARDED_INDEX, n);
    return ct_error_hint(err, "the index was changed or belongs to another model: resume from another checkpoint");
}

/* The index's tensors: shapes listed first, then read. */
static int read_index(const struct ct_checkpoint_io_ops *io, const char *path, ct_ckpt *c, double **table,
                      size_t *rows, double **digests, int *world, ct_error *err)
{
    char file[1300];
    int64_t r = -1, w = -1;
    int rc;

    index_path(file, sizeof(file), path);
    memset(c, 0, sizeof(*c));
    if ((rc = io->list(file, c, err)))
        return rc == CT_ENOENT && access(file, F_OK) != 0 ? no_index(path, err) : rc;
    for (int i = 0; i < c->n_tensors; i++) {
        const ct_ckpt_tensor *t = &c->tensors[i];

        if (t->dtype == CT_DTYPE_F64 && t->ndim == 2 && !strcmp(t->name, "shard_ranges") && t->shape[1] == 3)
            r = t->shape[0];
        if (t->dtype == CT_DTYPE_F64 && t->ndim == 2 && !strcmp(t->name, "shard_digests") && t->shape[1] == 2)
            w = t->shape[0];
    }
    if (r < 0 || r > MAX_ROWS || w < 1 || w > MAX_WORLD) {
        ct_error_set(err, CT_EFORMAT, "ckpt-sharded-index", "%s: no shard table ctrain reads (shard_ranges F64 "
                     "[rows <= %d, 3], shard_digests F64 [world <= %d, 2])", file, MAX_ROWS, MAX_WORLD);
        return ct_error_hint(err, "give --ckpt-path a checkpoint ctrain wrote");
    }
    *rows = (size_t)r;
    *world = (int)w;
    *table = malloc(3 * sizeof(double) * (size_t)(r ? r : 1));
    *digests = malloc(2 * sizeof(double) * (size_t)w);
    if (!*table || !*digests)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory reading %s", file);
    memset(c, 0, sizeof(*c));
    {
        int64_t shape[2] = { r, 3 };

        ct_ckpt_tensor_add(c, "shard_ranges", *table, CT_DTYPE_F64, 2, shape, 3 * (size_t)r);
        shape[0] = w;
        shape[1] = 2;
        ct_ckpt_tensor_add(c, "shard_digests", *digests, CT_DTYPE_F64, 2, shape, 2 * (size_t)w);
    }
    return io->load(file, c, err);
}

/* Rank q's file: read whole, its digest checked, its shards scattered into c's whole arrays. */
static int load_rank(const struct ct_checkpoint_io_ops *io, const char *path, int q, const double *table,
                     size_t rows, const double *digests, ct_ckpt *c, float *params, size_t n, ct_ckpt *shard,
                     ct_error *err)
{
    char file[1300];
    size_t count = 0;
    uint64_t want = ((uint64_t)digests[2 * q] << 32) | (uint64_t)digests[2 * q + 1];
    int rc;

    for (size_t i = 0; i < rows; i++)
        if ((int)table[3 * i] == q)
            count += (size_t)table[3 * i + 2];
    rank_file(file, sizeof(file), path, q);
    if ((rc = shard_read(io, file, count, shard, err))) {
        if (rc == CT_ENOENT)
            ct_error_set(err, CT_EFORMAT, "ckpt-shard-missing", "%s: missing (the index names rank %d's shards)",
                         file, q);
        if (!err->hint[0] || rc == CT_ENOENT)
            ct_error_hint(err, "the checkpoint directory is incomplete: restore it from a copy, or resume from "
                               "another checkpoint");
        return rc == CT_ENOENT ? CT_EFORMAT : rc;
    }
    if (shard->digest != want) {
        shard_free(shard);
        ct_error_set(err, CT_EFORMAT, "ckpt-shard-checksum", "%s: checksum %016llx, the index says %016llx (the file "
                     "changed after the save)", file, (unsigned long long)shard->digest, (unsigned long long)want);
        return ct_error_hint(err, "restore the checkpoint directory from a copy, or resume from another checkpoint");
    }
    /* c's arrays: params (the model's tensors point into it) and the optimizer's, by name */
    for (int t = 0; t < c->n_tensors; t++) {
        const ct_ckpt_tensor *want_t = &c->tensors[t];
        int is_opt = !strncmp(want_t->name, "optimizer.", 10), found = -1;

        if (!is_opt)
            continue;
        for (int i = 0; i < shard->n_tensors; i++)
            if (!strcmp(shard->tensors[i].name, want_t->name))
                found = i;
        if (found < 0 || want_t->nbytes != n * sizeof(float) || want_t->dtype != CT_DTYPE_F32) {
            shard_free(shard);
            ct_error_set(err, CT_EFORMAT, "ckpt-tensor", "%s: no tensor %s F32 [%zu] (another optimizer's "
                         "checkpoint?)", file, want_t->name, n);
            return ct_error_hint(err, "resume with the optimizer that wrote it, or load its weights only "
                                      "(--weights-only)");
        }
        for (size_t i = 0, at = 0; i < rows; i++)
            if ((int)table[3 * i] == q) {
                memcpy((float *)want_t->data + (size_t)table[3 * i + 1], (float *)shard->tensors[found].data + at,
                       (size_t)table[3 * i + 2] * sizeof(float));
                at += (size_t)table[3 * i + 2];
            }
    }
    for (int i = 0; i < shard->n_tensors; i++)
        if (!strcmp(shard->tensors[i].name, "params"))
            for (size_t r = 0, at = 0; r < rows; r++)
                if ((int)table[3 * r] == q) {
                    memcpy(params + (size_t)table[3 * r + 1], (float *)shard->tensors[i].data + at,
                           (size_t)table[3 * r + 2] * sizeof(float));
                    at += (size_t)table[3 * r + 2];
                }
    shard_free(shard);
    return 0;
}

int ct_ckpt_sharded_load(const struct ct_checkpoint_io_ops *io, const char *path, ct_ckpt *c, float *params,
                         size_t n, ct_error *err)
{
    ct_ckpt *index = calloc(1, sizeof(*index)), *shard = calloc(1, sizeof(*shard));
    double *table = NULL, *digests = NULL;
    size_t rows = 0;
    int world = 0, rc;

    if (!index || !shard) {
        rc = ct_error_set(err, CT_ENOMEM, "", "out of memory loading %s", path);
        goto out;
    }
    if ((rc = read_index(io, path, index, &table, &rows, &digests, &world, err)) ||
        (rc = ranges_ok(path, table, rows, world, n, err)))
        goto out;
    for (int q = 0; q < world && !rc; q++)
        rc = load_rank(io, path, q, table, rows, digests, c, params, n, shard, err);
    if (!rc) {
        c->header_digest = index->header_digest;
        c->digest = index->digest;
    }
out:
    free(table);
    free(digests);
    free(shard);
    free(index);
    return rc;
}
