/* SPDX-License-Identifier: BSD-3-Clause */
/* The TCPStore wire format both halves share: a growing output buffer and a bounded reader.
 * Values go in the host's byte order, as PyTorch's tcputil sends them (memcpy of the value):
 * every host that runs PyTorch's store is little-endian. */
#ifndef CTRAIN_STORE_WIRE_H
#define CTRAIN_STORE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/tcpstore.h"

struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int oom;      /* an append failed: the buffer is incomplete and must not be sent */
};

static inline void wbuf_put(struct wbuf *b, const void *src, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, src, n);
    b->len += n;
}

static inline void wbuf_u8(struct wbuf *b, uint8_t v) { wbuf_put(b, &v, 1); }
static inline void wbuf_u32(struct wbuf *b, uint32_t v) { wbuf_put(b, &v, 4); }
static inline void wbuf_u64(struct wbuf *b, uint64_t v) { wbuf_put(b, &v, 8); }
static inline void wbuf_vec(struct wbuf *b, const void *p, size_t n)
{
    wbuf_u64(b, n);
    wbuf_put(b, p, n);
}

/* Reading one query or reply out of the bytes received so far. */
struct rbuf {
    const uint8_t *p;
    size_t len, off;
    int short_;   /* the bytes end before the item: wait for more */
    int bad;      /* a length past CT_TCPSTORE_MAX_VALUE */
};

static inline int rbuf_take(struct rbuf *r, void *dst, size_t n)
{
    if (r->short_ || r->bad)
        return -1;
    if (r->len - r->off < n) {
        r->short_ = 1;
        return -1;
    }
    memcpy(dst, r->p + r->off, n);
    r->off += n;
    return 0;
}

/* A vector in place: *data points into the buffer. */
static inline int rbuf_vec(struct rbuf *r, const uint8_t **data, size_t *n)
{
    uint64_t len;

    if (rbuf_take(r, &len, 8))
        return -1;
    if (len > CT_TCPSTORE_MAX_VALUE) {
        r->bad = 1;
        return -1;
    }
    if (r->len - r->off < len) {
        r->short_ = 1;
        return -1;
    }
    *data = r->p + r->off;
    *n = (size_t)len;
    r->off += (size_t)len;
    return 0;
}

#endif
