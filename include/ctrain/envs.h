/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the registry of cluster environments, detection, and the rules they share.
 *
 * Detection order (first match wins; kubeflow only when chosen with --cluster-env kubeflow):
 *   1. torchelastic  TORCHELASTIC_RUN_ID with RANK, WORLD_SIZE, LOCAL_RANK (torchrun, also inside SLURM)
 *   2. lsf           LSB_JOBID, LSB_DJOB_RANKFILE, JSM_NAMESPACE_{RANK,SIZE,LOCAL_RANK} (jsrun)
 *   3. mpi           OMPI_COMM_WORLD_RANK/SIZE (Open MPI's mpirun, also inside SLURM: the SLURM
 *                    variables then describe mpirun's daemons, not the ranks), PALS_RANKID and
 *                    PALS_NODEID (Cray PALS), MV2_COMM_WORLD_RANK/SIZE (MVAPICH2), PMI_RANK, PMI_SIZE
 *                    and MPI_LOCALRANKID (MPICH Hydra), or PMI_PORT, PMI_ID and MPI_LOCALRANKID
 *                    (Hydra's -pmi-port mode); node rank only from the launcher (PALS_NODEID,
 *                    PMIx), never guessed
 *   4. slurm         a job step: SLURM_JOB_ID, SLURM_STEP_ID, SLURM_PROCID, SLURM_NTASKS; a salloc
 *                    shell, a batch script, the interactive/extern step and a one-task srun --pty
 *                    are not (a multi-task --pty step is)
 *   5. pmix          PMIX_RANK and PMIX_NAMESPACE with nothing above (ctrain's launcher, prun)
 *   6. manual        LOCAL_RANK, NODE_RANK or GROUP_RANK with nothing above: processes started by
 *                    hand on each node (Lightning's LightningEnvironment); then MASTER_ADDR,
 *                    MASTER_PORT, WORLD_SIZE, LOCAL_RANK and NODE_RANK/GROUP_RANK must all be set
 *   7. local         always: ctrain's own launcher (CTRAIN_LAUNCHER_RANK/NPROCS) or one process
 * When PMIx variables are present and the pmix environment is registered, pmix enriches slurm,
 * lsf and mpi: their read() fills the info first, then pmix's read() overwrites what the PMIx
 * server knows exactly (node rank, local size, rank 0's host) and info.enriched_by = "pmix".
 * Built with Open MPI 5, pmix leaves a base whose variables already give the whole layout (a
 * SLURM step, mpirun on one node) as it is: a connection before MPI_Init races with MPI_Init's
 * own (pmix/environment.c); enriched_by stays "".
 *
 * libctrain-core knows every name (ctrain plan --list, "did you mean", error messages); the pmix
 * implementation lives in libctrain (pmix/, it links libpmix) and registers itself with
 * ct_env_register at start-up. In core-only programs (the SPANK plugin) pmix is known, not present.
 */
#ifndef CTRAIN_ENVS_H
#define CTRAIN_ENVS_H

#include "ctrain/environment.h"
#include "ctrain/error.h"

/* Every environment name, in detection order (kubeflow last), NULL-terminated. */
const char *const *ct_env_names(void);

/* Registered environments in detection order (built-ins and what ct_env_register added). */
int ct_env_count(void);
const struct ct_env_ops *ct_env_at(int i);

/* The registered environment of that name; NULL when unknown or not registered here. */
const struct ct_env_ops *ct_env_lookup(const char *name);

/* Add an implementation for a known name without one (today: "pmix"). Idempotent for the same
 * ops; CT_EINVAL for a name not in ct_env_names(), CT_ECONFLICT when another ops has the name. */
int ct_env_register(const struct ct_env_ops *ops);

/* Choose and read the environment. forced: NULL or "auto" detects in the order above; a name
 * forces it (CT_ENOTAVAIL with a hint when its variables are absent; an unknown name is CT_EINVAL
 * with "did you mean"). On success *ops is the chosen environment and info is filled. */
int ct_env_detect(ct_getenv_fn get, void *ctx, const char *forced, const struct ct_env_ops **ops,
                  ct_env_info *info, ct_error *err);

/* Let the environment fill what only the flags can say (ops->complete; a no-op for the others):
 * devices (per node) and num_nodes as given, 0 when not. Then check the ranges again. */
int ct_env_complete(const struct ct_env_ops *ops, ct_getenv_fn get, void *ctx, ct_env_info *info, int devices,
                    int num_nodes, ct_error *err);

/* --- rules shared by environments and the SPANK plugin -------------------------------------- */

/* main_port under SLURM (and LSF, MPI without MASTER_PORT): derived from the job id and the step
 * id together, hashed over the whole range (Lightning's 10000 + last four digits of the job id
 * gives every step of a job the same port; job mod 1024 gave jobs 1024 apart the same one):
 *
 *     port = port_base + ((job_id * 2654435761 + step_id * 2246822519) mod 2^32) / 2^18
 *
 * within port_base .. port_base + 16383 (default 15000 .. 31383, below Linux's ephemeral ports
 * from 32768). The 16 first steps of a job get 16 different ports, and so do jobs up to 1024
 * apart (t/unit/test_envs checks both); srun --resv-ports' SLURM_STEP_RESV_PORTS, where the
 * SPANK plugin sees it, and a user's MASTER_PORT take precedence.
 * Returns the port, or CT_EINVAL when port_base is outside 1024 .. 65535 - 16383. */
#define CT_ENV_PORT_BASE_DEFAULT 15000
#define CT_ENV_PORT_SPAN         16384
int ct_env_port_for_step(unsigned long job_id, unsigned long step_id, int port_base);

/* A port that is free now on this host (bound to port 0 and released); CT_EIO when none. */
int ct_env_free_port(int *port, ct_error *err);

/* Rank 0's host of a SLURM step, from its variables: the one rule for the SLURM environment
 * (main_address) and the SPANK plugin (MASTER_ADDR). The first host of SLURM_STEP_NODELIST (else
 * SLURM_NODELIST, SLURM_JOB_NODELIST) -> CT_RANK0_FIRST_HOST, unless task 0 runs elsewhere ->
 * CT_RANK0_ELSEWHERE: a heterogeneous job's component 0 (SLURM_JOB_NODELIST_HET_GROUP_0), an
 * arbitrary distribution over num_nodes > 1 (SLURM_HOSTFILE's first line; host "" when no line
 * says: ask slurmctld's step layout, as the plugin does, or set MASTER_ADDR). *source names the
 * variable (or why it is unknown). A CT_E* error when no node list is set or it names no node. */
#define CT_RANK0_FIRST_HOST 0
#define CT_RANK0_ELSEWHERE  1
int ct_env_slurm_rank0_host(ct_getenv_fn get, void *ctx, int num_nodes, char *host, size_t size,
                            const char **source, ct_error *err);

/* What kind of SLURM context the variables describe. */
enum ct_slurm_context {
    CT_SLURM_NONE = 0,       /* no SLURM job */
    CT_SLURM_ALLOCATION,     /* a salloc shell or a batch script: a job, no step (SLURM_STEP_ID absent) */
    CT_SLURM_INTERACTIVE,    /* one-task srun --pty, or the interactive/extern step: a person's shell */
    CT_SLURM_STEP            /* srun's tasks: a training step */
};
enum ct_slurm_context ct_env_slurm_context(ct_getenv_fn get, void *ctx);
/* The SLURM job this process belongs to (SLURM_JOB_ID, or the older SLURM_JOBID), "" outside a job:
 * a batch script, srun's tasks and the ranks ctrain's own launcher starts inside a job all have it. */
const char *ct_env_slurm_job_id(ct_getenv_fn get, void *ctx);
/* 1 in a step `ctrain supervise` started (CTRAIN_SUPERVISED=1 in its environment): the supervisor,
 * not the job's requeue, keeps a bad node out of the next step. */
int ct_env_ctrain_supervised(ct_getenv_fn get, void *ctx);

/* Expand SLURM_TASKS_PER_NODE-style counts ("2(x3),1" -> 2,2,2,1) into a malloc'd array.
 * var names the variable in error messages. */
int ct_env_tasks_per_node_parse(const char *var, const char *value, int **counts, int *n, ct_error *err);

/* What a strategy asks the environment once its ranks are up, as the process's variables stand
 * then (ctrain's fork launcher gives its workers their PMIx variables after the plan was made).
 * get NULL: the process environment. */

/* 1 when a PMIx server started this process (PMIX_RANK is set): MPI_Init can join the ranks. */
int ct_env_pmix_started(ct_getenv_fn get, void *ctx);

/* RANK and LOCAL_RANK as the launcher gave them (the SPANK plugin, torchrun) against the ranks
 * MPI gave this process: rank, and local, its place among the ranks on its host (< 0: unknown).
 * A program reading RANK must see the rank its collectives use. Not checked where no launcher
 * started the processes (info), nor in workers of ctrain's own launchers (CTRAIN_LAUNCHER_RANK:
 * they inherit their parent's variables). CT_ECONFLICT "ddp-launcher-rank-mismatch" naming the
 * variable, its value and MPI's; who prefixes the message ("ddp"). */
int ct_env_check_launcher_ranks(ct_getenv_fn get, void *ctx, const ct_env_info *info, int rank, int local,
                                const char *host, const char *who, ct_error *err);

#endif
