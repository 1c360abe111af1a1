/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory of the host that is measured, not computed: zeroed anonymous mappings of their own (never
 * pages malloc recycled, which are resident before anything writes them), and how many of their
 * bytes the kernel really holds (mincore), which grows as the pages are first written. The GPT keeps
 * its activations in one, so its peak activation memory is what its steps touched; fsdp measures
 * and releases the model's parameter and gradient pages with the same helpers. */
#ifndef CTRAIN_UTIL_PAGES_H
#define CTRAIN_UTIL_PAGES_H

#include <stddef.h>

/* The system's page size (4 KiB on x86-64; 4 or 64 KiB on aarch64): what a release aligns to. */
size_t ct_pages_size(void);
/* A zeroed mapping of bytes (rounded up to pages: nothing resident until written), or NULL. */
void *ct_pages_alloc(size_t bytes);
void ct_pages_free(void *p, size_t bytes);
/* Bytes of [p, p + bytes) on resident pages now (a page partly inside counts its part), of any
 * memory (a mapping of ct_pages_alloc's or an array malloc made); 0 when p is NULL or mincore
 * fails. Allocates nothing (called inside a training step). */
size_t ct_pages_resident(const void *p, size_t bytes);
/* The pages wholly inside [p, p + bytes) back to the system (MADV_DONTNEED: anonymous memory reads
 * as zeros until written again; the partial pages at either end keep their contents): fsdp's
 * released parameters. */
void ct_pages_release(void *p, size_t bytes);
/* No transparent huge pages for the pages inside [p, p + bytes) (MADV_NOHUGEPAGE): an array whose
 * parts are released and faulted in again keeps 4 KiB pages (a huge page would bring 2 MiB back). */
void ct_pages_small_pages(void *p, size_t bytes);

/* A few slots of pages kept for reuse: pages leave a range for a slot, and a slot's go back into
 * another range, by moving the page tables (mremap with MREMAP_DONTUNMAP: both ranges stay mapped,
 * the one left empty reads as zeros), not by giving them to the system and faulting (and zeroing)
 * fresh ones. fsdp's released units: the next unit's all-gather takes the pages the last release
 * put here (page faults were most of a small batch's step). */
typedef struct ct_pages_pool {
    char *base;       /* slots * slot_bytes of address space, NULL where none */
    size_t slot_bytes;
    int slots;
    size_t *held;     /* held[i]: bytes at the start of slot i that hold moved pages (0: empty) */
} ct_pages_pool;

/* Address space for slots of slot_bytes each (rounded up to pages); nothing resident. 0, or -1
 * where there is no address space or the kernel does not move pages as Linux 5.7 and later do
 * (checked on one page: qemu-user does not) — the pool then holds nothing and every put and take
 * below returns 0. */
int ct_pages_pool_init(ct_pages_pool *p, int slots, size_t slot_bytes);
void ct_pages_pool_free(ct_pages_pool *p);
/* The pages wholly inside [range, range + bytes) (within one mapping) into an empty slot: 1 when
 * moved (they are then empty), 0 when there are none, no slot is free or large enough, or the
 * kernel refused (nothing changed). */
int ct_pages_pool_put(ct_pages_pool *p, void *range, size_t bytes);
/* The pages wholly inside [range, range + bytes) (within one mapping, their contents discarded)
 * filled from the smallest slot holding at least as many, the rest of that slot's pages given back;
 * where no slot holds enough, the fullest slot's pages fill the first of them (the others as they
 * were). 1, or 0 when there are none, every slot is empty or the kernel refused (nothing changed). */
int ct_pages_pool_take(ct_pages_pool *p, void *range, size_t bytes);
/* Every slot's pages back to the system: what was not taken by now is not waited for. */
void ct_pages_pool_trim(ct_pages_pool *p);
/* Bytes on resident pages in the slots (measured, as ct_pages_resident). */
size_t ct_pages_pool_resident(const ct_pages_pool *p);

#endif
