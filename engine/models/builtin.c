/* SPDX-License-Identifier: BSD-3-Clause */
/* The built-in models and data modules under their registry names, and the device
 * implementations this build has. Called by ct_engine_init. */
#include "ctrain/registry.h"
#include "engine/data/datamodules.h"
#include "engine/models/models.h"

void ct_models_register_builtin(void)
{
    ct_registry_set_ops(CT_REG_MODEL, "mlp", &ct_model_mlp);
    ct_registry_set_ops(CT_REG_MODEL, "gpt", &ct_model_gpt);
    ct_registry_set_ops(CT_REG_DATAMODULE, "fashion-mnist", &ct_datamodule_fashion_mnist);
    ct_registry_set_ops(CT_REG_DATAMODULE, "tokens", &ct_datamodule_tokens);
#ifdef CT_HAVE_CUDA
    ct_model_register_impl("mlp", "cuda", ct_mlp_cuda_model_create);
    ct_model_register_impl("gpt", "cuda", ct_gpt_cuda_model_create);
#endif
}
