/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the connector: the user's flags become a training plan.
 *
 * Two parts, each a function you can read on its own (engine/connector/):
 *   1. validate  — check the flags against each other (conflicts, duplicates, malformed values)
 *                  and fix the final flags (flags override CTRAIN_* environment defaults);
 *   2. choose    — accelerator, strategy, precision, cluster environment and devices;
 * and the result, a plan: each choice with where it came from. The connector only plans; the
 * strategy is created from the plan by engine/strategies (ct_strategy_create_from_plan in
 * include/ctrain/strategy.h) and belongs to its creator (the Trainer), handed its accelerator,
 * precision, checkpoint IO, cluster environment, launcher and devices. The rules read what each
 * component declares about itself (include/ctrain/registry.h), never its name.
 * Every conflict is an error with a hint (ct_error.id is the catalogue id); never a fallback.
 * The connector is in libctrain-core: the SPANK plugin runs it inside srun.
 */
#ifndef CTRAIN_CONNECTOR_H
#define CTRAIN_CONNECTOR_H

#include "ctrain/accelerator.h"
#include "ctrain/config.h"
#include "ctrain/environment.h"
#include "ctrain/error.h"
#include "ctrain/registry.h"

/* Flags as the user typed them; NULL means "not given". */
typedef struct ct_connector_flags {
    const char *accelerator;
    const char *strategy;
    const char *devices;
    const char *num_nodes;
    const char *precision;
    const char *cluster_env;
    const char *model;          /* --model NAME, default the registry's default model */
    const char *model_config;   /* --model-config k=v,... (checked against the model's schema) */
    const char *datamodule;     /* --datamodule NAME, default the model's */
    const char *init_from;      /* --init-from FILE: the model's shape is the file's (a reader must be
                                   registered: ct_connector_set_model_file) */
    int deterministic;
    int activation_checkpointing; /* --activation-checkpointing: the model must declare it can */
} ct_connector_flags;

/* Where a resolved value came from. */
enum ct_source {
    CT_SOURCE_DEFAULT = 0, /* built-in default */
    CT_SOURCE_FLAG,        /* --flag */
    CT_SOURCE_ENV,         /* CTRAIN_* variable (set by the SPANK plugin or the user) */
    CT_SOURCE_AUTO,        /* chosen by an auto rule */
    CT_SOURCE_CLUSTER      /* taken from the detected cluster environment */
};

enum ct_plan_field {
    CT_PLAN_ACCELERATOR = 0,
    CT_PLAN_STRATEGY,
    CT_PLAN_LAUNCHER,
    CT_PLAN_PRECISION,
    CT_PLAN_CLUSTER_ENV,
    CT_PLAN_DEVICES,
    CT_PLAN_NUM_NODES,
    CT_PLAN_NFIELDS
};

/* The plan holds its parts as descriptors (their registry entries; ops: the implementation once
 * libctrain attached it), as it holds the model and the data module: the strategy is created from
 * them with no lookup by name (ct_plan_part_name gives the name to print). */
typedef struct ct_plan {
    const ct_registry_entry *accelerator; /* NULL: auto, resolved on the compute node (the SPANK
                                             plugin plans where it cannot see the node's GPUs) */
    const ct_registry_entry *strategy;
    char strategy_options[128]; /* "key=value,..." of a registered variant */
    ct_config strategy_config; /* those options parsed once against the strategy's schema: the typed
                                  value the strategy reads (ct_strategy_options), nobody parses again */
    const ct_registry_entry *launcher;
    const ct_registry_entry *precision; /* canonical, e.g. 32-true's */
    char cluster_env[32];
    const ct_registry_entry *checkpoint_io;
    int devices[CT_MAX_DEVICES]; /* device ids on this node */
    int n_devices;
    int num_nodes;
    int world_size;
    int deterministic;
    int activation_checkpointing; /* --activation-checkpointing (the model recomputes block activations) */
    enum ct_source source[CT_PLAN_NFIELDS];
    char source_detail[CT_PLAN_NFIELDS][64]; /* e.g. "--strategy", "CTRAIN_STRATEGY", "devices > 1" */
    ct_env_info env;          /* the cluster environment as read */
    char notices[4][256];     /* non-fatal notes for the user (e.g. legacy precision names) */
    int n_notices;
    const ct_registry_entry *model; /* the model's descriptor (its registry entry; ops: its class) */
    ct_config model_config;   /* --model-config parsed once against the model's schema: the typed
                                 value the Trainer and the model's create read */
    const ct_registry_entry *datamodule; /* the data module's descriptor (ops: its class) */
    /* A strategy with a backend= option (ddp): the collectives library it will use and why
     * (Lightning's process_group_backend); "" for the others. The rank decides again at setup. */
    char backend[16];
    char backend_why[96];
    /* The collective timeout the strategy is created with (seconds; <= 0: wait forever): the
     * connector plans CT_PLAN_COLLECTIVE_TIMEOUT_S, the Trainer its --collective-timeout. Set once,
     * before creation: nothing sets it on a strategy afterwards. */
    double collective_timeout_s;
} ct_plan;

/* A plan part's name: the descriptor's, "auto" for none (an accelerator left to the compute node). */
static inline const char *ct_plan_part_name(const ct_registry_entry *part)
{
    return part ? part->name : "auto";
}

/* --collective-timeout's default, in seconds: written here only. */
#define CT_PLAN_COLLECTIVE_TIMEOUT_S 300

/* Whether CUDA is there, for the auto rules. */
enum ct_cuda_probe {
    CT_CUDA_ASK = 0,   /* ask the cuda accelerator registered in this process */
    CT_CUDA_UNKNOWN,   /* cannot know here (the SPANK plugin on a login node): resolve on the node */
    CT_CUDA_ABSENT,
    CT_CUDA_PRESENT    /* with cuda_device_count devices */
};

/* Whether the CPU multiplies bf16 in hardware, for the notice a bf16 precision on cpu gets. */
enum ct_cpu_bf16_probe {
    CT_CPU_BF16_ASK = 0,   /* read this CPU (cpuid; aarch64: the kernel's HWCAP2) */
    CT_CPU_BF16_UNKNOWN,   /* cannot know here (the SPANK plugin: srun may run on a login node) */
    CT_CPU_BF16_ABSENT,
    CT_CPU_BF16_PRESENT
};

/* What the connector may ask the world. A zeroed context (or NULL) means: the process environment
 * and the accelerators registered in this process. The SPANK plugin passes the job's environment,
 * CT_CUDA_UNKNOWN and CT_CPU_BF16_UNKNOWN. */
typedef struct ct_connector_context {
    ct_getenv_fn getenv_fn;  /* NULL: getenv(3) */
    void *getenv_ctx;
    enum ct_cuda_probe cuda;
    int cuda_device_count;
    int cpu_count;           /* 0: ask the system */
    enum ct_cpu_bf16_probe cpu_bf16;
} ct_connector_context;

typedef struct ct_connector ct_connector;

/* Store a connector flag ("--strategy", value) into flags, refusing a flag given twice
 * (catalogue id flag-duplicate). Returns 1 when flag is not a connector flag, 0 when stored. */
int ct_connector_flags_set(ct_connector_flags *flags, const char *flag, const char *value, ct_error *err);

/* --devices read as the connector reads it (auto, N, -1, ids "0,1" or "1,"): *per_node is the
 * processes per node it asks for (N, or the number of ids), 0 for auto and -1 (the accelerator
 * decides those). The connector's errors (devices-empty, devices-not-number, ...) otherwise. */
int ct_connector_devices_parse(const char *value, int *per_node, ct_error *err);

/* The model the connector plans for these flags, as part 1 resolves it: --model, else
 * CTRAIN_MODEL, else the registry's default model. NULL when the name given is unknown (the
 * connector then refuses it, naming it). ctx as in ct_connector_create. */
const ct_registry_entry *ct_connector_model(const ct_connector_flags *flags, const ct_connector_context *ctx);

/* --init-from: read the model file at path and set its shape into cfg in place (cfg comes in as
 * the user's parsed --model-config of model; a key disagreeing with the file is an error). Reading
 * a checkpoint is libctrain's (engine/checkpoint, through checkpoint IO) and the shape rules are the
 * model class's, neither of which libctrain-core may link; so libctrain hands the connector its
 * reader at start-up (ct_engine_init), as every implementation registers its ops there. Where none
 * is registered (libctrain-core alone: the SPANK plugin) the connector refuses --init-from. */
typedef int (*ct_connector_model_file_fn)(const ct_registry_entry *model, const char *path, ct_config *cfg,
                                          ct_error *err);
void ct_connector_set_model_file(ct_connector_model_file_fn fn);

/* Parts 1 and 2. On error *out is NULL and err names the flags involved. */
int ct_connector_create(const ct_connector_flags *flags, const ct_connector_context *ctx,
                        ct_connector **out, ct_error *err);
const ct_plan *ct_connector_plan(const ct_connector *c);
void ct_connector_free(ct_connector *c);

/* The error catalogue: every misconfiguration the connector reports, by stable id. */
typedef struct ct_catalogue_entry {
    const char *id;
    const char *inputs;   /* the flags / variables involved */
    const char *summary;
} ct_catalogue_entry;
const ct_catalogue_entry *ct_connector_catalogue(int *n);

/* The plan as a JSON object (malloc'd string), with "sources". */
char *ct_plan_to_json(const ct_plan *plan);
const char *ct_source_name(enum ct_source s);

#endif
