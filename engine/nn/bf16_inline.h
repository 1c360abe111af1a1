/* SPDX-License-Identifier: BSD-3-Clause */
/* bf16 storage (bf16-true): a value's 16 bits in a uint16_t, loaded into fp32 registers exactly and
 * stored back rounded to nearest, ties to even (NaN kept quiet). Inline so the element-wise loops
 * that load and store through them vectorise. Internal to libctrain. */
#ifndef CTRAIN_NN_BF16_INLINE_H
#define CTRAIN_NN_BF16_INLINE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline float ct_bf16_load(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float x;

    memcpy(&x, &u, sizeof(x));
    return x;
}

static inline uint16_t ct_bf16_store(float x)
{
    uint32_t u;

    memcpy(&u, &x, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u | 0x00400000u) >> 16);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#endif
