/* SPDX-License-Identifier: BSD-3-Clause */
/* Registries of names: what the connector may resolve to, and what libctrain implements.
 * The accelerators, strategies and precisions describe themselves in their own files
 * (components.h lists them); checkpoint IO, launchers, models and data modules are rows here. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ctrain/error.h"
#include "ctrain/util.h"
#include "ctrain/registry.h"
#include "engine/registry/components.h"

static ct_registry_entry checkpoint_ios[] = {
    { .name = "safetensors", .description = "safetensors files written atomically (tmp, fsync, rename)",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    { .name = NULL },
};

static ct_registry_entry launchers[] = {
    { .name = "external", .description = "processes started by srun, mpirun, jsrun or torchrun: nothing to launch",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    { .name = "subprocess", .description = "ctrain supervises and hosts a PMIx server; fork+exec N copies of "
      "the command line", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    { .name = "fork", .description = "fork N workers from the calling program; rank 0's result returns to it",
      .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    { .name = NULL },
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

static ct_registry_entry models[] = {
    { .name = "mlp", .is_default = 1, .description = "multilayer perceptron classifier: Linear+ReLU layers, softmax "
      "cross-entropy; inputs and classes from the data", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA,
      .config = mlp_config, .precisions = "32-true,bf16-mixed,16-mixed,64-true,bf16-true",
      .datamodule = "fashion-mnist" },
    { .name = "gpt", .description = "GPT-2 language model (learned positions, pre-LayerNorm blocks, causal "
      "self-attention, GELU MLP, tied LM head); not on cuda until its compiled CUDA kernels pass their GPU checks",
      .accelerators = CT_ACCEL_CPU, .config = gpt_config, .precisions = "32-true,bf16-mixed,64-true,bf16-true",
      .datamodule = "tokens",
      .pending = "its CUDA implementation is compiled but has not passed its GPU checks yet (t/54-gpt-cuda.t)" },
    { .name = NULL },
};

static ct_registry_entry datamodules[] = {
    { .name = "fashion-mnist", .aliases = { "fmnist", NULL },
      .description = "Fashion-MNIST IDX files: 60000 28x28 images in 10 classes (1/12 held out for "
      "validation) and 10000 test images", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA,
      .default_dir = "/usr/share/datasets/fashion-mnist" },
    { .name = "tokens", .description = "llm.c token shards DIR/train.bin and DIR/val.bin (ctrain tokenize): "
      "windows of the model's seq_len, in order, sharded over the ranks", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    { .name = NULL },
};

/* Each kind's descriptor arrays in `ctrain plan --list` order, each ended by a row without a name.
 * A user program's models and data modules come after them (ct_registry_add). */
static ct_registry_entry *const accelerator_descs[] = { ct_accelerator_cpu_desc, ct_accelerator_cuda_desc, NULL };
static ct_registry_entry *const strategy_descs[] = { ct_strategy_single_device_desc, ct_strategy_ddp_desc,
                                                     ct_strategy_ddp_sharded_desc,
                                                     ct_strategy_ddp_large_buckets_desc, NULL };
static ct_registry_entry *const precision_descs[] = { ct_precision_desc, NULL };
static ct_registry_entry *const checkpoint_io_descs[] = { checkpoint_ios, NULL };
static ct_registry_entry *const launcher_descs[] = { launchers, NULL };
static ct_registry_entry *const model_descs[] = { models, NULL };
static ct_registry_entry *const datamodule_descs[] = { datamodules, NULL };

#define MAX_ENTRIES 64

struct table {
    const char *kind_name;
    ct_registry_entry *const *descs;
    ct_registry_entry *entries[MAX_ENTRIES];
    int n;
};

static struct table tables[CT_REG_NKINDS] = {
    [CT_REG_ACCELERATOR]   = { "accelerator", accelerator_descs, { NULL }, 0 },
    [CT_REG_STRATEGY]      = { "strategy", strategy_descs, { NULL }, 0 },
    [CT_REG_PRECISION]     = { "precision", precision_descs, { NULL }, 0 },
    [CT_REG_CHECKPOINT_IO] = { "checkpoint IO", checkpoint_io_descs, { NULL }, 0 },
    [CT_REG_LAUNCHER]      = { "launcher", launcher_descs, { NULL }, 0 },
    [CT_REG_MODEL]         = { "model", model_descs, { NULL }, 0 },
    [CT_REG_DATAMODULE]    = { "datamodule", datamodule_descs, { NULL }, 0 },
};

/* Every kind's rows with a name, gathered from its descriptors on first use. */
static void count_tables(void)
{
    static int gathered;

    if (gathered)
        return;
    gathered = 1;
    for (int k = 0; k < CT_REG_NKINDS; k++) {
        struct table *t = &tables[k];

        for (int d = 0; t->descs[d]; d++)
            for (ct_registry_entry *e = t->descs[d]; e->name && t->n < MAX_ENTRIES; e++)
                t->entries[t->n++] = e;
    }
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
    return tables[kind].entries[i];
}

const ct_registry_entry *ct_registry_find(enum ct_registry_kind kind, const char *name)
{
    if ((unsigned)kind >= CT_REG_NKINDS || !name)
        return NULL;
    count_tables();
    for (int i = 0; i < tables[kind].n; i++) {
        const ct_registry_entry *e = tables[kind].entries[i];
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
        const ct_registry_entry *e = tables[kind].entries[i];
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
        if (!strcmp(tables[kind].entries[i]->name, name)) {
            tables[kind].entries[i]->ops = ops;
            return 0;
        }
    }
    return CT_EINVAL;
}

int ct_registry_add(enum ct_registry_kind kind, const ct_registry_entry *entry)
{
    static ct_registry_entry added[2][MAX_ADDED];
    static int n_added[2];
    int which = kind == CT_REG_MODEL ? 0 : kind == CT_REG_DATAMODULE ? 1 : -1;

    if (which < 0 || !entry || !entry->name || !entry->name[0] || ct_registry_find(kind, entry->name))
        return CT_EINVAL;
    if (n_added[which] >= MAX_ADDED || tables[kind].n >= MAX_ENTRIES)
        return CT_ENOMEM;
    added[which][n_added[which]] = *entry;
    tables[kind].entries[tables[kind].n++] = &added[which][n_added[which]++];
    name_lists[kind][0] = NULL; /* rebuilt with the new name on next use */
    return 0;
}

const ct_registry_entry *ct_registry_default(enum ct_registry_kind kind)
{
    for (int i = 0; i < ct_registry_count(kind); i++)
        if (tables[kind].entries[i]->is_default)
            return tables[kind].entries[i];
    return NULL;
}

const char *ct_registry_strategy_options(const ct_registry_entry *st, const char *user, char *buf, size_t size)
{
    char val[64];
    size_t used = 0;

    buf[0] = '\0';
    if (!st || !st->option_schema || !st->option_schema->key)
        return NULL;
    for (const ct_config_key *k = st->option_schema; k->key; k++) {
        const char *v = k->dflt ? k->dflt : "";

        if (user && ct_options_get(user, k->key, val, sizeof(val)))
            v = val;
        else if (st->options && ct_options_get(st->options, k->key, val, sizeof(val)))
            v = val;
        used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "%s%s=%s", used ? "," : "", k->key, v);
    }
    return buf;
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
    const ct_registry_entry *e = accelerator ? ct_registry_find(CT_REG_ACCELERATOR, accelerator) : NULL;

    return e ? e->accelerators : 0;
}

const char *ct_registry_accel_list(unsigned mask, char *buf, int size)
{
    int used = 0;

    buf[0] = '\0';
    for (int i = 0; i < tables[CT_REG_ACCELERATOR].n; i++) {
        const ct_registry_entry *e = tables[CT_REG_ACCELERATOR].entries[i];
        if (!(mask & e->accelerators) || used >= size)
            continue;
        used += snprintf(buf + used, (size_t)(size - used), "%s%s", used ? ", " : "", e->name);
    }
    if (!buf[0])
        snprintf(buf, (size_t)size, "none");
    return buf;
}
