/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — gres.conf for one node, as slurmd lists its GPUs (the cluster environment's knowledge of
 * SLURM; the binding side is include/ctrain/gres.h). */
#ifndef CTRAIN_GRES_CONF_H
#define CTRAIN_GRES_CONF_H

#include "ctrain/error.h"
#include "ctrain/gres.h"

/* Parse gres.conf's text for node: its gpu File= entries in order (brackets expanded as SLURM
 * does: "nvidia[0-3]"), and its AutoDetect. CT_EFORMAT on a File= that does not expand. */
int ct_gres_conf_parse(const char *text, const char *node, ct_gres_files *out, ct_error *err);

#endif
