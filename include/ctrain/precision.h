/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the Precision plugin: which number formats the training step computes in.
 *
 * The model keeps fp32 master weights whatever the precision ("-mixed": GEMM inputs in the
 * compute type, accumulation and update in fp32; "-true": everything in that type).
 */
#ifndef CTRAIN_PRECISION_H
#define CTRAIN_PRECISION_H

#include "ctrain/dtype.h"
#include "ctrain/error.h"

struct ct_precision_ops {
    const char *name;          /* canonical name, e.g. "bf16-mixed" */
    enum ct_dtype param_dtype; /* master weights */
    enum ct_dtype gemm_dtype;  /* matrix-multiply inputs */
    int loss_scaling;          /* 1: dynamic loss scaling (16-mixed) */
};

#endif
