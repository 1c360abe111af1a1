/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the "pmix" cluster environment (pmix/environment.c), an environment of envs/ that
 * lives beside the PMIx client it uses, in libctrain (libctrain-core must not link libpmix).
 *
 * Detected from PMIX_RANK/PMIX_NAMESPACE/PMIX_SERVER_URI*; reads the layout from the server
 * through the shared client (ct_pmix_client_shared). Standalone (ranks of ctrain's launchers,
 * prun) it fills every field; called to enrich slurm, lsf or mpi (info->name is theirs, see
 * ctrain/envs.h) it overwrites only what the server knows exactly: ranks, sizes, node rank and
 * count, rank 0's host.
 */
#ifndef CTRAIN_PMIX_ENVIRONMENT_H
#define CTRAIN_PMIX_ENVIRONMENT_H

#include "ctrain/environment.h"

extern const struct ct_env_ops ct_env_pmix_ops;

/* Register ct_env_pmix_ops with the registry (ct_env_register); libctrain calls it at start-up.
 * Returns ct_env_register's code (0, or CT_ECONFLICT if another "pmix" is registered). */
int ct_pmix_env_register(void);

#endif
