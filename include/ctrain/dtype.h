/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — element types of tensors (libctrain-core). Shared by precision (what the step computes
 * in), checkpoint IO (what a file stores) and batches (what a data module hands a model), which sit
 * side by side in the layering. */
#ifndef CTRAIN_DTYPE_H
#define CTRAIN_DTYPE_H

#include <stddef.h>

enum ct_dtype {
    CT_DTYPE_F32 = 0,
    CT_DTYPE_F64,
    CT_DTYPE_BF16,
    CT_DTYPE_F16,
    CT_DTYPE_U8,    /* class labels (Fashion-MNIST) */
    CT_DTYPE_U16,   /* tokens as llm.c's shards store them */
    CT_DTYPE_I32    /* tokens and targets in a language model's batch */
};

/* Bytes per element; 0 for an unknown value. */
static inline size_t ct_dtype_size(enum ct_dtype t)
{
    switch (t) {
    case CT_DTYPE_F64: return 8;
    case CT_DTYPE_F32: case CT_DTYPE_I32: return 4;
    case CT_DTYPE_BF16: case CT_DTYPE_F16: case CT_DTYPE_U16: return 2;
    case CT_DTYPE_U8: return 1;
    }
    return 0;
}

#endif
