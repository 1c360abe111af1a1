/* SPDX-License-Identifier: BSD-3-Clause */
/* The strategies libctrain implements; registered by name in ct_engine_init(). */
#ifndef CTRAIN_STRATEGIES_H
#define CTRAIN_STRATEGIES_H

#include "engine/strategies/strategy_impl.h"

extern const struct ct_strategy_ops ct_strategy_single_device;
extern const struct ct_strategy_ops ct_strategy_ddp;
/* Built from ddp's ops in code (ddp_sharded.c). */
const struct ct_strategy_ops *ct_strategy_ddp_sharded(void);

/* Every implemented strategy, NULL-terminated, for ct_engine_init to register under its name. */
const struct ct_strategy_ops *const *ct_strategies(void);

#endif
