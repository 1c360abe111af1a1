/* SPDX-License-Identifier: BSD-3-Clause */
/* libctrain-cuda.so.0: everything that calls CUDA, cuBLAS(Lt) or NCCL, loaded only when used
 * (internal to libctrain).
 *
 * libctrain and the ctrain CLI link none of the CUDA libraries: cuBLASLt's static initialisers
 * alone cost a process ~200 MB of RSS and a noticeable start-up, which every srun task and rank
 * of a CPU job, `ctrain env` and `ctrain plan` would pay. The module (the .cu files and the C files
 * that call CUDA: engine/accelerators/cuda.c, engine/nn/cuda_device.c, the models' cuda
 * implementations, NCCL) links them, and exports ONE symbol, CT_CUDA_MODULE_SYMBOL: the table
 * below. It resolves the libctrain symbols it uses from the process that loads it (libctrain.so,
 * or an executable linked with libctrain.a that exports them: the Makefile's dynamic list), so
 * there is never a second copy of libctrain's state.
 *
 * Its table is engine/cuda/cuda_table.c (a folder above the strategies: it gathers the accelerator,
 * the models' implementations and ddp's NCCL). The loader (engine/accelerators/cuda_module.c, in
 * libctrain; engine/collectives/nccl_loader.c for NCCL) dlopens it once, on the first call
 * that needs CUDA: asking whether cuda is available (after a cheap look for the driver when
 * auto-detecting), making a model on cuda, joining NCCL. Registering the cuda accelerator and the
 * models' cuda implementations loads nothing.
 */
#ifndef CTRAIN_CUDA_MODULE_H
#define CTRAIN_CUDA_MODULE_H

#include <stddef.h>

#include "ctrain/accelerator.h"
#include "ctrain/error.h"
#include "ctrain/model.h"
#include "ctrain/tcpstore.h"

/* Bumped whenever the table's layout or a member's meaning changes: a module from another build
 * of ctrain is refused instead of called. */
#define CT_CUDA_MODULE_ABI 1
#define CT_CUDA_MODULE_SYMBOL "ct_cuda_module_v1"
#define CT_CUDA_MODULE_SONAME "libctrain-cuda.so.0"

struct ct_nccl;

struct ct_cuda_module {
    unsigned abi;      /* CT_CUDA_MODULE_ABI */
    size_t size;       /* sizeof(struct ct_cuda_module) */
    const char *version; /* the ctrain version it was built with (refused when it differs) */
    const struct ct_accelerator_ops *accelerator;
    ct_model_impl_fn mlp_create;
    ct_model_impl_fn gpt_create;
    int (*nccl_create)(int rank, int world, double timeout_s, ct_tcpstore *store, struct ct_nccl **out,
                       ct_error *err);
    int (*nccl_broadcast)(struct ct_nccl *n, float *buf, size_t count, int root, ct_error *err);
    int (*nccl_allreduce_start)(struct ct_nccl *n, float *buf, size_t count, ct_error *err);
    int (*nccl_allgather_start)(struct ct_nccl *n, float *buf, size_t count, int rank, ct_error *err);
    int (*nccl_reduce_scatter_start)(struct ct_nccl *n, const float *send, float *recv, size_t count,
                                     ct_error *err);
    int (*nccl_wait)(struct ct_nccl *n, ct_error *err);
    void (*nccl_free)(struct ct_nccl *n);
};

/* --- the loader (libctrain) ------------------------------------------------------------------- */

/* The module's table, loading it on the first call (thread-safe); NULL with err set ("ctrain: ..."
 * reasons are the caller's to print) when it cannot be loaded. In a build without CUDA: NULL,
 * CT_ENOTAVAIL "accelerator-not-available". */
const struct ct_cuda_module *ct_cuda_module_get(ct_error *err);
/* 1 when the module is in this process already (loaded, or linked in: the CUDA test tools). */
int ct_cuda_module_loaded(void);

/* The cuda accelerator as libctrain registers it: every op loads the module first (is_present
 * does not: it only looks for the driver). */
extern const struct ct_accelerator_ops ct_cuda_module_accelerator;
/* The models' cuda implementations, registered by ct_accelerators_register. */
int ct_cuda_module_mlp_create(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err);
int ct_cuda_module_gpt_create(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err);
/* NCCL's functions are declared once, in engine/collectives/nccl_lib.h: the module's table
 * (engine/cuda/cuda_table.c) takes nccl_lib.c's, libctrain's forward to them
 * (engine/collectives/nccl_loader.c). */

#endif
