/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — hang forensics (hang.c: this rank's record, its live file and dumps; diagnose.c and
 * diagnose.h: ctrain diagnose reading them back; phase.c: the phases' names, which both use).
 *
 * Internal to libctrain: one of the fit's health checks (engine/health/fit/), which run inside a
 * fit on the strategy's collectives. Below the loops, which note where the step is (ct_hang_enter);
 * the Trainer starts and ends the record and its stop catcher dumps it.
 */
#ifndef CTRAIN_HEALTH_FIT_HANG_H
#define CTRAIN_HEALTH_FIT_HANG_H

#include <stdint.h>
#include <stdio.h>

#include "ctrain/error.h"
#include "ctrain/strategy.h"

#include "engine/health/fit/phase.h"

/* Start this rank's record (dumps go to root_dir/hang); returns the collective trace to hand the
 * strategy (ct_strategy_set_trace). */
ct_collective_trace *ct_hang_init(int rank, int world, const char *root_dir);
/* Once the run's directory is made and checked: move the record into DIR/hang/rank-R.live's shared
 * mapping (see hang.c), and point the supervisor's event records at DIR/hang; returns the
 * collective trace to hand the strategy again. */
ct_collective_trace *ct_hang_map(void);
/* The fit ended (ok: without an error): the phase is done; a fit that ended well removes its
 * live file (DIR/hang/rank-R.live), one that did not keeps it for ctrain diagnose. */
void ct_hang_finish(int ok);
/* The hot path: plain stores (and the vDSO clock), nothing else. */
void ct_hang_enter(int phase);
void ct_hang_step(int64_t step);
/* Write root_dir/hang/rank-R.json from a snapshot of the record (temp file, fsync, rename); reason:
 * "signal", "collective-timeout". 0, or -1 (said on stderr). Not from a signal handler. */
int ct_hang_dump(const char *reason);
/* After a collective timeout: dump; rank 0 waits a moment for the others' records, prints the
 * diagnosis and writes the ranks it has behind as ctrain supervise's event record
 * (engine/events/event.h); the others linger as long so that their abort does not end rank 0
 * first. */
void ct_hang_after_timeout(int is_zero);

#endif
