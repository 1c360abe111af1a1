/* SPDX-License-Identifier: BSD-3-Clause */
/* The data modules libctrain builds in (registered by ct_engine_init). */
#ifndef CTRAIN_DATAMODULES_H
#define CTRAIN_DATAMODULES_H

#include "ctrain/datamodule.h"

extern const struct ct_datamodule_class ct_datamodule_fashion_mnist;
extern const struct ct_datamodule_class ct_datamodule_tokens;

#endif
