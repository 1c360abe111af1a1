/* SPDX-License-Identifier: BSD-3-Clause */
/* What a strategy implementation sees: struct ct_strategy and the ops it registers.
 * create.c allocates a ct_strategy from the connector's plan and hands it its parts; the public functions in
 * engine/strategies/strategy.c dispatch to ops. Trainer and loops use include/ctrain/strategy.h only. */
#ifndef CTRAIN_STRATEGY_IMPL_H
#define CTRAIN_STRATEGY_IMPL_H

#include "ctrain/accelerator.h"
#include "ctrain/checkpoint_io.h"
#include "ctrain/config.h"
#include "ctrain/environment.h"
#include "ctrain/launcher.h"
#include "ctrain/precision.h"
#include "ctrain/strategy.h"

struct ct_strategy_ops {
    const char *name;
    /* Parse options, allocate impl. Called once, by ct_strategy_create_from_plan. */
    int (*init)(ct_strategy *s, ct_error *err);
    int (*setup_environment)(ct_strategy *s, ct_error *err);
    /* params and grads hold n elements of s->param_dtype (set before this is called). */
    int (*setup_model)(ct_strategy *s, void *params, void *grads, size_t n, ct_error *err);
    int (*grad_ready)(ct_strategy *s, size_t offset, size_t count, ct_error *err);
    int (*grad_sync)(ct_strategy *s, ct_error *err);
    /* Optional (fsdp): 1 when the strategy sums an accumulation window's gradients itself and
     * hears every micro-batch's readiness; grad_window is called before each micro-batch's backward
     * but the first (micro 1 .. n-1). NULL: the training step sums them. */
    int (*accumulates)(const ct_strategy *s);
    int (*grad_window)(ct_strategy *s, int micro, ct_error *err);
    /* Optional: the reduced gradients this rank's update reads after grad_sync, when they are not
     * the whole gradient array (ddp_sharded stage 2: this rank's shard; *partial = 1: the ranks'
     * views tile the gradient, so a norm sums over the ranks; *partial = 2: a copy of a shard another
     * rank's view holds and counts, fsdp's hybrid_shard on the nodes after the first). NULL: the
     * whole array, the same on every rank. */
    void (*grad_view)(ct_strategy *s, void **grads, size_t *count, int *partial);
    /* Optional (an update still in flight after optimizer_step): wait for the parameters
     * [offset, offset + count) forward is about to read; params_sync waits for all of them. The
     * dispatchers call params_sync before any other collective and before a checkpoint reads or
     * writes the parameters, so only forward ever overlaps the update. */
    int (*params_needed)(ct_strategy *s, size_t offset, size_t count, ct_error *err);
    int (*params_sync)(ct_strategy *s, ct_error *err);
    /* Optional (fsdp): backward is about to read parameters [offset, offset + count). */
    int (*params_needed_backward)(ct_strategy *s, size_t offset, size_t count, ct_error *err);
    /* Optional (fsdp, whose parameter array holds only the units it gathered): every parameter into
     * the model's array, whole (whole 1: before a checkpoint reads it; 0: after, released again);
     * params_written: the model's array
     * was written whole (a checkpoint loaded into it): the strategy takes its shards from it. Both
     * collectives-free for params_written, a collective for params_whole. */
    int (*params_whole)(ct_strategy *s, int whole, ct_error *err);
    int (*params_written)(ct_strategy *s, ct_error *err);
    /* Optional (with gather_shards, where this rank's part of a state array is not one range of
     * it): this rank's part of whole into mine. NULL: mine is [lo, lo + count) of whole. */
    void (*shard_of)(ct_strategy *s, const void *whole, void *mine);
    /* Optional: resident bytes of the strategy's own arrays of parameters, gradients and optimizer
     * state ([0], [1], [2]: fsdp's shards), added to the model's arrays' and the optimizer's when
     * memory is sampled; non-zero: no sample now (fsdp's set-up, while the first forward reads the
     * units off the model over the whole array rank 0 broadcast). */
    int (*resident)(ct_strategy *s, size_t bytes[3]);
    /* Optional: values to sum beside the next gradient exchange (NULL: they stay as they are). */
    int (*post_with_grads)(ct_strategy *s, double *values, int n);
    int (*broadcast)(ct_strategy *s, void *buf, size_t bytes, int root, ct_error *err);
    int (*reduce_sum)(ct_strategy *s, double *values, int n, ct_error *err);
    /* Optional: point to point (ct_strategy_sendrecv); NULL: a strategy without peers. */
    int (*sendrecv)(ct_strategy *s, const void *sendbuf, size_t send_bytes, int to, void *recvbuf,
                    size_t recv_bytes, int from, ct_error *err);
    /* Optional: the update (NULL: the model's whole step, ct_model_optim_step). */
    int (*optimizer_step)(ct_strategy *s, ct_model *model, ct_optim *optim, int *skipped, ct_error *err);
    /* Optional (strategies that shard the optimizer): the shards of mine (this rank's part of one
     * state array) into whole[] on rank 0. A collective. */
    int (*gather_shards)(ct_strategy *s, const void *mine, void *whole, ct_error *err);
    /* Optional (fsdp with state_dict_type=sharded): rank's shard of the parameters as ranges of the
     * parameter array, in the order its shards (parameters and optimizer state alike) concatenate
     * them: up to max (offset, count) pairs into ranges (may be NULL), the number of ranges
     * returned; 0: checkpoints are whole files. mine (rank == this rank): its parameters' shard. */
    int (*shard_layout)(ct_strategy *s, int rank, size_t *ranges, int max, const void **mine);
    void (*teardown)(ct_strategy *s);
    /* Optional: 1 when destroy will end the job (ct_strategy_free_reported); NULL: it never does. */
    int (*ends_job)(const ct_strategy *s);
    void (*destroy)(ct_strategy *s);
};

struct ct_strategy {
    const struct ct_strategy_ops *ops;
    const struct ct_accelerator_ops *accelerator;
    const struct ct_precision_ops *precision;
    const struct ct_checkpoint_io_ops *checkpoint_io;
    const struct ct_launcher_ops *launcher;
    /* What the connector's plan resolved for this strategy. */
    char name[64];
    ct_config options;     /* the plan's strategy_config: typed once by the connector */
    char accelerator_name[32];
    char env_name[32];
    int devices[CT_MAX_DEVICES]; /* device ids on this node */
    int n_devices;
    ct_env_info env_info;  /* the cluster environment as the connector read it */
    /* Rank layout: from the plan at creation, confirmed by setup_environment inside the rank. */
    int world_size;
    int global_rank;
    int local_rank;
    int node_rank;
    int num_nodes;
    int device;
    /* The ranks whose gradients grad_sync adds without averaging (ddp over MPI: the world; 1
     * for every other strategy): backward divides the loss gradient by count x grad_ranks. */
    int grad_ranks;
    double exposed_comm_s; /* time spent waiting in grad_sync */
    char choice[256];      /* ct_strategy_choice: what it chose at setup, and why ("" none) */
    long grad_allreduces;  /* gradient buckets allreduced since setup */
    long grad_allreduces_in_backward; /* of those, started from grad_ready (during backward) */
    long param_gathers;    /* pieces of a parameter all-gather started (ddp_sharded) */
    long param_gathers_overlapped; /* of those, waited for after forward began computing */
    int forward_signal;    /* the launcher forwards it besides SIGINT/SIGTERM; 0: SIGUSR1 */
    int forward_signal2;   /* and this one too (the hang-dump signal); 0: none */
    ct_collective_trace *trace; /* where this rank stands in the collectives (ct_strategy_set_trace) */
    double collective_timeout_s; /* the plan's, set at creation only; <= 0: none */
    char store_run_id[80];  /* ct_strategy_set_store: --run-id, "" none */
    char store_bind[256];   /* --store-bind: "" MASTER_ADDR's addresses, "all", ADDR[,ADDR] */
    char store_secret_file[1024]; /* --store-secret-file, "" none */
    ct_optim *optim;       /* the engine's optimizer, as model_to_device received it */
    void *params;          /* the parameter array setup_model received, n_grads elements */
    void *grads;           /* the gradient array setup_model received, n_grads elements */
    /* The peaks of resident bytes ct_strategy_memory_sample measured: parameters, gradients and
     * optimizer state (CT_MEM_PARAM, CT_MEM_GRAD, CT_MEM_OPTIM). */
    size_t mem_peak[CT_MEM_KINDS];
    int64_t mem_steps;     /* optimizer steps taken: which steps ct_strategy_memory_sample measures */
    size_t n_grads;
    enum ct_dtype param_dtype; /* their element type (the precision's storage type) */
    void *impl;            /* the implementation's state */
    /* The checkpoint IO wrapped for writes in the background (engine/checkpoint_io/async.h), when
     * the Trainer installed it (--async-checkpoint); NULL: every save is written at once. */
    struct ct_async_checkpoint_io *async_io;
    double ckpt_write_s;   /* rank 0: synchronous checkpoint writes (the wrapper counts its own) */
};

/* The asynchronous checkpoint IO's wrapper freed (its pending write waited for first). */
void ct_async_ckpt_free(ct_strategy *s);

/* The strategy's options, as the connector typed them into the plan (strategy_config): a copy in
 * out, whose ct_config_double/int give each value. Parses nothing. */
int ct_strategy_options(const ct_strategy *s, ct_config *out, ct_error *err);


#endif
