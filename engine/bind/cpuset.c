/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — CPU sets over 64-bit words; see engine/bind/cpuset.h. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/bind/cpuset.h"

uint64_t *ct_cpuset_alloc(unsigned nw)
{
    return calloc(nw ? nw : 1, sizeof(uint64_t));
}

void ct_cpuset_copy(uint64_t *dst, const uint64_t *src, unsigned nw)
{
    memmove(dst, src, nw * sizeof(uint64_t));
}

void ct_cpuset_and(uint64_t *dst, const uint64_t *a, const uint64_t *b, unsigned nw)
{
    for (unsigned i = 0; i < nw; i++)
        dst[i] = a[i] & b[i];
}

void ct_cpuset_or(uint64_t *dst, const uint64_t *a, const uint64_t *b, unsigned nw)
{
    for (unsigned i = 0; i < nw; i++)
        dst[i] = a[i] | b[i];
}

void ct_cpuset_set(uint64_t *s, unsigned nw, int id)
{
    if (id >= 0 && (unsigned)id / 64 < nw)
        s[id / 64] |= 1ull << (id % 64);
}

int ct_cpuset_intersects(const uint64_t *a, const uint64_t *b, unsigned nw)
{
    for (unsigned i = 0; i < nw; i++)
        if (a[i] & b[i])
            return 1;
    return 0;
}

int ct_cpuset_included(const uint64_t *sub, const uint64_t *super, unsigned nw)
{
    for (unsigned i = 0; i < nw; i++)
        if (sub[i] & ~super[i])
            return 0;
    return 1;
}

int ct_cpuset_weight(const uint64_t *s, unsigned nw)
{
    int n = 0;

    for (unsigned i = 0; i < nw; i++)
        n += __builtin_popcountll(s[i]);
    return n;
}

int ct_cpuset_iszero(const uint64_t *s, unsigned nw)
{
    for (unsigned i = 0; i < nw; i++)
        if (s[i])
            return 0;
    return 1;
}

int ct_cpuset_next(const uint64_t *s, unsigned nw, int prev)
{
    unsigned from = (unsigned)(prev + 1);

    for (unsigned w = from / 64; w < nw; w++) {
        uint64_t bits = s[w];

        if (w == from / 64)
            bits &= ~0ull << (from % 64);
        if (bits)
            return (int)(w * 64 + (unsigned)__builtin_ctzll(bits));
    }
    return -1;
}

/* One decimal index at *p, moved past it; -1 when there is none or it is past 2^31. */
static long parse_index(const char **p)
{
    char *end;
    long v;

    if (!isdigit((unsigned char)**p))
        return -1;
    errno = 0;
    v = strtol(*p, &end, 10);
    if (errno || v > 0x7fffffffL)
        return -1;
    *p = end;
    return v;
}

long ct_cpuset_parse_list(uint64_t *s, unsigned nw, const char *list, int *past)
{
    const char *p = list;
    long named = 0;

    *past = 0;
    memset(s, 0, nw * sizeof(uint64_t));
    while (*p) {
        long lo = parse_index(&p), hi = lo;

        if (lo < 0)
            return -1;
        if (*p == '-') {
            p++;
            if ((hi = parse_index(&p)) < lo)
                return -1;
        }
        if (*p && *p != ',')
            return -1;
        if (*p == ',' && !*++p)
            return -1;
        named += hi - lo + 1;
        *past |= (unsigned long)hi / 64 >= nw;
        for (long i = lo; i <= hi && (unsigned long)i / 64 < nw; i++)
            ct_cpuset_set(s, nw, (int)i);
    }
    return named;
}
