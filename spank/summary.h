/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the node summary (include/ctrain/bind.h, engine/bind/node_summary.h): slurmd
 * writes it once at its start (slurm_spank_init in slurmd's context, as root), and each step's
 * slurmstepd plans from it without loading hwloc or ctrain-bind.so. Internal to the plugin. */
#ifndef CTRAIN_SPANK_SUMMARY_H
#define CTRAIN_SPANK_SUMMARY_H

#include <stddef.h>

#include "ctrain/bind.h"
#include "ctrain/error.h"
#include "spank/bind.h"

#define CT_SPANK_SUMMARY_DEFAULT "/run/ctrain/node-%h.summary"

/* The path summary= gives (the default when unset), %h replaced by this node's host name; "" for
 * summary=none. */
int ct_spank_summary_path(char *buf, size_t size, ct_error *err);
/* slurmd's start (SPANK's init in S_CTX_SLURMD): the node discovered (with its I/O devices) or topology= loaded, and the summary
 * written, root-owned, 0644, atomically. A failure is logged and the file removed: steps then
 * discover for themselves. */
void ct_spank_summary_write(void);
/* slurmstepd: the node's topology from the summary (its path into path), for a step loading with
 * flags; CT_ENOENT when summary=none or there is none, else an error naming the file and why it
 * does not serve. */
int ct_spank_summary_read(unsigned flags, char *path, size_t size, ct_topology **out, ct_error *err);
/* The planner's functions as linked into ctrain.so (no hwloc): what a step planning on the summary
 * calls instead of ctrain-bind.so's. It cannot load or discover a topology. */
const struct ct_spank_bind_ops *ct_spank_summary_ops(void);

#endif
