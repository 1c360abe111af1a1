/* SPDX-License-Identifier: BSD-3-Clause */
/* The "gpt" model: the GPT-2 of engine/models/gpt behind the model seam. Its batch is x i32[T]
 * tokens and y i32[T] the next tokens (the "tokens" data module); the loss is summed over the
 * batch's B*T tokens; the extra metric is bits per byte (only with vocab 256: a token is a byte). No
 * accuracy: the best checkpoint is the lowest val_loss. Its cuda implementation (gpt_cuda_model.c) is
 * compiled and registered, but the connector refuses gpt on cuda until it has passed its GPU checks. */
#include <stdio.h>
#include <stdlib.h>

#include "ctrain/model.h"
#include "engine/models/gpt/gpt.h"
#include "engine/models/gpt/gpt_hf.h"
#include "engine/models/models.h"

static ct_gpt *gpt_of(const ct_model *m) { return m->impl; }

static void gpt_destroy(ct_model *m)
{
    ct_gpt_free(gpt_of(m));
    free(m);
}

static void gpt_init(ct_model *m, ct_rng *r) { ct_gpt_init(gpt_of(m), r); }

static int gpt_set_gemm_dtype(ct_model *m, enum ct_dtype dtype, ct_error *err)
{
    return ct_gpt_set_gemm_dtype(gpt_of(m), dtype, err);
}

/* 64-true: the GPT's arrays in fp64; the model's views follow them. */
static int gpt_set_param_dtype(ct_model *m, enum ct_dtype dtype, ct_error *err)
{
    ct_gpt *g = gpt_of(m);
    int rc = ct_gpt_set_param_dtype(g, dtype, err);

    ct_model_set_views(m, ct_gpt_param_dtype(g), ct_gpt_params(g), ct_gpt_grads(g), ct_gpt_tensor(g, 0));
    return rc;
}

static int gpt_set_activation_checkpointing(ct_model *m, int on, ct_error *err)
{
    return ct_gpt_set_activation_checkpointing(gpt_of(m), on, err);
}

static size_t gpt_activation_bytes(const ct_model *m) { return ct_gpt_activation_bytes(gpt_of(m)); }

static int gpt_forward(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                       ct_error *err)
{
    /* A need failure leaves NAN here; ct_model_forward returns the callback's code. */
    out->loss = ct_gpt_forward(gpt_of(m), b->x.data, b->y.data, b->count, need, ctx);
    out->count = (double)b->count * ct_gpt_get_config(gpt_of(m))->seq_len;
    out->correct = 0;
    return 0;
}

static int gpt_backward(ct_model *m, double grad_scale, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx,
                        ct_error *err)
{
    return ct_gpt_backward(gpt_of(m), grad_scale, need, ready, ctx);
}

static int gpt_next_token_logits(ct_model *m, const int32_t *tokens, int len, float *logits, ct_error *err)
{
    if (ct_gpt_next_token_logits(gpt_of(m), tokens, len, logits))
        return ct_error_set(err, CT_EINTERNAL, "model-logits-len", "gpt: %d tokens for a context of %d", len,
                            m->info.context);
    return 0;
}

static int gpt_hf_tensor(const ct_model *m, int i, ct_model_hf_tensor *out)
{
    return ct_gpt_hf_tensor(m->tensors[i].name, out);
}

static int gpt_hf_extra(const ct_model *m, const char *hf_name) { return ct_gpt_hf_extra(hf_name); }

static int gpt_hf_config_json(const ct_model *m, char *buf, size_t size)
{
    return ct_gpt_hf_config_json(ct_gpt_get_config(gpt_of(m)), buf, size);
}

/* Bits per byte: the mean loss in nats per token over ln 2 (a byte-level token is one byte). */
static void gpt_metrics(const ct_model *m, const ct_model_sums *sums, double *values)
{
    values[0] = sums->count > 0 ? ct_gpt_bits_per_byte(sums->loss / sums->count) : 0;
}

static const struct ct_model_ops gpt_ops = {
    .destroy = gpt_destroy,
    .init = gpt_init,
    .set_param_dtype = gpt_set_param_dtype,
    .set_gemm_dtype = gpt_set_gemm_dtype,
    .forward = gpt_forward,
    .backward = gpt_backward,
    .next_token_logits = gpt_next_token_logits,
    .hf_tensor = gpt_hf_tensor,
    .hf_extra = gpt_hf_extra,
    .hf_config_json = gpt_hf_config_json,
    .set_activation_checkpointing = gpt_set_activation_checkpointing,
    .activation_bytes = gpt_activation_bytes,
};

ct_gpt *ct_gpt_model_gpt(const ct_model *m)
{
    return m && m->ops == &gpt_ops ? m->impl : NULL;
}

/* The configuration from the typed values the connector parsed (given or the schema's default,
 * each in its schema's range), and the checks across keys. */
static int gpt_config_keys(const ct_config *cfg, ct_gpt_config *c, ct_error *err)
{
    c->n_layer = (int)ct_config_int(cfg, "n_layer");
    c->n_head = (int)ct_config_int(cfg, "n_head");
    c->n_embd = (int)ct_config_int(cfg, "n_embd");
    c->seq_len = (int)ct_config_int(cfg, "seq_len");
    c->vocab = (int)ct_config_int(cfg, "vocab");
    return ct_gpt_config_check(c, err);
}

static int gpt_check(const ct_config *cfg, ct_error *err)
{
    ct_gpt_config c;

    return gpt_config_keys(cfg, &c, err);
}

static int gpt_config(const ct_config *cfg, const ct_data_info *data, ct_gpt_config *c, ct_error *err)
{
    int rc;

    if ((rc = gpt_config_keys(cfg, c, err)))
        return rc;
    if (data->x.dtype != CT_DTYPE_I32 || data->y.dtype != CT_DTYPE_I32) {
        ct_error_set(err, CT_EINVAL, "data-model-mismatch", "model gpt trains on token windows, not on this data");
        return ct_error_hint(err, "use --datamodule tokens --data DIR (DIR/train.bin, DIR/val.bin from ctrain tokenize)");
    }
    if (data->classes > c->vocab) {
        ct_error_set(err, CT_EINVAL, "model-config-value", "--model-config vocab=%d, but the data holds token %lld "
                     "(%s)", c->vocab, (long long)data->classes - 1, data->description);
        return ct_error_hint(err, "set vocab=%lld or more (byte tokens: 256)", (long long)data->classes);
    }
    if (data->max_len > 0 && c->seq_len > data->max_len) {
        ct_error_set(err, CT_EINVAL, "model-config-value",
                     "--model-config seq_len=%d is beyond the data: its smallest split gives windows of %lld tokens",
                     c->seq_len, (long long)data->max_len);
        return ct_error_hint(err, "use seq_len=%lld or less, or tokenize more text", (long long)data->max_len);
    }
    return 0;
}

static int gpt_create(const ct_config *cfg, const ct_data_info *data, int max_batch, ct_model **out, ct_error *err)
{
    static const char *const metric_names[] = { "bpb" };
    ct_gpt_config c;
    ct_model *m;
    ct_gpt *g = NULL;
    int rc;

    *out = NULL;
    if ((rc = gpt_config(cfg, data, &c, err)))
        return rc;
    if (!(m = calloc(1, sizeof(*m))))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory");
    if ((rc = ct_gpt_create(&c, max_batch, &g, err))) {
        free(m);
        return rc;
    }
    m->ops = &gpt_ops;
    m->impl = g;
    ct_gpt_config_describe(&c, m->describe, sizeof(m->describe));
    m->info.has_accuracy = 0;
    m->info.announces_params = 1;
    /* Bits per byte only where a token is a byte (GPT-2's BPE tokens are several). */
    m->info.n_metrics = c.vocab == 256 ? 1 : 0;
    m->info.metric_names[0] = metric_names[0];
    m->info.metrics = c.vocab == 256 ? gpt_metrics : NULL;
    m->info.vocab = c.vocab;
    m->info.context = c.seq_len;
    m->x.dtype = m->y.dtype = CT_DTYPE_I32;
    m->x.ndim = m->y.ndim = 1;
    m->x.shape[0] = m->y.shape[0] = c.seq_len;
    m->max_batch = max_batch;
    m->num_params = ct_gpt_num_params(g);
    m->n_tensors = ct_gpt_num_tensors(g);
    ct_model_set_views(m, ct_gpt_param_dtype(g), ct_gpt_params(g), ct_gpt_grads(g), ct_gpt_tensor(g, 0));
    *out = m;
    return 0;
}

/* Evaluation batches of 8 sequences: the activations of B*T tokens are the memory that matters. */
const struct ct_model_class ct_model_gpt = {
    .create = gpt_create, .check = gpt_check, .eval_batch = 8, .hf_config = ct_gpt_hf_config,
};
