/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: cluster-environment detection and reading (ct_env_detect) over a fuzzed set
 * of variables — SLURM_*, torchelastic's, OMPI_, PMI_, PALS_ and MV2_, LSF/jsrun's with
 * LSB_DJOB_RANKFILE's content, Kubeflow's, the manual environment's, CTRAIN_LAUNCHER_* — and a
 * forced --cluster-env, then ct_env_complete with --devices / --num-nodes taken from the input's
 * first and last bytes. Input format: fuzz_env.h.
 * Reading must succeed with a consistent layout or fail with a CT_E* code (make fuzz). */
#include "ctrain/engine.h"
#include "ctrain/envs.h"
#include "fuzz_env.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What every environment promises of a layout it accepted (main_port 0: not known here, as under
 * ctrain's own launcher, where the rank learns it from its supervisor). */
static void check_layout(const ct_env_info *info)
{
    if (info->world_size < 1 || info->global_rank < 0 || info->global_rank >= info->world_size)
        abort();
    if (info->local_rank < 0 || info->num_nodes < 1 || info->node_rank < 0 || info->node_rank >= info->num_nodes)
        abort();
    if (info->local_world_size < 1 || info->local_rank >= info->local_world_size ||
        info->local_world_size > info->world_size || info->main_port < 0 || info->main_port > 65535)
        abort();
    if (!memchr(info->main_address, '\0', sizeof(info->main_address)) ||
        !memchr(info->job_id, '\0', sizeof(info->job_id)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct ct_env_ops *ops = NULL;
    struct fuzz_env e;
    ct_env_info info;
    ct_error err;

    ct_engine_init(); /* pmix registered as in the CLI; it refuses variables that are not its process's */
    ct_error_clear(&err);
    fuzz_env_parse(&e, data, size);
    if (ct_env_detect(fuzz_getenv, &e, e.forced, &ops, &info, &err) == 0) {
        int devices = size ? data[0] % 5 : 0, num_nodes = size ? data[size - 1] % 4 : 0;

        if (!ops)
            abort();
        if (ct_env_complete(ops, fuzz_getenv, &e, &info, devices, num_nodes, &err)) {
            fuzz_check_refusal(&err);
            fuzz_env_done(&e);
            return 0;
        }
        check_layout(&info);
        ct_env_slurm_context(fuzz_getenv, &e);
    } else {
        fuzz_check_refusal(&err);
    }
    fuzz_env_done(&e);
    return 0;
}
