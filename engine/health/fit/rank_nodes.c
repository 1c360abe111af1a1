/* SPDX-License-Identifier: BSD-3-Clause */
/* Which node each rank runs on; see rank_nodes.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/health/fit/rank_nodes.h"

int ct_rank_nodes(ct_strategy *s, int rank, int world, char (*host)[CT_RANK_HOST_LEN], int *node_of, int *leader,
                  int *n_nodes, ct_error *err)
{
    double *all = calloc((size_t)world * CT_RANK_HOST_LEN, sizeof(double));
    char name[CT_RANK_HOST_LEN] = "";
    int rc;

    if (!all)
        return ct_error_set(err, CT_ENOMEM, "rank-nodes", "out of memory gathering the ranks' hosts");
    if (ct_node_name(name, sizeof(name)) && !name[0])
        snprintf(name, sizeof(name), "rank%d", rank);
    for (int i = 0; i < CT_RANK_HOST_LEN; i++)
        all[(size_t)rank * CT_RANK_HOST_LEN + (size_t)i] = (unsigned char)name[i];
    if ((rc = ct_strategy_reduce_sum(s, all, world * CT_RANK_HOST_LEN, err)))
        goto out;
    *n_nodes = 0;
    for (int r = 0; r < world; r++) {
        char esc[CT_RANK_HOST_LEN];

        for (int i = 0; i < CT_RANK_HOST_LEN; i++)
            host[r][i] = (char)all[(size_t)r * CT_RANK_HOST_LEN + (size_t)i];
        host[r][CT_RANK_HOST_LEN - 1] = '\0';
        /* Other ranks' text: escaped before preflight, the straggler check or a log prints it (every
         * rank's alike, so that all ranks group the nodes the same way). */
        ct_str_copy(host[r], CT_RANK_HOST_LEN, ct_str_escape(esc, sizeof(esc), host[r]));
        node_of[r] = -1;
        for (int q = 0; q < r && node_of[r] < 0; q++)
            if (!strcmp(host[q], host[r]))
                node_of[r] = node_of[q];
        if (node_of[r] < 0) {
            leader[*n_nodes] = r;
            node_of[r] = (*n_nodes)++;
        }
    }
out:
    free(all);
    return rc;
}
