/* SPDX-License-Identifier: BSD-3-Clause */
/* The components' descriptors, one file each (engine/registry/<kind>_<name>.c), gathered by
 * registry.c in the order `ctrain plan --list` shows them. Each array ends with a row without a
 * name. Adding a strategy: its descriptor file, its line below and in registry.c's list, and its
 * ops in engine/strategies (listed in strategies.c, registered by ct_engine_init under their name);
 * a variant of an existing one (other defaults, another launcher) is one row in its base's
 * descriptor file. */
#ifndef CTRAIN_REGISTRY_COMPONENTS_H
#define CTRAIN_REGISTRY_COMPONENTS_H

#include "ctrain/registry.h"

extern ct_registry_entry ct_accelerator_cpu_desc[];
extern ct_registry_entry ct_accelerator_cuda_desc[];

extern ct_registry_entry ct_strategy_single_device_desc[];
extern ct_registry_entry ct_strategy_ddp_desc[];
extern ct_registry_entry ct_strategy_ddp_sharded_desc[];
extern ct_registry_entry ct_strategy_ddp_large_buckets_desc[];

extern ct_registry_entry ct_precision_desc[];

/* ddp's option rows, which the strategies built on ddp (ddp_sharded) take as well. */
#define CT_DDP_OPTION_BUCKET_MB                                                                                        \
    { .key = "bucket_mb", .type = CT_CONFIG_DOUBLE, .min = 0.001, .max = 1024.0, .dflt = "0.5",                      \
      .help = "MiB of gradients per allreduce bucket" }

/* Lightning's process_group_backend: which library moves the gradients. */
#define CT_DDP_OPTION_BACKEND                                                                                          \
    { .key = "backend", .type = CT_CONFIG_STRING, .dflt = "auto",                                                    \
      .help = "auto|mpi|gloo|nccl: auto is mpi where a PMIx server started the ranks, else gloo (cpu) or nccl "      \
              "(cuda); gloo meets at MASTER_ADDR:MASTER_PORT" }

#endif
