/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — a model's weights in Hugging Face's layout (fit --init-from, ctrain export --format hf).
 *
 * The model says how each of its tensors is named and laid out there (ct_model_hf_map,
 * <ctrain/model.h>); these read and write the files through checkpoint IO (safetensors), so the
 * same code serves every model that offers the mapping. A directory in Hugging Face's layout holds
 * model.safetensors and config.json; --init-from reads a config.json beside the file when there
 * is one.
 */
#ifndef CTRAIN_CHECKPOINT_HF_IO_H
#define CTRAIN_CHECKPOINT_HF_IO_H

#include <stddef.h>

#include "ctrain/checkpoint_io.h"
#include "ctrain/error.h"
#include "ctrain/model.h"
#include "ctrain/registry.h"

/* The shape registered model `model` needs to hold the checkpoint at path, set into cfg in place
 * (the model class's hf_config): from its tensors (read without their data) and the config.json
 * beside it. cfg comes in as the user's parsed --model-config (keys it sets must agree with the
 * file). The connector calls it for --init-from (ct_connector_set_model_file, registered by
 * ct_engine_init). Bad file: CT_EINVAL/CT_EFORMAT naming it; a model without hf_config: CT_EINVAL. */
int ct_hf_model_config(const ct_registry_entry *model, const char *path, ct_config *cfg, ct_error *err);

/* The checkpoint's weights into the host model's parameters (its config from ct_hf_model_config).
 * Every tensor the model maps must be there in fp32 with the mapped shape; a tied tensor must equal
 * the model's; a tensor the model does not know is refused. On error the parameters may be partly
 * written: the caller stops. */
int ct_hf_load(ct_model *host, const char *path, ct_error *err);

/* DIR/model.safetensors (the model's tensors in Hugging Face's names and layout, tied ones left out
 * as save_pretrained does; metadata format "pt") and DIR/config.json, each written atomically; DIR
 * is created when missing. */
int ct_hf_save(const ct_model *host, const char *dir, ct_error *err);

#endif
