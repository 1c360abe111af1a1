/* SPDX-License-Identifier: BSD-3-Clause */
/* The connector's parts share these types; nothing outside engine/connector includes this. */
#ifndef CTRAIN_CONNECTOR_INTERNAL_H
#define CTRAIN_CONNECTOR_INTERNAL_H

#include "ctrain/connector.h"
#include "ctrain/registry.h"

enum ct_devices_kind {
    CT_DEVICES_AUTO = 0,
    CT_DEVICES_COUNT,   /* "N" */
    CT_DEVICES_ALL,     /* "-1" */
    CT_DEVICES_LIST     /* "0,3" or "1," */
};

/* Part 1's output: every flag checked on its own and against the others, names canonical. */
typedef struct ct_final_flags {
    const ct_registry_entry *accelerator;  /* NULL: auto */
    const ct_registry_entry *strategy;     /* NULL: auto */
    char strategy_options[128];            /* the entry's defaults, then "NAME:k=v" overrides */
    ct_config strategy_config;             /* the same, typed: parsed once (the plan's strategy_config) */
    const ct_registry_entry *precision;    /* NULL: default 32-true */
    const char *cluster_env;               /* NULL or "auto": detect */
    enum ct_devices_kind devices_kind;
    int devices_count;
    int device_ids[CT_MAX_DEVICES];
    int n_device_ids;
    int num_nodes;                         /* 0: not given */
    int deterministic;
    int activation_checkpointing;
    enum ct_source source[CT_PLAN_NFIELDS];
    char source_detail[CT_PLAN_NFIELDS][64];
    char notices[4][256];
    int n_notices;
    const ct_registry_entry *model;        /* never NULL after validate: default the registry's */
    ct_config model_config;                /* parsed against model->config */
    const ct_registry_entry *datamodule;   /* never NULL after validate: default the model's */
} ct_final_flags;

struct ct_connector {
    ct_plan plan;
};

/* Part 1 — engine/connector/validate.c */
int ct_connector_validate(const ct_connector_flags *flags, const ct_connector_context *ctx,
                          ct_final_flags *out, ct_error *err);
/* Part 2 — engine/connector/choose.c */
int ct_connector_choose(const ct_final_flags *ff, const ct_connector_context *ctx, ct_plan *plan,
                        ct_error *err);
/* engine/connector/context.c: the context with defaults filled in (process environment,
 * registered accelerators), and reading a variable through it. */
void ct_connector_context_fill(const ct_connector_context *in, ct_connector_context *out);
const char *ct_connector_getenv(const ct_connector_context *ctx, const char *name);

/* A strategy's options as its registry entry sets them (every key of its schema: the entry's own
 * defaults, else the schema's), typed into out: where a plan's strategy_config starts. */
int ct_connector_strategy_defaults(const ct_registry_entry *st, ct_config *out, ct_error *err);

#endif
