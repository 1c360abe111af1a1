/* ctrain — element types of tensors (libctrain-core). Shared by precision (what the step computes
 * in) and checkpoint IO (what a file stores), which sit side by side in the layering. */
#ifndef CTRAIN_DTYPE_H
#define CTRAIN_DTYPE_H

enum ct_dtype {
    CT_DTYPE_F32 = 0,
    CT_DTYPE_F64,
    CT_DTYPE_BF16,
    CT_DTYPE_F16
};

#endif
