/* SPDX-License-Identifier: BSD-3-Clause */
/* The strategies libctrain implements, for ct_engine_init to register under their names (their
 * descriptors: engine/registry/strategy_<name>.c). */
#include "engine/strategies/strategies.h"

const struct ct_strategy_ops *const *ct_strategies(void)
{
    static const struct ct_strategy_ops *list[4];

    if (!list[0]) {
        list[0] = &ct_strategy_single_device;
        list[1] = &ct_strategy_ddp;
        list[2] = ct_strategy_ddp_sharded();
    }
    return list;
}
