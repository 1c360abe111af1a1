/* SPDX-License-Identifier: BSD-3-Clause */
/* forge_env.so — a test SPANK plugin standing in for a modified srun (t/48): listed before ctrain.so
 * in the test cluster's plugstack.conf, its slurmstepd init_post_opt rewrites the job's environment
 * as such an srun would send it, from the job's own CT_TEST_FORGE="NAME=VALUE NAME=VALUE ..."
 * (srun passes that variable through), before ctrain.so reads the environment as root. Never
 * installed: the tests build it (make tests) and name it in their own plugstack.conf. */
#include <stdio.h>
#include <string.h>

#include <slurm/spank.h>

SPANK_PLUGIN(ctrain_test_forge_env, 1);

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    char forge[4096], *save = NULL;

    (void)ac;
    (void)av;
    if (!spank_remote(sp) || spank_getenv(sp, "CT_TEST_FORGE", forge, sizeof(forge)) != ESPANK_SUCCESS)
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
