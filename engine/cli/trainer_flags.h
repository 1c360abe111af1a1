/* SPDX-License-Identifier: BSD-3-Clause */
/* The flags of ctrain fit / validate / test: one parser for the three subcommands. */
#ifndef CTRAIN_CLI_TRAINER_FLAGS_H
#define CTRAIN_CLI_TRAINER_FLAGS_H

#include <stdio.h>

#include "ctrain/connector.h"
#include "ctrain/trainer.h"

/* The CLI's alias of a model config key: --hidden W,W is --model-config hidden=W-W (the MLP's
 * layers). It lives here only: ct_trainer_flags_fold adds it to --model-config before the
 * connector parses that, once; neither the Trainer nor the models know the flag. */
typedef struct ct_cli_model_flags {
    char hidden[128];                       /* --hidden as the key's value, "512-256" or "none"; "" not given */
    char model_config[CT_CONFIG_TEXT_MAX];  /* --model-config with hidden= added (what cf->model_config points at) */
} ct_cli_model_flags;

/* Parse argv[1..argc) (argv[0] is the subcommand) into cfg (defaults first), the connector flags
 * cf and the CLI's alias mf. *help = 1 when --help was given. Errors name the flag (CT_EINVAL,
 * exit status 2). */
int ct_trainer_flags_parse(int argc, char **argv, ct_trainer_config *cfg, ct_connector_flags *cf,
                           ct_cli_model_flags *mf, int *help, ct_error *err);
/* Fold --hidden into cf's --model-config as the key hidden=W-W (nothing when it was not given).
 * CT_EINVAL (trainer-hidden) when the model the connector will plan takes no such key, or when
 * --model-config sets it too. */
int ct_trainer_flags_fold(ct_connector_flags *cf, ct_cli_model_flags *mf, ct_error *err);
void ct_trainer_flags_usage(const char *cmd, FILE *out);
/* One line per flag of fit/validate/test, for `ctrain --help`. */
void ct_trainer_flags_summary(FILE *out);

#endif
