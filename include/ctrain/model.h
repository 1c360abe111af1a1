/* ctrain — the model seam: ctrain's LightningModule.
 *
 * A model is a struct of function pointers over its own state. The engine never knows which model
 * it trains: the Trainer creates one by name (--model NAME, --model-config k=v,...) from the
 * registry, the Accelerator creates its device implementation (ct_model_to_device; on cpu the host
 * model itself), the Strategy hands it out (ct_strategy_model_to_device) and the loops call
 * forward / backward through this header. The optimizer and the learning-rate schedule stay the
 * engine's (include/ctrain/nn.h): a model only exposes its parameters and gradients.
 *
 * Contract every model keeps:
 *  - parameters live in ONE contiguous fp32 array and gradients in another with the same layout;
 *    named tensors (PyTorch / safetensors names, e.g. "layers.0.weight", "wte.weight") view the
 *    parameter array in forward order and tile it exactly;
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
 *    gradient array is final, last tensor first, so DDP's bucketed allreduce overlaps backward;
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
    /* 1: forward calls need() before reading each range of the parameters (see the contract). */
    int announces_params;
} ct_model_info;

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
    /* The GEMM input type: CT_DTYPE_F32 (32-true) or CT_DTYPE_BF16 (bf16-mixed). Optional: a
     * model without it runs 32-true only. */
    int (*set_gemm_dtype)(ct_model *m, enum ct_dtype dtype, ct_error *err);
    /* need may be NULL; a non-zero return from it is returned at once (its error is the caller's). */
    int (*forward)(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                   ct_error *err);
    int (*backward)(ct_model *m, double grad_scale, ct_grad_ready_fn ready, void *ctx, ct_error *err);
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
    float *params, *grads;     /* contiguous, num_params each (device memory on a device model) */
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
/* Create the registered model name from config text (checked against its schema). */
int ct_model_create(const char *name, const char *config, const ct_data_info *data, int max_batch, ct_model **out,
                    ct_error *err);
void ct_model_free(ct_model *m);
/* The evaluation batch of the registered model name: its class's eval_batch, else dflt. */
int ct_model_eval_batch(const char *name, int dflt);
void ct_model_init(ct_model *m, ct_rng *r);
int ct_model_set_gemm_dtype(ct_model *m, enum ct_dtype dtype, ct_error *err);
/* Forward; need (may be NULL) hears of every range of the parameters before forward reads it (the
 * whole array first when the model does not announce). A need failure returns its code, with
 * err untouched (the caller's callback holds the message); a model that announced less than its
 * parameters is CT_EINTERNAL. */
int ct_model_forward(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                     ct_error *err);
int ct_model_backward(ct_model *m, double grad_scale, ct_grad_ready_fn ready, void *ctx, ct_error *err);
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

#endif
