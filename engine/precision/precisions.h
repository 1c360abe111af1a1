/* SPDX-License-Identifier: BSD-3-Clause */
/* The precisions libctrain implements; registered by name in ct_engine_init(). */
#ifndef CTRAIN_PRECISIONS_H
#define CTRAIN_PRECISIONS_H

#include "ctrain/precision.h"

/* The i-th implemented precision, NULL past the last, with its descriptor's name: ct_engine_init
 * registers each under it. */
const struct ct_precision_ops *ct_precision_at(int i);

#endif
