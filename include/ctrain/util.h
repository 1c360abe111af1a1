/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — small string and number helpers shared by every module (libctrain-core). */
#ifndef CTRAIN_UTIL_H
#define CTRAIN_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Strict decimal parsing: the whole string must be a number in [min, max].
 * Return 0, or CT_EINVAL (no message: callers name the input themselves). */
int ct_parse_long(const char *s, long min, long max, long *out);
int ct_parse_double(const char *s, double *out);

/* The candidate closest to word by edit distance, or NULL when none is close enough to suggest
 * (used for "did you mean" hints). cands is NULL-terminated. */
const char *ct_str_closest(const char *word, const char *const *cands);

/* Levenshtein distance, capped at 255. */
int ct_str_distance(const char *a, const char *b);

/* snprintf into a fixed buffer that reports truncation as -1. */
int ct_str_copy(char *dst, size_t size, const char *src);

/* src made safe for a terminal, into dst (size bytes, cut at a whole character): control characters
 * (C0, DEL, C1) and bytes that are not UTF-8 are written as \xNN (\u00NN for a C1 character), so
 * text read from a file or received from another rank cannot move the cursor, erase or retitle
 * anything. The one escaping helper: whatever ctrain prints of such text goes through it. Returns dst. */
const char *ct_str_escape(char *dst, size_t size, const char *src);

/* Duplicate or abort-free NULL on OOM. */
char *ct_strdup(const char *s);

/* Value of key in a "k=v,k=v" options string, copied into buf; NULL when absent. */
const char *ct_options_get(const char *options, const char *key, char *buf, size_t size);

/* write(2) all of buf, retrying on EINTR and short writes. 0, or -1 with errno set. */
int ct_write_all(int fd, const void *buf, size_t len);

/* fsync the directory holding path (after a rename into it, so the new name survives a crash).
 * 0, or -1 with errno set. */
int ct_fsync_parent_dir(const char *path);

/* Monotonic clock in seconds. */
double ct_time_now(void);
/* Wall-clock time in seconds since the epoch (CLOCK_REALTIME): for times another process or host
 * compares (the hang records), never for durations. */
double ct_wall_now(void);

/* A signal's name into buf: "SIGUSR1", or "signal N" for one without a name. */
const char *ct_signal_name(int sig, char *buf, size_t size);

/* This node's name as the resource manager knows it, into buf: SLURMD_NODENAME in a SLURM step
 * (slurm.conf's NodeName, which scontrol, the supervisor's exclusions and an admin use; the host
 * name may differ, e.g. n2.cluster.example for n2), else the host name. 0, or -1 (buf "" or cut). */
int ct_node_name(char *buf, size_t size);

#endif
