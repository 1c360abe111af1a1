/* SPDX-License-Identifier: BSD-3-Clause */
/* NCCL for the collectives' nccl component as libctrain has it (nccl_lib.h's functions, declared
 * there only): forwarded to the CUDA module's (libctrain-cuda.so.0, loaded on the first call:
 * engine/accelerators/cuda_module.h), or CT_ENOTAVAIL in a build without CUDA. A file of its own: a
 * program that links the module's objects (the CUDA test tools) has their ct_nccl_* (nccl_lib.c)
 * and never takes these from libctrain.a. */
#include "engine/accelerators/cuda_module.h"
#include "engine/collectives/nccl_lib.h"

#define NCCL_MODULE(err) const struct ct_cuda_module *m = ct_cuda_module_get(err)

int ct_nccl_create(int rank, int world, double timeout_s, ct_tcpstore *store, ct_nccl **out, ct_error *err)
{
    NCCL_MODULE(err);

    *out = NULL;
    return m ? m->nccl_create(rank, world, timeout_s, store, out, err) : CT_ENOTAVAIL;
}

int ct_nccl_broadcast(ct_nccl *n, float *buf, size_t count, int root, ct_error *err)
{
    NCCL_MODULE(err);

    return m ? m->nccl_broadcast(n, buf, count, root, err) : CT_ENOTAVAIL;
}

int ct_nccl_allreduce_start(ct_nccl *n, float *buf, size_t count, ct_error *err)
{
    NCCL_MODULE(err);

    return m ? m->nccl_allreduce_start(n, buf, count, err) : CT_ENOTAVAIL;
}

int ct_nccl_allgather_start(ct_nccl *n, float *buf, size_t count, int rank, ct_error *err)
{
    NCCL_MODULE(err);

    return m ? m->nccl_allgather_start(n, buf, count, rank, err) : CT_ENOTAVAIL;
}

int ct_nccl_reduce_scatter_start(ct_nccl *n, const float *send, float *recv, size_t count, ct_error *err)
{
    NCCL_MODULE(err);

    return m ? m->nccl_reduce_scatter_start(n, send, recv, count, err) : CT_ENOTAVAIL;
}

int ct_nccl_wait(ct_nccl *n, ct_error *err)
{
    NCCL_MODULE(err);

    return m ? m->nccl_wait(n, err) : CT_ENOTAVAIL;
}

void ct_nccl_free(ct_nccl *n)
{
    NCCL_MODULE(NULL);

    if (n && m)
        m->nccl_free(n);
}
