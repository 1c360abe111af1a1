// SPDX-License-Identifier: BSD-3-Clause
// The optimizers' update of one element on a CUDA device, written once for every model's kernels
// (engine/models/gpt/gpt_cuda.cu, engine/models/mlp/mlp_cuda.cu): torch.optim.AdamW and
// torch.optim.SGD (dampening 0, not Nesterov), the same expressions as engine/nn/optim.c's. Each
// takes the gradient as the kernel has it (unscaled first where a loss scale applies), updates the
// optimizer's state in place and returns the new parameter (the kernel stores it, and its copies).
// Status: compiled with nvcc, not yet run on a GPU.
#ifndef CTRAIN_NN_CUDA_OPTIM_CUH
#define CTRAIN_NN_CUDA_OPTIM_CUH

__device__ static inline float ct_cuda_adamw_update(float p, float g, float &m, float &v, float b1, float b2, float eps,
                                                    float decay, float step_size, float inv_sqrt_bc2)
{
    m = b1 * m + (1.0f - b1) * g;
    v = b2 * v + (1.0f - b2) * g * g;
    return p * decay - step_size * m / (sqrtf(v) * inv_sqrt_bc2 + eps);
}

__device__ static inline float ct_cuda_sgd_update(float p, float g, float &buf, float lr, float wd, float mu)
{
    float gi = g + wd * p;

    buf = mu * buf + gi;
    return p - lr * (mu != 0.0f ? buf : gi);
}

#endif
