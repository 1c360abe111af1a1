/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers the environments share, and the rules of include/ctrain/envs.h (ports, SLURM step
 * context, tasks per node). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctrain/envs.h"
#include "ctrain/util.h"
#include "envs/envs_impl.h"

const char *ct_getenv_process(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

int ct_envvar_has(ct_getenv_fn get, void *ctx, const char *name)
{
    const char *v = get(name, ctx);
    return v && *v;
}

const char *ct_envvar_first(ct_getenv_fn get, void *ctx, const char *const *names, const char **which)
{
    for (; *names; names++) {
        const char *v = get(*names, ctx);
        if (v && *v) {
            if (which)
                *which = *names;
            return v;
        }
    }
    return NULL;
}

int ct_envvar_int(ct_getenv_fn get, void *ctx, const char *name, long min, long max, int *out, ct_error *err)
{
    const char *v = get(name, ctx);
    long n;

    if (!v || !*v) {
        ct_error_set(err, CT_EINVAL, "env-variable-missing", "%s is not set", name);
        return ct_error_hint(err, "the launcher sets it in every process it starts; run under that launcher, or "
                                  "choose another environment with --cluster-env");
    }
    if (ct_parse_long(v, min, max, &n)) {
        ct_error_set(err, CT_EINVAL, "env-variable-malformed", "%s='%s' is not a whole number in %ld..%ld", name, v,
                     min, max);
        return ct_error_hint(err, "unset or fix %s; launchers set it to a plain decimal number", name);
    }
    *out = (int)n;
    return 0;
}

void ct_env_info_init(ct_env_info *info, const char *name, int external)
{
    memset(info, 0, sizeof(*info));
    snprintf(info->name, sizeof(info->name), "%s", name);
    info->creates_processes_externally = external;
    info->world_size = 1;
    info->num_nodes = 1;
    info->local_world_size = 1;
    info->equal_tasks_per_node = 1;
}

void ct_env_source(ct_env_info *info, enum ct_env_field f, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(info->source[f], sizeof(info->source[f]), fmt, ap);
    va_end(ap);
}

void ct_env_source_ranks(ct_env_info *info, const char *world_size, const char *global_rank, const char *local_rank,
                         const char *local_world_size)
{
    ct_env_source(info, CT_ENV_WORLD_SIZE, "%s", world_size);
    ct_env_source(info, CT_ENV_GLOBAL_RANK, "%s", global_rank);
    ct_env_source(info, CT_ENV_LOCAL_RANK, "%s", local_rank);
    ct_env_source(info, CT_ENV_LOCAL_WORLD_SIZE, "%s", local_world_size);
}

int ct_env_master_addr(ct_getenv_fn get, void *ctx, ct_env_info *info)
{
    const char *v = get(CT_VAR_MASTER_ADDR, ctx);

    if (!v || !*v)
        return 0;
    snprintf(info->main_address, sizeof(info->main_address), "%s", v);
    ct_env_source(info, CT_ENV_MAIN_ADDRESS, CT_VAR_MASTER_ADDR);
    return 1;
}

int ct_env_master_port(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    int port, rc;

    if (!ct_envvar_has(get, ctx, CT_VAR_MASTER_PORT))
        return 0;
    if ((rc = ct_envvar_int(get, ctx, CT_VAR_MASTER_PORT, 1, 65535, &port, err)))
        return rc;
    info->main_port = port;
    ct_env_source(info, CT_ENV_MAIN_PORT, CT_VAR_MASTER_PORT);
    return 1;
}

int ct_env_port_for_step(unsigned long job_id, unsigned long step_id, int port_base)
{
    if (port_base < 1024 || port_base > 65535 - (CT_ENV_PORT_SPAN - 1))
        return CT_EINVAL;
    /* Fibonacci hashing (Knuth, TAOCP 6.4): the top 14 bits of a 32-bit product. Consecutive
     * job ids, ids 1024 apart and the steps of a job land far apart. */
    uint32_t h = (uint32_t)job_id * 2654435761u + (uint32_t)step_id * 2246822519u;

    return port_base + (int)(h >> 18);
}

int ct_env_port_rule(ct_getenv_fn get, void *ctx, ct_env_info *info, const char *job_id, unsigned long step_id,
                     const char *step_source, ct_error *err)
{
    unsigned long id = 0;
    int rc = ct_env_master_port(get, ctx, info, err);

    if (rc)
        return rc < 0 ? rc : 0;
    /* Job ids are decimal under SLURM and LSF; anything else is hashed (FNV-1a) so it still
     * spreads over the range. */
    if (job_id && *job_id) {
        char *end = NULL;
        id = strtoul(job_id, &end, 10);
        if (!end || *end) {
            id = 2166136261u;
            for (const char *p = job_id; *p; p++)
                id = (id ^ (unsigned char)*p) * 16777619u;
        }
    }
    info->main_port = ct_env_port_for_step(id, step_id, CT_ENV_PORT_BASE_DEFAULT);
    ct_env_source(info, CT_ENV_MAIN_PORT, "%s + %s: %d + hash(job, step) mod 16384",
                  info->source[CT_ENV_JOB_ID][0] ? info->source[CT_ENV_JOB_ID] : "job id", step_source,
                  CT_ENV_PORT_BASE_DEFAULT);
    return 0;
}

int ct_env_free_port(int *port, ct_error *err)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return ct_error_set(err, CT_EIO, "free-port", "cannot open a socket to find a free port: %s", strerror(errno));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || getsockname(fd, (struct sockaddr *)&a, &len)) {
        int e = errno;
        close(fd);
        return ct_error_set(err, CT_EIO, "free-port", "cannot bind a socket to find a free port: %s", strerror(e));
    }
    *port = ntohs(a.sin_port);
    close(fd);
    return 0;
}

/* SLURM marks its special steps with these ids (slurm.h: SLURM_BATCH_SCRIPT, SLURM_EXTERN_CONT,
 * SLURM_INTERACTIVE_STEP); they appear in SLURM_STEP_ID as numbers. */
#define SLURM_STEP_BATCH       4294967294UL
#define SLURM_STEP_EXTERN      4294967292UL
#define SLURM_STEP_INTERACTIVE 4294967290UL

static const char *const slurm_job_vars[] = { "SLURM_JOB_ID", "SLURM_JOBID", NULL };

const char *ct_env_slurm_job_id(ct_getenv_fn get, void *ctx)
{
    const char *id = ct_envvar_first(get, ctx, slurm_job_vars, NULL);

    return id ? id : "";
}

int ct_env_ctrain_supervised(ct_getenv_fn get, void *ctx)
{
    const char *v = get("CTRAIN_SUPERVISED", ctx);

    return v && !strcmp(v, "1");
}

enum ct_slurm_context ct_env_slurm_context(ct_getenv_fn get, void *ctx)
{
    const char *const *job = slurm_job_vars;
    static const char *const step[] = { "SLURM_STEP_ID", "SLURM_STEPID", NULL };
    const char *v;
    unsigned long id;
    char *end = NULL;

    if (!ct_envvar_first(get, ctx, job, NULL))
        return CT_SLURM_NONE;
    /* The job's name says nothing (people name jobs "bash"); the step does. */
    v = ct_envvar_first(get, ctx, step, NULL);
    if (!v || !strcmp(v, "batch"))
        return CT_SLURM_ALLOCATION;
    if (!strcmp(v, "extern") || !strcmp(v, "interactive"))
        return CT_SLURM_INTERACTIVE;
    id = strtoul(v, &end, 10);
    if (end && !*end) {
        if (id == SLURM_STEP_BATCH)
            return CT_SLURM_ALLOCATION;
        if (id == SLURM_STEP_EXTERN || id == SLURM_STEP_INTERACTIVE)
            return CT_SLURM_INTERACTIVE;
    }
    /* srun --pty: one task is a person's shell (ctrain run in it launches on its own); several
     * tasks (srun -n 4 --pty, or --pty in a multi-task allocation) are a step like any other, of
     * which only task 0 has the terminal. */
    if (ct_envvar_has(get, ctx, "SLURM_PTY_PORT")) {
        static const char *const ntasks[] = { "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS", NULL };
        const char *n = ct_envvar_first(get, ctx, ntasks, NULL);
        long tasks = 0;

        if (!n || ct_parse_long(n, 1, 100000000, &tasks) || tasks < 2)
            return CT_SLURM_INTERACTIVE;
    }
    return CT_SLURM_STEP;
}

int ct_env_tasks_per_node_parse(const char *var, const char *value, int **counts, int *n, ct_error *err)
{
    int *out = NULL, len = 0, cap = 0;
    const char *p = value;

    *counts = NULL;
    *n = 0;
    if (!value || !*value)
        goto bad;
    while (*p) {
        char *end;
        long c = strtol(p, &end, 10), rep = 1;

        if (end == p || c < 1 || c > 1000000)
            goto bad;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x')
                goto bad;
            rep = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || rep < 1 || rep > 10000000)
                goto bad;
            p = end + 1;
        }
        if (len + rep > 10000000)
            goto bad;
        if (len + rep > cap) {
            int *q;
            cap = (int)(len + rep) * 2;
            if (!(q = realloc(out, (size_t)cap * sizeof(int)))) {
                free(out);
                return ct_error_set(err, CT_ENOMEM, "out-of-memory", "out of memory reading %s", var);
            }
            out = q;
        }
        for (long i = 0; i < rep; i++)
            out[len++] = (int)c;
        if (*p == ',' && p[1])
            p++;
        else if (*p)
            goto bad;
    }
    *counts = out;
    *n = len;
    return 0;
bad:
    free(out);
    ct_error_set(err, CT_EINVAL, "env-variable-malformed", "%s='%s' is not a list of task counts", var,
                 value ? value : "");
    return ct_error_hint(err, "SLURM writes it as counts with repeats, e.g. 2(x3),1 for three nodes with 2 tasks "
                              "and one with 1");
}

static int check_ranges(const ct_env_info *info, ct_error *err)
{
    if (info->world_size < 1 || info->global_rank < 0 || info->global_rank >= info->world_size)
        return ct_error_set(err, CT_EINVAL, "env-inconsistent", "%s: rank %d is outside the world size %d (%s, %s)",
                            info->name, info->global_rank, info->world_size, info->source[CT_ENV_GLOBAL_RANK],
                            info->source[CT_ENV_WORLD_SIZE]);
    if (info->num_nodes >= 1 && (info->node_rank < -1 || info->node_rank >= info->num_nodes))
        return ct_error_set(err, CT_EINVAL, "env-inconsistent", "%s: node rank %d is outside the %d node(s) (%s, %s)",
                            info->name, info->node_rank, info->num_nodes, info->source[CT_ENV_NODE_RANK],
                            info->source[CT_ENV_NUM_NODES]);
    if (info->local_world_size < 1 || info->local_rank < 0 || info->local_rank >= info->local_world_size)
        return ct_error_set(err, CT_EINVAL, "env-inconsistent",
                            "%s: local rank %d is outside the %d process(es) on this node (%s, %s)", info->name,
                            info->local_rank, info->local_world_size, info->source[CT_ENV_LOCAL_RANK],
                            info->source[CT_ENV_LOCAL_WORLD_SIZE]);
    if (info->local_world_size > info->world_size)
        return ct_error_set(err, CT_EINVAL, "env-inconsistent", "%s: %d process(es) on this node but %d in all (%s, %s)",
                            info->name, info->local_world_size, info->world_size,
                            info->source[CT_ENV_LOCAL_WORLD_SIZE], info->source[CT_ENV_WORLD_SIZE]);
    return 0;
}

int ct_env_check_ranges(const ct_env_info *info, ct_error *err)
{
    int rc = check_ranges(info, err);

    if (rc)
        ct_error_hint(err, "the launcher's variables contradict each other: were some inherited from another job "
                           "or set by hand? (env | grep -E 'SLURM_|RANK|SIZE')");
    return rc;
}

int ct_env_validate_common(const ct_env_info *info, int devices, int num_nodes, const char *devices_hint,
                           const char *nodes_hint, ct_error *err)
{
    if (devices > 0 && !info->equal_tasks_per_node) {
        ct_error_set(err, CT_ECONFLICT, "env-unequal-tasks", "--devices %d asks for %d process(es) on every node, but "
                     "the %s environment runs different numbers per node (%s)", devices, devices, info->name,
                     info->source[CT_ENV_LOCAL_WORLD_SIZE]);
        return ct_error_hint(err, "%s", devices_hint);
    }
    if (devices > 0 && devices != info->local_world_size) {
        ct_error_set(err, CT_ECONFLICT, "env-devices-mismatch", "--devices %d but the %s environment started %d "
                     "process(es) on this node (%s)", devices, info->name, info->local_world_size,
                     info->source[CT_ENV_LOCAL_WORLD_SIZE]);
        return ct_error_hint(err, "%s", devices_hint);
    }
    if (num_nodes > 0 && num_nodes != info->num_nodes) {
        ct_error_set(err, CT_ECONFLICT, "env-num-nodes-mismatch", "--num-nodes %d but the %s environment runs on %d "
                     "node(s) (%s)", num_nodes, info->name, info->num_nodes, info->source[CT_ENV_NUM_NODES]);
        return ct_error_hint(err, "%s", nodes_hint);
    }
    return 0;
}

int ct_env_pmix_started(ct_getenv_fn get, void *ctx)
{
    return (get ? get : ct_getenv_process)("PMIX_RANK", ctx) != NULL;
}

static int launcher_rank_mismatch(ct_error *err)
{
    return ct_error_hint(err, "launch with srun --mpi=pmix so MPI's ranks are SLURM's, or unset RANK and LOCAL_RANK "
                              "if you exported them yourself");
}

int ct_env_check_launcher_ranks(ct_getenv_fn get, void *ctx, const ct_env_info *info, int rank, int local,
                                const char *host, const char *who, ct_error *err)
{
    const char *v, *lv;
    long n;

    if (!get)
        get = ct_getenv_process;
    if (!info->creates_processes_externally || get(CT_LAUNCHER_ENV_RANK, ctx))
        return 0;
    v = get(CT_VAR_RANK, ctx);
    lv = get(CT_VAR_LOCAL_RANK, ctx);
    if (v && ct_parse_long(v, 0, 0x7fffffff, &n) == 0 && n != rank) {
        ct_error_set(err, CT_ECONFLICT, "ddp-launcher-rank-mismatch", "%s: %s=%s (from the launcher: srun "
                     "--ctrain-strategy, torchrun) but MPI numbers this process rank %d", who, CT_VAR_RANK, v, rank);
        return launcher_rank_mismatch(err);
    }
    if (!lv || local < 0 || ct_parse_long(lv, 0, 0x7fffffff, &n) != 0 || n == local)
        return 0;
    ct_error_set(err, CT_ECONFLICT, "ddp-launcher-rank-mismatch", "%s: %s=%s (from the launcher: srun "
                 "--ctrain-strategy, torchrun) but MPI places this process %d of the ranks on %s", who,
                 CT_VAR_LOCAL_RANK, lv, local, host ? host : "its host");
    return launcher_rank_mismatch(err);
}
