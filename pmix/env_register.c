/* Registration of the pmix cluster environment with the registry in libctrain-core (envs/),
 * apart from environment.c so that programs using the ops alone need not link the registry. */
#include "ctrain/environment.h"
#include "ctrain/pmix.h"

/* Declared in ctrain/envs.h (branch envs). */
int ct_env_register(const struct ct_env_ops *ops);

int ct_pmix_env_register(void)
{
    return ct_env_register(&ct_env_pmix_ops);
}
