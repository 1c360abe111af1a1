/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the state of a step in slurmstepd, shared by the files of the remote side
 * (remote.c: the hooks and the layout; remote_bind.c, remote_net.c, remote_gpus.c,
 * remote_nodecheck.c, each with its header), and what all of them use (step.c). Internal to the
 * plugin. */
#ifndef CTRAIN_SPANK_STEP_H
#define CTRAIN_SPANK_STEP_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <slurm/spank.h>

#include "ctrain/bind.h"
#include "ctrain/error.h"
#include "ctrain/net.h"
#include "ctrain/nodecheck.h"
#include "spank/bind.h"
#include "spank/gres.h"
#include "spank/options.h"
#include "spank/rendezvous.h"
#include "spank/summary.h"

struct step {
    uint32_t job_id, step_id, nnodes, node_id, local_tasks, total_tasks;
    int het;            /* a heterogeneous step: ranks and sizes from SLURM's task variables */
    struct ct_spank_rendezvous rdv;
    enum ct_spank_bind bind;
    const struct ct_spank_bind_ops *ops; /* ctrain-bind.so, loaded by the finder or else by user_init;
                                            ctrain.so's own planner for a node summary */
    ct_topology *topo;
    ct_bind_plan *plan;
    pthread_t finder;   /* discovers the node's topology between init_post_opt and user_init */
    int finding;        /* finder started and not joined yet */
    pid_t finder_pid;   /* the process it runs in (a child forked meanwhile has no such thread) */
    unsigned found_flags; /* the ct_topology_flags it discovers with */
    ct_topology *found; /* what it discovers; NULL: no discovery ahead */
    int found_rv;       /* its result, with found_err */
    ct_error found_err;
    int ahead;          /* s->topo is the thread's, or the node summary's */
    char summary[1100]; /* s->found (then s->topo) is this node summary's; "" when discovered or loaded */
    int gpus_managed;   /* SLURM told which GPUs the step has: CUDA_VISIBLE_DEVICES is ours to set */
    char step_gpus[1024]; /* the step's SLURM_STEP_GPUS as user_init saw it (the step's, not a task's) */
    char step_mapped[1024]; /* the same GPUs as PCI positions in the topology (include/ctrain/gres.h) */
    struct ct_spank_gres gres; /* gres.conf's device files and the drivers' table, to map SLURM's numbers */
    char gres_why[1024]; /* where SLURM's numbers are not the PCI positions of its GPUs, why */
    char addrs[8][64];  /* this node's own addresses (numeric), for its Ethernet (include/ctrain/net.h) */
    int naddrs;
    int loopback_ok;    /* rank 0's address is a loopback one: every node of the step is this host */
    char addr_why[256]; /* why addrs is empty */
    ct_error err;       /* reported by every task_init */
    ct_nodecheck_result pf; /* --ctrain-preflight: the GPU checks' findings (as root) */
    int pf_gpus;        /* pf holds them */
    int pf_bad;         /* findings on this node, every check */
    char pf_line[2048]; /* its one line; "" when the checks did not run */
    int pf_supervised;  /* a step of ctrain supervise (CTRAIN_SUPERVISED=1): exclude acts as fail */
    char pf_node[256];  /* this node's name, as the line gives it */
};

/* The job's environment as a ct_getenv_fn (ctx: the char ** of S_JOB_ENV). */
const char *ct_spank_job_getenv(const char *name, void *ctx);
/* A task's failure, in slurmd's log and on the task's stderr (which srun shows). */
void ct_spank_task_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* One variable of the task's environment (ct_spank_task_say on failure). */
int ct_spank_task_setenv(spank_t sp, const char *name, const char *value, int overwrite);
/* This node's name from the step's node list (SLURM's own), "" when it cannot say;
 * ct_spank_step_node_name falls back on SLURMD_NODENAME. */
void ct_spank_step_list_node(const struct step *s, char **env, char *out, size_t size);
void ct_spank_step_node_name(const struct step *s, char **env, char *out, size_t size);

#endif
