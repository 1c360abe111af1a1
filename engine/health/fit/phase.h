/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — where a rank is in its step (internal): the phases of the hang record, written by
 * hang.c and read back by diagnose.c. A file of their own, below both, so that the writer and the
 * reader of the records do not call each other (hang.c prints diagnose.c's diagnosis after a
 * collective timeout). */
#ifndef CTRAIN_HEALTH_FIT_PHASE_H
#define CTRAIN_HEALTH_FIT_PHASE_H

/* Where a rank is, in the order a step runs them (a later phase is further on). */
enum ct_phase {
    CT_PHASE_START = 0, CT_PHASE_DATA, CT_PHASE_FORWARD, CT_PHASE_BACKWARD, CT_PHASE_ALLREDUCE,
    CT_PHASE_OPTIMIZER, CT_PHASE_CHECKPOINT, CT_PHASE_VALIDATION, CT_PHASE_DONE, CT_PHASE_N
};
const char *ct_hang_phase_name(int phase);   /* "unknown" for a number out of range */
int ct_hang_phase_parse(const char *name);   /* -1: not a phase */

#endif
