/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the Strategy: how training is distributed.
 *
 * The Trainer and loops call the Strategy directly for everything about ranks, which rank writes
 * checkpoints, model setup and collectives. A Strategy owns its parts — accelerator, precision,
 * cluster environment, checkpoint IO and launcher — which it is handed when it is created from the
 * connector's plan (ct_strategy_create_from_plan). The Strategy never calls upward (trainer,
 * loops); it reads the connector's plan only.
 *
 * Gradient synchronisation contract: parameters live in one contiguous fp32 array and gradients
 * in another with the same layout, parameter tensors in forward order. Backward runs from the
 * last tensor to the first and calls ct_strategy_grad_ready() as each range of it is final (a
 * tensor, or row blocks of a large one), contiguous and descending; a DDP strategy starts a
 * bucket's non-blocking allreduce as soon as the bucket is complete, and ct_strategy_grad_sync()
 * waits for the rest. Over MPI the exchange sums the ranks' gradients, it does not average them:
 * each rank's backward has already divided its loss gradient by the global batch
 * (ct_strategy_grad_ranks), so the sum is the mean over the global batch — one pass over every
 * gradient saved each step. (NCCL averages in the collective itself, ncclAvg, and grad_ranks is
 * 1 there.) single_device does nothing there.
 */
#ifndef CTRAIN_STRATEGY_H
#define CTRAIN_STRATEGY_H

#include <stddef.h>

#include "ctrain/accelerator.h"
#include "ctrain/checkpoint_io.h"
#include "ctrain/collective_trace.h"
#include "ctrain/error.h"
#include "ctrain/model.h"
#include "ctrain/nn.h"
#include "ctrain/precision.h"

typedef struct ct_strategy ct_strategy;
struct ct_plan;

/* --- creation from the connector's plan -------------------------------------------------------- */
/* The strategy the plan names, handed the plan's accelerator, precision, checkpoint IO, launcher,
 * cluster environment and devices (the implementations ct_engine_init attached to the registry's
 * names). CT_ENOTAVAIL (implementation-missing) when one is not registered in this process. */
int ct_strategy_create_from_plan(const struct ct_plan *plan, ct_strategy **out, ct_error *err);
void ct_strategy_free(ct_strategy *s);
/* ct_strategy_free, for a caller whose run failed with why (NULL: it did not). Freeing a strategy
 * whose world broke under MPI (a collective timed out or failed) ends the whole job: MPI_Abort
 * ends every rank, this one included, so nothing after the free runs. Then why is printed to
 * stderr first (ct_error_print), as the CLI would have printed it. */
void ct_strategy_free_reported(ct_strategy *s, const ct_error *why);

/* --- what the Trainer asks ------------------------------------------------------------------ */
const char *ct_strategy_name(const ct_strategy *s);
const char *ct_strategy_accelerator_name(const ct_strategy *s);
const struct ct_precision_ops *ct_strategy_precision(const ct_strategy *s);
int ct_strategy_world_size(const ct_strategy *s);
int ct_strategy_global_rank(const ct_strategy *s);
int ct_strategy_num_nodes(const ct_strategy *s);
int ct_strategy_is_global_zero(const ct_strategy *s);

/* --- launching ------------------------------------------------------------------------------ */
/* Body run on every rank. result/result_size: a buffer the body may fill; rank 0's copy comes
 * back to the caller of ct_strategy_launch (through a pipe for the fork launcher). */
typedef int (*ct_rank_fn)(ct_strategy *s, void *arg, void *result, size_t result_size, ct_error *err);

/* Run fn on every rank through the strategy's launcher. Returns fn's rank-0 status (external),
 * or the supervisor's verdict (subprocess, fork): 0 when every rank succeeded. With the subprocess
 * launcher the supervisor (the process that called this) never runs fn itself and result stays as
 * the caller set it (the re-executed ranks report for themselves); no caller needs to tell which. */
int ct_strategy_launch(ct_strategy *s, ct_rank_fn fn, void *arg, void *result, size_t result_size,
                       ct_error *err);

/* A signal the launcher's supervisor forwards to every rank besides SIGINT and SIGTERM (the
 * requeue signal); 0: SIGUSR1, the default. Before launch. */
void ct_strategy_set_forward_signal(ct_strategy *s, int sig);
/* One more signal the supervisor forwards (the hang-dump signal); 0: none. Before launch. */
void ct_strategy_set_forward_signal2(ct_strategy *s, int sig);

/* Hand the strategy the trace it keeps up to date (NULL: none). */
void ct_strategy_set_trace(ct_strategy *s, ct_collective_trace *trace);

/* --- lifecycle, inside a rank ----------------------------------------------------------------- */
/* Join the process group (DDP: MPI over the PMIx-provided world) and select the device. */
int ct_strategy_setup_environment(ct_strategy *s, ct_error *err);
/* Lightning's model_to_device: the model on this rank's device for the strategy's precision (the
 * Accelerator makes the implementation; on cpu *out is host itself). optim: the engine's optimizer
 * (its state moves with the model), max_batch: the largest batch. Then setup_model with *out's
 * params and grads. Free *out with ct_model_free unless it is host. */
int ct_strategy_model_to_device(ct_strategy *s, ct_model *host, ct_optim *optim, int max_batch, ct_model **out,
                                ct_error *err);
/* The host's compute threads for this rank, set up by the accelerator (its host_threads_setup):
 * returns the threads each rank computes on, 0 when the accelerator leaves them as they are. */
int ct_strategy_host_threads_setup(const ct_strategy *s);
/* Memory of this rank's device when it has its own (cuda): 0, or CT_ENOTAVAIL (host memory: cpu). */
int ct_strategy_device_memory(const ct_strategy *s, ct_memstats *out);
/* Hand over the model: params[n] (rank 0's values are broadcast to all), grads[n] (same layout),
 * both of element type dtype (the model's param_dtype: collectives run in it). */
int ct_strategy_setup_model(ct_strategy *s, void *params, void *grads, size_t n, enum ct_dtype dtype, ct_error *err);
/* Backward finished the gradient of grads[offset .. offset+count). */
int ct_strategy_grad_ready(ct_strategy *s, size_t offset, size_t count, ct_error *err);
/* Forward is about to read parameters [offset, offset + count): a strategy whose update is still
 * arriving (ddp_sharded's all-gather) waits for that part of it. Every rank announces the same
 * ranges in the same order. */
int ct_strategy_params_needed(ct_strategy *s, size_t offset, size_t count, ct_error *err);
/* Wait for every gradient's exchange to complete: afterwards each holds the mean over the global
 * batch (see the contract above). Call before the optimizer step. */
int ct_strategy_grad_sync(ct_strategy *s, ct_error *err);
/* Gradient accumulation over a window of micro-batches. 1: the strategy sums the window's gradients
 * itself (fsdp: each micro-batch's are reduce-scattered unit by unit and added to this rank's
 * shard, so no rank ever holds a whole gradient), it hears every micro-batch's grad_ready, and
 * ct_strategy_grad_window(s, k) comes before backward of micro-batch k = 1 .. n-1. 0: the training
 * step sums them and announces the last micro-batch's only (Lightning's no_sync). */
int ct_strategy_accumulates(const ct_strategy *s);
int ct_strategy_grad_window(ct_strategy *s, int micro, ct_error *err);
/* How many ranks' gradients grad_sync adds without averaging them (1 when it averages, or for one
 * rank): the training step divides each rank's loss gradient by its count times this, so what
 * grad_sync leaves is the mean over the global batch. Known after setup_model. */
int ct_strategy_grad_ranks(const ct_strategy *s);
/* Small sums that ride on this step's gradient exchange instead of a collective of their own (the
 * stop-signal agreement): post them before backward; when grad_sync returns, values[0 .. n) hold
 * the sums over the ranks. values must stay valid until then. One rank: they stay as they are. */
int ct_strategy_post_with_grads(ct_strategy *s, double *values, int n);
/* After grad_sync, on gradients in host memory: the L2 norm of the whole model's reduced gradient
 * (where a strategy partitions it, the root of the ranks' sums: a collective, every rank calls
 * it), and clipping of what the update reads — scaled by factor (norm clipping), or each value
 * clamped to [-limit, limit]. */
int ct_strategy_grad_norm(ct_strategy *s, double *norm, ct_error *err);
void ct_strategy_grad_scale(ct_strategy *s, double factor);
void ct_strategy_grad_clamp(ct_strategy *s, double limit);
/* Seconds spent waiting inside grad_sync since setup (exposed communication time). */
double ct_strategy_exposed_comm_seconds(const ct_strategy *s);
/* What the strategy chose once it saw the ranks and the model, with why (fsdp's
 * sharding_strategy=auto: "hybrid_shard: 2 nodes of 2 ranks, ..."); "" when it chose nothing. */
const char *ct_strategy_choice(const ct_strategy *s);
/* Gradient allreduces started since setup, and how many of them started while backward was still
 * running (the overlap: 0 with ddp_no_overlap, or when buckets were cut across tensors). */
void ct_strategy_grad_allreduces(const ct_strategy *s, long *total, long *during_backward);
/* Pieces of a parameter all-gather started since setup (ddp_sharded), and how many of them forward
 * waited for after it had begun computing (the overlap; 0 for strategies that gather nothing). */
void ct_strategy_param_gathers(const ct_strategy *s, long *total, long *overlapped);

/* Backward is about to read parameters [offset, offset + count) (the model's need in backward):
 * fsdp gathers that unit again. Other strategies: nothing to do. */
int ct_strategy_params_needed_backward(ct_strategy *s, size_t offset, size_t count, ct_error *err);
/* whole 1: every parameter whole in the model's array (a collective: fsdp gathers its released
 * units), before something reads the array whole (a checkpoint's save); whole 0: that reader is
 * done (fsdp releases them again). params_written: after something wrote the array whole (a
 * checkpoint's load), the strategy takes its shards from it. Identities for other strategies. */
int ct_strategy_params_whole(ct_strategy *s, int whole, ct_error *err);
int ct_strategy_params_written(ct_strategy *s, ct_error *err);
/* Sharded checkpoints (fsdp, state_dict_type=sharded): rank's shard as (offset, count) ranges of the
 * parameter array, up to max pairs into ranges (NULL: only counted), in the order its shards of the
 * parameters and of the optimizer state concatenate them; the number of ranges, 0 when this
 * strategy writes whole checkpoint files. mine (may be NULL; this rank only): its parameters'
 * shard. No collective. */
int ct_strategy_shard_layout(ct_strategy *s, int rank, size_t *ranges, int max, const void **mine);
/* The checkpoint IO the strategy writes and reads through (safetensors). */
const struct ct_checkpoint_io_ops *ct_strategy_checkpoint_io(const ct_strategy *s);

/* --- memory: measured, not computed ---------------------------------------------------------- */
enum { CT_MEM_PARAM = 0, CT_MEM_GRAD, CT_MEM_OPTIM, CT_MEM_KINDS };
/* Measure now (mincore) the resident bytes of this rank's parameters, gradients and optimizer state
 * (the model's arrays, the optimizer's state arrays and the strategy's own shards) and keep each
 * one's peak. The training step samples after forward, after backward and after the update; fsdp
 * also as each unit is gathered. No collective. */
void ct_strategy_memory_sample(ct_strategy *s);
/* The peaks sampled so far, in bytes, indexed by CT_MEM_*: this rank's. */
void ct_strategy_memory_peaks(const ct_strategy *s, size_t peaks[CT_MEM_KINDS]);

/* --- the optimizer step and its state -------------------------------------------------------- */
/* The update after grad_sync, owned by the strategy: ddp and single_device run the model's whole
 * step (ct_model_optim_step); ddp_sharded updates this rank's shard of the parameters with its
 * shard of the optimizer state (partitioned at setup_model) and all-gathers the parameters for the
 * next forward. Every rank calls it once per step. */
int ct_strategy_optimizer_step(ct_strategy *s, ct_model *model, ct_optim *optim, int *skipped, ct_error *err);
/* The optimizer's state as a checkpoint holds it, whatever the partition: each state array whole
 * (every parameter's element, in the optimizer's dtype), under the optimizer's name for it. The
 * list owns the arrays made for it (a sharded optimizer's); the strategy keeps nothing between
 * the calls. */
typedef struct ct_optim_state_entry {
    const char *name;          /* "exp_avg", "exp_avg_sq", "momentum_buffer" (ct_optim_state_name) */
    void *data;                /* the whole array */
    enum ct_dtype dtype;
    size_t numel;
} ct_optim_state_entry;

typedef struct ct_optim_state_list {
    int n;
    ct_optim_state_entry states[CT_OPTIM_MAX_STATES];
    void *owned[CT_OPTIM_MAX_STATES];   /* made for the list; NULL: the optimizer's own array */
} ct_optim_state_list;

/* The whole state into *out, in one call. gather (a save; under a sharded optimizer a collective
 * every rank calls): the values, the shards gathered from every rank; without (a load): whole
 * arrays to read into. Not sharded: the optimizer's own arrays, nothing made or exchanged. */
int ct_strategy_optimizer_state_get(ct_strategy *s, ct_optim *optim, int gather, ct_optim_state_list *out,
                                    ct_error *err);
/* Back after a load, in one call: the whole state read into a list from get (gather 0) — every
 * rank read the whole file and keeps its shard of it, no exchange — then the list is freed. */
void ct_strategy_optimizer_state_put(ct_strategy *s, ct_optim *optim, ct_optim_state_list *in);
/* Free the arrays made for the list (after a save, or a load that failed); the list is empty. */
void ct_optim_state_list_free(ct_optim_state_list *l);

/* --- collectives (every rank calls them in the same order) ------------------------------------ */
/* A collective (gradient sync included) that does not complete within the plan's
 * collective_timeout_s (set once, before ct_strategy_create_from_plan; default 300, <= 0 waits
 * forever) fails on every rank that waits, with CT_ETIMEOUT and a message naming the rank(s) that
 * did not arrive; the strategy then ends the job when it is freed (MPI_Abort under ddp), so a
 * stopped or hung rank cannot keep the others waiting. */
/* The TCP store ddp meets in without a PMIx server (README "ddp without a PMIx server"): run_id
 * (--run-id) scopes its keys beside the job's id; bind (--store-bind) says where rank 0's store
 * listens: "" MASTER_ADDR's addresses, "all", or ADDR[,ADDR...]; secret_file (--store-secret-file)
 * holds the secret every client must prove (rank 0's store drops the others). NULL or "": the
 * default. Before setup_environment. */
void ct_strategy_set_store(ct_strategy *s, const char *run_id, const char *bind, const char *secret_file);
int ct_strategy_broadcast(ct_strategy *s, void *buf, size_t bytes, int root, ct_error *err);
/* In-place sum over ranks. */
int ct_strategy_reduce_sum(ct_strategy *s, double *values, int n, ct_error *err);
/* Point to point, on the strategy's own process group (ddp: its MPI communicator, or its gloo
 * context): send send_bytes of sendbuf to rank `to` and receive recv_bytes into recvbuf from rank
 * `from` (either -1: none), both under way at once, returning when both are done. Not a
 * collective: only the two ranks of a pair call it, matched in the order they call. Bounded by
 * the collective timeout (CT_ETIMEOUT naming the peer; the group is broken then, as after a
 * collective). CT_ENOTAVAIL from a strategy without a process group. */
int ct_strategy_sendrecv(ct_strategy *s, const void *sendbuf, size_t send_bytes, int to, void *recvbuf,
                         size_t recv_bytes, int from, ct_error *err);

/* --- checkpoints: rank 0 writes, every rank waits; every rank loads ---------------------------- */
/* Rank 0 writes through the strategy's checkpoint IO; every rank learns whether it worked.
 * may_defer: the file may be written in the background, when the Trainer installed the asynchronous
 * wrapper (ct_strategy_use_async_checkpoint_io): rank 0 copies the tensors and metadata and a thread
 * writes them while training goes on. Every save, load and ct_strategy_checkpoint_wait waits for
 * the write pending before; a failed write is returned by the next of them on every rank. */
int ct_strategy_save_checkpoint(ct_strategy *s, const char *path, const ct_ckpt *ckpt, int may_defer, ct_error *err);
/* Wrap the strategy's checkpoint IO for writes in the background (Lightning's AsyncCheckpointIO,
 * engine/checkpoint_io/async.h): --async-checkpoint. */
int ct_strategy_use_async_checkpoint_io(ct_strategy *s, ct_error *err);
/* Wait for the pending asynchronous write (a collective: every rank learns whether it failed). */
int ct_strategy_checkpoint_wait(ct_strategy *s, ct_error *err);
/* Rank 0: seconds spent writing checkpoint files since setup (the checkpoint IO's save: write,
 * fsync, rename), whether the loop waited for it (synchronous) or a thread did it meanwhile
 * (asynchronous, counted once the write is joined); 0 on the other ranks. */
double ct_strategy_checkpoint_write_seconds(const ct_strategy *s);
/* The same without a collective, on an error path (rank 0 waits; a failure is printed). */
void ct_strategy_checkpoint_wait_local(ct_strategy *s);
int ct_strategy_load_checkpoint(ct_strategy *s, const char *path, ct_ckpt *ckpt, ct_error *err);

/* Leave the process group (ct_strategy_free then frees the strategy). */
void ct_strategy_teardown(ct_strategy *s);

#endif
