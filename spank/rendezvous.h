/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — where rank 0 of a step listens (MASTER_ADDR, MASTER_PORT). */
#ifndef CTRAIN_SPANK_RENDEZVOUS_H
#define CTRAIN_SPANK_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/environment.h"
#include "ctrain/error.h"

struct ct_spank_rendezvous {
    char node[256];      /* SLURM's name of task 0's node */
    char address[256];   /* MASTER_ADDR: that name when it resolves here, else its NodeAddr */
    int port;            /* MASTER_PORT */
    int port_reserved;   /* 1: srun --resv-ports' port; 0: derived by the envs/ rule */
};

/* Where task 0 of the step listens. The node: envs/' rule (ct_env_slurm_rank0_host: the first of
 * SLURM_STEP_NODELIST, else SLURM_NODELIST, SLURM_JOB_NODELIST) when that name resolves here, or
 * for an arbitrary distribution over nnodes > 1, a heterogeneous step or a name that does not
 * resolve the one slurmctld's step layout names (component 0's task 0). job_id and step_id are
 * SPANK's items (a heterogeneous job's leader from slurmctld), never the job's environment. The port: srun --resv-ports' first
 * reserved port, else the envs/ port rule of job_id (the leader's for a heterogeneous step) and
 * step_id (port_base 0: the default). One value for every task of the step; a user's MASTER_PORT
 * is kept by remote.c. */
int ct_spank_rendezvous(ct_getenv_fn get, void *ctx, uint32_t job_id, uint32_t step_id, uint32_t nnodes, int het,
                        long port_base, struct ct_spank_rendezvous *out, ct_error *err);
/* A node of a step, as SLURM's items name the step (never the job's environment). */
struct ct_spank_step_node {
    uint32_t job_id, step_id; /* S_JOB_ID (a heterogeneous job's leader from slurmctld), S_JOB_STEPID */
    uint32_t node_id;         /* the node's index in the step (S_JOB_NODEID), unless task0 */
    int het;                  /* component 0 of a heterogeneous step */
    int task0;                /* the node running task 0 */
    int from_slurm;           /* the name at hand is already slurmctld's layout's */
};

/* A node's address: node (size nsize) holds its name from the job's environment, or "": used when
 * it resolves here (anyone may look a name up); else node becomes the name slurmctld's step layout
 * gives for at, and the address that name's resolution or, failing it, its NodeAddr from
 * slurmctld. A name from the environment never reaches slurmctld. */
int ct_spank_node_address(const struct ct_spank_step_node *at, char *node, size_t nsize, char *addr, size_t size,
                          ct_error *err);
/* 1 for a heterogeneous step (srun A : B); step_tasks: this component's task count (SLURM's item). */
int ct_spank_het(ct_getenv_fn get, void *ctx, uint32_t step_tasks);
/* 0 when the port is free on this node, else -1 with err (CT_ECONFLICT). */
int ct_spank_port_free(int port, ct_error *err);

#endif
