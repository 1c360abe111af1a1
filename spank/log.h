/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — logging through SLURM, every line prefixed "ctrain: ". The leaf of the
 * plugin: it calls nothing else of spank/ (t/90-layering.t checks the order of spank/ files). */
#ifndef CTRAIN_SPANK_LOG_H
#define CTRAIN_SPANK_LOG_H

#include "ctrain/error.h"

/* The plugstack `verbose` argument: info messages at info level instead of verbose level. */
void ct_spank_log_verbose(int on);
/* slurm_error / slurm_info (verbose) or slurm_verbose, with the "ctrain: " prefix. */
void ct_spank_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ct_spank_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An error with its hint, as two lines. */
void ct_spank_report(const ct_error *err);

#endif
