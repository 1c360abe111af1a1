/* SPDX-License-Identifier: BSD-3-Clause */
/* The connector: parts 1 and 2 at creation, the plan kept for its caller. It plans only: the
 * strategy is created from the plan by engine/strategies (ct_strategy_create_from_plan) and belongs
 * to whoever created it (the Trainer). Also the plan as JSON for `ctrain plan`. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/connector/connector_internal.h"

int ct_connector_flags_set(ct_connector_flags *f, const char *flag, const char *value, ct_error *err)
{
    const char **slot = NULL;

    if (!strcmp(flag, "--accelerator"))
        slot = &f->accelerator;
    else if (!strcmp(flag, "--strategy"))
        slot = &f->strategy;
    else if (!strcmp(flag, "--devices"))
        slot = &f->devices;
    else if (!strcmp(flag, "--num-nodes"))
        slot = &f->num_nodes;
    else if (!strcmp(flag, "--precision"))
        slot = &f->precision;
    else if (!strcmp(flag, "--cluster-env"))
        slot = &f->cluster_env;
    else if (!strcmp(flag, "--model"))
        slot = &f->model;
    else if (!strcmp(flag, "--model-config"))
        slot = &f->model_config;
    else if (!strcmp(flag, "--datamodule"))
        slot = &f->datamodule;
    if (!slot)
        return 1;
    if (*slot) {
        ct_error_set(err, CT_EINVAL, "flag-duplicate", "%s given twice ('%s', then '%s')", flag, *slot, value);
        return ct_error_hint(err, "give %s once", flag);
    }
    *slot = value;
    return 0;
}

int ct_connector_create(const ct_connector_flags *flags, const ct_connector_context *ctx_in, ct_connector **out,
                        ct_error *err)
{
    static const ct_connector_flags none;
    ct_connector_context ctx;
    ct_final_flags ff;
    ct_connector *c;
    int rc;

    *out = NULL;
    ct_connector_context_fill(ctx_in, &ctx);
    c = calloc(1, sizeof(*c));
    if (!c)
        return ct_error_set(err, CT_ENOMEM, NULL, "out of memory");
    rc = ct_connector_validate(flags ? flags : &none, &ctx, &ff, err);
    if (!rc)
        rc = ct_connector_choose(&ff, &ctx, &c->plan, err);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

const ct_plan *ct_connector_plan(const ct_connector *c)
{
    return &c->plan;
}

void ct_connector_free(ct_connector *c)
{
    free(c);
}

const char *ct_source_name(enum ct_source s)
{
    switch (s) {
    case CT_SOURCE_DEFAULT: return "default";
    case CT_SOURCE_FLAG:    return "flag";
    case CT_SOURCE_ENV:     return "environment variable";
    case CT_SOURCE_AUTO:    return "auto";
    case CT_SOURCE_CLUSTER: return "cluster environment";
    }
    return "?";
}

static void add_source(cJSON *sources, const ct_plan *p, enum ct_plan_field f, const char *key)
{
    cJSON *o = cJSON_AddObjectToObject(sources, key);
    cJSON_AddStringToObject(o, "from", ct_source_name(p->source[f]));
    cJSON_AddStringToObject(o, "detail", p->source_detail[f]);
}

char *ct_plan_to_json(const ct_plan *p)
{
    cJSON *root = cJSON_CreateObject(), *devices, *sources, *notices;
    char *text, config[CT_CONFIG_TEXT_MAX];

    cJSON_AddStringToObject(root, "accelerator", ct_plan_part_name(p->accelerator));
    cJSON_AddStringToObject(root, "strategy", ct_plan_part_name(p->strategy));
    cJSON_AddStringToObject(root, "strategy_options", p->strategy_options);
    if (p->backend[0]) {
        cJSON *b = cJSON_AddObjectToObject(root, "process_group_backend");
        cJSON_AddStringToObject(b, "name", p->backend);
        cJSON_AddStringToObject(b, "why", p->backend_why);
    }
    cJSON_AddStringToObject(root, "launcher", ct_plan_part_name(p->launcher));
    cJSON_AddStringToObject(root, "precision", ct_plan_part_name(p->precision));
    cJSON_AddStringToObject(root, "cluster_env", p->cluster_env);
    cJSON_AddStringToObject(root, "checkpoint_io", ct_plan_part_name(p->checkpoint_io));
    devices = cJSON_AddArrayToObject(root, "devices");
    for (int i = 0; i < p->n_devices; i++)
        cJSON_AddItemToArray(devices, cJSON_CreateNumber(p->devices[i]));
    cJSON_AddNumberToObject(root, "num_nodes", p->num_nodes);
    cJSON_AddNumberToObject(root, "world_size", p->world_size);
    cJSON_AddBoolToObject(root, "deterministic", p->deterministic);
    cJSON_AddBoolToObject(root, "activation_checkpointing", p->activation_checkpointing);
    cJSON_AddStringToObject(root, "model", p->model ? p->model->name : "");
    cJSON_AddStringToObject(root, "model_config", ct_config_print(&p->model_config, config, sizeof(config)));
    cJSON_AddStringToObject(root, "datamodule", p->datamodule->name);
    sources = cJSON_AddObjectToObject(root, "sources");
    add_source(sources, p, CT_PLAN_ACCELERATOR, "accelerator");
    add_source(sources, p, CT_PLAN_STRATEGY, "strategy");
    add_source(sources, p, CT_PLAN_LAUNCHER, "launcher");
    add_source(sources, p, CT_PLAN_PRECISION, "precision");
    add_source(sources, p, CT_PLAN_CLUSTER_ENV, "cluster_env");
    add_source(sources, p, CT_PLAN_DEVICES, "devices");
    add_source(sources, p, CT_PLAN_NUM_NODES, "num_nodes");
    notices = cJSON_AddArrayToObject(root, "notices");
    for (int i = 0; i < p->n_notices; i++)
        cJSON_AddItemToArray(notices, cJSON_CreateString(p->notices[i]));
    text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}
