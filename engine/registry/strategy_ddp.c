/* SPDX-License-Identifier: BSD-3-Clause */
/* ddp's descriptor and the names built on it (its implementation: engine/strategies/ddp.c): ddp_fork
 * (ddp with the fork launcher; Lightning's ddp_spawn and ddp_notebook are its aliases), Lightning's
 * ddp[_fork|_spawn]_find_unused_parameters_false|true, and the registered variants — ddp run
 * with other defaults (ddp_no_overlap, ddp_large_buckets) or constraints (ddp_nccl). */
#include "engine/registry/components.h"

#define DDP_OPTION_OVERLAP                                                                                             \
    { .key = "overlap", .type = CT_CONFIG_INT, .min = 0, .max = 1, .dflt = "1",                                      \
      .help = "1: start each bucket's allreduce as backward completes it; 0: after backward" }

/* Default bucket 0.5 MiB: a model of a few MiB (the 784-512-256-10 MLP has 2 MiB of gradients, three
 * quarters of them the first layer's weights) then gets a bucket that closes before the first
 * layer's backward and overlaps it (measured: exposed allreduce time halved against 1 MiB, which
 * made one bucket of everything); an allreduce call costs tens of microseconds, small against
 * moving 0.5 MiB. */
static const ct_config_key ddp_options[] = {
    CT_DDP_OPTION_BUCKET_MB,
    DDP_OPTION_OVERLAP,
    CT_DDP_OPTION_BACKEND,
    { .key = NULL },
};

/* Lightning's names for its DDP with find_unused_parameters set. ctrain's ddp never searches the
 * graph: a model announces each gradient range as backward finishes it, and every built-in model
 * gives every parameter a gradient. _false is plain ddp (a range left unannounced is an error
 * naming it); _true takes a model that leaves parameters without a gradient: the ranges it skips
 * count as zero gradients on that rank, as PyTorch's reducer does. */
static const ct_config_key ddp_find_unused_options[] = {
    CT_DDP_OPTION_BUCKET_MB,
    DDP_OPTION_OVERLAP,
    { .key = "find_unused", .type = CT_CONFIG_INT, .min = 0, .max = 1, .dflt = "0",
      .help = "1: gradient ranges backward never announced count as zero (else an error naming them)" },
    CT_DDP_OPTION_BACKEND,
    { .key = NULL },
};

#define ANY_DEVICE (CT_ACCEL_CPU | CT_ACCEL_CUDA)

ct_registry_entry ct_strategy_ddp_desc[] = {
    { .name = "ddp", .description = "distributed data parallel: one process per device, gradients averaged by "
      "bucketed non-blocking allreduce overlapping backward",
      .accelerators = ANY_DEVICE, .option_schema = ddp_options, .launch = CT_LAUNCH_PROCESSES,
      .auto_rule = CT_AUTO_PROCESSES },
    { .name = "ddp_fork", .aliases = { "ddp_spawn", "ddp_notebook", NULL },
      .description = "ddp whose workers are forked from the calling program at fit (library use)",
      .accelerators = ANY_DEVICE, .base = "ddp", .option_schema = ddp_options, .launch = CT_LAUNCH_FORK },
    { .name = "ddp_find_unused_parameters_false", .description = "Lightning's name: ddp (every parameter gets a "
      "gradient in backward)", .accelerators = ANY_DEVICE, .base = "ddp", .option_schema = ddp_find_unused_options,
      .options = "find_unused=0", .launch = CT_LAUNCH_PROCESSES },
    { .name = "ddp_find_unused_parameters_true", .description = "Lightning's name: ddp for a model that leaves "
      "parameters without a gradient (they count as zero)", .accelerators = ANY_DEVICE, .base = "ddp",
      .option_schema = ddp_find_unused_options, .options = "find_unused=1", .launch = CT_LAUNCH_PROCESSES },
    { .name = "ddp_fork_find_unused_parameters_false", .aliases = { "ddp_spawn_find_unused_parameters_false", NULL },
      .description = "Lightning's name: ddp_fork (every parameter gets a gradient in backward)",
      .accelerators = ANY_DEVICE, .base = "ddp", .option_schema = ddp_find_unused_options,
      .options = "find_unused=0", .launch = CT_LAUNCH_FORK },
    { .name = "ddp_fork_find_unused_parameters_true", .aliases = { "ddp_spawn_find_unused_parameters_true", NULL },
      .description = "Lightning's name: ddp_fork for a model that leaves parameters without a gradient (they "
      "count as zero)", .accelerators = ANY_DEVICE, .base = "ddp", .option_schema = ddp_find_unused_options,
      .options = "find_unused=1", .launch = CT_LAUNCH_FORK },
    { .name = "ddp_no_overlap", .description = "ddp variant: one allreduce per bucket after backward "
      "finishes (to measure what overlap buys)", .accelerators = ANY_DEVICE, .base = "ddp",
      .option_schema = ddp_options, .options = "overlap=0", .launch = CT_LAUNCH_PROCESSES },
    { .name = "ddp_nccl", .description = "ddp that must run on GPUs: refuses cpu instead of falling back",
      .accelerators = CT_ACCEL_CUDA, .base = "ddp", .option_schema = ddp_options, .launch = CT_LAUNCH_PROCESSES },
    /* After ddp_sharded (list_order 1) in `ctrain plan --list`, as it has always been listed. */
    { .name = "ddp_large_buckets", .description = "ddp variant with PyTorch's 25 MB buckets",
      .accelerators = ANY_DEVICE, .base = "ddp", .option_schema = ddp_options, .options = "bucket_mb=25",
      .launch = CT_LAUNCH_PROCESSES, .list_order = 2 },
    { .name = NULL },
};
