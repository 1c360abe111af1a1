/* SPDX-License-Identifier: BSD-3-Clause */
/* Which node each rank runs on, for the checks that judge nodes (preflight, stragglers). */
#ifndef CTRAIN_LOOPS_RANK_NODES_H
#define CTRAIN_LOOPS_RANK_NODES_H

#include "ctrain/error.h"
#include "ctrain/strategy.h"

#define CT_RANK_HOST_LEN 64

/* Every rank's host name (gethostname, else "rankR") through one sum over the strategy's ranks,
 * into host[world]; node_of[r] the node of rank r, the nodes numbered in the order of their first
 * rank, leader[n] node n's first rank, *n_nodes how many. */
int ct_rank_nodes(ct_strategy *s, int rank, int world, char (*host)[CT_RANK_HOST_LEN], int *node_of, int *leader,
                  int *n_nodes, ct_error *err);

#endif
