/* SPDX-License-Identifier: BSD-3-Clause */
/* ct_engine_init, libctrain's start-up: every implementation registers under its name in
 * libctrain-core's registries. Lives at the top of the layering because it names every part below. */
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
    for (int i = 0; ct_precision_at(i); i++)
        ct_registry_set_ops(CT_REG_PRECISION, ct_precision_at(i)->name, ct_precision_at(i));
    /* Each under the name its ops carry; the names built on one (ddp_fork, ddp_no_overlap, ...) run
     * their base's ops with their own options and launcher (their descriptor's base). */
    for (const struct ct_strategy_ops *const *st = ct_strategies(); *st; st++)
        ct_registry_set_ops(CT_REG_STRATEGY, (*st)->name, *st);
    ct_registry_set_ops(CT_REG_CHECKPOINT_IO, "safetensors", &ct_checkpoint_io_safetensors);
    ct_registry_set_ops(CT_REG_LAUNCHER, "external", &ct_launcher_external);
    ct_registry_set_ops(CT_REG_LAUNCHER, "subprocess", &ct_launcher_subprocess);
    ct_registry_set_ops(CT_REG_LAUNCHER, "fork", &ct_launcher_fork);
    ct_pmix_env_register();
}
