/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain plan — resolve the flags through the connector without training; print the plan as JSON.
 * A misconfiguration exits 2 with the connector's message on stderr; nothing is started. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/connector.h"
#include "ctrain/engine.h"
#include "ctrain/envs.h"
#include "ctrain/registry.h"
#include "ctrain/util.h"
#include "engine/cli/commands.h"

static const char *const plan_flags[] = {
    "--accelerator", "--strategy", "--devices", "--num-nodes", "--precision", "--cluster-env",
    "--model", "--model-config", "--datamodule",
    "--deterministic", "--activation-checkpointing", "--list", "--errors", "--help", NULL
};

static void plan_usage(FILE *out)
{
    fprintf(out,
        "usage: ctrain plan [flags]\n"
        "Resolve accelerator, strategy, precision, cluster environment and devices as `ctrain fit` would,\n"
        "print the plan as JSON (with where each value came from), and exit. Nothing is started.\n\n"
        "  --accelerator NAME   cpu, cuda (alias gpu) or auto (default: $CTRAIN_ACCELERATOR, else auto)\n"
        "  --strategy NAME[:k=v,...]  single_device, ddp, ddp_fork (aliases ddp_spawn, ddp_notebook), registered\n"
        "                       variants (Lightning's ddp_find_unused_parameters_false|true, ...; plan --list),\n"
        "                       or auto (default: $CTRAIN_STRATEGY, else auto); options e.g. ddp:bucket_mb=2\n"
        "  --devices SPEC       auto, N, -1 (all), or ids \"0,1\" / \"1,\" (cuda)\n"
        "  --num-nodes N        nodes in the run (default: the cluster environment's, else 1)\n"
        "  --precision P        32-true, bf16-mixed, 64-true, bf16-true, 16-mixed\n"
        "                       (default: $CTRAIN_PRECISION, else 32-true)\n"
        "  --cluster-env NAME   auto or an environment name (ctrain plan --list)\n"
        "  --model NAME         the model (default: $CTRAIN_MODEL, else mlp)\n"
        "  --model-config K=V,...  the model's settings, checked against its keys (--list shows them)\n"
        "  --datamodule NAME    the data (default: $CTRAIN_DATAMODULE, else the model's)\n"
        "  --deterministic      reproducible results (recorded in the plan)\n"
        "  --activation-checkpointing  recompute each block in backward (refused for a model\n"
        "                       that cannot: the registry says which)\n"
        "  --list               print the registries: accelerators, strategies, precisions, cluster\n"
        "                       environments, checkpoint IO, launchers, models (with their\n"
        "                       --model-config keys), data modules\n"
        "  --errors             print the error catalogue: every misconfiguration ctrain reports, by id\n"
        "  --help               this text\n\n"
        "Exit status: 0 resolved, 2 misconfiguration (message and hint on stderr).\n");
}

static void list_kind(enum ct_registry_kind kind, const char *title)
{
    char accel[64], options[128];

    printf("%s:\n", title);
    for (int i = 0; i < ct_registry_count(kind); i++) {
        const ct_registry_entry *e = ct_registry_at(kind, i);
        printf("  %-18s", e->name);
        if (kind != CT_REG_ACCELERATOR && kind != CT_REG_LAUNCHER && kind != CT_REG_CHECKPOINT_IO &&
            kind != CT_REG_DATAMODULE)
            printf(" [%s]", e->legacy_of ? "legacy" : ct_registry_accel_list(e->accelerators, accel, sizeof(accel)));
        for (int a = 0; a < 4 && e->aliases[a]; a++)
            printf(" (alias %s)", e->aliases[a]);
        if (ct_registry_strategy_options(e, NULL, options, sizeof(options)))
            printf(" {%s}", options);
        if (e->default_dir)
            printf(" {--data %s}", e->default_dir);
        printf("  %s\n", e->description);
    }
}

static const char *config_type(enum ct_config_type t)
{
    switch (t) {
    case CT_CONFIG_INT:      return "int";
    case CT_CONFIG_INT_LIST: return "ints joined by '-'";
    case CT_CONFIG_DOUBLE:   return "number";
    case CT_CONFIG_STRING:   return "text";
    }
    return "?";
}

/* Each model: where it runs, what it computes in, its default data, where it recomputes its
 * activations (--activation-checkpointing) and its --model-config keys. */
static void list_models(void)
{
    char accel[64], ckpt[96];

    printf("models:\n");
    for (int i = 0; i < ct_registry_count(CT_REG_MODEL); i++) {
        const ct_registry_entry *e = ct_registry_at(CT_REG_MODEL, i);

        ckpt[0] = '\0';
        if (e->activation_checkpointing)
            snprintf(ckpt, sizeof(ckpt), " {activation checkpointing %s}",
                     ct_registry_accel_list(e->activation_checkpointing, accel, sizeof(accel)));
        printf("  %-18s [%s] {precision %s} {data %s}%s  %s\n", e->name,
               ct_registry_accel_list(e->accelerators, accel, sizeof(accel)),
               e->precisions ? e->precisions : "32-true", e->datamodule ? e->datamodule : "none", ckpt, e->description);
        for (const ct_config_key *k = e->config; k && k->key; k++) {
            char key[48];

            snprintf(key, sizeof(key), "%s=", k->key);
            if (k->type == CT_CONFIG_STRING)
                printf("      %-14s %s (%s, default %s)\n", key, k->help, config_type(k->type),
                       k->dflt ? k->dflt : "none");
            else
                printf("      %-14s %s (%s in [%g, %g], default %s)\n", key, k->help, config_type(k->type), k->min,
                       k->max, k->dflt ? k->dflt : "none");
        }
    }
}

static void list_registries(void)
{
    list_kind(CT_REG_ACCELERATOR, "accelerators");
    list_kind(CT_REG_STRATEGY, "strategies");
    list_kind(CT_REG_PRECISION, "precisions");
    printf("cluster environments (detection order):\n");
    for (int i = 0; i < ct_env_count(); i++) {
        const struct ct_env_ops *e = ct_env_at(i);
        printf("  %-18s%s  %s\n", e->name, e->auto_detect ? "" : " [explicit only]", e->description);
    }
    list_kind(CT_REG_CHECKPOINT_IO, "checkpoint IO");
    list_kind(CT_REG_LAUNCHER, "launchers");
    list_models();
    list_kind(CT_REG_DATAMODULE, "data modules");
}

int ct_cmd_plan(int argc, char **argv)
{
    ct_connector_flags flags = { 0 };
    ct_connector *conn = NULL;
    ct_error err;
    char *json;
    int list = 0;

    ct_error_clear(&err);
    ct_engine_init();
    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *value = NULL, *eq = strchr(argv[i], '=');
        int rc;

        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            plan_usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--errors")) {
            int n;
            const ct_catalogue_entry *cat = ct_connector_catalogue(&n);
            for (int k = 0; k < n; k++)
                printf("%-36s %-40s %s\n", cat[k].id, cat[k].inputs, cat[k].summary);
            return 0;
        }
        if (!strcmp(argv[i], "--list")) {
            list = 1;
            continue;
        }
        if (!strcmp(argv[i], "--deterministic")) {
            flags.deterministic = 1;
            continue;
        }
        if (!strcmp(argv[i], "--activation-checkpointing")) {
            flags.activation_checkpointing = 1;
            continue;
        }
        snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - argv[i]) : (int)strlen(argv[i]), argv[i]);
        if (eq)
            value = eq + 1;
        else if (i + 1 < argc)
            value = argv[++i];
        rc = ct_connector_flags_set(&flags, name, value ? value : "", &err);
        if (rc == 1)
            rc = ct_cli_flag_unknown("plan", name, plan_flags, &err);
        if (rc == 0 && !value) {
            ct_error_set(&err, CT_EINVAL, "flag-missing-value", "%s needs a value", name);
            ct_error_hint(&err, "write %s VALUE or %s=VALUE", name, name);
            rc = CT_EINVAL;
        }
        if (rc) {
            ct_error_print(stderr, &err);
            return ct_error_exit_status(rc);
        }
    }
    if (list) {
        list_registries();
        return 0;
    }
    if (ct_connector_create(&flags, NULL, &conn, &err)) {
        ct_error_print(stderr, &err);
        return ct_error_exit_status(err.code);
    }
    for (int i = 0; i < ct_connector_plan(conn)->n_notices; i++)
        fprintf(stderr, "ctrain: notice: %s\n", ct_connector_plan(conn)->notices[i]);
    json = ct_plan_to_json(ct_connector_plan(conn));
    printf("%s\n", json);
    free(json);
    ct_connector_free(conn);
    return 0;
}
