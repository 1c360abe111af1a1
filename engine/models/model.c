/* SPDX-License-Identifier: BSD-3-Clause */
/* The model seam: create a registered model by name, dispatch to its ops, and the table of device
 * implementations (include/ctrain/model.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/model.h"
#include "engine/models/models.h"

#define MAX_IMPLS 16

static struct impl {
    char model[32];
    char accelerator[32];
    ct_model_impl_fn fn;
} impls[MAX_IMPLS];
static int n_impls;

int ct_model_register(const ct_registry_entry *entry, const struct ct_model_class *cls, ct_error *err)
{
    int rc;

    if (!entry || !entry->name || !cls || !cls->create)
        return ct_error_set(err, CT_EINVAL, "model-register", "ct_model_register: an entry with a name and a "
                            "class with create() are needed");
    if ((rc = ct_registry_add(CT_REG_MODEL, entry))) {
        ct_error_set(err, rc, "model-register", "ct_model_register: model '%s' %s", entry->name,
                     rc == CT_ENOMEM ? "does not fit: the registry is full" : "is already registered");
        return ct_error_hint(err, "register each model once, under a name of its own");
    }
    return ct_registry_set_ops(CT_REG_MODEL, entry->name, cls);
}

int ct_model_register_impl(const char *model, const char *accelerator, ct_model_impl_fn fn)
{
    if (n_impls >= MAX_IMPLS || !model || !accelerator || !fn)
        return CT_EINVAL;
    snprintf(impls[n_impls].model, sizeof(impls[0].model), "%s", model);
    snprintf(impls[n_impls].accelerator, sizeof(impls[0].accelerator), "%s", accelerator);
    impls[n_impls++].fn = fn;
    return 0;
}

ct_model_impl_fn ct_model_find_impl(const char *model, const char *accelerator)
{
    for (int i = 0; i < n_impls; i++)
        if (!strcmp(impls[i].model, model) && !strcmp(impls[i].accelerator, accelerator))
            return impls[i].fn;
    return NULL;
}

/* The registry's entry of model name, or NULL with err set (model-unknown). */
static const ct_registry_entry *model_find(const char *name, ct_error *err)
{
    const ct_registry_entry *e = ct_registry_find(CT_REG_MODEL, name);

    if (!e) {
        ct_error_set(err, CT_EINVAL, "model-unknown", "--model '%s' is not a known model", name);
        ct_error_hint(err, "ctrain plan --list shows the models");
    }
    return e;
}

int ct_model_create_config(const ct_registry_entry *model, const ct_config *cfg, const ct_data_info *data,
                           int max_batch, ct_model **out, ct_error *err)
{
    const struct ct_model_class *cls = model->ops;
    int rc;

    *out = NULL;
    if (!cls || !cls->create) {
        ct_error_set(err, CT_ENOTAVAIL, "implementation-missing", "model %s is not linked into this program",
                     model->name);
        return ct_error_hint(err, "call ct_engine_init() (and ct_model_register for your own model) first");
    }
    if ((rc = cls->create(cfg, data, max_batch, out, err)))
        return rc;
    snprintf((*out)->name, sizeof((*out)->name), "%s", model->name);
    return 0;
}

int ct_model_create(const char *name, const char *config, const ct_data_info *data, int max_batch, ct_model **out,
                    ct_error *err)
{
    const ct_registry_entry *e = model_find(name, err);
    char owner[64];
    ct_config cfg;
    int rc;

    *out = NULL;
    if (!e)
        return CT_EINVAL;
    snprintf(owner, sizeof(owner), "model %s", e->name);
    if ((rc = ct_config_parse(e->config, "--model-config", owner, config, &cfg, err)))
        return rc;
    return ct_model_create_config(e, &cfg, data, max_batch, out, err);
}

void ct_model_set_views(ct_model *m, enum ct_dtype dtype, void *params, void *grads, const ct_tensor *tensors)
{
    m->param_dtype = dtype;
    m->params = params;
    m->grads = grads;
    m->tensors = tensors;
}

int ct_model_eval_batch(const ct_registry_entry *model, int dflt)
{
    const struct ct_model_class *cls = model ? model->ops : NULL;

    return cls && cls->eval_batch > 0 && cls->eval_batch < dflt ? cls->eval_batch : dflt;
}

const char *ct_model_shape_hint(const ct_registry_entry *model)
{
    const struct ct_model_class *cls = model ? model->ops : NULL;

    return cls ? cls->shape_hint : NULL;
}

void ct_model_free(ct_model *m)
{
    if (m && m->ops && m->ops->destroy)
        m->ops->destroy(m);
}

void ct_model_init(ct_model *m, ct_rng *r)
{
    if (m->ops->init)
        m->ops->init(m, r);
}

int ct_model_set_gemm_dtype(ct_model *m, enum ct_dtype dtype, ct_error *err)
{
    if (m->ops->set_gemm_dtype)
        return m->ops->set_gemm_dtype(m, dtype, err);
    if (dtype == CT_DTYPE_F32)
        return 0;
    ct_error_set(err, CT_ENOTAVAIL, "model-precision-unsupported", "model %s computes in 32-true only", m->name);
    return ct_error_hint(err, "use --precision 32-true");
}

int ct_model_set_param_dtype(ct_model *m, enum ct_dtype dtype, ct_error *err)
{
    if (dtype == m->param_dtype)
        return 0;
    if (m->ops->set_param_dtype)
        return m->ops->set_param_dtype(m, dtype, err);
    ct_error_set(err, CT_ENOTAVAIL, "model-precision-unsupported", "model %s stores its parameters in fp32 only",
                 m->name);
    return ct_error_hint(err, "use --precision 32-true or bf16-mixed, or give the model a set_param_dtype "
                              "(include/ctrain/model.h)");
}

int ct_model_set_activation_checkpointing(ct_model *m, int on, ct_error *err)
{
    if (m->ops->set_activation_checkpointing)
        return m->ops->set_activation_checkpointing(m, on, err);
    if (!on)
        return 0;
    ct_error_set(err, CT_ENOTAVAIL, "model-activation-checkpointing-unsupported",
                 "--activation-checkpointing: model %s cannot recompute its activations", m->name);
    return ct_error_hint(err, "drop --activation-checkpointing, or give the model a set_activation_checkpointing "
                              "(include/ctrain/model.h)");
}

size_t ct_model_activation_bytes(const ct_model *m)
{
    return m->ops->activation_bytes ? m->ops->activation_bytes(m) : 0;
}

/* What forward announced: the callers' need, its first failure, and how far the ranges reached. */
struct need_track {
    ct_param_need_fn need;
    void *ctx;
    size_t hi;
    int rc;
};

static int need_tracked(void *ctx, size_t offset, size_t count)
{
    struct need_track *t = ctx;

    if (offset + count > t->hi)
        t->hi = offset + count;
    return t->rc = t->need(t->ctx, offset, count);
}

int ct_model_forward(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                     ct_error *err)
{
    struct need_track t = { need, ctx, 0, 0 };
    int rc;

    if (!need)
        return m->ops->forward(m, b, NULL, NULL, out, err);
    if (!m->info.announces_params) {
        /* A model that does not announce reads any parameter at any time: all of them first. */
        if ((rc = need(ctx, 0, m->num_params)))
            return rc;
        return m->ops->forward(m, b, NULL, NULL, out, err);
    }
    rc = m->ops->forward(m, b, need_tracked, &t, out, err);
    if (t.rc)
        return t.rc;
    if (rc)
        return rc;
    /* The last ranges are the ones a model forgets (a final layer norm): they would be read stale. */
    if (t.hi < m->num_params) {
        ct_error_set(err, CT_EINTERNAL, "model-params-unannounced", "model %s: forward announced parameters [0, %zu) "
                     "of %zu", m->name, t.hi, m->num_params);
        return ct_error_hint(err, "a model with info.announces_params calls need() for every tensor before it "
                                  "reads it; this is a bug in the model");
    }
    return 0;
}

int ct_model_backward(ct_model *m, double grad_scale, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx,
                      ct_error *err)
{
    int rc;

    if (need && !m->info.announces_params) {
        /* A model that does not announce reads any parameter at any time: all of them first. */
        if ((rc = need(ctx, 0, m->num_params)))
            return rc;
        need = NULL;
    }
    return m->ops->backward(m, grad_scale, need, ready, ctx, err);
}

int ct_model_optim_step(ct_model *m, ct_optim *o, int *skipped, ct_error *err)
{
    *skipped = 0;
    if (m->ops->optim_step)
        return m->ops->optim_step(m, o, skipped, err);
    ct_optim_step(o, m->params, m->grads);
    return 0;
}

int ct_model_batch_buffers(ct_model *m, ct_batch *b, ct_error *err)
{
    size_t n = (size_t)(m->max_batch > 0 ? m->max_batch : 1);

    memset(b, 0, sizeof(*b));
    b->x.spec = m->x;
    b->y.spec = m->y;
    if (m->ops->batch_buffers)
        return m->ops->batch_buffers(m, b, err);
    b->x.data = malloc(n * ct_tensor_spec_numel(&m->x) * ct_dtype_size(m->x.dtype));
    b->y.data = malloc(n * ct_tensor_spec_numel(&m->y) * ct_dtype_size(m->y.dtype));
    if (!b->x.data || !b->y.data) {
        ct_model_free_batch(m, b);
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for a batch of %zu samples", n);
    }
    return 0;
}

void ct_model_free_batch(ct_model *m, ct_batch *b)
{
    if (!m || m->ops->batch_buffers)
        return; /* the model's own buffers: freed with it */
    free(b->x.data);
    free(b->y.data);
    b->x.data = b->y.data = NULL;
}

int ct_model_to_host(ct_model *m, ct_optim *o, ct_error *err)
{
    return m->ops->to_host ? m->ops->to_host(m, o, err) : 0;
}

int ct_model_from_host(ct_model *m, const ct_optim *o, ct_error *err)
{
    return m->ops->from_host ? m->ops->from_host(m, o, err) : 0;
}

ct_model *ct_model_host(ct_model *m)
{
    return m->host ? m->host : m;
}

int ct_model_defers_loss(const ct_model *m)
{
    return m->ops->defer_loss && m->ops->loss_read;
}

void ct_model_defer_loss(ct_model *m, int on)
{
    if (ct_model_defers_loss(m))
        m->ops->defer_loss(m, on);
}

int ct_model_loss_read(ct_model *m, int back, double *loss_sum, ct_error *err)
{
    if (!ct_model_defers_loss(m))
        return ct_error_set(err, CT_EINTERNAL, "", "model %s keeps no loss on a device", m->name);
    return m->ops->loss_read(m, back, loss_sum, err);
}

/* --- using a trained model ---------------------------------------------------------------------- */

int ct_model_next_token_logits(ct_model *m, const int32_t *tokens, int len, float *logits, ct_error *err)
{
    if (!m->ops->next_token_logits || m->info.vocab < 1 || m->info.context < 1) {
        ct_error_set(err, CT_EINVAL, "model-no-logits", "model %s does not offer next-token logits: it cannot generate",
                     m->name);
        return ct_error_hint(err, "generate runs language models such as gpt (a model offers it through "
                                  "next_token_logits in <ctrain/model.h>)");
    }
    if (len < 1 || len > m->info.context)
        return ct_error_set(err, CT_EINVAL, "model-logits-len", "model %s reads 1 to %d tokens, not %d", m->name,
                            m->info.context, len);
    for (int i = 0; i < len; i++)
        if (tokens[i] < 0 || tokens[i] >= m->info.vocab)
            return ct_error_set(err, CT_EINVAL, "model-logits-token", "token %d at position %d is outside model %s's "
                                "vocabulary (%d)", tokens[i], i, m->name, m->info.vocab);
    return m->ops->next_token_logits(m, tokens, len, logits, err);
}

int ct_model_has_hf(const ct_model *m)
{
    return m->ops->hf_tensor && m->ops->hf_config_json;
}

int ct_model_hf_map(const ct_model *m, int i, ct_model_hf_tensor *out)
{
    memset(out, 0, sizeof(*out));
    return m->ops->hf_tensor && i >= 0 && i < m->n_tensors ? m->ops->hf_tensor(m, i, out) : CT_EINVAL;
}

int ct_model_hf_extra(const ct_model *m, const char *hf_name)
{
    return m->ops->hf_extra ? m->ops->hf_extra(m, hf_name) : -1;
}

int ct_model_hf_config_json(const ct_model *m, char *buf, size_t size)
{
    return m->ops->hf_config_json ? m->ops->hf_config_json(m, buf, size) : CT_EINVAL;
}

static int check_gemm_dtype(const char *model, const char *id, enum ct_dtype param, enum ct_dtype gemm, ct_error *err)
{
    char code[48];

    snprintf(code, sizeof(code), "%s-gemm-dtype", id);
    if ((param == CT_DTYPE_F64 || param == CT_DTYPE_BF16) && gemm != param)
        return ct_error_set(err, CT_ENOTAVAIL, code, "%s %s computes its GEMMs in %s only",
                            param == CT_DTYPE_F64 ? "an fp64" : "a bf16", model,
                            param == CT_DTYPE_F64 ? "fp64" : "bf16");
    if (param == CT_DTYPE_F32 && gemm != CT_DTYPE_F32 && gemm != CT_DTYPE_BF16)
        return ct_error_set(err, CT_ENOTAVAIL, code, "the cpu %s computes GEMMs in fp32 or bf16 only", model);
    return 0;
}

int ct_model_gemm_dtype_setup(const char *model, const char *id, enum ct_dtype param, enum ct_dtype dtype,
                               const struct ct_model_gemm_ops *ops, void *m, enum ct_dtype *gemm, ct_error *err)
{
    int rc = check_gemm_dtype(model, id, param, dtype, err);

    if (rc)
        return rc;
    if (param == CT_DTYPE_F64) {
        *gemm = dtype;
        return 0;
    }
    if (param == CT_DTYPE_BF16 && ops->alloc_bf16_true && (rc = ops->alloc_bf16_true(m, err)))
        return rc;
    if (param != CT_DTYPE_BF16 && dtype != CT_DTYPE_F32 && (rc = ops->alloc_mixed(m, err)))
        return rc;
    *gemm = dtype;
    ops->prepare(m);
    return 0;
}
