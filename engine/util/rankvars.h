/* SPDX-License-Identifier: BSD-3-Clause */
/* The variables that carry a rank layout from a launcher to a training process: what the SPANK
 * plugin (spank/remote.c) sets in each task and what the cluster environments (envs/) and the
 * connector read. One name each, here, so the two sides cannot drift apart. Internal: not
 * installed (a user's program reads them through ct_env_info, ctrain env, or os.environ). */
#ifndef CTRAIN_RANKVARS_H
#define CTRAIN_RANKVARS_H

/* torch.distributed's env:// names (torchrun sets the same ones). */
#define CT_VAR_RANK             "RANK"             /* global rank, 0 .. WORLD_SIZE-1 */
#define CT_VAR_LOCAL_RANK       "LOCAL_RANK"       /* rank among the node's tasks */
#define CT_VAR_WORLD_SIZE       "WORLD_SIZE"       /* tasks in the step */
#define CT_VAR_LOCAL_WORLD_SIZE "LOCAL_WORLD_SIZE" /* tasks on this node */
#define CT_VAR_NODE_RANK        "NODE_RANK"        /* the node's index in the step (Lightning) */
#define CT_VAR_GROUP_RANK       "GROUP_RANK"       /* the same, as torchrun names it */
#define CT_VAR_MASTER_ADDR      "MASTER_ADDR"      /* rank 0's host */
#define CT_VAR_MASTER_PORT      "MASTER_PORT"      /* the port rank 0 listens on */

/* ctrain's own flags as variables: srun --ctrain-NAME sets CTRAIN_NAME; the connector reads
 * each one when its flag is not given. */
#define CT_VAR_STRATEGY    "CTRAIN_STRATEGY"
#define CT_VAR_ACCELERATOR "CTRAIN_ACCELERATOR"
#define CT_VAR_PRECISION   "CTRAIN_PRECISION"

#endif
