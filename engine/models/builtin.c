/* SPDX-License-Identifier: BSD-3-Clause */
/* The built-in models and data modules, and the device implementations this build has. Called by
 * ct_engine_init. As the other components, an implementation carries no name: each is registered
 * under its descriptor's (engine/registry/model_NAME.c, datamodule_NAME.c), paired by symbol from
 * the Makefile's list, so the name is written once and a descriptor without an implementation, or
 * an implementation without a descriptor, does not link. */
#include "ctrain/registry.h"
#include "engine/data/datamodules.h"
#include "engine/models/models.h"
#include "engine/registry/components.h"

#define REGISTER_MODEL(id) ct_registry_set_ops(CT_REG_MODEL, ct_model_##id##_desc[0].name, &ct_model_##id);
#define REGISTER_DATAMODULE(id)                                                                                        \
    ct_registry_set_ops(CT_REG_DATAMODULE, ct_datamodule_##id##_desc[0].name, &ct_datamodule_##id);

void ct_models_register_builtin(void)
{
    CT_MODELS(REGISTER_MODEL)
    CT_DATAMODULES(REGISTER_DATAMODULE)
    /* Their cuda implementations are the CUDA module's, registered beside the cuda accelerator
     * (engine/accelerators/accelerators.c) through its loader. */
}
