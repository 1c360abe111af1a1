/* SPDX-License-Identifier: BSD-3-Clause */
/* torchelastic: processes started by torchrun (torch.distributed.run) or a launcher that sets
 * the same variables. Checked before SLURM: torchrun is often run by srun, one agent per node,
 * and then the SLURM variables describe the agents, not the ranks.
 *
 * TORCHELASTIC_RUN_ID is required besides RANK/WORLD_SIZE/LOCAL_RANK: ctrain's SPANK plugin and
 * many job scripts export RANK and WORLD_SIZE for PyTorch programs, and those are not torchrun.
 */
#include <stdio.h>

#include "ctrain/envs.h"
#include "envs/envs_impl.h"

static int te_detect(ct_getenv_fn get, void *ctx)
{
    return ct_envvar_has(get, ctx, "TORCHELASTIC_RUN_ID") && ct_envvar_has(get, ctx, CT_VAR_RANK) &&
           ct_envvar_has(get, ctx, CT_VAR_WORLD_SIZE) && ct_envvar_has(get, ctx, CT_VAR_LOCAL_RANK);
}

static int te_nodes(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    static const char *const rank[] = { CT_VAR_GROUP_RANK, CT_VAR_NODE_RANK, NULL };
    const char *which = NULL;
    int rc;

    if (ct_envvar_has(get, ctx, "GROUP_WORLD_SIZE")) {
        if ((rc = ct_envvar_int(get, ctx, "GROUP_WORLD_SIZE", 1, 10000000, &info->num_nodes, err)))
            return rc;
        ct_env_source(info, CT_ENV_NUM_NODES, "GROUP_WORLD_SIZE");
    } else if (info->world_size % info->local_world_size == 0) {
        info->num_nodes = info->world_size / info->local_world_size;
        ct_env_source(info, CT_ENV_NUM_NODES, "WORLD_SIZE / LOCAL_WORLD_SIZE");
    } else {
        info->num_nodes = -1;
        ct_env_source(info, CT_ENV_NUM_NODES, "unknown: GROUP_WORLD_SIZE is not set and WORLD_SIZE is not a multiple "
                      "of LOCAL_WORLD_SIZE");
    }
    if (!ct_envvar_first(get, ctx, rank, &which)) {
        info->node_rank = -1;
        ct_env_source(info, CT_ENV_NODE_RANK, "unknown: neither GROUP_RANK nor NODE_RANK is set");
        return 0;
    }
    if ((rc = ct_envvar_int(get, ctx, which, 0, 10000000, &info->node_rank, err)))
        return rc;
    ct_env_source(info, CT_ENV_NODE_RANK, "%s", which);
    return 0;
}

static int te_read(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    int rc;

    ct_env_info_init(info, "torchelastic", 1);
    if ((rc = ct_envvar_int(get, ctx, CT_VAR_WORLD_SIZE, 1, 10000000, &info->world_size, err)) ||
        (rc = ct_envvar_int(get, ctx, CT_VAR_RANK, 0, 10000000, &info->global_rank, err)) ||
        (rc = ct_envvar_int(get, ctx, CT_VAR_LOCAL_RANK, 0, 10000000, &info->local_rank, err)) ||
        (rc = ct_envvar_int(get, ctx, CT_VAR_LOCAL_WORLD_SIZE, 1, 10000000, &info->local_world_size, err)))
        return rc;
    ct_env_source_ranks(info, CT_VAR_WORLD_SIZE, CT_VAR_RANK, CT_VAR_LOCAL_RANK, CT_VAR_LOCAL_WORLD_SIZE);
    if ((rc = te_nodes(get, ctx, info, err)))
        return rc;
    info->equal_tasks_per_node = info->num_nodes > 0 && info->world_size == info->local_world_size * info->num_nodes;
    snprintf(info->job_id, sizeof(info->job_id), "%s", get("TORCHELASTIC_RUN_ID", ctx));
    ct_env_source(info, CT_ENV_JOB_ID, "TORCHELASTIC_RUN_ID");
    if (!ct_env_master_addr(get, ctx, info)) {
        ct_error_set(err, CT_EINVAL, "env-variable-missing", "torchelastic: MASTER_ADDR is not set");
        return ct_error_hint(err, "torchrun sets it in every worker; a launcher imitating it must too");
    }
    if ((rc = ct_env_master_port(get, ctx, info, err)) < 0)
        return rc;
    if (rc == 0) {
        ct_error_set(err, CT_EINVAL, "env-variable-missing", "torchelastic: MASTER_PORT is not set");
        return ct_error_hint(err, "torchrun sets it in every worker; a launcher imitating it must too");
    }
    return ct_env_check_ranges(info, err);
}

static int te_validate(const ct_env_info *info, int devices, int num_nodes, ct_error *err)
{
    char dhint[256], nhint[256];
    int nodes = num_nodes > 0 ? num_nodes : info->num_nodes;
    int rc;

    snprintf(dhint, sizeof(dhint), "use torchrun --nproc-per-node=%d, or --devices %d", devices, info->local_world_size);
    snprintf(nhint, sizeof(nhint), "use torchrun --nnodes=%d, or --num-nodes %d", num_nodes, info->num_nodes);
    if (devices > 0 && devices != info->local_world_size)
        return ct_env_validate_common(info, devices, 0, dhint, nhint, err);
    if ((rc = ct_env_validate_common(info, 0, num_nodes, dhint, nhint, err)))
        return rc;
    if (devices > 0 && nodes > 0 && devices * nodes != info->world_size) {
        ct_error_set(err, CT_ECONFLICT, "env-world-size-mismatch", "--devices %d x %d node(s) = %d process(es), but "
                     "torchrun's WORLD_SIZE is %d", devices, nodes, devices * nodes, info->world_size);
        return ct_error_hint(err, "start the same number of workers on every node (torchrun --nproc-per-node=%d "
                                  "on each of the %d nodes)", devices, nodes);
    }
    return 0;
}

const struct ct_env_ops ct_env_torchelastic_ops = {
    .name = "torchelastic",
    .description = "torchrun / torchelastic workers (RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK, MASTER_ADDR/PORT)",
    .auto_detect = 1,
    .priority = 80,
    .needs = "TORCHELASTIC_RUN_ID, RANK, WORLD_SIZE and LOCAL_RANK: start the program with torchrun",
    .detect = te_detect,
    .read = te_read,
    .validate = te_validate,
};
