/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI launchers: Open MPI's mpirun (OMPI_COMM_WORLD_*), Cray PALS (PALS_*, PMI_*: mpiexec on HPE
 * Cray EX, srun --mpi=cray_shasta), MVAPICH2 (MV2_COMM_WORLD_*), and MPICH's Hydra mpiexec in its
 * two PMI modes (PMI_RANK, PMI_SIZE, PMI_FD; or -pmi-port: PMI_PORT, PMI_ID) with its
 * MPI_LOCALRANKID and MPI_LOCALNRANKS.
 *
 * Checked before SLURM: mpirun inside an allocation starts its daemons with srun, so the SLURM
 * variables a rank inherits describe the daemon (one per node), not the rank.
 *
 * Node rank comes from the launcher's own answer: PALS_NODEID where the launcher sets it, the
 * PMIx server where one is reachable (the pmix environment enriches mpi, see envs.h). Nothing else
 * says it: Open MPI's OMPI_COMM_WORLD_NODE_RANK is the rank among this node's processes, not the
 * node's number, and rank / local size contradicts the local rank under --map-by node or Hydra's
 * round-robin. Without an answer on more than one node, node_rank stays unknown and detection
 * ends in an error naming the variables (env-layout-unknown).
 */
#include <stdio.h>
#include <string.h>

#include "ctrain/envs.h"
#include "envs/envs_impl.h"

struct mpi_vars {
    const char *flavour;
    const char *detect[3];        /* all must be set */
    const char *size, *rank, *local_rank, *local_size;
    const char *local_rank_alt;   /* a second name for the local rank, or NULL */
    const char *local_size_alt;   /* a second name for the local size, or NULL */
    const char *node_rank;        /* the launcher's node number, or NULL when it gives none */
    const char *job_id;           /* the launcher's job id, or NULL */
};

static const struct mpi_vars flavours[] = {
    { "Open MPI", { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL }, "OMPI_COMM_WORLD_SIZE",
      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", NULL, NULL, NULL,
      "OMPI_MCA_ess_base_jobid" },
    { "Cray PALS", { "PALS_RANKID", "PALS_NODEID", NULL }, "PMI_SIZE", "PALS_RANKID", "PALS_LOCAL_RANKID",
      "PMI_LOCAL_SIZE", "PMI_LOCAL_RANK", "PALS_LOCAL_SIZE", "PALS_NODEID", "PALS_APID" },
    { "MVAPICH2", { "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", NULL }, "MV2_COMM_WORLD_SIZE",
      "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE", NULL, NULL, NULL, NULL },
    /* MPI_LOCALRANKID tells Hydra apart from srun --mpi=pmi2, which also sets PMI_RANK/PMI_SIZE. */
    { "MPICH Hydra", { "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID" }, "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID",
      "MPI_LOCALNRANKS", NULL, NULL, NULL, NULL },
    /* -pmi-port: the rank is PMI_ID; the world size travels over the PMI connection, not in a
     * variable (PMI_SIZE only when set as well). */
    { "MPICH Hydra -pmi-port", { "PMI_PORT", "PMI_ID", "MPI_LOCALRANKID" }, "PMI_SIZE", "PMI_ID",
      "MPI_LOCALRANKID", "MPI_LOCALNRANKS", NULL, NULL, NULL, NULL },
};
#define NFLAVOURS ((int)(sizeof(flavours) / sizeof(flavours[0])))

static const struct mpi_vars *flavour(ct_getenv_fn get, void *ctx)
{
    for (int i = 0; i < NFLAVOURS; i++) {
        int all = 1;
        for (int k = 0; k < 3 && flavours[i].detect[k]; k++)
            all &= ct_envvar_has(get, ctx, flavours[i].detect[k]);
        if (all)
            return &flavours[i];
    }
    return NULL;
}

static int mpi_detect(ct_getenv_fn get, void *ctx)
{
    return flavour(get, ctx) != NULL;
}

/* Hydra's -pmi-port mode without PMI_SIZE: the variables cannot give the world size. */
static int size_unknown(const struct mpi_vars *v, ct_error *err)
{
    ct_error_set(err, CT_ENOTAVAIL, "env-layout-unknown", "mpi (%s): PMI_PORT and PMI_ID are set but PMI_SIZE is "
                 "not: in -pmi-port mode Hydra hands the world size over the PMI connection, not in a variable",
                 v->flavour);
    return ct_error_hint(err, "start it without -pmi-port (mpiexec's default sets PMI_RANK and PMI_SIZE), or with "
                              "srun / Open MPI's mpirun");
}

static int read_sizes(ct_getenv_fn get, void *ctx, const struct mpi_vars *v, ct_env_info *info, ct_error *err)
{
    const char *local_size = v->local_size, *local_rank = v->local_rank;
    int rc;

    if (!ct_envvar_has(get, ctx, v->size) && !strcmp(v->rank, "PMI_ID"))
        return size_unknown(v, err);
    if (v->local_size_alt && !ct_envvar_has(get, ctx, local_size) && ct_envvar_has(get, ctx, v->local_size_alt))
        local_size = v->local_size_alt;
    if (v->local_rank_alt && !ct_envvar_has(get, ctx, local_rank) && ct_envvar_has(get, ctx, v->local_rank_alt))
        local_rank = v->local_rank_alt;
    if ((rc = ct_envvar_int(get, ctx, v->size, 1, 10000000, &info->world_size, err)) ||
        (rc = ct_envvar_int(get, ctx, v->rank, 0, 10000000, &info->global_rank, err)) ||
        (rc = ct_envvar_int(get, ctx, local_rank, 0, 10000000, &info->local_rank, err)) ||
        (rc = ct_envvar_int(get, ctx, local_size, 1, 10000000, &info->local_world_size, err)))
        return ct_error_prefix(err, "mpi (%s): ", v->flavour);
    ct_env_source_ranks(info, v->size, v->rank, local_rank, local_size);
    return 0;
}

/* num_nodes: Open MPI's node count when it gives one, else from equal nodes. node_rank: the
 * launcher's node number, 0 on one node, else unknown (PMIx may still answer, see envs.h). */
static int lay_out(ct_getenv_fn get, void *ctx, const struct mpi_vars *v, ct_env_info *info, ct_error *err)
{
    int rc;

    if (v == &flavours[0] && ct_envvar_has(get, ctx, "OMPI_MCA_orte_num_nodes")) {
        if ((rc = ct_envvar_int(get, ctx, "OMPI_MCA_orte_num_nodes", 1, 10000000, &info->num_nodes, err)))
            return rc;
        ct_env_source(info, CT_ENV_NUM_NODES, "OMPI_MCA_orte_num_nodes");
    } else if (info->world_size == info->local_world_size) {
        info->num_nodes = 1;
        ct_env_source(info, CT_ENV_NUM_NODES, "%s = %s (all ranks on this node)", v->size,
                      info->source[CT_ENV_LOCAL_WORLD_SIZE]);
    } else if (info->world_size % info->local_world_size == 0) {
        info->num_nodes = info->world_size / info->local_world_size;
        ct_env_source(info, CT_ENV_NUM_NODES, "%s / %s (same ranks on every node)", v->size,
                      info->source[CT_ENV_LOCAL_WORLD_SIZE]);
    } else {
        info->num_nodes = -1;
        ct_env_source(info, CT_ENV_NUM_NODES, "unknown: %s is not a multiple of %s", v->size,
                      info->source[CT_ENV_LOCAL_WORLD_SIZE]);
    }
    info->equal_tasks_per_node = info->num_nodes > 0 && info->world_size == info->local_world_size * info->num_nodes;
    if (v->node_rank) {
        if ((rc = ct_envvar_int(get, ctx, v->node_rank, 0, 10000000, &info->node_rank, err)))
            return rc;
        ct_env_source(info, CT_ENV_NODE_RANK, "%s", v->node_rank);
    } else if (info->num_nodes == 1) {
        info->node_rank = 0;
        ct_env_source(info, CT_ENV_NODE_RANK, "one node");
    } else {
        info->node_rank = -1;
        ct_env_source(info, CT_ENV_NODE_RANK, "unknown: %s, %s and %s do not say which node", v->rank,
                      info->source[CT_ENV_LOCAL_RANK], info->source[CT_ENV_LOCAL_WORLD_SIZE]);
    }
    return 0;
}

static void read_job_id(ct_getenv_fn get, void *ctx, const struct mpi_vars *v, ct_env_info *info)
{
    const char *var = v->job_id && ct_envvar_has(get, ctx, v->job_id) ? v->job_id
                      : ct_envvar_has(get, ctx, "PMIX_NAMESPACE") ? "PMIX_NAMESPACE" : NULL;

    if (var) {
        snprintf(info->job_id, sizeof(info->job_id), "%s", get(var, ctx));
        ct_env_source(info, CT_ENV_JOB_ID, "%s", var);
    } else {
        ct_env_source(info, CT_ENV_JOB_ID, "none: %s gives no job id", v->flavour);
    }
}

static int mpi_read(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    const struct mpi_vars *v = flavour(get, ctx);
    int rc;

    ct_env_info_init(info, "mpi", 1);
    if (!v) {
        ct_error_set(err, CT_ENOTAVAIL, "env-absent", "mpi: no MPI launcher's rank variables are set (Open MPI, "
                     "Cray PALS, MVAPICH2, MPICH Hydra)");
        return ct_error_hint(err, "start the program with mpirun / mpiexec");
    }
    if ((rc = read_sizes(get, ctx, v, info, err)) || (rc = lay_out(get, ctx, v, info, err)))
        return rc;
    read_job_id(get, ctx, v, info);

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
    .description = "ranks started by mpirun / mpiexec: Open MPI (OMPI_COMM_WORLD_*), Cray PALS (PALS_*, PMI_*), "
                   "MVAPICH2 (MV2_COMM_WORLD_*), MPICH Hydra (PMI_RANK/PMI_SIZE or PMI_ID/PMI_PORT, MPI_LOCAL*)",
    .auto_detect = 1,
    .priority = 60,
    .pmix_enriches = 1,
    .needs = "OMPI_COMM_WORLD_RANK/SIZE (Open MPI), PALS_RANKID and PALS_NODEID (Cray PALS), MV2_COMM_WORLD_RANK/SIZE "
             "(MVAPICH2), or PMI_RANK/PMI_SIZE or PMI_PORT/PMI_ID with MPI_LOCALRANKID (MPICH Hydra): start it with "
             "mpirun / mpiexec",
    .detect = mpi_detect,
    .read = mpi_read,
    .validate = mpi_validate,
};
