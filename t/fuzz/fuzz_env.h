/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the fuzz targets that read a process environment (fuzz_env.c, fuzz_connector.c):
 * the fuzzer's bytes become a fixture environment served through a ct_getenv_fn.
 *
 * Input, as text lines:
 *   NAME=value       a variable (the first of a name wins, as in a real environment)
 *   --flag=value     a connector flag (fuzz_connector only; "--flag" alone has value "")
 *   @NAME            a forced --cluster-env (fuzz_env only)
 *   %%               everything after this line is the content of LSB_DJOB_RANKFILE
 * When LSB_DJOB_RANKFILE is among the variables, it names a temporary file holding that content
 * (the fuzzer never opens paths it made up). */
#ifndef CTRAIN_FUZZ_ENV_H
#define CTRAIN_FUZZ_ENV_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/error.h"

#define FUZZ_MAX_LINES 256

struct fuzz_env {
    char *text;                          /* the input as one C string, cut into lines in place */
    char *vars[FUZZ_MAX_LINES];          /* "NAME=value" */
    int n_vars;
    char *flags[FUZZ_MAX_LINES];         /* "--flag=value" */
    int n_flags;
    const char *forced;
    char rankfile[64];                   /* the temp file's path, "" when not written */
};

/* The fixture's getenv: the first NAME=value line of that name. */
static const char *fuzz_getenv(const char *name, void *ctx)
{
    struct fuzz_env *e = ctx;
    size_t len = strlen(name);

    for (int i = 0; i < e->n_vars; i++) {
        if (strncmp(e->vars[i], name, len) || e->vars[i][len] != '=')
            continue;
        if (!strcmp(name, "LSB_DJOB_RANKFILE"))
            return e->rankfile;
        return e->vars[i] + len + 1;
    }
    return NULL;
}

static void fuzz_write_rankfile(struct fuzz_env *e, const char *content)
{
    FILE *f;

    snprintf(e->rankfile, sizeof(e->rankfile), "/tmp/ctrain-fuzz-rankfile-%d", (int)getpid());
    f = fopen(e->rankfile, "w");
    if (!f)
        abort();
    fputs(content, f);
    fclose(f);
}

/* Cut the input into variables, flags, the forced environment and the rank file. */
static void fuzz_env_parse(struct fuzz_env *e, const uint8_t *data, size_t size)
{
    char *line, *rankfile = NULL;

    memset(e, 0, sizeof(*e));
    e->text = malloc(size + 1);
    if (!e->text)
        abort();
    memcpy(e->text, data, size);
    e->text[size] = '\0';
    line = e->text;
    while (line && !rankfile) {
        char *nl = strchr(line, '\n');

        if (nl)
            *nl = '\0';
        if (!strcmp(line, "%%"))
            rankfile = nl ? nl + 1 : line + strlen(line);
        else if (!strncmp(line, "--", 2) && e->n_flags < FUZZ_MAX_LINES)
            e->flags[e->n_flags++] = line;
        else if (line[0] == '@')
            e->forced = line + 1;
        else if (strchr(line, '=') && e->n_vars < FUZZ_MAX_LINES)
            e->vars[e->n_vars++] = line;
        line = nl ? nl + 1 : NULL;
    }
    if (fuzz_getenv("LSB_DJOB_RANKFILE", e))
        fuzz_write_rankfile(e, rankfile ? rankfile : "");
}

/* A refusal of bad input (brief, rule 3): a CT_E* code, a message, and for malformed or
 * contradicting input a catalogue id and a hint. */
static void fuzz_check_refusal(const ct_error *err)
{
    if (err->code < 0 && err->msg[0] &&
        !((err->code == CT_EINVAL || err->code == CT_ECONFLICT || err->code == CT_ENOTAVAIL) &&
          (!err->id[0] || !err->hint[0])))
        return;
    fprintf(stderr, "refusal without what rule 3 asks: code %d id '%s'\nmsg: %s\nhint: %s\n", err->code,
            err->id, err->msg, err->hint);
    abort();
}

static void fuzz_env_done(struct fuzz_env *e)
{
    if (e->rankfile[0])
        unlink(e->rankfile);
    free(e->text);
}

#endif
