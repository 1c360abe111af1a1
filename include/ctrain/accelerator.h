/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the Accelerator: knows its device and nothing else.
 *
 * Availability, device count, setting the device, memory stats, and making a model's
 * implementation for its device (the device seam: nothing above the Accelerator names a device). It knows nothing about ranks,
 * collectives or checkpoints (those are the Strategy's). Implementations are attached to their
 * registry entries by name with ct_registry_set_ops(CT_REG_ACCELERATOR, ...) (ct_engine_init:
 * engine/accelerators/accelerators.c); libctrain-core only has their descriptors.
 */
#ifndef CTRAIN_ACCELERATOR_H
#define CTRAIN_ACCELERATOR_H

#include <stddef.h>

#include "ctrain/error.h"
#include "ctrain/model.h"

/* Most devices one node may use (ids and process counts). */
#define CT_MAX_DEVICES 256

typedef struct ct_memstats {
    size_t used_bytes;   /* device memory in use by this process (cpu: resident set size) */
    size_t total_bytes;  /* device capacity (cpu: physical memory, or this process's cgroup limit where lower) */
    size_t peak_bytes;   /* high-water mark (cpu: peak RSS) */
} ct_memstats;

struct ct_accelerator_ops {
    const char *name;
    /* 1: a model's parameters and gradients on this device are device memory, which a DDP strategy
     * reduces with the device's collective library (NCCL on cuda); 0: host memory (MPI). */
    int device_memory;
    /* 1 when usable here; 0 with a reason in why (e.g. "no CUDA driver"). */
    int (*is_available)(char *why, size_t why_size);
    /* Devices this process may use (cpu: online cores; cuda: after CUDA_VISIBLE_DEVICES). */
    int (*device_count)(void);
    /* Make device id current for this process/thread. */
    int (*set_device)(int id, ct_error *err);
    int (*memory_stats)(int id, ct_memstats *out);
    /* The model's implementation on this device for the placement's precision (the device id is
     * current). cpu: the host model itself, computing in where->gemm_dtype; other devices: the
     * implementation registered for (model, accelerator) (ct_model_register_impl), else
     * CT_ENOTAVAIL "model-not-on-accelerator". *out == host needs no freeing of its own. */
    int (*model_to_device)(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err);
    /* The host's compute threads (BLAS, OpenMP) for one rank of world over nodes: this node's cores
     * shared among its ranks unless the user chose; is_zero: this rank prints the notes. Returns
     * the threads each rank computes on (recorded in checkpoints). NULL: the host is left as is, 0. */
    int (*host_threads_setup)(int world, int nodes, int is_zero);
    /* Optional, for a probed accelerator (cuda): whether its driver is here at all, without loading
     * the device's libraries (cuda: libcuda.so.1, not libctrain-cuda.so.0 and cuBLAS). Auto-
     * detection asks it first and stops at 0, with the reason in why; NULL: is_available only. */
    int (*is_present)(char *why, size_t why_size);
};

#endif
