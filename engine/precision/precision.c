/* SPDX-License-Identifier: BSD-3-Clause */
/* Precisions the engine computes in: one row each (their descriptors, with the accelerators each
 * runs on: engine/registry/precisions.c). A name the connector knows but the engine does not
 * implement (16-true) has no row here and is rejected before a run starts. */
#include "engine/precision/precisions.h"

static const struct ct_precision_ops table[] = {
    /* fp32 throughout. */
    { .name = "32-true", .param_dtype = CT_DTYPE_F32, .gemm_dtype = CT_DTYPE_F32 },
    /* bf16 GEMM inputs, fp32 master weights, accumulation, loss and update. bf16 keeps fp32's
     * exponent range, so no loss scaling. On cpu the engine emulates it for numerics (see
     * engine/models/mlp/mlp.c). */
    { .name = "bf16-mixed", .param_dtype = CT_DTYPE_F32, .gemm_dtype = CT_DTYPE_BF16 },
    /* fp16 GEMM inputs: fp16's narrow range underflows small gradients, hence dynamic loss scaling
     * (cuda only; the connector rejects it on cpu). */
    { .name = "16-mixed", .param_dtype = CT_DTYPE_F32, .gemm_dtype = CT_DTYPE_F16, .loss_scaling = 1 },
    /* fp64 throughout, as Lightning's 64-true (model.double()): the model stores parameters,
     * gradients and activations in fp64, the optimizer's state and update are fp64, ddp's allreduce
     * sums fp64 and checkpoints hold F64 tensors. GEMMs are fp64 products (OpenBLAS dgemm on cpu). */
    { .name = "64-true", .param_dtype = CT_DTYPE_F64, .gemm_dtype = CT_DTYPE_F64 },
    /* bf16 throughout, as Lightning's bf16-true (model.to(torch.bfloat16)): parameters, gradients,
     * activations and the optimizer's state stored in bf16; every operation loads bf16 into fp32
     * registers, computes in fp32 (GEMMs on oneDNN with fp32 accumulation) and stores bf16. ddp's
     * allreduce sums in fp32 and rounds once; checkpoints hold BF16 tensors. No loss scaling: bf16
     * has fp32's exponent range. */
    { .name = "bf16-true", .param_dtype = CT_DTYPE_BF16, .gemm_dtype = CT_DTYPE_BF16 },
};

const struct ct_precision_ops *ct_precision_at(int i)
{
    return i >= 0 && i < (int)(sizeof(table) / sizeof(table[0])) ? &table[i] : NULL;
}
