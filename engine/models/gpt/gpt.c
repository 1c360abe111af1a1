/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT-2 model: parameters, activations, forward and backward; see engine/models/gpt/gpt.h.
 *
 * Shapes: B sequences of T tokens, C channels, NH heads of HS = C/NH channels, V vocabulary, L
 * layers; BT = B*T rows. Row-major throughout. The forward keeps every activation backward reads;
 * backward walks the layers top down with one residual-stream gradient buffer (dres) that each
 * LayerNorm's backward adds into, as llm.c does.
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/util.h"
#include "engine/models/gpt/gpt_internal.h"
#include "engine/models/models.h"
#include "engine/nn/bf16_inline.h"
#include "engine/nn/gemm.h"
#include "engine/util/pages.h"

/* --- config ----------------------------------------------------------------------------------- */

void ct_gpt_config_default(ct_gpt_config *c)
{
    c->n_layer = 4;
    c->n_head = 4;
    c->n_embd = 256;
    c->seq_len = 128;
    c->vocab = 256;
}

static const char *const config_keys[] = { "n_layer", "n_head", "n_embd", "seq_len", "vocab", NULL };

static int *config_field(ct_gpt_config *c, const char *key)
{
    if (!strcmp(key, "n_layer"))
        return &c->n_layer;
    if (!strcmp(key, "n_head"))
        return &c->n_head;
    if (!strcmp(key, "n_embd"))
        return &c->n_embd;
    if (!strcmp(key, "seq_len"))
        return &c->seq_len;
    if (!strcmp(key, "vocab"))
        return &c->vocab;
    return NULL;
}

int ct_gpt_config_set(ct_gpt_config *c, const char *key, const char *value, ct_error *err)
{
    int *field = config_field(c, key);
    long v;

    if (!field) {
        const char *guess = ct_str_closest(key, config_keys);

        ct_error_set(err, CT_EINVAL, "model-config-key", "--model-config: gpt has no key '%s'", key);
        if (guess)
            return ct_error_hint(err, "did you mean %s? gpt takes n_layer, n_head, n_embd, seq_len, vocab", guess);
        return ct_error_hint(err, "gpt takes n_layer, n_head, n_embd, seq_len, vocab");
    }
    if (ct_parse_long(value, 1, INT_MAX, &v) != 0) {
        ct_error_set(err, CT_EINVAL, "model-config-value", "--model-config: gpt %s='%s' is not a positive integer",
                     key, value);
        return ct_error_hint(err, "give a whole number, e.g. %s=%d", key, *field > 0 ? *field : 4);
    }
    *field = (int)v;
    return 0;
}

int ct_gpt_config_parse(ct_gpt_config *c, const char *text, ct_error *err)
{
    char buf[512], *save = NULL;

    if (ct_str_copy(buf, sizeof(buf), text) != 0)
        return ct_error_set(err, CT_EINVAL, "model-config-value", "--model-config is longer than %zu characters",
                            sizeof(buf) - 1);
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        int rv;

        if (!eq) {
            ct_error_set(err, CT_EINVAL, "model-config-value", "--model-config: '%s' is not key=value", item);
            return ct_error_hint(err, "write e.g. --model-config n_layer=4,n_embd=256");
        }
        *eq = '\0';
        if ((rv = ct_gpt_config_set(c, item, eq + 1, err)) != 0)
            return rv;
    }
    return 0;
}

static int check_range(const char *key, int v, int max, const char *hint, ct_error *err)
{
    if (v >= 1 && v <= max)
        return 0;
    ct_error_set(err, CT_EINVAL, "model-config-value", "--model-config: gpt %s=%d is out of range [1, %d]",
                 key, v, max);
    return ct_error_hint(err, "%s", hint);
}

int ct_gpt_config_check(const ct_gpt_config *c, ct_error *err)
{
    int rv;

    if ((rv = check_range("n_layer", c->n_layer, CT_GPT_MAX_LAYER, "GPT-2 small has 12 layers; try n_layer=4", err)) ||
        (rv = check_range("n_head", c->n_head, c->n_embd > 0 ? c->n_embd : 1, "n_head must divide n_embd; try n_head=4", err)) ||
        (rv = check_range("n_embd", c->n_embd, CT_GPT_MAX_EMBD, "GPT-2 small has n_embd=768; try n_embd=256", err)) ||
        (rv = check_range("seq_len", c->seq_len, CT_GPT_MAX_SEQ, "GPT-2 uses 1024; try seq_len=128", err)) ||
        (rv = check_range("vocab", c->vocab, CT_GPT_MAX_VOCAB, "byte tokens (ctrain tokenize) need vocab=256", err)))
        return rv;
    if (c->n_embd % c->n_head != 0) {
        ct_error_set(err, CT_EINVAL, "model-config-value",
                     "--model-config: gpt n_embd=%d is not a multiple of n_head=%d", c->n_embd, c->n_head);
        return ct_error_hint(err, "each head gets n_embd/n_head channels; e.g. n_embd=%d with n_head=%d",
                             (c->n_embd / c->n_head + 1) * c->n_head, c->n_head);
    }
    return 0;
}

void ct_gpt_config_describe(const ct_gpt_config *c, char *buf, size_t size)
{
    snprintf(buf, size, "n_layer=%d,n_head=%d,n_embd=%d,seq_len=%d,vocab=%d", c->n_layer, c->n_head, c->n_embd,
             c->seq_len, c->vocab);
}

/* --- creation --------------------------------------------------------------------------------- */

static void describe(ct_tensor *ts, const char *name, int ndim, int64_t d0, int64_t d1)
{
    snprintf(ts->name, sizeof(ts->name), "%s", name);
    ts->ndim = ndim;
    ts->shape[0] = d0;
    ts->shape[1] = ndim > 1 ? d1 : 0;
    ts->numel = (size_t)d0 * (size_t)(ndim > 1 ? d1 : 1);
}

/* Names and shapes of every tensor, in layout order; offsets and data pointers follow. */
static void describe_tensors(ct_gpt *m)
{
    const ct_gpt_config *c = &m->cfg;
    int64_t C = c->n_embd;
    ct_tensor *ts = m->tensors;
    char name[64];
    size_t off = 0;

    describe(ts++, "wte.weight", 2, c->vocab, C);
    describe(ts++, "wpe.weight", 2, c->seq_len, C);
    for (int l = 0; l < c->n_layer; l++) {
        static const struct { const char *suffix; int ndim; int out; int in; } blk[BLK_TENSORS] = {
            { "ln_1.weight", 1, 1, 0 },        { "ln_1.bias", 1, 1, 0 },
            { "attn.c_attn.weight", 2, 3, 1 }, { "attn.c_attn.bias", 1, 3, 0 },
            { "attn.c_proj.weight", 2, 1, 1 }, { "attn.c_proj.bias", 1, 1, 0 },
            { "ln_2.weight", 1, 1, 0 },        { "ln_2.bias", 1, 1, 0 },
            { "mlp.c_fc.weight", 2, 4, 1 },    { "mlp.c_fc.bias", 1, 4, 0 },
            { "mlp.c_proj.weight", 2, 1, 4 },  { "mlp.c_proj.bias", 1, 1, 0 },
        };

        for (int i = 0; i < BLK_TENSORS; i++) {
            snprintf(name, sizeof(name), "h.%d.%s", l, blk[i].suffix);
            describe(ts++, name, blk[i].ndim, blk[i].out * C, blk[i].in * C);
        }
    }
    describe(ts++, "ln_f.weight", 1, C, 0);
    describe(ts++, "ln_f.bias", 1, C, 0);
    for (int i = 0; i < m->n_tensors; i++) {
        m->tensors[i].offset = off;
        off += m->tensors[i].numel;
    }
    m->n_params = off;
}

/* Elements of activations for B sequences (the layout gpt_carve cuts). Activation checkpointing
 * keeps every block's output (res3, BT*C) and one block's inner activations. */
size_t gpt_acts_size(const ct_gpt_config *c, size_t B, int ckpt)
{
    size_t T = (size_t)c->seq_len, C = (size_t)c->n_embd, BT = B * T;
    size_t block = BT * C * 5 + BT * 4 + BT * 3 * C + B * c->n_head * T * T + BT * 4 * C * 2;
    size_t blocks = ckpt ? BT * C * c->n_layer + block - BT * C : block * c->n_layer;

    return BT * C + blocks + BT * C + BT * 2 + BT * c->vocab;
}

/* Elements of backward's buffers: dres, dbt_c, dqkv, dfch, datt. */
size_t gpt_grad_buf_size(const ct_gpt_config *c, size_t B)
{
    size_t T = (size_t)c->seq_len, C = (size_t)c->n_embd, BT = B * T;

    return BT * C * 2 + BT * 3 * C + BT * 4 * C + B * c->n_head * T * T;
}

static void free_arrays(ct_gpt *m)
{
    free(m->params);
    free(m->grads);
    ct_pages_free(m->acts_mem, m->acts_bytes);
    free(m->grad_mem);
    m->params = m->grads = m->acts_mem = m->grad_mem = NULL;
}

/* That type's view cut from the arrays. */
static void carve(ct_gpt *m)
{
    if (m->param_dtype == CT_DTYPE_F64)
        gpt_carve_f64(m);
    else if (m->param_dtype == CT_DTYPE_BF16)
        gpt_carve_bf16(m);
    else
        gpt_carve_f32(m);
}

/* The activations in a mapping of their own, so that their resident pages are what the steps
 * touched (ct_gpt_activation_bytes). */
static int alloc_acts(ct_gpt *m)
{
    m->acts_bytes = gpt_acts_size(&m->cfg, (size_t)m->max_batch, m->act_ckpt) * ct_dtype_size(m->param_dtype);
    m->acts_mem = ct_pages_alloc(m->acts_bytes);
    return m->acts_mem ? 0 : CT_ENOMEM;
}

/* Parameters, gradients, activations and backward's buffers in param_dtype, the tensors viewing
 * the parameters, and that type's view cut. */
static int alloc_arrays(ct_gpt *m)
{
    size_t es = ct_dtype_size(m->param_dtype), B = (size_t)m->max_batch;

    m->params = calloc(m->n_params, es);
    m->grads = calloc(m->n_params, es);
    m->grad_mem = calloc(gpt_grad_buf_size(&m->cfg, B), es);
    if (!m->params || !m->grads || !m->grad_mem || alloc_acts(m))
        return CT_ENOMEM;
    for (int i = 0; i < m->n_tensors; i++)
        m->tensors[i].data = (char *)m->params + m->tensors[i].offset * es;
    carve(m);
    return 0;
}

/* The most elements one activation of the rounded copies holds: [BT,4C], [BT,V] or [B,NH,T,T]. */
static size_t widest_act(const ct_gpt_config *c, size_t B)
{
    size_t T = (size_t)c->seq_len, BT = B * T, w = BT * 4 * c->n_embd;

    if (BT * c->vocab > w)
        w = BT * c->vocab;
    if (B * c->n_head * T * T > w)
        w = B * c->n_head * T * T;
    return w;
}

size_t gpt_kept_offset(const ct_gpt_config *c, size_t B, int l, int which)
{
    size_t BT = B * (size_t)c->seq_len, C = (size_t)c->n_embd;
    size_t size[KEEP_N] = { BT * C, BT * 3 * C, B * c->n_head * c->seq_len * c->seq_len, BT * C, BT * C, BT * 4 * C };
    size_t off = 0;

    for (int i = 0; i < KEEP_N; i++)
        off += size[i] * (size_t)l;
    for (int i = 0; i < which; i++)
        off += size[i];
    return off;
}

size_t gpt_kept_at(const ct_gpt *m, int l, int which)
{
    if (m->act_ckpt)
        l = l < m->cfg.n_layer ? 0 : 1;
    return gpt_kept_offset(&m->cfg, (size_t)m->max_batch, l, which);
}

/* keep_b's mapping: every block's copies and lnf's, or one block's and lnf's. */
static int alloc_keep(ct_gpt *m)
{
    m->keep_bytes = sizeof(uint16_t) * gpt_kept_offset(&m->cfg, (size_t)m->max_batch,
                                                       m->act_ckpt ? 1 : m->cfg.n_layer, KEEP_QKV);
    m->keep_b = ct_pages_alloc(m->keep_bytes);
    return m->keep_b ? 0 : CT_ENOMEM;
}

int ct_gpt_create(const ct_gpt_config *c, int max_batch, ct_gpt **out, ct_error *err)
{
    ct_gpt *m;
    size_t B = (size_t)max_batch, T, C, BT;
    int rv;

    *out = NULL;
    if ((rv = ct_gpt_config_check(c, err)) != 0)
        return rv;
    if (max_batch <= 0 || max_batch > (1 << 20))
        return ct_error_set(err, CT_EINVAL, "batch-size", "batch size %d is out of range [1, %d]", max_batch, 1 << 20);
    T = (size_t)c->seq_len;
    C = (size_t)c->n_embd;
    BT = B * T;
    /* BLAS takes int dimensions; the widest GEMM output is [BT, max(4C, V)]. */
    if (BT * 4 * C > INT_MAX || BT * (size_t)c->vocab > INT_MAX || (size_t)c->n_layer * 12 * C * C > ((size_t)1 << 31)) {
        ct_error_set(err, CT_EINVAL, "model-config-value",
                     "gpt %d layers of n_embd=%d with batch %d x seq_len %d is too large for one process",
                     c->n_layer, c->n_embd, max_batch, c->seq_len);
        return ct_error_hint(err, "lower n_embd, n_layer, seq_len or --batch-size");
    }
    m = calloc(1, sizeof(*m));
    if (!m)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory creating the gpt model");
    m->cfg = *c;
    m->max_batch = max_batch;
    m->n_tensors = 2 + BLK_TENSORS * c->n_layer + 2;
    m->tensors = calloc((size_t)m->n_tensors, sizeof(ct_tensor));
    /* the block views of both types hold the same pointers: one array serves either */
    m->blocks_mem = calloc((size_t)c->n_layer, sizeof(struct gpt_block_acts));
    if (!m->tensors || !m->blocks_mem)
        goto nomem;
    describe_tensors(m);
    if (alloc_arrays(m))
        goto nomem;
    *out = m;
    return 0;
nomem:
    ct_gpt_free(m);
    ct_error_set(err, CT_ENOMEM, "", "out of memory for the gpt model (%d layers, n_embd %d, batch %d x %d tokens)",
                 c->n_layer, c->n_embd, max_batch, c->seq_len);
    return ct_error_hint(err, "lower n_embd, n_layer, seq_len or --batch-size");
}

void ct_gpt_free(ct_gpt *m)
{
    if (!m)
        return;
    free_arrays(m);
    free(m->tensors);
    free(m->blocks_mem);
    free(m->params_b);
    ct_pages_free(m->keep_b, m->keep_bytes);
    for (int i = 0; i < 4; i++)
        free(m->qb[i]);
    for (int i = 0; i < 3; i++)
        free(m->q[i]);
    free(m);
}

const ct_gpt_config *ct_gpt_get_config(const ct_gpt *m) { return &m->cfg; }
size_t ct_gpt_num_params(const ct_gpt *m) { return m->n_params; }
void *ct_gpt_params(ct_gpt *m) { return m->params; }
void *ct_gpt_grads(ct_gpt *m) { return m->grads; }
enum ct_dtype ct_gpt_param_dtype(const ct_gpt *m) { return m->param_dtype; }

int ct_gpt_set_param_dtype(ct_gpt *m, enum ct_dtype dtype, ct_error *err)
{
    if (dtype != CT_DTYPE_F32 && dtype != CT_DTYPE_F64 && dtype != CT_DTYPE_BF16)
        return ct_error_set(err, CT_ENOTAVAIL, "model-precision-unsupported",
                            "the cpu gpt stores its parameters in fp32, fp64 or bf16 only");
    if (dtype == m->param_dtype)
        return 0;
    free_arrays(m);
    m->param_dtype = dtype;
    if (alloc_arrays(m))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for the gpt model in %s",
                            dtype == CT_DTYPE_F64 ? "fp64" : dtype == CT_DTYPE_BF16 ? "bf16" : "fp32");
    return 0;
}

int ct_gpt_set_activation_checkpointing(ct_gpt *m, int on, ct_error *err)
{
    on = on != 0;
    if (on == m->act_ckpt)
        return 0;
    ct_pages_free(m->acts_mem, m->acts_bytes);
    m->act_ckpt = on;
    m->acts_mem = NULL;
    if (alloc_acts(m))
        goto nomem;
    carve(m);
    if (m->keep_b) {
        ct_pages_free(m->keep_b, m->keep_bytes);
        m->keep_b = NULL;
        if (alloc_keep(m))
            goto nomem;
    }
    m->act_peak = 0;
    return 0;
nomem:
    return ct_error_set(err, CT_ENOMEM, "", "out of memory for the activations of the gpt model");
}

int ct_gpt_activation_checkpointing(const ct_gpt *m) { return m->act_ckpt; }

/* The high-water mark, after a pass (the pages stay resident once written, so this is the most
 * the passes so far touched at once, or more exactly ever: nothing is unmapped between them). */
static void measure_acts(ct_gpt *m)
{
    size_t now = ct_pages_resident(m->acts_mem, m->acts_bytes) + ct_pages_resident(m->keep_b, m->keep_bytes);

    if (now > m->act_peak)
        m->act_peak = now;
}

size_t ct_gpt_activation_bytes(const ct_gpt *m) { return m->act_peak; }

int ct_gpt_num_tensors(const ct_gpt *m) { return m->n_tensors; }
const ct_tensor *ct_gpt_tensor(const ct_gpt *m, int i) { return &m->tensors[i]; }

/* ct_gemm_prepare's arguments for bf16-true's products (bf16 destination). */
static void prepare_bf16_out(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, enum ct_dtype ab,
                             int accumulate, int ldc)
{
    (void)ab;
    ct_gemm_prepare_bf16(trans_a, trans_b, M, N, K, lda, ldb, accumulate, ldc);
}

/* The oneDNN primitives of a full batch's step, made at set-up (a last, smaller batch makes its own
 * on first use): every Linear's forward and two backward products, and the LM head's three. */
static void prepare_gemms(void *model)
{
    const ct_gpt *m = model;
    int BT = m->max_batch * m->cfg.seq_len, C = m->cfg.n_embd, V = m->cfg.vocab;
    int io[4][2] = { { C, 3 * C }, { C, C }, { C, 4 * C }, { 4 * C, C } };
    enum ct_dtype dt = m->gemm_dtype;
    void (*prep)(int, int, int, int, int, int, int, enum ct_dtype, int, int) = ct_gemm_prepare;

    if (m->param_dtype == CT_DTYPE_BF16)
        prep = prepare_bf16_out;
    for (int i = 0; i < 4; i++) {
        int IC = io[i][0], OC = io[i][1];

        prep(0, 1, BT, OC, IC, IC, IC, dt, 1, OC);
        prep(1, 0, OC, IC, BT, OC, IC, dt, 0, IC);
        prep(0, 0, BT, IC, OC, OC, IC, dt, 0, IC);
    }
    prep(0, 1, BT, V, C, C, C, dt, 0, V);
    prep(0, 0, BT, C, V, V, C, dt, 0, C);
    prep(1, 0, V, C, BT, V, C, dt, 0, C);
}

/* bf16-true: bf16 products of the bf16 arrays into bf16 (no copies to make); attention's scores and
 * their gradient are fp32 scratch (q[0]; without it attention runs per head). */
static int alloc_bf16_true(void *model, ct_error *err)
{
    ct_gpt *m = model;

    m->q_n = widest_act(&m->cfg, (size_t)m->max_batch);
    if (!m->q[0])
        m->q[0] = malloc(sizeof(float) * m->q_n);
    if (!m->q[0])
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for the attention scratch of the gpt model");
    return 0;
}

/* bf16-mixed: the parameters' and the kept activations' bf16 copies, and the products' scratch. */
static int alloc_mixed(void *model, ct_error *err)
{
    ct_gpt *m = model;

    m->q_n = widest_act(&m->cfg, (size_t)m->max_batch);
    if (!m->params_b)
        m->params_b = malloc(sizeof(uint16_t) * m->n_params);
    if (!m->keep_b)
        alloc_keep(m);
    for (int i = 0; i < 3; i++)
        if (!m->q[i])
            m->q[i] = malloc(sizeof(float) * m->q_n);
    for (int i = 0; i < 4; i++)
        if (!m->qb[i])
            m->qb[i] = malloc(sizeof(uint16_t) * m->q_n);
    if (!m->params_b || !m->keep_b || !m->q[0] || !m->q[1] || !m->q[2] || !m->qb[0] || !m->qb[1] || !m->qb[2] || !m->qb[3])
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for the bf16 copies of the gpt model");
    return 0;
}

int ct_gpt_set_gemm_dtype(ct_gpt *m, enum ct_dtype dtype, ct_error *err)
{
    static const struct ct_model_gemm_ops ops = { alloc_bf16_true, alloc_mixed, prepare_gemms };

    return ct_model_gemm_dtype_setup("gpt", "gpt", m->param_dtype, dtype, &ops, m, &m->gemm_dtype, err);
}

/* --- init ------------------------------------------------------------------------------------- */

/* One standard normal draw (Box-Muller on two uniforms; the second value is dropped so the stream
 * is a plain function of the draw count). */
static double normal(ct_rng *r)
{
    double u1 = ct_rng_uniform(r), u2 = ct_rng_uniform(r);

    return sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
}

void ct_gpt_init(ct_gpt *m, ct_rng *r)
{
    double proj_std = 0.02 / sqrt(2.0 * m->cfg.n_layer);

    for (int i = 0; i < m->n_tensors; i++) {
        ct_tensor *ts = &m->tensors[i];
        const char *name = ts->name;
        size_t len = strlen(name);
        int is_bias = len >= 5 && !strcmp(name + len - 5, ".bias");
        int is_ln = strstr(name, "ln_") != NULL;
        int is_proj = strstr(name, "c_proj.weight") != NULL;

        /* The same draws in either type: an fp64 model starts from the fp32 model's values widened
         * (PyTorch's model.double() of the same initialisation). */
        for (size_t j = 0; j < ts->numel; j++) {
            float v = is_bias ? 0.0f : is_ln ? 1.0f : (float)(normal(r) * (is_proj ? proj_std : 0.02));

            if (m->param_dtype == CT_DTYPE_F64)
                ((double *)ts->data)[j] = v;
            else if (m->param_dtype == CT_DTYPE_BF16)
                ((uint16_t *)ts->data)[j] = ct_bf16_store(v);
            else
                ((float *)ts->data)[j] = v;
        }
    }
}

double ct_gpt_bits_per_byte(double loss_nats)
{
    return loss_nats / M_LN2;
}


/* --- the step, in the model's type (gpt_step_f32.c, gpt_step_f64.c, gpt_step_bf16.c) ---------- */

double ct_gpt_forward(ct_gpt *m, const int32_t *inputs, const int32_t *targets, int batch, ct_param_need_fn need,
                      void *ctx)
{
    double loss;

    if (m->param_dtype == CT_DTYPE_F64)
        loss = gpt_forward_f64(m, inputs, targets, batch, need, ctx);
    else if (m->param_dtype == CT_DTYPE_BF16)
        loss = gpt_forward_bf16(m, inputs, targets, batch, need, ctx);
    else
        loss = gpt_forward_f32(m, inputs, targets, batch, need, ctx);
    measure_acts(m);
    return loss;
}

int ct_gpt_backward(ct_gpt *m, double scale_tokens, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx)
{
    int rc;

    if (m->param_dtype == CT_DTYPE_F64)
        rc = gpt_backward_f64(m, scale_tokens, need, ready, ctx);
    else if (m->param_dtype == CT_DTYPE_BF16)
        rc = gpt_backward_bf16(m, scale_tokens, need, ready, ctx);
    else
        rc = gpt_backward_f32(m, scale_tokens, need, ready, ctx);
    measure_acts(m);
    return rc;
}

int ct_gpt_next_token_logits(ct_gpt *m, const int32_t *tokens, int len, float *logits)
{
    if (m->param_dtype == CT_DTYPE_F64)
        return gpt_next_token_logits_f64(m, tokens, len, logits);
    if (m->param_dtype == CT_DTYPE_BF16)
        return gpt_next_token_logits_bf16(m, tokens, len, logits);
    return gpt_next_token_logits_f32(m, tokens, len, logits);
}
