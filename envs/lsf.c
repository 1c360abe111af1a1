/* SPDX-License-Identifier: BSD-3-Clause */
/* LSF: processes started by jsrun (IBM Job Step Manager) inside an LSF job.
 *
 * LSB_DJOB_RANKFILE lists one host per line, one line per slot in rank order; its first line is
 * the launch node (where the job script runs), not a compute node, so rank r runs on line r + 2.
 * Nodes are numbered in order of first appearance.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/envs.h"
#include "ctrain/hostlist.h"
#include "envs/envs_impl.h"
#include "engine/util/fsutil.h"

static int lsf_detect(ct_getenv_fn get, void *ctx)
{
    return ct_envvar_has(get, ctx, "LSB_JOBID") && ct_envvar_has(get, ctx, "LSB_DJOB_RANKFILE") &&
           ct_envvar_has(get, ctx, "JSM_NAMESPACE_SIZE") && ct_envvar_has(get, ctx, "JSM_NAMESPACE_RANK") &&
           ct_envvar_has(get, ctx, "JSM_NAMESPACE_LOCAL_RANK");
}

/* The compute hosts of the rankfile, one per slot (the launch node dropped). */
static int read_rankfile(const char *path, ct_hostlist **out, ct_error *err)
{
    /* Opened as every input is (engine/util/fsutil.h): a FIFO named there is not waited on. */
    int fd = ct_fs_open_input(path, "LSB_DJOB_RANKFILE", NULL);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    ct_hostlist *hl = ct_hostlist_new();
    char line[1024];
    int lineno = 0, rc = 0;

    *out = NULL;
    if (!f || !hl) {
        ct_hostlist_free(hl);
        if (f)
            fclose(f);
        else if (fd >= 0)
            close(fd);
        ct_error_set(err, CT_EINVAL, "env-rankfile", "LSB_DJOB_RANKFILE='%s' cannot be read", path);
        return ct_error_hint(err, "LSF writes this file for every job; run inside the job, or unset the variable");
    }
    while (!rc && fgets(line, sizeof(line), f)) {
        size_t n = strcspn(line, " \t\r\n");
        line[n] = '\0';
        if (!n || lineno++ == 0) /* blank, or the launch node */
            continue;
        rc = ct_hostlist_push(hl, line, err);
        if (rc == CT_EINVAL) {
            ct_error_set(err, CT_EINVAL, "env-rankfile", "LSB_DJOB_RANKFILE='%s' line %d: '%s' is not a host name",
                         path, lineno, line);
            ct_error_hint(err, "LSF writes one host name per line (no '[', ']' or ','); check that the variable "
                               "names the job's rank file");
        }
    }
    fclose(f);
    if (!rc && !ct_hostlist_count(hl)) {
        ct_error_set(err, CT_EINVAL, "env-rankfile", "LSB_DJOB_RANKFILE='%s' lists no compute host (only %d line(s); "
                     "the first is the launch node)", path, lineno);
        rc = ct_error_hint(err, "LSF writes one line per slot after the launch node; check the job's allocation");
    }
    if (rc) {
        ct_hostlist_free(hl);
        return rc;
    }
    *out = hl;
    return 0;
}

/* Node numbers from the slots of ranks 0..world_size-1: num_nodes, this rank's node, its local
 * size and whether every node holds the same number of ranks. */
static int lay_out(const ct_hostlist *slots, ct_env_info *info, const char *path, ct_error *err)
{
    ct_hostlist *nodes = ct_hostlist_new();
    int *per_node = calloc((size_t)info->world_size, sizeof(int));
    const char *mine;
    int rc = 0;

    if (!nodes || !per_node) {
        rc = ct_error_set(err, CT_ENOMEM, "out-of-memory", "out of memory reading LSB_DJOB_RANKFILE");
        goto out;
    }
    if (ct_hostlist_count(slots) < (size_t)info->world_size) {
        ct_error_set(err, CT_EINVAL, "env-rankfile", "LSB_DJOB_RANKFILE='%s' has %zu compute slot(s) but "
                     "JSM_NAMESPACE_SIZE is %d", path, ct_hostlist_count(slots), info->world_size);
        rc = ct_error_hint(err, "the rank file and jsrun's namespace come from one job; check jsrun's -n/-a flags");
        goto out;
    }
    for (int r = 0; r < info->world_size && !rc; r++) {
        const char *h = ct_hostlist_get(slots, (size_t)r);
        long k = ct_hostlist_find(nodes, h);
        if (k < 0) {
            k = (long)ct_hostlist_count(nodes);
            rc = ct_hostlist_push(nodes, h, err);
        }
        if (!rc)
            per_node[k]++;
    }
    if (rc)
        goto out;
    mine = ct_hostlist_get(slots, (size_t)info->global_rank);
    info->num_nodes = (int)ct_hostlist_count(nodes);
    info->node_rank = (int)ct_hostlist_find(nodes, mine);
    info->local_world_size = per_node[info->node_rank];
    for (int k = 1; k < info->num_nodes; k++)
        if (per_node[k] != per_node[0])
            info->equal_tasks_per_node = 0;
    snprintf(info->main_address, sizeof(info->main_address), "%s", ct_hostlist_get(slots, 0));
out:
    free(per_node);
    ct_hostlist_free(nodes);
    return rc;
}

static int lsf_read(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    const char *path = get("LSB_DJOB_RANKFILE", ctx);
    ct_hostlist *slots = NULL;
    int rc;

    ct_env_info_init(info, "lsf", 1);
    if ((rc = ct_envvar_int(get, ctx, "JSM_NAMESPACE_SIZE", 1, 10000000, &info->world_size, err)) ||
        (rc = ct_envvar_int(get, ctx, "JSM_NAMESPACE_RANK", 0, 10000000, &info->global_rank, err)) ||
        (rc = ct_envvar_int(get, ctx, "JSM_NAMESPACE_LOCAL_RANK", 0, 10000000, &info->local_rank, err)))
        return rc;
    if (info->global_rank >= info->world_size)
        return ct_env_check_ranges(info, err);
    ct_env_source(info, CT_ENV_WORLD_SIZE, "JSM_NAMESPACE_SIZE");
    ct_env_source(info, CT_ENV_GLOBAL_RANK, "JSM_NAMESPACE_RANK");
    ct_env_source(info, CT_ENV_LOCAL_RANK, "JSM_NAMESPACE_LOCAL_RANK");
    if ((rc = read_rankfile(path, &slots, err)))
        return rc;
    rc = lay_out(slots, info, path, err);
    ct_hostlist_free(slots);
    if (rc)
        return rc;
    ct_env_source(info, CT_ENV_NUM_NODES, "LSB_DJOB_RANKFILE (distinct hosts)");
    ct_env_source(info, CT_ENV_NODE_RANK, "LSB_DJOB_RANKFILE (host of JSM_NAMESPACE_RANK's slot)");
    ct_env_source(info, CT_ENV_LOCAL_WORLD_SIZE, "LSB_DJOB_RANKFILE (slots on this host)");
    ct_env_source(info, CT_ENV_MAIN_ADDRESS, "LSB_DJOB_RANKFILE (first compute host)");
    if (ct_envvar_has(get, ctx, "JSM_NAMESPACE_LOCAL_SIZE")) {
        if ((rc = ct_envvar_int(get, ctx, "JSM_NAMESPACE_LOCAL_SIZE", 1, 10000000, &info->local_world_size, err)))
            return rc;
        ct_env_source(info, CT_ENV_LOCAL_WORLD_SIZE, "JSM_NAMESPACE_LOCAL_SIZE");
    }
    ct_env_master_addr(get, ctx, info);
    snprintf(info->job_id, sizeof(info->job_id), "%s", get("LSB_JOBID", ctx));
    ct_env_source(info, CT_ENV_JOB_ID, "LSB_JOBID");
    /* jsrun exposes no step number: every jsrun of a job gets the same port (MASTER_PORT overrides). */
    if ((rc = ct_env_port_rule(get, ctx, info, info->job_id, 0, "step 0", err)))
        return rc;
    return ct_env_check_ranges(info, err);
}

static int lsf_validate(const ct_env_info *info, int devices, int num_nodes, ct_error *err)
{
    char dhint[256], nhint[256];

    snprintf(dhint, sizeof(dhint), "use jsrun with %d task(s) per host (e.g. -r1 -a%d), or --devices %d", devices,
             devices, info->local_world_size);
    snprintf(nhint, sizeof(nhint), "request %d hosts (bsub -nnodes %d), or --num-nodes %d", num_nodes, num_nodes,
             info->num_nodes);
    return ct_env_validate_common(info, devices, num_nodes, dhint, nhint, err);
}

const struct ct_env_ops ct_env_lsf_ops = {
    .name = "lsf",
    .description = "LSF job step started by jsrun (JSM_NAMESPACE_*, LSB_DJOB_RANKFILE, LSB_JOBID)",
    .auto_detect = 1,
    .priority = 70,
    .pmix_enriches = 1,
    .needs = "LSB_JOBID, LSB_DJOB_RANKFILE and JSM_NAMESPACE_SIZE/RANK/LOCAL_RANK: start it with jsrun in an LSF job",
    .detect = lsf_detect,
    .read = lsf_read,
    .validate = lsf_validate,
};
