/* SPDX-License-Identifier: BSD-3-Clause */
/* safetensors' descriptor (its implementation: engine/checkpoint_io/safetensors.c), the checkpoint
 * IO every plan uses. */
#include "engine/registry/components.h"

ct_registry_entry ct_checkpoint_io_safetensors_desc[] = {
    { .name = "safetensors", .description = "safetensors files written atomically (tmp, fsync, rename)",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    { .name = NULL },
};
