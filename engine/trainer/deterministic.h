/* SPDX-License-Identifier: BSD-3-Clause */
/* --deterministic, as Lightning's deterministic=True: a run is reproducible bit for bit, or refused
 * (internal to the Trainer). */
#ifndef CTRAIN_TRAINER_DETERMINISTIC_H
#define CTRAIN_TRAINER_DETERMINISTIC_H

#include "ctrain/error.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/loops/loops.h"

/* The engine sums in a fixed order for a fixed world size, batch size and thread count: OpenBLAS's
 * and the OpenMP team's (OpenBLAS and oneDNN divide a GEMM's work by their threads, and the
 * rounding follows; oneDNN's AVX2 GEMM rounds differently on 1 and 2 threads). Continuing the
 * checkpoint at path with another of these would not reproduce the run that wrote it: refused
 * (CT_ECONFLICT, the differing setting and how to match it). Collective: every rank calls it. */
int ct_deterministic_check_resume(ct_run *run, const char *path, ct_error *err);

#endif
