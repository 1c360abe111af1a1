/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain CLI — one function per subcommand, each in engine/cli/cmd_<name>.c.
 * argv[0] is the subcommand name; the return value is the process exit status. */
#ifndef CTRAIN_CLI_COMMANDS_H
#define CTRAIN_CLI_COMMANDS_H

#include "ctrain/error.h"

int ct_cmd_fit(int argc, char **argv);
int ct_cmd_validate(int argc, char **argv);
int ct_cmd_test(int argc, char **argv);
int ct_cmd_plan(int argc, char **argv);
int ct_cmd_env(int argc, char **argv);
int ct_cmd_bind(int argc, char **argv);
int ct_cmd_tokenize(int argc, char **argv);
int ct_cmd_generate(int argc, char **argv);
int ct_cmd_export(int argc, char **argv);
int ct_cmd_diagnose(int argc, char **argv);
int ct_cmd_preflight(int argc, char **argv);
int ct_cmd_supervise(int argc, char **argv);

/* "COMMAND: unknown flag 'NAME'" with a did-you-mean hint from the NULL-terminated known list
 * (catalogue id flag-unknown). Returns CT_EINVAL. */
int ct_cli_flag_unknown(const char *command, const char *name, const char *const *known, ct_error *err);

/* The value of a flag written "--name VALUE" or "--name=VALUE" at argv[*i] (advancing *i past a
 * separate value); NULL when argv[*i] is another flag, or this flag without its value (then
 * *missing is set). */
const char *ct_cli_flag_value(int argc, char **argv, int *i, const char *name, int *missing);

#endif
