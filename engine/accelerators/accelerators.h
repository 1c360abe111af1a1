/* SPDX-License-Identifier: BSD-3-Clause */
/* The accelerators libctrain implements, their ops without a name (their descriptors' in
 * engine/registry/accelerator_NAME.c); registered in ct_engine_init(). */
#ifndef CTRAIN_ACCELERATORS_H
#define CTRAIN_ACCELERATORS_H

#include "ctrain/accelerator.h"

extern const struct ct_accelerator_ops ct_accelerator_cpu;
#ifdef CT_HAVE_CUDA
/* The CUDA module's (engine/accelerators/cuda.c); libctrain registers the loader's ops instead. */
extern const struct ct_accelerator_ops ct_accelerator_cuda;
#endif

/* Register the accelerators this build has (cpu; cuda in CUDA builds, and the models' cuda
 * implementations: both through the CUDA module's loader, cuda_module.h) with the registry. */
void ct_accelerators_register(void);

#endif
