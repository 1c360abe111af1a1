/* SPDX-License-Identifier: BSD-3-Clause */
/* cpu's descriptor (its implementation: engine/accelerators/cpu.c). The default: auto falls back to
 * it when no accelerator with probed devices is available. */
#include "engine/registry/components.h"

ct_registry_entry ct_accelerator_cpu_desc[] = {
    { .name = "cpu", .description = "the host CPU; --devices N runs N processes on this node",
      .accelerators = CT_ACCEL_CPU, .is_default = 1 },
    { .name = NULL },
};
