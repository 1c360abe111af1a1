/* SPDX-License-Identifier: BSD-3-Clause */
/* Token shards (llm.c's format) and the windows over them; see engine/data/tokens.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/util/fsutil.h"
#include "engine/data/tokens.h"

/* The file format is little-endian; ctrain's targets (amd64, arm64) are too, so bodies are read
 * and written as they lie in memory. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token shards are little-endian: this build needs byte swapping added to engine/data/tokens.c"
#endif

int ct_tokens_write_temp(const char *path, const uint16_t *tokens, size_t n, char *tmp, size_t size,
                         ct_error *err)
{
    int32_t header[CT_TOKENS_HEADER_INTS] = { CT_TOKENS_MAGIC, CT_TOKENS_VERSION, 0 };
    int fd;

    if (n > CT_TOKENS_MAX) {
        ct_error_set(err, CT_EINVAL, "tokens-too-many", "%s: %zu tokens do not fit a shard (at most %zu)", path, n,
                     CT_TOKENS_MAX);
        return ct_error_hint(err, "split the text into several runs of ctrain tokenize");
    }
    header[2] = (int32_t)n;
    /* The exclusive temp beside the shard that every output of ctrain uses (engine/util/fsutil.h). */
    fd = ct_fs_create_temp(path, tmp, size);
    if (fd < 0 && errno == ENAMETOOLONG)
        return ct_error_set(err, CT_EINVAL, "tokens-path", "path too long: %s", path);
    if (fd < 0) {
        ct_error_set(err, CT_EIO, "tokens-write", "%s: cannot create a temporary file beside it: %s", path,
                     strerror(errno));
        return ct_error_hint(err, "check that the directory exists and is writable");
    }
    if (ct_write_all(fd, header, sizeof(header)) ||
        ct_write_all(fd, tokens, n * sizeof(uint16_t)) || fsync(fd)) {
        ct_error_set(err, CT_EIO, "tokens-write", "%s: writing failed: %s", path, strerror(errno));
        ct_error_hint(err, "check free space and permissions; nothing was replaced");
        close(fd);
        unlink(tmp);
        return CT_EIO;
    }
    if (close(fd)) {
        ct_error_set(err, CT_EIO, "tokens-write", "%s: writing failed: %s", path, strerror(errno));
        unlink(tmp);
        return CT_EIO;
    }
    return 0;
}

int ct_tokens_publish(const char *tmp, const char *path, ct_error *err)
{
    if (rename(tmp, path)) {
        ct_error_set(err, CT_EIO, "tokens-write", "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
        unlink(tmp);
        return CT_EIO;
    }
    if (ct_fsync_parent_dir(path))
        return ct_error_set(err, CT_EIO, "tokens-write", "%s: written, but syncing its directory failed: %s", path,
                            strerror(errno));
    return 0;
}

int ct_tokens_write(const char *path, const uint16_t *tokens, size_t n, ct_error *err)
{
    char tmp[4200];
    int rv;

    if ((rv = ct_tokens_write_temp(path, tokens, n, tmp, sizeof(tmp), err)) != 0)
        return rv;
    return ct_tokens_publish(tmp, path, err);
}

/* Read exactly n bytes at the file's position: 0, or the count actually read (short) via *got. */
static int read_full(int fd, void *buf, size_t n, size_t *got)
{
    size_t done = 0;

    while (done < n) {
        ssize_t r = read(fd, (char *)buf + done, n - done);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

static int check_header(const char *path, const int32_t *h, size_t got, off_t file_size, ct_error *err)
{
    size_t body;

    if (got < CT_TOKENS_HEADER_BYTES) {
        ct_error_set(err, CT_EFORMAT, "tokens-format",
                     "%s: %zu bytes, shorter than a token shard's %d-byte header", path, got, CT_TOKENS_HEADER_BYTES);
        return ct_error_hint(err, "the file is empty or truncated; write it again with ctrain tokenize");
    }
    if (h[0] != CT_TOKENS_MAGIC) {
        ct_error_set(err, CT_EFORMAT, "tokens-format", "%s: magic %d is not a token shard's %d", path, h[0],
                     CT_TOKENS_MAGIC);
        return ct_error_hint(err, "this is not an llm.c token shard; ctrain tokenize --input TEXT writes one");
    }
    if (h[1] != CT_TOKENS_VERSION) {
        ct_error_set(err, CT_EFORMAT, "tokens-format", "%s: version %d; ctrain reads version %d (uint16 tokens)",
                     path, h[1], CT_TOKENS_VERSION);
        return ct_error_hint(err, "write the shard again with ctrain tokenize");
    }
    if (h[2] < 0) {
        ct_error_set(err, CT_EFORMAT, "tokens-format", "%s: the header declares %d tokens", path, h[2]);
        return ct_error_hint(err, "the header is damaged; write the shard again with ctrain tokenize");
    }
    body = (size_t)(file_size - CT_TOKENS_HEADER_BYTES);
    if (body != (size_t)h[2] * sizeof(uint16_t)) {
        ct_error_set(err, CT_EFORMAT, "tokens-format", "%s: the header declares %d tokens but the body holds %zu bytes "
                     "(%s; %zu expected)", path, h[2], body, body < (size_t)h[2] * 2 ? "truncated" : "trailing bytes",
                     (size_t)h[2] * 2);
        return ct_error_hint(err, "the file was cut short or appended to; write it again with ctrain tokenize");
    }
    return 0;
}

int ct_tokens_read(const char *path, int vocab, uint16_t **tokens, size_t *n, ct_error *err)
{
    int32_t header[CT_TOKENS_HEADER_INTS];
    uint16_t *data = NULL;
    struct stat st;
    size_t got = 0, count;
    int fd, rv = CT_EIO;

    *tokens = NULL;
    *n = 0;
    /* Opened without blocking and only as a regular file: a FIFO named train.bin is refused. */
    fd = ct_fs_open_input(path, "token shard", err);
    if (fd < 0) {
        if (err->code == CT_ENOENT) {
            ct_error_set(err, CT_ENOENT, "tokens-missing", "token shard %s does not exist", path);
            return ct_error_hint(err, "ctrain tokenize --input TEXT --output-dir DIR writes DIR/train.bin and DIR/val.bin");
        }
        if (err->code == CT_EFORMAT)
            ct_error_hint(err, "--data DIR must hold the files train.bin and val.bin (ctrain tokenize writes them)");
        return err->code;
    }
    if (fstat(fd, &st)) {
        ct_error_set(err, CT_EIO, "tokens-read", "%s: cannot examine it: %s", path, strerror(errno));
        goto fail;
    }
    if (read_full(fd, header, sizeof(header), &got)) {
        ct_error_set(err, CT_EIO, "tokens-read", "%s: read failed: %s", path, strerror(errno));
        goto fail;
    }
    if ((rv = check_header(path, header, got, st.st_size, err)) != 0)
        goto fail;
    count = (size_t)header[2];
    if (count) {
        data = malloc(count * sizeof(uint16_t));
        if (!data) {
            rv = ct_error_set(err, CT_ENOMEM, "", "%s: out of memory for %zu tokens", path, count);
            goto fail;
        }
        if (read_full(fd, data, count * sizeof(uint16_t), &got) || got != count * sizeof(uint16_t)) {
            rv = ct_error_set(err, CT_EIO, "tokens-read", "%s: read failed or the file shrank while reading", path);
            goto fail;
        }
    }
    for (size_t i = 0; vocab > 0 && i < count; i++)
        if (data[i] >= vocab) {
            rv = ct_error_set(err, CT_EFORMAT, "tokens-vocab", "%s: token %u at position %zu is outside the vocabulary "
                              "(vocab=%d)", path, data[i], i, vocab);
            ct_error_hint(err, "give the model the shard's vocabulary: --model-config vocab=%d or more", data[i] + 1);
            goto fail;
        }
    close(fd);
    *tokens = data;
    *n = count;
    return 0;
fail:
    free(data);
    close(fd);
    return rv;
}

int ct_token_windows_set_len(ct_token_windows *w, int seq_len, const char *path, ct_error *err)
{
    if (seq_len <= 0 || w->n < (size_t)seq_len + 1) {
        ct_error_set(err, CT_EINVAL, "data-model-mismatch",
                     "%s holds %zu tokens, fewer than one window of seq_len=%d needs (%d)", path, w->n, seq_len,
                     seq_len + 1);
        return ct_error_hint(err, "lower seq_len (--model-config seq_len=N) or tokenize more text");
    }
    w->seq_len = seq_len;
    w->count = (w->n - 1) / (size_t)seq_len;
    return 0;
}

void ct_token_windows_gather(const ct_token_windows *w, const uint32_t *idx, int count, int32_t *inputs,
                             int32_t *targets)
{
    int T = w->seq_len;

    for (int i = 0; i < count; i++) {
        const uint16_t *src = w->tokens + (size_t)idx[i] * T;

        for (int t = 0; t < T; t++) {
            inputs[(size_t)i * T + t] = src[t];
            targets[(size_t)i * T + t] = src[t + 1];
        }
    }
}
