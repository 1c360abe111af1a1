/* SPDX-License-Identifier: BSD-3-Clause */
/* fsdp's descriptor: Lightning's FSDPStrategy (its implementation: engine/strategies/fsdp.c, built
 * on ddp's process group). Options by Lightning's names; what is not built is left out rather than
 * refused at run time: nccl. No bucket_mb:
 * gradients are exchanged a unit at a time, as the unit's backward ends. */
#include "engine/registry/components.h"

static const ct_config_key fsdp_options[] = {
    { .key = "sharding_strategy", .type = CT_CONFIG_STRING, .dflt = "full_shard",
      .choices = "full_shard|shard_grad_op|no_shard|hybrid_shard|auto",
      .help = "full_shard: parameters, gradients and optimizer state sharded (ZeRO 3); shard_grad_op: "
              "parameters kept gathered from forward through backward (ZeRO 2); no_shard: ddp; hybrid_shard: "
              "full_shard within each node, replicated across nodes (the nodes of SLURM's layout, the same number "
              "of ranks on each); auto: hybrid_shard when the step spans nodes of equal rank counts and a node's "
              "ranks hold the whole model's parameters, gradients and optimizer state within half its memory, "
              "else full_shard (summary.json's strategy_choice says which and why)" },
    { .key = "limit_all_gathers", .type = CT_CONFIG_INT, .min = 1, .max = 64, .dflt = "1",
      .help = "units whose all-gather may be in flight at once (the prefetch's bound)" },
    /* Lightning's cpu_offload keeps parameters in host memory: on cpu they are there already. */
    { .key = "cpu_offload", .type = CT_CONFIG_INT, .min = 0, .max = 1, .dflt = "0",
      .help = "accepted for Lightning's flag; on cpu the parameters are in host memory already (no effect)" },
    /* Lightning's default for FSDP: sharded */
    { .key = "state_dict_type", .type = CT_CONFIG_STRING, .dflt = "sharded", .choices = "sharded|full",
      .help = "sharded: the checkpoint is a directory under the file's name, each rank's shards in a file of "
              "its own and one index, written as a whole (any strategy and world size loads it); full: the "
              "shards gathered, rank 0 writes one file" },
    /* Lightning's auto_wrap_policy: the model's announced ranges are the units ({Block}); PyTorch's
     * size_based_auto_wrap_policy joins them up to a size. */
    { .key = "min_num_params", .type = CT_CONFIG_INT, .min = 0, .max = 1e15, .dflt = "0",
      .help = "0: each range the model announces in forward is a unit (a GPT block's attention and two MLP "
              "layers, its embeddings; an MLP's layers); N: consecutive ones joined until a unit holds N "
              "parameters (PyTorch's size_based_auto_wrap_policy; a short rest joins the last unit; N above the "
              "model's size: one unit, gathered through the step)" },
    CT_DDP_OPTION_BACKEND,
    { .key = NULL },
};

ct_registry_entry ct_strategy_fsdp_desc[] = {
    { .name = "fsdp", .description = "fully sharded data parallel (ZeRO 3): each rank holds 1/world of the "
      "parameters, gradients and optimizer state; each unit all-gathered for its forward and backward, then freed",
      .accelerators = CT_ACCEL_CPU, .option_schema = fsdp_options, .launch = CT_LAUNCH_PROCESSES,
      .precisions = "32-true" /* its shards and exchanges are fp32 arrays */,
      /* Sharding over one rank partitions nothing. */
      .min_world = 2, .min_world_why = "shards the parameters over ranks", .list_order = 1 },
    { .name = NULL },
};
