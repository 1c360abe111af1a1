/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — cluster environments: who am I, how many are we, where is rank 0.
 *
 * One implementation per launcher family (envs/<name>.c; pmix in pmix/). Each reads variables
 * through a ct_getenv_fn so the same code serves the process environment, test fixtures and the
 * SPANK plugin (which reads the step's job environment). No training logic here.
 */
#ifndef CTRAIN_ENVIRONMENT_H
#define CTRAIN_ENVIRONMENT_H

#include <stddef.h>

#include "ctrain/error.h"

/* Returns the value of name or NULL. ctx is passed through. */
typedef const char *(*ct_getenv_fn)(const char *name, void *ctx);

/* getenv(3) adapter. */
const char *ct_getenv_process(const char *name, void *ctx);

enum ct_env_field {
    CT_ENV_WORLD_SIZE = 0,
    CT_ENV_GLOBAL_RANK,
    CT_ENV_LOCAL_RANK,
    CT_ENV_NODE_RANK,
    CT_ENV_NUM_NODES,
    CT_ENV_LOCAL_WORLD_SIZE,
    CT_ENV_MAIN_ADDRESS,
    CT_ENV_MAIN_PORT,
    CT_ENV_JOB_ID,
    CT_ENV_NFIELDS
};

typedef struct ct_env_info {
    char name[32];                   /* "slurm", "torchelastic", ... */
    int creates_processes_externally; /* 1: processes were started by srun/mpirun/torchrun/jsrun */
    int world_size;
    int global_rank;
    int local_rank;
    int node_rank;
    int num_nodes;
    int local_world_size;
    int equal_tasks_per_node;        /* 1 when every node runs local_world_size tasks */
    char main_address[256];
    int main_port;
    char job_id[64];                 /* the launcher's job: SLURM_JOB_ID, LSB_JOBID, PMIx's namespace, ... */
    /* The SLURM job the processes run in, whichever launcher started them (mpirun, torchrun or
     * ctrain's own launcher inside a batch script too), "" outside SLURM: the job a requeue asks
     * slurmctld for and checkpoints record. Not job_id: PMIx's namespace overwrites that under
     * srun --mpi=pmix, and LSF's or torchrun's id is no SLURM job to requeue. */
    char slurm_job_id[64];
    int ctrain_supervised;           /* 1 in a step `ctrain supervise` started (CTRAIN_SUPERVISED=1) */
    char source[CT_ENV_NFIELDS][96]; /* which variable(s) decided each field, e.g. "SLURM_PROCID" */
    char enriched_by[32];            /* "pmix" when PMIx refined this environment's fields, else "" */
} ct_env_info;

struct ct_env_ops {
    const char *name;
    const char *description;
    int auto_detect;  /* 0: only when chosen with --cluster-env NAME (kubeflow) */
    /* Auto-detection asks the environments in decreasing priority: the launcher closest to the
     * process first (torchrun inside an srun step is torchelastic), the fallback (local) last. */
    int priority;
    /* Its processes may have been started by a PMIx server (srun --mpi=pmix, jsrun, Open MPI's
     * mpirun): the enriching environment (pmix) then refines its fields. */
    int pmix_enriches;
    int enricher;     /* 1: this is that enriching environment (pmix) */
    const char *needs; /* what must be present, for "--cluster-env NAME" when it is not */
    const char *started_by; /* who starts the processes, for `ctrain env` (NULL: "the launcher") */
    /* Optional: why it is absent, more precisely than "its variables are not set" (slurm: an
     * allocation or an interactive shell rather than a step). Returns the error's code. */
    int (*absent)(ct_getenv_fn get, void *ctx, ct_error *err);
    /* 1 when the variables of this environment are present. */
    int (*detect)(ct_getenv_fn get, void *ctx);
    /* Fill info from the variables; malformed values are CT_EINVAL naming the variable.
     * An enriching environment (pmix, see envs.h) is called on an info its base filled and
     * overwrites only the fields it knows, with their source. */
    int (*read)(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err);
    /* Check --devices (per node) and --num-nodes against what the environment provides;
     * 0 means the flag was not given. Mismatches are CT_ECONFLICT with a hint. */
    int (*validate)(const ct_env_info *info, int devices, int num_nodes, ct_error *err);
    /* Optional (NULL for most): fill what only the trainer's flags can say, called with the same
     * variables after read() and before validate(). The manual environment leaves
     * local_world_size and num_nodes 0 when LOCAL_WORLD_SIZE is not set; --num-nodes or --devices
     * then decide them (see envs/manual.c). Use ct_env_complete(). */
    int (*complete)(ct_getenv_fn get, void *ctx, ct_env_info *info, int devices, int num_nodes, ct_error *err);
};

#endif
