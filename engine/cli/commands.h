/* ctrain CLI — one function per subcommand, each in engine/cli/cmd_<name>.c.
 * argv[0] is the subcommand name; the return value is the process exit status. */
#ifndef CTRAIN_CLI_COMMANDS_H
#define CTRAIN_CLI_COMMANDS_H

int ct_cmd_fit(int argc, char **argv);
int ct_cmd_validate(int argc, char **argv);
int ct_cmd_test(int argc, char **argv);
int ct_cmd_plan(int argc, char **argv);
int ct_cmd_env(int argc, char **argv);
int ct_cmd_bind(int argc, char **argv);

#endif
