/* SPDX-License-Identifier: BSD-3-Clause */
/* The precisions, one row each. A precision is plain data, so its row is all of it: the name, what
 * it says, the accelerators the engine computes it on, and, when the engine computes in it, its
 * number formats (COMPUTES: the ops the strategy is handed, named by the row). A name known but
 * not computed (16-true) has no formats and accelerators 0; the connector refuses it with the list
 * of what works, never switched silently. Adding a precision is adding its row and its test. */
#include "ctrain/precision.h"
#include "engine/registry/components.h"

/* The row's name and its number formats (struct ct_precision_ops, include/ctrain/precision.h): the
 * name written once, the formats static data, there in libctrain-core too. */
#define COMPUTES(row_name, param, gemm, scaling)                                                                      \
    .name = row_name, .ops = &(const struct ct_precision_ops) {                                                        \
        .name = row_name, .param_dtype = (param), .gemm_dtype = (gemm), .loss_scaling = (scaling)                      \
    }

ct_registry_entry ct_precision_desc[] = {
    /* fp32 throughout. */
    { COMPUTES("32-true", CT_DTYPE_F32, CT_DTYPE_F32, 0), .description = "fp32 weights and math",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .is_default = 1 },
    /* bf16 GEMM inputs, fp32 master weights, accumulation, loss and update. bf16 keeps fp32's
     * exponent range, so no loss scaling. */
    { COMPUTES("bf16-mixed", CT_DTYPE_F32, CT_DTYPE_BF16, 0),
      .description = "bf16 GEMM inputs, fp32 master weights and accumulation",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    /* fp16 GEMM inputs: fp16's narrow range underflows small gradients, hence dynamic loss scaling. */
    { COMPUTES("16-mixed", CT_DTYPE_F32, CT_DTYPE_F16, 1),
      .description = "fp16 GEMM inputs with dynamic loss scaling, fp32 master weights", .accelerators = CT_ACCEL_CUDA },
    /* As Lightning's 64-true (model.double()): the model stores parameters, gradients and
     * activations in fp64, the optimizer's state and update are fp64, ddp's allreduce sums fp64
     * and checkpoints hold F64 tensors; GEMMs are fp64 products (OpenBLAS dgemm on cpu). The
     * description says why each is refused where it is: the connector's error quotes it. */
    { COMPUTES("64-true", CT_DTYPE_F64, CT_DTYPE_F64, 0), .description = "fp64 parameters, activations, gradients, "
      "optimizer state, collectives and checkpoints (F64)", .accelerators = CT_ACCEL_CPU },
    /* As Lightning's bf16-true (model.to(torch.bfloat16)): every operation loads bf16 into fp32
     * registers, computes in fp32 (GEMMs on oneDNN with fp32 accumulation) and stores bf16; ddp's
     * allreduce sums in fp32 and rounds once. No loss scaling: bf16 has fp32's exponent range. */
    { COMPUTES("bf16-true", CT_DTYPE_BF16, CT_DTYPE_BF16, 0), .description = "bf16 parameters, activations, "
      "gradients, optimizer state, collectives and checkpoints (BF16); fp32 arithmetic and GEMM accumulation",
      .accelerators = CT_ACCEL_CPU },
    /* Known, not computed: the description says why it is refused (the connector's error quotes it). */
    { .name = "16-true", .description = "fp16 weights and math: refused until ctrain's GPU path has run on a GPU "
      "(fp16 math is for cuda; no GPU has run it yet)", .accelerators = 0 },
    { .name = "32", .description = "legacy name of 32-true", .legacy_of = "32-true" },
    { .name = "64", .description = "legacy name of 64-true", .legacy_of = "64-true" },
    { .name = "16", .description = "legacy name of 16-mixed", .legacy_of = "16-mixed" },
    { .name = "bf16", .description = "legacy name of bf16-mixed", .legacy_of = "bf16-mixed" },
    { .name = NULL },
};
