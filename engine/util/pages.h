/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory of the host that is measured, not computed: zeroed anonymous mappings of their own (never
 * pages malloc recycled, which are resident before anything writes them), and how many of their
 * bytes the kernel really holds (mincore), which grows as the pages are first written. The GPT keeps
 * its activations in one, so its peak activation memory is what its steps touched. */
#ifndef CTRAIN_UTIL_PAGES_H
#define CTRAIN_UTIL_PAGES_H

#include <stddef.h>

/* A zeroed mapping of bytes (rounded up to pages: nothing resident until written), or NULL. */
void *ct_pages_alloc(size_t bytes);
void ct_pages_free(void *p, size_t bytes);
/* The bytes of [p, p + bytes) resident now (whole pages); 0 for NULL. Allocates nothing. */
size_t ct_pages_resident(const void *p, size_t bytes);

#endif
