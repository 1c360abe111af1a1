/* The precisions libctrain implements; registered by name in ct_engine_init(). */
#ifndef CTRAIN_PRECISIONS_H
#define CTRAIN_PRECISIONS_H

#include "ctrain/precision.h"

extern const struct ct_precision_ops ct_precision_32_true;

#endif
