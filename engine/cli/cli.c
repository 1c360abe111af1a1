/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers every subcommand's flag parser shares. */
#include <string.h>

#include "ctrain/util.h"
#include "engine/cli/commands.h"

int ct_cli_flag_unknown(const char *command, const char *name, const char *const *known, ct_error *err)
{
    const char *guess = ct_str_closest(name, known);

    ct_error_set(err, CT_EINVAL, "flag-unknown", "unknown flag '%s'", name);
    if (guess)
        return ct_error_hint(err, "did you mean %s? (ctrain %s --help lists the flags)", guess, command);
    return ct_error_hint(err, "ctrain %s --help lists the flags", command);
}

const char *ct_cli_flag_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);

    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}
