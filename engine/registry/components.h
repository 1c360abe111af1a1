/* SPDX-License-Identifier: BSD-3-Clause */
/* The components' descriptors, one file each (engine/registry/<kind>_<name>.c), each an array
 * ct_<kind>_<name>_desc[] ended by a row without a name. The Makefile lists the files in
 * components.gen.h (CT_ACCELERATORS, CT_STRATEGIES, CT_LAUNCHERS, CT_CHECKPOINT_IOS, CT_MODELS,
 * CT_DATAMODULES); registry.c
 * gathers them and `ctrain plan
 * --list` shows each kind's rows by their list_order. Adding a strategy: its descriptor file, its
 * implementation in engine/strategies/<name>.c (ct_strategy_<name>_ops), its test; a variant of an
 * existing one (other defaults, another launcher) is one row in its base's descriptor file. */
#ifndef CTRAIN_REGISTRY_COMPONENTS_H
#define CTRAIN_REGISTRY_COMPONENTS_H

#include "ctrain/registry.h"
#include "engine/registry/components.gen.h"

#define CT_COMPONENT_DESC(kind, name) extern ct_registry_entry ct_##kind##_##name##_desc[];
#define CT_ACCELERATOR_DESC(name) CT_COMPONENT_DESC(accelerator, name)
#define CT_STRATEGY_DESC(name) CT_COMPONENT_DESC(strategy, name)
#define CT_LAUNCHER_DESC(name) CT_COMPONENT_DESC(launcher, name)
#define CT_CHECKPOINT_IO_DESC(name) CT_COMPONENT_DESC(checkpoint_io, name)
#define CT_MODEL_DESC(name) CT_COMPONENT_DESC(model, name)
#define CT_DATAMODULE_DESC(name) CT_COMPONENT_DESC(datamodule, name)
CT_ACCELERATORS(CT_ACCELERATOR_DESC)
CT_STRATEGIES(CT_STRATEGY_DESC)
CT_LAUNCHERS(CT_LAUNCHER_DESC)
CT_CHECKPOINT_IOS(CT_CHECKPOINT_IO_DESC)
CT_MODELS(CT_MODEL_DESC)
CT_DATAMODULES(CT_DATAMODULE_DESC)

/* The precisions, one row each in engine/registry/precisions.c: a precision the engine computes in
 * carries its number formats (its ops) in its row. */
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
