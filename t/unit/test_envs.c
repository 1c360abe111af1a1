/* SPDX-License-Identifier: BSD-3-Clause */
/* Cluster environments through the public API: detection order, forcing, the registry, the
 * port rule, SLURM step contexts, tasks per node and validate(). Variables come from arrays of
 * "NAME=value" strings (the same getenv hook the SPANK plugin uses). The end-to-end checks of
 * real variable sets are t/22-env-fixtures.t and t/23-slurm-env.t. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctrain/envs.h"
#include "ctrain/error.h"
#include "ctrain/launcher.h"
#include "envs/envs_impl.h" /* its CT_LAUNCHER_ENV_* must equal launcher.h's (a redefinition fails) */

static const char *vars_get(const char *name, void *ctx)
{
    const char *const *vars = ctx;
    size_t len = strlen(name);

    for (; vars && *vars; vars++)
        if (!strncmp(*vars, name, len) && (*vars)[len] == '=')
            return *vars + len + 1;
    return NULL;
}

#define SLURM_STEP_2x2 "SLURM_JOB_ID=4242", "SLURM_STEP_ID=3", "SLURM_NTASKS=4", "SLURM_PROCID=3", \
    "SLURM_LOCALID=1", "SLURM_NODEID=1", "SLURM_NNODES=2", "SLURM_TASKS_PER_NODE=2(x2)", \
    "SLURM_STEP_NODELIST=gpu[07-08]", "SLURM_NODELIST=gpu[07-08]"

static int detect(const char *const *vars, const char *forced, ct_env_info *info, ct_error *err)
{
    const struct ct_env_ops *ops = NULL;
    int rc;

    ct_error_clear(err);
    rc = ct_env_detect(vars_get, (void *)vars, forced, &ops, info, err);
    if (!rc)
        assert_string_equal(ops->name, info->name);
    return rc;
}

static void test_slurm_step(void **state)
{
    const char *vars[] = { SLURM_STEP_2x2, NULL };
    ct_env_info info;
    ct_error err;

    (void)state;
    assert_int_equal(detect(vars, NULL, &info, &err), 0);
    assert_string_equal(info.name, "slurm");
    assert_int_equal(info.world_size, 4);
    assert_int_equal(info.global_rank, 3);
    assert_int_equal(info.local_rank, 1);
    assert_int_equal(info.node_rank, 1);
    assert_int_equal(info.num_nodes, 2);
    assert_int_equal(info.local_world_size, 2);
    assert_true(info.equal_tasks_per_node);
    assert_string_equal(info.main_address, "gpu07");
    assert_string_equal(info.job_id, "4242");
    assert_int_equal(info.main_port, ct_env_port_for_step(4242, 3, CT_ENV_PORT_BASE_DEFAULT));
    assert_string_equal(info.source[CT_ENV_GLOBAL_RANK], "SLURM_PROCID");
    assert_true(info.creates_processes_externally);
}

/* The documented order: torchelastic and mpi before slurm; a salloc shell is local. */
static void test_order(void **state)
{
    const char *torchrun[] = { SLURM_STEP_2x2, "TORCHELASTIC_RUN_ID=r1", "RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1",
                               "LOCAL_WORLD_SIZE=4", "GROUP_RANK=1", "GROUP_WORLD_SIZE=2", "MASTER_ADDR=gpu07",
                               "MASTER_PORT=29500", NULL };
    const char *spank_vars[] = { SLURM_STEP_2x2, "RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "MASTER_ADDR=gpu07",
                                 "MASTER_PORT=29511", NULL };
    const char *mpirun[] = { SLURM_STEP_2x2, "OMPI_COMM_WORLD_RANK=6", "OMPI_COMM_WORLD_SIZE=8",
                             "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=4", NULL };
    const char *salloc[] = { "SLURM_JOB_ID=4242", "SLURM_NTASKS=4", "SLURM_NNODES=2", "SLURM_NODELIST=n[1-2]",
                             "SLURM_TASKS_PER_NODE=2(x2)", NULL };
    const char *pty[] = { SLURM_STEP_2x2, "SLURM_PTY_PORT=40000", "SLURM_STEP_NUM_TASKS=4", NULL };
    const char *pty1[] = { "SLURM_JOB_ID=9", "SLURM_STEP_ID=0", "SLURM_NTASKS=4", "SLURM_STEP_NUM_TASKS=1",
                           "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NNODES=1",
                           "SLURM_STEP_TASKS_PER_NODE=1", "SLURM_STEP_NODELIST=n1", "SLURM_PTY_PORT=40000", NULL };
    const char *interactive[] = { "SLURM_JOB_ID=9", "SLURM_STEP_ID=4294967290", "SLURM_PROCID=0", "SLURM_NTASKS=1",
                                  NULL };
    ct_env_info info;
    ct_error err;

    (void)state;
    assert_int_equal(detect(torchrun, NULL, &info, &err), 0);
    assert_string_equal(info.name, "torchelastic");
    assert_int_equal(info.global_rank, 5);
    assert_int_equal(info.node_rank, 1);
    assert_int_equal(info.num_nodes, 2);
    assert_int_equal(info.main_port, 29500);

    /* RANK/WORLD_SIZE without TORCHELASTIC_RUN_ID (set by the SPANK plugin) stay slurm, and
     * MASTER_PORT overrides the derived port. */
    assert_int_equal(detect(spank_vars, NULL, &info, &err), 0);
    assert_string_equal(info.name, "slurm");
    assert_int_equal(info.main_port, 29511);
    assert_string_equal(info.source[CT_ENV_MAIN_PORT], "MASTER_PORT");

    /* mpirun on two nodes says no node number: without PMIx to ask, an error naming the variables,
     * not rank / local size (wrong under --map-by node). */
    assert_int_equal(detect(mpirun, NULL, &info, &err), CT_ENOTAVAIL);
    assert_string_equal(err.id, "env-layout-unknown");
    assert_non_null(strstr(err.msg, "OMPI_COMM_WORLD_RANK"));
    assert_non_null(strstr(err.hint, "PMIx"));

    assert_int_equal(detect(salloc, NULL, &info, &err), 0);
    assert_string_equal(info.name, "local");
    assert_int_equal(ct_env_slurm_context(vars_get, salloc), CT_SLURM_ALLOCATION);
    /* srun --pty with one task is a person's shell; with several it is a step like any other. */
    assert_int_equal(detect(pty1, NULL, &info, &err), 0);
    assert_string_equal(info.name, "local");
    assert_int_equal(ct_env_slurm_context(vars_get, pty1), CT_SLURM_INTERACTIVE);
    assert_int_equal(detect(pty, NULL, &info, &err), 0);
    assert_string_equal(info.name, "slurm");
    assert_int_equal(info.global_rank, 3);
    assert_int_equal(info.local_world_size, 2);
    assert_int_equal(ct_env_slurm_context(vars_get, pty), CT_SLURM_STEP);
    assert_int_equal(ct_env_slurm_context(vars_get, interactive), CT_SLURM_INTERACTIVE);
    assert_int_equal(ct_env_slurm_context(vars_get, (void *)torchrun), CT_SLURM_STEP);
}

static void test_forced(void **state)
{
    const char *none[] = { NULL };
    const char *salloc[] = { "SLURM_JOB_ID=4242", "SLURM_NNODES=2", NULL };
    const char *kube[] = { "KUBERNETES_PORT=tcp://10.96.0.1:443", "MASTER_ADDR=job-master-0", "MASTER_PORT=23456",
                           "WORLD_SIZE=3", "RANK=2", "HOSTNAME=job-worker-1", NULL };
    ct_env_info info;
    ct_error err;

    (void)state;
    assert_int_equal(detect(none, "slurm", &info, &err), CT_ENOTAVAIL);
    assert_string_equal(err.id, "env-absent");
    assert_int_equal(detect(salloc, "slurm", &info, &err), CT_ENOTAVAIL);
    assert_non_null(strstr(err.msg, "allocation"));
    assert_non_null(strstr(err.hint, "srun"));
    assert_int_equal(detect(none, "slrum", &info, &err), CT_EINVAL);
    assert_string_equal(err.id, "env-unknown");
    assert_non_null(strstr(err.hint, "did you mean 'slurm'"));
    assert_int_equal(detect(none, "torchelastic", &info, &err), CT_ENOTAVAIL);
    assert_non_null(strstr(err.hint, "torchrun"));
    assert_int_equal(detect(none, "local", &info, &err), 0);
    assert_int_equal(detect(none, "auto", &info, &err), 0);
    /* Names ignore case. */
    assert_int_equal(detect(none, "Local", &info, &err), 0);
    assert_string_equal(info.name, "local");
    assert_int_equal(detect(none, "AUTO", &info, &err), 0);
    assert_int_equal(detect(salloc, "SLURM", &info, &err), CT_ENOTAVAIL);
    assert_non_null(strstr(err.msg, "allocation"));
    assert_string_equal(info.name, "local");

    /* kubeflow: never detected, only chosen. */
    assert_int_equal(detect(kube, NULL, &info, &err), 0);
    assert_string_equal(info.name, "local");
    assert_int_equal(detect(kube, "kubeflow", &info, &err), 0);
    assert_string_equal(info.name, "kubeflow");
    assert_int_equal(info.node_rank, 2);
    assert_int_equal(info.num_nodes, 3);
    assert_string_equal(info.job_id, "job");
}

/* pmix: known by name in libctrain-core, absent until registered; when registered it enriches
 * slurm. The ops below stand in for libctrain's pmix/ (which asks a PMIx server). */
static int fake_pmix_detect(ct_getenv_fn get, void *ctx)
{
    return get("PMIX_RANK", ctx) && get("PMIX_NAMESPACE", ctx);
}

static int fake_pmix_read(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err)
{
    (void)get;
    (void)ctx;
    (void)err;
    if (!info->name[0])
        snprintf(info->name, sizeof(info->name), "pmix");
    snprintf(info->main_address, sizeof(info->main_address), "rank0-host");
    snprintf(info->source[CT_ENV_MAIN_ADDRESS], sizeof(info->source[0]), "PMIx rank 0 PMIX_HOSTNAME");
    /* The server's PMIX_NODEID for the mpirun case below (rank 6 of 8, 4 per node, on node 1). */
    if (info->node_rank < 0) {
        info->node_rank = 1;
        snprintf(info->source[CT_ENV_NODE_RANK], sizeof(info->source[0]), "PMIx: PMIX_NODEID");
    }
    return 0;
}

static int fake_pmix_validate(const ct_env_info *info, int devices, int num_nodes, ct_error *err)
{
    (void)info;
    (void)devices;
    (void)num_nodes;
    (void)err;
    return 0;
}

/* The enricher, described as pmix/environment.c describes itself. */
static const struct ct_env_ops fake_pmix = { .name = "pmix", .description = "test", .auto_detect = 1,
                                             .priority = 40, .enricher = 1, .detect = fake_pmix_detect,
                                             .read = fake_pmix_read, .validate = fake_pmix_validate };
static const struct ct_env_ops other_pmix = { .name = "pmix", .description = "test 2", .auto_detect = 1,
                                              .priority = 40, .enricher = 1, .detect = fake_pmix_detect,
                                              .read = fake_pmix_read, .validate = fake_pmix_validate };
static const struct ct_env_ops bogus = { .name = "bogus", .description = "test", .auto_detect = 1,
                                         .detect = fake_pmix_detect, .read = fake_pmix_read,
                                         .validate = fake_pmix_validate };

static void test_registry(void **state)
{
    const char *vars[] = { SLURM_STEP_2x2, "PMIX_RANK=3", "PMIX_NAMESPACE=slurm.pmix.4242.3", NULL };
    const char *mpirun[] = { "OMPI_COMM_WORLD_RANK=6", "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_RANK=3",
                             "OMPI_COMM_WORLD_LOCAL_SIZE=4", "OMPI_MCA_orte_num_nodes=2", "PMIX_RANK=6",
                             "PMIX_NAMESPACE=1124270081", NULL };
    const char *const *names = ct_env_names();
    ct_env_info info;
    ct_error err;
    int n = ct_env_count(), found = 0;

    (void)state;
    for (int i = 0; names[i]; i++)
        found += !strcmp(names[i], "pmix");
    assert_int_equal(found, 1);
    assert_null(ct_env_lookup("pmix"));
    assert_non_null(ct_env_lookup("slurm"));
    assert_null(ct_env_lookup("nope"));
    assert_int_equal(detect(vars, "pmix", &info, &err), CT_ENOTAVAIL);
    assert_string_equal(err.id, "env-not-linked");
    assert_int_equal(detect(vars, NULL, &info, &err), 0);
    assert_string_equal(info.enriched_by, "");

    assert_int_equal(ct_env_register(&bogus), CT_EINVAL);
    assert_int_equal(ct_env_register(&fake_pmix), 0);
    assert_int_equal(ct_env_register(&fake_pmix), 0);
    assert_int_equal(ct_env_register(&other_pmix), CT_ECONFLICT);
    assert_int_equal(ct_env_count(), n + 1);
    assert_ptr_equal(ct_env_lookup("pmix"), &fake_pmix);
    for (int i = 0; i < ct_env_count(); i++)
        assert_non_null(ct_env_at(i));
    assert_string_equal(ct_env_at(0)->name, "torchelastic");
    assert_null(ct_env_at(ct_env_count()));

    assert_int_equal(detect(vars, NULL, &info, &err), 0);
    assert_string_equal(info.name, "slurm");
    assert_string_equal(info.enriched_by, "pmix");
    assert_string_equal(info.main_address, "rank0-host");
    assert_int_equal(info.global_rank, 3);

    /* mpirun on two nodes: the PMIx server answers the node rank the variables cannot give. */
    assert_int_equal(detect(mpirun, NULL, &info, &err), 0);
    assert_string_equal(info.name, "mpi");
    assert_string_equal(info.enriched_by, "pmix");
    assert_int_equal(info.global_rank, 6);
    assert_int_equal(info.node_rank, 1);
    assert_string_equal(info.source[CT_ENV_NODE_RANK], "PMIx: PMIX_NODEID");
}

static void test_port_rule(void **state)
{
    int seen[16];

    (void)state;
    /* Concurrent steps of one job never share a port; neighbouring jobs do not either. */
    for (int s = 0; s < 16; s++) {
        seen[s] = ct_env_port_for_step(4242, (unsigned long)s, CT_ENV_PORT_BASE_DEFAULT);
        for (int k = 0; k < s; k++)
            assert_int_not_equal(seen[k], seen[s]);
    }
    for (unsigned long j = 1; j < 1024; j++)
        assert_int_not_equal(ct_env_port_for_step(4242 + j, 0, 15000), ct_env_port_for_step(4242, 0, 15000));
    assert_int_equal(ct_env_port_for_step(0, 0, 15000), 15000);
    /* Jobs 1024 apart (a job-mod-1024 rule gives them one port) differ. */
    for (unsigned long k = 1; k < 64; k++)
        assert_int_not_equal(ct_env_port_for_step(4242 + 1024 * k, 0, 15000), ct_env_port_for_step(4242, 0, 15000));
    assert_int_equal(ct_env_port_for_step(4294967295UL, 4294967294UL, 15000) < 15000 + CT_ENV_PORT_SPAN, 1);
    assert_int_equal(ct_env_port_for_step(1, 0, 80), CT_EINVAL);
    assert_int_equal(ct_env_port_for_step(1, 0, 60000), CT_EINVAL);
}

static void test_tasks_per_node(void **state)
{
    const char *bad[] = { "", "2(x", "2(3)", "0", "2,,1", "2,", "-1", "2(x0)", "a", NULL };
    int *c = NULL, n = 0;
    ct_error err;

    (void)state;
    assert_int_equal(ct_env_tasks_per_node_parse("SLURM_TASKS_PER_NODE", "2(x3),1", &c, &n, &err), 0);
    assert_int_equal(n, 4);
    assert_int_equal(c[0], 2);
    assert_int_equal(c[2], 2);
    assert_int_equal(c[3], 1);
    free(c);
    assert_int_equal(ct_env_tasks_per_node_parse("X", "4", &c, &n, &err), 0);
    assert_int_equal(n, 1);
    free(c);
    for (int i = 0; bad[i]; i++) {
        if (ct_env_tasks_per_node_parse("SLURM_TASKS_PER_NODE", bad[i], &c, &n, &err) != CT_EINVAL)
            fail_msg("'%s' was accepted", bad[i]);
        assert_non_null(strstr(err.msg, "SLURM_TASKS_PER_NODE"));
        assert_null(c);
    }
}

static void test_validate(void **state)
{
    const char *vars[] = { SLURM_STEP_2x2, NULL };
    const char *hetero[] = { "SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURM_NTASKS=7", "SLURM_PROCID=6",
                             "SLURM_LOCALID=0", "SLURM_NODEID=3", "SLURM_NNODES=4", "SLURM_TASKS_PER_NODE=2(x3),1",
                             "SLURM_STEP_NODELIST=n[1-4]", NULL };
    const struct ct_env_ops *ops = ct_env_lookup("slurm");
    ct_env_info info;
    ct_error err;

    (void)state;
    assert_int_equal(detect(vars, NULL, &info, &err), 0);
    assert_int_equal(ops->validate(&info, 0, 0, &err), 0);
    assert_int_equal(ops->validate(&info, 2, 2, &err), 0);
    assert_int_equal(ops->validate(&info, 4, 0, &err), CT_ECONFLICT);
    assert_string_equal(err.id, "env-devices-mismatch");
    assert_string_equal(err.hint, "use --ntasks-per-node=4, or --devices 2");
    assert_int_equal(ops->validate(&info, 0, 3, &err), CT_ECONFLICT);
    assert_string_equal(err.id, "env-num-nodes-mismatch");
    assert_non_null(strstr(err.msg, "SLURM_NNODES"));

    assert_int_equal(detect(hetero, NULL, &info, &err), 0);
    assert_int_equal(info.local_world_size, 1);
    assert_false(info.equal_tasks_per_node);
    assert_int_equal(ops->validate(&info, 2, 0, &err), CT_ECONFLICT);
    assert_string_equal(err.id, "env-unequal-tasks");
}

/* Heterogeneous steps. The recorded variable sets (reverse node order, srun A : B in one
 * allocation, srun --het-group) are t/fixtures/env/slurm-het-*.env; the sets below are the
 * recorded reverse-order step (srun -N1 -n1 -w n2 : -N1 -n2 -w n1, SLURM 22.05) cut to what the
 * reader uses, and steps whose components share a node. SLURM 22.05 never places two components on
 * one node (srun and slurmctld exclude earlier components' nodes), so those sets are built from
 * SLURM's code, not recorded: srun's _reorder_het_job_recs cannot sort a list that names a node
 * twice and leaves it in component order (each component's list, comma-joined, task counts per
 * entry), slurmstepd sets SLURM_NODEID = component node offset + node index, SLURM_PROCID = task
 * offset + task id, SLURM_LOCALID within the component, SLURM_GTIDS this component's tasks here. */
#define HET_COMMON "SLURM_JOB_ID=5", "SLURM_STEP_ID=0", "SLURM_HET_SIZE=2"

static void test_slurm_het(void **state)
{
    /* Recorded: rank 0 alone on n2 (SLURM_NODEID 0), ranks 1-2 on n1 (SLURM_NODEID 1). */
    const char *rev0[] = { HET_COMMON, "SLURM_STEP_NUM_TASKS=3", "SLURM_STEP_NUM_NODES=2", "SLURM_PROCID=0",
                           "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_GTIDS=0", "SLURMD_NODENAME=n2",
                           "SLURM_STEP_NODELIST=n[1-2]", "SLURM_STEP_TASKS_PER_NODE=2,1",
                           "SLURM_JOB_NODELIST_PACK_GROUP_0=n2", NULL };
    const char *rev2[] = { HET_COMMON, "SLURM_STEP_NUM_TASKS=3", "SLURM_STEP_NUM_NODES=2", "SLURM_PROCID=2",
                           "SLURM_LOCALID=1", "SLURM_NODEID=1", "SLURM_GTIDS=1,2", "SLURMD_NODENAME=n1",
                           "SLURM_STEP_NODELIST=n[1-2]", "SLURM_STEP_TASKS_PER_NODE=2,1",
                           "SLURM_JOB_NODELIST_PACK_GROUP_0=n2", NULL };
    ct_env_info info;
    ct_error err;

    (void)state;
    assert_int_equal(detect(rev0, NULL, &info, &err), 0);
    assert_int_equal(info.local_world_size, 1);
    assert_int_equal(info.local_rank, 0);
    assert_int_equal(info.node_rank, 0);
    assert_string_equal(info.main_address, "n2");
    assert_int_equal(detect(rev2, NULL, &info, &err), 0);
    assert_int_equal(info.local_world_size, 2);
    assert_int_equal(info.local_rank, 1);
    assert_int_equal(info.node_rank, 1);
    assert_int_equal(info.num_nodes, 2);
}

static void check_layout(const char *const *vars, int rank, int local_rank, int local_size, int node_rank,
                         int num_nodes)
{
    ct_env_info info;
    ct_error err;

    if (detect(vars, NULL, &info, &err) != 0)
        fail_msg("rank %d: %s (%s)", rank, err.msg, err.hint);
    assert_int_equal(info.global_rank, rank);
    assert_int_equal(info.world_size, 4);
    assert_int_equal(info.local_rank, local_rank);
    assert_int_equal(info.local_world_size, local_size);
    assert_int_equal(info.node_rank, node_rank);
    assert_int_equal(info.num_nodes, num_nodes);
}

static void test_slurm_het_shared_node(void **state)
{
    /* srun -n2 -w n1 A : -N2 -n2 -w n[1-2] B: component 0 has ranks 0-1 on n1, component 1 rank 2 on
     * n1 and rank 3 on n2. The list is "n1,n[1-2]" (3 entries), SLURM_NODEID 0 | 1, 2. */
#define SHARED HET_COMMON, "SLURM_STEP_NUM_TASKS=4", "SLURM_STEP_NUM_NODES=3", "SLURM_STEP_NODELIST=n1,n[1-2]", \
               "SLURM_STEP_TASKS_PER_NODE=2,1(x2)", "SLURM_JOB_NODELIST_HET_GROUP_0=n1"
    const char *r0[] = { SHARED, "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_GTIDS=0,1",
                         "SLURMD_NODENAME=n1", NULL };
    const char *r1[] = { SHARED, "SLURM_PROCID=1", "SLURM_LOCALID=1", "SLURM_NODEID=0", "SLURM_GTIDS=0,1",
                         "SLURMD_NODENAME=n1", NULL };
    const char *r2[] = { SHARED, "SLURM_PROCID=2", "SLURM_LOCALID=0", "SLURM_NODEID=1", "SLURM_GTIDS=2",
                         "SLURMD_NODENAME=n1", NULL };
    const char *r3[] = { SHARED, "SLURM_PROCID=3", "SLURM_LOCALID=0", "SLURM_NODEID=2", "SLURM_GTIDS=3",
                         "SLURMD_NODENAME=n2", NULL };
    /* The same with component 0 on n2: the list "n2,n[1-2]" starts with n2, rank 3 shares it. */
    const char *s2[] = { HET_COMMON, "SLURM_STEP_NUM_TASKS=4", "SLURM_STEP_NUM_NODES=3",
                         "SLURM_STEP_NODELIST=n2,n[1-2]", "SLURM_STEP_TASKS_PER_NODE=2,1(x2)", "SLURM_PROCID=3",
                         "SLURM_LOCALID=0", "SLURM_NODEID=2", "SLURM_GTIDS=3", "SLURMD_NODENAME=n2", NULL };
    /* Two entries for n1 but SLURM_NODEID pointing at n2's: the variables contradict each other. */
    const char *wrong[] = { SHARED, "SLURM_PROCID=2", "SLURM_LOCALID=0", "SLURM_NODEID=2", "SLURM_GTIDS=2",
                            "SLURMD_NODENAME=n1", NULL };
    /* A SLURM that merged the shared node into one entry (3 tasks on n1): SLURM_GTIDS shows that
     * another component is here, nothing shows in which order. */
    const char *merged[] = { HET_COMMON, "SLURM_STEP_NUM_TASKS=4", "SLURM_STEP_NUM_NODES=2",
                             "SLURM_STEP_NODELIST=n[1-2]", "SLURM_STEP_TASKS_PER_NODE=3,1", "SLURM_PROCID=2",
                             "SLURM_LOCALID=0", "SLURM_NODEID=1", "SLURM_GTIDS=2", "SLURMD_NODENAME=n1", NULL };
    ct_env_info info;
    ct_error err;

    (void)state;
    check_layout(r0, 0, 0, 3, 0, 2);
    check_layout(r1, 1, 1, 3, 0, 2);
    check_layout(r2, 2, 2, 3, 0, 2);   /* after component 0's two tasks on n1 */
    check_layout(r3, 3, 0, 1, 1, 2);
    assert_int_equal(detect(r2, NULL, &info, &err), 0);
    assert_non_null(strstr(info.source[CT_ENV_LOCAL_RANK], "SLURM_LOCALID"));
    assert_string_equal(info.main_address, "n1");
    assert_false(info.equal_tasks_per_node);
    check_layout(s2, 3, 2, 3, 0, 2);   /* n2 (node 0: rank 0 is there) holds component 0's two tasks, then this one */
    assert_int_equal(detect(wrong, NULL, &info, &err), CT_EINVAL);
    assert_string_equal(err.id, "env-inconsistent");
    assert_non_null(strstr(err.msg, "SLURM_NODEID=2"));
    assert_int_equal(detect(merged, NULL, &info, &err), CT_EINVAL);
    assert_string_equal(err.id, "env-layout-unknown");
    assert_non_null(strstr(err.msg, "SLURM_GTIDS"));
    assert_non_null(strstr(err.hint, "different nodes"));
#undef SHARED
}

static void test_malformed_env(void **state)
{
    const char *badlist[] = { "SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_PROCID=0",
                              "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NNODES=2", "SLURM_TASKS_PER_NODE=1(x2)",
                              "SLURM_STEP_NODELIST=n[1-2", NULL };
    const char *badrank[] = { "SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_PROCID=two", NULL };
    const char *outside[] = { "SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_PROCID=2",
                              "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NNODES=1", "SLURM_TASKS_PER_NODE=2",
                              "SLURM_STEP_NODELIST=n1", NULL };
    const char *sum[] = { "SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_NTASKS=3", "SLURM_PROCID=0",
                          "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NNODES=2", "SLURM_TASKS_PER_NODE=1(x2)",
                          "SLURM_STEP_NODELIST=n[1-2]", NULL };
    const char *port[] = { SLURM_STEP_2x2, "MASTER_PORT=99999", NULL };
    ct_env_info info;
    ct_error err;

    (void)state;
    assert_int_equal(detect(badlist, NULL, &info, &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "SLURM_STEP_NODELIST"));
    assert_non_null(strstr(err.msg, "n[1-2"));
    assert_int_equal(detect(badrank, NULL, &info, &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "SLURM_PROCID='two'"));
    assert_int_equal(detect(outside, NULL, &info, &err), CT_EINVAL);
    assert_string_equal(err.id, "env-inconsistent");
    assert_int_equal(detect(sum, NULL, &info, &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "SLURM_TASKS_PER_NODE"));
    assert_int_equal(detect(port, NULL, &info, &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "MASTER_PORT"));
}

/* The SLURM reader called directly (the SPANK plugin's heterogeneous path) without SLURM_STEP_ID:
 * an error naming it, not strtoul(NULL). */
static void test_slurm_no_step_id(void **state)
{
    const char *nostep[] = { "SLURM_JOB_ID=1", "SLURM_NTASKS=2", "SLURM_PROCID=0", "SLURM_LOCALID=0",
                             "SLURM_NODEID=0", "SLURM_NNODES=1", "SLURM_TASKS_PER_NODE=2", "SLURM_STEP_NODELIST=n1",
                             NULL };
    const struct ct_env_ops *slurm = ct_env_lookup("slurm");
    ct_env_info info;
    ct_error err;

    (void)state;
    assert_non_null(slurm);
    ct_error_clear(&err);
    assert_int_equal(slurm->read(vars_get, (void *)nostep, &info, &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "SLURM_STEP_ID"));
    assert_true(err.hint[0] != '\0');
}

/* A rank file line that is no host name (found by t/fuzz/fuzz_env.c): an env-rankfile error
 * naming the file and line, with a hint. */
static void test_lsf_bad_rankfile(void **state)
{
    char path[] = "/tmp/ctrain-test-rankfile.XXXXXX", var[64];
    const char *vars[] = { "LSB_JOBID=7", var, "JSM_NAMESPACE_SIZE=2", "JSM_NAMESPACE_RANK=0",
                           "JSM_NAMESPACE_LOCAL_RANK=0", NULL };
    ct_env_info info;
    ct_error err;
    int fd = mkstemp(path);

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "batch1\nh01\nh[02]\n", 17), 17);
    close(fd);
    snprintf(var, sizeof(var), "LSB_DJOB_RANKFILE=%s", path);
    assert_int_equal(detect(vars, NULL, &info, &err), CT_EINVAL);
    assert_string_equal(err.id, "env-rankfile");
    assert_non_null(strstr(err.msg, "line 3: 'h[02]'"));
    assert_true(err.hint[0] != '\0');
    unlink(path);
}

static void test_local(void **state)
{
    const char *launched[] = { CT_LAUNCHER_ENV_RANK "=2", CT_LAUNCHER_ENV_NPROC "=4", NULL };
    const char *alone[] = { NULL };
    const struct ct_env_ops *ops = ct_env_lookup("local");
    ct_env_info info;
    ct_error err;

    (void)state;
    assert_int_equal(detect(launched, NULL, &info, &err), 0);
    assert_string_equal(info.name, "local");
    assert_int_equal(info.world_size, 4);
    assert_int_equal(info.global_rank, 2);
    assert_int_equal(info.local_rank, 2);
    assert_int_equal(info.main_port, 0);
    assert_true(info.creates_processes_externally);
    assert_int_equal(ops->validate(&info, 3, 0, &err), CT_ECONFLICT);
    assert_int_equal(detect(alone, NULL, &info, &err), 0);
    assert_int_equal(info.world_size, 1);
    assert_true(info.main_port > 0);
    assert_false(info.creates_processes_externally);
    assert_int_equal(ops->validate(&info, 0, 2, &err), CT_ECONFLICT);
}

/* The SLURM job around the processes (what requeue, --ckpt-path auto and the checkpoints' slurm_job_id
 * need) is every environment's answer, whichever launcher started them; not the launcher's job_id. */
static void test_slurm_job_around(void **state)
{
    const char *batch[] = { "SLURM_JOB_ID=777", "SLURM_NTASKS=2", CT_LAUNCHER_ENV_RANK "=1",
                            CT_LAUNCHER_ENV_NPROC "=2", NULL };
    const char *old_name[] = { "SLURM_JOBID=778", NULL };
    const char *torchrun[] = { SLURM_STEP_2x2, "TORCHELASTIC_RUN_ID=r1", "RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1",
                               "LOCAL_WORLD_SIZE=4", "GROUP_RANK=1", "GROUP_WORLD_SIZE=2", "MASTER_ADDR=gpu07",
                               "MASTER_PORT=29500", NULL };
    const char *supervised[] = { SLURM_STEP_2x2, "CTRAIN_SUPERVISED=1", NULL };
    const char *outside[] = { "TORCHELASTIC_RUN_ID=r2", "RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
                              "GROUP_RANK=0", "GROUP_WORLD_SIZE=1", "MASTER_ADDR=h", "MASTER_PORT=29500", NULL };
    ct_env_info info;
    ct_error err;

    (void)state;
    assert_int_equal(detect(batch, NULL, &info, &err), 0);
    assert_string_equal(info.name, "local");
    assert_string_equal(info.slurm_job_id, "777");
    assert_int_equal(info.ctrain_supervised, 0);
    assert_int_equal(detect(old_name, NULL, &info, &err), 0);
    assert_string_equal(info.slurm_job_id, "778");
    assert_int_equal(detect(torchrun, NULL, &info, &err), 0);
    assert_string_equal(info.name, "torchelastic");
    assert_string_equal(info.job_id, "r1");
    assert_string_equal(info.slurm_job_id, "4242");
    assert_int_equal(detect(supervised, NULL, &info, &err), 0);
    assert_string_equal(info.name, "slurm");
    assert_string_equal(info.slurm_job_id, "4242");
    assert_int_equal(info.ctrain_supervised, 1);
    assert_int_equal(detect(outside, NULL, &info, &err), 0);
    assert_string_equal(info.name, "torchelastic");
    assert_string_equal(info.job_id, "r2");
    assert_string_equal(info.slurm_job_id, "");
}

/* What each MPI launcher really sets (Open MPI 4.1's mpirun as captured here; MPICH Hydra in both
 * PMI modes; Cray PALS as SLURM's mpi/cray_shasta plugin sets it; MVAPICH2), in a table: node rank
 * only from the launcher's own answer, never rank / local size against the local rank. */
struct mpi_case {
    const char *what;
    const char *vars[12];
    int rc;                 /* 0 or the error */
    const char *id;         /* error id, or the flavour's rank variable for a success */
    int rank, local_rank, local_size, node_rank, num_nodes;
    const char *mentions;   /* text the message (or the rank's source) contains */
};

static const struct mpi_case mpi_cases[] = {
    { "Open MPI, one node", { "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1",
      "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_COMM_WORLD_NODE_RANK=1", "OMPI_MCA_orte_num_nodes=1",
      "OMPI_MCA_ess_base_jobid=1124270081", NULL }, 0, NULL, 1, 1, 2, 0, 1, "OMPI_COMM_WORLD_RANK" },
    /* --map-by node: rank 1 is local rank 0 on node 1; rank / local size would say node 0. */
    { "Open MPI --map-by node", { "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
      "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_COMM_WORLD_NODE_RANK=0",
      "OMPI_MCA_orte_num_nodes=2", NULL }, CT_ENOTAVAIL, "env-layout-unknown", 0, 0, 0, 0, 0,
      "OMPI_COMM_WORLD_LOCAL_RANK" },
    { "Hydra, one node", { "PMI_RANK=1", "PMI_SIZE=2", "PMI_FD=6", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2", NULL },
      0, NULL, 1, 1, 2, 0, 1, "PMI_RANK" },
    { "Hydra round-robin, two nodes", { "PMI_RANK=1", "PMI_SIZE=4", "PMI_FD=6", "MPI_LOCALRANKID=0",
      "MPI_LOCALNRANKS=2", NULL }, CT_ENOTAVAIL, "env-layout-unknown", 0, 0, 0, 0, 0, "MPI_LOCALRANKID" },
    { "Hydra -pmi-port", { "PMI_PORT=n1:40321", "PMI_ID=1", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2", NULL },
      CT_ENOTAVAIL, "env-layout-unknown", 0, 0, 0, 0, 0, "PMI_SIZE" },
    { "Hydra -pmi-port with PMI_SIZE", { "PMI_PORT=n1:40321", "PMI_ID=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1",
      "MPI_LOCALNRANKS=2", NULL }, 0, NULL, 1, 1, 2, 0, 1, "PMI_ID" },
    { "Cray PALS, 2 x 2", { "PALS_RANKID=3", "PALS_NODEID=1", "PALS_LOCAL_RANKID=1", "PALS_APID=7.0", "PMI_RANK=3",
      "PMI_SIZE=4", "PMI_LOCAL_RANK=1", "PMI_LOCAL_SIZE=2", NULL }, 0, NULL, 3, 1, 2, 1, 2, "PALS_RANKID" },
    /* Round-robin: PALS says the node, so rank 1 is on node 1. */
    { "Cray PALS round-robin", { "PALS_RANKID=1", "PALS_NODEID=1", "PALS_LOCAL_RANKID=0", "PMI_RANK=1", "PMI_SIZE=4",
      "PMI_LOCAL_RANK=0", "PMI_LOCAL_SIZE=2", NULL }, 0, NULL, 1, 0, 2, 1, 2, "PALS_RANKID" },
    { "Cray PALS without a local size", { "PALS_RANKID=1", "PALS_NODEID=0", "PALS_LOCAL_RANKID=1", "PMI_SIZE=2",
      NULL }, CT_EINVAL, "env-variable-missing", 0, 0, 0, 0, 0, "PMI_LOCAL_SIZE" },
    { "MVAPICH2, one node", { "MV2_COMM_WORLD_RANK=1", "MV2_COMM_WORLD_SIZE=2", "MV2_COMM_WORLD_LOCAL_RANK=1",
      "MV2_COMM_WORLD_LOCAL_SIZE=2", NULL }, 0, NULL, 1, 1, 2, 0, 1, "MV2_COMM_WORLD_RANK" },
    { "MVAPICH2, two nodes", { "MV2_COMM_WORLD_RANK=2", "MV2_COMM_WORLD_SIZE=4", "MV2_COMM_WORLD_LOCAL_RANK=1",
      "MV2_COMM_WORLD_LOCAL_SIZE=2", NULL }, CT_ENOTAVAIL, "env-layout-unknown", 0, 0, 0, 0, 0,
      "MV2_COMM_WORLD_RANK" },
    { "MVAPICH2, malformed", { "MV2_COMM_WORLD_RANK=x", "MV2_COMM_WORLD_SIZE=4", "MV2_COMM_WORLD_LOCAL_RANK=1",
      "MV2_COMM_WORLD_LOCAL_SIZE=2", NULL }, CT_EINVAL, "env-variable-malformed", 0, 0, 0, 0, 0, "MVAPICH2" },
};

static void test_mpi_flavours(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(mpi_cases) / sizeof(mpi_cases[0]); i++) {
        const struct mpi_case *c = &mpi_cases[i];
        ct_env_info info;
        ct_error err;
        int rc = detect(c->vars, NULL, &info, &err);

        if (rc != c->rc)
            fail_msg("%s: rc %d, want %d (%s)", c->what, rc, c->rc, err.msg);
        if (rc) {
            if (strcmp(err.id, c->id) || !strstr(err.msg, c->mentions) || !err.hint[0])
                fail_msg("%s: id '%s' msg '%s' hint '%s'", c->what, err.id, err.msg, err.hint);
            continue;
        }
        if (strcmp(info.name, "mpi") || info.global_rank != c->rank || info.local_rank != c->local_rank ||
            info.local_world_size != c->local_size || info.node_rank != c->node_rank ||
            info.num_nodes != c->num_nodes || strcmp(info.source[CT_ENV_GLOBAL_RANK], c->mentions))
            fail_msg("%s: %s rank %d local %d/%d node %d/%d (rank from %s)", c->what, info.name, info.global_rank,
                     info.local_rank, info.local_world_size, info.node_rank, info.num_nodes,
                     info.source[CT_ENV_GLOBAL_RANK]);
    }
    /* srun --mpi=pmi2 sets PMI_RANK/PMI_SIZE too, but no MPI_LOCALRANKID: that is SLURM's step. */
    {
        const char *pmi2[] = { SLURM_STEP_2x2, "PMI_RANK=3", "PMI_SIZE=4", "PMI_FD=5", NULL };
        ct_env_info info;
        ct_error err;

        assert_int_equal(detect(pmi2, NULL, &info, &err), 0);
        assert_string_equal(info.name, "slurm");
    }
}

#define MANUAL_BASE "MASTER_ADDR=1.2.3.4", "MASTER_PORT=500", "WORLD_SIZE=4"

/* Processes started by hand on each node (Lightning's LightningEnvironment and the cases of its
 * tests: NODE_RANK or GROUP_RANK, LOCAL_RANK, MASTER_ADDR/PORT; WORLD_SIZE here as well). */
static void test_manual(void **state)
{
    const char *full[] = { MANUAL_BASE, "LOCAL_WORLD_SIZE=2", "NODE_RANK=1", "LOCAL_RANK=1", NULL };
    const char *group[] = { MANUAL_BASE, "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1", "LOCAL_RANK=0", "RANK=2", NULL };
    const char *both[] = { MANUAL_BASE, "NODE_RANK=1", "GROUP_RANK=0", "LOCAL_RANK=0", NULL };
    const char *same[] = { MANUAL_BASE, "LOCAL_WORLD_SIZE=2", "NODE_RANK=1", "GROUP_RANK=1", "LOCAL_RANK=0", NULL };
    const char *no_port[] = { "MASTER_ADDR=1.2.3.4", "WORLD_SIZE=4", "NODE_RANK=1", "LOCAL_RANK=0", NULL };
    const char *only_local[] = { "LOCAL_RANK=1", NULL };
    const char *flags_decide[] = { MANUAL_BASE, "NODE_RANK=1", "LOCAL_RANK=1", NULL };
    const char *bad_rank[] = { MANUAL_BASE, "LOCAL_WORLD_SIZE=2", "NODE_RANK=1", "LOCAL_RANK=1", "RANK=1", NULL };
    const char *uneven[] = { MANUAL_BASE, "LOCAL_WORLD_SIZE=3", "NODE_RANK=0", "LOCAL_RANK=0", NULL };
    const char *node_out[] = { MANUAL_BASE, "LOCAL_WORLD_SIZE=2", "NODE_RANK=2", "LOCAL_RANK=0", NULL };
    const char *addr_only[] = { "MASTER_ADDR=1.2.3.4", "MASTER_PORT=500", NULL };
    const char *in_step[] = { SLURM_STEP_2x2, "LOCAL_RANK=1", "NODE_RANK=1", NULL };
    const struct ct_env_ops *ops = ct_env_lookup("manual");
    ct_env_info info;
    ct_error err;

    (void)state;
    assert_non_null(ops);
    assert_int_equal(detect(full, NULL, &info, &err), 0);
    assert_string_equal(info.name, "manual");
    assert_true(info.creates_processes_externally);
    assert_int_equal(info.global_rank, 3);
    assert_int_equal(info.node_rank, 1);
    assert_int_equal(info.num_nodes, 2);
    assert_int_equal(info.local_world_size, 2);
    assert_string_equal(info.main_address, "1.2.3.4");
    assert_int_equal(info.main_port, 500);
    assert_int_equal(ops->validate(&info, 0, 0, &err), 0);
    assert_int_equal(ops->validate(&info, 2, 2, &err), 0);
    assert_int_equal(ops->validate(&info, 3, 0, &err), CT_ECONFLICT);
    assert_string_equal(err.id, "env-devices-mismatch");
    assert_int_equal(ops->validate(&info, 0, 3, &err), CT_ECONFLICT);
    assert_string_equal(err.id, "env-num-nodes-mismatch");
    assert_non_null(strstr(err.hint, "NODE_RANK"));

    assert_int_equal(detect(group, NULL, &info, &err), 0);
    assert_int_equal(info.node_rank, 1);
    assert_string_equal(info.source[CT_ENV_NODE_RANK], "GROUP_RANK");
    assert_int_equal(info.global_rank, 2);
    assert_int_equal(detect(same, NULL, &info, &err), 0);
    assert_string_equal(info.source[CT_ENV_NODE_RANK], "NODE_RANK");
    assert_int_equal(detect(both, NULL, &info, &err), CT_EINVAL);
    assert_string_equal(err.id, "env-inconsistent");
    assert_non_null(strstr(err.msg, "GROUP_RANK=0"));

    /* Every variable present: what is missing is named. */
    assert_int_equal(detect(no_port, NULL, &info, &err), CT_EINVAL);
    assert_string_equal(err.id, "env-variable-missing");
    assert_non_null(strstr(err.msg, "not set: MASTER_PORT"));
    assert_int_equal(detect(only_local, NULL, &info, &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "not set: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, NODE_RANK (or GROUP_RANK)"));
    assert_int_equal(detect(only_local, "manual", &info, &err), CT_EINVAL);
    assert_int_equal(detect(addr_only, "manual", &info, &err), CT_ENOTAVAIL);
    assert_string_equal(err.id, "env-absent");
    assert_non_null(strstr(err.hint, "LOCAL_RANK"));

    /* Without LOCAL_WORLD_SIZE the flags say the processes per node. */
    assert_int_equal(detect(flags_decide, NULL, &info, &err), 0);
    assert_int_equal(info.local_world_size, 0);
    assert_int_equal(ct_env_complete(ops, vars_get, (void *)flags_decide, &info, 0, 0, &err), CT_ENOTAVAIL);
    assert_string_equal(err.id, "env-layout-unknown");
    assert_non_null(strstr(err.hint, "--num-nodes"));
    assert_int_equal(ct_env_complete(ops, vars_get, (void *)flags_decide, &info, 0, 2, &err), 0);
    assert_int_equal(info.local_world_size, 2);
    assert_int_equal(info.num_nodes, 2);
    assert_int_equal(info.global_rank, 3);
    assert_int_equal(ops->validate(&info, 2, 2, &err), 0);
    assert_int_equal(detect(flags_decide, NULL, &info, &err), 0);
    assert_int_equal(ct_env_complete(ops, vars_get, (void *)flags_decide, &info, 2, 0, &err), 0);
    assert_int_equal(info.num_nodes, 2);
    assert_int_equal(detect(flags_decide, NULL, &info, &err), 0);
    assert_int_equal(ct_env_complete(ops, vars_get, (void *)flags_decide, &info, 0, 3, &err), CT_ECONFLICT);
    assert_string_equal(err.id, "env-world-size-mismatch");
    /* --devices 4 with WORLD_SIZE 4 is one node, but NODE_RANK=1: outside. */
    assert_int_equal(detect(flags_decide, NULL, &info, &err), 0);
    assert_int_equal(ct_env_complete(ops, vars_get, (void *)flags_decide, &info, 4, 0, &err), CT_EINVAL);
    assert_string_equal(err.id, "env-inconsistent");
    /* a no-op for environments without complete() */
    assert_int_equal(ct_env_complete(ct_env_lookup("slurm"), vars_get, NULL, &info, 2, 2, &err), 0);

    assert_int_equal(detect(bad_rank, NULL, &info, &err), CT_EINVAL);
    assert_string_equal(err.id, "env-inconsistent");
    assert_non_null(strstr(err.msg, "RANK=1"));
    assert_int_equal(detect(uneven, NULL, &info, &err), CT_ECONFLICT);
    assert_string_equal(err.id, "env-world-size-mismatch");
    assert_int_equal(detect(node_out, NULL, &info, &err), CT_EINVAL);
    assert_string_equal(err.id, "env-inconsistent");

    /* MASTER_ADDR/PORT alone are not a hand-started run; a launcher claims its processes first. */
    assert_int_equal(detect(addr_only, NULL, &info, &err), 0);
    assert_string_equal(info.name, "local");
    assert_int_equal(detect(in_step, NULL, &info, &err), 0);
    assert_string_equal(info.name, "slurm");
}

/* What ddp asks once MPI has numbered the ranks: the launcher's RANK / LOCAL_RANK against MPI's,
 * skipped for workers of ctrain's own launchers and where no launcher started the processes; and
 * whether a PMIx server started this process. */
static void test_launcher_ranks(void **state)
{
    const char *const srun[] = { SLURM_STEP_2x2, "RANK=3", "LOCAL_RANK=1", NULL };
    const char *const exported[] = { SLURM_STEP_2x2, "RANK=0", "LOCAL_RANK=1", NULL };
    const char *const local_off[] = { SLURM_STEP_2x2, "RANK=3", "LOCAL_RANK=0", NULL };
    const char *const worker[] = { SLURM_STEP_2x2, "RANK=0", CT_LAUNCHER_ENV_RANK "=1", NULL };
    const char *const pmix[] = { "PMIX_RANK=2", NULL };
    ct_env_info info;
    ct_error err;

    (void)state;
    assert_int_equal(detect(srun, NULL, &info, &err), 0);
    assert_int_equal(ct_env_check_launcher_ranks(vars_get, (void *)srun, &info, 3, 1, "gpu08", "ddp", &err), 0);
    /* MPI's local rank unknown: only RANK is compared. */
    assert_int_equal(ct_env_check_launcher_ranks(vars_get, (void *)local_off, &info, 3, -1, NULL, "ddp", &err), 0);
    assert_int_equal(ct_env_check_launcher_ranks(vars_get, (void *)exported, &info, 3, 1, "gpu08", "ddp", &err),
                     CT_ECONFLICT);
    assert_string_equal(err.id, "ddp-launcher-rank-mismatch");
    assert_string_equal(err.msg, "ddp: RANK=0 (from the launcher: srun --ctrain-strategy, torchrun) but MPI numbers "
                                 "this process rank 3");
    assert_non_null(strstr(err.hint, "srun --mpi=pmix"));
    assert_int_equal(ct_env_check_launcher_ranks(vars_get, (void *)local_off, &info, 3, 1, "gpu08", "ddp", &err),
                     CT_ECONFLICT);
    assert_string_equal(err.msg, "ddp: LOCAL_RANK=0 (from the launcher: srun --ctrain-strategy, torchrun) but MPI "
                                 "places this process 1 of the ranks on gpu08");
    /* A worker of ctrain's own launcher inherits its parent's RANK. */
    assert_int_equal(ct_env_check_launcher_ranks(vars_get, (void *)worker, &info, 3, 1, "gpu08", "ddp", &err), 0);
    /* Nothing started the processes (forked workers, numbered by MPI alone). */
    info.creates_processes_externally = 0;
    assert_int_equal(ct_env_check_launcher_ranks(vars_get, (void *)exported, &info, 3, 1, "gpu08", "ddp", &err), 0);

    assert_true(ct_env_pmix_started(vars_get, (void *)pmix));
    assert_false(ct_env_pmix_started(vars_get, (void *)srun));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slurm_step),   cmocka_unit_test(test_order),
        cmocka_unit_test(test_forced),       cmocka_unit_test(test_port_rule),
        cmocka_unit_test(test_tasks_per_node), cmocka_unit_test(test_validate), cmocka_unit_test(test_slurm_het),
        cmocka_unit_test(test_slurm_het_shared_node),
        cmocka_unit_test(test_malformed_env),
        cmocka_unit_test(test_slurm_no_step_id), cmocka_unit_test(test_local), cmocka_unit_test(test_slurm_job_around),
        cmocka_unit_test(test_lsf_bad_rankfile),
        cmocka_unit_test(test_mpi_flavours), cmocka_unit_test(test_manual),
        cmocka_unit_test(test_registry), cmocka_unit_test(test_launcher_ranks),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
