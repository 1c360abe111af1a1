/* SPDX-License-Identifier: BSD-3-Clause */
/* kubeflow: a pod of a Kubeflow PyTorchJob. The operator starts one process per pod and sets
 * MASTER_ADDR, MASTER_PORT, WORLD_SIZE (pods) and RANK (this pod). Only when chosen with
 * --cluster-env kubeflow: the same variables are exported by many scripts outside Kubernetes.
 */
#include <stdio.h>
#include <string.h>

#include "ctrain/envs.h"
#include "envs/envs_impl.h"

static int kf_detect(ct_getenv_fn get, void *ctx)
{
    return ct_envvar_has(get, ctx, "KUBERNETES_PORT") && ct_envvar_has(get, ctx, CT_VAR_MASTER_ADDR) &&
           ct_envvar_has(get, ctx, CT_VAR_MASTER_PORT) && ct_envvar_has(get, ctx, CT_VAR_WORLD_SIZE) &&
           ct_envvar_has(get, ctx, CT_VAR_RANK);
}

static int kf_read(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    int rc;

    ct_env_info_init(info, "kubeflow", 1);
    if ((rc = ct_envvar_int(get, ctx, CT_VAR_WORLD_SIZE, 1, 10000000, &info->world_size, err)) ||
        (rc = ct_envvar_int(get, ctx, CT_VAR_RANK, 0, 10000000, &info->global_rank, err)))
        return rc;
    /* One process per pod, one pod per node. */
    info->num_nodes = info->world_size;
    info->node_rank = info->global_rank;
    ct_env_source_ranks(info, CT_VAR_WORLD_SIZE, CT_VAR_RANK, "one process per pod", "one process per pod");
    ct_env_source(info, CT_ENV_NUM_NODES, "WORLD_SIZE (one process per pod)");
    ct_env_source(info, CT_ENV_NODE_RANK, "RANK (one process per pod)");
    ct_env_master_addr(get, ctx, info);
    if ((rc = ct_env_master_port(get, ctx, info, err)) < 0)
        return rc;
    if (ct_envvar_has(get, ctx, "HOSTNAME")) {
        /* The pod's name: "<job>-master-0" / "<job>-worker-N"; the job is what precedes the role. */
        snprintf(info->job_id, sizeof(info->job_id), "%s", get("HOSTNAME", ctx));
        for (char *p = info->job_id; *p; p++)
            if (!strncmp(p, "-master-", 8) || !strncmp(p, "-worker-", 8)) {
                *p = '\0';
                break;
            }
        ct_env_source(info, CT_ENV_JOB_ID, "HOSTNAME (pod name without -master-N/-worker-N)");
    } else {
        ct_env_source(info, CT_ENV_JOB_ID, "none: HOSTNAME is not set");
    }
    return ct_env_check_ranges(info, err);
}

static int kf_validate(const ct_env_info *info, int devices, int num_nodes, ct_error *err)
{
    char dhint[256], nhint[256];

    snprintf(dhint, sizeof(dhint), "a PyTorchJob runs one process per pod: use --devices 1 (or leave it out)");
    snprintf(nhint, sizeof(nhint), "set the PyTorchJob's replicas to %d pods, or --num-nodes %d", num_nodes,
             info->num_nodes);
    return ct_env_validate_common(info, devices, num_nodes, dhint, nhint, err);
}

const struct ct_env_ops ct_env_kubeflow_ops = {
    .name = "kubeflow",
    .description = "Kubeflow PyTorchJob pod, one process per pod (MASTER_ADDR/PORT, WORLD_SIZE, RANK)",
    .auto_detect = 0,
    .priority = 0,
    .needs = "KUBERNETES_PORT, MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK: run it in a Kubeflow PyTorchJob pod",
    .detect = kf_detect,
    .read = kf_read,
    .validate = kf_validate,
};
