/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the Precision plugin: which number formats the training step computes in.
 *
 * "-mixed": fp32 parameters (master weights), GEMM inputs in the compute type, accumulation and
 * update in fp32. "-true": parameters, activations, gradients, optimizer state and collectives in
 * param_dtype (64-true: fp64), which the model is asked to store in (ct_model_set_param_dtype).
 */
#ifndef CTRAIN_PRECISION_H
#define CTRAIN_PRECISION_H

#include "ctrain/dtype.h"
#include "ctrain/error.h"

struct ct_precision_ops {
    const char *name;          /* canonical name, e.g. "bf16-mixed" */
    enum ct_dtype param_dtype; /* what the model stores parameters and gradients in */
    enum ct_dtype gemm_dtype;  /* matrix-multiply inputs */
    int loss_scaling;          /* 1: dynamic loss scaling (16-mixed) */
};

#endif
