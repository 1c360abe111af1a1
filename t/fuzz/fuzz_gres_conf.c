/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: gres.conf as the plugin reads it in slurmstepd (engine/bind/gres_conf.c) from arbitrary
 * bytes, for the node n1. Never a crash; a refusal is CT_EFORMAT naming gres.conf; an accepted file
 * gives at most CT_GRES_MAX_FILES non-empty, NUL-terminated device file names. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/error.h"
#include "ctrain/gres_conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    ct_gres_files files;
    ct_error err;

    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    ct_error_clear(&err);
    if (ct_gres_conf_parse(text, "n1", &files, &err) != 0) {
        if (err.code != CT_EFORMAT || !strstr(err.msg, "gres.conf"))
            abort();
    } else {
        if (files.nfiles < 0 || files.nfiles > CT_GRES_MAX_FILES)
            abort();
        for (int i = 0; i < files.nfiles; i++)
            if (!memchr(files.files[i], '\0', sizeof(files.files[i])) || !files.files[i][0])
                abort();
    }
    free(text);
    return 0;
}
