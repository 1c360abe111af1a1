/* SPDX-License-Identifier: BSD-3-Clause */
/* The data modules libctrain builds in (registered by ct_engine_init). */
#ifndef CTRAIN_DATAMODULES_H
#define CTRAIN_DATAMODULES_H

#include "ctrain/datamodule.h"
#include "engine/registry/components.gen.h"

/* Each built-in data module's class, ct_datamodule_NAME, beside its descriptor
 * engine/registry/datamodule_NAME.c. */
#define CT_DATAMODULE_CLASS_EXTERN(id) extern const struct ct_datamodule_class ct_datamodule_##id;
CT_DATAMODULES(CT_DATAMODULE_CLASS_EXTERN)

#endif
