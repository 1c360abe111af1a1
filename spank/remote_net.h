/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd, the network variables (spank/remote_net.c). Internal to
 * the plugin. */
#ifndef CTRAIN_SPANK_REMOTE_NET_H
#define CTRAIN_SPANK_REMOTE_NET_H

#include "spank/step.h"

/* This node's own addresses (init_post_opt, as root), and the task's network
 * variables (include/ctrain/net.h). */
void ct_spank_step_addresses(struct step *s, char **env);
void ct_spank_network_choose(const struct step *s, const ct_bind_task *t, ct_net_vars *v);
int ct_spank_network_apply(spank_t sp, const struct step *s, const ct_bind_task *t, uint32_t rank);

#endif
