/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: the SPANK plugin's plugstack.conf arguments (spank/args.c). The input is the
 * argument part of a plugstack.conf line ("default_strategy=ddp allowed_strategies=ddp,fsdp
 * bind=closest ..."), split at blanks as SLURM splits it into the plugin's argv; the options the
 * site sets are parsed into the plugin's state by ct_spank_args_parse, the function slurm_spank_init
 * calls. Never a crash; a refusal is a CT_E* code with an id, a message and a hint; an accepted
 * set leaves NUL-terminated fields (make fuzz). The plugin's objects are linked as built with the
 * fuzzer's coverage, against SLURM's libslurmfull for the SPANK API (spank_context() answers
 * S_CTX_ERROR outside slurmd/srun: the srun side of the rules). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/error.h"
#include "spank/args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text, *save = NULL, *av[MAX_ARGS];
    int ac = 0;
    ct_error err;
    const struct ct_spank_args *a = ct_spank_args_get();

    text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    for (char *tok = strtok_r(text, " \t\n", &save); tok && ac < MAX_ARGS; tok = strtok_r(NULL, " \t\n", &save))
        av[ac++] = tok;
    ct_error_clear(&err);
    if (ct_spank_args_parse(ac, av, &err) != 0) {
        if (err.code >= 0 || !err.id[0] || !err.msg[0] || !err.hint[0])
            abort();
    } else if (!memchr(a->default_strategy, '\0', sizeof(a->default_strategy)) ||
               !memchr(a->allowed_strategies, '\0', sizeof(a->allowed_strategies)) ||
               !memchr(a->topology, '\0', sizeof(a->topology)) || a->port_base < 0) {
        abort();
    }
    free(text);
    return 0;
}
