/* Registration of the pmix cluster environment with the registry in libctrain-core (envs/),
 * apart from environment.c so that programs using the ops alone need not link the registry. */
#include "ctrain/envs.h"
#include "ctrain/pmix.h"

int ct_pmix_env_register(void)
{
    return ct_env_register(&ct_env_pmix_ops);
}
