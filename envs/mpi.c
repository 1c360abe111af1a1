/* MPI launchers: Open MPI's mpirun (OMPI_COMM_WORLD_*) and MPICH's Hydra mpiexec (PMI_RANK,
 * PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS).
 *
 * Checked before SLURM: mpirun inside an allocation starts its daemons with srun, so the SLURM
 * variables a rank inherits describe the daemon (one per node), not the rank. Neither launcher
 * says which node a rank is on; with the same number of ranks on every node and ranks filled node
 * by node (both launchers' default) it is rank / local size. When PMIx is present, the pmix
 * environment replaces these guesses with what the PMIx server knows (envs.h).
 */
#include <stdio.h>
#include <string.h>

#include "ctrain/envs.h"
#include "envs/envs_impl.h"

struct mpi_vars {
    const char *flavour, *size, *rank, *local_rank, *local_size;
};

static const struct mpi_vars openmpi = { "Open MPI", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                                         "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE" };
static const struct mpi_vars mpich = { "MPICH", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "MPI_LOCALNRANKS" };

static const struct mpi_vars *flavour(ct_getenv_fn get, void *ctx)
{
    if (ct_envvar_has(get, ctx, "OMPI_COMM_WORLD_RANK") && ct_envvar_has(get, ctx, "OMPI_COMM_WORLD_SIZE"))
        return &openmpi;
    /* MPI_LOCALRANKID tells Hydra apart from srun --mpi=pmi2, which also sets PMI_RANK/PMI_SIZE. */
    if (ct_envvar_has(get, ctx, "PMI_RANK") && ct_envvar_has(get, ctx, "PMI_SIZE") &&
        ct_envvar_has(get, ctx, "MPI_LOCALRANKID"))
        return &mpich;
    return NULL;
}

static int mpi_detect(ct_getenv_fn get, void *ctx)
{
    return flavour(get, ctx) != NULL;
}

/* num_nodes and node_rank: from Open MPI's node count when it gives one, else from equal nodes. */
static int lay_out(ct_getenv_fn get, void *ctx, const struct mpi_vars *v, ct_env_info *info, ct_error *err)
{
    int rc;

    if (v == &openmpi && ct_envvar_has(get, ctx, "OMPI_MCA_orte_num_nodes")) {
        if ((rc = ct_envvar_int(get, ctx, "OMPI_MCA_orte_num_nodes", 1, 10000000, &info->num_nodes, err)))
            return rc;
        ct_env_source(info, CT_ENV_NUM_NODES, "OMPI_MCA_orte_num_nodes");
    } else if (info->world_size % info->local_world_size == 0) {
        info->num_nodes = info->world_size / info->local_world_size;
        ct_env_source(info, CT_ENV_NUM_NODES, "%s / %s (same ranks on every node)", v->size, v->local_size);
    } else {
        info->num_nodes = -1;
        ct_env_source(info, CT_ENV_NUM_NODES, "unknown: %s is not a multiple of %s", v->size, v->local_size);
    }
    info->equal_tasks_per_node = info->num_nodes > 0 && info->world_size == info->local_world_size * info->num_nodes;
    if (info->num_nodes == 1) {
        info->node_rank = 0;
        ct_env_source(info, CT_ENV_NODE_RANK, "one node");
    } else if (info->equal_tasks_per_node) {
        info->node_rank = info->global_rank / info->local_world_size;
        ct_env_source(info, CT_ENV_NODE_RANK, "%s / %s (ranks filled node by node)", v->rank, v->local_size);
    } else {
        info->node_rank = -1;
        ct_env_source(info, CT_ENV_NODE_RANK, "unknown: nodes run different numbers of ranks");
    }
    return 0;
}

static int mpi_read(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    const struct mpi_vars *v = flavour(get, ctx);
    int rc;

    ct_env_info_init(info, "mpi", 1);
    if (!v) {
        ct_error_set(err, CT_ENOTAVAIL, "env-absent", "mpi: neither Open MPI's nor MPICH's rank variables are set");
        return ct_error_hint(err, "start the program with mpirun / mpiexec");
    }
    if ((rc = ct_envvar_int(get, ctx, v->size, 1, 10000000, &info->world_size, err)) ||
        (rc = ct_envvar_int(get, ctx, v->rank, 0, 10000000, &info->global_rank, err)) ||
        (rc = ct_envvar_int(get, ctx, v->local_rank, 0, 10000000, &info->local_rank, err)) ||
        (rc = ct_envvar_int(get, ctx, v->local_size, 1, 10000000, &info->local_world_size, err)))
        return rc;
    ct_env_source(info, CT_ENV_WORLD_SIZE, "%s", v->size);
    ct_env_source(info, CT_ENV_GLOBAL_RANK, "%s", v->rank);
    ct_env_source(info, CT_ENV_LOCAL_RANK, "%s", v->local_rank);
    ct_env_source(info, CT_ENV_LOCAL_WORLD_SIZE, "%s", v->local_size);
    if ((rc = lay_out(get, ctx, v, info, err)))
        return rc;

    if (v == &openmpi && ct_envvar_has(get, ctx, "OMPI_MCA_ess_base_jobid")) {
        snprintf(info->job_id, sizeof(info->job_id), "%s", get("OMPI_MCA_ess_base_jobid", ctx));
        ct_env_source(info, CT_ENV_JOB_ID, "OMPI_MCA_ess_base_jobid");
    } else if (ct_envvar_has(get, ctx, "PMIX_NAMESPACE")) {
        snprintf(info->job_id, sizeof(info->job_id), "%s", get("PMIX_NAMESPACE", ctx));
        ct_env_source(info, CT_ENV_JOB_ID, "PMIX_NAMESPACE");
    } else {
        ct_env_source(info, CT_ENV_JOB_ID, "none: %s gives no job id", v->flavour);
    }

    if (!ct_env_master_addr(get, ctx, info)) {
        if (info->num_nodes == 1) {
            snprintf(info->main_address, sizeof(info->main_address), "127.0.0.1");
            ct_env_source(info, CT_ENV_MAIN_ADDRESS, "one node: loopback");
        } else {
            ct_env_source(info, CT_ENV_MAIN_ADDRESS, "unknown: %s does not say where rank 0 runs; set MASTER_ADDR",
                          v->flavour);
        }
    }
    if (info->job_id[0]) {
        if ((rc = ct_env_port_rule(get, ctx, info, info->job_id, 0, "step 0", err)))
            return rc;
    } else if ((rc = ct_env_master_port(get, ctx, info, err)) <= 0) {
        if (rc < 0)
            return rc;
        ct_env_source(info, CT_ENV_MAIN_PORT, "unknown: no job id to derive it from; set MASTER_PORT");
    }
    return ct_env_check_ranges(info, err);
}

static int mpi_validate(const ct_env_info *info, int devices, int num_nodes, ct_error *err)
{
    char dhint[256], nhint[256];

    snprintf(dhint, sizeof(dhint), "start %d rank(s) per node (mpirun --map-by ppr:%d:node), or --devices %d",
             devices, devices, info->local_world_size);
    snprintf(nhint, sizeof(nhint), "start ranks on %d node(s) (mpirun --host / --hostfile), or --num-nodes %d",
             num_nodes, info->num_nodes);
    return ct_env_validate_common(info, devices, num_nodes, dhint, nhint, err);
}

const struct ct_env_ops ct_env_mpi_ops = {
    .name = "mpi",
    .description = "ranks started by Open MPI's mpirun (OMPI_COMM_WORLD_*) or MPICH's mpiexec (PMI_RANK, PMI_SIZE)",
    .auto_detect = 1,
    .detect = mpi_detect,
    .read = mpi_read,
    .validate = mpi_validate,
};
