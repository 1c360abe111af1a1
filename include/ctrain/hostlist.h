/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — SLURM hostlists: "n[001-004,007],r[1-2]n[1-4]" <-> the host names they stand for.
 *
 * The syntax and order are SLURM's, checked against `scontrol show hostnames` / `show hostlist`
 * (t/unit/test_hostlist.c, against SLURM 22.05's and 24.11's): names separated by commas or
 * blanks (empty names skipped), each with any number of bracket groups and text between and after
 * them ("node[1-2]-ib" is node1-ib node2-ib, "a[1-2]b[3-4]c" is a1b3c a1b4c a2b3c a2b4c; SLURM
 * accepts text after the last ']' since 23.02.5, and so does ctrain: a ']' outside brackets is
 * text too); a group holds comma-separated numbers and ranges lo-hi. Zero padding is kept: the width of a
 * range is the length of the text of its lo, blanks and '+' included ("01-10" gives 01..10,
 * "9-10" gives 9 and 10, "[089, 100]" gives 089 and 0100). Several groups expand in SLURM's
 * order: the last group turns fastest, then the first, the second, ..., the one before the last
 * slowest ("r[1-2]n[1-2]" is r1n1 r1n2 r2n1 r2n2; "a[1-2]b[1-2]c[1-2]" is a1b1c1 a1b1c2 a2b1c1
 * a2b1c2 a1b2c1 ...). Order and duplicates are kept.
 * Where SLURM invents names (an unbalanced '[' gets a ']' appended) or ignores junk before a
 * range's '-' ("[1a-2]"), ctrain refuses the list instead; it accepts ranges of up to
 * CT_HOSTLIST_MAX_HOSTS where SLURM 22.05 stops at 65536 per range.
 * Compression is SLURM's ranged form: consecutive hosts with the same prefix and a compatible
 * numeric suffix become ranges, neighbouring ranges of one prefix share one bracket.
 * libctrain-core: the SPANK plugin uses it inside srun.
 */
#ifndef CTRAIN_HOSTLIST_H
#define CTRAIN_HOSTLIST_H

#include <stddef.h>

#include "ctrain/error.h"

/* Most hosts one expression may expand to: ten times the largest machines (~100k nodes); a typo
 * like n[1-99999999] is an error, not an OOM. */
#define CT_HOSTLIST_MAX_HOSTS (1024u * 1024u)

typedef struct ct_hostlist ct_hostlist;

/* Empty list; NULL on OOM. */
ct_hostlist *ct_hostlist_new(void);

/* Expand expr. Malformed expressions are CT_EINVAL (catalogue id "hostlist-malformed") with a
 * message naming the expression and what is wrong at which position. */
int ct_hostlist_expand(const char *expr, ct_hostlist **out, ct_error *err);

/* Append one host name (no brackets, no commas). */
int ct_hostlist_push(ct_hostlist *hl, const char *host, ct_error *err);

size_t ct_hostlist_count(const ct_hostlist *hl);

/* The i-th host, or NULL when i >= count. Valid until the list is changed or freed. */
const char *ct_hostlist_get(const ct_hostlist *hl, size_t i);

/* Index of the first host equal to name, or -1. */
long ct_hostlist_find(const ct_hostlist *hl, const char *name);

/* SLURM's compressed form in a malloc'd string the caller frees ("" for an empty list). */
int ct_hostlist_compress(const ct_hostlist *hl, char **out, ct_error *err);

void ct_hostlist_free(ct_hostlist *hl);

#endif
