/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — name-keyed registries of the pluggable parts.
 *
 * Each component describes itself in its own file (engine/registry/<kind>_<name>.c for the
 * accelerators, strategies and precisions; envs/<name>.c for cluster environments): its name and
 * aliases, a one-line description, its option schema, what it supports and its constraints. The
 * descriptors are in libctrain-core, so the connector can validate and resolve flags inside srun
 * (the SPANK plugin) where no implementation is linked; the connector's rules read these fields,
 * never a component's name. libctrain fills each entry's `ops` with its struct of function
 * pointers at start-up (ct_engine_init in include/ctrain/engine.h).
 * Cluster environments have their own registry in include/ctrain/envs.h.
 */
#ifndef CTRAIN_REGISTRY_H
#define CTRAIN_REGISTRY_H

#include <stddef.h>

#include "ctrain/config.h"

enum ct_registry_kind {
    CT_REG_ACCELERATOR = 0,
    CT_REG_STRATEGY,
    CT_REG_PRECISION,
    CT_REG_CHECKPOINT_IO,
    CT_REG_LAUNCHER,
    CT_REG_MODEL,         /* ops: const struct ct_model_class * (include/ctrain/model.h) */
    CT_REG_DATAMODULE,    /* ops: const struct ct_datamodule_class * (include/ctrain/datamodule.h) */
    CT_REG_NKINDS
};

/* Accelerator bits for ct_registry_entry.accelerators. */
#define CT_ACCEL_CPU  0x1u
#define CT_ACCEL_CUDA 0x2u

/* How a strategy's processes come to exist. */
enum ct_launch_policy {
    CT_LAUNCH_SINGLE = 0,   /* one process, this one (single_device) */
    CT_LAUNCH_PROCESSES,    /* external when srun/mpirun/torchrun started us, else subprocess */
    CT_LAUNCH_FORK          /* fork workers from the calling process */
};

/* When the connector picks a strategy by itself (--strategy auto). */
enum ct_auto_rule {
    CT_AUTO_NEVER = 0,      /* only when named */
    CT_AUTO_ONE_PROCESS,    /* auto's choice for a world of one process */
    CT_AUTO_PROCESSES       /* auto's choice for a world of several */
};

typedef struct ct_registry_entry {
    const char *name;
    const char *aliases[4];    /* NULL-terminated */
    const char *description;
    unsigned accelerators;     /* CT_ACCEL_* this entry supports (an accelerator: its own bit); 0: name
                                  known, not supported */
    int is_default;            /* the default of its kind: the accelerator auto falls back to (cpu), the
                                  precision when none is given (32-true), the model (mlp) */
    int list_order;            /* where `ctrain plan --list` shows it among its kind: ascending, ties in
                                  the order the files (engine/registry/<kind>_<name>.c) and rows come */
    /* accelerators only */
    int probe_devices;         /* its devices are probed and named by id (cuda): auto picks it when the
                                  probe finds it; without, --devices counts processes (cpu) */
    /* strategies only */
    const char *base;          /* the registered strategy whose implementation this one runs, or NULL */
    const ct_config_key *option_schema; /* the "NAME:key=value" options it takes, with their ranges
                                           and defaults (NULL-key terminated; NULL: none) */
    const char *options;       /* this name's defaults where they differ from the schema's:
                                  "overlap=0" (ddp_no_overlap) */
    enum ct_launch_policy launch;
    enum ct_auto_rule auto_rule;
    int one_process;           /* runs one process on one device: refuses several devices, nodes, ranks */
    int min_world;             /* fewest processes it makes sense on (0: any) ... */
    const char *min_world_why; /* ... and why, for the error: "partitions the optimizer over ranks" */
    /* precisions only */
    const char *legacy_of;     /* for legacy names ("16"): the canonical name, with a notice */
    /* models only */
    const ct_config_key *config;   /* --model-config schema, NULL-key terminated (NULL: no keys) */
    const char *precisions;    /* "32-true,bf16-mixed,16-mixed": what it computes in (with the
                                  precision's own accelerator mask). Also on a strategy that
                                  handles some storage types only (NULL there: every precision) */
    const char *datamodule;    /* its default data module, "fashion-mnist" */
    const char *pending;       /* why the accelerators its mask lacks still refuse it although an
                                  implementation is compiled there ("its CUDA implementation is
                                  compiled but has not passed its GPU checks yet"); NULL: none */
    unsigned activation_checkpointing; /* CT_ACCEL_* where it recomputes its activations
                                  (--activation-checkpointing; the ops' set_activation_checkpointing):
                                  0, and on other accelerators, the connector refuses the flag */
    /* data modules only */
    const char *default_dir;   /* --data when not given */
    const void *ops;           /* implementation, set by ct_registry_set_ops(); NULL in core-only code.
                                  A precision's is its number formats, plain data in its row */
} ct_registry_entry;

const char *ct_registry_kind_name(enum ct_registry_kind kind);
int ct_registry_count(enum ct_registry_kind kind);
const ct_registry_entry *ct_registry_at(enum ct_registry_kind kind, int i);
/* Find by name or alias, ignoring case ("DDP" is ddp). NULL when unknown. */
const ct_registry_entry *ct_registry_find(enum ct_registry_kind kind, const char *name);
/* NULL-terminated list of names and aliases, for "did you mean": the registry's, valid until a
 * ct_registry_add of the same kind. */
const char *const *ct_registry_names(enum ct_registry_kind kind);
/* Add an entry at run time (models and data modules only: a user program registering its own;
 * the strings must outlive the process' use of the registry). CT_EINVAL for another kind or a name
 * taken, CT_ENOMEM when out of memory. It is listed after the built-in entries of its kind. */
int ct_registry_add(enum ct_registry_kind kind, const ct_registry_entry *entry);
/* 1 when the model entry lists precision (canonical name) among its precisions. */
int ct_registry_model_has_precision(const ct_registry_entry *model, const char *precision);
/* The entry of its kind marked is_default, or NULL. */
const ct_registry_entry *ct_registry_default(enum ct_registry_kind kind);
/* A strategy's options with every key of its schema: the value in user ("k=v,...", NULL: none)
 * where given, else the entry's own default, else the schema's — "bucket_mb=0.5,overlap=1".
 * Returns buf, or NULL (buf "") for a strategy that takes no options. */
const char *ct_registry_strategy_options(const ct_registry_entry *strategy, const char *user, char *buf,
                                         size_t size);
/* Attach an implementation to a registered name. Returns 0, or CT_EINVAL for an unknown name. */
int ct_registry_set_ops(enum ct_registry_kind kind, const char *name, const void *ops);
/* "cpu, cuda" for a CT_ACCEL_* mask, into buf. */
const char *ct_registry_accel_list(unsigned mask, char *buf, int size);
unsigned ct_registry_accel_bit(const char *accelerator);

#endif
