/* SPDX-License-Identifier: BSD-3-Clause */
/* The strategies libctrain implements; registered in ct_engine_init(). Each strategy NAME with a
 * descriptor file (engine/registry/strategy_NAME.c) defines ct_strategy_NAME_ops() in its own
 * file here; strategies.c gathers them from the Makefile's list (components.gen.h). */
#ifndef CTRAIN_STRATEGIES_H
#define CTRAIN_STRATEGIES_H

#include "engine/registry/components.h"
#include "engine/strategies/strategy_impl.h"

#define CT_STRATEGY_OPS_DECL(name) const struct ct_strategy_ops *ct_strategy_##name##_ops(void);
CT_STRATEGIES(CT_STRATEGY_OPS_DECL)

/* ddp's own ops, what a strategy built on it (ddp_sharded) copies and overrides. */
extern const struct ct_strategy_ops ct_strategy_ddp;

/* Every implemented strategy, NULL-terminated, for ct_engine_init to register: each carries its
 * descriptor's name (the name is written once, in engine/registry/strategy_NAME.c). */
const struct ct_strategy_ops *const *ct_strategies(void);

#endif
