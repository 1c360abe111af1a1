/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — stragglers during a fit (straggler.c: --on-straggler).
 *
 * Internal to libctrain: one of the fit's health checks (engine/health/fit/), on the strategy's
 * collectives. Below the loops, which call it before the first step and after every optimizer step;
 * it reads the run (engine/run/run.h) and logs through the loggers.
 */
#ifndef CTRAIN_HEALTH_FIT_STRAGGLER_H
#define CTRAIN_HEALTH_FIT_STRAGGLER_H

#include "ctrain/error.h"
#include "engine/run/run.h"

/* A collective, before the first step (nothing when --on-straggler is off): every rank's node. */
int ct_straggler_start(ct_run *run, ct_error *err);
/* After every optimizer step, on every rank, with the step's wall time: every straggler_every steps
 * one allreduce of each rank's busy and waiting time; a node named is logged (and, with stop,
 * run->straggler_stop set: the fit saves last.safetensors and ends). */
int ct_straggler_step(ct_run *run, double step_seconds, ct_error *err);
void ct_straggler_free(ct_run *run);

/* A node named during the fit (summary.json, the requeue's message); the first CT_MAX_STRAGGLERS are kept. */
#define CT_MAX_STRAGGLERS 8
struct ct_straggler_named {
    char node[64];
    int rank;                  /* the node's slowest rank */
    int64_t step;              /* the optimizer step it was named at */
    double busy_ms, median_ms; /* its busy time per step, the median node's, in that window */
};
/* The nodes named so far (0 when the check is off); the i-th, from 0. */
int ct_straggler_count(const ct_run *run);
const struct ct_straggler_named *ct_straggler_at(const ct_run *run, int i);
/* Seconds spent in the windows' gathers and judgement (summary.json). */
double ct_straggler_seconds(const ct_run *run);

#endif
