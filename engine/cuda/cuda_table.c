/* SPDX-License-Identifier: BSD-3-Clause */
/* The one symbol libctrain-cuda.so.0 exports (engine/accelerators/cuda_module.h): its table, which
 * the loader in libctrain (engine/accelerators/cuda_module.c) finds with dlsym. Built into the module
 * only. Its folder sits above what it gathers (t/90): the cuda accelerator, the models' cuda
 * implementations and NCCL (engine/collectives/nccl_lib.c). Its nccl_* members take
 * nccl_lib.h's ct_nccl_* (declared there only), so the compiler holds the table's types to them. */
#ifdef CT_HAVE_CUDA
#include "engine/accelerators/accelerators.h"
#include "engine/accelerators/cuda_module.h"
#include "engine/collectives/nccl_lib.h"
#include "engine/models/models.h"

#ifndef CTRAIN_VERSION
#error "CTRAIN_VERSION is set by the Makefile (from the file VERSION)"
#endif

__attribute__((visibility("default"))) const struct ct_cuda_module ct_cuda_module_v1 = {
    .abi = CT_CUDA_MODULE_ABI,
    .size = sizeof(struct ct_cuda_module),
    .version = CTRAIN_VERSION,
    .accelerator = &ct_accelerator_cuda,
    .mlp_create = ct_mlp_cuda_model_create,
    .gpt_create = ct_gpt_cuda_model_create,
    .nccl_create = ct_nccl_create,
    .nccl_broadcast = ct_nccl_broadcast,
    .nccl_allreduce_start = ct_nccl_allreduce_start,
    .nccl_allgather_start = ct_nccl_allgather_start,
    .nccl_reduce_scatter_start = ct_nccl_reduce_scatter_start,
    .nccl_wait = ct_nccl_wait,
    .nccl_free = ct_nccl_free,
};
#endif
