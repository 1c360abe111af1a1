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
#include "engine/models/gpt/gpt.h"
#include "engine/models/gpt/gpt_kernels.h"
#include "engine/nn/gemm.h"

/* Tensors of one block, in forward (= layout) order. */
enum {
    BLK_LN1_W, BLK_LN1_B, BLK_ATTN_W, BLK_ATTN_B, BLK_APROJ_W, BLK_APROJ_B,
    BLK_LN2_W, BLK_LN2_B, BLK_FC_W, BLK_FC_B, BLK_FPROJ_W, BLK_FPROJ_B,
    BLK_TENSORS
};

/* Activations of one block for max_batch sequences. */
struct gpt_block_acts {
    float *ln1, *ln1_mean, *ln1_rstd; /* [BT,C], [BT], [BT] */
    float *qkv;                       /* [BT,3C] */
    float *att;                       /* [B,NH,T,T] softmax probabilities (0 above the diagonal) */
    float *atty;                      /* [BT,C] attention output, before the projection */
    float *res2;                      /* [BT,C] residual after attention */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch;                       /* [BT,4C] before GELU */
    float *fch_gelu;                  /* [BT,4C] */
    float *res3;                      /* [BT,C] residual after the MLP: the block's output */
};

struct ct_gpt {
    ct_gpt_config cfg;
    int max_batch;
    size_t n_params;
    float *params;
    float *grads;
    int n_tensors;
    ct_tensor *tensors;

    float *acts_mem;                  /* every activation below, one allocation */
    float *encoded;                   /* [BT,C] */
    struct gpt_block_acts *blocks;    /* [L] */
    float *lnf, *lnf_mean, *lnf_rstd;
    float *probs;                     /* [BT,V] logits, then probabilities, then dlogits */

    float *grad_mem;                  /* backward's buffers, one allocation */
    float *dres;                      /* [BT,C] gradient of the residual stream */
    float *dbt_c;                     /* [BT,C] gradient of a LayerNorm output or of atty */
    float *dqkv;                      /* [BT,3C] */
    float *dfch;                      /* [BT,4C] */
    float *datt;                      /* [B,NH,T,T] the heads' attention gradients (heads run in parallel) */

    /* bf16-mixed: params_b holds the parameters as bf16 (packed once per forward, after the
     * optimizer step that changed them), qb[0..1] the bf16 copies of the activations a Linear's
     * oneDNN GEMM reads (packed again in backward: rounding is exact). Attention's small per-head
     * products run on OpenBLAS in fp32 on bf16-rounded copies: q[0..2]. */
    enum ct_dtype gemm_dtype;
    uint16_t *params_b;
    uint16_t *qb[2];
    float *q[3];
    size_t q_n;

    const int32_t *inputs;
    const int32_t *targets;
    int batch;
};

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

/* Carve n floats off *cursor. */
static float *take(float **cursor, size_t n)
{
    float *p = *cursor;

    *cursor += n;
    return p;
}

/* Floats of activations for B sequences (layout of carve_acts). */
static size_t acts_size(const ct_gpt_config *c, size_t B)
{
    size_t T = (size_t)c->seq_len, C = (size_t)c->n_embd, BT = B * T;
    size_t block = BT * C * 5 + BT * 4 + BT * 3 * C + B * c->n_head * T * T + BT * 4 * C * 2;

    return BT * C + block * c->n_layer + BT * C + BT * 2 + BT * c->vocab;
}

static void carve_acts(ct_gpt *m)
{
    const ct_gpt_config *c = &m->cfg;
    size_t B = (size_t)m->max_batch, T = (size_t)c->seq_len, C = (size_t)c->n_embd, BT = B * T;
    float *p = m->acts_mem;

    m->encoded = take(&p, BT * C);
    for (int l = 0; l < c->n_layer; l++) {
        struct gpt_block_acts *a = &m->blocks[l];

        a->ln1 = take(&p, BT * C);
        a->ln1_mean = take(&p, BT);
        a->ln1_rstd = take(&p, BT);
        a->qkv = take(&p, BT * 3 * C);
        a->att = take(&p, B * c->n_head * T * T);
        a->atty = take(&p, BT * C);
        a->res2 = take(&p, BT * C);
        a->ln2 = take(&p, BT * C);
        a->ln2_mean = take(&p, BT);
        a->ln2_rstd = take(&p, BT);
        a->fch = take(&p, BT * 4 * C);
        a->fch_gelu = take(&p, BT * 4 * C);
        a->res3 = take(&p, BT * C);
    }
    m->lnf = take(&p, BT * C);
    m->lnf_mean = take(&p, BT);
    m->lnf_rstd = take(&p, BT);
    m->probs = take(&p, BT * c->vocab);
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

int ct_gpt_create(const ct_gpt_config *c, int max_batch, ct_gpt **out, ct_error *err)
{
    ct_gpt *m;
    size_t B = (size_t)max_batch, T, C, BT, acts;
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
    m->blocks = calloc((size_t)c->n_layer, sizeof(*m->blocks));
    if (!m->tensors || !m->blocks)
        goto nomem;
    describe_tensors(m);
    acts = acts_size(c, B);
    m->params = calloc(m->n_params, sizeof(float));
    m->grads = calloc(m->n_params, sizeof(float));
    m->acts_mem = calloc(acts, sizeof(float));
    m->grad_mem = calloc(BT * C * 2 + BT * 3 * C + BT * 4 * C + B * c->n_head * T * T, sizeof(float));
    if (!m->params || !m->grads || !m->acts_mem || !m->grad_mem)
        goto nomem;
    for (int i = 0; i < m->n_tensors; i++)
        m->tensors[i].data = m->params + m->tensors[i].offset;
    carve_acts(m);
    {
        float *p = m->grad_mem;

        m->dres = take(&p, BT * C);
        m->dbt_c = take(&p, BT * C);
        m->dqkv = take(&p, BT * 3 * C);
        m->dfch = take(&p, BT * 4 * C);
        m->datt = take(&p, B * c->n_head * T * T);
    }
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
    free(m->params);
    free(m->grads);
    free(m->tensors);
    free(m->blocks);
    free(m->acts_mem);
    free(m->grad_mem);
    free(m->params_b);
    free(m->qb[0]);
    free(m->qb[1]);
    for (int i = 0; i < 3; i++)
        free(m->q[i]);
    free(m);
}

const ct_gpt_config *ct_gpt_get_config(const ct_gpt *m) { return &m->cfg; }
size_t ct_gpt_num_params(const ct_gpt *m) { return m->n_params; }
float *ct_gpt_params(ct_gpt *m) { return m->params; }
float *ct_gpt_grads(ct_gpt *m) { return m->grads; }
int ct_gpt_num_tensors(const ct_gpt *m) { return m->n_tensors; }
const ct_tensor *ct_gpt_tensor(const ct_gpt *m, int i) { return &m->tensors[i]; }

/* The oneDNN primitives of a full batch's step, made at set-up (a last, smaller batch makes its own
 * on first use): every Linear's forward and two backward products, and the LM head's three. */
static void prepare_gemms(const ct_gpt *m)
{
    int BT = m->max_batch * m->cfg.seq_len, C = m->cfg.n_embd, V = m->cfg.vocab;
    int io[4][2] = { { C, 3 * C }, { C, C }, { C, 4 * C }, { 4 * C, C } };
    enum ct_dtype dt = m->gemm_dtype;

    for (int i = 0; i < 4; i++) {
        int IC = io[i][0], OC = io[i][1];

        ct_gemm_prepare(0, 1, BT, OC, IC, IC, IC, dt, 1, OC);
        ct_gemm_prepare(1, 0, OC, IC, BT, OC, IC, dt, 0, IC);
        ct_gemm_prepare(0, 0, BT, IC, OC, OC, IC, dt, 0, IC);
    }
    ct_gemm_prepare(0, 1, BT, V, C, C, C, dt, 0, V);
    ct_gemm_prepare(0, 0, BT, C, V, V, C, dt, 0, C);
    ct_gemm_prepare(1, 0, V, C, BT, V, C, dt, 0, C);
}

int ct_gpt_set_gemm_dtype(ct_gpt *m, enum ct_dtype dtype, ct_error *err)
{
    if (dtype == CT_DTYPE_F32) {
        m->gemm_dtype = dtype;
        prepare_gemms(m);
        return 0;
    }
    if (dtype != CT_DTYPE_BF16)
        return ct_error_set(err, CT_ENOTAVAIL, "gpt-gemm-dtype", "the cpu gpt computes GEMMs in fp32 or bf16 only");
    m->q_n = widest_act(&m->cfg, (size_t)m->max_batch);
    if (!m->params_b)
        m->params_b = malloc(sizeof(uint16_t) * m->n_params);
    for (int i = 0; i < 3; i++)
        if (!m->q[i])
            m->q[i] = malloc(sizeof(float) * m->q_n);
    for (int i = 0; i < 2; i++)
        if (!m->qb[i])
            m->qb[i] = malloc(sizeof(uint16_t) * m->q_n);
    if (!m->params_b || !m->q[0] || !m->q[1] || !m->q[2] || !m->qb[0] || !m->qb[1])
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for the bf16 copies of the gpt model");
    m->gemm_dtype = dtype;
    prepare_gemms(m);
    return 0;
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
        float *data = ts->data;

        for (size_t j = 0; j < ts->numel; j++) {
            if (is_bias)
                data[j] = 0.0f;
            else if (is_ln)
                data[j] = 1.0f;
            else
                data[j] = (float)(normal(r) * (is_proj ? proj_std : 0.02));
        }
    }
}

double ct_gpt_bits_per_byte(double loss_nats)
{
    return loss_nats / M_LN2;
}

/* --- GEMMs ------------------------------------------------------------------------------------ */

/* What a oneDNN GEMM reads for parameter p: p itself, or its bf16 copy. */
static const void *gemm_param(const ct_gpt *m, const float *p)
{
    return m->gemm_dtype == CT_DTYPE_BF16 ? (const void *)(m->params_b + (p - m->params)) : (const void *)p;
}

/* What a oneDNN GEMM reads for activation x[n]: x itself, or x packed to bf16 in copy slot. */
static const void *gemm_in(ct_gpt *m, const float *x, size_t n, int slot)
{
    if (m->gemm_dtype != CT_DTYPE_BF16)
        return x;
    ct_bf16_pack(x, m->qb[slot], n);
    return m->qb[slot];
}

/* What an OpenBLAS GEMM (attention) reads for activation x[n]: x itself, or x rounded to bf16 in
 * fp32 copy number slot. */
static const float *gemm_act(ct_gpt *m, const float *x, size_t n, int slot)
{
    if (m->gemm_dtype != CT_DTYPE_BF16)
        return x;
    ct_bf16_round_array(x, m->q[slot], n);
    return m->q[slot];
}

/* out[BT,OC] = (residual ? residual : 0) + in[BT,IC] W[OC,IC]^T + b */
static void linear_forward(ct_gpt *m, float *out, const float *residual, const float *in, const float *w,
                           const float *b, int BT, int IC, int OC)
{
    const void *inq = gemm_in(m, in, (size_t)BT * IC, 0);

    gpt_bias_fill(out, residual, b, BT, OC);
    ct_gemm(0, 1, BT, OC, IC, inq, IC, gemm_param(m, w), IC, m->gemm_dtype, 1, out, OC);
}

/* From dout[BT,OC]: dw[OC,IC] = dout^T in, db = column sums of dout, din[BT,IC] = dout W. */
static void linear_backward(ct_gpt *m, float *din, float *dw, float *db, const float *dout, const float *in,
                            const float *w, int BT, int IC, int OC)
{
    const void *doutq = gemm_in(m, dout, (size_t)BT * OC, 0);
    const void *inq = gemm_in(m, in, (size_t)BT * IC, 1);

    gpt_column_sums(db, dout, BT, OC);
    ct_gemm(1, 0, OC, IC, BT, doutq, OC, inq, IC, m->gemm_dtype, 0, dw, IC);
    ct_gemm(0, 0, BT, IC, OC, doutq, OC, gemm_param(m, w), IC, m->gemm_dtype, 0, din, IC);
}

/* --- attention -------------------------------------------------------------------------------- */

/* Causal attention: query row t reads keys 0..t only. The GEMMs run per block of ATT_BLOCK query
 * rows over the keys up to the block's end (and, for the key-side gradients, per block of keys over
 * the queries from the block's start), skipping most of the zero upper triangle: 3/8 of attention's
 * multiply-adds at seq_len 128. Entries above the diagonal are never read; the softmax passes write
 * them as zeros. */
#define ATT_BLOCK 32

static int att_rows(int r0, int T) { return T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK; }

/* atty[BT,C] from qkv[BT,3C]: per sequence b and head h, att = causal_softmax(q k^T / sqrt(HS)),
 * then atty = att v, on strided views of qkv. */
static void attention_forward(ct_gpt *m, struct gpt_block_acts *a, int B)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    const float *qkv = gemm_act(m, a->qkv, (size_t)B * T * C3, 1);
    const float *att;

    /* Heads are independent: one per OpenMP thread, each GEMM single-threaded (OpenBLAS's small-
     * matrix kernels run on the calling thread). */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + h * HS, *k = q + C;
            float *pre = a->att + ((size_t)b * NH + h) * T * T;

            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, att_rows(r0, T), r0 + att_rows(r0, T), HS,
                            scale, q + (size_t)r0 * C3, C3, k, C3, 0.0f, pre + (size_t)r0 * T, T);
            gpt_causal_softmax(pre, T);
        }
    att = gemm_act(m, a->att, (size_t)B * NH * T * T, 2);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *v = qkv + (size_t)b * T * C3 + 2 * C + h * HS;
            const float *p = att + ((size_t)b * NH + h) * T * T;
            float *out = a->atty + (size_t)b * T * C + h * HS;

            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, att_rows(r0, T), HS, r0 + att_rows(r0, T),
                            1.0f, p + (size_t)r0 * T, T, v, C3, 0.0f, out + (size_t)r0 * C, C);
        }
}

/* dqkv[BT,3C] from datty[BT,C] (m->dbt_c). */
static void attention_backward(ct_gpt *m, const struct gpt_block_acts *a, int B)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    const float *qkv = gemm_act(m, a->qkv, (size_t)B * T * C3, 0);
    const float *att = gemm_act(m, a->att, (size_t)B * NH * T * T, 1);
    const float *datty = gemm_act(m, m->dbt_c, (size_t)B * T * C, 2);

#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            float *d = m->datt + ((size_t)b * NH + h) * T * T;
            size_t row = (size_t)b * T * C3 + h * HS;
            const float *q = qkv + row, *k = q + C, *v = q + 2 * C;
            const float *p = att + ((size_t)b * NH + h) * T * T;
            const float *pf = a->att + ((size_t)b * NH + h) * T * T;
            const float *dy = datty + (size_t)b * T * C + h * HS;
            float *dq = m->dqkv + row, *dk = dq + C, *dv = dq + 2 * C;

            /* datt = dy v^T (query rows over their keys); dv = att^T dy (keys over their queries) */
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, att_rows(r0, T), r0 + att_rows(r0, T), HS,
                            1.0f, dy + (size_t)r0 * C, C, v, C3, 0.0f, d + (size_t)r0 * T, T);
            for (int k0 = 0; k0 < T; k0 += ATT_BLOCK)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, att_rows(k0, T), HS, T - k0, 1.0f,
                            p + (size_t)k0 * T + k0, T, dy + (size_t)k0 * C, C, 0.0f, dv + (size_t)k0 * C3, C3);
            /* through the softmax (fp32 probabilities), then the scaled q k^T */
            gpt_causal_softmax_backward(d, pf, T);
            if (m->gemm_dtype == CT_DTYPE_BF16)
                ct_bf16_round_array(d, d, (size_t)T * T);
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, att_rows(r0, T), HS, r0 + att_rows(r0, T),
                            scale, d + (size_t)r0 * T, T, k, C3, 0.0f, dq + (size_t)r0 * C3, C3);
            for (int k0 = 0; k0 < T; k0 += ATT_BLOCK)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, att_rows(k0, T), HS, T - k0, scale,
                            d + (size_t)k0 * T + k0, T, q + (size_t)k0 * C3, C3, 0.0f, dk + (size_t)k0 * C3, C3);
        }
}

/* --- forward ---------------------------------------------------------------------------------- */

static const float *tensor_data(const ct_gpt *m, int i) { return m->tensors[i].data; }
static float *tensor_grad(const ct_gpt *m, int i) { return m->grads + m->tensors[i].offset; }
static int block_tensor(int l, int which) { return 2 + l * BLK_TENSORS + which; }

/* need() for tensors first..last (adjacent in the parameter array). */
static int need_tensors(const ct_gpt *m, int first, int last, ct_param_need_fn need, void *ctx)
{
    size_t lo = m->tensors[first].offset;

    return need ? need(ctx, lo, m->tensors[last].offset + m->tensors[last].numel - lo) : 0;
}

double ct_gpt_forward(ct_gpt *m, const int32_t *inputs, const int32_t *targets, int batch, ct_param_need_fn need,
                      void *ctx)
{
    const ct_gpt_config *c = &m->cfg;
    int T = c->seq_len, C = c->n_embd, V = c->vocab, BT = batch * T, L = c->n_layer;
    const float *x;
    int lf = 2 + L * BLK_TENSORS;

    /* A batch beyond what create allocated for would write past the activations. */
    if (batch < 1 || batch > m->max_batch) {
        m->batch = 0;
        return NAN;
    }
    m->inputs = inputs;
    m->targets = targets;
    m->batch = batch;
    if (m->gemm_dtype == CT_DTYPE_BF16) {
        if (need_tensors(m, 0, m->n_tensors - 1, need, ctx))
            return NAN;
        ct_bf16_pack(m->params, m->params_b, m->n_params);
    } else if (need_tensors(m, 0, 1, need, ctx)) {
        return NAN;
    }
    gpt_embed(m->encoded, inputs, tensor_data(m, 0), tensor_data(m, 1), batch, T, C);
    x = m->encoded;
    for (int l = 0; l < L; l++) {
        struct gpt_block_acts *a = &m->blocks[l];
        const float *w[BLK_TENSORS];

        if (m->gemm_dtype != CT_DTYPE_BF16 &&
            need_tensors(m, block_tensor(l, 0), block_tensor(l, BLK_TENSORS - 1), need, ctx))
            return NAN;
        for (int i = 0; i < BLK_TENSORS; i++)
            w[i] = tensor_data(m, block_tensor(l, i));
        gpt_layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, w[BLK_LN1_W], w[BLK_LN1_B], BT, C);
        linear_forward(m, a->qkv, NULL, a->ln1, w[BLK_ATTN_W], w[BLK_ATTN_B], BT, C, 3 * C);
        attention_forward(m, a, batch);
        linear_forward(m, a->res2, x, a->atty, w[BLK_APROJ_W], w[BLK_APROJ_B], BT, C, C);
        gpt_layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w[BLK_LN2_W], w[BLK_LN2_B], BT, C);
        linear_forward(m, a->fch, NULL, a->ln2, w[BLK_FC_W], w[BLK_FC_B], BT, C, 4 * C);
        gpt_gelu_forward(a->fch_gelu, a->fch, (size_t)BT * 4 * C);
        linear_forward(m, a->res3, a->res2, a->fch_gelu, w[BLK_FPROJ_W], w[BLK_FPROJ_B], BT, 4 * C, C);
        x = a->res3;
    }
    if (m->gemm_dtype != CT_DTYPE_BF16 && need_tensors(m, lf, lf + 1, need, ctx))
        return NAN;
    gpt_layernorm_forward(m->lnf, m->lnf_mean, m->lnf_rstd, x, tensor_data(m, lf), tensor_data(m, lf + 1), BT, C);
    /* logits = lnf wte^T: the LM head is the token embedding, transposed */
    ct_gemm(0, 1, BT, V, C, gemm_in(m, m->lnf, (size_t)BT * C, 0), C, gemm_param(m, tensor_data(m, 0)), C,
            m->gemm_dtype, 0, m->probs, V);
    return gpt_softmax_xent_forward(m->probs, targets, BT, V);
}

/* A shorter sequence is a forward at seq_len len: every stride below reads cfg.seq_len, and
 * the buffers made for seq_len hold one sequence of fewer tokens. The tokens stand in as targets
 * (the loss is not used); the last row of the final LayerNorm then goes through the LM head. */
int ct_gpt_next_token_logits(ct_gpt *m, const int32_t *tokens, int len, float *logits)
{
    int T = m->cfg.seq_len, C = m->cfg.n_embd;

    if (len < 1 || len > T || m->max_batch < 1)
        return CT_EINVAL;
    m->cfg.seq_len = len;
    ct_gpt_forward(m, tokens, tokens, 1, NULL, NULL);
    m->cfg.seq_len = T;
    m->batch = 0; /* no backward of this forward */
    cblas_sgemv(CblasRowMajor, CblasNoTrans, m->cfg.vocab, C, 1.0f, tensor_data(m, 0), C,
                m->lnf + (size_t)(len - 1) * C, 1, 0.0f, logits, 1);
    return 0;
}

/* --- backward --------------------------------------------------------------------------------- */

static int announce(const ct_gpt *m, int t, ct_grad_ready_fn ready, void *ctx)
{
    return ready ? ready(ctx, m->tensors[t].offset, m->tensors[t].numel) : 0;
}

/* Announce tensors hi, hi-1, ..., lo (a contiguous run finished together). */
static int announce_run(const ct_gpt *m, int hi, int lo, ct_grad_ready_fn ready, void *ctx)
{
    int rv = 0;

    for (int t = hi; t >= lo && rv == 0; t--)
        rv = announce(m, t, ready, ctx);
    return rv;
}

/* Block l's backward: m->dres holds the gradient of its output res3 on entry and of its input on
 * return. */
static int block_backward(ct_gpt *m, int l, const float *x, ct_grad_ready_fn ready, void *ctx)
{
    const ct_gpt_config *c = &m->cfg;
    const struct gpt_block_acts *a = &m->blocks[l];
    int B = m->batch, T = c->seq_len, C = c->n_embd, BT = B * T;
    const float *w[BLK_TENSORS];
    float *g[BLK_TENSORS];
    int t0 = block_tensor(l, 0), rv;

    for (int i = 0; i < BLK_TENSORS; i++) {
        w[i] = tensor_data(m, t0 + i);
        g[i] = tensor_grad(m, t0 + i);
    }
    /* MLP: res3 = res2 + gelu(ln2 Wfc^T + bfc) Wproj^T + bproj */
    linear_backward(m, m->dfch, g[BLK_FPROJ_W], g[BLK_FPROJ_B], m->dres, a->fch_gelu, w[BLK_FPROJ_W], BT, 4 * C, C);
    if ((rv = announce_run(m, t0 + BLK_FPROJ_B, t0 + BLK_FPROJ_W, ready, ctx)))
        return rv;
    gpt_gelu_backward(m->dfch, a->fch, (size_t)BT * 4 * C);
    linear_backward(m, m->dbt_c, g[BLK_FC_W], g[BLK_FC_B], m->dfch, a->ln2, w[BLK_FC_W], BT, C, 4 * C);
    if ((rv = announce_run(m, t0 + BLK_FC_B, t0 + BLK_FC_W, ready, ctx)))
        return rv;
    gpt_layernorm_backward(m->dres, g[BLK_LN2_W], g[BLK_LN2_B], m->dbt_c, a->res2, w[BLK_LN2_W], a->ln2_mean,
                           a->ln2_rstd, BT, C);
    if ((rv = announce_run(m, t0 + BLK_LN2_B, t0 + BLK_LN2_W, ready, ctx)))
        return rv;
    /* attention: res2 = x + attention(ln1 Wattn^T + battn) Wproj^T + bproj */
    linear_backward(m, m->dbt_c, g[BLK_APROJ_W], g[BLK_APROJ_B], m->dres, a->atty, w[BLK_APROJ_W], BT, C, C);
    if ((rv = announce_run(m, t0 + BLK_APROJ_B, t0 + BLK_APROJ_W, ready, ctx)))
        return rv;
    attention_backward(m, a, B);
    linear_backward(m, m->dbt_c, g[BLK_ATTN_W], g[BLK_ATTN_B], m->dqkv, a->ln1, w[BLK_ATTN_W], BT, C, 3 * C);
    if ((rv = announce_run(m, t0 + BLK_ATTN_B, t0 + BLK_ATTN_W, ready, ctx)))
        return rv;
    gpt_layernorm_backward(m->dres, g[BLK_LN1_W], g[BLK_LN1_B], m->dbt_c, x, w[BLK_LN1_W], a->ln1_mean,
                           a->ln1_rstd, BT, C);
    return announce_run(m, t0 + BLK_LN1_B, t0 + BLK_LN1_W, ready, ctx);
}

int ct_gpt_backward(ct_gpt *m, double scale_tokens, ct_grad_ready_fn ready, void *ctx)
{
    const ct_gpt_config *c = &m->cfg;
    int B = m->batch, T = c->seq_len, C = c->n_embd, V = c->vocab, BT = B * T, L = c->n_layer;
    int lf = 2 + L * BLK_TENSORS, rv;
    float *dwte = tensor_grad(m, 0);

    if (B == 0)
        return CT_EINTERNAL; /* no forward (or a refused one) to take the gradient of */
    gpt_softmax_xent_backward(m->probs, m->targets, BT, V, (float)(1.0 / scale_tokens));
    {
        const void *dlogits = gemm_in(m, m->probs, (size_t)BT * V, 0);

        /* LM head: dlnf = dlogits wte; dwte = dlogits^T lnf (the embedding adds to it last) */
        ct_gemm(0, 0, BT, C, V, dlogits, V, gemm_param(m, tensor_data(m, 0)), C, m->gemm_dtype, 0, m->dbt_c, C);
        ct_gemm(1, 0, V, C, BT, dlogits, V, gemm_in(m, m->lnf, (size_t)BT * C, 1), C, m->gemm_dtype, 0, dwte, C);
    }
    memset(m->dres, 0, sizeof(float) * (size_t)BT * C);
    gpt_layernorm_backward(m->dres, tensor_grad(m, lf), tensor_grad(m, lf + 1), m->dbt_c,
                           L ? m->blocks[L - 1].res3 : m->encoded, tensor_data(m, lf), m->lnf_mean, m->lnf_rstd,
                           BT, C);
    if ((rv = announce_run(m, lf + 1, lf, ready, ctx)))
        return rv;
    for (int l = L - 1; l >= 0; l--)
        if ((rv = block_backward(m, l, l ? m->blocks[l - 1].res3 : m->encoded, ready, ctx)))
            return rv;
    gpt_embed_backward(dwte, tensor_grad(m, 1), m->dres, m->inputs, B, T, C);
    return announce_run(m, 1, 0, ready, ctx);
}
