/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA GPT's host side: layout, announcement stages, parameter and optimizer-state copies; see
 * gpt_cuda.h. Plain C in every build: the unit tests check it without a GPU. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/models/gpt/gpt_cuda.h"
#include "engine/nn/bf16_inline.h"

int ct_gpt_cuda_layout_of(const ct_gpt *host, ct_gpt_cuda_layout *out, ct_error *err)
{
    const ct_gpt_config *c = ct_gpt_get_config(host);
    int L = c->n_layer, t = 0;

    memset(out, 0, sizeof(*out));
    if (ct_gpt_param_dtype(host) != CT_DTYPE_F32)
        return ct_error_set(err, CT_ENOTAVAIL, "model-precision-unsupported",
                            "the cuda gpt keeps fp32 master weights: 32-true or bf16-mixed only");
    out->cfg = *c;
    out->n_params = ct_gpt_num_params(host);
    out->n_tensors = ct_gpt_num_tensors(host);
    for (int i = 0; i < out->n_tensors; i++) {
        out->offset[i] = ct_gpt_tensor(host, i)->offset;
        out->numel[i] = ct_gpt_tensor(host, i)->numel;
    }
    out->wte = out->offset[t++];
    out->wpe = out->offset[t++];
    for (int l = 0; l < L; l++)
        for (int i = 0; i < CT_GPT_BLOCK_TENSORS; i++)
            out->blk[l][i] = out->offset[t++];
    out->lnf_w = out->offset[t++];
    out->lnf_b = out->offset[t++];
    return 0;
}

int ct_gpt_cuda_stages(const ct_gpt_cuda_layout *lay)
{
    return 2 + 6 * lay->cfg.n_layer;
}

int ct_gpt_cuda_stage_tensors(const ct_gpt_cuda_layout *lay, int s, int idx[2])
{
    /* each block stage's pair, by its weight: c_proj, c_fc, ln_2, attn c_proj, c_attn, ln_1 */
    static const int weight[6] = { CT_GPT_FPROJ_W, CT_GPT_FC_W, CT_GPT_LN2_W, CT_GPT_APROJ_W, CT_GPT_ATTN_W,
                                   CT_GPT_LN1_W };
    int L = lay->cfg.n_layer, last = lay->n_tensors - 1, t;

    if (s < 0 || s >= ct_gpt_cuda_stages(lay))
        return 0;
    if (s == 0) {
        idx[0] = last;
        idx[1] = last - 1;
        return 2;
    }
    if (s == 1 + 6 * L) {
        idx[0] = 1;
        idx[1] = 0;
        return 2;
    }
    t = 2 + (L - 1 - (s - 1) / 6) * CT_GPT_BLOCK_TENSORS + weight[(s - 1) % 6];
    idx[0] = t + 1;
    idx[1] = t;
    return 2;
}

int ct_gpt_cuda_announce(const ct_gpt_cuda_layout *lay, int s, ct_grad_ready_fn ready, void *ctx)
{
    int idx[2], n = ct_gpt_cuda_stage_tensors(lay, s, idx), rc = 0;

    for (int i = 0; i < n && ready && rc == 0; i++)
        rc = ready(ctx, lay->offset[idx[i]], lay->numel[idx[i]]);
    return rc;
}

int ct_gpt_cuda_sync(const ct_gpt_cuda_layout *lay, int dir, ct_gpt *host, ct_optim *o, float *dev_params,
                     float *const *dev_states, int n_dev_states, ct_gpt_copy_fn copy, void *ctx, ct_error *err)
{
    size_t bytes = sizeof(float) * lay->n_params;
    int rc;

    /* A host model of another shape or type would be read or written past its arrays. */
    if (ct_gpt_param_dtype(host) != CT_DTYPE_F32 || ct_gpt_num_params(host) != lay->n_params ||
        ct_gpt_num_tensors(host) != lay->n_tensors)
        return ct_error_set(err, CT_EINVAL, "model-layout", "cuda gpt: the host model's layout differs (%zu "
                            "parameters in %d tensors, the device holds %zu in %d)", ct_gpt_num_params(host),
                            ct_gpt_num_tensors(host), lay->n_params, lay->n_tensors);
    for (int i = 0; i < lay->n_tensors; i++)
        if (ct_gpt_tensor(host, i)->offset != lay->offset[i] || ct_gpt_tensor(host, i)->numel != lay->numel[i])
            return ct_error_set(err, CT_EINVAL, "model-layout", "cuda gpt: tensor %s is elsewhere on the host",
                                ct_gpt_tensor(host, i)->name);
    if (o && (ct_optim_dtype(o) != CT_DTYPE_F32 || ct_optim_num_states(o) != n_dev_states))
        return ct_error_set(err, CT_EINVAL, "model-layout", "cuda gpt: the optimizer keeps %d state arrays of "
                            "%zu-byte elements, the device %d of fp32", ct_optim_num_states(o),
                            ct_dtype_size(ct_optim_dtype(o)), n_dev_states);
    if ((rc = copy(ctx, dir, ct_gpt_params(host), dev_params, bytes)))
        return ct_error_set(err, CT_EIO, "cuda", "cuda gpt: copying the parameters %s failed",
                            dir == CT_GPT_TO_HOST ? "to the host" : "to the device");
    for (int i = 0; o && i < n_dev_states; i++)
        if ((rc = copy(ctx, dir, ct_optim_state(o, i), dev_states[i], bytes)))
            return ct_error_set(err, CT_EIO, "cuda", "cuda gpt: copying the optimizer's %s %s failed",
                                ct_optim_state_name(o, i), dir == CT_GPT_TO_HOST ? "to the host" : "to the device");
    return 0;
}

int ct_gpt_cuda_check_tokens(const ct_gpt_cuda_layout *lay, const int32_t *inputs, const int32_t *targets, size_t n,
                             ct_error *err)
{
    const int32_t *const arrays[2] = { inputs, targets };
    static const char *const what[2] = { "input", "target" };
    int V = lay->cfg.vocab;

    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < n; i++)
            if (arrays[a][i] < 0 || arrays[a][i] >= V) {
                ct_error_set(err, CT_EINVAL, "tokens-vocab", "cuda gpt: %s token %d at position %zu of the batch is "
                             "outside the vocabulary (0..%d)", what[a], (int)arrays[a][i], i, V - 1);
                return ct_error_hint(err, "the tokens' vocabulary must match --model-config vocab");
            }
    return 0;
}

int ct_gpt_cuda_attention_choice(const ct_gpt_config *cfg, enum ct_gpt_cuda_attention asked,
                                 enum ct_gpt_cuda_attention *out, ct_error *err)
{
    int HS = cfg->n_embd / cfg->n_head;

    if (asked == CT_GPT_ATT_FLASH && HS > CT_GPT_CUDA_FLASH_MAX_HS) {
        ct_error_set(err, CT_ENOTAVAIL, "model-config-value", "flash attention takes heads of %d channels at most, "
                     "not %d", CT_GPT_CUDA_FLASH_MAX_HS, HS);
        return ct_error_hint(err, "use more heads, or the simple attention");
    }
    *out = asked == CT_GPT_ATT_FLASH ? CT_GPT_ATT_FLASH : CT_GPT_ATT_SIMPLE;
    return 0;
}

int ct_gpt_cuda_padded_vocab(int vocab)
{
    return (vocab + 63) / 64 * 64;
}

unsigned ct_gpt_cuda_alignment(const void *p)
{
    uintptr_t a = (uintptr_t)p;

    if (a == 0 || (a & 255) == 0)
        return 256;
    return (unsigned)(a & -a);
}

void ct_gpt_cuda_gemm_key_set(ct_gpt_cuda_gemm_key *key, const ct_gpt_cuda_gemm_shape *s)
{
    memset(key, 0, sizeof(*key)); /* no stray bytes: keys compare with memcmp */
    key->ta = s->ta;
    key->tb = s->tb;
    key->m = s->m;
    key->n = s->n;
    key->k = s->k;
    key->lda = s->lda;
    key->ldb = s->ldb;
    key->ldd = s->ldd;
    key->ld_aux = s->ld_aux;
    key->a_type = s->a_type;
    key->b_type = s->b_type;
    key->d_type = s->d_type;
    key->epilogue = s->epilogue;
    key->align_a = ct_gpt_cuda_alignment(s->a);
    key->align_b = ct_gpt_cuda_alignment(s->b);
    key->align_d = ct_gpt_cuda_alignment(s->d);
    key->align_bias = ct_gpt_cuda_alignment(s->bias);
    key->align_aux = ct_gpt_cuda_alignment(s->aux);
}

int ct_gpt_cuda_gemm_cache_slot(ct_gpt_cuda_gemm_cache *c, const ct_gpt_cuda_gemm_key *key, int *fresh)
{
    for (int i = 0; i < c->n; i++)
        if (!memcmp(&c->key[i], key, sizeof(*key))) {
            *fresh = 0;
            return i;
        }
    if (c->n == CT_GPT_CUDA_GEMM_SLOTS)
        return -1;
    c->key[c->n] = *key;
    *fresh = 1;
    return c->n++;
}

void ct_gpt_cuda_gemm_cache_drop(ct_gpt_cuda_gemm_cache *c, int slot)
{
    if (slot >= 0 && slot == c->n - 1)
        c->n--;
}

int ct_gpt_cuda_loss_slot(uint64_t seq, int back)
{
    if (back < 0 || back >= CT_GPT_CUDA_LOSS_RING || (uint64_t)back >= seq)
        return -1;
    return (int)((seq - 1 - (uint64_t)back) % CT_GPT_CUDA_LOSS_RING);
}

float ct_gpt_cuda_classifier_ref(uint16_t *logits, int V, int target, uint16_t *dlogits)
{
    int valid = target >= 0 && target < V;
    float m = -INFINITY, s = 0.0f, inv, loss;

    /* a plain comparison, not fmaxf: gcc 12's aarch64 vectorizer fails on that reduction (an
     * internal compiler error, make test-arm64); both skip NaN */
    for (int j = 0; j < V; j++) {
        float v = ct_bf16_load(logits[j]);

        if (v > m)
            m = v;
    }
    for (int j = 0; j < V; j++)
        s += expf(ct_bf16_load(logits[j]) - m);
    loss = valid ? logf(s) - (ct_bf16_load(logits[target]) - m) : NAN;
    inv = 1.0f / s;
    for (int j = 0; j < V; j++)
        dlogits[j] = ct_bf16_store(expf(ct_bf16_load(logits[j]) - m) * inv - (j == target ? 1.0f : 0.0f));
    return loss;
}

int ct_gpt_cuda_graph_next(ct_gpt_cuda_graph_state *g, int batch, int max_batch)
{
    if (!g->enabled || g->failed || batch != max_batch)
        return CT_GPT_GRAPH_EAGER;
    if (g->captured)
        return CT_GPT_GRAPH_REPLAY;
    if (g->eager_full < 1) {
        g->eager_full++;
        return CT_GPT_GRAPH_EAGER;
    }
    return CT_GPT_GRAPH_CAPTURE;
}

void ct_gpt_cuda_graph_done(ct_gpt_cuda_graph_state *g, int ok)
{
    g->captured = ok;
    g->failed = !ok;
}
