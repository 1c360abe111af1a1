/* SPDX-License-Identifier: BSD-3-Clause */
/* fashion-mnist's descriptor (its implementation: engine/data/fashion_mnist_module.c). */
#include "engine/registry/components.h"

ct_registry_entry ct_datamodule_fashion_mnist_desc[] = {
    { .name = "fashion-mnist", .aliases = { "fmnist", NULL },
      .description = "Fashion-MNIST IDX files: 60000 28x28 images in 10 classes (1/12 held out for "
      "validation) and 10000 test images", .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA,
      .default_dir = "/usr/share/datasets/fashion-mnist" },
    { .name = NULL },
};
