/* SPDX-License-Identifier: BSD-3-Clause */
/* The "pmix" cluster environment: processes started by a PMIx server — ctrain's own launchers,
 * prun, or (as an enrichment of slurm, lsf and mpi) srun --mpi=pmix, jsrun and Open MPI's mpirun.
 * The layout comes from the server through the shared client (include/ctrain/pmix.h), so it is
 * exact where variables can only guess (node rank with unequal nodes, rank 0's host).
 * See include/ctrain/environment.h and ctrain/envs.h (detection order, enrichment).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/environment.h"
#include "ctrain/envs.h"
#include "ctrain/pmix.h"
#include "ctrain/util.h"
#include "envs/envs_impl.h"
#include "pmix/environment.h"

static int pmix_detect(ct_getenv_fn get, void *ctx)
{
    return ct_pmix_client_present(get, ctx);
}

/* The server can only be asked from the process it started: variables handed in by a test
 * fixture or read from another process's environment (SPANK) are not ours. */
static int same_process(ct_getenv_fn get, void *ctx, ct_error *err)
{
    static const char *const vars[] = { "PMIX_RANK", "PMIX_NAMESPACE", NULL };

    for (int i = 0; vars[i]; i++) {
        const char *v = get(vars[i], ctx), *mine = getenv(vars[i]);
        if (!v || !mine || strcmp(v, mine)) {
            ct_error_set(err, CT_ENOTAVAIL, "env-pmix-foreign", "cluster environment pmix: %s='%s' "
                         "is not this process's (%s), so its PMIx server cannot be asked",
                         vars[i], v ? v : "", mine ? mine : "unset");
            return ct_error_hint(err, "the pmix environment reads the layout from the server of "
                                      "the process it runs in; choose another --cluster-env here");
        }
    }
    return 0;
}

/* Standalone: what only the pmix environment decides (the enriched base keeps its own). */
static int fill_own(ct_getenv_fn get, void *ctx, const ct_pmix_client *c, ct_env_info *info,
                    ct_error *err)
{
    const char *port = get(CT_VAR_MASTER_PORT, ctx);
    long p;

    memset(info, 0, sizeof(*info));
    snprintf(info->name, sizeof(info->name), "pmix");
    info->creates_processes_externally = 1;
    ct_str_copy(info->job_id, sizeof(info->job_id), ct_pmix_client_job_id(c));
    ct_env_source(info, CT_ENV_JOB_ID, "PMIx: PMIX_JOBID (else the namespace)");
    if (port && *port) {
        if (ct_parse_long(port, 1, 65535, &p) != 0)
            return ct_error_set(err, CT_EINVAL, "env-bad-port", "MASTER_PORT='%s' is not a port "
                                "number (1..65535)", port),
                   ct_error_hint(err, "unset MASTER_PORT or give a free TCP port");
        info->main_port = (int)p;
        ct_env_source(info, CT_ENV_MAIN_PORT, CT_VAR_MASTER_PORT);
    } else {
        ct_env_source(info, CT_ENV_MAIN_PORT, "none: the ranks exchange through PMIx (set MASTER_PORT "
                                       "for PyTorch-style programs)");
    }
    return 0;
}

/* Every field a rank needs, from the base's own variables (a SLURM step, mpirun on one node). */
static int base_complete(const ct_env_info *info)
{
    return info->world_size > 0 && info->global_rank >= 0 && info->local_rank >= 0 &&
           info->local_world_size > 0 && info->node_rank >= 0 && info->num_nodes > 0 && info->main_address[0];
}

/* A rank of ctrain's own launcher: CTRAIN_LAUNCHER_RANK equal to PMIX_RANK. */
static int from_ctrain_launcher(ct_getenv_fn get, void *ctx)
{
    const char *lr = get(CT_LAUNCHER_ENV_RANK, ctx), *pr = get("PMIX_RANK", ctx);

    return lr && pr && *lr && !strcmp(lr, pr) && get(CT_LAUNCHER_ENV_NPROC, ctx);
}

/* ctrain's launchers start every rank on this node and name it in CTRAIN_LAUNCHER_RANK/NPROCS;
 * their server would answer the same (pmix/server.c: one node, its hostname, the namespace as job
 * id). Read there, so that under Open MPI 5 nothing connects before MPI_Init (see pmix_read). */
static int read_launcher(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    const struct ct_env_ops *local = ct_env_lookup("local");
    const char *ns = get("PMIX_NAMESPACE", ctx);
    int rc;

    if ((rc = local->read(get, ctx, info, err)))
        return rc;
    snprintf(info->name, sizeof(info->name), "pmix");
    ct_str_copy(info->job_id, sizeof(info->job_id), ns ? ns : "");
    ct_env_source(info, CT_ENV_JOB_ID, "PMIX_NAMESPACE (ctrain's launcher: its server's PMIX_JOBID)");
    if (strcmp(info->source[CT_ENV_MAIN_ADDRESS], CT_VAR_MASTER_ADDR)) {
        gethostname(info->main_address, sizeof(info->main_address) - 1);
        ct_env_source(info, CT_ENV_MAIN_ADDRESS, "this host (ctrain's launcher: its server's PMIX_HOSTNAME)");
    }
    return 0;
}

static int pmix_read(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    /* Called on an info an environment that pmix enriches filled (slurm, lsf, mpi: their
     * descriptors say pmix_enriches): enrich it (see ctrain/envs.h). */
    const struct ct_env_ops *base = ct_env_lookup(info->name);
    int enrich = base && base->pmix_enriches;
    const char *addr = get(CT_VAR_MASTER_ADDR, ctx);
    ct_pmix_client *c;
    int rc;

    /* Under Open MPI 5 every connection to the server as this rank before MPI_Init, even from a
     * child that finalized (pmix/client.c), races with MPI_Init's own: with 3 or more ranks over
     * two nodes of srun --mpi=pmix, a node's ranks then wait in MPI_Init forever now and then
     * (seen about one run in four on a loaded machine). Where the base's variables already say
     * everything, PMIx would only repeat them: the info stays as the base filled it (the
     * registry then reports no enrichment). */
    if (enrich && ct_pmix_mpi_init_needs_finalized() && base_complete(info))
        return 0;
    if (!enrich && ct_pmix_mpi_init_needs_finalized() && from_ctrain_launcher(get, ctx))
        return read_launcher(get, ctx, info, err);
    if ((rc = same_process(get, ctx, err)) || (rc = ct_pmix_client_shared(&c, err)))
        return rc;
    if (!enrich && (rc = fill_own(get, ctx, c, info, err)))
        return rc;
    info->world_size = ct_pmix_client_size(c);
    info->global_rank = ct_pmix_client_rank(c);
    info->local_rank = ct_pmix_client_local_rank(c);
    info->local_world_size = ct_pmix_client_local_size(c);
    info->node_rank = ct_pmix_client_node_rank(c);
    info->num_nodes = ct_pmix_client_num_nodes(c);
    info->equal_tasks_per_node = ct_pmix_client_equal_per_node(c);
    ct_env_source_ranks(info, "PMIx: PMIX_JOB_SIZE", "PMIx: PMIX_RANK", "PMIx: PMIX_LOCAL_RANK",
                        "PMIx: PMIX_LOCAL_SIZE");
    ct_env_source(info, CT_ENV_NODE_RANK, "PMIx: PMIX_NODEID (else the node map)");
    ct_env_source(info, CT_ENV_NUM_NODES, "PMIx: PMIX_NUM_NODES (else the node map)");
    if (addr && *addr) {
        ct_str_copy(info->main_address, sizeof(info->main_address), addr);
        ct_env_source(info, CT_ENV_MAIN_ADDRESS, CT_VAR_MASTER_ADDR);
    } else {
        ct_str_copy(info->main_address, sizeof(info->main_address), ct_pmix_client_rank0_host(c));
        ct_env_source(info, CT_ENV_MAIN_ADDRESS, "PMIx: PMIX_HOSTNAME of rank 0");
    }
    return 0;
}

/* The checks every environment makes (envs/common.c), with how to start what the flags ask for
 * under a PMIx server. */
static int pmix_validate(const ct_env_info *info, int devices, int num_nodes, ct_error *err)
{
    char dhint[160], nhint[128];

    snprintf(dhint, sizeof(dhint), "start one process per device (e.g. srun --ntasks-per-node=%d, mpirun -npernode "
             "%d), or use --devices %d", devices, devices, info->local_world_size);
    snprintf(nhint, sizeof(nhint), "launch on %d nodes (srun -N %d), or use --num-nodes %d", num_nodes, num_nodes,
             info->num_nodes);
    return ct_env_validate_common(info, devices, num_nodes, dhint, nhint, err);
}

const struct ct_env_ops ct_env_pmix_ops = {
    .name = "pmix",
    .description = "processes started by a PMIx server: ctrain's launcher, prun; refines srun "
                   "--mpi=pmix, jsrun and mpirun",
    .auto_detect = 1,
    .priority = 40,
    .enricher = 1,
    .needs = "PMIX_RANK and PMIX_NAMESPACE: start it with srun --mpi=pmix, Open MPI's mpirun or ctrain's launcher",
    .detect = pmix_detect,
    .read = pmix_read,
    .validate = pmix_validate,
};

int ct_pmix_env_register(void)
{
    return ct_env_register(&ct_env_pmix_ops);
}
