/* SPDX-License-Identifier: BSD-3-Clause */
/* Registries of names: what the connector may resolve to, and what libctrain implements.
 * Adding a strategy, precision, accelerator, checkpoint IO or launcher starts with a row here. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ctrain/error.h"
#include "ctrain/registry.h"

static ct_registry_entry accelerators[] = {
    { .name = "cpu", .description = "the host CPU; --devices N runs N processes on this node",
      .accelerators = CT_ACCEL_CPU },
    { .name = "cuda", .aliases = { "gpu", NULL },
      .description = "NVIDIA GPUs through CUDA, one process per GPU", .accelerators = CT_ACCEL_CUDA },
};

/* Default bucket 0.5 MiB: a model of a few MiB (the 784-512-256-10 MLP has 2 MiB of gradients, three
 * quarters of them the first layer's weights) then gets a bucket that closes before the first
 * layer's backward and overlaps it (measured: exposed allreduce time halved against 1 MiB, which
 * made one bucket of everything); an allreduce call costs tens of microseconds, small against
 * moving 0.5 MiB. */
static ct_registry_entry strategies[] = {
    { .name = "single_device", .description = "one process on one device, no communication",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .launch = CT_LAUNCH_SINGLE },
    { .name = "ddp", .description = "distributed data parallel: one process per device, gradients averaged by "
      "bucketed non-blocking allreduce overlapping backward",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .options = "bucket_mb=0.5,overlap=1",
      .launch = CT_LAUNCH_PROCESSES },
    { .name = "ddp_fork", .aliases = { "ddp_spawn", "ddp_notebook", NULL },
      .description = "ddp whose workers are forked from the calling program at fit (library use)",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .options = "bucket_mb=0.5,overlap=1",
      .launch = CT_LAUNCH_FORK },
    /* Lightning's names for its DDP with find_unused_parameters set. ctrain's ddp never searches the
     * graph: a model announces each gradient range as backward finishes it, and every built-in
     * model gives every parameter a gradient. _false is plain ddp (a range left unannounced is an
     * error naming it); _true takes a model that leaves parameters without a gradient: the ranges
     * it skips count as zero gradients on that rank, as PyTorch's reducer does. */
    { .name = "ddp_find_unused_parameters_false", .description = "Lightning's name: ddp (every parameter gets a "
      "gradient in backward)", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .base = "ddp",
      .options = "bucket_mb=0.5,overlap=1,find_unused=0", .launch = CT_LAUNCH_PROCESSES },
    { .name = "ddp_find_unused_parameters_true", .description = "Lightning's name: ddp for a model that leaves "
      "parameters without a gradient (they count as zero)", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA,
      .base = "ddp", .options = "bucket_mb=0.5,overlap=1,find_unused=1", .launch = CT_LAUNCH_PROCESSES },
    { .name = "ddp_fork_find_unused_parameters_false", .aliases = { "ddp_spawn_find_unused_parameters_false", NULL },
      .description = "Lightning's name: ddp_fork (every parameter gets a gradient in backward)",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .base = "ddp_fork",
      .options = "bucket_mb=0.5,overlap=1,find_unused=0", .launch = CT_LAUNCH_FORK },
    { .name = "ddp_fork_find_unused_parameters_true", .aliases = { "ddp_spawn_find_unused_parameters_true", NULL },
      .description = "Lightning's name: ddp_fork for a model that leaves parameters without a gradient (they "
      "count as zero)", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .base = "ddp_fork",
      .options = "bucket_mb=0.5,overlap=1,find_unused=1", .launch = CT_LAUNCH_FORK },
    { .name = "ddp_no_overlap", .description = "ddp variant: one allreduce per bucket after backward "
      "finishes (to measure what overlap buys)", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA,
      .base = "ddp", .options = "bucket_mb=0.5,overlap=0", .launch = CT_LAUNCH_PROCESSES },
    { .name = "ddp_nccl", .description = "ddp that must run on GPUs: refuses cpu instead of falling back",
      .accelerators = CT_ACCEL_CUDA, .base = "ddp", .options = "bucket_mb=0.5,overlap=1",
      .launch = CT_LAUNCH_PROCESSES },
    /* Stage 2 by default: it moves half an allreduce's bytes and keeps only a shard of the reduced
     * gradients; stage 1 keeps ddp's allreduce and partitions the optimizer state only. */
    { .name = "ddp_sharded", .description = "ddp with the optimizer state (stage 1) and reduced gradients "
      "(stage 2) partitioned over the ranks (ZeRO): reduce-scatter per bucket, shard update, all-gather",
      .accelerators = CT_ACCEL_CPU, .options = "bucket_mb=0.5,stage=2", .launch = CT_LAUNCH_PROCESSES,
      .precisions = "32-true,bf16-mixed" /* its shards are fp32 arrays */ },
    { .name = "ddp_large_buckets", .description = "ddp variant with PyTorch's 25 MB buckets",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .base = "ddp", .options = "bucket_mb=25,overlap=1",
      .launch = CT_LAUNCH_PROCESSES },
};

/* Supported masks say what ctrain's engine really computes in; names known but unsupported are
 * rejected by the connector with the list of what works, never switched silently. */
static ct_registry_entry precisions[] = {
    { .name = "32-true", .description = "fp32 weights and math", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    { .name = "bf16-mixed", .description = "bf16 GEMM inputs, fp32 master weights and accumulation",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    { .name = "16-mixed", .description = "fp16 GEMM inputs with dynamic loss scaling, fp32 master weights",
      .accelerators = CT_ACCEL_CUDA },
    /* The description says why each is refused: the connector's error quotes it. */
    { .name = "64-true", .description = "fp64 parameters, activations, gradients, optimizer state, collectives "
      "and checkpoints (F64)", .accelerators = CT_ACCEL_CPU },
    { .name = "bf16-true", .description = "bf16 parameters, activations, gradients, optimizer state, collectives "
      "and checkpoints (BF16); fp32 arithmetic and GEMM accumulation", .accelerators = CT_ACCEL_CPU },
    /* The description says why it is refused: the connector's error quotes it. */
    { .name = "16-true", .description = "fp16 weights and math: refused until ctrain's GPU path has run on a GPU "
      "(fp16 math is for cuda; no GPU has run it yet)", .accelerators = 0 },
    { .name = "32", .description = "legacy name of 32-true", .legacy_of = "32-true" },
    { .name = "64", .description = "legacy name of 64-true", .legacy_of = "64-true" },
    { .name = "16", .description = "legacy name of 16-mixed", .legacy_of = "16-mixed" },
    { .name = "bf16", .description = "legacy name of bf16-mixed", .legacy_of = "bf16-mixed" },
};

static ct_registry_entry checkpoint_ios[] = {
    { .name = "safetensors", .description = "safetensors files written atomically (tmp, fsync, rename)",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
};

static ct_registry_entry launchers[] = {
    { .name = "external", .description = "processes started by srun, mpirun, jsrun or torchrun: nothing to launch",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    { .name = "subprocess", .description = "ctrain supervises and hosts a PMIx server; fork+exec N copies of "
      "the command line", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    { .name = "fork", .description = "fork N workers from the calling program; rank 0's result returns to it",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
};

/* Models: the config schema (--model-config) and what each computes in. The cpu engine computes
 * in 32-true and bf16-mixed; 16-mixed is the CUDA MLP's (the precision's own mask keeps it off cpu). */
static const ct_config_key mlp_config[] = {
    { .key = "hidden", .type = CT_CONFIG_INT_LIST, .min = 1, .max = 65536, .max_len = 15, .dflt = "512-256",
      .help = "hidden layer widths joined by '-' ('none': a linear classifier); --hidden W,W sets it too" },
    { .key = NULL },
};

/* The GPT's ranges are its own (engine/models/gpt/gpt.h CT_GPT_MAX_*); n_embd divisible by n_head,
 * vocab and seq_len against the data are checked when the model is created. */
static const ct_config_key gpt_config[] = {
    { .key = "n_layer", .type = CT_CONFIG_INT, .min = 1, .max = 64, .dflt = "4", .help = "transformer blocks" },
    { .key = "n_head", .type = CT_CONFIG_INT, .min = 1, .max = 8192, .dflt = "4",
      .help = "attention heads per block (n_embd must be a multiple)" },
    { .key = "n_embd", .type = CT_CONFIG_INT, .min = 1, .max = 8192, .dflt = "256", .help = "channels" },
    { .key = "seq_len", .type = CT_CONFIG_INT, .min = 1, .max = 8192, .dflt = "128",
      .help = "tokens per sequence (context length)" },
    { .key = "vocab", .type = CT_CONFIG_INT, .min = 2, .max = 65536, .dflt = "256",
      .help = "vocabulary size (256: byte tokens from ctrain tokenize)" },
    { .key = NULL },
};

/* Room for the models and data modules a user program registers (ct_registry_add). */
#define MAX_ADDED 32

static ct_registry_entry models[8 + MAX_ADDED] = {
    { .name = "mlp", .description = "multilayer perceptron classifier: Linear+ReLU layers, softmax "
      "cross-entropy; inputs and classes from the data", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA,
      .config = mlp_config, .precisions = "32-true,bf16-mixed,16-mixed,64-true,bf16-true",
      .datamodule = "fashion-mnist" },
    { .name = "gpt", .description = "GPT-2 language model (learned positions, pre-LayerNorm blocks, causal "
      "self-attention, GELU MLP, tied LM head); not on cuda until device kernels exist",
      .accelerators = CT_ACCEL_CPU, .config = gpt_config, .precisions = "32-true,bf16-mixed,64-true,bf16-true",
      .datamodule = "tokens" },
};

static ct_registry_entry datamodules[8 + MAX_ADDED] = {
    { .name = "fashion-mnist", .aliases = { "fmnist", NULL },
      .description = "Fashion-MNIST IDX files: 60000 28x28 images in 10 classes (1/12 held out for "
      "validation) and 10000 test images", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA,
      .default_dir = "/usr/share/datasets/fashion-mnist" },
    { .name = "tokens", .description = "llm.c token shards DIR/train.bin and DIR/val.bin (ctrain tokenize): "
      "windows of the model's seq_len, in order, sharded over the ranks", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
};

struct table {
    const char *kind_name;
    ct_registry_entry *entries;
    int n;
};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static struct table tables[CT_REG_NKINDS] = {
    [CT_REG_ACCELERATOR]   = { "accelerator", accelerators, N_OF(accelerators) },
    [CT_REG_STRATEGY]      = { "strategy", strategies, N_OF(strategies) },
    [CT_REG_PRECISION]     = { "precision", precisions, N_OF(precisions) },
    [CT_REG_CHECKPOINT_IO] = { "checkpoint_io", checkpoint_ios, N_OF(checkpoint_ios) },
    [CT_REG_LAUNCHER]      = { "launcher", launchers, N_OF(launchers) },
    [CT_REG_MODEL]         = { "model", models, 0 },
    [CT_REG_DATAMODULE]    = { "datamodule", datamodules, 0 },
};

/* The model and data-module tables have spare rows: their count is the rows with a name. */
static int count_named(enum ct_registry_kind kind, int cap)
{
    static int counted[CT_REG_NKINDS];

    if (!counted[kind]) {
        int n = 0;

        while (n < cap && tables[kind].entries[n].name)
            n++;
        tables[kind].n = n;
        counted[kind] = 1;
    }
    return tables[kind].n;
}

static void count_tables(void)
{
    count_named(CT_REG_MODEL, N_OF(models));
    count_named(CT_REG_DATAMODULE, N_OF(datamodules));
}

/* Names and aliases of every kind, NULL-terminated, built on first use. */
static const char *name_lists[CT_REG_NKINDS][64];

const char *ct_registry_kind_name(enum ct_registry_kind kind)
{
    return (unsigned)kind < CT_REG_NKINDS ? tables[kind].kind_name : "?";
}

int ct_registry_count(enum ct_registry_kind kind)
{
    count_tables();
    return (unsigned)kind < CT_REG_NKINDS ? tables[kind].n : 0;
}

const ct_registry_entry *ct_registry_at(enum ct_registry_kind kind, int i)
{
    count_tables();
    if ((unsigned)kind >= CT_REG_NKINDS || i < 0 || i >= tables[kind].n)
        return NULL;
    return &tables[kind].entries[i];
}

const ct_registry_entry *ct_registry_find(enum ct_registry_kind kind, const char *name)
{
    if ((unsigned)kind >= CT_REG_NKINDS || !name)
        return NULL;
    count_tables();
    for (int i = 0; i < tables[kind].n; i++) {
        const ct_registry_entry *e = &tables[kind].entries[i];
        /* Names are case-insensitive, as in Lightning ("DDP", "CPU", "BF16-Mixed"). */
        if (!strcasecmp(e->name, name))
            return e;
        for (int a = 0; a < 4 && e->aliases[a]; a++)
            if (!strcasecmp(e->aliases[a], name))
                return e;
    }
    return NULL;
}

const char *const *ct_registry_names(enum ct_registry_kind kind)
{
    const char **list;
    int n = 0;

    if ((unsigned)kind >= CT_REG_NKINDS)
        return NULL;
    count_tables();
    list = name_lists[kind];
    if (list[0])
        return list;
    for (int i = 0; i < tables[kind].n && n < 62; i++) {
        const ct_registry_entry *e = &tables[kind].entries[i];
        list[n++] = e->name;
        for (int a = 0; a < 4 && e->aliases[a] && n < 62; a++)
            list[n++] = e->aliases[a];
    }
    list[n] = NULL;
    return list;
}

int ct_registry_set_ops(enum ct_registry_kind kind, const char *name, const void *ops)
{
    if ((unsigned)kind >= CT_REG_NKINDS)
        return CT_EINVAL;
    count_tables();
    for (int i = 0; i < tables[kind].n; i++) {
        if (!strcmp(tables[kind].entries[i].name, name)) {
            tables[kind].entries[i].ops = ops;
            return 0;
        }
    }
    return CT_EINVAL;
}

int ct_registry_add(enum ct_registry_kind kind, const ct_registry_entry *entry)
{
    int cap = kind == CT_REG_MODEL ? N_OF(models) : kind == CT_REG_DATAMODULE ? N_OF(datamodules) : 0;

    if (!cap || !entry || !entry->name || !entry->name[0] || ct_registry_find(kind, entry->name))
        return CT_EINVAL;
    if (tables[kind].n >= cap)
        return CT_ENOMEM;
    tables[kind].entries[tables[kind].n++] = *entry;
    name_lists[kind][0] = NULL; /* rebuilt with the new name on next use */
    return 0;
}

int ct_registry_model_has_precision(const ct_registry_entry *model, const char *precision)
{
    const char *p = model && model->precisions ? model->precisions : "32-true";
    size_t len = strlen(precision);

    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);

        if (n == len && !strncmp(p, precision, len))
            return 1;
        p += n + (end != NULL);
    }
    return 0;
}

unsigned ct_registry_accel_bit(const char *accelerator)
{
    if (!accelerator)
        return 0;
    if (!strcmp(accelerator, "cpu"))
        return CT_ACCEL_CPU;
    if (!strcmp(accelerator, "cuda"))
        return CT_ACCEL_CUDA;
    return 0;
}

const char *ct_registry_accel_list(unsigned mask, char *buf, int size)
{
    int used = 0;

    buf[0] = '\0';
    for (int i = 0; i < tables[CT_REG_ACCELERATOR].n; i++) {
        const ct_registry_entry *e = &tables[CT_REG_ACCELERATOR].entries[i];
        if (!(mask & e->accelerators) || used >= size)
            continue;
        used += snprintf(buf + used, (size_t)(size - used), "%s%s", used ? ", " : "", e->name);
    }
    if (!buf[0])
        snprintf(buf, (size_t)size, "none");
    return buf;
}
