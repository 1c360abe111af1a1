/* SPDX-License-Identifier: BSD-3-Clause */
/* The strategies libctrain implements; registered by name in ct_engine_init(). */
#ifndef CTRAIN_STRATEGIES_H
#define CTRAIN_STRATEGIES_H

#include "engine/strategies/strategy_impl.h"

extern const struct ct_strategy_ops ct_strategy_single_device;
extern const struct ct_strategy_ops ct_strategy_ddp;
extern const struct ct_strategy_ops ct_strategy_ddp_sharded;

#endif
