/* SPDX-License-Identifier: BSD-3-Clause */
/* libctrain start-up: every implementation registers under its name in libctrain-core's registries.
 * Lives at the top of the layering because it names every part below. */
#include "ctrain/checkpoint_io.h"
#include "ctrain/engine.h"
#include "ctrain/launcher.h"
#include "ctrain/registry.h"
#include "engine/accelerators/accelerators.h"
#include "engine/models/models.h"
#include "engine/precision/precisions.h"
#include "engine/strategies/strategies.h"
#include "pmix/environment.h"

void ct_engine_init(void)
{
    static int done;

    if (done)
        return;
    done = 1;
    ct_accelerators_register();
    ct_models_register_builtin();
    ct_registry_set_ops(CT_REG_PRECISION, "32-true", &ct_precision_32_true);
    ct_registry_set_ops(CT_REG_PRECISION, "bf16-mixed", &ct_precision_bf16_mixed);
    ct_registry_set_ops(CT_REG_PRECISION, "16-mixed", &ct_precision_16_mixed);
    ct_registry_set_ops(CT_REG_PRECISION, "64-true", &ct_precision_64_true);
    ct_registry_set_ops(CT_REG_PRECISION, "bf16-true", &ct_precision_bf16_true);
    ct_registry_set_ops(CT_REG_STRATEGY, "single_device", &ct_strategy_single_device);
    /* ddp_fork is ddp with another launcher; variants (ddp_no_overlap, ...) run ddp with their options. */
    ct_registry_set_ops(CT_REG_STRATEGY, "ddp", &ct_strategy_ddp);
    ct_registry_set_ops(CT_REG_STRATEGY, "ddp_fork", &ct_strategy_ddp);
    ct_registry_set_ops(CT_REG_STRATEGY, "ddp_sharded", &ct_strategy_ddp_sharded);
    ct_registry_set_ops(CT_REG_CHECKPOINT_IO, "safetensors", &ct_checkpoint_io_safetensors);
    ct_registry_set_ops(CT_REG_LAUNCHER, "external", &ct_launcher_external);
    ct_registry_set_ops(CT_REG_LAUNCHER, "subprocess", &ct_launcher_subprocess);
    ct_registry_set_ops(CT_REG_LAUNCHER, "fork", &ct_launcher_fork);
    ct_pmix_env_register();
}
