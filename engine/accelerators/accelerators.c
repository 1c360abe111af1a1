/* SPDX-License-Identifier: BSD-3-Clause */
/* The accelerators this build has, registered for ct_engine_init: cpu always, cuda in CUDA builds
 * (engine/accelerators/cuda.c, in libctrain-cuda.so.0, behind its loader cuda_module.c). As the
 * strategies (engine/strategies/strategies.c), an implementation's ops carry no name: each is paired
 * here with its descriptor (engine/registry/accelerator_NAME.c) by symbol and registered under the
 * descriptor's name, so the name is written once and an implementation without a descriptor does
 * not link. */
#include "ctrain/registry.h"
#include "engine/accelerators/accelerators.h"
#include "engine/accelerators/cuda_module.h"
#include "engine/registry/components.h"

struct impl {
    const ct_registry_entry *desc;
    const struct ct_accelerator_ops *ops;
};

#define CT_ACCELERATOR_IMPL_ROW(name) { ct_accelerator_##name##_desc, &ct_accelerator_##name },
static const struct impl impls[] = {
    CT_ACCELERATOR_IMPL_ROW(cpu)
#ifdef CT_HAVE_CUDA
    /* Registration only: the loader's ops (engine/accelerators/cuda_module.c), which load
     * libctrain-cuda.so.0 when the connector first asks whether cuda is available. */
    { ct_accelerator_cuda_desc, &ct_cuda_module_accelerator },
#endif
};
#define N_IMPLS (sizeof(impls) / sizeof(impls[0]))

void ct_accelerators_register(void)
{
    static struct ct_accelerator_ops named[N_IMPLS];

    for (size_t i = 0; i < N_IMPLS; i++) {
        named[i] = *impls[i].ops;
        named[i].name = impls[i].desc->name;
        ct_registry_set_ops(CT_REG_ACCELERATOR, named[i].name, &named[i]);
    }
#ifdef CT_HAVE_CUDA
    /* The models' cuda implementations, the module's too: creating one loads it, this does not. */
    ct_model_register_impl(ct_model_mlp_desc[0].name, ct_accelerator_cuda_desc[0].name, ct_cuda_module_mlp_create);
    ct_model_register_impl(ct_model_gpt_desc[0].name, ct_accelerator_cuda_desc[0].name, ct_cuda_module_gpt_create);
#endif
}
