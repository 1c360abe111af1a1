/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain env — the cluster environment as this process sees it: the first thing an admin runs
 * inside srun. Prints every field, the variables that decided it and whether the flags fit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "ctrain/connector.h"
#include "ctrain/engine.h"
#include "ctrain/envs.h"
#include "ctrain/error.h"
#include "ctrain/util.h"
#include "engine/cli/commands.h"

static const char usage_text[] =
    "usage: ctrain env [--json] [--cluster-env NAME] [--devices N] [--num-nodes N] [--main-port N]\n"
    "\n"
    "Print the cluster environment of this process: which launcher started it, world size, ranks,\n"
    "nodes, where rank 0 is (main address and port), the job id, which variables decided each\n"
    "value, and whether --devices / --num-nodes fit what the launcher started. Run it the way you\n"
    "run training, e.g. `srun -N2 --ntasks-per-node=4 ctrain env`.\n"
    "\n"
    "  --json              one JSON object: cluster_env, enriched_by, world_size, global_rank,\n"
    "                      local_rank, node_rank, num_nodes, local_world_size, main_address,\n"
    "                      main_port, job_id, equal_tasks_per_node, slurm_context, sources{field:\n"
    "                      variables}, validation{ok, id, error, hint}\n"
    "  --cluster-env NAME  auto (default), torchelastic, lsf, mpi, slurm, pmix, manual, local,\n"
    "                      kubeflow\n"
    "                      (kubeflow is never detected, only chosen)\n"
    "  --devices N         processes per node you will ask for, as ctrain fit reads it: a count,\n"
    "                      a list of ids (0,1 or 1,), or auto and -1 (not checked: the accelerator\n"
    "                      decides those)\n"
    "  --num-nodes N       nodes you will ask for\n"
    "  --main-port N       use this port for rank 0 (overrides MASTER_PORT and the derived port)\n"
    "\n"
    "Detection order: torchelastic, lsf, mpi, slurm (a job step, not a salloc shell), pmix, manual\n"
    "(LOCAL_RANK/NODE_RANK set by hand), local;\n"
    "pmix refines slurm/lsf/mpi when PMIx is present. Exit status: 0 when the environment was read\n"
    "and the flags fit it, 2 when it could not be read or the flags contradict it.\n";

struct env_args {
    int json;
    const char *cluster_env;
    int devices;
    int num_nodes;
    int main_port;
};

static const char *const env_flags[] = { "--json", "--cluster-env", "--devices", "--num-nodes", "--main-port",
                                         "--help", NULL };

static const char *field_key[CT_ENV_NFIELDS] = {
    [CT_ENV_WORLD_SIZE] = "world_size",   [CT_ENV_GLOBAL_RANK] = "global_rank",
    [CT_ENV_LOCAL_RANK] = "local_rank",   [CT_ENV_NODE_RANK] = "node_rank",
    [CT_ENV_NUM_NODES] = "num_nodes",     [CT_ENV_LOCAL_WORLD_SIZE] = "local_world_size",
    [CT_ENV_MAIN_ADDRESS] = "main_address", [CT_ENV_MAIN_PORT] = "main_port",
    [CT_ENV_JOB_ID] = "job_id",
};

static const char *context_name(enum ct_slurm_context c)
{
    switch (c) {
    case CT_SLURM_ALLOCATION: return "allocation";
    case CT_SLURM_INTERACTIVE: return "interactive";
    case CT_SLURM_STEP: return "step";
    case CT_SLURM_NONE: break;
    }
    return "none";
}

static int bad_value(const char *flag, const char *value, const char *what)
{
    fprintf(stderr, "ctrain: error: env: %s '%s' is not %s\nctrain: hint: see 'ctrain env --help'\n", flag,
            value ? value : "", what);
    return 2;
}

static int parse_args(int argc, char **argv, struct env_args *a)
{
    memset(a, 0, sizeof(*a));
    for (int i = 1; i < argc; i++) {
        char name[32];
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL, *eq = strchr(arg, '=');
        int inline_val = 0;
        long n;

        /* --flag=value as well as --flag value. */
        if (!strncmp(arg, "--", 2) && eq && (size_t)(eq - arg) < sizeof(name)) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = '\0';
            arg = name;
            val = eq + 1;
            inline_val = 1;
        }

        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(usage_text, stdout);
            return -1;
        } else if (!strcmp(arg, "--json")) {
            if (inline_val)
                return bad_value(arg, val, "allowed: --json takes no value");
            a->json = 1;
        } else if (!strcmp(arg, "--cluster-env")) {
            if (!val || !*val)
                return bad_value(arg, "", "an environment name");
            a->cluster_env = val;
            i += !inline_val;
        } else if (!strcmp(arg, "--devices")) {
            ct_error err;

            /* Read as ctrain fit and plan read it: the same values, the same errors. */
            if (ct_connector_devices_parse(val, &a->devices, &err)) {
                ct_error_prefix(&err, "env: ");
                ct_error_print(stderr, &err);
                return 2;
            }
            i += !inline_val;
        } else if (!strcmp(arg, "--num-nodes")) {
            if (!val || ct_parse_long(val, 1, 1000000, &n))
                return bad_value(arg, val, "a number of nodes (1-1000000)");
            a->num_nodes = (int)n;
            i += !inline_val;
        } else if (!strcmp(arg, "--main-port")) {
            if (!val || ct_parse_long(val, 1, 65535, &n))
                return bad_value(arg, val, "a TCP port (1-65535)");
            a->main_port = (int)n;
            i += !inline_val;
        } else {
            ct_error err;
            ct_cli_flag_unknown("env", arg, env_flags, &err);
            ct_error_print(stderr, &err);
            return 2;
        }
    }
    return 0;
}

static cJSON *error_json(const ct_error *err)
{
    cJSON *v = cJSON_CreateObject();

    cJSON_AddBoolToObject(v, "ok", err->code == 0);
    if (err->code) {
        cJSON_AddStringToObject(v, "id", err->id);
        cJSON_AddStringToObject(v, "error", err->msg);
        cJSON_AddStringToObject(v, "hint", err->hint);
    }
    return v;
}

/* The numeric fields, world_size to local_world_size (what the JSON and the text print alike). */
static int field_int(const ct_env_info *info, enum ct_env_field f)
{
    const int v[] = { [CT_ENV_WORLD_SIZE] = info->world_size, [CT_ENV_GLOBAL_RANK] = info->global_rank,
                      [CT_ENV_LOCAL_RANK] = info->local_rank, [CT_ENV_NODE_RANK] = info->node_rank,
                      [CT_ENV_NUM_NODES] = info->num_nodes,   [CT_ENV_LOCAL_WORLD_SIZE] = info->local_world_size };

    return v[f];
}

static void add_int_or_null(cJSON *o, const char *key, int v, int known)
{
    if (known)
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

static void add_str_or_null(cJSON *o, const char *key, const char *v)
{
    if (v && *v)
        cJSON_AddStringToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

static int print_json(const ct_env_info *info, int read_ok, const ct_error *err, const ct_error *verr,
                      enum ct_slurm_context sctx)
{
    cJSON *root = cJSON_CreateObject(), *sources;
    char *text;

    if (read_ok) {
        cJSON_AddStringToObject(root, "cluster_env", info->name);
        add_str_or_null(root, "enriched_by", info->enriched_by);
        cJSON_AddBoolToObject(root, "creates_processes_externally", info->creates_processes_externally);
        for (int f = CT_ENV_WORLD_SIZE; f <= CT_ENV_LOCAL_WORLD_SIZE; f++)
            cJSON_AddNumberToObject(root, field_key[f], field_int(info, f));
        cJSON_AddBoolToObject(root, "equal_tasks_per_node", info->equal_tasks_per_node);
        add_str_or_null(root, "main_address", info->main_address);
        add_int_or_null(root, "main_port", info->main_port, info->main_port > 0);
        add_str_or_null(root, "job_id", info->job_id);
    } else {
        cJSON_AddNullToObject(root, "cluster_env");
    }
    cJSON_AddStringToObject(root, "slurm_context", context_name(sctx));
    sources = cJSON_AddObjectToObject(root, "sources");
    for (int f = 0; read_ok && f < CT_ENV_NFIELDS; f++)
        cJSON_AddStringToObject(sources, field_key[f], info->source[f]);
    cJSON_AddItemToObject(root, "validation", error_json(read_ok ? verr : err));
    text = cJSON_Print(root);
    if (!text) {
        cJSON_Delete(root);
        fprintf(stderr, "ctrain: error: env: out of memory printing JSON\n");
        return 1;
    }
    printf("%s\n", text);
    free(text);
    cJSON_Delete(root);
    return 0;
}

static void print_text(const ct_env_info *info, const char *forced, const ct_error *verr, enum ct_slurm_context sctx)
{
    const struct ct_env_ops *env = ct_env_lookup(info->name);
    char value[CT_ENV_NFIELDS][300];

    for (int f = CT_ENV_WORLD_SIZE; f <= CT_ENV_LOCAL_WORLD_SIZE; f++)
        snprintf(value[f], sizeof(value[0]), "%d%s", field_int(info, f),
                 f == CT_ENV_LOCAL_WORLD_SIZE && !info->equal_tasks_per_node ? " (nodes differ)" : "");
    snprintf(value[CT_ENV_MAIN_ADDRESS], sizeof(value[0]), "%s", info->main_address[0] ? info->main_address : "-");
    snprintf(value[CT_ENV_MAIN_PORT], sizeof(value[0]), info->main_port ? "%d" : "-", info->main_port);
    snprintf(value[CT_ENV_JOB_ID], sizeof(value[0]), "%s", info->job_id[0] ? info->job_id : "-");

    printf("cluster environment: %s%s%s (%s)\n", info->name, info->enriched_by[0] ? " + " : "", info->enriched_by,
           forced && strcasecmp(forced, "auto") ? "chosen with --cluster-env" : "detected");
    if (!info->creates_processes_externally)
        printf("processes started by: ctrain (no launcher found)\n");
    else
        printf("processes started by: %s (external)\n",
               env && env->started_by ? env->started_by : "the launcher");
    for (int f = 0; f < CT_ENV_NFIELDS; f++)
        printf("  %-17s %-18s %s\n", field_key[f], value[f], info->source[f]);
    if (sctx == CT_SLURM_ALLOCATION || sctx == CT_SLURM_INTERACTIVE)
        printf("note: this is a SLURM %s, not a job step: start training with srun\n",
               sctx == CT_SLURM_ALLOCATION ? "allocation (salloc shell or batch script)" : "interactive shell");
    if (verr->code)
        printf("validation: FAILED: %s\n", verr->msg);
    else
        printf("validation: ok\n");
}

int ct_cmd_env(int argc, char **argv)
{
    struct env_args a;
    const struct ct_env_ops *ops = NULL;
    ct_env_info info;
    ct_error err, verr;
    enum ct_slurm_context sctx = ct_env_slurm_context(ct_getenv_process, NULL);
    int rc;

    rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    /* libctrain's start-up registers the environments outside libctrain-core (pmix). */
    ct_engine_init();
    ct_error_clear(&err);
    ct_error_clear(&verr);
    memset(&info, 0, sizeof(info));
    rc = ct_env_detect(ct_getenv_process, NULL, a.cluster_env, &ops, &info, &err);
    if (!rc)
        rc = ct_env_complete(ops, ct_getenv_process, NULL, &info, a.devices, a.num_nodes, &err);
    if (rc) {
        if (a.json)
            print_json(&info, 0, &err, &verr, sctx);
        ct_error_print(stderr, &err);
        return ct_error_exit_status(rc);
    }
    if (a.main_port) {
        info.main_port = a.main_port;
        snprintf(info.source[CT_ENV_MAIN_PORT], sizeof(info.source[0]), "--main-port");
    }
    ops->validate(&info, a.devices, a.num_nodes, &verr);
    if (a.json) {
        if (print_json(&info, 1, &err, &verr, sctx))
            return 1;
    } else {
        print_text(&info, a.cluster_env, &verr, sctx);
    }
    if (verr.code) {
        ct_error_print(stderr, &verr);
        return ct_error_exit_status(verr.code);
    }
    return 0;
}
