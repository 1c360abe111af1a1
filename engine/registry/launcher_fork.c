/* SPDX-License-Identifier: BSD-3-Clause */
/* fork's descriptor (its implementation: engine/launchers/fork.c). The connector's choice for the
 * strategies that fork their workers (a descriptor's .launch = CT_LAUNCH_FORK). */
#include "engine/registry/components.h"

ct_registry_entry ct_launcher_fork_desc[] = {
    { .name = "fork", .description = "fork N workers from the calling program; rank 0's result returns to it",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .list_order = 2 /* after subprocess */ },
    { .name = NULL },
};
