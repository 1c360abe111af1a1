/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — CPU sets as arrays of 64-bit words (bit i of word i/64: OS index i), the planner's sets
 * without hwloc. Every set of one node model has the same number of words (nw); an index past them
 * is not on the node. */
#ifndef CTRAIN_BIND_CPUSET_H
#define CTRAIN_BIND_CPUSET_H

#include <stdint.h>

uint64_t *ct_cpuset_alloc(unsigned nw);
void ct_cpuset_copy(uint64_t *dst, const uint64_t *src, unsigned nw);
void ct_cpuset_and(uint64_t *dst, const uint64_t *a, const uint64_t *b, unsigned nw);
void ct_cpuset_or(uint64_t *dst, const uint64_t *a, const uint64_t *b, unsigned nw);
void ct_cpuset_set(uint64_t *s, unsigned nw, int id);
int ct_cpuset_intersects(const uint64_t *a, const uint64_t *b, unsigned nw);
int ct_cpuset_included(const uint64_t *sub, const uint64_t *super, unsigned nw);
int ct_cpuset_weight(const uint64_t *s, unsigned nw);
int ct_cpuset_iszero(const uint64_t *s, unsigned nw);
/* The lowest index after prev (-1: the first), or -1 when none. */
int ct_cpuset_next(const uint64_t *s, unsigned nw, int prev);
/* An OS index list ("0-7,16"; hwloc's list syntax without open ends) into s (cleared first): the
 * number of indexes it names, those past the set's words included (not set: *past is then 1), or
 * -1 when it does not parse. */
long ct_cpuset_parse_list(uint64_t *s, unsigned nw, const char *list, int *past);

#endif
