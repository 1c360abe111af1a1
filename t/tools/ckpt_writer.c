/* SPDX-License-Identifier: BSD-3-Clause */
/* ckpt_writer PATH — save checkpoints to PATH in a loop, forever (until killed): version k has a
 * 4 MB tensor filled with k and metadata version=k. ckpt_writer --check PATH exits 0 when PATH
 * loads and its tensor matches its metadata (a complete, consistent checkpoint). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/checkpoint_io.h"

#define N (1 << 20)

static void describe(ct_ckpt *c, float *data)
{
    memset(c, 0, sizeof(*c));
    c->n_tensors = 1;
    snprintf(c->tensors[0].name, sizeof(c->tensors[0].name), "w");
    c->tensors[0].dtype = CT_DTYPE_F32;
    c->tensors[0].ndim = 1;
    c->tensors[0].shape[0] = N;
    c->tensors[0].data = data;
    c->tensors[0].nbytes = sizeof(float) * N;
}

int main(int argc, char **argv)
{
    static ct_ckpt c;
    float *data = malloc(sizeof(float) * N);
    ct_error err;

    if (argc == 3 && !strcmp(argv[1], "--check")) {
        long version;

        describe(&c, data);
        if (ct_checkpoint_io_safetensors.load(argv[2], &c, &err))
            return printf("load failed: %s\n", err.msg), 1;
        if (c.n_meta != 1 || strcmp(c.meta[0].key, "version"))
            return printf("metadata lost\n"), 1;
        version = atol(c.meta[0].value);
        for (int i = 0; i < N; i++)
            if (data[i] != (float)version)
                return printf("tensor does not match version %ld at %d\n", version, i), 1;
        printf("version %ld complete\n", version);
        return 0;
    }
    if (argc != 2)
        return fprintf(stderr, "usage: ckpt_writer PATH | --check PATH\n"), 2;
    for (long k = 1;; k++) {
        describe(&c, data);
        for (int i = 0; i < N; i++)
            data[i] = (float)k;
        c.n_meta = 1;
        snprintf(c.meta[0].key, sizeof(c.meta[0].key), "version");
        snprintf(c.meta[0].value, sizeof(c.meta[0].value), "%ld", k);
        if (ct_checkpoint_io_safetensors.save(argv[1], &c, &err))
            return fprintf(stderr, "ckpt_writer: %s\n", err.msg), 1;
        if (k == 1) {
            printf("first\n");
            fflush(stdout);
        }
    }
}
