/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the model seam: ctrain's LightningModule.
 *
 * A model is a struct of function pointers over its own state. The engine never knows which model
 * it trains: the Trainer creates the one the plan names (its registry entry, from --model NAME)
 * with the configuration the connector parsed once (--model-config k=v,...), the Accelerator creates its device implementation (ct_model_to_device; on cpu the host
 * model itself), the Strategy hands it out (ct_strategy_model_to_device) and the loops call
 * forward / backward through this header. The optimizer and the learning-rate schedule stay the
 * engine's (include/ctrain/nn.h): a model only exposes its parameters and gradients.
 *
 * Contract every model keeps:
 *  - parameters live in ONE contiguous array and gradients in another with the same layout, of
 *    element type param_dtype (fp32 unless the precision asked for another through
 *    set_param_dtype: 64-true's fp64); named tensors (PyTorch / safetensors names, e.g.
 *    "layers.0.weight", "wte.weight") view the parameter array in forward order and tile it
 *    exactly;
 *  - forward(batch) computes the loss of a batch and keeps what backward needs; it returns SUMS
 *    (loss summed over the batch's loss terms, the number of terms, right predictions) so the
 *    engine can reduce them over ranks and batches exactly. A model that sets
 *    info.announces_params calls need(ctx, offset, count) before it first reads each range of the
 *    parameters, first tensor first, and reads nothing it has not announced (a sharded strategy
 *    then waits for its all-gather of the parameters layer by layer, while earlier layers
 *    compute); every parameter is announced by the end of forward. Without the flag the engine
 *    announces the whole array before forward;
 *  - backward() computes the gradient of the MEAN loss over grad_scale terms, overwriting the
 *    gradient array (no zeroing needed), and calls ready(ctx, offset, count) as each range of the
 *    gradient array is final, last tensor first, so DDP's bucketed allreduce overlaps backward.
 *    A model with info.announces_params calls need(ctx, offset, count) in backward too, before it
 *    reads a range of the parameters again, with the ranges forward announced (each range once per
 *    pass), the last one first — except the first range, which it may announce before the others
 *    when a later layer reads it (a tied weight: GPT's LM head is its token embedding). fsdp
 *    gathers each forward range (its unit) before its forward and its backward and frees it
 *    after; the first range stays gathered from forward's start to backward's end, so parameters
 *    read by two layers (tied) belong in it. Without the flag the engine announces the whole array
 *    before backward (fsdp then gathers everything and frees nothing);
 *  - nothing allocates inside a training step: buffers for the largest batch are made by create.
 *
 * Device implementations (ct_model_register_impl): a model on an accelerator other than the host
 * CPU is a ct_model too, made from the host model; its params/grads are device memory with the
 * host layout (the strategy broadcasts and allreduces them there), it may apply the optimizer's
 * update itself (optim_step) and copies parameters and optimizer state to the host model before a
 * checkpoint (to_host) and back after one is loaded (from_host).
 */
#ifndef CTRAIN_MODEL_H
#define CTRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/config.h"
#include "ctrain/datamodule.h"
#include "ctrain/dtype.h"
#include "ctrain/error.h"
#include "ctrain/nn.h"
#include "ctrain/registry.h"
#include "ctrain/rng.h"

typedef struct ct_model ct_model;

/* What forward returns for one batch (sums, so batches and ranks add up exactly). */
typedef struct ct_model_sums {
    double loss;        /* loss summed over the terms (nats) */
    double count;       /* loss terms: samples (classifier) or predicted tokens (language model) */
    double correct;     /* right argmax predictions (0 when the model has no accuracy) */
} ct_model_sums;

#define CT_MODEL_MAX_METRICS 4

/* What the engine reports for a model, set by create. */
typedef struct ct_model_info {
    /* 1: correct counts mean something: val_acc / test_acc are reported and the best checkpoint is
     * the highest val_acc. 0: accuracy is not reported and the best checkpoint is the lowest
     * val_loss. */
    int has_accuracy;
    /* Extra metrics derived from the reduced sums, e.g. "bpb" (bits per byte). The engine
     * writes val_<name> and test_<name> into metrics.csv and summary.json. */
    int n_metrics;
    const char *metric_names[CT_MODEL_MAX_METRICS];
    void (*metrics)(const ct_model *m, const ct_model_sums *sums, double *values);
    /* 1: forward and backward call need() before reading each range of the parameters (see the contract). */
    int announces_params;
    /* A language model offering next_token_logits: its vocabulary (tokens 0..vocab-1) and the
     * longest prompt it reads (its context); 0 otherwise. */
    int vocab;
    int context;
} ct_model_info;

/* One of the model's tensors in Hugging Face's layout of the same architecture (hf_tensor). */
typedef struct ct_model_hf_tensor {
    char name[64];      /* "transformer.h.0.attn.c_attn.weight" (GPT2LMHeadModel's state_dict name) */
    int transposed;     /* 1: a 2-D weight stored [in, out] (GPT-2's Conv1D) where the model holds [out, in] */
    int prefix_rows;    /* 1: the model's tensor may be the first rows of a longer one (position
                           embeddings of a longer context: the model then sees a shorter one) */
} ct_model_hf_tensor;

#define CT_MODEL_HF_BUFFER (-2)

/* A tensor of another library's checkpoint, as ct_model_class.hf_config sees it. */
typedef struct ct_model_file_tensor {
    const char *name;
    int ndim;
    const int64_t *shape;
} ct_model_file_tensor;

/* Where and how a device implementation computes (filled by the Accelerator). */
typedef struct ct_model_placement {
    const char *accelerator;   /* "cuda" */
    int device;                /* device id, already current */
    enum ct_dtype gemm_dtype;  /* the precision's GEMM input type */
    int loss_scaling;          /* 16-mixed: dynamic loss scaling */
    int max_batch;             /* the largest batch forward will see */
    ct_optim *optim;           /* the engine's optimizer (config, state), NULL for evaluation only */
} ct_model_placement;

/* The operations of a model (host or device). Entries marked optional may be NULL. */
struct ct_model_ops {
    void (*destroy)(ct_model *m);
    /* Initialise the parameters from the run's PRNG (host models; every rank draws the same, and
     * rank 0's values are broadcast anyway). */
    void (*init)(ct_model *m, ct_rng *r);
    /* The element type the precision stores parameters, gradients and activations in (its
     * param_dtype: CT_DTYPE_F64 for 64-true), called once after create, before init and before
     * anything reads params: the model reallocates its arrays and points params, grads and its
     * tensors' data at them. Optional: a model without it stores fp32 only and the engine refuses
     * another storage type with a hint (as its registry entry's precisions say). */
    int (*set_param_dtype)(ct_model *m, enum ct_dtype dtype, ct_error *err);
    /* The GEMM input type: CT_DTYPE_F32 (32-true) or CT_DTYPE_BF16 (bf16-mixed), or the storage
     * type itself under a "-true" precision. Optional: a model without it runs 32-true only. */
    int (*set_gemm_dtype)(ct_model *m, enum ct_dtype dtype, ct_error *err);
    /* need may be NULL; a non-zero return from it is returned at once (its error is the caller's). */
    int (*forward)(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                   ct_error *err);
    /* need as forward's (may be NULL; the same ctx as ready): see the contract. */
    int (*backward)(ct_model *m, double grad_scale, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx,
                    ct_error *err);
    /* Optional (device implementations): apply the update of o to the model's own arrays; *skipped
     * = 1 when a loss-scaled step overflowed and nothing changed. NULL: the engine runs
     * ct_optim_step(o, params, grads) on the host arrays. */
    int (*optim_step)(ct_model *m, ct_optim *o, int *skipped, ct_error *err);
    /* Optional: buffers for a batch of up to max_batch samples (pinned host memory that the device
     * copies from). NULL: the engine mallocs them. */
    int (*batch_buffers)(ct_model *m, ct_batch *b, ct_error *err);
    /* Optional (device implementations): parameters and optimizer state (o may be NULL) to the host
     * model's arrays, and back. */
    int (*to_host)(ct_model *m, ct_optim *o, ct_error *err);
    int (*from_host)(ct_model *m, const ct_optim *o, ct_error *err);
    /* Optional: extra numbers for summary.json (16-mixed: skipped steps and loss scale). */
    void (*stats)(const ct_model *m, int64_t *skipped_steps, double *loss_scale);
    /* Optional (autoregressive language models, host models; ctrain generate): the unnormalised
     * logits[info.vocab] of the token that follows tokens[0..len), 1 <= len <= info.context, every
     * token < info.vocab. Needs a model created with max_batch >= 1; no training step in between. */
    int (*next_token_logits)(ct_model *m, const int32_t *tokens, int len, float *logits, ct_error *err);
    /* Optional (fit --init-from, ctrain export --format hf): tensor i (0..n_tensors-1) in Hugging
     * Face's layout. hf_extra classifies a tensor of that layout the model does not hold: the index
     * of the model's tensor it is tied to (GPT-2's lm_head.weight is wte.weight), CT_MODEL_HF_BUFFER
     * for a buffer that holds no weights (GPT-2's attn.bias causal mask), -1 for a name the model
     * does not know (a checkpoint of another architecture: refused). */
    int (*hf_tensor)(const ct_model *m, int i, ct_model_hf_tensor *out);
    int (*hf_extra)(const ct_model *m, const char *hf_name);
    /* Optional, with hf_tensor: the config.json Hugging Face reads for the model (JSON text into
     * buf); non-zero when it does not fit. */
    int (*hf_config_json)(const ct_model *m, char *buf, size_t size);
    /* Optional (device implementations that keep the loss on the device; the training step's, engine/
     * loops/step.c): after defer_loss(m, 1) the next forward does not wait for its loss: out->loss is
     * NaN and the loss sum is copied to the host behind the step's work, read with loss_read (back 0:
     * the last such forward's, back 1: the one before it; it waits for the copy when it is not done).
     * defer_loss(m, 0) (the default) makes forward wait and fill out->loss as without it. */
    void (*defer_loss)(ct_model *m, int on);
    int (*loss_read)(ct_model *m, int back, double *loss_sum, ct_error *err);
    /* Optional (--activation-checkpointing; its registry entry's activation_checkpointing mask says
     * where): on 1, forward keeps only what each unit (a GPT block) takes in and backward recomputes
     * the unit's forward from it just before the unit's backward: the same results bit for bit, the
     * unit's inner activations in buffers one unit's size, made here (after set_param_dtype, before
     * init), not in a step. */
    int (*set_activation_checkpointing)(ct_model *m, int on, ct_error *err);
    /* Optional: the peak bytes of activations MEASURED so far on this rank (the resident pages of
     * its activation buffers, not their sizes); 0 when not measured. */
    size_t (*activation_bytes)(const ct_model *m);
};

/* A model. Implementations fill every field in create (device implementations: in their impl
 * function, with host set). The engine reads the fields and calls the ops. */
struct ct_model {
    const struct ct_model_ops *ops;
    char name[32];             /* the registry name, "mlp" */
    char describe[256];        /* shape summary for checkpoints and logs: "784-512-256-10" */
    ct_model_info info;
    ct_tensor_spec x, y;       /* per-sample input and target it wants (the data module's setup) */
    int max_batch;
    size_t num_params;
    enum ct_dtype param_dtype; /* element type of params, grads and the tensors' data (0: fp32) */
    void *params, *grads;      /* contiguous, num_params each (device memory on a device model) */
    int n_tensors;
    const ct_tensor *tensors;  /* [n_tensors], viewing the HOST parameter array */
    ct_model *host;            /* device implementations: the host model; NULL on the host model */
    void *impl;
};

/* What a model registers (ct_registry_set_ops(CT_REG_MODEL, name, &class), or ct_model_register). */
struct ct_model_class {
    /* A host (cpu, fp32) model from its checked configuration and the data's description; room for
     * batches of max_batch samples. Checks across keys and against the data are the model's:
     * CT_EINVAL with id "model-config-value" (or a more specific catalogue id) naming the keys. */
    int (*create)(const ct_config *cfg, const ct_data_info *data, int max_batch, ct_model **out, ct_error *err);
    /* Optional: the checks across keys that need no data (gpt: n_embd a multiple of n_head), so the
     * connector refuses such a configuration before anything is launched. Same errors as create. */
    int (*check)(const ct_config *cfg, ct_error *err);
    /* The largest evaluation batch (samples) worth its memory; 0: the engine's default (1000). The
     * engine creates the model for max(--batch-size, this) samples. */
    int eval_batch;
    /* Optional: the hint when a checkpoint of this model holds another shape than the run builds,
     * naming the flags that set its shape; NULL: the engine's, which gives the checkpoint's --model
     * and --model-config. */
    const char *shape_hint;
    /* Optional (fit --init-from): the shape of a Hugging Face checkpoint whose tensors are
     * file[0..n) and whose config.json text is config_json (NULL when there is none beside it),
     * set into cfg in place. cfg comes in as the user's checked --model-config: a key the user set
     * that disagrees with the file is CT_EINVAL naming both (keys the file cannot fix, such as a
     * shorter context, may be the user's); it leaves holding the file's shape, each value checked
     * against the schema (ct_config_set). Not this architecture: CT_EFORMAT. The connector calls
     * it through engine/checkpoint's reader of the file (ct_hf_model_config). */
    int (*hf_config)(const ct_model_file_tensor *file, int n, const char *config_json, ct_config *cfg,
                     ct_error *err);
};

/* A device implementation of a model on an accelerator, made from the host model. */
typedef int (*ct_model_impl_fn)(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err);

/* --- registering (engine/models/model.c) ------------------------------------------------------ */
/* Register a model defined outside libctrain (a user program): entry (name, description, config
 * schema, accelerators, precisions; copied) and its class. Before the connector is created. */
int ct_model_register(const ct_registry_entry *entry, const struct ct_model_class *cls, ct_error *err);
/* Register fn as model's implementation on accelerator (libctrain does it for "mlp" on "cuda"). */
int ct_model_register_impl(const char *model, const char *accelerator, ct_model_impl_fn fn);
/* The registered implementation, or NULL (then the model does not run there). */
ct_model_impl_fn ct_model_find_impl(const char *model, const char *accelerator);

/* --- what the engine calls --------------------------------------------------------------------- */
/* Create model (its registry entry: the plan's) from cfg, the configuration parsed against its
 * schema (the plan's model_config). CT_ENOTAVAIL when no class is linked for it. */
int ct_model_create_config(const ct_registry_entry *model, const ct_config *cfg, const ct_data_info *data,
                           int max_batch, ct_model **out, ct_error *err);
/* Create the registered model name from config text read from a file (a checkpoint's metadata):
 * parsed against its schema, then ct_model_create_config. */
int ct_model_create(const char *name, const char *config, const ct_data_info *data, int max_batch, ct_model **out,
                    ct_error *err);
void ct_model_free(ct_model *m);
/* The evaluation batch of model (a registry entry): its class's eval_batch, else dflt. */
int ct_model_eval_batch(const ct_registry_entry *model, int dflt);
/* The hint for a checkpoint of model (a registry entry, or NULL when unknown) that holds another
 * shape: the class's shape_hint, else NULL (then the caller names the checkpoint's flags). */
const char *ct_model_shape_hint(const ct_registry_entry *model);
void ct_model_init(ct_model *m, ct_rng *r);
int ct_model_set_gemm_dtype(ct_model *m, enum ct_dtype dtype, ct_error *err);
/* The storage type of the parameters (after create, before init): the model's set_param_dtype;
 * fp32 needs none; another type on a model without it is CT_ENOTAVAIL "model-precision-unsupported"
 * with a hint. */
int ct_model_set_param_dtype(ct_model *m, enum ct_dtype dtype, ct_error *err);
/* Forward; need (may be NULL) hears of every range of the parameters before forward reads it (the
 * whole array first when the model does not announce). A need failure returns its code, with
 * err untouched (the caller's callback holds the message); a model that announced less than its
 * parameters is CT_EINTERNAL. */
int ct_model_forward(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                     ct_error *err);
/* Backward; need (may be NULL, the same ctx as ready) as forward's: the whole array first when the
 * model does not announce; ready hears of each finished gradient range. */
int ct_model_backward(ct_model *m, double grad_scale, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx,
                      ct_error *err);
/* The update: the model's optim_step, else ct_optim_step on params/grads. */
int ct_model_optim_step(ct_model *m, ct_optim *o, int *skipped, ct_error *err);
/* Batch buffers for max_batch samples of the model's x and y specs (the model's, or malloc'd:
 * ct_model_free_batch frees only those). */
int ct_model_batch_buffers(ct_model *m, ct_batch *b, ct_error *err);
void ct_model_free_batch(ct_model *m, ct_batch *b);
int ct_model_to_host(ct_model *m, ct_optim *o, ct_error *err);
int ct_model_from_host(ct_model *m, const ct_optim *o, ct_error *err);
/* The host model (m itself on the host). */
ct_model *ct_model_host(ct_model *m);
/* Whether the model can keep its loss on the device (defer_loss and loss_read); the two below do
 * nothing (defer) or fail with CT_EINTERNAL (read) on a model that cannot. */
int ct_model_defers_loss(const ct_model *m);
void ct_model_defer_loss(ct_model *m, int on);
int ct_model_loss_read(ct_model *m, int back, double *loss_sum, ct_error *err);
/* Activation checkpointing on (the plan's --activation-checkpointing): the model's op; a model
 * without it is CT_ENOTAVAIL "model-activation-checkpointing-unsupported" with a hint (the connector
 * refuses such a plan first, from the registry entry). */
int ct_model_set_activation_checkpointing(ct_model *m, int on, ct_error *err);
/* The model's measured peak activation bytes (activation_bytes), or 0 when it measures none. */
size_t ct_model_activation_bytes(const ct_model *m);

/* --- using a trained model (ctrain generate, export, fit --init-from) ---------------------------- */
/* The logits after tokens[0..len). A model without next_token_logits: CT_EINVAL naming it, with
 * a hint (id "model-no-logits"); len outside 1..info.context or a token outside the vocabulary:
 * CT_EINVAL. */
int ct_model_next_token_logits(ct_model *m, const int32_t *tokens, int len, float *logits, ct_error *err);
/* 1 when the model maps its tensors to Hugging Face's layout (hf_tensor and hf_config_json). */
int ct_model_has_hf(const ct_model *m);
int ct_model_hf_map(const ct_model *m, int i, ct_model_hf_tensor *out);
int ct_model_hf_extra(const ct_model *m, const char *hf_name);
int ct_model_hf_config_json(const ct_model *m, char *buf, size_t size);

#endif
