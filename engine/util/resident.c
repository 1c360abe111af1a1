/* SPDX-License-Identifier: BSD-3-Clause */
/* Resident bytes of an array (mincore) and releasing its interior pages (madvise); resident.h. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/util/resident.h"

static size_t page_size(void)
{
    static size_t ps;

    if (!ps) {
        long v = sysconf(_SC_PAGESIZE);

        ps = v > 0 ? (size_t)v : 4096;
    }
    return ps;
}

/* In chunks of 4096 pages, so the vector stays on the stack. */
size_t ct_mem_resident(const void *p, size_t bytes)
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

/* madvise advice on the pages wholly inside [p, p + bytes). */
static void advise_inside(void *p, size_t bytes, int advice)
{
    size_t ps = page_size();
    uintptr_t lo = ((uintptr_t)p + ps - 1) & ~(uintptr_t)(ps - 1), hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(ps - 1);

    if (p && hi > lo)
        (void)madvise((void *)lo, (size_t)(hi - lo), advice);
}

void ct_mem_release(void *p, size_t bytes) { advise_inside(p, bytes, MADV_DONTNEED); }

void ct_mem_small_pages(void *p, size_t bytes)
{
#ifdef MADV_NOHUGEPAGE
    advise_inside(p, bytes, MADV_NOHUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}
