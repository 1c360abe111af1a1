/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd, the binding (spank/remote_bind.c). Internal to the plugin. */
#ifndef CTRAIN_SPANK_REMOTE_BIND_H
#define CTRAIN_SPANK_REMOTE_BIND_H

#include "spank/step.h"

/* The node's topology discovered in a thread from init_post_opt (as root) to
 * user_init; the plan (user_init, as the user); the task's binding and variables (task_init). */
void ct_spank_discovery_start(struct step *s, char **env);
void ct_spank_discovery_join(struct step *s);
int ct_spank_binding_plan(spank_t sp, struct step *s, char **env, ct_error *err);
int ct_spank_binding_apply(spank_t sp, const struct step *s, int local, uint32_t rank, int local_gpus,
                           const char *task_gpus);

#endif
