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
    const char *pty[] = { SLURM_STEP_2x2, "SLURM_PTY_PORT=40000", NULL };
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

    assert_int_equal(detect(mpirun, NULL, &info, &err), 0);
    assert_string_equal(info.name, "mpi");
    assert_int_equal(info.global_rank, 6);
    assert_int_equal(info.node_rank, 1);

    assert_int_equal(detect(salloc, NULL, &info, &err), 0);
    assert_string_equal(info.name, "local");
    assert_int_equal(ct_env_slurm_context(vars_get, salloc), CT_SLURM_ALLOCATION);
    assert_int_equal(detect(pty, NULL, &info, &err), 0);
    assert_string_equal(info.name, "local");
    assert_int_equal(ct_env_slurm_context(vars_get, pty), CT_SLURM_INTERACTIVE);
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

static const struct ct_env_ops fake_pmix = { "pmix", "test", 1, fake_pmix_detect, fake_pmix_read,
                                             fake_pmix_validate };
static const struct ct_env_ops other_pmix = { "pmix", "test 2", 1, fake_pmix_detect, fake_pmix_read,
                                              fake_pmix_validate };
static const struct ct_env_ops bogus = { "bogus", "test", 1, fake_pmix_detect, fake_pmix_read,
                                         fake_pmix_validate };

static void test_registry(void **state)
{
    const char *vars[] = { SLURM_STEP_2x2, "PMIX_RANK=3", "PMIX_NAMESPACE=slurm.pmix.4242.3", NULL };
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
    assert_int_equal(ct_env_require_equal_tasks(&info, "strategy ddp", &err), CT_ECONFLICT);
    assert_non_null(strstr(err.msg, "strategy ddp"));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slurm_step),   cmocka_unit_test(test_order),
        cmocka_unit_test(test_forced),       cmocka_unit_test(test_port_rule),
        cmocka_unit_test(test_tasks_per_node), cmocka_unit_test(test_validate),
        cmocka_unit_test(test_malformed_env), cmocka_unit_test(test_local),
        cmocka_unit_test(test_lsf_bad_rankfile),
        cmocka_unit_test(test_registry),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
