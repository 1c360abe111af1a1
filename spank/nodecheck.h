/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the node checks (the option users type is --ctrain-preflight): a node's own
 * checks before the step's tasks start (include/ctrain/nodecheck.h), what the step does with a bad
 * node, and SLURM's side of `exclude`: the job requeued with the bad node in its excluded nodes.
 * "nodecheck" in the code, where "preflight" is the engine's check of the ranks before a fit
 * (ctrain preflight, fit --preflight: engine/health/fit/preflight.c), a different thing. */
#ifndef CTRAIN_SPANK_NODECHECK_H
#define CTRAIN_SPANK_NODECHECK_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/error.h"
#include "ctrain/gres.h"
#include "ctrain/nodecheck.h"

enum ct_spank_nodecheck_mode {
    CT_SPANK_NODECHECK_OFF = 0,
    CT_SPANK_NODECHECK_REPORT,   /* each node's result in the log and on its first task's stderr */
    CT_SPANK_NODECHECK_FAIL,     /* and a bad node ends the step before any program starts */
    CT_SPANK_NODECHECK_EXCLUDE   /* and a batch job that may be requeued is, without the bad node */
};

struct ct_spank_nodecheck {
    enum ct_spank_nodecheck_mode mode;
    char dir[1024];        /* dir=PATH: the run directory to check; "" none */
    uint64_t mem_mb;       /* mem=MIB: the memory floor; 0: the job's own request per node */
};

/* --ctrain-preflight=report|fail|exclude[,dir=PATH][,mem=MIB] into out. */
int ct_spank_nodecheck_parse(const char *value, struct ct_spank_nodecheck *out, ct_error *err);

/* What the node side gathered (spank/remote.c). */
struct ct_spank_nodecheck_node {
    const char *node;
    const char *step_gpus;           /* SLURM_STEP_GPUS: SLURM's numbers; NULL/"" none */
    const ct_gres_files *files;      /* gres.conf's device files for the node; NULL when not read */
    int gpus_mapped;                 /* 1: the topology shows every GPU (the plugin mapped them) */
    const char *hca;                 /* the plan's OpenFabrics device; NULL/"" none */
    const char *ifname;              /* the sockets' interface the plugin chose; NULL/"" none */
    uint64_t job_mem_mb;             /* the job's memory per node (SLURM_MEM_PER_NODE...); 0 unknown */
};

/* The GPU checks, as root in init_post_opt: /proc's fd directories of every user's processes are
 * readable to root only. Into r (cleared first). */
void ct_spank_nodecheck_gpus(const struct ct_spank_nodecheck_node *in, ct_nodecheck_result *r);
/* The other checks, as the job's user in user_init (the run directory is written as the user),
 * added to r (the GPU checks' findings; NULL: every check runs here, the GPUs' too), and the one
 * line for the log and the user ("node n2: ok: ..." or "node n2: GPU 1 (/dev/nvidia1): no such
 * device file; ..."). Returns the number of findings. */
int ct_spank_nodecheck_node(const struct ct_spank_nodecheck *opt, const struct ct_spank_nodecheck_node *in,
                            ct_nodecheck_result *r, char *line, size_t size);

/* exclude: requeue job_id and add node to its excluded nodes (with why in its comment), as the
 * job's user. 0 when the job was requeued without node; else CT_ENOTAVAIL (not a batch job, or one
 * that may not be requeued) or CT_ECOMM (slurmctld refused), with what happened in err. */
int ct_spank_nodecheck_exclude(uint32_t job_id, const char *node, const char *why, ct_error *err);

#endif
