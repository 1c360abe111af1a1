/* SPDX-License-Identifier: BSD-3-Clause */
/* The MLP: Linear(+ReLU) layers over one contiguous parameter array; see engine/models/mlp/mlp.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/nn.h"
#include "engine/models/mlp/mlp.h"
#include "engine/models/models.h"
#include "engine/nn/bf16_inline.h"
#include "engine/nn/gemm.h"

struct ct_mlp {
    int n_layers;
    int dims[CT_MLP_MAX_LAYERS + 1];
    int max_batch;
    size_t n_params;
    /* fp32, fp64 (64-true) or bf16 (bf16-true): params, grads, acts and dacts are of this type. */
    enum ct_dtype param_dtype;
    void *params;
    void *grads;
    ct_tensor tensors[2 * CT_MLP_MAX_LAYERS];
    /* acts[l]: output of layer l, [max_batch, dims[l+1]] (ReLU applied for hidden layers; the last
     * holds logits, then softmax probabilities, then dlogits). dacts[l]: gradient of acts[l]. */
    void *acts[CT_MLP_MAX_LAYERS];
    void *dacts[CT_MLP_MAX_LAYERS];
    double *xd; /* 64-true: the batch's fp32 input widened (PyTorch's x.double()) */
    uint16_t *xb; /* bf16-true: the batch's fp32 input rounded (PyTorch's x.to(torch.bfloat16)) */
    const float *input;
    const uint8_t *labels;
    int batch;
    /* bf16-mixed: the GEMMs read bf16 copies of their inputs (xq[l]: layer l's input, wq[l]: its
     * weight, packed in forward (after the optimizer step) and kept for backward; dyq: the output
     * gradient being used). */
    enum ct_dtype gemm_dtype;
    uint16_t *xq[CT_MLP_MAX_LAYERS];
    uint16_t *wq[CT_MLP_MAX_LAYERS];
    uint16_t *dyq;
};

static float *weights(const ct_mlp *m, int l) { return m->tensors[2 * l].data; }
static float *bias(const ct_mlp *m, int l) { return m->tensors[2 * l + 1].data; }
static void *grad_of(const ct_mlp *m, int t)
{
    return (char *)m->grads + m->tensors[t].offset * ct_dtype_size(m->param_dtype);
}

static void describe_tensor(ct_mlp *m, int t, int layer, int is_bias, size_t offset)
{
    ct_tensor *ts = &m->tensors[t];
    int in = m->dims[layer], out = m->dims[layer + 1];

    snprintf(ts->name, sizeof(ts->name), "layers.%d.%s", layer, is_bias ? "bias" : "weight");
    ts->ndim = is_bias ? 1 : 2;
    ts->shape[0] = out;
    ts->shape[1] = is_bias ? 0 : in;
    ts->numel = is_bias ? (size_t)out : (size_t)out * in;
    ts->offset = offset;
    ts->data = (char *)m->params + offset * ct_dtype_size(m->param_dtype);
}

/* params, grads, activations and their gradients in param_dtype; the tensors view params. */
static int alloc_arrays(ct_mlp *m, ct_error *err)
{
    size_t es = ct_dtype_size(m->param_dtype), off = 0;

    if (!(m->params = calloc(m->n_params, es)) || !(m->grads = calloc(m->n_params, es)))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for %zu parameters", m->n_params);
    for (int l = 0; l < m->n_layers; l++) {
        size_t n = (size_t)m->max_batch * m->dims[l + 1];

        if (!(m->acts[l] = malloc(n * es)) || !(m->dacts[l] = malloc(n * es)))
            return ct_error_set(err, CT_ENOMEM, "", "out of memory for activations");
    }
    if (m->param_dtype == CT_DTYPE_F64 && !(m->xd = malloc(sizeof(double) * (size_t)m->max_batch * m->dims[0])))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for the fp64 input");
    if (m->param_dtype == CT_DTYPE_BF16 && !(m->xb = malloc(sizeof(uint16_t) * (size_t)m->max_batch * m->dims[0])))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for the bf16 input");
    for (int l = 0; l < m->n_layers; l++) {
        describe_tensor(m, 2 * l, l, 0, off);
        off += m->tensors[2 * l].numel;
        describe_tensor(m, 2 * l + 1, l, 1, off);
        off += m->tensors[2 * l + 1].numel;
    }
    return 0;
}

static void free_arrays(ct_mlp *m)
{
    for (int l = 0; l < m->n_layers; l++) {
        free(m->acts[l]);
        free(m->dacts[l]);
        m->acts[l] = m->dacts[l] = NULL;
    }
    free(m->xd);
    free(m->xb);
    free(m->params);
    free(m->grads);
    m->xd = NULL;
    m->xb = NULL;
    m->params = m->grads = NULL;
}

int ct_mlp_set_param_dtype(ct_mlp *m, enum ct_dtype dtype, ct_error *err)
{
    if (dtype != CT_DTYPE_F32 && dtype != CT_DTYPE_F64 && dtype != CT_DTYPE_BF16)
        return ct_error_set(err, CT_ENOTAVAIL, "model-precision-unsupported",
                            "the cpu MLP stores its parameters in fp32, fp64 or bf16 only");
    if (dtype == m->param_dtype)
        return 0;
    free_arrays(m);
    m->param_dtype = dtype;
    return alloc_arrays(m, err);
}

enum ct_dtype ct_mlp_param_dtype(const ct_mlp *m) { return m->param_dtype; }

int ct_mlp_create(const int *dims, int n_dims, int max_batch, ct_mlp **out, ct_error *err)
{
    ct_mlp *m;

    *out = NULL;
    if (n_dims < 2 || n_dims - 1 > CT_MLP_MAX_LAYERS)
        return ct_error_set(err, CT_EINVAL, "mlp-layers", "an MLP needs 1 to %d layers, got %d",
                            CT_MLP_MAX_LAYERS, n_dims - 1);
    for (int i = 0; i < n_dims; i++)
        if (dims[i] <= 0 || dims[i] > (1 << 20))
            return ct_error_set(err, CT_EINVAL, "mlp-width", "layer width %d is out of range [1, %d]",
                                dims[i], 1 << 20);
    if (max_batch <= 0)
        return ct_error_set(err, CT_EINVAL, "mlp-batch", "batch size %d must be positive", max_batch);
    m = calloc(1, sizeof(*m));
    if (!m)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory creating the model");
    m->n_layers = n_dims - 1;
    m->max_batch = max_batch;
    memcpy(m->dims, dims, sizeof(int) * (size_t)n_dims);
    for (int l = 0; l < m->n_layers; l++)
        m->n_params += (size_t)dims[l] * dims[l + 1] + (size_t)dims[l + 1];
    if (alloc_arrays(m, err)) {
        ct_mlp_free(m);
        return err->code;
    }
    *out = m;
    return 0;
}

void ct_mlp_free(ct_mlp *m)
{
    if (!m)
        return;
    free_arrays(m);
    for (int l = 0; l < m->n_layers; l++) {
        free(m->xq[l]);
        free(m->wq[l]);
    }
    free(m->dyq);
    free(m);
}

/* The oneDNN primitives of a full batch's step, made at set-up: each layer's forward and two
 * backward products (a last, smaller batch, and the first layer's row blocks under ddp, make
 * theirs on first use). */
/* bf16-true: bf16 products of the bf16 arrays into bf16 (ct_gemm_bf16); else ct_gemm's in
 * gemm_dtype. */
static void prepare_gemms(void *model)
{
    const ct_mlp *m = model;

    for (int l = 0; l < m->n_layers; l++) {
        int B = m->max_batch, in = m->dims[l], out = m->dims[l + 1];

        if (m->param_dtype == CT_DTYPE_BF16) {
            ct_gemm_prepare_bf16(0, 1, B, out, in, in, in, 1, out);
            ct_gemm_prepare_bf16(1, 0, out, in, B, out, in, 0, in);
            if (l)
                ct_gemm_prepare_bf16(0, 0, B, in, out, out, in, 0, in);
            continue;
        }
        ct_gemm_prepare(0, 1, B, out, in, in, in, m->gemm_dtype, 0, out);
        ct_gemm_prepare(1, 0, out, in, B, out, in, m->gemm_dtype, 0, in);
        if (l)
            ct_gemm_prepare(0, 0, B, in, out, out, in, m->gemm_dtype, 0, in);
    }
}

/* bf16-mixed: each layer's input and weight copies, and one for the widest output gradient. */
static int alloc_mixed(void *model, ct_error *err)
{
    ct_mlp *m = model;
    int widest = 0;

    for (int l = 0; l < m->n_layers; l++) {
        if (!m->xq[l])
            m->xq[l] = malloc(sizeof(uint16_t) * (size_t)m->max_batch * m->dims[l]);
        if (!m->wq[l])
            m->wq[l] = malloc(sizeof(uint16_t) * (size_t)m->dims[l] * m->dims[l + 1]);
        if (!m->xq[l] || !m->wq[l])
            return ct_error_set(err, CT_ENOMEM, "", "out of memory for the bf16 copies of layer %d", l);
        if (m->dims[l + 1] > widest)
            widest = m->dims[l + 1];
    }
    if (!m->dyq && !(m->dyq = malloc(sizeof(uint16_t) * (size_t)m->max_batch * widest)))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for the bf16 gradient copy");
    return 0;
}

int ct_mlp_set_gemm_dtype(ct_mlp *m, enum ct_dtype dtype, ct_error *err)
{
    static const struct ct_model_gemm_ops ops = { NULL, alloc_mixed, prepare_gemms };

    return ct_model_gemm_dtype_setup("MLP", "mlp", m->param_dtype, dtype, &ops, m, &m->gemm_dtype, err);
}

void ct_mlp_init(ct_mlp *m, ct_rng *r)
{
    for (int t = 0; t < 2 * m->n_layers; t++) {
        ct_tensor *ts = &m->tensors[t];
        /* kaiming_uniform(a=sqrt(5)) for W and the bias rule both give +-1/sqrt(fan_in). */
        double bound = 1.0 / sqrt((double)m->dims[t / 2]);

        /* The same draws in either type: an fp64 model starts from the fp32 model's values widened
         * (what PyTorch's model.double() of the same initialisation holds). */
        for (size_t i = 0; i < ts->numel; i++) {
            float v = (float)((2.0 * ct_rng_uniform(r) - 1.0) * bound);

            if (m->param_dtype == CT_DTYPE_F64)
                ((double *)ts->data)[i] = v;
            else if (m->param_dtype == CT_DTYPE_BF16)
                ((uint16_t *)ts->data)[i] = ct_bf16_store(v);
            else
                ((float *)ts->data)[i] = v;
        }
    }
}

size_t ct_mlp_num_params(const ct_mlp *m) { return m->n_params; }
void *ct_mlp_params(ct_mlp *m) { return m->params; }
void *ct_mlp_grads(ct_mlp *m) { return m->grads; }
int ct_mlp_num_layers(const ct_mlp *m) { return m->n_layers; }
int ct_mlp_num_tensors(const ct_mlp *m) { return 2 * m->n_layers; }
const ct_tensor *ct_mlp_tensor(const ct_mlp *m, int i) { return &m->tensors[i]; }

void ct_mlp_describe(const ct_mlp *m, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i <= m->n_layers && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%d", i ? "-" : "", m->dims[i]);
}

/* 64-true's forward: the input widened once, every layer in fp64. */
static double forward_f64(ct_mlp *m, const float *x, const uint8_t *labels, int batch, int *correct,
                          ct_param_need_fn need, void *ctx)
{
    const double *in = m->xd;
    int last = m->n_layers - 1;

    for (size_t i = 0; i < (size_t)batch * m->dims[0]; i++)
        m->xd[i] = x[i];
    for (int l = 0; l < m->n_layers; l++) {
        if (need && need(ctx, m->tensors[2 * l].offset, m->tensors[2 * l].numel + m->tensors[2 * l + 1].numel))
            return NAN;
        ct_linear_forward_f64(in, m->tensors[2 * l].data, m->tensors[2 * l + 1].data, m->acts[l], batch, m->dims[l],
                              m->dims[l + 1], l != last);
        in = m->acts[l];
    }
    return ct_softmax_xent_forward_f64(m->acts[last], labels, m->acts[last], batch, m->dims[m->n_layers], correct);
}

/* bf16-true's forward, as PyTorch's model.to(torch.bfloat16) on x.to(torch.bfloat16): each Linear
 * is addmm(bias, x, W^T) (the bias, then the product added in fp32 and rounded once), ReLU in
 * place, the softmax's probabilities rounded to bf16 (the loss summed in fp64 from fp32 values). */
static double forward_bf16(ct_mlp *m, const float *x, const uint8_t *labels, int batch, int *correct,
                           ct_param_need_fn need, void *ctx)
{
    const uint16_t *in = m->xb;
    int last = m->n_layers - 1, classes = m->dims[m->n_layers], right = 0;
    uint16_t *z = m->acts[last];
    double loss = 0.0;

    ct_bf16_pack(x, m->xb, (size_t)batch * m->dims[0]);
    for (int l = 0; l < m->n_layers; l++) {
        const uint16_t *w = m->tensors[2 * l].data, *b = m->tensors[2 * l + 1].data;
        uint16_t *y = m->acts[l];
        int out = m->dims[l + 1];

        if (need && need(ctx, m->tensors[2 * l].offset, m->tensors[2 * l].numel + m->tensors[2 * l + 1].numel))
            return NAN;
        for (int i = 0; i < batch; i++)
            memcpy(y + (size_t)i * out, b, sizeof(uint16_t) * (size_t)out);
        ct_gemm_bf16(0, 1, batch, out, m->dims[l], in, m->dims[l], w, m->dims[l], 1, y, out);
        if (l != last)
            for (size_t i = 0; i < (size_t)batch * out; i++)
                y[i] = ct_bf16_load(y[i]) > 0.0f ? y[i] : 0;
        in = y;
    }
    for (int i = 0; i < batch; i++) {
        uint16_t *p = z + (size_t)i * classes;
        float max = ct_bf16_load(p[0]), sum = 0.0f, zl = ct_bf16_load(p[labels[i]]);
        int arg = 0;

        for (int j = 1; j < classes; j++)
            if (ct_bf16_load(p[j]) > max) {
                max = ct_bf16_load(p[j]);
                arg = j;
            }
        for (int j = 0; j < classes; j++)
            sum += expf(ct_bf16_load(p[j]) - max);
        loss += log((double)sum) - ((double)zl - max);
        for (int j = 0; j < classes; j++)
            p[j] = ct_bf16_store(expf(ct_bf16_load(p[j]) - max) / sum);
        right += arg == labels[i];
    }
    if (correct)
        *correct = right;
    return loss;
}

double ct_mlp_forward(ct_mlp *m, const float *x, const uint8_t *labels, int batch, int *correct,
                      ct_param_need_fn need, void *ctx)
{
    const float *in = x;
    int last = m->n_layers - 1;

    m->input = x;
    m->labels = labels;
    m->batch = batch;
    if (m->param_dtype == CT_DTYPE_F64)
        return forward_f64(m, x, labels, batch, correct, need, ctx);
    if (m->param_dtype == CT_DTYPE_BF16)
        return forward_bf16(m, x, labels, batch, correct, need, ctx);
    m->labels = labels;
    m->batch = batch;
    for (int l = 0; l < m->n_layers; l++) {
        const void *w = weights(m, l), *inq = in;

        /* The layer's weights and bias are adjacent: one range. */
        if (need && need(ctx, m->tensors[2 * l].offset, m->tensors[2 * l].numel + m->tensors[2 * l + 1].numel))
            return NAN;
        if (m->gemm_dtype == CT_DTYPE_BF16) {
            ct_bf16_pack(in, m->xq[l], (size_t)batch * m->dims[l]);
            ct_bf16_pack(w, m->wq[l], (size_t)m->dims[l] * m->dims[l + 1]);
            inq = m->xq[l];
            w = m->wq[l];
        }
        ct_linear_forward_dt(inq, w, m->gemm_dtype, bias(m, l), m->acts[l], batch, m->dims[l], m->dims[l + 1],
                             l != last);
        in = m->acts[l];
    }
    return ct_softmax_xent_forward(m->acts[last], labels, m->acts[last], batch,
                                   m->dims[m->n_layers], correct);
}

/* Row blocks of the first layer's weight gradient (see ct_linear_backward_weight_blocks): with
 * ddp's 0.5 MiB buckets the 784x512 weights' 1.5 MiB then close into buckets during backward and
 * only the last block's bucket waits for its end. */
#define FIRST_LAYER_BLOCKS 8

/* Layer l's weights and bias (adjacent: one range) before backward reads them. */
static int need_layer(const ct_mlp *m, int l, ct_param_need_fn need, void *ctx)
{
    return need ? need(ctx, m->tensors[2 * l].offset, m->tensors[2 * l].numel + m->tensors[2 * l + 1].numel) : 0;
}

/* 64-true's backward: each layer's gradients in fp64, then announced (bias first). */
static int backward_f64(ct_mlp *m, int grad_scale_batch, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx)
{
    int last = m->n_layers - 1, rc;
    double *dy = m->acts[last];

    ct_softmax_xent_backward_f64(dy, m->labels, m->batch, m->dims[m->n_layers], grad_scale_batch);
    for (int l = last; l >= 0; l--) {
        const double *x = l ? m->acts[l - 1] : m->xd;
        double *dx = l ? m->dacts[l - 1] : NULL;
        const ct_tensor *w = &m->tensors[2 * l], *b = &m->tensors[2 * l + 1];

        if ((rc = need_layer(m, l, need, ctx)))
            return rc;
        ct_linear_backward_f64(x, w->data, dy, grad_of(m, 2 * l), grad_of(m, 2 * l + 1), dx, m->batch, m->dims[l],
                               m->dims[l + 1]);
        if (ready && ((rc = ready(ctx, b->offset, b->numel)) || (rc = ready(ctx, w->offset, w->numel))))
            return rc;
        if (dx) {
            ct_relu_backward_f64(m->acts[l - 1], dx, (size_t)m->batch * m->dims[l]);
            dy = dx;
        }
    }
    return 0;
}

/* bf16-true's backward: dlogits, every layer's gradients and the ReLU's in bf16, each GEMM's fp32
 * sum rounded once, the bias gradient summed in fp32; then announced (bias first). */
static int backward_bf16(ct_mlp *m, int grad_scale_batch, ct_param_need_fn need, ct_grad_ready_fn ready,
                         void *ctx)
{
    int last = m->n_layers - 1, classes = m->dims[m->n_layers], rc;
    uint16_t *dy = m->acts[last];
    float inv = 1.0f / (float)grad_scale_batch;

    for (int i = 0; i < m->batch; i++) {
        uint16_t *p = dy + (size_t)i * classes;

        for (int j = 0; j < classes; j++)
            p[j] = ct_bf16_store((ct_bf16_load(p[j]) - (j == m->labels[i] ? 1.0f : 0.0f)) * inv);
    }
    for (int l = last; l >= 0; l--) {
        const uint16_t *x = l ? m->acts[l - 1] : m->xb;
        uint16_t *dx = l ? m->dacts[l - 1] : NULL, *db = grad_of(m, 2 * l + 1);
        const ct_tensor *w = &m->tensors[2 * l], *b = &m->tensors[2 * l + 1];
        int in = m->dims[l], out = m->dims[l + 1];

        if ((rc = need_layer(m, l, need, ctx)))
            return rc;
        for (int j = 0; j < out; j++) {
            float s = 0.0f;

            for (int i = 0; i < m->batch; i++)
                s += ct_bf16_load(dy[(size_t)i * out + j]);
            db[j] = ct_bf16_store(s);
        }
        ct_gemm_bf16(1, 0, out, in, m->batch, dy, out, x, in, 0, grad_of(m, 2 * l), in);
        if (dx)
            ct_gemm_bf16(0, 0, m->batch, in, out, dy, out, w->data, in, 0, dx, in);
        if (ready && ((rc = ready(ctx, b->offset, b->numel)) || (rc = ready(ctx, w->offset, w->numel))))
            return rc;
        if (dx) {
            const uint16_t *y = m->acts[l - 1];

            for (size_t i = 0; i < (size_t)m->batch * in; i++)
                dx[i] = ct_bf16_load(y[i]) > 0.0f ? dx[i] : 0;
            dy = dx;
        }
    }
    return 0;
}

int ct_mlp_backward(ct_mlp *m, int grad_scale_batch, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx)
{
    int last = m->n_layers - 1;
    float *dy = m->acts[last]; /* softmax probabilities become dlogits in place */

    if (m->param_dtype == CT_DTYPE_F64)
        return backward_f64(m, grad_scale_batch, need, ready, ctx);
    if (m->param_dtype == CT_DTYPE_BF16)
        return backward_bf16(m, grad_scale_batch, need, ready, ctx);
    ct_softmax_xent_backward(dy, m->labels, m->batch, m->dims[m->n_layers], grad_scale_batch);
    for (int l = last; l >= 0; l--) {
        const void *x = l ? m->acts[l - 1] : m->input;
        float *dx = l ? m->dacts[l - 1] : NULL; /* the input needs no gradient */
        const ct_tensor *w = &m->tensors[2 * l], *b = &m->tensors[2 * l + 1];
        const void *wd = w->data, *dyg = dy;
        int rc;

        if ((rc = need_layer(m, l, need, ctx)))
            return rc;
        if (m->gemm_dtype == CT_DTYPE_BF16) {
            /* The bf16 input and weight forward used; the output gradient packed like them (the
             * bias gradient sums the fp32 one). */
            x = m->xq[l];
            wd = m->wq[l];
            ct_bf16_pack(dy, m->dyq, (size_t)m->batch * m->dims[l + 1]);
            dyg = m->dyq;
        }
        if (!dx && ready) {
            /* The first layer's weights are most of an MLP's gradient and their backward runs
             * last: in row blocks, each announced as computed, their exchange overlaps the rest
             * of the GEMM instead of all starting after backward (nothing runs after it). */
            if ((rc = ct_linear_backward_weight_blocks_dt(x, dyg, m->gemm_dtype, dy, grad_of(m, 2 * l),
                                                          grad_of(m, 2 * l + 1), m->batch, m->dims[l], m->dims[l + 1],
                                                          FIRST_LAYER_BLOCKS, w->offset, b->offset, ready, ctx)))
                return rc;
            continue;
        }
        ct_linear_backward_dt(x, wd, dyg, m->gemm_dtype, dy, grad_of(m, 2 * l), grad_of(m, 2 * l + 1), dx, m->batch,
                              m->dims[l], m->dims[l + 1]);
        /* Bias is the later tensor in forward order: announce it first. */
        if (ready && ((rc = ready(ctx, b->offset, b->numel)) || (rc = ready(ctx, w->offset, w->numel))))
            return rc;
        if (dx) {
            ct_relu_backward(m->acts[l - 1], dx, (size_t)m->batch * m->dims[l]);
            dy = dx;
        }
    }
    return 0;
}
