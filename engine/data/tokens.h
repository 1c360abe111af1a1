/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — token shards in llm.c's format, and the windows a language model trains on.
 *
 * A shard is a header of 256 little-endian int32 (magic 20240520, version 1, token count, the rest
 * 0) followed by that many uint16 tokens — the files llm.c's data scripts write, so shards move
 * between the two. `ctrain tokenize` writes DIR/train.bin and DIR/val.bin; the "tokens" data module
 * reads them. A sequence of T tokens trains on window w = tokens[w*T .. w*T+T] (T+1 tokens: inputs
 * and the next tokens), windows in order and not overlapping except for that one shared token.
 */
#ifndef CTRAIN_DATA_TOKENS_H
#define CTRAIN_DATA_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/error.h"

#define CT_TOKENS_MAGIC        20240520
#define CT_TOKENS_VERSION      1
#define CT_TOKENS_HEADER_INTS  256
#define CT_TOKENS_HEADER_BYTES (CT_TOKENS_HEADER_INTS * 4)
#define CT_TOKENS_MAX          ((size_t)INT32_MAX)  /* the header's count is an int32 */

/* Write tokens[0..n) as a shard at path, atomically: a temp file beside it, fsync, rename, fsync
 * of the directory; on failure path is untouched. */
int ct_tokens_write(const char *path, const uint16_t *tokens, size_t n, ct_error *err);

/* Write the shard to a temp file beside path and return its name in tmp (size bytes): for callers
 * that publish several files together (ct_tokens_publish). */
int ct_tokens_write_temp(const char *path, const uint16_t *tokens, size_t n, char *tmp, size_t size,
                         ct_error *err);
/* Rename tmp over path and fsync path's directory. */
int ct_tokens_publish(const char *tmp, const char *path, ct_error *err);

/* Read a whole shard: *tokens malloc'd (NULL when n is 0), *n its count. Missing file: CT_ENOENT;
 * a short header, wrong magic or version, a body shorter or longer than the count, or a token
 * >= vocab (vocab 0: no check): CT_EFORMAT, the message naming the file and the problem. */
int ct_tokens_read(const char *path, int vocab, uint16_t **tokens, size_t *n, ct_error *err);

/* --- windows ------------------------------------------------------------------------------------ */
typedef struct ct_token_windows {
    uint16_t *tokens;
    size_t n;        /* tokens */
    int seq_len;     /* T; 0 before ct_token_windows_set_len */
    size_t count;    /* windows of T+1 tokens: (n - 1) / T */
} ct_token_windows;

/* Windows of seq_len over tokens: CT_EINVAL (id "data-model-mismatch") naming path when the shard
 * holds fewer than seq_len + 1 tokens. */
int ct_token_windows_set_len(ct_token_windows *w, int seq_len, const char *path, ct_error *err);
/* inputs[i*T + t] = window idx[i]'s token t, targets the one after it. */
void ct_token_windows_gather(const ct_token_windows *w, const uint32_t *idx, int count, int32_t *inputs,
                             int32_t *targets);

#endif
