/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the GPT in Hugging Face's GPT-2 layout (GPT2LMHeadModel): names, Conv1D weights,
 * config.json. Used by the gpt model's hf_* entries (engine/models/gpt_model.c). */
#ifndef CTRAIN_MODELS_GPT_HF_H
#define CTRAIN_MODELS_GPT_HF_H

#include <stddef.h>

#include "ctrain/config.h"
#include "ctrain/error.h"
#include "ctrain/model.h"
#include "engine/models/gpt/gpt.h"

/* ctrain's tensor name ("h.0.attn.c_attn.weight") in HF's layout: "transformer." + name, the
 * block Linear weights transposed (Conv1D), wpe the first rows of a longer context. */
int ct_gpt_hf_tensor(const char *name, ct_model_hf_tensor *out);
/* lm_head.weight is wte.weight (tensor 0); the blocks' attn.bias and attn.masked_bias are the
 * causal mask, CT_MODEL_HF_BUFFER (HF ignores them on load too); -1 for any other name. */
int ct_gpt_hf_extra(const char *hf_name);
/* GPT2Config's config.json for c (n_positions = seq_len). CT_EINVAL when it does not fit. */
int ct_gpt_hf_config_json(const ct_gpt_config *c, char *buf, size_t size);
/* A HF GPT-2 checkpoint's shape into the gpt --model-config cfg (see ct_model_class.hf_config):
 * n_layer, n_embd, vocab and n_positions from the tensors, n_head from config.json (else the
 * user's n_head), the user's seq_len when it is at most n_positions. */
int ct_gpt_hf_config(const ct_model_file_tensor *file, int n, const char *config_json, ct_config *cfg,
                     ct_error *err);

#endif
