/* SPDX-License-Identifier: BSD-3-Clause */
/* fsdp's sharding_strategy=auto: the choice between hybrid_shard and full_shard as a pure function
 * of the step's layout and memory (fsdp.c gathers the numbers, every rank decides on the same ones),
 * so that every branch is tested on made-up layouts (t/unit/test_connector.c). Internal to
 * libctrain. */
#ifndef CTRAIN_STRATEGIES_FSDP_AUTO_H
#define CTRAIN_STRATEGIES_FSDP_AUTO_H

#include <stddef.h>
#include <stdint.h>

/* info[2 * q] is rank q's node index, info[2 * q + 1] the memory rank q may use in bytes (0: not
 * known); state_bytes what a node's ranks together hold of the model under hybrid_shard (its
 * parameters, gradients and optimizer state: each node holds every part). 1 for hybrid_shard when
 * the world spans two or more nodes, each with as many ranks, and state_bytes is within half the
 * smallest known memory (room for the activations and the units in flight); else 0, full_shard.
 * Which, and why, into why (summary.json's strategy_choice). */
int ct_fsdp_auto_hybrid(const int64_t *info, int world, uint64_t state_bytes, char *why, size_t why_size);

#endif
