/* SPDX-License-Identifier: BSD-3-Clause */
/* tokens' descriptor (its implementation: engine/data/tokens_module.c). */
#include "engine/registry/components.h"

ct_registry_entry ct_datamodule_tokens_desc[] = {
    { .name = "tokens", .description = "llm.c token shards DIR/train.bin and DIR/val.bin (ctrain tokenize): "
      "windows of the model's seq_len, in order, sharded over the ranks", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA },
    { .name = NULL },
};
