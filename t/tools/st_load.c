/* SPDX-License-Identifier: BSD-3-Clause */
/* st_load PATH — load PATH with ctrain's safetensors reader asking for no tensor (the header is
 * checked whole: every entry, the data layout, the metadata) and print the verdict: "ok, N
 * metadata entries" and exit 0, or ctrain's message and exit 1. Used to measure what a hostile
 * header costs (/usr/bin/time -v build/t/st_load FILE) and by t/03. */
#include <stdio.h>
#include <stdlib.h>

#include "ctrain/checkpoint_io.h"

int main(int argc, char **argv)
{
    ct_ckpt *c = calloc(1, sizeof(*c));
    ct_error err;

    if (argc != 2 || !c) {
        fprintf(stderr, "usage: st_load FILE.safetensors\n");
        return 2;
    }
    ct_error_clear(&err);
    if (ct_checkpoint_io_safetensors.load(argv[1], c, &err)) {
        printf("%s\n", err.msg);
        free(c);
        return 1;
    }
    printf("ok, %d metadata entries\n", c->n_meta);
    free(c);
    return 0;
}
