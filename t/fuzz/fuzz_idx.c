/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: arbitrary bytes as a (gzip'd or plain) IDX file of images. The reader must
 * return data or a clean CT_E* error, never crash or over-read (make fuzz). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/data/fashion_mnist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    uint32_t dims[3];
    uint8_t *out = NULL;
    ct_error err;
    FILE *f;

    if (!path[0])
        snprintf(path, sizeof(path), "/tmp/ctrain-fuzz-idx-%d", (int)getpid());
    f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    if (ct_idx_read_u8(path, 3, dims, &out, &err) == 0) {
        volatile uint8_t sink = 0;
        size_t n = (size_t)dims[0] * dims[1] * dims[2];

        sink ^= out[n - 1]; /* the whole announced size is there */
        (void)sink;
    } else if (err.code >= 0) {
        abort();
    }
    free(out);
    unlink(path);
    return 0;
}
