/* libFuzzer target: arbitrary bytes as a safetensors checkpoint. Loading must return 0 or a clean
 * CT_E* error, never crash, read out of bounds or leak (make fuzz). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/checkpoint_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    static ct_ckpt c;
    static float w[6], b[2];
    ct_error err;
    FILE *f;

    if (!path[0])
        snprintf(path, sizeof(path), "/tmp/ctrain-fuzz-st-%d", (int)getpid());
    f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    memset(&c, 0, sizeof(c));
    c.n_tensors = 2;
    snprintf(c.tensors[0].name, sizeof(c.tensors[0].name), "layers.0.weight");
    c.tensors[0].ndim = 2;
    c.tensors[0].shape[0] = 2;
    c.tensors[0].shape[1] = 3;
    c.tensors[0].data = w;
    c.tensors[0].nbytes = sizeof(w);
    snprintf(c.tensors[1].name, sizeof(c.tensors[1].name), "layers.0.bias");
    c.tensors[1].ndim = 1;
    c.tensors[1].shape[0] = 2;
    c.tensors[1].data = b;
    c.tensors[1].nbytes = sizeof(b);
    if (ct_checkpoint_io_safetensors.load(path, &c, &err) != 0 && err.code >= 0)
        abort(); /* a failure must carry a CT_E* code */
    unlink(path);
    return 0;
}
