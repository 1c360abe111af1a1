/* SPDX-License-Identifier: BSD-3-Clause */
/* SLURM: the tasks of a job step started by srun.
 *
 * A salloc shell, a batch script, a one-task `srun --pty bash` and the interactive/extern step are a job
 * but not a training step: detect() decides from the step (ct_env_slurm_context), never from the
 * job's name. The step's own variables (SLURM_STEP_*) win over the job's, because a step may use
 * part of the allocation.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/envs.h"
#include "ctrain/hostlist.h"
#include "envs/envs_impl.h"
#include "engine/util/fsutil.h"

static int slurm_detect(ct_getenv_fn get, void *ctx)
{
    return ct_env_slurm_context(get, ctx) == CT_SLURM_STEP && ct_envvar_has(get, ctx, "SLURM_PROCID") &&
           (ct_envvar_has(get, ctx, "SLURM_STEP_NUM_TASKS") || ct_envvar_has(get, ctx, "SLURM_NTASKS"));
}

/* Read the first of names that is set as an int in [min, max], recording it as the source. */
static int read_int(ct_getenv_fn get, void *ctx, const char *const *names, long min, long max, int *out,
                    ct_env_info *info, enum ct_env_field f, ct_error *err)
{
    const char *which = names[0];
    int rc;

    ct_envvar_first(get, ctx, names, &which);
    if ((rc = ct_envvar_int(get, ctx, which, min, max, out, err)))
        return rc;
    ct_env_source(info, f, "%s", which);
    return 0;
}

static int read_ids(ct_getenv_fn get, void *ctx, ct_env_info *info, unsigned long *step_id, const char **step_var,
                    ct_error *err)
{
    static const char *const job[] = { "SLURM_JOB_ID", "SLURM_JOBID", NULL };
    static const char *const step[] = { "SLURM_STEP_ID", "SLURM_STEPID", NULL };
    const char *which = NULL, *v = ct_envvar_first(get, ctx, job, &which);
    char *end = NULL;

    if (!v) {
        ct_error_set(err, CT_EINVAL, "env-variable-missing", "SLURM_JOB_ID is not set in this SLURM step");
        return ct_error_hint(err, "srun sets it; run under srun, or choose another --cluster-env");
    }
    snprintf(info->job_id, sizeof(info->job_id), "%s", v);
    ct_env_source(info, CT_ENV_JOB_ID, "%s", which);
    v = ct_envvar_first(get, ctx, step, step_var);
    if (!v) {
        /* A heterogeneous step's task or a batch script may not carry it. */
        ct_error_set(err, CT_EINVAL, "env-variable-missing", "SLURM_STEP_ID is not set, so the step's port "
                     "cannot be derived");
        return ct_error_hint(err, "srun sets it for every task of a step; set MASTER_PORT yourself, or start the "
                                  "ranks with srun");
    }
    errno = 0;
    *step_id = strtoul(v, &end, 10);
    if (!end || *end || end == v || errno) {
        ct_error_set(err, CT_EINVAL, "env-variable-malformed", "%s='%s' is not a step number", *step_var, v);
        return ct_error_hint(err, "srun sets it to the step's number; unset it if you exported it yourself");
    }
    return 0;
}

/* The number of tasks in SLURM_GTIDS: this step's (in a heterogeneous step, this component's)
 * tasks on this node, as slurmstepd lists them; 0 when unset. */
static int gtids_count(ct_getenv_fn get, void *ctx)
{
    const char *v = get("SLURM_GTIDS", ctx);
    int n = 1;

    if (!v || !*v)
        return 0;
    for (; *v; v++)
        n += *v == ',';
    return n;
}

struct entry {
    const char *host;
    int index;    /* in the step's node list */
};

static int by_host_then_index(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    int c = strcmp(x->host, y->host);

    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Number the hosts of the list in order of first appearance and total their tasks (a list names
 * a host more than once when the components of a heterogeneous step share it). Sets *distinct,
 * *rank_of_at (the number of host index at) and whether every host runs the same number of tasks. */
static int host_totals(const ct_hostlist *hl, const int *counts, int n, long at, int *distinct, int *rank_of_at,
                       int *equal, ct_error *err)
{
    struct entry *e = malloc((size_t)n * sizeof(*e));
    char *first = calloc((size_t)n, 1);
    const char *mine = ct_hostlist_get(hl, (size_t)at);
    int my_first = n, total = -1;

    if (!e || !first) {
        free(e);
        free(first);
        return ct_error_set(err, CT_ENOMEM, "out-of-memory", "out of memory reading the step's node list");
    }
    for (int i = 0; i < n; i++)
        e[i] = (struct entry){ ct_hostlist_get(hl, (size_t)i), i };
    qsort(e, (size_t)n, sizeof(*e), by_host_then_index);
    *distinct = 0;
    *equal = 1;
    for (int g = 0, end; g < n; g = end) {
        int sum = 0;

        for (end = g; end < n && !strcmp(e[end].host, e[g].host); end++)
            sum += counts[e[end].index];
        first[e[g].index] = 1;   /* the group's lowest index: the host's first appearance */
        if (!strcmp(e[g].host, mine))
            my_first = e[g].index;
        if (total >= 0 && sum != total)
            *equal = 0;
        total = sum;
        (*distinct)++;
    }
    *rank_of_at = 0;
    for (int i = 0; i < my_first; i++)
        *rank_of_at += first[i];
    free(e);
    free(first);
    return 0;
}

/* No SLURMD_NODENAME (variables not set by slurmstepd): SLURM_NODEID indexes the counts, which is
 * right for a plain step only. SLURM_GTIDS, when set, must agree. */
static int layout_by_nodeid(ct_getenv_fn get, void *ctx, const char *which, const char *v, const int *counts,
                            int n, ct_env_info *info, ct_error *err)
{
    static const char *const het[] = { "SLURM_HET_SIZE", "SLURM_PACK_SIZE", NULL };
    const char *het_var = NULL;
    int gtids = gtids_count(get, ctx);

    if (ct_envvar_first(get, ctx, het, &het_var)) {
        ct_error_set(err, CT_EINVAL, "env-layout-unknown", "%s is set: a heterogeneous step numbers its nodes "
                     "(SLURM_NODEID) component after component, but %s='%s' follows the sorted node list, and "
                     "SLURMD_NODENAME, which finds this node in it, is not set", het_var, which, v);
        return ct_error_hint(err, "slurmstepd sets SLURMD_NODENAME in every task; keep it in the environment");
    }
    if (gtids && gtids != counts[info->node_rank]) {
        ct_error_set(err, CT_EINVAL, "env-layout-unknown", "SLURM_GTIDS lists %d task(s) on this node, but %s='%s' "
                     "gives %d at SLURM_NODEID=%d: a heterogeneous step (srun A : B) numbers its nodes component "
                     "after component, and SLURMD_NODENAME, which finds this node in the list, is not set", gtids,
                     which, v, counts[info->node_rank], info->node_rank);
        return ct_error_hint(err, "slurmstepd sets SLURMD_NODENAME in every task; keep it in the environment");
    }
    info->local_world_size = counts[info->node_rank];
    for (int i = 1; i < n; i++)
        if (counts[i] != counts[0])
            info->equal_tasks_per_node = 0;
    ct_env_source(info, CT_ENV_LOCAL_WORLD_SIZE, "%s (%s) at SLURM_NODEID", which, v);
    return 0;
}

/* This node's tasks, and its entries in the list when components share it. */
static int layout_by_name(ct_getenv_fn get, void *ctx, const ct_hostlist *hl, const char *list_var, const char *name,
                          long at, const char *which, const char *v, const int *counts, int n, ct_env_info *info,
                          ct_error *err)
{
    int here = 0, before = 0, mine = counts[at], gtids = gtids_count(get, ctx), rc;
    int distinct = n, rank = info->node_rank, equal = 1;

    for (int i = 0; i < n; i++)
        if (!strcmp(ct_hostlist_get(hl, (size_t)i), name))
            here += counts[i];
    if (here != mine) {
        /* Several entries: the list is in component order and SLURM_NODEID points at ours. */
        if (strcmp(ct_hostlist_get(hl, (size_t)info->node_rank), name)) {
            ct_error_set(err, CT_EINVAL, "env-inconsistent", "SLURM_NODEID=%d is %s in %s, but this is "
                         "SLURMD_NODENAME=%s", info->node_rank, ct_hostlist_get(hl, (size_t)info->node_rank),
                         list_var, name);
            return ct_error_hint(err, "these variables come from one srun; unset any you exported yourself");
        }
        mine = counts[info->node_rank];
        for (int i = 0; i < info->node_rank; i++)
            if (!strcmp(ct_hostlist_get(hl, (size_t)i), name))
                before += counts[i];
    }
    if (gtids && gtids != mine) {
        /* More of the step's tasks in this node's one entry than this component's: nothing says
         * whether the other components' tasks come before or after these. */
        ct_error_set(err, CT_EINVAL, "env-layout-unknown", "%s='%s' gives %s %d task(s), but SLURM_GTIDS lists %d: "
                     "other components of the heterogeneous step share this node in an unknown order",
                     which, v, name, mine, gtids);
        return ct_error_hint(err, "place the components on different nodes (srun -w or -x per component), or "
                                  "launch with torchrun or mpirun, which number the tasks of a node themselves");
    }
    if ((rc = host_totals(hl, counts, n, at, &distinct, &rank, &equal, err)))
        return rc;
    info->local_world_size = here;
    info->equal_tasks_per_node = equal;
    ct_env_source(info, CT_ENV_LOCAL_WORLD_SIZE, "%s (%s) at SLURMD_NODENAME", which, v);
    if (distinct != n) {
        info->local_rank += before;
        info->node_rank = rank;
        info->num_nodes = distinct;
        ct_env_source(info, CT_ENV_LOCAL_RANK, "SLURM_LOCALID + earlier components' tasks on %s", name);
        ct_env_source(info, CT_ENV_NODE_RANK, "first place of %s in %s", name, list_var);
        ct_env_source(info, CT_ENV_NUM_NODES, "distinct hosts in %s", list_var);
    }
    return 0;
}

/* Tasks on each node of the step: local_world_size and whether all nodes are equal; in a
 * heterogeneous step whose components share a node, also local_rank, node_rank and num_nodes.
 *
 * In a plain step SLURM_NODEID indexes SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE. In a
 * heterogeneous step (srun A : B, srun --het-group=0,1) it does not: slurmstepd numbers the nodes
 * component after component (SLURM_NODEID = the component's node offset + its own node index) while
 * srun sorts the merged node list by name, and the counts with it; srun A : B inside one allocation
 * does not even set SLURM_HET_SIZE. So this node is found by name (SLURMD_NODENAME), right for both.
 * Components do not share nodes under SLURM 22.05 (srun and slurmctld exclude earlier components'
 * nodes); if they did, srun could not sort the list and leaves it in component order, the node once
 * per component: then SLURM_NODEID indexes it, and SLURM_LOCALID (which counts within a component)
 * comes after the earlier components' tasks on this node. */
static int read_node_layout(ct_getenv_fn get, void *ctx, const ct_hostlist *hl, const char *list_var,
                            ct_env_info *info, ct_error *err)
{
    static const char *const tpn[] = { "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", NULL };
    const char *which = NULL, *v = ct_envvar_first(get, ctx, tpn, &which), *name = get("SLURMD_NODENAME", ctx);
    int *counts = NULL, n = 0, sum = 0, rc;
    long at = -1;

    if (!v) {
        /* Only --ntasks-per-node given: every node runs that many. */
        if ((rc = ct_envvar_int(get, ctx, "SLURM_NTASKS_PER_NODE", 1, 1000000, &info->local_world_size, err))) {
            ct_error_prefix(err, "neither SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set, and ");
            return rc;
        }
        ct_env_source(info, CT_ENV_LOCAL_WORLD_SIZE, "SLURM_NTASKS_PER_NODE");
        return 0;
    }
    if ((rc = ct_env_tasks_per_node_parse(which, v, &counts, &n, err)))
        return rc;
    for (int i = 0; i < n; i++)
        sum += counts[i];
    if (n != info->num_nodes || sum != info->world_size) {
        ct_error_set(err, CT_EINVAL, "env-inconsistent", "%s='%s' lists %d task(s) on %d node(s), but the step has %d "
                     "task(s) on %d node(s) (%s, %s)", which, v, sum, n, info->world_size, info->num_nodes,
                     info->source[CT_ENV_WORLD_SIZE], info->source[CT_ENV_NUM_NODES]);
        free(counts);
        return ct_error_hint(err, "these variables come from one srun; unset any you exported yourself");
    }
    if (hl && name && *name && (at = ct_hostlist_find(hl, name)) < 0) {
        ct_error_set(err, CT_EINVAL, "env-inconsistent", "SLURMD_NODENAME='%s' is not in %s", name, list_var);
        free(counts);
        return ct_error_hint(err, "these variables come from one srun; unset any you exported yourself");
    }
    if (at < 0)
        rc = layout_by_nodeid(get, ctx, which, v, counts, n, info, err);
    else
        rc = layout_by_name(get, ctx, hl, list_var, name, at, which, v, counts, n, info, err);
    free(counts);
    return rc;
}

/* Task 0's host when it is not the first of the step's node list. A heterogeneous step's task 0 is
 * component 0's, on the first node of that component (SLURM_JOB_NODELIST_HET_GROUP_0, _PACK_ before
 * SLURM 20.02); an arbitrary distribution's (-m arbitrary, SLURM_HOSTFILE) is on the hostfile's first
 * line. Returns 1 with host set ("" when an arbitrary distribution over several nodes leaves no
 * trace of it: unknown, as under MPICH), 0 when task 0 is on the first node, or an error. */
static int rank0_host(ct_getenv_fn get, void *ctx, int num_nodes, char *host, size_t size, const char **source,
                      ct_error *err)
{
    static const char *const het[] = { "SLURM_JOB_NODELIST_HET_GROUP_0", "SLURM_JOB_NODELIST_PACK_GROUP_0", NULL };
    const char *dist = get("SLURM_DISTRIBUTION", ctx), *list, *file;
    char line[256];
    FILE *f = NULL;
    int fd;
    int rc;

    if ((list = ct_envvar_first(get, ctx, het, source))) {
        ct_hostlist *hl = NULL;

        if ((rc = ct_hostlist_expand(list, &hl, err)))
            return ct_error_prefix(err, "%s: ", *source);
        snprintf(host, size, "%s", ct_hostlist_get(hl, 0) ? ct_hostlist_get(hl, 0) : "");
        ct_hostlist_free(hl);
        return host[0] ? 1 : 0;
    }
    if (!dist || strncmp(dist, "arbitrary", 9) || num_nodes < 2)
        return 0;
    *source = "SLURM_HOSTFILE";
    file = get("SLURM_HOSTFILE", ctx);
    line[0] = '\0';
    /* Opened as every input is (engine/util/fsutil.h): a FIFO named there is not waited on. */
    if (file && (fd = ct_fs_open_input(file, "SLURM_HOSTFILE", NULL)) >= 0 && !(f = fdopen(fd, "r")))
        close(fd);
    if (f) {
        while (fgets(line, sizeof(line), f) && !line[strspn(line, " \t\r\n")])
            ;
        fclose(f);
    }
    line[strcspn(line, " \t\r\n*,")] = '\0';
    if (!line[0])
        *source = "unknown: SLURM_DISTRIBUTION=arbitrary and no SLURM_HOSTFILE line say where rank 0 runs; set "
                  "MASTER_ADDR, or launch with the ctrain SPANK plugin, which asks slurmctld";
    snprintf(host, size, "%s", line);
    return 1;
}

/* The step's node list, expanded; *hl stays NULL when no list is set (then MASTER_ADDR must be). */
static int read_list(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_hostlist **hl, const char **which,
                     ct_error *err)
{
    static const char *const lists[] = { "SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST", NULL };
    const char *v = ct_envvar_first(get, ctx, lists, which);
    int rc;

    *hl = NULL;
    if (!v) {
        if (ct_env_master_addr(get, ctx, info))
            return 0;
        ct_error_set(err, CT_EINVAL, "env-variable-missing", "SLURM_STEP_NODELIST and SLURM_NODELIST are not set");
        return ct_error_hint(err, "srun sets them in every task; set MASTER_ADDR if you launch some other way");
    }
    if ((rc = ct_hostlist_expand(v, hl, err)))
        return ct_error_prefix(err, "%s: ", *which);
    if (ct_hostlist_count(*hl) != (size_t)info->num_nodes) {
        ct_error_set(err, CT_EINVAL, "env-inconsistent", "%s='%s' names %zu node(s), but the step runs on %d (%s)",
                     *which, v, ct_hostlist_count(*hl), info->num_nodes, info->source[CT_ENV_NUM_NODES]);
        ct_hostlist_free(*hl);
        *hl = NULL;
        return ct_error_hint(err, "these variables come from one srun; unset any you exported yourself");
    }
    return 0;
}

/* Rank 0's host; see include/ctrain/envs.h. The one rule: the SLURM environment's main_address
 * and the SPANK plugin's MASTER_ADDR both come from here. */
int ct_env_slurm_rank0_host(ct_getenv_fn get, void *ctx, int num_nodes, char *host, size_t size,
                            const char **source, ct_error *err)
{
    static const char *const lists[] = { "SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST", NULL };
    const char *list;
    ct_hostlist *hl = NULL;
    int rc;

    if ((rc = rank0_host(get, ctx, num_nodes, host, size, source, err)) != 0)
        return rc;
    if (!(list = ct_envvar_first(get, ctx, lists, source))) {
        ct_error_set(err, CT_EINVAL, "env-variable-missing", "SLURM_STEP_NODELIST and SLURM_NODELIST are not set");
        return ct_error_hint(err, "srun sets them in every task; set MASTER_ADDR if you launch some other way");
    }
    if ((rc = ct_hostlist_expand(list, &hl, err)))
        return ct_error_prefix(err, "%s: ", *source);
    rc = ct_hostlist_get(hl, 0) && strlen(ct_hostlist_get(hl, 0)) < size ? 0 : -1;
    if (rc == 0)
        snprintf(host, size, "%s", ct_hostlist_get(hl, 0));
    ct_hostlist_free(hl);
    if (rc != 0) {
        ct_error_set(err, CT_EINVAL, "env-malformed", "%s='%s' names no node (or a name too long)", *source, list);
        return ct_error_hint(err, "srun sets it in every task; unset it if you exported it yourself");
    }
    return CT_RANK0_FIRST_HOST;
}

/* main_address: rank 0's host (ct_env_slurm_rank0_host), unless MASTER_ADDR says otherwise. */
static int read_main_address(ct_getenv_fn get, void *ctx, const ct_hostlist *hl, ct_env_info *info, ct_error *err)
{
    char host[256];
    const char *from = NULL;
    int rc;

    if (!hl || ct_env_master_addr(get, ctx, info))
        return 0;
    if ((rc = ct_env_slurm_rank0_host(get, ctx, info->num_nodes, host, sizeof(host), &from, err)) < 0)
        return rc;
    snprintf(info->main_address, sizeof(info->main_address), "%s", host);
    if (rc == CT_RANK0_ELSEWHERE)
        ct_env_source(info, CT_ENV_MAIN_ADDRESS, host[0] ? "%s (task 0's host)" : "%s", from);
    else
        ct_env_source(info, CT_ENV_MAIN_ADDRESS, "%s (first host)", from);
    return 0;
}

static int slurm_read(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    static const char *const ntasks[] = { "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS", NULL };
    static const char *const nnodes[] = { "SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", NULL };
    static const char *const procid[] = { "SLURM_PROCID", NULL };
    static const char *const localid[] = { "SLURM_LOCALID", NULL };
    static const char *const nodeid[] = { "SLURM_NODEID", NULL };
    unsigned long step_id = 0;
    const char *step_var = "SLURM_STEP_ID", *list_var = NULL;
    ct_hostlist *hl = NULL;
    int rc;

    ct_env_info_init(info, "slurm", 1);
    if ((rc = read_ids(get, ctx, info, &step_id, &step_var, err)) ||
        (rc = read_int(get, ctx, ntasks, 1, 10000000, &info->world_size, info, CT_ENV_WORLD_SIZE, err)) ||
        (rc = read_int(get, ctx, procid, 0, 10000000, &info->global_rank, info, CT_ENV_GLOBAL_RANK, err)) ||
        (rc = read_int(get, ctx, localid, 0, 10000000, &info->local_rank, info, CT_ENV_LOCAL_RANK, err)) ||
        (rc = read_int(get, ctx, nnodes, 1, 10000000, &info->num_nodes, info, CT_ENV_NUM_NODES, err)) ||
        (rc = read_int(get, ctx, nodeid, 0, 10000000, &info->node_rank, info, CT_ENV_NODE_RANK, err)))
        return rc;
    if (info->node_rank >= info->num_nodes)
        return ct_env_check_ranges(info, err);
    if ((rc = read_list(get, ctx, info, &hl, &list_var, err)) ||
        (rc = read_node_layout(get, ctx, hl, list_var, info, err)) ||
        (rc = read_main_address(get, ctx, hl, info, err)) ||
        (rc = ct_env_port_rule(get, ctx, info, info->job_id, step_id, step_var, err))) {
        ct_hostlist_free(hl);
        return rc;
    }
    ct_hostlist_free(hl);
    return ct_env_check_ranges(info, err);
}

static int slurm_validate(const ct_env_info *info, int devices, int num_nodes, ct_error *err)
{
    char dhint[256], nhint[256];

    if (!info->equal_tasks_per_node)
        snprintf(dhint, sizeof(dhint), "use srun --ntasks-per-node=%d so every node runs the same number of tasks, "
                 "or leave out --devices", devices);
    else
        snprintf(dhint, sizeof(dhint), "use --ntasks-per-node=%d, or --devices %d", devices, info->local_world_size);
    snprintf(nhint, sizeof(nhint), "use srun -N %d (or #SBATCH --nodes=%d), or --num-nodes %d", num_nodes, num_nodes,
             info->num_nodes);
    return ct_env_validate_common(info, devices, num_nodes, dhint, nhint, err);
}

/* --cluster-env slurm where there is no step: say what kind of SLURM context this is instead. */
static int slurm_absent(ct_getenv_fn get, void *ctx, ct_error *err)
{
    switch (ct_env_slurm_context(get, ctx)) {
    case CT_SLURM_NONE:
        ct_error_set(err, CT_ENOTAVAIL, "env-absent", "--cluster-env slurm, but there is no SLURM job here "
                     "(SLURM_JOB_ID is not set)");
        return ct_error_hint(err, "run it in a job step: srun ctrain ... (from a login node, a salloc shell or an "
                                  "sbatch script)");
    case CT_SLURM_ALLOCATION:
        ct_error_set(err, CT_ENOTAVAIL, "env-absent", "--cluster-env slurm, but this is a SLURM allocation (a salloc "
                     "shell or a batch script), not a job step: SLURM_STEP_ID is not set");
        return ct_error_hint(err, "start the training with srun inside the allocation (srun ctrain fit ...)");
    case CT_SLURM_INTERACTIVE:
        ct_error_set(err, CT_ENOTAVAIL, "env-absent", "--cluster-env slurm, but this is an interactive SLURM step "
                     "(srun --pty or the interactive step), a shell rather than a training step");
        return ct_error_hint(err, "start the training with srun from this shell (srun ctrain fit ...)");
    case CT_SLURM_STEP:
        break;
    }
    ct_error_set(err, CT_ENOTAVAIL, "env-absent", "--cluster-env slurm, but SLURM_PROCID or SLURM_NTASKS is not set");
    return ct_error_hint(err, "srun sets both in every task; start the training with srun");
}

const struct ct_env_ops ct_env_slurm_ops = {
    .name = "slurm",
    .description = "SLURM job step started by srun (SLURM_PROCID, SLURM_STEP_NODELIST, ...)",
    .auto_detect = 1,
    .priority = 50,
    .pmix_enriches = 1,
    .needs = "a SLURM job step: start it with srun",
    .absent = slurm_absent,
    .detect = slurm_detect,
    .read = slurm_read,
    .validate = slurm_validate,
};
