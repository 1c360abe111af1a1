/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory pages of an array: how many bytes of it are resident (measured with mincore), and giving
 * the pages wholly inside it back to the operating system (fsdp's released parameters). */
#ifndef CTRAIN_UTIL_RESIDENT_H
#define CTRAIN_UTIL_RESIDENT_H

#include <stddef.h>

/* Bytes of [p, p + bytes) on resident pages (a page partly inside counts its part); 0 when p is
 * NULL or mincore fails. */
size_t ct_mem_resident(const void *p, size_t bytes);
/* The pages wholly inside [p, p + bytes) back to the system (MADV_DONTNEED: anonymous memory reads
 * as zeros until written again; the partial pages at either end keep their contents). */
void ct_mem_release(void *p, size_t bytes);
/* No transparent huge pages for the pages inside [p, p + bytes) (MADV_NOHUGEPAGE): an array whose
 * parts are released and faulted in again keeps 4 KiB pages (a huge page would bring 2 MiB back). */
void ct_mem_small_pages(void *p, size_t bytes);

#endif
