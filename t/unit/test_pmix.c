/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of pmix/: client presence and errors, the pmix environment's refusals, and the
 * server process's handle (each rank's environment, merge, clean stop). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <mpi.h>

#include "ctrain/pmix.h"
#include "pmix/environment.h"
#include "ctrain/pmix_server.h"

/* A fixture: NULL-terminated NAME, VALUE pairs. */
static const char *fixture_get(const char *name, void *ctx)
{
    const char *const *kv = ctx;

    for (int i = 0; kv[i]; i += 2)
        if (!strcmp(kv[i], name))
            return kv[i + 1];
    return NULL;
}

static void test_present(void **state)
{
    const char *full[] = { "PMIX_RANK", "1", "PMIX_NAMESPACE", "job", "PMIX_SERVER_URI41", "x", NULL };
    const char *old_uri[] = { "PMIX_RANK", "0", "PMIX_NAMESPACE", "job", "PMIX_SERVER_URI2", "x", NULL };
    const char *no_uri[] = { "PMIX_RANK", "1", "PMIX_NAMESPACE", "job", NULL };
    const char *no_rank[] = { "PMIX_NAMESPACE", "job", "PMIX_SERVER_URI4", "x", NULL };

    assert_int_equal(ct_pmix_client_present(fixture_get, full), 1);
    assert_int_equal(ct_pmix_client_present(fixture_get, old_uri), 1);
    assert_int_equal(ct_pmix_client_present(fixture_get, no_uri), 0);
    assert_int_equal(ct_pmix_client_present(fixture_get, no_rank), 0);
    assert_int_equal(ct_env_pmix_ops.detect(fixture_get, full), 1);
    assert_int_equal(ct_env_pmix_ops.detect(fixture_get, no_uri), 0);
}

static void test_no_server(void **state)
{
    ct_pmix_client *c = (ct_pmix_client *)1;
    ct_error err;

    unsetenv("PMIX_RANK");
    unsetenv("PMIX_NAMESPACE");
    ct_error_clear(&err);
    assert_int_equal(ct_pmix_client_init(&c, &err), CT_ENOTAVAIL);
    assert_null(c);
    assert_string_equal(err.id, "pmix-no-server");
    assert_non_null(strstr(err.msg, "no PMIx server"));
    assert_non_null(strstr(err.hint, "srun --mpi=pmix"));
}

static void test_env_foreign(void **state)
{
    const char *fx[] = { "PMIX_RANK", "3", "PMIX_NAMESPACE", "other", "PMIX_SERVER_URI41", "x", NULL };
    ct_env_info info;
    ct_error err;

    memset(&info, 0, sizeof(info));
    unsetenv("PMIX_RANK");
    ct_error_clear(&err);
    assert_int_equal(ct_env_pmix_ops.read(fixture_get, fx, &info, &err), CT_ENOTAVAIL);
    assert_string_equal(err.id, "env-pmix-foreign");
    assert_non_null(strstr(err.msg, "PMIX_RANK='3'"));
}

static void test_env_validate(void **state)
{
    ct_env_info info;
    ct_error err;

    memset(&info, 0, sizeof(info));
    strcpy(info.name, "pmix");
    info.local_world_size = 2;
    info.num_nodes = 1;
    info.equal_tasks_per_node = 1;
    strcpy(info.source[CT_ENV_LOCAL_WORLD_SIZE], "PMIx: PMIX_LOCAL_SIZE");
    ct_error_clear(&err);
    assert_int_equal(ct_env_pmix_ops.validate(&info, 2, 1, &err), 0);
    assert_int_equal(ct_env_pmix_ops.validate(&info, 0, 0, &err), 0);
    assert_int_equal(ct_env_pmix_ops.validate(&info, 4, 0, &err), CT_ECONFLICT);
    assert_string_equal(err.id, "env-devices-mismatch");
    assert_non_null(strstr(err.msg, "--devices 4"));
    assert_non_null(strstr(err.msg, "PMIX_LOCAL_SIZE"));
    assert_non_null(strstr(err.hint, "mpirun -npernode 4"));
    assert_int_equal(ct_env_pmix_ops.validate(&info, 0, 2, &err), CT_ECONFLICT);
    assert_string_equal(err.id, "env-num-nodes-mismatch");
    assert_non_null(strstr(err.msg, "--num-nodes 2"));
    assert_true(err.hint[0] != '\0');
    /* The checks every environment shares (ct_env_validate_common): nodes running different
     * numbers of processes cannot take one --devices. */
    info.equal_tasks_per_node = 0;
    assert_int_equal(ct_env_pmix_ops.validate(&info, 2, 0, &err), CT_ECONFLICT);
    assert_string_equal(err.id, "env-unequal-tasks");
}

static const char *env_value(char *const *env, const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], name, n) && env[i][n] == '=')
            return env[i] + n + 1;
    return NULL;
}

static void test_server(void **state)
{
    ct_pmix_server *s = NULL;
    ct_error err;
    char *const *env;
    char *old[] = { "PMIX_RANK=99", "KEEP=1", NULL };
    char **merged;
    char tmpdir[4096], shmdir[4096] = "", nspace[64];
    struct stat st;
    pid_t pid;

    ct_error_clear(&err);
    assert_int_equal(ct_pmix_server_start(0, &s, &err), CT_EINVAL);
    assert_int_equal(ct_pmix_server_start(2, &s, &err), 0);
    assert_non_null(s);
    snprintf(nspace, sizeof(nspace), "ctrain.%ld.", (long)getpid());
    assert_true(!strncmp(ct_pmix_server_nspace(s), nspace, strlen(nspace)));
    snprintf(nspace, sizeof(nspace), "%s", ct_pmix_server_nspace(s));
    env = ct_pmix_server_rank_env(s, 1);
    assert_string_equal(env_value(env, "PMIX_RANK"), "1");
    assert_string_equal(env_value(env, "PMIX_NAMESPACE"), nspace);
    assert_non_null(env_value(env, "PMIX_SERVER_URI41"));
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
    /* Open MPI 5 (PRRTE) has no ess or schizo framework in a rank: ORTE's variables stay out. */
    assert_null(env_value(env, "OMPI_MCA_ess"));
    assert_null(env_value(env, "OMPI_MCA_schizo"));
    assert_null(env_value(env, "OMPI_MCA_orte_tmpdir_base"));
#else
    assert_string_equal(env_value(env, "OMPI_MCA_ess"), "pmi");
    assert_string_equal(env_value(env, "OMPI_MCA_schizo"), "^orte");
#endif
    assert_null(ct_pmix_server_rank_env(s, 2));
    merged = ct_pmix_server_env_merge(s, 0, old);
    assert_non_null(merged);
    assert_string_equal(env_value(merged, "PMIX_RANK"), "0");
    assert_string_equal(env_value(merged, "KEEP"), "1");
    ct_pmix_server_env_free(merged);
    snprintf(tmpdir, sizeof(tmpdir), "%s", env_value(env, "PMIX_SERVER_TMPDIR"));
    assert_int_equal(stat(tmpdir, &st), 0);
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
    if (env_value(env, "OMPI_MCA_btl_sm_backing_directory"))
        snprintf(shmdir, sizeof(shmdir), "%s", env_value(env, "OMPI_MCA_btl_sm_backing_directory"));
#else
    if (!getenv("OMPI_MCA_orte_tmpdir_base"))
        assert_string_equal(env_value(env, "OMPI_MCA_orte_tmpdir_base"), tmpdir);
    if (env_value(env, "OMPI_MCA_btl_vader_backing_directory"))
        snprintf(shmdir, sizeof(shmdir), "%s", env_value(env, "OMPI_MCA_btl_vader_backing_directory"));
#endif
    pid = ct_pmix_server_pid(s);
    assert_true(pid > 0 && kill(pid, 0) == 0);
    ct_pmix_server_stop(s);
    assert_int_not_equal(stat(tmpdir, &st), 0);   /* its directories are removed */
    if (shmdir[0])
        assert_int_not_equal(stat(shmdir, &st), 0);
    assert_int_not_equal(kill(pid, 0), 0);         /* and the process reaped */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_present),
        cmocka_unit_test(test_no_server),
        cmocka_unit_test(test_env_foreign),
        cmocka_unit_test(test_env_validate),
        cmocka_unit_test(test_server),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
