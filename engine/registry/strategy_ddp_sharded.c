/* SPDX-License-Identifier: BSD-3-Clause */
/* ddp_sharded's descriptor (its implementation: engine/strategies/ddp_sharded.c, built on ddp's). */
#include "engine/registry/components.h"

/* Stage 2 by default: it moves half an allreduce's bytes and keeps only a shard of the reduced
 * gradients; stage 1 keeps ddp's allreduce and partitions the optimizer state only. */
static const ct_config_key sharded_options[] = {
    CT_DDP_OPTION_BUCKET_MB,
    { .key = "stage", .type = CT_CONFIG_INT, .min = 1, .max = 2, .dflt = "2",
      .help = "1: the optimizer state partitioned; 2: the reduced gradients too" },
    /* The collectives below it, as ddp's: its reduce-scatter and all-gather are MPI's or gloo's. */
    CT_DDP_OPTION_BACKEND,
    { .key = NULL },
};

ct_registry_entry ct_strategy_ddp_sharded_desc[] = {
    { .name = "ddp_sharded", .description = "ddp with the optimizer state (stage 1) and reduced gradients "
      "(stage 2) partitioned over the ranks (ZeRO): reduce-scatter per bucket, shard update, all-gather",
      .accelerators = CT_ACCEL_CPU, .option_schema = sharded_options, .launch = CT_LAUNCH_PROCESSES,
      .precisions = "32-true,bf16-mixed" /* its shards are fp32 arrays */,
      /* Sharding over one rank partitions nothing: it would be ddp with extra copies. */
      .min_world = 2, .min_world_why = "partitions the optimizer over ranks",
      .list_order = 1 /* after ddp's rows */ },
    { .name = NULL },
};
