/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd (S_CTX_REMOTE). init_post_opt (as root) reads the step's layout
 * once and finds rank 0 (the libslurm calls); user_init (privileges dropped to the user) plans the
 * binding from the node's topology; task_init checks the flags against the task's real layout,
 * gives each task its environment and applies its binding. An error found before task_init is kept
 * and reported from task_init: SLURM does not pass it to srun. Every task_init failure writes its
 * reason to the task's stderr and ends the task (ctrain.c): SLURM ignores an optional plugin's
 * failure. This file holds the step's state (one step per slurmstepd), its layout and the hooks;
 * the step's concerns are files of their own (spank/step.h): the binding (remote_bind.c), the
 * network variables (remote_net.c), the GPU variables (remote_gpus.c) and the node checks
 * (remote_nodecheck.c). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>

#include "ctrain/envs.h"
#include "ctrain/hostlist.h"
#include "ctrain/util.h"
#include "engine/util/rankvars.h"
#include "engine/util/slurm_compat.h"
#include "spank/check.h"
#include "spank/log.h"
#include "spank/nodecheck.h"
#include "spank/remote_bind.h"
#include "spank/remote_gpus.h"
#include "spank/remote_net.h"
#include "spank/remote_nodecheck.h"
#include "spank/step.h"


static struct step *step_state; /* from init_post_opt to slurm_spank_exit; NULL: not a ctrain step */

static int get_u32(spank_t sp, spank_item_t item, const char *what, uint32_t *out, ct_error *err)
{
    spank_err_t rc = spank_get_item(sp, item, out);

    if (rc != ESPANK_SUCCESS)
        return ct_error_set(err, CT_EINTERNAL, "spank-item", "reading the step's %s from SLURM failed: %s", what,
                            spank_strerror(rc));
    return 0;
}

static int read_layout(spank_t sp, struct step *s, ct_error *err)
{
    int rv;

    if ((rv = get_u32(sp, S_JOB_ID, "job id", &s->job_id, err)) ||
        (rv = get_u32(sp, S_JOB_NNODES, "node count", &s->nnodes, err)) ||
        (rv = get_u32(sp, S_JOB_NODEID, "node id", &s->node_id, err)) ||
        (rv = get_u32(sp, S_JOB_LOCAL_TASK_COUNT, "local task count", &s->local_tasks, err)) ||
        (rv = get_u32(sp, S_JOB_TOTAL_TASK_COUNT, "total task count", &s->total_tasks, err)))
        return rv;
    return 0;
}

static int env_u32(char **env, const char *name, uint32_t *out, ct_error *err)
{
    const char *v = ct_spank_job_getenv(name, env);
    long n = 0;

    if (!v || ct_parse_long(v, 0, 0x7fffffff, &n) != 0) {
        ct_error_set(err, CT_EINVAL, "env-malformed", "%s='%s' in a heterogeneous step is not a number", name,
                     v ? v : "(unset)");
        return ct_error_hint(err, "srun sets it; unset it if you exported it yourself");
    }
    *out = (uint32_t)n;
    return 0;
}

/* The job whose step layout and port the step's are: the leader of a heterogeneous job (its
 * het_job_id, from slurmctld: root asks about this very job, S_JOB_ID), else the job itself (a
 * heterogeneous step of one allocation, whose components share its id). */
static int het_leader(uint32_t job_id, uint32_t *leader, ct_error *err)
{
    job_info_msg_t *msg = NULL;
    uint32_t h;

    if (slurm_load_job(&msg, job_id, 0) != SLURM_SUCCESS || !msg || msg->record_count < 1) {
        ct_error_set(err, CT_ECOMM, "rendezvous-host", "heterogeneous step of job %u: slurmctld did not give the "
                     "job (%s)", job_id, slurm_strerror(ct_slurm_errno()));
        if (msg)
            slurm_free_job_info_msg(msg);
        return ct_error_hint(err, "set MASTER_ADDR and MASTER_PORT, or run the components as one step");
    }
    h = msg->job_array[0].het_job_id;
    *leader = h && h != NO_VAL ? h : job_id;
    slurm_free_job_info_msg(msg);
    return 0;
}

/* A heterogeneous step's components are separate steps (of separate job ids in a heterogeneous
 * job): SLURM's items give the component's tasks and job id, the whole step's task count is
 * SLURM_STEP_NUM_TASKS over all components (each task's rank and node layout come from the envs/
 * SLURM reader in task_init, as the user). The job's variables only hint that the step is one:
 * the ids root asks slurmctld about are SPANK's items and slurmctld's answer (the leader's), so
 * forged variables make root ask about this job and no other. */
static int read_het(struct step *s, char **env, ct_error *err)
{
    int rv;

    s->het = ct_spank_het(ct_spank_job_getenv, env, s->total_tasks);
    if (!s->het)
        return 0;
    if ((rv = het_leader(s->job_id, &s->job_id, err)) ||
        (rv = env_u32(env, "SLURM_STEP_NUM_TASKS", &s->total_tasks, err)))
        return rv;
    return 0;
}
















int ct_spank_remote_step_init(spank_t sp)
{
    struct step *s = NULL;
    const ct_error *refused = ct_spank_options_refused();
    char **env = NULL;
    uint32_t step_id = 0;

    /* The batch script, the extern step and salloc's interactive step are not training steps. */
    if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS || step_id >= SLURM_INTERACTIVE_STEP)
        return 0;
    if (!ct_spank_active() && !refused)
        return 0;
    s = calloc(1, sizeof(*s));
    if (!s) {
        ct_spank_error("out of memory in slurmstepd");
        return -1;
    }
    step_state = s;
    s->step_id = step_id;
    s->bind = ct_spank_bind_mode();
    if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS)
        env = NULL;
    if (refused) {
        s->err = *refused;
        return 0;
    }
    if (read_layout(sp, s, &s->err) != 0 || read_het(s, env, &s->err) != 0)
        return 0;
    if (s->bind != CT_SPANK_BIND_NONE)
        ct_spank_discovery_start(s, env);
    if (ct_spank_rendezvous(ct_spank_job_getenv, env, s->job_id, s->step_id, s->nnodes, s->het,
                            ct_spank_args_get()->port_base, &s->rdv, &s->err) == 0 &&
        (s->bind != CT_SPANK_BIND_NONE || ct_spank_nodecheck_opts()->mode != CT_SPANK_NODECHECK_OFF))
        ct_spank_step_addresses(s, env);
    ct_spank_nodecheck_gather_gpus(s, env);
    return 0;
}


/* The binding is planned as the user, not root: the topology file (topology=) must be one the
 * job's user can read (a root_squash NFS refuses root). A discovered topology comes from the thread
 * started in init_post_opt (as root: /sys and /proc only), joined here. */
int ct_spank_remote_user_init(spank_t sp)
{
    struct step *s = step_state;
    char **env = NULL;

    if (!s)
        return 0;
    ct_spank_discovery_join(s); /* here whatever happens next: no thread while slurmstepd forks the tasks */
    if (s->err.code)
        return 0;
    if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS)
        env = NULL;
    if (s->bind != CT_SPANK_BIND_NONE && ct_spank_binding_plan(sp, s, env, &s->err) != 0)
        return 0;
    ct_spank_nodecheck_gather(s, env);
    ct_spank_info("step %u.%u node %u: %u of %u tasks, rank 0 on %s at %s:%d%s, binding %s", s->job_id, s->step_id,
                  s->node_id, s->local_tasks, s->total_tasks, s->rdv.node, s->rdv.address, s->rdv.port,
                  s->rdv.port_reserved ? " (srun --resv-ports)" : "",
                  !s->plan ? "off" : s->summary[0] ? "planned (topology from the node summary)" :
                  s->ahead ? "planned (topology discovered ahead)" : "planned");
    return 0;
}

static int set_int(spank_t sp, const char *name, long value)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%ld", value);
    return ct_spank_task_setenv(sp, name, buf, 1);
}

/* MASTER_PORT; a user's own value is kept, like a user's MASTER_ADDR (every task of the step
 * inherits the same one from srun). */
static int set_port(spank_t sp, int port)
{
    char buf[16];

    snprintf(buf, sizeof(buf), "%d", port);
    return ct_spank_task_setenv(sp, CT_VAR_MASTER_PORT, buf, 0);
}










/* A task of a heterogeneous step: SLURM's items count within its component (S_TASK_GLOBAL_ID
 * without the component's task offset, S_TASK_ID and the local count without the other
 * components' tasks on this node), so rank, node rank, local rank and local size are the envs/
 * SLURM reader's, one rule for `ctrain env` and the plugin. The binding stays the component's
 * (its own CPUs and GPUs): components sharing a node without SLURM-managed GPUs would bind the
 * same devices, an error. */
static int het_task(const struct step *s, char **env, uint32_t *rank, int *local_rank, int *local_size,
                    uint32_t *node, ct_error *err)
{
    const struct ct_env_ops *slurm = ct_env_lookup("slurm");
    ct_env_info info;
    int rv;

    if (!slurm)
        return ct_error_set(err, CT_EINTERNAL, "spank-env", "the SLURM environment reader is not linked in");
    if ((rv = slurm->read(ct_spank_job_getenv, env, &info, err)) != 0)
        return rv;
    if (info.local_world_size != (int)s->local_tasks && s->plan && !s->gpus_managed) {
        ct_error_set(err, CT_ECONFLICT, "bind-het-shared-node", "components of the heterogeneous step share this "
                     "node (%d of its %d tasks here are this component's): each component would bind the same "
                     "GPUs and cores", (int)s->local_tasks, info.local_world_size);
        return ct_error_hint(err, "place the components on different nodes, or start the step with "
                                  "--ctrain-bind=none");
    }
    *rank = (uint32_t)info.global_rank;
    *node = (uint32_t)info.node_rank;
    *local_rank = info.local_rank;
    *local_size = info.local_world_size;
    return 0;
}

/* An error of the step in the task's stderr (SLURM does not pass the plugin's log to srun). */





static int task_fail(const ct_error *err)
{
    ct_spank_task_say("%s", err->msg);
    if (err->hint[0]) {
        ct_spank_error("hint: %s", err->hint);
        fprintf(stderr, "ctrain: hint: %s\n", err->hint);
    }
    return -1;
}

int ct_spank_remote_task_init(spank_t sp)
{
    struct step *s = step_state;
    const char *strategy = ct_spank_strategy(), *accelerator = ct_spank_accelerator();
    const char *precision = ct_spank_precision();
    uint32_t rank = 0, node;
    int local = 0, local_rank, local_size, user_port, local_gpus;
    char **env = NULL, task_gpus[1024] = "";
    ct_error err;

    if (!s)
        return 0;
    node = s->node_id;
    if (s->err.code)
        return task_fail(&s->err);
    if (spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS) {
        ct_spank_task_say("reading the task's rank from SLURM failed");
        return -1;
    }
    if (ct_spank_nodecheck_report(s, local) != 0)
        return -1;
    ct_error_clear(&err);
    /* The flags as the task's program will read them, in the task's own environment (its SLURM_*
     * variables: the step's real layout) against this node's plugstack arguments: srun checked
     * them without the layout, and a login node's plugstack.conf may differ from the node's. */
    if (ct_spank_check_flags(ct_spank_job_getenv, env, 0, &err) != 0)
        return task_fail(&err);
    local_rank = local;
    local_size = (int)s->local_tasks;
    /* Everything read from the task's environment is read now: spank_setenv below may move it.
     * slurmstepd has put the task's own SLURM_* variables in it by now. */
    if (s->het && het_task(s, env, &rank, &local_rank, &local_size, &node, &err) != 0)
        return task_fail(&err);
    user_port = ct_spank_job_getenv(CT_VAR_MASTER_PORT, env) != NULL;
    local_gpus = ct_spank_gpus_numbered_locally(env);
    if (ct_spank_job_getenv("SLURM_STEP_GPUS", env))
        ct_str_copy(task_gpus, sizeof(task_gpus), ct_spank_job_getenv("SLURM_STEP_GPUS", env));
    env = NULL;
    /* Rank 0's task runs on rank 0's node: the derived port must be free there. */
    if (rank == 0 && !s->rdv.port_reserved && !user_port && ct_spank_port_free(s->rdv.port, &err) != 0)
        return task_fail(&err);
    if (set_int(sp, CT_VAR_RANK, rank) || set_int(sp, CT_VAR_LOCAL_RANK, local_rank) ||
        set_int(sp, CT_VAR_WORLD_SIZE, s->total_tasks) || set_int(sp, CT_VAR_LOCAL_WORLD_SIZE, local_size) ||
        set_int(sp, CT_VAR_NODE_RANK, node) || set_int(sp, CT_VAR_GROUP_RANK, node) ||
        ct_spank_task_setenv(sp, CT_VAR_MASTER_ADDR, s->rdv.address, 0) || set_port(sp, s->rdv.port))
        return -1;
    if ((strategy && ct_spank_task_setenv(sp, CT_VAR_STRATEGY, strategy, 1)) ||
        (accelerator && ct_spank_task_setenv(sp, CT_VAR_ACCELERATOR, accelerator, 1)) ||
        (precision && ct_spank_task_setenv(sp, CT_VAR_PRECISION, precision, 1)))
        return -1;
    if (s->plan && ct_spank_binding_apply(sp, s, local, rank, local_gpus, task_gpus[0] ? task_gpus : NULL) != 0)
        return -1;
    return 0;
}

void ct_spank_remote_exit(void)
{
    struct step *s = step_state;

    if (!s)
        return;
    ct_spank_discovery_join(s);
    if (s->ops) {
        s->ops->topology_free(s->found);
        s->ops->plan_free(s->plan);
        s->ops->topology_retire(s->topo); /* hwloc's plugins unload at the process's exit, not here */
    }
    free(s);
    step_state = NULL;
    ct_spank_bind_close();
}
