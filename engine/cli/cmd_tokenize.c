/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain tokenize — text files to byte-level token shards (DIR/train.bin, DIR/val.bin) that
 * `ctrain fit --model gpt --data DIR` trains on; see engine/data/tokens.h for the format. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrain/error.h"
#include "ctrain/util.h"
#include "engine/cli/commands.h"
#include "engine/data/tokens.h"
#include "engine/util/fsutil.h"

#define TOKENIZE_MAX_INPUTS 256
#define TOKENIZE_DEFAULT_VAL 0.1

static void tokenize_usage(FILE *out)
{
    fprintf(out,
            "usage: ctrain tokenize --input FILE [--input FILE ...] --output-dir DIR [--val-fraction X]\n"
            "\n"
            "Turn text into byte-level tokens (vocabulary 256: one token per byte) and write them as\n"
            "llm.c token shards DIR/train.bin and DIR/val.bin, which `ctrain fit --model gpt --data DIR`\n"
            "reads. The inputs are joined in the order given; the last X of the bytes go to val.bin.\n"
            "Both files are written to temporary names and renamed at the end: on any error nothing in\n"
            "DIR changes.\n"
            "\n"
            "  --input FILE       a text file (repeatable; at most %d)\n"
            "  --output-dir DIR   where train.bin and val.bin go (created with its parents when missing)\n"
            "  --val-fraction X   share of the bytes for validation, 0 < X < 1 (default %.1f)\n",
            TOKENIZE_MAX_INPUTS, TOKENIZE_DEFAULT_VAL);
}

/* Append the bytes of path to *buf (*len used, *cap allocated). */
static int append_file(const char *path, uint16_t **buf, size_t *len, size_t *cap, ct_error *err)
{
    unsigned char chunk[65536];
    /* Opened as every input is (engine/util/fsutil.h): a regular file, a FIFO never waited on. */
    int fd = ct_fs_open_input(path, "--input", err);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    size_t start = *len, r;

    if (!f) {
        if (fd >= 0)
            close(fd);
        /* A missing file, a directory or a pipe is bad input (exit 2), as a bad flag is. */
        if (err && err->code != CT_EIO)
            err->code = CT_EINVAL;
        return err ? ct_error_hint(err, "give a readable text file (each with its own --input)") : CT_EINVAL;
    }
    while ((r = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (*len + r > *cap) {
            size_t ncap = (*cap ? *cap * 2 : (size_t)1 << 20);
            uint16_t *nbuf;

            while (ncap < *len + r)
                ncap *= 2;
            if (!(nbuf = realloc(*buf, ncap * sizeof(uint16_t)))) {
                fclose(f);
                return ct_error_set(err, CT_ENOMEM, "", "--input %s: out of memory after %zu bytes", path, *len);
            }
            *buf = nbuf;
            *cap = ncap;
        }
        for (size_t i = 0; i < r; i++)
            (*buf)[*len + i] = chunk[i];
        *len += r;
        if (*len > CT_TOKENS_MAX) {
            fclose(f);
            ct_error_set(err, CT_EINVAL, "tokenize-input", "the inputs hold more than %zu bytes, a shard's limit",
                         CT_TOKENS_MAX);
            return ct_error_hint(err, "tokenize fewer files per output directory");
        }
    }
    if (ferror(f)) {
        fclose(f);
        return ct_error_set(err, CT_EIO, "tokenize-input", "--input %s: read failed", path);
    }
    fclose(f);
    if (*len == start) {
        ct_error_set(err, CT_EINVAL, "tokenize-input", "--input %s is empty", path);
        return ct_error_hint(err, "give files that hold text");
    }
    /* A shard fed back in as text would train on its header and uint16 halves: refuse it. */
    if (*len - start >= 4 && (*buf)[start] == (CT_TOKENS_MAGIC & 0xff) &&
        (*buf)[start + 1] == ((CT_TOKENS_MAGIC >> 8) & 0xff) && (*buf)[start + 2] == ((CT_TOKENS_MAGIC >> 16) & 0xff) &&
        (*buf)[start + 3] == ((CT_TOKENS_MAGIC >> 24) & 0xff)) {
        ct_error_set(err, CT_EINVAL, "tokenize-input", "--input %s is a token shard already (magic %d), not text", path,
                     CT_TOKENS_MAGIC);
        return ct_error_hint(err, "give the text it was made from; fit reads shards directly with --data DIR");
    }
    return 0;
}

/* DIR and its missing parents, as --default-root-dir's are made (`--output-dir data/fortunes` on a
 * fresh clone has no data/), then the same check as a run's directory: ours, and not writable by
 * others without the sticky bit, since the shards are renamed into it. */
static int make_dir(const char *dir, ct_error *err)
{
    char failed[4096];
    int rc;

    if (ct_fs_mkdirs(dir, failed, sizeof(failed)) != 0) {
        ct_error_set(err, CT_EINVAL, "tokenize-output", "--output-dir %s: cannot create %s: %s", dir, failed,
                     strerror(errno));
        return ct_error_hint(err, "give a directory you can write");
    }
    if ((rc = ct_fs_check_dir(dir, "--output-dir", err)) != 0 && !err->hint[0])
        ct_error_hint(err, "give a directory of your own for the shards");
    return rc;
}

/* Both shards to temporary files, then both renamed: a failure leaves DIR as it was. The two
 * renames are not one step, so the old train.bin keeps a second name until val.bin is in place,
 * and goes back when val.bin's rename fails (no new train.bin beside an old val.bin). */
static int write_shards(const char *dir, const uint16_t *tokens, size_t n_train, size_t n_val, ct_error *err)
{
    char path[2][4200], tmp[2][4200], keep[4300];
    int rv, kept;

    if (snprintf(path[0], sizeof(path[0]), "%s/train.bin", dir) >= (int)sizeof(path[0]) ||
        snprintf(path[1], sizeof(path[1]), "%s/val.bin", dir) >= (int)sizeof(path[1]) ||
        snprintf(keep, sizeof(keep), "%s/.train.bin.previous", dir) >= (int)sizeof(keep))
        return ct_error_set(err, CT_EINVAL, "tokenize-output", "--output-dir is too long");
    if ((rv = ct_tokens_write_temp(path[0], tokens, n_train, tmp[0], sizeof(tmp[0]), err)) != 0)
        return rv;
    if ((rv = ct_tokens_write_temp(path[1], tokens + n_train, n_val, tmp[1], sizeof(tmp[1]), err)) != 0) {
        unlink(tmp[0]);
        return rv;
    }
    unlink(keep);   /* left by a run that died between the renames: train.bin is in place */
    kept = link(path[0], keep) == 0;
    if (!kept && errno != ENOENT) {
        rv = ct_error_set(err, CT_EIO, "tokenize-output", "%s: cannot keep the previous train.bin while replacing "
                          "it: %s", keep, strerror(errno));
        goto fail;
    }
    if ((rv = ct_tokens_publish(tmp[0], path[0], err)) != 0)
        goto fail;
    if ((rv = ct_tokens_publish(tmp[1], path[1], err)) != 0) {
        /* Put the old train.bin back (or remove the new one when there was none). */
        if (kept ? rename(keep, path[0]) : unlink(path[0]))
            ct_error_hint(err, "and restoring %s failed (%s): regenerate both files", path[0], strerror(errno));
        else
            ct_error_hint(err, "%s and %s are as they were", path[0], path[1]);
        kept = 0;
    }
fail:
    unlink(tmp[0]);
    unlink(tmp[1]);
    if (kept)
        unlink(keep);
    return rv;
}

int ct_cmd_tokenize(int argc, char **argv)
{
    static const char *const flags[] = { "--input", "--output-dir", "--val-fraction", "--help", NULL };
    const char *inputs[TOKENIZE_MAX_INPUTS], *dir = NULL, *v;
    double val_fraction = TOKENIZE_DEFAULT_VAL;
    uint16_t *tokens = NULL;
    size_t len = 0, cap = 0, n_val;
    int n_inputs = 0, missing = 0, rv;
    ct_error err;

    ct_error_clear(&err);
    for (int i = 1; i < argc; i++) {
        missing = 0;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            tokenize_usage(stdout);
            return 0;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--input", &missing))) {
            if (n_inputs == TOKENIZE_MAX_INPUTS) {
                ct_error_set(&err, CT_EINVAL, "tokenize-input", "more than %d --input files", TOKENIZE_MAX_INPUTS);
                ct_error_hint(&err, "join the texts first (cat a b > all.txt)");
                goto fail;
            }
            inputs[n_inputs++] = v;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--output-dir", &missing))) {
            dir = v;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--val-fraction", &missing))) {
            if (ct_parse_double(v, &val_fraction) != 0 || !(val_fraction > 0.0 && val_fraction < 1.0)) {
                ct_error_set(&err, CT_EINVAL, "tokenize-val-fraction", "--val-fraction '%s' is not a number between 0 and 1",
                             v);
                ct_error_hint(&err, "e.g. --val-fraction 0.1 puts the last 10%% of the bytes in val.bin");
                goto fail;
            }
        } else if (missing) {
            ct_error_set(&err, CT_EINVAL, "flag-missing-value", "%s needs a value", argv[i]);
            ct_error_hint(&err, "ctrain tokenize --help lists the flags");
            goto fail;
        } else {
            ct_cli_flag_unknown("tokenize", argv[i], flags, &err);
            goto fail;
        }
    }
    if (!n_inputs || !dir) {
        ct_error_set(&err, CT_EINVAL, "tokenize-usage", "tokenize needs %s", !n_inputs ? "--input FILE" : "--output-dir DIR");
        ct_error_hint(&err, "ctrain tokenize --input book.txt --output-dir data/book");
        goto fail;
    }
    for (int i = 0; i < n_inputs; i++)
        if (append_file(inputs[i], &tokens, &len, &cap, &err) != 0)
            goto fail;
    n_val = (size_t)(len * val_fraction + 0.5);
    if (n_val < 2 || len - n_val < 2) {
        ct_error_set(&err, CT_EINVAL, "tokenize-input", "%zu bytes of text split %zu/%zu leave a split without one "
                     "input and target pair", len, len - n_val, n_val);
        ct_error_hint(&err, "give more text or another --val-fraction");
        goto fail;
    }
    if (make_dir(dir, &err) != 0 || write_shards(dir, tokens, len - n_val, n_val, &err) != 0)
        goto fail;
    printf("ctrain: tokenize: %zu bytes from %d file%s: %s/train.bin %zu tokens, %s/val.bin %zu tokens (vocab 256)\n",
           len, n_inputs, n_inputs == 1 ? "" : "s", dir, len - n_val, dir, n_val);
    free(tokens);
    return 0;
fail:
    free(tokens);
    ct_error_print(stderr, &err);
    rv = ct_error_exit_status(err.code);
    return rv;
}
