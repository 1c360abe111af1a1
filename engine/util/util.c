/* SPDX-License-Identifier: BSD-3-Clause */
/* String and number helpers; see include/ctrain/util.h. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctrain/error.h"
#include "ctrain/util.h"

int ct_parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    long v;

    if (!s || !*s)
        return CT_EINVAL;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || !end || *end != '\0' || v < min || v > max)
        return CT_EINVAL;
    *out = v;
    return 0;
}

int ct_parse_double(const char *s, double *out)
{
    char *end = NULL;
    double v;

    if (!s || !*s)
        return CT_EINVAL;
    errno = 0;
    v = strtod(s, &end);
    if (errno || !end || *end != '\0' || !isfinite(v))
        return CT_EINVAL;
    *out = v;
    return 0;
}

int ct_str_distance(const char *a, const char *b)
{
    /* Two-row Levenshtein on at most 63 characters: names, not prose. */
    int prev[64], cur[64];
    size_t la = strnlen(a, 63), lb = strnlen(b, 63);

    for (size_t j = 0; j <= lb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            int best = sub < del ? sub : del;
            cur[j] = best < ins ? best : ins;
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb] > 255 ? 255 : prev[lb];
}

const char *ct_str_closest(const char *word, const char *const *cands)
{
    const char *best = NULL;
    int best_d = INT_MAX;
    size_t len = strlen(word);
    /* Suggest only what a typo could explain: at most a third of the word, at least 1, at most 3. */
    int limit = (int)(len / 3);

    if (limit < 1)
        limit = 1;
    if (limit > 3)
        limit = 3;
    for (; cands && *cands; cands++) {
        int d = ct_str_distance(word, *cands);
        if (d < best_d) {
            best_d = d;
            best = *cands;
        }
    }
    return best_d <= limit ? best : NULL;
}

int ct_str_copy(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);

    if (n >= size) {
        if (size) {
            memcpy(dst, src, size - 1);
            dst[size - 1] = '\0';
        }
        return -1;
    }
    memcpy(dst, src, n + 1);
    return 0;
}

/* Length of the well-formed UTF-8 sequence at p (2 to 4 bytes), 0 when it is not one. */
static size_t utf8_len(const unsigned char *p)
{
    size_t n = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;

    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    /* Overlong and surrogate forms are not text either. */
    if ((n == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (n == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
        (n == 4 && p[0] == 0xf0 && p[1] < 0x90) || (n == 4 && p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

const char *ct_str_escape(char *dst, size_t size, const char *src)
{
    const unsigned char *p = (const unsigned char *)(src ? src : "");
    size_t out = 0;

    if (!size)
        return dst;
    while (*p) {
        char piece[8];
        size_t n = utf8_len(p), len;

        /* C0 controls, DEL, the C1 controls (U+0080-U+009F: CSI is U+009B) and bytes that are not
         * UTF-8 (a lone 0x9B is CSI to an 8-bit terminal) are written as \xNN / \u00NN. */
        if (*p < 0x20 || *p == 0x7f) {
            len = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", *p);
            n = 1;
        } else if (*p < 0x80) {
            piece[0] = (char)*p;
            len = n = 1;
        } else if (n == 2 && p[0] == 0xc2 && p[1] < 0xa0) {
            len = (size_t)snprintf(piece, sizeof(piece), "\\u00%02x", p[1]);
        } else if (n) {
            memcpy(piece, p, n);
            len = n;
        } else {
            len = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", *p);
            n = 1;
        }
        if (out + len >= size)
            break;                    /* cut before a whole piece: never half an escape or a character */
        memcpy(dst + out, piece, len);
        out += len;
        p += n;
    }
    dst[out] = '\0';
    return dst;
}

char *ct_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

double ct_time_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double ct_wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int ct_node_name(char *buf, size_t size)
{
    const char *slurm = getenv("SLURMD_NODENAME");

    if (size == 0)
        return -1;
    if (slurm && *slurm)
        return ct_str_copy(buf, size, slurm);
    buf[0] = '\0';
    if (gethostname(buf, size - 1))
        buf[0] = '\0';
    buf[size - 1] = '\0';
    return buf[0] ? 0 : -1;
}

const char *ct_options_get(const char *options, const char *key, char *buf, size_t size)
{
    size_t klen = strlen(key);
    const char *p = options;

    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > klen && !strncmp(p, key, klen) && p[klen] == '=') {
            size_t vlen = len - klen - 1;
            if (vlen >= size)
                vlen = size - 1;
            memcpy(buf, p + klen + 1, vlen);
            buf[vlen] = '\0';
            return buf;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

int ct_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int ct_fsync_parent_dir(const char *path)
{
    char *copy = ct_strdup(path);
    int fd, rc = -1;

    if (!copy)
        return -1;
    fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        rc = fsync(fd);
        close(fd);
    }
    free(copy);
    return rc;
}
