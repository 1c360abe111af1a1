/* SPDX-License-Identifier: BSD-3-Clause */
/* The Strategy's public functions (include/ctrain/strategy.h): dispatch to the implementation's
 * ops, and the parts every strategy shares — launching through its launcher, the optimizer's whole
 * state for a checkpoint (one list, handed out for a save and taken back after a load), and
 * checkpoints (rank 0 writes through checkpoint IO, every rank learns whether it worked). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/registry.h"
#include "ctrain/util.h"

#include "engine/checkpoint_io/async.h"
#include "engine/util/pages.h"
#include "engine/strategies/strategy_impl.h"

const char *ct_strategy_name(const ct_strategy *s) { return s->name; }
const char *ct_strategy_accelerator_name(const ct_strategy *s) { return s->accelerator_name; }
const struct ct_precision_ops *ct_strategy_precision(const ct_strategy *s) { return s->precision; }
int ct_strategy_world_size(const ct_strategy *s) { return s->world_size; }
int ct_strategy_global_rank(const ct_strategy *s) { return s->global_rank; }
int ct_strategy_num_nodes(const ct_strategy *s) { return s->num_nodes; }
int ct_strategy_is_global_zero(const ct_strategy *s) { return s->global_rank == 0; }
double ct_strategy_exposed_comm_seconds(const ct_strategy *s) { return s->exposed_comm_s; }
const char *ct_strategy_choice(const ct_strategy *s) { return s->choice; }

double ct_strategy_checkpoint_write_seconds(const ct_strategy *s)
{
    return s->ckpt_write_s + ct_async_checkpoint_io_write_seconds(s->async_io);
}

void ct_strategy_grad_allreduces(const ct_strategy *s, long *total, long *during_backward)
{
    *total = s->grad_allreduces;
    *during_backward = s->grad_allreduces_in_backward;
}

int ct_strategy_grad_ranks(const ct_strategy *s) { return s->grad_ranks > 1 ? s->grad_ranks : 1; }

void ct_strategy_param_gathers(const ct_strategy *s, long *total, long *overlapped)
{
    *total = s->param_gathers;
    *overlapped = s->param_gathers_overlapped;
}

int ct_strategy_options(const ct_strategy *s, ct_config *out, ct_error *err)
{
    (void)err;
    *out = s->options;
    return 0;
}

void ct_strategy_set_store(ct_strategy *s, const char *run_id, const char *bind, const char *secret_file)
{
    snprintf(s->store_secret_file, sizeof(s->store_secret_file), "%s", secret_file ? secret_file : "");
    snprintf(s->store_run_id, sizeof(s->store_run_id), "%s", run_id ? run_id : "");
    snprintf(s->store_bind, sizeof(s->store_bind), "%s", bind ? bind : "");
}

int ct_strategy_model_to_device(ct_strategy *s, ct_model *host, ct_optim *optim, int max_batch, ct_model **out,
                                ct_error *err)
{
    ct_model_placement where = { 0 };

    *out = NULL;
    where.accelerator = s->accelerator->name;
    where.device = s->device;
    where.gemm_dtype = s->precision ? s->precision->gemm_dtype : CT_DTYPE_F32;
    where.loss_scaling = s->precision ? s->precision->loss_scaling : 0;
    where.max_batch = max_batch;
    where.optim = optim;
    s->optim = optim; /* a sharded strategy partitions its state at setup_model */
    if (!s->accelerator->model_to_device) {
        ct_error_set(err, CT_ENOTAVAIL, "model-not-on-accelerator", "accelerator %s cannot hold a model",
                     s->accelerator->name);
        return ct_error_hint(err, "use --accelerator cpu");
    }
    return s->accelerator->model_to_device(host, &where, out, err);
}

int ct_strategy_host_threads_setup(const ct_strategy *s)
{
    if (!s->accelerator->host_threads_setup)
        return 0;
    return s->accelerator->host_threads_setup(s->world_size, s->num_nodes, s->global_rank == 0);
}

int ct_strategy_device_memory(const ct_strategy *s, ct_memstats *out)
{
    if (!s->accelerator->device_memory || !s->accelerator->memory_stats)
        return CT_ENOTAVAIL;
    return s->accelerator->memory_stats(s->device, out);
}

void ct_strategy_set_forward_signal(ct_strategy *s, int sig)
{
    s->forward_signal = sig;
}

void ct_strategy_set_forward_signal2(ct_strategy *s, int sig)
{
    s->forward_signal2 = sig;
}

void ct_strategy_set_trace(ct_strategy *s, ct_collective_trace *trace)
{
    s->trace = trace;
}

struct launch_ctx {
    ct_strategy *s;
    ct_rank_fn fn;
    void *arg;
};

static int launch_body(void *arg, void *result, size_t result_size, ct_error *err)
{
    struct launch_ctx *lc = arg;
    return lc->fn(lc->s, lc->arg, result, result_size, err);
}

int ct_strategy_launch(ct_strategy *s, ct_rank_fn fn, void *arg, void *result, size_t result_size,
                       ct_error *err)
{
    struct launch_ctx lc = { s, fn, arg };
    /* After a rank fails the survivors get SIGTERM, then SIGKILL 5 s later: a peer is gone, so the
     * collective their stop handler would run cannot finish, and all must be gone within 10 s. */
    ct_launch_spec spec = { .nprocs = s->n_devices, .kill_grace_s = 5.0, .fit_statuses = 1,
                            .forward_signals = { s->forward_signal, s->forward_signal2 } };

    return s->launcher->launch(&spec, launch_body, &lc, result, result_size, err);
}

int ct_strategy_setup_environment(ct_strategy *s, ct_error *err)
{
    return s->ops->setup_environment(s, err);
}

int ct_strategy_setup_model(ct_strategy *s, void *params, void *grads, size_t n, enum ct_dtype dtype, ct_error *err)
{
    s->params = params;
    s->grads = grads;
    s->n_grads = n;
    s->param_dtype = dtype;
    return s->ops->setup_model(s, params, grads, n, err);
}

int ct_strategy_params_needed_backward(ct_strategy *s, size_t offset, size_t count, ct_error *err)
{
    return s->ops->params_needed_backward ? s->ops->params_needed_backward(s, offset, count, err) : 0;
}

int ct_strategy_params_whole(ct_strategy *s, int whole, ct_error *err)
{
    return s->ops->params_whole ? s->ops->params_whole(s, whole, err) : 0;
}

int ct_strategy_params_written(ct_strategy *s, ct_error *err)
{
    return s->ops->params_written ? s->ops->params_written(s, err) : 0;
}

int ct_strategy_shard_layout(ct_strategy *s, int rank, size_t *ranges, int max, const void **mine)
{
    return s->ops->shard_layout ? s->ops->shard_layout(s, rank, ranges, max, mine) : 0;
}

const struct ct_checkpoint_io_ops *ct_strategy_checkpoint_io(const ct_strategy *s)
{
    return s->checkpoint_io;
}

/* Steps whose memory is measured: the first three (every array reaches its steady state in the
 * second: fsdp's units are cut in the first forward), then every 100th. Each step's pattern of
 * gathers and releases repeats, so later steps reach the same peaks; mincore over every array at
 * each of fsdp's gathers cost it 10-15% of its tokens/s on a small GPT. */
#define MEM_STEPS_ALWAYS 3
#define MEM_STEPS_EVERY 100

/* The model's arrays and the optimizer's state on host memory, and the strategy's own; device
 * memory (cuda) is not measured this way (mincore sees host pages only). */
void ct_strategy_memory_sample(ct_strategy *s)
{
    size_t now[CT_MEM_KINDS] = { 0 }, es = ct_dtype_size(s->param_dtype), lo, count, total;

    if (s->accelerator->device_memory || !s->params ||
        (s->mem_steps >= MEM_STEPS_ALWAYS && s->mem_steps % MEM_STEPS_EVERY != 0))
        return;
    now[CT_MEM_PARAM] = ct_pages_resident(s->params, s->n_grads * es);
    now[CT_MEM_GRAD] = ct_pages_resident(s->grads, s->n_grads * es);
    if (s->optim) {
        ct_optim_shard_range(s->optim, &lo, &count, &total);
        for (int i = 0; i < ct_optim_num_states(s->optim); i++)
            now[CT_MEM_OPTIM] += ct_pages_resident(ct_optim_state(s->optim, i),
                                                 count * ct_dtype_size(ct_optim_dtype(s->optim)));
    }
    if (s->ops->resident && s->ops->resident(s, now))
        return;
    for (int k = 0; k < CT_MEM_KINDS; k++)
        if (now[k] > s->mem_peak[k])
            s->mem_peak[k] = now[k];
}

void ct_strategy_memory_peaks(const ct_strategy *s, size_t peaks[CT_MEM_KINDS])
{
    for (int k = 0; k < CT_MEM_KINDS; k++)
        peaks[k] = s->mem_peak[k];
}

int ct_strategy_grad_ready(ct_strategy *s, size_t offset, size_t count, ct_error *err)
{
    return s->ops->grad_ready ? s->ops->grad_ready(s, offset, count, err) : 0;
}

int ct_strategy_params_needed(ct_strategy *s, size_t offset, size_t count, ct_error *err)
{
    return s->ops->params_needed ? s->ops->params_needed(s, offset, count, err) : 0;
}

/* The update still in flight completes before anything but forward touches the parameters or the
 * communicator: the rule that lets ddp_sharded overlap its all-gather with forward only. */
static int params_settle(ct_strategy *s, ct_error *err)
{
    return s->ops->params_sync ? s->ops->params_sync(s, err) : 0;
}

int ct_strategy_grad_sync(ct_strategy *s, ct_error *err)
{
    return s->ops->grad_sync ? s->ops->grad_sync(s, err) : 0;
}

int ct_strategy_accumulates(const ct_strategy *s) { return s->ops->accumulates ? s->ops->accumulates(s) : 0; }

int ct_strategy_grad_window(ct_strategy *s, int micro, ct_error *err)
{
    return s->ops->grad_window ? s->ops->grad_window(s, micro, err) : 0;
}

int ct_strategy_post_with_grads(ct_strategy *s, double *values, int n)
{
    return s->ops->post_with_grads ? s->ops->post_with_grads(s, values, n) : 0;
}

int ct_strategy_optimizer_step(ct_strategy *s, ct_model *model, ct_optim *optim, int *skipped, ct_error *err)
{
    int rc;

    if (s->ops->optimizer_step)
        rc = s->ops->optimizer_step(s, model, optim, skipped, err);
    else
        rc = ct_model_optim_step(model, optim, skipped, err);
    /* the optimizer's state exists after its first update: measured before the count moves on */
    if (!rc)
        ct_strategy_memory_sample(s);
    s->mem_steps++;
    return rc;
}

void ct_optim_state_list_free(ct_optim_state_list *l)
{
    for (int i = 0; i < CT_OPTIM_MAX_STATES; i++) {
        free(l->owned[i]);
        l->owned[i] = NULL;
    }
    l->n = 0;
}

int ct_strategy_optimizer_state_get(ct_strategy *s, ct_optim *optim, int gather, ct_optim_state_list *out,
                                    ct_error *err)
{
    size_t lo, count, total, esize = ct_dtype_size(ct_optim_dtype(optim));
    int rc;

    memset(out, 0, sizeof(*out));
    ct_optim_shard_range(optim, &lo, &count, &total);
    /* Sharded: the gather is a collective, after any pending parameter all-gather. */
    if (count != total && (rc = params_settle(s, err)))
        return rc;
    for (int i = 0; i < ct_optim_num_states(optim); i++) {
        ct_optim_state_entry *e = &out->states[out->n++];

        e->name = ct_optim_state_name(optim, i);
        e->dtype = ct_optim_dtype(optim);
        e->numel = total;
        if (count == total) { /* not sharded: the optimizer's own arrays are whole */
            e->data = ct_optim_state(optim, i);
            continue;
        }
        if (!(e->data = out->owned[i] = calloc(total ? total : 1, esize))) {
            ct_optim_state_list_free(out);
            return ct_error_set(err, CT_ENOMEM, "", "out of memory for the whole optimizer state (%zu elements)",
                                total);
        }
        if (gather && (rc = s->ops->gather_shards(s, ct_optim_state(optim, i), e->data, err))) {
            ct_optim_state_list_free(out);
            return rc;
        }
    }
    return 0;
}

void ct_strategy_optimizer_state_put(ct_strategy *s, ct_optim *optim, ct_optim_state_list *in)
{
    size_t lo, count, total, esize = ct_dtype_size(ct_optim_dtype(optim));

    ct_optim_shard_range(optim, &lo, &count, &total);
    for (int i = 0; i < in->n && i < ct_optim_num_states(optim); i++)
        if (in->owned[i] && s->ops->shard_of && count != total)
            s->ops->shard_of(s, in->owned[i], ct_optim_state(optim, i));
        else if (in->owned[i])
            memcpy(ct_optim_state(optim, i), (char *)in->owned[i] + lo * esize, count * esize);
    ct_optim_state_list_free(in);
}

int ct_strategy_broadcast(ct_strategy *s, void *buf, size_t bytes, int root, ct_error *err)
{
    int rc = params_settle(s, err);

    if (rc)
        return rc;
    return s->ops->broadcast ? s->ops->broadcast(s, buf, bytes, root, err) : 0;
}

int ct_strategy_reduce_sum(ct_strategy *s, double *values, int n, ct_error *err)
{
    int rc = params_settle(s, err);

    if (rc)
        return rc;
    return s->ops->reduce_sum ? s->ops->reduce_sum(s, values, n, err) : 0;
}

int ct_strategy_sendrecv(ct_strategy *s, const void *sendbuf, size_t send_bytes, int to, void *recvbuf,
                         size_t recv_bytes, int from, ct_error *err)
{
    int rc;

    if ((to >= s->world_size || from >= s->world_size) || (to < 0 && from < 0))
        return to < 0 && from < 0 ? 0
                                  : ct_error_set(err, CT_EINVAL, "strategy-peer", "%s: rank %d: no rank %d in a world of %d",
                                                 s->ops->name, s->global_rank, to >= s->world_size ? to : from,
                                                 s->world_size);
    if (!s->ops->sendrecv) {
        ct_error_set(err, CT_ENOTAVAIL, "strategy-no-p2p", "%s has no point-to-point exchange (one process)",
                     s->ops->name);
        return ct_error_hint(err, "use --strategy ddp");
    }
    if ((rc = params_settle(s, err)))
        return rc;
    return s->ops->sendrecv(s, sendbuf, send_bytes, to, recvbuf, recv_bytes, from, err);
}

/* Every rank learns rank 0's status (a failed save stops all of them alike). */
static int save_verdict(ct_strategy *s, const char *path, int status, const ct_error *local, ct_error *err)
{
    int rc;

    if (s->world_size > 1 && (rc = ct_strategy_broadcast(s, &status, sizeof(status), 0, err)))
        return rc;
    if (status == 0)
        return 0;
    if (s->global_rank == 0) {
        if (err)
            *err = *local;
        return status;
    }
    ct_error_set(err, status, "checkpoint-save", "rank 0 failed to write checkpoint %s", path);
    return ct_error_hint(err, "see rank 0's message");
}

int ct_strategy_use_async_checkpoint_io(ct_strategy *s, ct_error *err)
{
    return s->async_io ? 0 : ct_async_checkpoint_io_new(s->checkpoint_io, &s->async_io, err);
}

void ct_async_ckpt_free(ct_strategy *s)
{
    ct_async_checkpoint_io_free(s->async_io);
    s->async_io = NULL;
}

/* Rank 0 writes: through the asynchronous wrapper when it is installed and the caller lets this
 * file be written later, else at once; either way the write pending from before is waited for
 * first, and its failure is this save's. */
int ct_strategy_save_checkpoint(ct_strategy *s, const char *path, const ct_ckpt *ckpt, int may_defer, ct_error *err)
{
    ct_error local;
    int status = 0, rc;

    ct_error_clear(&local);
    if ((rc = params_settle(s, err)))
        return rc;
    if (s->global_rank == 0 && !(status = ct_async_checkpoint_io_wait(s->async_io, &local))) {
        double t0 = ct_time_now();

        if (may_defer && s->async_io) {
            status = ct_async_checkpoint_io_save(s->async_io, path, ckpt, &local);
        } else {
            status = s->checkpoint_io->save(path, ckpt, &local);
            s->ckpt_write_s += ct_time_now() - t0;
        }
    }
    return save_verdict(s, path, status, &local, err);
}

int ct_strategy_checkpoint_wait(ct_strategy *s, ct_error *err)
{
    ct_error local;
    int status = 0;

    ct_error_clear(&local);
    if (s->global_rank == 0)
        status = ct_async_checkpoint_io_wait(s->async_io, &local);
    return save_verdict(s, "(the asynchronous write)", status, &local, err);
}

void ct_strategy_checkpoint_wait_local(ct_strategy *s)
{
    ct_error local;

    ct_error_clear(&local);
    if (ct_async_checkpoint_io_wait(s->async_io, &local))
        ct_error_print(stderr, &local);
}

int ct_strategy_load_checkpoint(ct_strategy *s, const char *path, ct_ckpt *ckpt, ct_error *err)
{
    int rc = params_settle(s, err);

    if (rc)
        return rc;
    ct_strategy_checkpoint_wait_local(s);   /* the file may be the one being written */
    return s->checkpoint_io->load(path, ckpt, err);
}

void ct_strategy_teardown(ct_strategy *s)
{
    ct_error ignored;

    /* A failure here has marked the world broken (teardown then skips MPI_Finalize). */
    ct_error_clear(&ignored);
    params_settle(s, &ignored);
    if (s->ops->teardown)
        s->ops->teardown(s);
}
