/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the topology's model without hwloc (engine/bind/topology_model.h): read from and written to
 * the node summary, and what the SPANK plugin asks of it in slurmstepd. */
#include <stdlib.h>

#include "ctrain/bind.h"
#include "engine/bind/cpuset.h"
#include "engine/bind/topology_model.h"

int ct_topology_summary_read(const char *path, unsigned flags, const char *version, const char *source,
                             ct_topology **out, ct_error *err)
{
    ct_topology *t = calloc(1, sizeof(*t));
    int rv;

    *out = NULL;
    if (!t)
        return ct_error_set(err, CT_ENOMEM, "out-of-memory", "reading the node summary %s: out of memory", path);
    if ((rv = ct_node_summary_read(path, flags, version, source, &t->model, err)) != 0) {
        free(t);
        return rv;
    }
    /* A step without CT_TOPOLOGY_IO plans as hwloc's discovery without I/O would: no devices. */
    t->flags = flags;
    t->ngpus = flags & CT_TOPOLOGY_IO ? t->model.head->ngpus : 0;
    t->nnics = flags & CT_TOPOLOGY_IO ? t->model.head->nnics : 0;
    *out = t;
    return 0;
}

int ct_topology_summary_write(ct_topology *topo, const char *version, const char *path, ct_error *err)
{
    return ct_node_summary_write(&topo->model, version, path, err);
}

int ct_topology_allows(const ct_topology *topo, const char *cpus)
{
    unsigned nw = topo->model.head->nwords;
    uint64_t *want = ct_cpuset_alloc(nw);
    int past = 0, in = want && ct_cpuset_parse_list(want, nw, cpus, &past) > 0 && !past &&
                       ct_cpuset_included(want, ct_topology_set(topo, 0), nw);

    free(want);
    return in;
}

void ct_topology_free(ct_topology *topo)
{
    if (!topo)
        return;
    if (topo->hw && topo->hw_free)
        topo->hw_free(topo->hw);
    ct_node_summary_free(&topo->model);
    free(topo);
}

int ct_topology_gpu_count(const ct_topology *topo)
{
    return topo->ngpus;
}
