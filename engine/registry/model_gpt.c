/* SPDX-License-Identifier: BSD-3-Clause */
/* gpt's descriptor (its implementation: engine/models/gpt_model.c and engine/models/gpt/): the
 * --model-config schema and what it computes in. */
#include "engine/registry/components.h"

/* The GPT's ranges are its own (engine/models/gpt/gpt.h CT_GPT_MAX_*); n_embd divisible by n_head,
 * vocab and seq_len against the data are checked when the model is created. */
static const ct_config_key gpt_config[] = {
    { .key = "n_layer", .type = CT_CONFIG_INT, .min = 1, .max = 64, .dflt = "4", .help = "transformer blocks" },
    { .key = "n_head", .type = CT_CONFIG_INT, .min = 1, .max = 8192, .dflt = "4",
      .help = "attention heads per block (n_embd must be a multiple)" },
    { .key = "n_embd", .type = CT_CONFIG_INT, .min = 1, .max = 8192, .dflt = "256", .help = "channels" },
    { .key = "seq_len", .type = CT_CONFIG_INT, .min = 1, .max = 8192, .dflt = "128",
      .help = "tokens per sequence (context length)" },
    { .key = "vocab", .type = CT_CONFIG_INT, .min = 2, .max = 65536, .dflt = "256",
      .help = "vocabulary size (256: byte tokens from ctrain tokenize)" },
    { .key = NULL },
};

ct_registry_entry ct_model_gpt_desc[] = {
    { .name = "gpt", .description = "GPT-2 language model (learned positions, pre-LayerNorm blocks, causal "
      "self-attention, GELU MLP, tied LM head); not on cuda until its compiled CUDA kernels pass their GPU checks",
      .accelerators = CT_ACCEL_CPU, .config = gpt_config, .precisions = "32-true,bf16-mixed,64-true,bf16-true",
      .datamodule = "tokens",
      .pending = "its CUDA implementation is compiled but has not passed its GPU checks yet (t/54-gpt-cuda.t)",
      .activation_checkpointing = CT_ACCEL_CPU, /* the CUDA GPT does not recompute (gpt_cuda.cu) */
      .list_order = 1 /* after mlp */ },
    { .name = NULL },
};
