/* SPDX-License-Identifier: BSD-3-Clause */
/* The accelerators this build has, registered under their names for ct_engine_init: cpu always,
 * cuda in CUDA builds (engine/accelerators/cuda.c). Their descriptors: engine/registry/accelerator_*.c. */
#include "ctrain/registry.h"
#include "engine/accelerators/accelerators.h"

void ct_accelerators_register(void)
{
    ct_registry_set_ops(CT_REG_ACCELERATOR, ct_accelerator_cpu.name, &ct_accelerator_cpu);
#ifdef CT_HAVE_CUDA
    /* Registration only: no CUDA call until the connector asks whether cuda is available. */
    ct_registry_set_ops(CT_REG_ACCELERATOR, ct_accelerator_cuda.name, &ct_accelerator_cuda);
#endif
}
