/* SPDX-License-Identifier: BSD-3-Clause */
/* single_device's descriptor (its implementation: engine/strategies/single_device.c). */
#include "engine/registry/components.h"

ct_registry_entry ct_strategy_single_device_desc[] = {
    { .name = "single_device", .description = "one process on one device, no communication",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .launch = CT_LAUNCH_SINGLE, .auto_rule = CT_AUTO_ONE_PROCESS,
      .one_process = 1, .list_order = -1 /* first: before ddp's rows */ },
    { .name = NULL },
};
