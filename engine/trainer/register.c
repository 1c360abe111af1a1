/* SPDX-License-Identifier: BSD-3-Clause */
/* ct_engine_init, libctrain's start-up: every implementation registers under its name in
 * libctrain-core's registries. Lives at the top of the layering because it names every part below. */
#include "ctrain/checkpoint_io.h"
#include "ctrain/connector.h"
#include "ctrain/engine.h"
#include "ctrain/launcher.h"
#include "ctrain/registry.h"
#include "engine/accelerators/accelerators.h"
#include "engine/checkpoint/hf_io.h"
#include "engine/models/models.h"
#include "engine/strategies/strategies.h"
#include "engine/registry/components.h"
#include "pmix/environment.h"

/* A launcher's and a checkpoint IO's ops carry no name: each is registered under its descriptor's
 * (engine/registry/launcher_NAME.c, checkpoint_io_NAME.c), paired by symbol, so the name is written
 * once and an implementation without a descriptor, or a descriptor without one, does not link. */
#define REGISTER_LAUNCHER(id) ct_registry_set_ops(CT_REG_LAUNCHER, ct_launcher_##id##_desc[0].name, &ct_launcher_##id);
#define REGISTER_CHECKPOINT_IO(id)                                                                                     \
    ct_registry_set_ops(CT_REG_CHECKPOINT_IO, ct_checkpoint_io_##id##_desc[0].name, &ct_checkpoint_io_##id);

void ct_engine_init(void)
{
    static int done;

    if (done)
        return;
    done = 1;
    ct_accelerators_register();
    ct_models_register_builtin();
    /* Each under the name its ops carry; the names built on one (ddp_fork, ddp_no_overlap, ...) run
     * their base's ops with their own options and launcher (their descriptor's base). */
    for (const struct ct_strategy_ops *const *st = ct_strategies(); *st; st++)
        ct_registry_set_ops(CT_REG_STRATEGY, (*st)->name, *st);
    CT_CHECKPOINT_IOS(REGISTER_CHECKPOINT_IO)
    CT_LAUNCHERS(REGISTER_LAUNCHER)
    ct_pmix_env_register();
    /* --init-from: the connector (libctrain-core, which links no checkpoint code) plans the file's
     * shape through this reader, which reads the file with checkpoint IO and hands its tensors to
     * the model class's hf_config. A function rather than a registry entry: there is one reader,
     * the Hugging Face layout's, and its caller is the connector alone. */
    ct_connector_set_model_file(ct_hf_model_config);
}
