/* SPDX-License-Identifier: BSD-3-Clause */
/* single_device: one process, one device, nothing to communicate. Collectives are identities. */
#include "engine/strategies/strategies.h"

static int single_setup_environment(ct_strategy *s, ct_error *err)
{
    s->world_size = 1;
    s->global_rank = 0;
    s->local_rank = 0;
    s->node_rank = 0;
    return s->accelerator->set_device(s->device, err);
}

static int single_setup_model(ct_strategy *s, void *params, void *grads, size_t n, ct_error *err)
{
    return 0;
}

static const struct ct_strategy_ops single_device_ops = {
    .setup_environment = single_setup_environment,
    .setup_model = single_setup_model,
};

const struct ct_strategy_ops *ct_strategy_single_device_ops(void)
{
    return &single_device_ops;
}
