/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory pages: mappings of their own, resident bytes measured (mincore), pages given back
 * (madvise); pages.h. */
#define _GNU_SOURCE   /* mremap */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/util/pages.h"

size_t ct_pages_size(void)
{
    long ps = sysconf(_SC_PAGESIZE);

    return ps > 0 ? (size_t)ps : 4096;
}

static size_t page_size(void) { return ct_pages_size(); }

static size_t round_up(size_t bytes) { return (bytes + page_size() - 1) / page_size() * page_size(); }

void *ct_pages_alloc(size_t bytes)
{
    void *p;

    if (bytes == 0)
        bytes = 1;
    /* Reserved, not committed: a page holds memory once written (MAP_NORESERVE: no swap set aside). */
    p = mmap(NULL, round_up(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ct_pages_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, round_up(bytes ? bytes : 1));
}

/* In chunks of 4096 pages, so the vector stays on the stack. */
size_t ct_pages_resident(const void *p, size_t bytes)
{
    size_t ps = page_size(), total = 0;
    uintptr_t lo = (uintptr_t)p, hi = lo + bytes, page = lo & ~(uintptr_t)(ps - 1);
    unsigned char vec[4096];

    if (!p || !bytes)
        return 0;
    while (page < hi) {
        size_t pages = (size_t)((hi - page + ps - 1) / ps);

        if (pages > sizeof(vec))
            pages = sizeof(vec);
        if (mincore((void *)page, pages * ps, vec))
            return 0;
        for (size_t i = 0; i < pages; i++, page += ps) {
            uintptr_t a = page > lo ? page : lo, b = page + ps < hi ? page + ps : hi;

            if (vec[i] & 1)
                total += (size_t)(b - a);
        }
    }
    return total;
}

/* The pages wholly inside [p, p + bytes): their first into *at, their bytes returned (0: none). */
static size_t inside(void *p, size_t bytes, char **at)
{
    size_t ps = page_size();
    uintptr_t lo = ((uintptr_t)p + ps - 1) & ~(uintptr_t)(ps - 1), hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(ps - 1);

    *at = (char *)lo;
    return p && hi > lo ? (size_t)(hi - lo) : 0;
}

/* madvise advice on the pages wholly inside [p, p + bytes). */
static void advise_inside(void *p, size_t bytes, int advice)
{
    char *at;
    size_t len = inside(p, bytes, &at);

    if (len)
        (void)madvise(at, len, advice);
}

void ct_pages_release(void *p, size_t bytes) { advise_inside(p, bytes, MADV_DONTNEED); }

void ct_pages_small_pages(void *p, size_t bytes)
{
#ifdef MADV_NOHUGEPAGE
    advise_inside(p, bytes, MADV_NOHUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4   /* Linux 5.7 */
#endif

/* Whether a page moves with MREMAP_DONTUNMAP as Linux (5.7 on) moves it: the source still a
 * mapping, empty, the destination holding the page, and back. qemu-user passes the call to the
 * host but then takes the source for unmapped (its later calls on it fail): no pool there. */
static int dontunmap_works(char *slot)
{
    size_t ps = page_size();
    char *src = ct_pages_alloc(ps);
    unsigned char in_src = 1, in_slot = 0;
    int ok;

    if (!src)
        return 0;
    src[0] = 1;
    ok = mremap(src, ps, ps, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, slot) != MAP_FAILED &&
         mincore(src, ps, &in_src) == 0 && mincore(slot, ps, &in_slot) == 0 && !(in_src & 1) && (in_slot & 1) &&
         slot[0] == 1 &&
         mremap(slot, ps, ps, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, src) != MAP_FAILED &&
         mincore(slot, ps, &in_slot) == 0 && !(in_slot & 1) && src[0] == 1;
    ct_pages_free(src, ps);
    (void)madvise(slot, ps, MADV_DONTNEED);
    return ok;
}

int ct_pages_pool_init(ct_pages_pool *p, int slots, size_t slot_bytes)
{
    p->base = NULL;
    p->slots = 0;
    p->slot_bytes = round_up(slot_bytes ? slot_bytes : 1);
    p->held = slots > 0 ? calloc((size_t)slots, sizeof(size_t)) : NULL;
    if (!p->held)
        return -1;
    /* The same kind of mapping as the ranges it trades with (private anonymous, read-write, small
     * pages): a moved range keeps its mapping's flags. */
    p->base = ct_pages_alloc(p->slot_bytes * (size_t)slots);
    if (!p->base) {
        free(p->held);
        p->held = NULL;
        return -1;
    }
    ct_pages_small_pages(p->base, p->slot_bytes * (size_t)slots);
    p->slots = slots;
    if (!dontunmap_works(p->base)) {
        ct_pages_pool_free(p);
        return -1;
    }
    return 0;
}

void ct_pages_pool_free(ct_pages_pool *p)
{
    if (p->base)
        ct_pages_free(p->base, p->slot_bytes * (size_t)p->slots);
    free(p->held);
    p->base = NULL;
    p->held = NULL;
    p->slots = 0;
}

int ct_pages_pool_put(ct_pages_pool *p, void *range, size_t range_bytes)
{
    char *at;
    size_t bytes = inside(range, range_bytes, &at);

    if (!p->base || !bytes || bytes > p->slot_bytes)
        return 0;
    for (int i = 0; i < p->slots; i++) {
        char *slot = p->base + (size_t)i * p->slot_bytes;

        if (p->held[i])
            continue;
        /* Whatever the slot's mapping held goes; the range stays mapped, empty. */
        if (mremap(at, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, slot) == MAP_FAILED)
            return 0;
        p->held[i] = bytes;
        return 1;
    }
    return 0;
}

/* Slot holding a pages before one holding b, for want: one that holds enough before one that does not,
 * then the smaller of two that do (the rest goes back), the fuller of two that do not (neighbouring
 * units differ by a few pages: fsdp's gradient of a block's MLP input layer takes the output layer's). */
static int better(size_t a, size_t b, size_t want)
{
    if ((a >= want) != (b >= want))
        return a >= want;
    return a >= want ? a < b : a > b;
}

int ct_pages_pool_take(ct_pages_pool *p, void *range, size_t range_bytes)
{
    int best = -1;
    char *slot, *at;
    size_t bytes = inside(range, range_bytes, &at);

    if (!p->base || !bytes)
        return 0;
    for (int i = 0; i < p->slots; i++)
        if (p->held[i] && (best < 0 || better(p->held[i], p->held[best], bytes)))
            best = i;
    if (best < 0)
        return 0;
    slot = p->base + (size_t)best * p->slot_bytes;
    if (p->held[best] < bytes)
        bytes = p->held[best];
    if (mremap(slot, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, at) == MAP_FAILED)
        return 0;
    if (p->held[best] > bytes)
        (void)madvise(slot + bytes, p->held[best] - bytes, MADV_DONTNEED);
    p->held[best] = 0;
    return 1;
}

void ct_pages_pool_trim(ct_pages_pool *p)
{
    for (int i = 0; i < p->slots; i++)
        if (p->held[i]) {
            (void)madvise(p->base + (size_t)i * p->slot_bytes, p->held[i], MADV_DONTNEED);
            p->held[i] = 0;
        }
}

size_t ct_pages_pool_resident(const ct_pages_pool *p)
{
    return p->base ? ct_pages_resident(p->base, p->slot_bytes * (size_t)p->slots) : 0;
}
