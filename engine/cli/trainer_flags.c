/* SPDX-License-Identifier: BSD-3-Clause */
/* The flags of ctrain fit / validate / test (see trainer_flags.h), parsed and printed from the
 * Trainer's one table (engine/trainer/flags.h): a Trainer flag fills its ct_trainer_config field,
 * --hidden is the CLI's alias of a model config key, the accelerator/strategy/precision flags go
 * to the connector untouched. */
#include <stdlib.h>
#include <string.h>

#include "ctrain/util.h"
#include "engine/cli/commands.h"
#include "engine/cli/trainer_flags.h"
#include "engine/trainer/flags.h"

static const char *const connector_help[][3] = {
    { "--accelerator", "NAME", "cpu, cuda or auto (ctrain plan --help has the rules)" },
    { "--strategy", "NAME", "single_device, ddp, ddp_sharded, ddp_fork, ... or auto" },
    { "--devices", "SPEC", "auto, N, -1 or a list of ids" },
    { "--num-nodes", "N", "nodes in the run" },
    { "--precision", "P", "32-true (default), bf16-mixed, 64-true or bf16-true; 16-mixed on cuda" },
    { "--cluster-env", "NAME", "auto or a cluster environment name (ctrain plan --list)" },
    { "--model", "NAME", "the model to train (default mlp; ctrain plan --list shows the models)" },
    { "--model-config", "K=V,...", "the model's settings, e.g. hidden=1024-512 (mlp); keys in ctrain plan --list" },
    { "--datamodule", "NAME", "the data to train on (default: the model's, fashion-mnist for mlp)" },
    { NULL, NULL, NULL }
};

void ct_trainer_flags_usage(const char *cmd, FILE *out)
{
    fprintf(out, "usage: ctrain %s [flags]\n", cmd);
    if (!strcmp(cmd, "fit"))
        fprintf(out, "Train a model (default: an MLP on Fashion-MNIST), validating and checkpointing after every\n"
                     "epoch (or every --val-check-interval steps), then test the best checkpoint on the test split.\n");
    else if (!strcmp(cmd, "validate"))
        fprintf(out, "Evaluate a checkpoint (--ckpt-path, default best) on the validation split.\n");
    else
        fprintf(out, "Evaluate a checkpoint (--ckpt-path, default best) on the official test set.\n");
    fprintf(out, "\nTrainer flags (--flag VALUE or --flag=VALUE):\n");
    for (const ct_trainer_flag *f = ct_trainer_flags; f->key.key; f++) {
        char left[64];

        fprintf(out, "  %-34s %s\n", ct_trainer_flag_left(f, left, sizeof(left)), f->key.help);
    }
    fprintf(out, "\nAccelerator, strategy, precision and model (resolved by the connector, as `ctrain plan` shows):\n");
    for (int i = 0; connector_help[i][0]; i++) {
        char left[64];

        snprintf(left, sizeof(left), "%s %s", connector_help[i][0], connector_help[i][1]);
        fprintf(out, "  %-34s %s\n", left, connector_help[i][2]);
    }
    fprintf(out, "\n  %-34s %s\n", "--help", "this text");
    fprintf(out, "\nOutputs in --default-root-dir: metrics.csv, events.out.tfevents.* (TensorBoard), last.safetensors,\n"
                 "best.safetensors, summary.json.\n"
                 "Exit status: 0 success, 1 failure (files, I/O, a rank, a collective timeout), 2 bad flags or\n"
                 "configuration, 75 (fit) stopped by a signal after saving last.safetensors: the SLURM job was\n"
                 "requeued (requeue signal) or the run continues with --ckpt-path last.\n");
}

void ct_trainer_flags_summary(FILE *out)
{
    fprintf(out, "\nfit, validate and test flags (ctrain fit --help has the details):\n");
    for (const ct_trainer_flag *f = ct_trainer_flags; f->key.key; f++) {
        char left[64];

        fprintf(out, "  %-34s %s\n", ct_trainer_flag_left(f, left, sizeof(left)), f->key.help);
    }
    for (int i = 0; connector_help[i][0]; i++) {
        char left[64];

        snprintf(left, sizeof(left), "%s %s", connector_help[i][0], connector_help[i][1]);
        fprintf(out, "  %-34s %s\n", left, connector_help[i][2]);
    }
}

static int unknown_flag(const char *command, const char *name, ct_error *err)
{
    const char *names[96];
    int n = 0;

    for (const ct_trainer_flag *f = ct_trainer_flags; f->key.key; f++)
        names[n++] = f->key.key;
    for (int i = 0; connector_help[i][0]; i++)
        names[n++] = connector_help[i][0];
    names[n++] = "--help";
    names[n] = NULL;
    return ct_cli_flag_unknown(command, name, names, err);
}

/* --hidden W,W as the config key's value W-W ('none': no hidden layer). The widths' checks are
 * the key's (1 to 15 widths in [1, 65536]), said in the flag's own terms. */
static int parse_hidden(const ct_trainer_flag *f, const char *value, ct_cli_model_flags *mf, ct_error *err)
{
    char buf[256], *save = NULL, *tok;
    size_t used = 0;
    int n = 0;

    if (!strcmp(value, "none")) {
        snprintf(mf->hidden, sizeof(mf->hidden), "none");
        return 0;
    }
    if (snprintf(buf, sizeof(buf), "%s", value) >= (int)sizeof(buf) || !*value || value[strlen(value) - 1] == ',')
        return ct_trainer_flag_bad(f, value, "a list of widths like 512,256", err);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long w;

        if (n++ == 15)
            return ct_trainer_flag_bad(f, value, "a list of at most 15 widths", err);
        if (ct_parse_long(tok, 1, 65536, &w))
            return ct_trainer_flag_bad(f, value, "a list of widths in [1, 65536] like 512,256", err);
        used += (size_t)snprintf(mf->hidden + used, sizeof(mf->hidden) - used, "%s%ld", used ? "-" : "", w);
    }
    return 0;
}

/* 1 when the "k=v,..." text sets key. */
static int config_sets(const char *text, const char *key)
{
    size_t len = strlen(key);

    for (const char *p = text; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, key, len) && p[len] == '=')
            return 1;
    return 0;
}

int ct_trainer_flags_fold(ct_connector_flags *cf, ct_cli_model_flags *mf, ct_error *err)
{
    const ct_registry_entry *model = ct_connector_model(cf, NULL);
    const char *given = cf->model_config ? cf->model_config : "";

    if (!mf->hidden[0])
        return 0;
    /* An unknown --model is the connector's to refuse, naming it. */
    if (model && !ct_config_key_find(model->config, "hidden")) {
        ct_error_set(err, CT_EINVAL, "trainer-hidden", "--hidden sets --model-config hidden=, a key model %s does "
                     "not take", model->name);
        return ct_error_hint(err, "use --model-config for %s (ctrain plan --list shows its keys)", model->name);
    }
    if (config_sets(given, "hidden")) {
        ct_error_set(err, CT_EINVAL, "trainer-hidden", "--hidden and --model-config hidden=... both set the layers");
        return ct_error_hint(err, "give one of them");
    }
    if (snprintf(mf->model_config, sizeof(mf->model_config), "%s%shidden=%s", given, given[0] ? "," : "",
                 mf->hidden) >= (int)sizeof(mf->model_config))
        return ct_error_set(err, CT_EINVAL, "model-config-syntax", "--model-config with --hidden is longer than "
                            "%zu characters", sizeof(mf->model_config) - 1);
    cf->model_config = mf->model_config;
    return 0;
}

/* The flag's name in "--flag=value" or "--flag", into buf. */
static const char *name_of(const char *arg, const char *eq, char *buf, size_t size)
{
    snprintf(buf, size, "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
    return buf;
}

/* The store's settings from the environment too: a launcher or batch script sets them once for
 * every rank, as it sets MASTER_ADDR; a flag given wins. The Trainer checks them (config.c). */
static void env_defaults(ct_trainer_config *cfg)
{
    const char *v;

    if ((v = getenv("CTRAIN_RUN_ID")))
        snprintf(cfg->run_id, sizeof(cfg->run_id), "%s", v);
    if ((v = getenv("CTRAIN_STORE_BIND")))
        snprintf(cfg->store_bind, sizeof(cfg->store_bind), "%s", v);
    if ((v = getenv("CTRAIN_STORE_SECRET_FILE")))
        snprintf(cfg->store_secret_file, sizeof(cfg->store_secret_file), "%s", v);
}

int ct_trainer_flags_parse(int argc, char **argv, ct_trainer_config *cfg, ct_connector_flags *cf,
                           ct_cli_model_flags *mf, int *help, ct_error *err)
{
    ct_trainer_config_default(cfg);
    env_defaults(cfg);
    memset(cf, 0, sizeof(*cf));
    memset(mf, 0, sizeof(*mf));
    *help = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *eq = strchr(arg, '='), *value = NULL;
        char name[64];
        const ct_trainer_flag *f = ct_trainer_flag_find(name_of(arg, eq, name, sizeof(name)));
        int rc;

        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            *help = 1;
            return 0;
        }
        if (strncmp(arg, "--", 2)) {
            ct_error_set(err, CT_EINVAL, "flag-positional", "unexpected argument '%s'", arg);
            return ct_error_hint(err, "every setting is a --flag; see --help");
        }
        if (f && !f->metavar) {
            if (eq) {
                ct_error_set(err, CT_EINVAL, "flag-value", "%s takes no value (got '%s')", name, eq + 1);
                return ct_error_hint(err, "write %s alone", name);
            }
            if (f->field == CT_TF_DETERMINISTIC)
                cf->deterministic = 1;
            else if (f->field == CT_TF_ACTIVATION_CHECKPOINTING)
                cf->activation_checkpointing = 1;
            else
                ct_trainer_flag_set(f, "", cfg, err);
            continue;
        }
        if (eq)
            value = eq + 1;
        else if (i + 1 < argc && (f || strncmp(argv[i + 1], "--", 2)))
            value = argv[++i];
        if (!f) {
            rc = ct_connector_flags_set(cf, name, value ? value : "", err);
            if (rc == 1)
                return unknown_flag(argv[0], name, err);
            if (rc)
                return rc;
        }
        if (!value) {
            ct_error_set(err, CT_EINVAL, "flag-missing-value", "%s needs a value", name);
            return ct_error_hint(err, "write %s VALUE or %s=VALUE", name, name);
        }
        if (f && f->field == CT_TF_HIDDEN && (rc = parse_hidden(f, value, mf, err)))
            return rc;
        if (f && f->field != CT_TF_HIDDEN && (rc = ct_trainer_flag_set(f, value, cfg, err)))
            return rc;
    }
    /* --init-from is a Trainer flag (run.c loads the weights) and a connector flag (the plan holds
     * the file's shape): the connector reads the path the Trainer keeps. */
    if (cfg->init_from[0])
        cf->init_from = cfg->init_from;
    /* The Trainer checks the config, once, when fit/validate/test start. */
    return 0;
}
