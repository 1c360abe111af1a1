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

#endif
