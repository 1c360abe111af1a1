/* SPDX-License-Identifier: BSD-3-Clause */
/* mlp's descriptor (its implementation: engine/models/mlp_model.c and engine/models/mlp/): the
 * --model-config schema and what it computes in. The default model. The cpu engine computes in
 * 32-true and bf16-mixed; 16-mixed is the CUDA MLP's (the precision's own mask keeps it off cpu). */
#include "engine/registry/components.h"

static const ct_config_key mlp_config[] = {
    { .key = "hidden", .type = CT_CONFIG_INT_LIST, .min = 1, .max = 65536, .max_len = 15, .dflt = "512-256",
      .help = "hidden layer widths joined by '-' ('none': a linear classifier); --hidden W,W sets it too" },
    { .key = NULL },
};

ct_registry_entry ct_model_mlp_desc[] = {
    { .name = "mlp", .is_default = 1, .description = "multilayer perceptron classifier: Linear+ReLU layers, softmax "
      "cross-entropy; inputs and classes from the data", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA,
      .config = mlp_config, .precisions = "32-true,bf16-mixed,16-mixed,64-true,bf16-true",
      .datamodule = "fashion-mnist" },
    { .name = NULL },
};
