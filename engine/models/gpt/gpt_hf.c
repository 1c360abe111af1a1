/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT in Hugging Face's layout: GPT2LMHeadModel's tensor names and Conv1D weights, and its
 * config.json. ctrain's GPT is the same architecture (learned positions, pre-LayerNorm blocks,
 * GELU(tanh) = HF's "gelu_new", LayerNorm eps 1e-5, the LM head tied to wte); only the names and the
 * layout of the block weights differ: Conv1D stores [in, out] where ctrain (nn.Linear) holds
 * [out, in]. The reading and writing of the files is the caller's (checkpoint IO, above models). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/models/gpt/gpt_hf.h"

#define HF_PREFIX "transformer."

int ct_gpt_hf_tensor(const char *name, ct_model_hf_tensor *out)
{
    size_t len = strlen(name);
    int is_weight = len > 7 && !strcmp(name + len - 7, ".weight");

    memset(out, 0, sizeof(*out));
    if (snprintf(out->name, sizeof(out->name), HF_PREFIX "%s", name) >= (int)sizeof(out->name))
        return CT_EINVAL;
    /* the Linear weights of the blocks (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) are Conv1D */
    out->transposed = is_weight && !strncmp(name, "h.", 2) && strstr(name, ".c_") != NULL;
    out->prefix_rows = !strcmp(name, "wpe.weight");
    return 0;
}

int ct_gpt_hf_extra(const char *hf_name)
{
    const char *n = !strncmp(hf_name, HF_PREFIX, strlen(HF_PREFIX)) ? hf_name + strlen(HF_PREFIX) : hf_name;
    size_t len = strlen(n);
    int layer, used = 0;

    if (!strcmp(hf_name, "lm_head.weight"))
        return 0;
    if (sscanf(n, "h.%d.%n", &layer, &used) == 1 && used > 0 &&
        (!strcmp(n + used, "attn.bias") || !strcmp(n + used, "attn.masked_bias")) && len > 0)
        return CT_MODEL_HF_BUFFER;
    return -1;
}

int ct_gpt_hf_config_json(const ct_gpt_config *c, char *buf, size_t size)
{
    /* GPT-2's tokenizer ends with <|endoftext|> = 50256; another vocabulary has no such token. */
    const char *eot = c->vocab == 50257 ? "50256" : "null";
    int n = snprintf(buf, size,
                     "{\n"
                     "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
                     "  \"model_type\": \"gpt2\",\n"
                     "  \"vocab_size\": %d,\n"
                     "  \"n_positions\": %d,\n"
                     "  \"n_ctx\": %d,\n"
                     "  \"n_embd\": %d,\n"
                     "  \"n_layer\": %d,\n"
                     "  \"n_head\": %d,\n"
                     "  \"n_inner\": null,\n"
                     "  \"activation_function\": \"gelu_new\",\n"
                     "  \"layer_norm_epsilon\": 1e-05,\n"
                     "  \"resid_pdrop\": 0.0,\n"
                     "  \"embd_pdrop\": 0.0,\n"
                     "  \"attn_pdrop\": 0.0,\n"
                     "  \"initializer_range\": 0.02,\n"
                     "  \"scale_attn_weights\": true,\n"
                     "  \"scale_attn_by_inverse_layer_idx\": false,\n"
                     "  \"reorder_and_upcast_attn\": false,\n"
                     "  \"tie_word_embeddings\": true,\n"
                     "  \"bos_token_id\": %s,\n"
                     "  \"eos_token_id\": %s,\n"
                     "  \"torch_dtype\": \"float32\"\n"
                     "}\n",
                     c->vocab, c->seq_len, c->seq_len, c->n_embd, c->n_layer, c->n_head, eot, eot);

    return n < 0 || (size_t)n >= size ? CT_EINVAL : 0;
}

/* --- the configuration of a Hugging Face checkpoint -------------------------------------------- */

/* The file's tensor named HF_PREFIX name or name (a checkpoint of the base GPT2Model has no prefix). */
static const ct_model_file_tensor *find(const ct_model_file_tensor *file, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(file[i].name, name) ||
            (!strncmp(file[i].name, HF_PREFIX, strlen(HF_PREFIX)) && !strcmp(file[i].name + strlen(HF_PREFIX), name)))
            return &file[i];
    return NULL;
}

/* n_layer: blocks h.0 .. h.L-1 hold ln_1.weight. */
static int count_layers(const ct_model_file_tensor *file, int n)
{
    char name[64];
    int l = 0;

    for (;;) {
        snprintf(name, sizeof(name), "h.%d.ln_1.weight", l);
        if (!find(file, n, name))
            return l;
        l++;
    }
}

/* An integer member of config.json, or -1 when absent (-2 when not a whole number). */
static long json_int(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);

    if (!v || cJSON_IsNull(v))
        return -1;
    if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1e9 || floor(v->valuedouble) != v->valuedouble)
        return -2;
    return (long)v->valuedouble;
}

/* What ctrain's GPT does not compute: refuse a config.json that asks for it. */
static int check_arch(const cJSON *root, ct_error *err)
{
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "activation_function");
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_epsilon");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    static const char *const off[] = { "scale_attn_by_inverse_layer_idx", "add_cross_attention", NULL };
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");

    if (cJSON_IsString(type) && strcmp(type->valuestring, "gpt2")) {
        ct_error_set(err, CT_EFORMAT, "init-from-arch", "config.json: model_type '%s', not gpt2", type->valuestring);
        return ct_error_hint(err, "--init-from loads GPT-2 checkpoints (GPT2LMHeadModel, GPT2Model)");
    }
    if (cJSON_IsString(act) && strcmp(act->valuestring, "gelu_new") && strcmp(act->valuestring, "gelu_pytorch_tanh")) {
        ct_error_set(err, CT_EFORMAT, "init-from-arch", "config.json: activation_function '%s'; ctrain's GPT "
                     "computes GELU(tanh) (gelu_new)", act->valuestring);
        return ct_error_hint(err, "load a checkpoint trained with gelu_new, GPT-2's");
    }
    if (cJSON_IsNumber(eps) && fabs(eps->valuedouble - 1e-5) > 1e-12) {
        ct_error_set(err, CT_EFORMAT, "init-from-arch", "config.json: layer_norm_epsilon %g; ctrain's GPT uses 1e-05",
                     eps->valuedouble);
        return ct_error_hint(err, "load a checkpoint trained with GPT-2's layer_norm_epsilon 1e-05");
    }
    for (int i = 0; off[i]; i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, off[i]))) {
            ct_error_set(err, CT_EFORMAT, "init-from-arch", "config.json: %s is true; ctrain's GPT has no such "
                         "variant", off[i]);
            return ct_error_hint(err, "load a plain GPT-2 checkpoint");
        }
    if (cJSON_IsFalse(tie)) {
        ct_error_set(err, CT_EFORMAT, "init-from-arch", "config.json: tie_word_embeddings is false; ctrain's GPT "
                     "ties the LM head to wte");
        return ct_error_hint(err, "load a GPT-2 checkpoint with a tied LM head");
    }
    return 0;
}

/* The user's key (when given) must agree with the file's value. */
static int agree(const ct_config *given, const char *key, int file_value, const char *source, ct_error *err)
{
    long v;

    if (!ct_config_given(given, key))
        return 0;
    v = ct_config_int(given, key);
    if (v == file_value)
        return 0;
    ct_error_set(err, CT_EINVAL, "init-from-config", "--model-config %s=%ld, but the --init-from checkpoint has "
                 "%s=%d (%s)", key, v, key, file_value, source);
    return ct_error_hint(err, "leave %s out of --model-config: --init-from sets it", key);
}

/* The largest embedding dimension taken from a file (an int, with room to multiply). */
#define SHAPE_MAX (1 << 30)

/* n_layer, n_embd, vocab and the number of positions from the tensors. */
static int from_tensors(const ct_model_file_tensor *file, int n, ct_gpt_config *c, int *positions, ct_error *err)
{
    const ct_model_file_tensor *wte = find(file, n, "wte.weight"), *wpe = find(file, n, "wpe.weight");

    if (!wte || !wpe || wte->ndim != 2 || wpe->ndim != 2 || wte->shape[1] != wpe->shape[1]) {
        ct_error_set(err, CT_EFORMAT, "init-from-arch", "the --init-from checkpoint has no GPT-2 embeddings "
                     "(transformer.wte.weight and transformer.wpe.weight, [vocab, n_embd] and [n_positions, n_embd])");
        return ct_error_hint(err, "give a GPT-2 model.safetensors (GPT2LMHeadModel or GPT2Model)");
    }
    /* Checked before the (int) casts: a dimension past 2^30 would wrap to a small, valid-looking
     * size (2^32 + 768 to 768) and the tensors then be read with the wrong shape. */
    for (int d = 0; d < 2; d++)
        if (wte->shape[d] < 1 || wte->shape[d] > SHAPE_MAX || wpe->shape[d] < 1 || wpe->shape[d] > SHAPE_MAX) {
            ct_error_set(err, CT_EFORMAT, "init-from-arch", "the --init-from checkpoint's embeddings are [%lld, %lld] "
                         "(wte) and [%lld, %lld] (wpe): a dimension is outside 1 to %d", (long long)wte->shape[0],
                         (long long)wte->shape[1], (long long)wpe->shape[0], (long long)wpe->shape[1], SHAPE_MAX);
            return ct_error_hint(err, "give a GPT-2 model.safetensors (GPT2LMHeadModel or GPT2Model)");
        }
    c->n_layer = count_layers(file, n);
    c->vocab = (int)wte->shape[0];
    c->n_embd = (int)wte->shape[1];
    *positions = (int)wpe->shape[0];
    if (c->n_layer < 1) {
        ct_error_set(err, CT_EFORMAT, "init-from-arch", "the --init-from checkpoint has no blocks (h.0.ln_1.weight)");
        return ct_error_hint(err, "give a GPT-2 model.safetensors (GPT2LMHeadModel or GPT2Model)");
    }
    return 0;
}

/* n_head (and a check of the rest) from config.json. */
static int from_json(const char *text, const ct_gpt_config *t, int positions, int *n_head, ct_error *err)
{
    static const char *const keys[] = { "n_layer", "n_embd", "vocab_size", "n_positions" };
    cJSON *root = cJSON_Parse(text);
    int want[4] = { t->n_layer, t->n_embd, t->vocab, positions }, rc = 0;
    long v;

    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        ct_error_set(err, CT_EFORMAT, "init-from-config-json", "the config.json beside the --init-from checkpoint is "
                     "not a JSON object");
        return ct_error_hint(err, "give Hugging Face's config.json for the checkpoint, or remove it and set "
                                  "--model-config n_head=N");
    }
    if ((rc = check_arch(root, err)))
        goto out;
    for (int i = 0; i < 4; i++)
        if ((v = json_int(root, keys[i])) == -2) {
            rc = ct_error_set(err, CT_EFORMAT, "init-from-config-json", "config.json: %s is not a positive integer",
                              keys[i]);
            ct_error_hint(err, "give Hugging Face's config.json for the checkpoint");
            goto out;
        } else if (v != -1 && v != want[i]) {
            rc = ct_error_set(err, CT_EFORMAT, "init-from-config-json", "config.json: %s is %ld, the tensors say %d",
                              keys[i], v, want[i]);
            ct_error_hint(err, "the config.json beside the checkpoint belongs to another model");
            goto out;
        }
    if ((v = json_int(root, "n_head")) < 1) {
        rc = ct_error_set(err, CT_EFORMAT, "init-from-config-json", "config.json has no n_head (a positive integer)");
        ct_error_hint(err, "give Hugging Face's config.json for the checkpoint");
        goto out;
    }
    *n_head = (int)v;
out:
    cJSON_Delete(root);
    return rc;
}

/* c into cfg in place of the user's keys. Every key of gpt's schema is part of the shape and the
 * user's were checked against the file above (or kept: n_head without a config.json, a shorter
 * seq_len), so cfg is emptied and the five set in the schema's order: the plan, every rank and the
 * checkpoints record the same text whatever order the user wrote. */
static int shape_into(const ct_gpt_config *c, ct_config *cfg, ct_error *err)
{
    static const char *const keys[] = { "n_layer", "n_head", "n_embd", "seq_len", "vocab" };
    const int values[] = { c->n_layer, c->n_head, c->n_embd, c->seq_len, c->vocab };
    char text[16];
    int rc;

    cfg->n = 0;
    for (int i = 0; i < 5; i++) {
        snprintf(text, sizeof(text), "%d", values[i]);
        if ((rc = ct_config_set(cfg, "--model-config", "model gpt", keys[i], text, err)))
            return rc;
    }
    return 0;
}

int ct_gpt_hf_config(const ct_model_file_tensor *file, int n, const char *config_json, ct_config *cfg,
                     ct_error *err)
{
    const ct_config *given = cfg;
    ct_gpt_config c;
    int positions = 0, rc;

    ct_gpt_config_default(&c);
    if ((rc = from_tensors(file, n, &c, &positions, err)))
        return rc;
    if (config_json) {
        if ((rc = from_json(config_json, &c, positions, &c.n_head, err)))
            return rc;
        if ((rc = agree(given, "n_head", c.n_head, "config.json", err)))
            return rc;
    } else if (ct_config_given(given, "n_head")) {
        c.n_head = (int)ct_config_int(given, "n_head");
    } else {
        ct_error_set(err, CT_EINVAL, "init-from-config", "--init-from: no config.json beside the checkpoint, and "
                     "the tensors do not tell the number of heads");
        return ct_error_hint(err, "put the model's config.json beside it, or set --model-config n_head=N (GPT-2: 12)");
    }
    if ((rc = agree(given, "n_layer", c.n_layer, "tensors", err)) ||
        (rc = agree(given, "n_embd", c.n_embd, "tensors", err)) || (rc = agree(given, "vocab", c.vocab, "tensors", err)))
        return rc;
    /* A shorter context takes the first rows of the position embeddings (nanoGPT's crop_block_size). */
    c.seq_len = positions;
    if (ct_config_given(given, "seq_len")) {
        c.seq_len = (int)ct_config_int(given, "seq_len");
        if (c.seq_len > positions) {
            ct_error_set(err, CT_EINVAL, "init-from-config", "--model-config seq_len=%d is longer than the --init-from "
                         "checkpoint's %d positions", c.seq_len, positions);
            return ct_error_hint(err, "use seq_len=%d or less", positions);
        }
    }
    if ((rc = ct_gpt_config_check(&c, err)))
        return rc;
    return shape_into(&c, cfg, err);
}
