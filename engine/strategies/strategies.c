/* SPDX-License-Identifier: BSD-3-Clause */
/* The strategies libctrain implements, gathered from the Makefile's list of descriptor files
 * (components.gen.h: one row per engine/registry/strategy_NAME.c), for ct_engine_init to register.
 * A strategy's ops carry no name of their own: each is copied here with its descriptor's, so the
 * name is written once and a descriptor without an implementation does not link. */
#include "engine/strategies/strategies.h"

struct impl {
    const ct_registry_entry *desc;
    const struct ct_strategy_ops *(*ops)(void);
};

#define CT_STRATEGY_IMPL_ROW(name) { ct_strategy_##name##_desc, ct_strategy_##name##_ops },
static const struct impl impls[] = { CT_STRATEGIES(CT_STRATEGY_IMPL_ROW) };
#define N_IMPLS (sizeof(impls) / sizeof(impls[0]))

const struct ct_strategy_ops *const *ct_strategies(void)
{
    static struct ct_strategy_ops named[N_IMPLS];
    static const struct ct_strategy_ops *list[N_IMPLS + 1];

    if (!list[0]) {
        for (size_t i = 0; i < N_IMPLS; i++) {
            named[i] = *impls[i].ops();
            named[i].name = impls[i].desc->name;
            list[i] = &named[i];
        }
    }
    return list;
}
