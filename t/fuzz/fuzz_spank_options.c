/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: the SPANK plugin's --ctrain-* options, as srun, sbatch and salloc see them.
 * The input's first line is the plugstack.conf argument list (split at blanks, as for
 * fuzz_spank_args); each following line is one option as SPANK hands it to the plugin: its first
 * character picks the option (s strategy, a accelerator, p precision, b bind; the upper-case
 * letter passes a NULL value; any other character an option number the plugin never registered)
 * and the rest is the value. Options are stored and checked (the options so far) by
 * ct_spank_option_cb, the callback SPANK calls, then checked by ct_spank_local_post_opt, what slurm_spank_init_post_opt runs in srun: the
 * connector with the site's allowed list, in an empty environment (the environment has its own
 * targets). Never a crash; a refusal is a CT_E* code with an id, a message and a hint; an
 * accepted strategy is a name the callback accepted or the site's default. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/error.h"
#include "spank/args.h"
#include "spank/srun.h"
#include "spank/options.h"

/* The dispatcher's option callback (spank/ctrain.c), what SPANK calls. */
int ct_spank_option_cb(int val, const char *optarg, int remote);

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    clearenv(); /* no SLURM_* or CTRAIN_* of the shell the fuzzer runs in */
    return 0;
}

static void parse_args(char *line, ct_error *err, int *ok)
{
    char *save = NULL, *av[MAX_ARGS];
    int ac = 0;

    for (char *tok = strtok_r(line, " \t", &save); tok && ac < MAX_ARGS; tok = strtok_r(NULL, " \t", &save))
        av[ac++] = tok;
    *ok = ct_spank_args_parse(ac, av, err) == 0;
}

static int option_of(char c, int *null_value)
{
    *null_value = 0;
    switch (c) {
    case 'S': *null_value = 1; /* fall through */
    case 's': return CT_SPANK_OPT_STRATEGY;
    case 'A': *null_value = 1; /* fall through */
    case 'a': return CT_SPANK_OPT_ACCELERATOR;
    case 'P': *null_value = 1; /* fall through */
    case 'p': return CT_SPANK_OPT_PRECISION;
    case 'B': *null_value = 1; /* fall through */
    case 'b': return CT_SPANK_OPT_BIND;
    }
    return (unsigned char)c;
}

static void check_refusal(const ct_error *err)
{
    if (err->code >= 0 || !err->id[0] || !err->msg[0] || !err->hint[0])
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text, *line, *save = NULL;
    const char *strategy;
    ct_error err;
    int args_ok = 0;

    text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    ct_error_clear(&err);
    line = strtok_r(text, "\n", &save);
    parse_args(line ? line : (char *)"", &err, &args_ok);
    for (line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int null_value, val = option_of(line[0], &null_value);

        ct_spank_option_cb(val, null_value ? NULL : line + 1, 0);
    }
    ct_error_clear(&err);
    if (args_ok && ct_spank_local_post_opt(NULL, &err) != 0)
        check_refusal(&err);
    strategy = ct_spank_strategy();
    if (strategy && strategy != ct_spank_args_get()->default_strategy && (!strategy[0] || strlen(strategy) >= 64))
        abort();
    ct_spank_bind_mode();
    ct_spank_options_free();
    free(text);
    return 0;
}
