/* SPDX-License-Identifier: BSD-3-Clause */
/* The flags of ctrain fit / validate / test: one parser for the three subcommands. */
#ifndef CTRAIN_CLI_TRAINER_FLAGS_H
#define CTRAIN_CLI_TRAINER_FLAGS_H

#include <stdio.h>

#include "ctrain/connector.h"
#include "ctrain/trainer.h"

/* Parse argv[1..argc) (argv[0] is the subcommand) into cfg (defaults first) and the connector
 * flags cf. *help = 1 when --help was given. Errors name the flag (CT_EINVAL, exit status 2). */
int ct_trainer_flags_parse(int argc, char **argv, ct_trainer_config *cfg, ct_connector_flags *cf, int *help,
                           ct_error *err);
void ct_trainer_flags_usage(const char *cmd, FILE *out);
/* One line per flag of fit/validate/test, for `ctrain --help`. */
void ct_trainer_flags_summary(FILE *out);

#endif
