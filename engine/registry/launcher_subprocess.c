/* SPDX-License-Identifier: BSD-3-Clause */
/* subprocess's descriptor (its implementation: engine/launchers/subprocess.c). The connector's
 * choice for a process-per-device strategy with more than one device on a node nothing launched. */
#include "engine/registry/components.h"

ct_registry_entry ct_launcher_subprocess_desc[] = {
    { .name = "subprocess", .description = "ctrain supervises and hosts a PMIx server; fork+exec N copies of "
      "the command line", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .list_order = 1 /* after external */ },
    { .name = NULL },
};
