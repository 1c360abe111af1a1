/* SPDX-License-Identifier: BSD-3-Clause */
/* Mappings whose resident bytes are measured (pages.h). */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/util/pages.h"

static size_t page_size(void)
{
    long ps = sysconf(_SC_PAGESIZE);

    return ps > 0 ? (size_t)ps : 4096;
}

static size_t round_up(size_t bytes) { return (bytes + page_size() - 1) / page_size() * page_size(); }

void *ct_pages_alloc(size_t bytes)
{
    void *p;

    if (bytes == 0)
        bytes = 1;
    p = mmap(NULL, round_up(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ct_pages_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, round_up(bytes ? bytes : 1));
}

size_t ct_pages_resident(const void *p, size_t bytes)
{
    /* the kernel's answer a chunk of pages at a time, on the stack: called inside a training step */
    unsigned char vec[1024];
    size_t ps = page_size(), pages = round_up(bytes) / ps, resident = 0;

    if (!p)
        return 0;
    for (size_t i = 0; i < pages; i += sizeof(vec)) {
        size_t n = pages - i < sizeof(vec) ? pages - i : sizeof(vec);

        if (mincore((char *)p + i * ps, n * ps, vec) != 0)
            return 0;
        for (size_t j = 0; j < n; j++)
            resident += vec[j] & 1;
    }
    return resident * ps;
}
