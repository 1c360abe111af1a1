/* SPDX-License-Identifier: BSD-3-Clause */
/* The models libctrain builds in, and their device implementations (internal to libctrain). */
#ifndef CTRAIN_MODELS_H
#define CTRAIN_MODELS_H

#include "ctrain/model.h"
#include "engine/registry/components.gen.h"
#include "engine/models/mlp/mlp.h"

/* Each built-in model's class, ct_model_NAME, beside its descriptor engine/registry/model_NAME.c. */
#define CT_MODEL_CLASS_EXTERN(id) extern const struct ct_model_class ct_model_##id;
CT_MODELS(CT_MODEL_CLASS_EXTERN)

/* The ct_mlp inside an "mlp" model (for its device implementations), NULL for another model. */
ct_mlp *ct_mlp_model_mlp(const ct_model *m);
/* The ct_gpt inside a "gpt" model, NULL for another model. */
struct ct_gpt;
struct ct_gpt *ct_gpt_model_gpt(const ct_model *m);

#ifdef CT_HAVE_CUDA
/* In the CUDA module (engine/accelerators/cuda_module.h), reached through its table. */
/* The MLP on the current CUDA device (engine/models/mlp_cuda_model.c). */
int ct_mlp_cuda_model_create(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err);
/* The GPT on the current CUDA device (engine/models/gpt_cuda_model.c; not yet run on a GPU: the
 * connector refuses gpt on cuda until t/tools/gpt_cuda_check has passed on one). */
int ct_gpt_cuda_model_create(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err);
#endif

/* The model's views of its implementation's arrays (storage type, parameters, gradients, tensors):
 * set by create and again by set_param_dtype, which reallocates them. */
void ct_model_set_views(ct_model *m, enum ct_dtype dtype, void *params, void *grads, const ct_tensor *tensors);

/* A cpu model's GEMM type set (its ct_model_set_gemm_dtype), the one way both built-in models do it. The rule first: fp64 and bf16
 * parameters compute in their own type only (64-true, bf16-true), fp32 parameters in fp32 or bf16
 * (32-true, bf16-mixed); else CT_ENOTAVAIL with id "<id>-gemm-dtype" and a message naming the model
 * ("an fp64 MLP computes its GEMMs in fp64 only"). Then what the model needs for it: 64-true
 * nothing (dgemm on the fp64 arrays); bf16-true its scratch (ops->alloc_bf16_true, may be NULL),
 * bf16-mixed its bf16 copies (ops->alloc_mixed); *gemm = dtype once they are there, then
 * ops->prepare(model) makes the products' primitives (32-true, bf16-mixed and bf16-true). */
struct ct_model_gemm_ops {
    int (*alloc_bf16_true)(void *model, ct_error *err);
    int (*alloc_mixed)(void *model, ct_error *err);
    void (*prepare)(void *model);
};
int ct_model_gemm_dtype_setup(const char *model, const char *id, enum ct_dtype param, enum ct_dtype dtype,
                               const struct ct_model_gemm_ops *ops, void *m, enum ct_dtype *gemm, ct_error *err);

/* Register the built-in models and data modules with the registry (their cuda implementations,
 * in the CUDA module libctrain-cuda.so.0, are registered by ct_accelerators_register). */
void ct_models_register_builtin(void);

#endif
