/* SPDX-License-Identifier: BSD-3-Clause */
/* cuda's descriptor (its implementation: engine/accelerators/cuda.c, in CUDA builds). Its devices
 * are probed (is_available, device_count) and named by id in --devices; auto picks it when the
 * probe finds one. */
#include "engine/registry/components.h"

ct_registry_entry ct_accelerator_cuda_desc[] = {
    { .name = "cuda", .aliases = { "gpu", NULL },
      .description = "NVIDIA GPUs through CUDA, one process per GPU", .accelerators = CT_ACCEL_CUDA,
      .probe_devices = 1 },
    { .name = NULL },
};
