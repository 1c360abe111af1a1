/* SPDX-License-Identifier: BSD-3-Clause */
/* The names checkpoints give the types they store: safetensors' dtype strings, which the metadata
 * of ctrain's format (param_dtype) uses too. Written once, here. */
#include <string.h>

#include "ctrain/checkpoint_io.h"

static const struct {
    const char *name;
    enum ct_dtype dtype;
} names[] = {
    { "F32", CT_DTYPE_F32 },
    { "F64", CT_DTYPE_F64 },
    { "BF16", CT_DTYPE_BF16 },
    { "F16", CT_DTYPE_F16 },
};

const char *ct_ckpt_dtype_name(int dtype)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((int)names[i].dtype == dtype)
            return names[i].name;
    return NULL;
}

int ct_ckpt_dtype_parse(const char *name)
{
    for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(names[i].name, name))
            return (int)names[i].dtype;
    return -1;
}
