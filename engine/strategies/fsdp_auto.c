/* SPDX-License-Identifier: BSD-3-Clause */
/* fsdp's sharding_strategy=auto (fsdp_auto.h). */
#include <stdio.h>

#include "engine/strategies/fsdp_auto.h"

int ct_fsdp_auto_hybrid(const int64_t *info, int world, uint64_t state_bytes, char *why, size_t why_size)
{
    int nodes = 0, per_node = 0, even = 1;
    uint64_t mem = UINT64_MAX;

    /* the nodes, whether each has as many ranks as the first, the smallest known memory */
    for (int q = 0; q < world; q++) {
        int seen = 0, here = 0;

        for (int r = 0; r < world; r++) {
            seen |= r < q && info[2 * r] == info[2 * q];
            here += info[2 * r] == info[2 * q];
        }
        nodes += !seen;
        per_node = q ? per_node : here;
        even &= here == per_node;
        if (info[2 * q + 1] > 0 && (uint64_t)info[2 * q + 1] < mem)
            mem = (uint64_t)info[2 * q + 1];
    }
    if (nodes < 2) {
        snprintf(why, why_size, "sharding_strategy=auto: full_shard (one node)");
        return 0;
    }
    if (!even) {
        snprintf(why, why_size, "sharding_strategy=auto: full_shard (%d nodes with unequal numbers of ranks; "
                 "hybrid_shard needs the same on each)", nodes);
        return 0;
    }
    if (mem == UINT64_MAX) {
        snprintf(why, why_size, "sharding_strategy=auto: full_shard (no rank knows the memory it may use)");
        return 0;
    }
    if (state_bytes > mem / 2) {
        snprintf(why, why_size, "sharding_strategy=auto: full_shard (a node's ranks would hold the model's %.1f MiB "
                 "of parameters, gradients and optimizer state, more than half of %.1f MiB)",
                 state_bytes / 1048576.0, mem / 1048576.0);
        return 0;
    }
    snprintf(why, why_size, "sharding_strategy=auto: hybrid_shard (%d nodes of %d ranks; a node's ranks hold the "
             "model's %.1f MiB of parameters, gradients and optimizer state, within half of %.1f MiB)",
             nodes, per_node, state_bytes / 1048576.0, mem / 1048576.0);
    return 1;
}
