/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal to envs/: the built-in environments and the helpers they share (envs/common.c). */
#ifndef CTRAIN_ENVS_IMPL_H
#define CTRAIN_ENVS_IMPL_H

#include "ctrain/environment.h"
#include "ctrain/error.h"
#include "engine/util/rankvars.h"

/* The built-in environments, ct_env_NAME_ops in envs/NAME.c, are gathered by detect.c from the
 * Makefile's list (components.gen.h); local, the fallback of detection, is named there too. */
extern const struct ct_env_ops ct_env_local_ops;

/* 1 when name is set to a non-empty value. */
int ct_envvar_has(ct_getenv_fn get, void *ctx, const char *name);

/* The value of the first of names[] that is set (NULL-terminated list); *which = its name. */
const char *ct_envvar_first(ct_getenv_fn get, void *ctx, const char *const *names, const char **which);

/* Parse variable name as an integer in [min, max]. Absent or malformed: CT_EINVAL naming it. */
int ct_envvar_int(ct_getenv_fn get, void *ctx, const char *name, long min, long max, int *out, ct_error *err);

/* Start an info: name set, every number 0 except world/local sizes and num_nodes 1, sources "". */
void ct_env_info_init(ct_env_info *info, const char *name, int external);

/* Record which variable(s) decided a field. */
void ct_env_source(ct_env_info *info, enum ct_env_field f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The sources of the four process fields, world_size, global_rank, local_rank and local_world_size,
 * as most environments read them: each from one variable (or one rule). */
void ct_env_source_ranks(ct_env_info *info, const char *world_size, const char *global_rank, const char *local_rank,
                         const char *local_world_size);

/* MASTER_ADDR / MASTER_PORT when set (they override every derived value). Return 1 when used,
 * 0 when absent, or CT_EINVAL for a malformed port. */
int ct_env_master_addr(ct_getenv_fn get, void *ctx, ct_env_info *info);
int ct_env_master_port(ct_getenv_fn get, void *ctx, ct_env_info *info, ct_error *err);

/* Set main_port with the job/step rule unless MASTER_PORT is set. */
int ct_env_port_rule(ct_getenv_fn get, void *ctx, ct_env_info *info, const char *job_id, unsigned long step_id,
                     const char *step_source, ct_error *err);

/* Cross-check of the numbers every environment fills: ranks inside sizes. */
int ct_env_check_ranges(const ct_env_info *info, ct_error *err);

/* The checks validate() shares: --devices against local_world_size (hint names how to start
 * more processes with this launcher), --num-nodes against num_nodes. */
int ct_env_validate_common(const ct_env_info *info, int devices, int num_nodes, const char *devices_hint,
                           const char *nodes_hint, ct_error *err);

/* The names include/ctrain/launcher.h defines as CT_LAUNCHER_ENV_RANK / _NPROC; envs/ may not
 * include the launchers' header (same layer, t/90-layering.t). t/unit/test_envs.c includes both:
 * a redefinition with another value does not compile (-Werror). Read by local (envs/local.c) and
 * pmix (pmix/environment.c). */
#define CT_LAUNCHER_ENV_RANK  "CTRAIN_LAUNCHER_RANK"
#define CT_LAUNCHER_ENV_NPROC "CTRAIN_LAUNCHER_NPROCS"

#endif
