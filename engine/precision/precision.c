/* SPDX-License-Identifier: BSD-3-Clause */
/* Precisions the engine computes in: one row each, naming its descriptor's row (the descriptors,
 * with their names and the accelerators each runs on: engine/registry/precisions.c), so the name
 * is written once, there. A name the connector knows but the engine does not implement (16-true)
 * has no row here and is rejected before a run starts. */
#include "engine/precision/precisions.h"
#include "engine/registry/components.h"

struct impl {
    enum ct_precision_row desc; /* its row in ct_precision_desc[] */
    struct ct_precision_ops ops; /* without a name: the row's */
};

static const struct impl table[] = {
    /* fp32 throughout. */
    { CT_PRECISION_32_TRUE, { .param_dtype = CT_DTYPE_F32, .gemm_dtype = CT_DTYPE_F32 } },
    /* bf16 GEMM inputs, fp32 master weights, accumulation, loss and update. bf16 keeps fp32's
     * exponent range, so no loss scaling. On cpu the engine emulates it for numerics (see
     * engine/models/mlp/mlp.c). */
    { CT_PRECISION_BF16_MIXED, { .param_dtype = CT_DTYPE_F32, .gemm_dtype = CT_DTYPE_BF16 } },
    /* fp16 GEMM inputs: fp16's narrow range underflows small gradients, hence dynamic loss scaling
     * (cuda only; the connector rejects it on cpu). */
    { CT_PRECISION_16_MIXED, { .param_dtype = CT_DTYPE_F32, .gemm_dtype = CT_DTYPE_F16, .loss_scaling = 1 } },
    /* fp64 throughout, as Lightning's 64-true (model.double()): the model stores parameters,
     * gradients and activations in fp64, the optimizer's state and update are fp64, ddp's allreduce
     * sums fp64 and checkpoints hold F64 tensors. GEMMs are fp64 products (OpenBLAS dgemm on cpu). */
    { CT_PRECISION_64_TRUE, { .param_dtype = CT_DTYPE_F64, .gemm_dtype = CT_DTYPE_F64 } },
    /* bf16 throughout, as Lightning's bf16-true (model.to(torch.bfloat16)): parameters, gradients,
     * activations and the optimizer's state stored in bf16; every operation loads bf16 into fp32
     * registers, computes in fp32 (GEMMs on oneDNN with fp32 accumulation) and stores bf16. ddp's
     * allreduce sums in fp32 and rounds once; checkpoints hold BF16 tensors. No loss scaling: bf16
     * has fp32's exponent range. */
    { CT_PRECISION_BF16_TRUE, { .param_dtype = CT_DTYPE_BF16, .gemm_dtype = CT_DTYPE_BF16 } },
};

#define N_IMPLS (sizeof(table) / sizeof(table[0]))

const struct ct_precision_ops *ct_precision_at(int i)
{
    static struct ct_precision_ops named[N_IMPLS];

    if (i < 0 || i >= (int)N_IMPLS)
        return NULL;
    if (!named[i].name) {
        named[i] = table[i].ops;
        named[i].name = ct_precision_desc[table[i].desc].name;
    }
    return &named[i];
}
