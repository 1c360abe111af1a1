/* The loops' seam to the model on a CUDA device (engine/nn/mlp_cuda.cu).
 *
 * When run->cuda_model is set, the training step, the evaluation forward and checkpoints go
 * through here instead of the host ct_mlp: the batch is gathered (by the loops, unchanged) into
 * the device model's pinned host buffers, which run->batch_x/batch_y point to; forward, backward
 * and the optimizer update run on the device; checkpoints copy parameters and optimizer state to
 * the host arrays first and back after a load. Status: compiled, not yet run on a GPU.
 */
#include "engine/loops/loops.h"

#ifdef CT_HAVE_CUDA
#include <stdlib.h>

#include "engine/nn/mlp_cuda.h"

/* As the cpu step's callback: each finished tensor to the strategy, which (NCCL) orders its
 * allreduce after the compute stream's work so far. */
static int grad_ready(void *ctx, size_t offset, size_t count)
{
    ct_run *run = ctx;

    return ct_strategy_grad_ready(run->strategy, offset, count, &run->step_err);
}

int ct_run_cuda_setup(ct_run *run, int max_batch, enum ct_dtype gemm_dtype, ct_error *err)
{
    int rc = ct_mlp_cuda_create(run->model, run->optim, max_batch, gemm_dtype, &run->cuda_model, err);

    if (rc)
        return rc;
    /* The loops gather batches straight into pinned memory: one copy to the device per step. */
    free(run->batch_x);
    free(run->batch_y);
    run->batch_x = ct_mlp_cuda_batch_x(run->cuda_model);
    run->batch_y = ct_mlp_cuda_batch_y(run->cuda_model);
    return 0;
}

void ct_run_cuda_free(ct_run *run)
{
    if (!run->cuda_model)
        return;
    ct_mlp_cuda_free(run->cuda_model);
    run->cuda_model = NULL;
    run->batch_x = NULL;
    run->batch_y = NULL;
}

float *ct_run_cuda_params(ct_run *run) { return ct_mlp_cuda_params(run->cuda_model); }
float *ct_run_cuda_grads(ct_run *run) { return ct_mlp_cuda_grads(run->cuda_model); }

int ct_cuda_training_step(ct_run *run, int count, double *loss, ct_error *err)
{
    double sum;
    int rc, skipped;

    if ((rc = ct_mlp_cuda_forward(run->cuda_model, count, &sum, NULL, err)))
        return rc;
    ct_error_clear(&run->step_err);
    if ((rc = ct_mlp_cuda_backward(run->cuda_model, count, grad_ready, run, err))) {
        if (run->step_err.code) /* the strategy refused a bucket, not the device */
            *err = run->step_err;
        return rc;
    }
    if ((rc = ct_strategy_grad_sync(run->strategy, err)) ||
        (rc = ct_mlp_cuda_optim_step(run->cuda_model, run->optim, &skipped, err)))
        return rc;
    *loss = sum / count;
    return 0;
}

int ct_cuda_eval_forward(ct_run *run, int count, double *loss_sum, int *correct, ct_error *err)
{
    return ct_mlp_cuda_forward(run->cuda_model, count, loss_sum, correct, err);
}

int ct_run_cuda_to_host(ct_run *run, ct_error *err)
{
    return run->cuda_model ? ct_mlp_cuda_to_host(run->cuda_model, run->model, run->optim, err) : 0;
}

int ct_run_cuda_from_host(ct_run *run, ct_error *err)
{
    return run->cuda_model ? ct_mlp_cuda_from_host(run->cuda_model, run->model, run->optim, err) : 0;
}

void ct_run_cuda_stats(const ct_run *run, int64_t *skipped_steps, double *loss_scale)
{
    *skipped_steps = run->cuda_model ? ct_mlp_cuda_skipped_steps(run->cuda_model) : 0;
    *loss_scale = run->cuda_model ? ct_mlp_cuda_loss_scale(run->cuda_model) : 1.0;
}

#else /* no CUDA in this build: run->cuda_model is never set, and setting it up says why */

int ct_run_cuda_setup(ct_run *run, int max_batch, enum ct_dtype gemm_dtype, ct_error *err)
{
    ct_error_set(err, CT_ENOTAVAIL, "accelerator-not-available", "this build of ctrain has no CUDA support");
    return ct_error_hint(err, "rebuild with the CUDA toolkit installed (make CUDA=1), or use --accelerator cpu");
}

void ct_run_cuda_free(ct_run *run) { }
float *ct_run_cuda_params(ct_run *run) { return NULL; }
float *ct_run_cuda_grads(ct_run *run) { return NULL; }

int ct_cuda_training_step(ct_run *run, int count, double *loss, ct_error *err)
{
    return ct_run_cuda_setup(run, 0, CT_DTYPE_F32, err);
}

int ct_cuda_eval_forward(ct_run *run, int count, double *loss_sum, int *correct, ct_error *err)
{
    return ct_run_cuda_setup(run, 0, CT_DTYPE_F32, err);
}

int ct_run_cuda_to_host(ct_run *run, ct_error *err) { return 0; }
int ct_run_cuda_from_host(ct_run *run, ct_error *err) { return 0; }

void ct_run_cuda_stats(const ct_run *run, int64_t *skipped_steps, double *loss_scale)
{
    *skipped_steps = 0;
    *loss_scale = 1.0;
}
#endif
