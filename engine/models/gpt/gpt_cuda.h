/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT on a CUDA device (internal to libctrain), written as llm.c's train_gpt2.cu: a function per
 * layer forward and backward, cuBLASLt GEMMs (bf16 or fp32 inputs, fp32 accumulation, bias and GELU
 * epilogues), one compute stream, nothing allocated inside a step.
 *
 * Two halves:
 *  - gpt_cuda_host.c (plain C, every build, unit-tested without a GPU: t/unit/test_gpt_cuda.c): the
 *    layout the device code indexes (read off the cpu GPT's own tensors, so it cannot drift), the
 *    order backward announces gradient ranges in (the cpu GPT's, for DDP's buckets), and the copy of
 *    parameters and optimizer state between the device and the host model + optimizer through a
 *    copy function (cudaMemcpy on the device, memcpy in the unit test), which is how checkpoints
 *    move between cpu and cuda: they are always written from the host model.
 *  - gpt_cuda.cu (CT_HAVE_CUDA builds): the kernels, the layers and the step.
 *
 * Status: compiled with nvcc, not yet run on a GPU (README ## GPUs); the connector refuses
 * --model gpt --accelerator cuda until t/tools/gpt_cuda_check has passed on one.
 */
#ifndef CTRAIN_MODELS_GPT_CUDA_H
#define CTRAIN_MODELS_GPT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "ctrain/dtype.h"
#include "ctrain/error.h"
#include "ctrain/nn.h"
#include "engine/models/gpt/gpt.h"

/* --- host side (gpt_cuda_host.c) ------------------------------------------------------------ */

/* Tensors of one block, in layout order (gpt_internal.h's BLK_*). */
enum {
    CT_GPT_LN1_W, CT_GPT_LN1_B, CT_GPT_ATTN_W, CT_GPT_ATTN_B, CT_GPT_APROJ_W, CT_GPT_APROJ_B,
    CT_GPT_LN2_W, CT_GPT_LN2_B, CT_GPT_FC_W, CT_GPT_FC_B, CT_GPT_FPROJ_W, CT_GPT_FPROJ_B,
    CT_GPT_BLOCK_TENSORS
};

/* Element offsets into the one parameter (and gradient) array, and each tensor's size. */
typedef struct ct_gpt_cuda_layout {
    ct_gpt_config cfg;
    size_t n_params;
    int n_tensors;
    size_t wte, wpe;
    size_t blk[CT_GPT_MAX_LAYER][CT_GPT_BLOCK_TENSORS];
    size_t lnf_w, lnf_b;
    size_t offset[2 + CT_GPT_MAX_LAYER * CT_GPT_BLOCK_TENSORS + 2]; /* every tensor, layout order */
    size_t numel[2 + CT_GPT_MAX_LAYER * CT_GPT_BLOCK_TENSORS + 2];
} ct_gpt_cuda_layout;

/* The layout of host's tensors (the cpu GPT's own offsets). CT_ENOTAVAIL unless host stores fp32. */
int ct_gpt_cuda_layout_of(const ct_gpt *host, ct_gpt_cuda_layout *out, ct_error *err);

/* Backward announces tensors in stages, each stage's tensors as soon as the kernels and GEMMs that
 * finish them are enqueued: stage 0 ln_f; per block l from the last down, stages 1 + 6*(L-1-l) +
 * 0..5: mlp.c_proj, mlp.c_fc, ln_2, attn.c_proj, attn.c_attn, ln_1; the last stage (1 + 6L) wpe then
 * wte (the tied wte is final last). In each stage the bias before the weight: the exact reverse of
 * the layout, as the cpu GPT announces. */
int ct_gpt_cuda_stages(const ct_gpt_cuda_layout *lay);
/* The tensors (layout indexes) stage s announces, in order, into idx[2]; returns how many. */
int ct_gpt_cuda_stage_tensors(const ct_gpt_cuda_layout *lay, int s, int idx[2]);
/* ready(ctx, offset, numel) for stage s's tensors; the first non-zero return. */
int ct_gpt_cuda_announce(const ct_gpt_cuda_layout *lay, int s, ct_grad_ready_fn ready, void *ctx);

/* Every input and target token of a batch of n in the vocabulary [0, vocab): the kernels index wte's
 * rows by the inputs and the logits by the targets. CT_EINVAL naming the first one outside. */
int ct_gpt_cuda_check_tokens(const ct_gpt_cuda_layout *lay, const int32_t *inputs, const int32_t *targets, size_t n,
                             ct_error *err);

/* Attention: the simple path (batched cuBLAS QK^T, a causal softmax kernel, then ·V; keeps the
 * [B,NH,T,T] probabilities per layer) or the fused flash-style kernels (online softmax, O(T) memory,
 * recomputed in backward; head size 128 at most). AUTO is the simple path at every seq_len: its GEMMs
 * run on tensor cores, while the flash kernels are CUDA-core code (a lane per row, scalar dot
 * products: an estimated 0.25-0.9 s per GPT-2 small step against 42-50 ms), kept for its O(T) memory
 * and as the reference for a tensor-core attention; AUTO changes only once one has run on a GPU. */
enum ct_gpt_cuda_attention { CT_GPT_ATT_AUTO, CT_GPT_ATT_SIMPLE, CT_GPT_ATT_FLASH };
#define CT_GPT_CUDA_FLASH_MAX_HS 128

/* The path cfg runs for what was asked (AUTO: the default) into *out; CT_ENOTAVAIL for flash asked
 * for with heads over CT_GPT_CUDA_FLASH_MAX_HS channels. */
int ct_gpt_cuda_attention_choice(const ct_gpt_config *cfg, enum ct_gpt_cuda_attention asked,
                                 enum ct_gpt_cuda_attention *out, ct_error *err);

/* --- cuBLASLt bookkeeping (host side: unit-tested without a GPU) --------------------------------- */

/* The logits' row stride and the LM head's rows under bf16-mixed: vocab rounded up to a multiple of 64
 * (GPT-2's 50257 to 50304), the extra rows of the padded bf16 wte copy zero (their logits are 0 and
 * never read). */
int ct_gpt_cuda_padded_vocab(int vocab);

/* The largest power of two, at most 256, that divides p's address (256 for NULL): what cuBLASLt's
 * CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES preferences are set to, so the heuristic offers only
 * algorithms that take the real pointers (it assumes 256 otherwise). */
unsigned ct_gpt_cuda_alignment(const void *p);

/* Everything a cuBLASLt matmul's descriptors and its algorithm depend on; the pointers themselves (A,
 * B, D, the epilogue's bias and aux) are not part of it, their alignment is (the heuristic reads the
 * bias and aux pointers' values for theirs, cublasLt.h says). Types and epilogue hold cudaDataType_t
 * and cublasLtEpilogue_t values. Made whole with ct_gpt_cuda_gemm_key_set (keys compare as bytes). */
typedef struct ct_gpt_cuda_gemm_key {
    int32_t ta, tb, m, n, k, lda, ldb, ldd, ld_aux;
    int32_t a_type, b_type, d_type, epilogue;
    uint32_t align_a, align_b, align_d, align_bias, align_aux;
} ct_gpt_cuda_gemm_key;

typedef struct ct_gpt_cuda_gemm_shape {
    int ta, tb, m, n, k, lda, ldb, ldd, ld_aux;
    int a_type, b_type, d_type, epilogue;
    const void *a, *b, *d, *bias, *aux;
} ct_gpt_cuda_gemm_shape;

void ct_gpt_cuda_gemm_key_set(ct_gpt_cuda_gemm_key *key, const ct_gpt_cuda_gemm_shape *s);

/* The descriptors and algorithm of each key met, built once (a step has about 15 distinct GEMMs; a
 * batch of another size adds its own): the device side keeps its entry for slot i in its own array. */
#define CT_GPT_CUDA_GEMM_SLOTS 64
typedef struct ct_gpt_cuda_gemm_cache {
    int n;
    ct_gpt_cuda_gemm_key key[CT_GPT_CUDA_GEMM_SLOTS];
} ct_gpt_cuda_gemm_cache;

/* key's slot: the one holding it (*fresh = 0), else the next free one, now holding it (*fresh = 1: the
 * caller builds its entry; ct_gpt_cuda_gemm_cache_drop if that fails); -1 when every slot is taken
 * (the caller builds and frees an entry for this call alone). */
int ct_gpt_cuda_gemm_cache_slot(ct_gpt_cuda_gemm_cache *c, const ct_gpt_cuda_gemm_key *key, int *fresh);
/* Forgets the slot ct_gpt_cuda_gemm_cache_slot just added (the last one). */
void ct_gpt_cuda_gemm_cache_drop(ct_gpt_cuda_gemm_cache *c, int slot);

/* Under bf16-mixed the optimizer's kernel writes each updated parameter's bf16 copy in the same pass:
 * wte's elements (offsets w0 .. w0 + n_wte) into the LM head's padded copy at i - w0, every other one
 * into the parameters' copy at i. 1 when parameter i is one of wte's. (Shared by the kernel and the
 * unit test.) */
#ifdef __CUDACC__
#define CT_GPT_CUDA_HD __host__ __device__
#else
#define CT_GPT_CUDA_HD
#endif
static inline CT_GPT_CUDA_HD int ct_gpt_cuda_param_in_wte(size_t i, size_t w0, size_t n_wte)
{
    return i >= w0 && i - w0 < n_wte;
}

/* The fused classifier's arithmetic on one row of V bf16 logits, on the host: under bf16-mixed the LM
 * head's GEMM writes the logits in bf16 and the classifier kernel reads them, computes in fp32 — the
 * row's max and sum of exponentials, the loss log(sum) - (logit[target] - max) — and writes softmax -
 * onehot rounded to bf16 over them, in place. Returns the loss; dlogits may be logits. A target
 * outside [0, V): the loss is NaN and the row has no one-hot (the host refuses such targets first).
 * The reference gpt_cuda_check holds the kernel to on a GPU (ct_gpt_cuda_classifier_rows). */
float ct_gpt_cuda_classifier_ref(uint16_t *logits, int V, int target, uint16_t *dlogits);

/* The loss without a per-step host wait: a forward of the training step (deferred) sums its loss on
 * the device and copies the sum into a pinned slot behind the step's work, an event recorded after
 * it; the training loop reads it a step later (ct_gpt_cuda_loss_read). The slots form a ring of the
 * last CT_GPT_CUDA_LOSS_RING deferred forwards: the slot of the one `back` before the last of seq
 * deferred forwards (seq counts from 1), or -1 when it is not kept (older, or never made). */
#define CT_GPT_CUDA_LOSS_RING 2
int ct_gpt_cuda_loss_slot(uint64_t seq, int back);

/* The forward's compute (embedding to the classifier) in a CUDA graph (ct_gpt_cuda_options.graph, off by
 * default until it has run on a GPU): the same shapes every step, so a full batch's forward is captured
 * once and replayed; a batch of another size (the epoch's last, smaller one) runs without. The first
 * full-batch forward runs eagerly (cuBLASLt's plans are built then, outside any capture); the second
 * is captured and launched; later ones replay. A capture or instantiation that fails turns graphs off
 * for the model (that forward runs eagerly). The token copies, the weights' bf16 copy and the loss sum
 * stay outside the graph (their events and ring slot change from step to step). */
enum { CT_GPT_GRAPH_EAGER, CT_GPT_GRAPH_CAPTURE, CT_GPT_GRAPH_REPLAY };
typedef struct ct_gpt_cuda_graph_state {
    int enabled;
    int eager_full;   /* full-batch forwards run eagerly so far */
    int captured;     /* a graph of the full batch's forward exists */
    int failed;       /* capture or instantiation failed: no graphs for this model */
} ct_gpt_cuda_graph_state;

/* What the forward of a batch of `batch` (at most max_batch) does: EAGER, CAPTURE or REPLAY. */
int ct_gpt_cuda_graph_next(ct_gpt_cuda_graph_state *g, int batch, int max_batch);
/* After a CAPTURE: ok 1 (captured, instantiated) or 0 (failed: graphs off). */
void ct_gpt_cuda_graph_done(ct_gpt_cuda_graph_state *g, int ok);

/* Moves n bytes between host memory and the device's (dir: CT_GPT_TO_HOST copies dev to host). */
enum { CT_GPT_TO_HOST, CT_GPT_TO_DEVICE };
typedef int (*ct_gpt_copy_fn)(void *ctx, int dir, void *host, void *dev, size_t bytes);

/* The device's parameters and optimizer states (dev_states[i], n_dev_states of them) to or from
 * the host GPT's parameter array and o's states (o may be NULL: parameters only). Checks the host
 * stores fp32 in lay's layout and o's states are fp32 of the same size; CT_EINVAL otherwise. */
int ct_gpt_cuda_sync(const ct_gpt_cuda_layout *lay, int dir, ct_gpt *host, ct_optim *o, float *dev_params,
                     float *const *dev_states, int n_dev_states, ct_gpt_copy_fn copy, void *ctx, ct_error *err);

/* --- device side (gpt_cuda.cu) ------------------------------------------------------------- */

typedef struct ct_gpt_cuda ct_gpt_cuda;

typedef struct ct_gpt_cuda_options {
    enum ct_gpt_cuda_attention attention;
    /* 1: no cuBLASLt epilogues (bias, GELU, dGELU run as kernels after plain GEMMs), the path a GEMM
     * takes anyway when cuBLASLt offers no algorithm with its epilogue; for the GPU check. */
    int no_epilogues;
    /* 1: the forward's compute in a CUDA graph (ct_gpt_cuda_graph_next); off by default: never run. */
    int graph;
} ct_gpt_cuda_options;

/* On the current device, host's config, layout and parameters, o's state (o may be NULL: no
 * update); gemm_dtype CT_DTYPE_F32 (32-true) or CT_DTYPE_BF16 (bf16-mixed); opt NULL for the
 * defaults. CT_ENOTAVAIL for n_embd not a multiple of 8 (cuBLASLt's 16-byte alignment of every
 * tensor) or flash attention asked for with a head size over 128. */
int ct_gpt_cuda_create(ct_gpt *host, const ct_optim *o, int max_batch, enum ct_dtype gemm_dtype,
                       const ct_gpt_cuda_options *opt, ct_gpt_cuda **out, ct_error *err);
void ct_gpt_cuda_free(ct_gpt_cuda *d);

/* Pinned host buffers of max_batch*seq_len tokens the caller fills before forward. */
int32_t *ct_gpt_cuda_batch_inputs(ct_gpt_cuda *d);
int32_t *ct_gpt_cuda_batch_targets(ct_gpt_cuda *d);

/* Copies the batch in, runs forward; *loss_sum gets the summed cross-entropy in nats (waits for it).
 * loss_sum NULL: a deferred forward (the training step's): it waits only until the batch's tokens
 * are on the device (the pinned buffers may then be refilled), its loss sum stays on the device and
 * is copied behind the step's work, for ct_gpt_cuda_loss_read. The fused classifier leaves
 * (softmax - onehot) where the logits were: the probabilities are never stored. */
int ct_gpt_cuda_forward(ct_gpt_cuda *d, int batch, double *loss_sum, ct_error *err);
/* gpt_cuda_check's (bf16-mixed models): the fused classifier's kernel on rows (at most max_batch *
 * seq_len) of host bf16 logits, each row padded to ct_gpt_cuda_padded_vocab(vocab), and targets,
 * in place as in a step: logits get softmax - onehot in bf16, losses[rows] each row's loss. Uses the
 * model's logits and targets (backward of its last forward is refused after it). Synchronous. */
int ct_gpt_cuda_classifier_rows(ct_gpt_cuda *d, uint16_t *logits, const int32_t *targets, int rows, float *losses,
                                ct_error *err);
/* The loss sum of the deferred forward `back` before the last one (0: the last), waiting for its copy
 * if it is not on the host yet; CT_EINTERNAL when it is not kept (ct_gpt_cuda_loss_slot). */
int ct_gpt_cuda_loss_read(ct_gpt_cuda *d, int back, double *loss_sum, ct_error *err);
/* Backward of the last forward's summed loss / scale_tokens; gradients overwritten. ready hears of
 * each tensor as its gradient is enqueued on the compute stream (ct_gpt_cuda_announce's order;
 * offsets into ct_gpt_cuda_grads(), device memory). */
int ct_gpt_cuda_backward(ct_gpt_cuda *d, double scale_tokens, ct_grad_ready_fn ready, void *ctx, ct_error *err);
/* The global L2 norm of the gradients (two-stage reduction, fixed order: the same bits every run);
 * waits for it. */
int ct_gpt_cuda_grad_norm(ct_gpt_cuda *d, double *norm, ct_error *err);
/* Clipping by norm on the device without a host round trip: gradients times
 * min(1, max_norm / (norm + 1e-6)), the norm reduced on the device first (torch's clip_grad_norm_). */
int ct_gpt_cuda_clip_grad_norm(ct_gpt_cuda *d, double max_norm, ct_error *err);
/* One AdamW or SGD update over the one contiguous parameter array (o's config; its step count
 * advanced); under bf16-mixed the same pass writes the updated weights' bf16 copy the next forward
 * reads. Weights written any other way must come through ct_gpt_cuda_from_host, or before the first
 * forward after it (the NCCL broadcast of the initial weights does): that forward makes the copy. */
int ct_gpt_cuda_optim_step(ct_gpt_cuda *d, ct_optim *o, ct_error *err);

float *ct_gpt_cuda_params(ct_gpt_cuda *d);
float *ct_gpt_cuda_grads(ct_gpt_cuda *d);
const ct_gpt_cuda_layout *ct_gpt_cuda_get_layout(const ct_gpt_cuda *d);

/* Parameters and optimizer state to the host model and o (before a checkpoint) and back (after a
 * load or a broadcast on the host). Synchronous. */
int ct_gpt_cuda_to_host(ct_gpt_cuda *d, ct_gpt *host, ct_optim *o, ct_error *err);
int ct_gpt_cuda_from_host(ct_gpt_cuda *d, ct_gpt *host, const ct_optim *o, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
