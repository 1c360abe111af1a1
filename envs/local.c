/* SPDX-License-Identifier: BSD-3-Clause */
/* local: no cluster launcher. Either one process, or a rank of ctrain's own launcher, which sets
 * CTRAIN_LAUNCHER_RANK and CTRAIN_LAUNCHER_NPROCS in every process it creates. Always detected:
 * it is the last in the order.
 */
#include <stdio.h>

#include "ctrain/envs.h"
#include "envs/envs_impl.h"

static int local_detect(ct_getenv_fn get, void *ctx)
{
    (void)get;
    (void)ctx;
    return 1;
}

static int local_read(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    int launched = ct_envvar_has(get, ctx, CT_LAUNCHER_ENV_RANK) || ct_envvar_has(get, ctx, CT_LAUNCHER_ENV_NPROC);
    int rc;

    ct_env_info_init(info, "local", launched);
    if (launched) {
        if ((rc = ct_envvar_int(get, ctx, CT_LAUNCHER_ENV_NPROC, 1, 100000, &info->world_size, err)) ||
            (rc = ct_envvar_int(get, ctx, CT_LAUNCHER_ENV_RANK, 0, 100000, &info->global_rank, err)))
            return rc;
        info->local_world_size = info->world_size;
        info->local_rank = info->global_rank;
        ct_env_source_ranks(info, CT_LAUNCHER_ENV_NPROC, CT_LAUNCHER_ENV_RANK, CT_LAUNCHER_ENV_RANK,
                            CT_LAUNCHER_ENV_NPROC);
    } else {
        ct_env_source_ranks(info, "one process", "one process", "one process", "one process");
    }
    ct_env_source(info, CT_ENV_NODE_RANK, "one node");
    ct_env_source(info, CT_ENV_NUM_NODES, "one node");
    ct_env_source(info, CT_ENV_JOB_ID, "none: no cluster job");
    if (!ct_env_master_addr(get, ctx, info)) {
        snprintf(info->main_address, sizeof(info->main_address), "127.0.0.1");
        ct_env_source(info, CT_ENV_MAIN_ADDRESS, "one node: loopback");
    }
    if ((rc = ct_env_master_port(get, ctx, info, err)))
        return rc < 0 ? rc : ct_env_check_ranges(info, err);
    if (launched) {
        /* Each rank picking its own free port would disagree; ctrain's launcher hosts a PMIx server
         * and its ranks exchange what they need through it, so they need no port. */
        ct_env_source(info, CT_ENV_MAIN_PORT, "none: ranks of ctrain's launcher exchange through PMIx (set "
                      "MASTER_PORT for PyTorch-style programs)");
    } else {
        if ((rc = ct_env_free_port(&info->main_port, err)))
            return rc;
        ct_env_source(info, CT_ENV_MAIN_PORT, "a free port (checked by binding it)");
    }
    return ct_env_check_ranges(info, err);
}

static int local_validate(const ct_env_info *info, int devices, int num_nodes, ct_error *err)
{
    char dhint[256];

    if (num_nodes > 1) {
        ct_error_set(err, CT_ECONFLICT, "env-num-nodes-mismatch", "--num-nodes %d but no cluster launcher started "
                     "processes on other nodes (cluster environment: local)", num_nodes);
        return ct_error_hint(err, "run under srun -N %d (or torchrun/mpirun on every node), or leave out --num-nodes",
                             num_nodes);
    }
    if (!info->creates_processes_externally)
        return 0;
    snprintf(dhint, sizeof(dhint), "ctrain's launcher started %d rank(s); run it with --devices %d", info->world_size,
             info->world_size);
    return ct_env_validate_common(info, devices, 0, dhint, "", err);
}

const struct ct_env_ops ct_env_local_ops = {
    .name = "local",
    .description = "this machine only: one process, or the ranks of ctrain's own launcher (CTRAIN_LAUNCHER_RANK)",
    .auto_detect = 1,
    .priority = 10,
    .needs = "nothing",
    .detect = local_detect,
    .read = local_read,
    .validate = local_validate,
};
