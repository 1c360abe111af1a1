/* SPDX-License-Identifier: BSD-3-Clause */
/* The precisions' descriptors (their implementation: engine/precision/precision.c's table, which
 * names its rows by enum ct_precision_row, components.h: the implemented rows first, in that enum's
 * order). The accelerator masks say what ctrain's engine really computes in; names known but
 * unsupported are rejected by the connector with the list of what works, never switched silently. */
#include "engine/registry/components.h"

ct_registry_entry ct_precision_desc[] = {
    [CT_PRECISION_32_TRUE] = { .name = "32-true", .description = "fp32 weights and math",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .is_default = 1 },
    [CT_PRECISION_BF16_MIXED] = { .name = "bf16-mixed",
      .description = "bf16 GEMM inputs, fp32 master weights and accumulation",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    [CT_PRECISION_16_MIXED] = { .name = "16-mixed",
      .description = "fp16 GEMM inputs with dynamic loss scaling, fp32 master weights", .accelerators = CT_ACCEL_CUDA },
    /* The description says why each is refused: the connector's error quotes it. */
    [CT_PRECISION_64_TRUE] = { .name = "64-true", .description = "fp64 parameters, activations, gradients, optimizer "
      "state, collectives and checkpoints (F64)", .accelerators = CT_ACCEL_CPU },
    [CT_PRECISION_BF16_TRUE] = { .name = "bf16-true", .description = "bf16 parameters, activations, gradients, "
      "optimizer state, collectives and checkpoints (BF16); fp32 arithmetic and GEMM accumulation",
      .accelerators = CT_ACCEL_CPU },
    /* The description says why it is refused: the connector's error quotes it. */
    { .name = "16-true", .description = "fp16 weights and math: refused until ctrain's GPU path has run on a GPU "
      "(fp16 math is for cuda; no GPU has run it yet)", .accelerators = 0 },
    { .name = "32", .description = "legacy name of 32-true", .legacy_of = "32-true" },
    { .name = "64", .description = "legacy name of 64-true", .legacy_of = "64-true" },
    { .name = "16", .description = "legacy name of 16-mixed", .legacy_of = "16-mixed" },
    { .name = "bf16", .description = "legacy name of bf16-mixed", .legacy_of = "bf16-mixed" },
    { .name = NULL },
};
