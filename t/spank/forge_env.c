/* SPDX-License-Identifier: BSD-3-Clause */
/* forge_env.so — a test SPANK plugin standing in for a modified srun (t/48): listed before ctrain.so
 * in the test cluster's plugstack.conf, its slurmstepd init_post_opt rewrites the job's environment
 * as such an srun would send it, from the job's own CT_TEST_FORGE="NAME=VALUE NAME=VALUE ..."
 * (srun passes that variable through), before ctrain.so reads the environment as root. With
 * CT_TEST_HOLD="NODE SECONDS", the slurmstepd of node NODE waits SECONDS there first: a component
 * of a heterogeneous step that starts late. Never installed: the tests build it (make tests) and
 * name it in their own plugstack.conf. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(ctrain_test_forge_env, 1);

static void hold(spank_t sp)
{
    char v[256], node[128], host[128];
    double secs = 0;

    if (spank_getenv(sp, "CT_TEST_HOLD", v, sizeof(v)) != ESPANK_SUCCESS ||
        sscanf(v, "%127s %lf", node, &secs) != 2 || gethostname(host, sizeof(host)) != 0)
        return;
    host[sizeof(host) - 1] = '\0';
    if (strcmp(host, node) == 0 && secs > 0 && secs < 60)
        usleep((useconds_t)(secs * 1e6));
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    char forge[4096], *save = NULL;

    (void)ac;
    (void)av;
    if (!spank_remote(sp))
        return 0;
    hold(sp);
    if (spank_getenv(sp, "CT_TEST_FORGE", forge, sizeof(forge)) != ESPANK_SUCCESS)
        return 0;
    for (char *kv = strtok_r(forge, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(kv, '=');

        if (!eq)
            continue;
        *eq = '\0';
        if (spank_setenv(sp, kv, eq + 1, 1) != ESPANK_SUCCESS)
            slurm_error("forge_env: setting %s failed", kv);
    }
    return 0;
}
