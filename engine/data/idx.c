/* SPDX-License-Identifier: BSD-3-Clause */
/* IDX reader through zlib (gzread reads gzip'd and plain files alike); see engine/data/fashion_mnist.h.
 * Format (http://yann.lecun.com/exdb/mnist/): magic 0x00 0x00 <type> <ndim>, ndim big-endian
 * uint32 sizes, then the data. Only type 0x08 (unsigned byte) is used by Fashion-MNIST. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/data/fashion_mnist.h"
#include "engine/util/fsutil.h"

/* Read exactly n bytes; 0, or CT_EFORMAT naming what was being read. */
static int read_exact(gzFile f, const char *path, void *buf, size_t n, const char *what,
                      ct_error *err)
{
    unsigned char *p = buf;
    size_t got = 0;

    while (got < n) {
        unsigned chunk = n - got > (1u << 30) ? (1u << 30) : (unsigned)(n - got);
        int r = gzread(f, p + got, chunk);
        int zerr = 0;
        const char *zmsg;

        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        zmsg = gzerror(f, &zerr);
        if (zerr && zerr != Z_BUF_ERROR)
            return ct_error_set(err, CT_EFORMAT, "idx-corrupt", "%s: corrupt file while reading %s (%s)",
                                path, what, zmsg);
        return ct_error_set(err, CT_EFORMAT, "idx-truncated",
                            "%s: truncated: %s needs %zu bytes, only %zu could be read", path, what, n, got);
    }
    return 0;
}

static int check_header(gzFile f, const char *path, int ndim, uint32_t *dims, size_t *total,
                        ct_error *err)
{
    unsigned char magic[4], be[4];
    int rc = read_exact(f, path, magic, 4, "the magic number", err);

    if (rc)
        return rc;
    if (magic[0] || magic[1] || magic[2] != 0x08 || magic[3] != ndim)
        return ct_error_set(err, CT_EFORMAT, "idx-magic",
                            "%s: wrong magic number %02x%02x%02x%02x (expected 000008%02x: an IDX file "
                            "of unsigned bytes with %d dimensions)", path, magic[0], magic[1], magic[2],
                            magic[3], ndim, ndim);
    *total = 1;
    for (int i = 0; i < ndim; i++) {
        if ((rc = read_exact(f, path, be, 4, "the dimension sizes", err)))
            return rc;
        dims[i] = (uint32_t)be[0] << 24 | (uint32_t)be[1] << 16 | (uint32_t)be[2] << 8 | be[3];
        /* Fashion-MNIST is 47 MB; refuse absurd sizes before allocating. */
        if (dims[i] == 0 || dims[i] > (1u << 24) || *total > (SIZE_MAX >> 25))
            return ct_error_set(err, CT_EFORMAT, "idx-dims", "%s: dimension %d has implausible size %u",
                                path, i, dims[i]);
        *total *= dims[i];
    }
    if (*total > ((size_t)1 << 32))
        return ct_error_set(err, CT_EFORMAT, "idx-dims", "%s: %zu elements is implausibly large", path, *total);
    return 0;
}

/* The data, in a buffer that grows with what the file really holds: a 20-byte file announcing
 * 4 GB fails as truncated instead of allocating 4 GB first. */
static int read_data(gzFile f, const char *path, size_t total, uint8_t **out, ct_error *err)
{
    size_t cap = total < ((size_t)64 << 20) ? total : ((size_t)64 << 20), got = 0;
    uint8_t *buf = malloc(cap);
    int rc;

    while (buf) {
        size_t want = (cap < total ? cap : total) - got;

        if ((rc = read_exact(f, path, buf + got, want, "the data", err))) {
            if (err && err->id[0] && !strcmp(err->id, "idx-truncated"))
                ct_error_set(err, CT_EFORMAT, "idx-truncated",
                             "%s: truncated: the header announces %zu data bytes, the file holds fewer", path, total);
            free(buf);
            return rc;
        }
        got += want;
        if (got == total) {
            *out = buf;
            return 0;
        }
        cap = cap * 2 < total ? cap * 2 : total;
        {
            uint8_t *grown = realloc(buf, cap);

            if (!grown)
                free(buf);
            buf = grown;
        }
    }
    return ct_error_set(err, CT_ENOMEM, "", "%s: out of memory for %zu bytes", path, total);
}

struct ct_idx {
    gzFile f;
    const char *path;
    size_t total; /* data bytes the header announces */
};

int ct_idx_open(const char *path, int ndim, uint32_t *dims, ct_idx **out, ct_error *err)
{
    ct_idx *x = calloc(1, sizeof(*x));
    int fd, rc;

    *out = NULL;
    if (!x)
        return ct_error_set(err, CT_ENOMEM, "", "%s: out of memory", path);
    x->path = path;
    /* Without blocking, a regular file only: a FIFO named as an IDX file is refused. */
    if ((fd = ct_fs_open_input(path, "IDX file", err)) < 0) {
        free(x);
        return err->code;
    }
    if (!(x->f = gzdopen(fd, "rb"))) {
        close(fd);
        free(x);
        return ct_error_set(err, CT_EIO, "idx-open", "%s: cannot open: %s", path, strerror(errno));
    }
    if ((rc = check_header(x->f, path, ndim, dims, &x->total, err))) {
        ct_idx_close(x);
        return rc;
    }
    *out = x;
    return 0;
}

int ct_idx_read_data(ct_idx *x, uint8_t **data, ct_error *err)
{
    unsigned char extra;
    uint8_t *buf = NULL;
    int rc;

    *data = NULL;
    if ((rc = read_data(x->f, x->path, x->total, &buf, err)))
        return rc;
    if (gzread(x->f, &extra, 1) != 0) {
        free(buf);
        return ct_error_set(err, CT_EFORMAT, "idx-trailing",
                            "%s: bytes after the %zu data bytes its header announces (corrupt or wrong header)",
                            x->path, x->total);
    }
    *data = buf;
    return 0;
}

void ct_idx_close(ct_idx *x)
{
    if (!x)
        return;
    if (x->f)
        gzclose(x->f);
    free(x);
}

int ct_idx_read_u8(const char *path, int ndim, uint32_t *dims, uint8_t **data, ct_error *err)
{
    ct_idx *x = NULL;
    int rc;

    *data = NULL;
    if ((rc = ct_idx_open(path, ndim, dims, &x, err)) == 0)
        rc = ct_idx_read_data(x, data, err);
    ct_idx_close(x);
    return rc;
}
