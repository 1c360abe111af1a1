/* SPDX-License-Identifier: BSD-3-Clause */
/* manual: processes started by hand on each node, the way PyTorch Lightning's
 * LightningEnvironment runs them: every process gets MASTER_ADDR, MASTER_PORT, WORLD_SIZE, its
 * node's number in NODE_RANK (or GROUP_RANK) and its place on the node in LOCAL_RANK.
 * LOCAL_WORLD_SIZE and RANK may be given too; without LOCAL_WORLD_SIZE the trainer's flags say how
 * many processes run on each node (--num-nodes N: WORLD_SIZE / N; --devices N: N), as in
 * Lightning, where global rank = node rank x processes per node + local rank.
 *
 * Detected after every launcher (it is what is left when none claims the process) when LOCAL_RANK,
 * NODE_RANK or GROUP_RANK is set; then every variable must be there, so a half-set environment is
 * an error naming what is missing rather than a one-process run.
 */
#include <stdio.h>
#include <string.h>

#include "ctrain/envs.h"
#include "envs/envs_impl.h"

static const char *const required[] = { CT_VAR_MASTER_ADDR, CT_VAR_MASTER_PORT, CT_VAR_WORLD_SIZE, CT_VAR_LOCAL_RANK, NULL };

static int manual_detect(ct_getenv_fn get, void *ctx)
{
    return ct_envvar_has(get, ctx, CT_VAR_LOCAL_RANK) || ct_envvar_has(get, ctx, CT_VAR_NODE_RANK) ||
           ct_envvar_has(get, ctx, CT_VAR_GROUP_RANK);
}

static int missing(ct_getenv_fn get, void *ctx, ct_error *err)
{
    char names[160] = "";
    size_t used = 0;

    for (int i = 0; required[i]; i++)
        if (!ct_envvar_has(get, ctx, required[i]))
            used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", used ? ", " : "", required[i]);
    if (!ct_envvar_has(get, ctx, CT_VAR_NODE_RANK) && !ct_envvar_has(get, ctx, CT_VAR_GROUP_RANK))
        snprintf(names + used, sizeof(names) - used, "%sNODE_RANK (or GROUP_RANK)", used ? ", " : "");
    if (!names[0])
        return 0;
    ct_error_set(err, CT_EINVAL, "env-variable-missing", "manual: processes started by hand need MASTER_ADDR, "
                 "MASTER_PORT, WORLD_SIZE, NODE_RANK (or GROUP_RANK) and LOCAL_RANK; not set: %s", names);
    return ct_error_hint(err, "set them in every process you start (Lightning's LightningEnvironment), or start "
                              "the processes with a launcher (srun, torchrun, mpirun)");
}

/* NODE_RANK wins over GROUP_RANK as in Lightning; both set and different is a contradiction. */
static int read_node_rank(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    int node = 0, group = 0, rc;
    int has_node = ct_envvar_has(get, ctx, CT_VAR_NODE_RANK), has_group = ct_envvar_has(get, ctx, CT_VAR_GROUP_RANK);

    if ((has_node && (rc = ct_envvar_int(get, ctx, CT_VAR_NODE_RANK, 0, 10000000, &node, err))) ||
        (has_group && (rc = ct_envvar_int(get, ctx, CT_VAR_GROUP_RANK, 0, 10000000, &group, err))))
        return rc;
    if (has_node && has_group && node != group) {
        ct_error_set(err, CT_EINVAL, "env-inconsistent", "manual: NODE_RANK=%d but GROUP_RANK=%d", node, group);
        return ct_error_hint(err, "both name this process's node; set one of them, or both to the same number");
    }
    info->node_rank = has_node ? node : group;
    ct_env_source(info, CT_ENV_NODE_RANK, "%s", has_node ? CT_VAR_NODE_RANK : CT_VAR_GROUP_RANK);
    return 0;
}

/* With the processes per node known: node count, global rank, and their checks. */
static int lay_out(ct_getenv_fn get, void *ctx, ct_env_info *info, const char *per_node, ct_error *err)
{
    int rank, rc;

    if (info->world_size % info->local_world_size) {
        ct_error_set(err, CT_ECONFLICT, "env-world-size-mismatch", "manual: WORLD_SIZE=%d is not a whole number of "
                     "nodes of %d process(es) (%s)", info->world_size, info->local_world_size, per_node);
        return ct_error_hint(err, "start the same number of processes on every node and set WORLD_SIZE to nodes x "
                                  "processes per node");
    }
    info->num_nodes = info->world_size / info->local_world_size;
    if (strstr(per_node, "--num-nodes"))
        ct_env_source(info, CT_ENV_NUM_NODES, "--num-nodes");
    else
        ct_env_source(info, CT_ENV_NUM_NODES, "WORLD_SIZE / %s", per_node);
    ct_env_source(info, CT_ENV_LOCAL_WORLD_SIZE, "%s", per_node);
    info->global_rank = info->node_rank * info->local_world_size + info->local_rank;
    ct_env_source(info, CT_ENV_GLOBAL_RANK, "NODE_RANK x (%s) + LOCAL_RANK", per_node);
    if ((rc = ct_env_check_ranges(info, err)))
        return rc;
    if (ct_envvar_has(get, ctx, CT_VAR_RANK)) {
        if ((rc = ct_envvar_int(get, ctx, CT_VAR_RANK, 0, 10000000, &rank, err)))
            return rc;
        if (rank != info->global_rank) {
            ct_error_set(err, CT_EINVAL, "env-inconsistent", "manual: RANK=%d, but node %d x %d process(es) per node "
                         "+ LOCAL_RANK %d is rank %d (%s)", rank, info->node_rank, info->local_world_size,
                         info->local_rank, info->global_rank, per_node);
            return ct_error_hint(err, "unset RANK, or set it to NODE_RANK x processes per node + LOCAL_RANK");
        }
        ct_env_source(info, CT_ENV_GLOBAL_RANK, "RANK (= NODE_RANK x (%s) + LOCAL_RANK)", per_node);
    }
    return 0;
}

static int manual_read(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    int rc;

    ct_env_info_init(info, "manual", 1);
    if ((rc = missing(get, ctx, err)) ||
        (rc = ct_envvar_int(get, ctx, CT_VAR_WORLD_SIZE, 1, 10000000, &info->world_size, err)) ||
        (rc = ct_envvar_int(get, ctx, CT_VAR_LOCAL_RANK, 0, 10000000, &info->local_rank, err)) ||
        (rc = read_node_rank(get, ctx, info, err)) || (rc = ct_env_master_port(get, ctx, info, err)) < 0)
        return rc;
    ct_env_source(info, CT_ENV_WORLD_SIZE, CT_VAR_WORLD_SIZE);
    ct_env_source(info, CT_ENV_LOCAL_RANK, CT_VAR_LOCAL_RANK);
    ct_env_master_addr(get, ctx, info);
    ct_env_source(info, CT_ENV_JOB_ID, "none: processes started by hand");
    if (ct_envvar_has(get, ctx, CT_VAR_LOCAL_WORLD_SIZE)) {
        if ((rc = ct_envvar_int(get, ctx, CT_VAR_LOCAL_WORLD_SIZE, 1, 10000000, &info->local_world_size, err)))
            return rc;
        return lay_out(get, ctx, info, CT_VAR_LOCAL_WORLD_SIZE, err);
    }
    /* The flags decide (manual_complete); 0 marks "not known yet" for ct_env_detect. */
    info->local_world_size = 0;
    info->num_nodes = 0;
    info->global_rank = 0;
    ct_env_source(info, CT_ENV_LOCAL_WORLD_SIZE, "from --num-nodes or --devices (LOCAL_WORLD_SIZE is not set)");
    ct_env_source(info, CT_ENV_NUM_NODES, "from --num-nodes or --devices (LOCAL_WORLD_SIZE is not set)");
    ct_env_source(info, CT_ENV_GLOBAL_RANK, "from --num-nodes or --devices (LOCAL_WORLD_SIZE is not set)");
    return 0;
}

static int manual_complete(ct_getenv_fn get, void *ctx, ct_env_info *info, int devices, int num_nodes,
                           ct_error *err)
{
    if (info->local_world_size > 0)
        return 0;
    if (num_nodes > 0) {
        if (info->world_size % num_nodes) {
            ct_error_set(err, CT_ECONFLICT, "env-world-size-mismatch", "manual: WORLD_SIZE=%d processes cannot be "
                         "spread evenly over --num-nodes %d", info->world_size, num_nodes);
            return ct_error_hint(err, "set WORLD_SIZE to --num-nodes x processes per node");
        }
        info->local_world_size = info->world_size / num_nodes;
        return lay_out(get, ctx, info, "WORLD_SIZE / --num-nodes", err);
    }
    if (devices > 0) {
        info->local_world_size = devices;
        return lay_out(get, ctx, info, "--devices", err);
    }
    ct_error_set(err, CT_ENOTAVAIL, "env-layout-unknown", "manual: WORLD_SIZE=%d, but nothing says how many processes "
                 "run on each node (LOCAL_WORLD_SIZE is not set, nor --num-nodes or --devices)", info->world_size);
    return ct_error_hint(err, "give --num-nodes N (and --devices) as when you started the processes, or set "
                              "LOCAL_WORLD_SIZE in each of them");
}

static int manual_validate(const ct_env_info *info, int devices, int num_nodes, ct_error *err)
{
    char dhint[256], nhint[256];
    int rc;

    snprintf(dhint, sizeof(dhint), "start %d process(es) on every node (LOCAL_RANK 0..%d), or --devices %d", devices,
             devices - 1, info->local_world_size);
    snprintf(nhint, sizeof(nhint), "start processes on %d node(s) (NODE_RANK 0..%d), or --num-nodes %d", num_nodes,
             num_nodes - 1, info->num_nodes);
    if ((rc = ct_env_validate_common(info, devices, num_nodes, dhint, nhint, err)))
        return rc;
    if (info->local_world_size * info->num_nodes != info->world_size) {
        ct_error_set(err, CT_ECONFLICT, "env-world-size-mismatch", "manual: %d node(s) x %d process(es) = %d, but "
                     "WORLD_SIZE is %d", info->num_nodes, info->local_world_size,
                     info->num_nodes * info->local_world_size, info->world_size);
        return ct_error_hint(err, "set WORLD_SIZE to nodes x processes per node in every process");
    }
    return 0;
}

const struct ct_env_ops ct_env_manual_ops = {
    .name = "manual",
    .description = "processes started by hand on each node (MASTER_ADDR/PORT, WORLD_SIZE, NODE_RANK or GROUP_RANK, "
                   "LOCAL_RANK: Lightning's LightningEnvironment)",
    .auto_detect = 1,
    .priority = 30,
    .needs = "LOCAL_RANK, NODE_RANK or GROUP_RANK (then also MASTER_ADDR, MASTER_PORT and WORLD_SIZE): set them in "
             "every process you start by hand",
    .started_by = "hand, on each node",
    .detect = manual_detect,
    .read = manual_read,
    .validate = manual_validate,
    .complete = manual_complete,
};
