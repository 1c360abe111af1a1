/* SPDX-License-Identifier: BSD-3-Clause */
/* external's descriptor (its implementation: engine/launchers/external.c). The connector's choice
 * when the cluster environment started the processes, or one process suffices. */
#include "engine/registry/components.h"

ct_registry_entry ct_launcher_external_desc[] = {
    { .name = "external", .description = "processes started by srun, mpirun, jsrun or torchrun: nothing to launch",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .list_order = 0 },
    { .name = NULL },
};
