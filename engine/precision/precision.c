/* Precisions the engine computes in. Names the connector knows but the engine does not implement
 * (64-true, bf16-true, 16-true) have no ops here and are rejected before a run starts. */
#include "engine/precision/precisions.h"

const struct ct_precision_ops ct_precision_32_true = {
    .name = "32-true",
    .param_dtype = CT_DTYPE_F32,
    .gemm_dtype = CT_DTYPE_F32,
    .loss_scaling = 0,
};
