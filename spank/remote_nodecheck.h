/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd, --ctrain-preflight's step side (spank/remote_nodecheck.c). Internal to
 * the plugin. */
#ifndef CTRAIN_SPANK_REMOTE_NODECHECK_H
#define CTRAIN_SPANK_REMOTE_NODECHECK_H

#include "spank/step.h"

/* --ctrain-preflight's checks, the GPUs' as root (init_post_opt), the rest as
 * the user (user_init); the node's line and what a bad node does, from its tasks (task_init):
 * -1 when the task must not run. */
void ct_spank_nodecheck_gather_gpus(struct step *s, char **env);
void ct_spank_nodecheck_gather(struct step *s, char **env);
int ct_spank_nodecheck_report(const struct step *s, int local);

#endif
