/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory pages: mappings of their own, resident bytes measured (mincore), pages given back
 * (madvise); pages.h. */
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

/* madvise advice on the pages wholly inside [p, p + bytes). */
static void advise_inside(void *p, size_t bytes, int advice)
{
    size_t ps = page_size();
    uintptr_t lo = ((uintptr_t)p + ps - 1) & ~(uintptr_t)(ps - 1), hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(ps - 1);

    if (p && hi > lo)
        (void)madvise((void *)lo, (size_t)(hi - lo), advice);
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
