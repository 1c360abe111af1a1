/* ctrain — SLURM hostlists: "n[001-004,007],gpu-[1-2]-ib" <-> the host names they stand for.
 *
 * The syntax is SLURM's (slurm.conf(5), scontrol show hostnames): a comma-separated list of
 * names, each with any number of bracket groups; a group holds comma-separated numbers and
 * ranges lo-hi. Zero padding is kept: the width of a range is the width of its lo ("01-10" gives
 * 01..10, "9-10" gives 9 and 10). Several groups in one name expand as nested loops, the first
 * group outermost ("r[1-2]n[1-2]" is r1n1, r1n2, r2n1, r2n2). Order and duplicates are kept.
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
