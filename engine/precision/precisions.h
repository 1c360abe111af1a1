/* SPDX-License-Identifier: BSD-3-Clause */
/* The precisions libctrain implements; registered by name in ct_engine_init(). */
#ifndef CTRAIN_PRECISIONS_H
#define CTRAIN_PRECISIONS_H

#include "ctrain/precision.h"

extern const struct ct_precision_ops ct_precision_32_true;
extern const struct ct_precision_ops ct_precision_bf16_mixed;
extern const struct ct_precision_ops ct_precision_16_mixed;
extern const struct ct_precision_ops ct_precision_64_true;
extern const struct ct_precision_ops ct_precision_bf16_true;

#endif
