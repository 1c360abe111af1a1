/* SPDX-License-Identifier: BSD-3-Clause */
/* The binding planner; the rules are in include/ctrain/bind.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ctrain/bind.h"
#include "ctrain/error.h"
#include "ctrain/util.h"
#include "engine/bind/cpuset.h"
#include "engine/bind/topology_model.h"

#define CT_BIND_MAX_GROUPS 256

struct ct_bind_plan {
    int ntasks;
    ct_bind_task *tasks;
    char ib_hca[512];
    int nic_use[CT_TOPO_MAX_DEVS]; /* tasks given each NIC so far */
};

/* A group of neighbouring domains (NUMA nodes or packages) that a set of tasks shares. */
struct group {
    char label[96];
    unsigned nw;                 /* words of its CPU sets: the node model's */
    uint64_t *cpuset;            /* allowed PUs of the group */
    uint64_t **units;            /* allowed PUs of each core, in logical order */
    int nunits;
    int gpus[CT_TOPO_MAX_DEVS];  /* indexes into topo->gpus, PCI order */
    int ngpus;
    int weight;
    int ntasks;
    int top;                     /* the package (or NUMA node, when packages are finer) it lies in */
};

static void group_free(struct group *g)
{
    free(g->cpuset);
    for (int i = 0; i < g->nunits; i++)
        free(g->units[i]);
    free(g->units);
}

/* Append a core's PUs to the group; the array grows as needed. */
static void group_push_unit(struct group *g, uint64_t *unit)
{
    uint64_t **grown = realloc(g->units, sizeof(*grown) * (size_t)(g->nunits + 1));

    if (!grown) {
        free(unit);
        return;
    }
    g->units = grown;
    g->units[g->nunits++] = unit;
}

/* The levels of the node model the planner groups by. */
enum level { LEVEL_MACHINE, LEVEL_NUMA, LEVEL_PACKAGE };

static unsigned words(const ct_topology *t)
{
    return t->model.head->nwords;
}

static int level_count(const ct_topology *t, enum level l)
{
    const struct ct_node_summary_head *h = t->model.head;

    return l == LEVEL_NUMA ? h->nnuma : l == LEVEL_PACKAGE ? h->npackages : 1;
}

/* Object i's CPUs (the machine's: every allowed PU) and OS index. */
static const uint64_t *level_set(const ct_topology *t, enum level l, int i)
{
    const struct ct_node_summary_head *h = t->model.head;

    return ct_topology_set(t, l == LEVEL_NUMA ? 1 + i : l == LEVEL_PACKAGE ? 1 + h->nnuma + i : 0);
}

static unsigned level_os_index(const ct_topology *t, enum level l, int i)
{
    return l == LEVEL_NUMA ? t->model.os_index[i] : l == LEVEL_PACKAGE ? t->model.os_index[t->model.head->nnuma + i] : 0;
}

/* Domains: the level of NUMA nodes or packages with more objects (the finer one). */
static enum level domain_type(const ct_topology *t)
{
    int numa = t->model.head->nnuma, pkg = t->model.head->npackages;

    if (numa <= 0 && pkg <= 0)
        return LEVEL_MACHINE;
    return pkg > numa ? LEVEL_PACKAGE : LEVEL_NUMA;
}

static const char *domain_name(enum level l)
{
    return l == LEVEL_PACKAGE ? "package" : l == LEVEL_NUMA ? "NUMA" : "machine";
}

/* The allowed PUs of each core of cs (or of each PU when the topology has no cores). */
static void group_add_units(const ct_topology *t, struct group *g, const uint64_t *cs)
{
    const struct ct_node_summary_head *h = t->model.head;
    unsigned nw = words(t);

    for (int i = 0; i < h->nunits; i++) {
        const uint64_t *core = ct_topology_set(t, 1 + h->nnuma + h->npackages + i);
        uint64_t *unit;

        if (!ct_cpuset_intersects(core, cs, nw) || !(unit = ct_cpuset_alloc(nw)))
            continue;
        ct_cpuset_and(unit, core, cs, nw);
        group_push_unit(g, unit);
    }
}

/* Parse the allocated GPU list into sel[]; see ct_bind_request.gpus. */
static int parse_gpus(const ct_topology *t, const char *list, int *sel, int *nsel, ct_error *err)
{
    char buf[4096], *save = NULL, *tok;

    *nsel = 0;
    memset(sel, 0, sizeof(int) * CT_TOPO_MAX_DEVS);
    if (!list) {
        for (int i = 0; i < t->ngpus; i++)
            sel[i] = 1;
        *nsel = t->ngpus;
        return 0;
    }
    if (ct_str_copy(buf, sizeof(buf), list) != 0)
        return ct_error_set(err, CT_EINVAL, "bind-gpus", "GPU list is longer than %zu characters", sizeof(buf) - 1);
    if (!buf[0])
        return 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long idx = -1;
        int found = -1;

        if (ct_parse_long(tok, 0, t->ngpus - 1, &idx) == 0)
            found = (int)idx;
        for (int i = 0; found < 0 && i < t->ngpus; i++)
            if (!strcmp(tok, t->model.gpus[i].name) ||
                (t->model.gpus[i].uuid[0] && !strcmp(tok, t->model.gpus[i].uuid)))
                found = i;
        if (found < 0) {
            ct_error_set(err, CT_EINVAL, "bind-gpu-unknown", "GPU '%s' in the allocated GPU list '%s' is not on this node",
                         tok, list);
            if (t->ngpus)
                return ct_error_hint(err, "this node has %d GPUs: indexes 0-%d in PCI bus order, or names %s..%s",
                                     t->ngpus, t->ngpus - 1, t->model.gpus[0].name, t->model.gpus[t->ngpus - 1].name);
            return ct_error_hint(err, "this node has no GPU; give an empty list");
        }
        if (!sel[found])
            (*nsel)++;
        sel[found] = 1;
    }
    return 0;
}

static int parse_allowed(const ct_topology *t, const char *list, uint64_t *allowed, ct_error *err)
{
    unsigned nw = words(t);

    ct_cpuset_copy(allowed, ct_topology_set(t, 0), nw);
    if (list) {
        uint64_t *want = ct_cpuset_alloc(nw);
        int past = 0, bad = !want || ct_cpuset_parse_list(want, nw, list, &past) <= 0;

        if (want)
            ct_cpuset_and(allowed, allowed, want, nw);
        free(want);
        if (bad) {
            ct_error_set(err, CT_EINVAL, "bind-cpus", "allowed CPU list '%s' does not parse", list);
            return ct_error_hint(err, "write OS CPU indexes as a list, e.g. 0-7,16-23");
        }
    }
    if (ct_cpuset_iszero(allowed, nw)) {
        ct_error_set(err, CT_EINVAL, "bind-cpus", "allowed CPU list '%s' has no CPU of this topology",
                     list ? list : "(all)");
        return ct_error_hint(err, "list OS indexes of PUs the topology has (hwloc-calc --input FILE -I pu all)");
    }
    return 0;
}

static void sort_ints(int *a, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && a[j - 1] > a[j]; j--) {
            int x = a[j];
            a[j] = a[j - 1];
            a[j - 1] = x;
        }
}

/* The level above the domains: packages above NUMA nodes, NUMA nodes above finer packages. */
static int top_of(const ct_topology *t, enum level dt, const uint64_t *cs)
{
    enum level tt = dt == LEVEL_NUMA ? LEVEL_PACKAGE : LEVEL_NUMA;
    int n = dt == LEVEL_MACHINE ? 0 : level_count(t, tt);

    for (int i = 0; i < n; i++)
        if (ct_cpuset_intersects(level_set(t, tt, i), cs, words(t)))
            return i;
    return 0;
}

/* One group per domain with allowed PUs. NUMA nodes over the same CPUs (KNL's MCDRAM beside its
 * DDR, CXL or HBM memory) are one domain: their CPUs are shared, not two tasks' worth. */
static int make_domains(const ct_topology *t, const uint64_t *allowed, struct group *g, int max)
{
    enum level dt = domain_type(t);
    int n = level_count(t, dt), nd = 0;
    unsigned nw = words(t);

    for (int i = 0; i < n; i++) {
        const uint64_t *o = level_set(t, dt, i);
        int same = -1;

        if (!ct_cpuset_intersects(o, allowed, nw))
            continue;
        for (int d = 0; d < nd && same < 0; d++)
            if (ct_cpuset_intersects(o, g[d].cpuset, nw))
                same = d;
        if (same >= 0) {
            size_t len = strlen(g[same].label);

            for (unsigned w = 0; w < nw; w++)
                g[same].cpuset[w] |= o[w] & allowed[w];
            snprintf(g[same].label + len, sizeof(g[same].label) - len, "+%u", level_os_index(t, dt, i));
            continue;
        }
        if (nd == max)
            break;
        memset(&g[nd], 0, sizeof(g[nd]));
        g[nd].nw = nw;
        if (!(g[nd].cpuset = ct_cpuset_alloc(nw)))
            break; /* out of memory: the caller finds fewer domains, or none */
        ct_cpuset_and(g[nd].cpuset, o, allowed, nw);
        snprintf(g[nd].label, sizeof(g[nd].label), "%s %u", domain_name(dt), level_os_index(t, dt, i));
        nd++;
    }
    for (int d = 0; d < nd; d++) {
        group_add_units(t, &g[d], g[d].cpuset);
        g[d].top = top_of(t, dt, g[d].cpuset);
    }
    return nd;
}

/* The allocated GPUs into the domains. A GPU local to one domain goes there; one whose locality
 * spans several (attached to the machine, as on HPE's EX235a) is spread over the domains in PCI
 * order. One near no allowed CPU (a restricted CPU set) is handed out only when the local ones are
 * fewer than the tasks: then round robin. Returns how many were left out. */
static int place_gpus(const ct_topology *t, const int *sel, int ntasks, struct group *g, int nd)
{
    int where[CT_TOPO_MAX_DEVS], spread[CT_TOPO_MAX_DEVS], remote[CT_TOPO_MAX_DEVS];
    int nspread = 0, nremote = 0, nlocal = 0;

    for (int k = 0; k < t->ngpus && nd > 0; k++) {
        int hits = 0;

        where[k] = -1;
        if (!sel[k])
            continue;
        for (int d = 0; d < nd; d++)
            if (ct_cpuset_intersects(ct_topology_set(t, t->model.gpus[k].locality), g[d].cpuset, g[d].nw)) {
                if (!hits)
                    where[k] = d;
                hits++;
            }
        if (hits == 1) {
            g[where[k]].gpus[g[where[k]].ngpus++] = k;
            nlocal++;
        } else if (hits > 1) {
            spread[nspread++] = k;
        } else {
            remote[nremote++] = k;
        }
    }
    for (int i = 0; i < nspread; i++) {
        int d = i * nd / nspread;
        g[d].gpus[g[d].ngpus++] = spread[i];
    }
    if (nlocal + nspread >= ntasks && nlocal + nspread > 0)
        return nremote;
    for (int i = 0; i < nremote; i++)
        g[i % nd].gpus[g[i % nd].ngpus++] = remote[i];
    for (int d = 0; d < nd; d++)
        sort_ints(g[d].gpus, g[d].ngpus);
    return 0;
}

/* Fewer tasks than domains: merge neighbours into at most ntasks groups of about equal weight. */
static int merge_domains(struct group *d, int nd, int ntasks, struct group *out)
{
    int total = 0, cum = 0, ng = 0, last = -1;

    for (int i = 0; i < nd; i++)
        total += d[i].weight;
    for (int i = 0; i < nd; i++) {
        /* The group a domain's middle falls in; 2x to keep integers. */
        int gi = total ? (int)(((long)2 * cum + d[i].weight) * ntasks / (2L * total)) : i * ntasks / nd;
        struct group *g;

        if (gi >= ntasks)
            gi = ntasks - 1;
        cum += d[i].weight;
        if (gi != last) {
            g = &out[ng++];
            *g = d[i];
            last = gi;
            continue;
        }
        g = &out[ng - 1];
        ct_cpuset_or(g->cpuset, g->cpuset, d[i].cpuset, g->nw);
        free(d[i].cpuset);
        for (int u = 0; u < d[i].nunits; u++)
            group_push_unit(g, d[i].units[u]);
        free(d[i].units);
        for (int k = 0; k < d[i].ngpus; k++)
            g->gpus[g->ngpus++] = d[i].gpus[k];
        sort_ints(g->gpus, g->ngpus);
        g->weight += d[i].weight;
        /* "NUMA 0+1", or "package 1..7" (first..last) when more merge. */
        char *plus = strchr(g->label, '+'), *dots = strstr(g->label, "..");
        char *end = dots ? dots : plus ? plus : g->label + strlen(g->label);
        snprintf(end, sizeof(g->label) - (size_t)(end - g->label), "%s%s", plus || dots ? ".." : "+",
                 strrchr(d[i].label, ' ') + 1);
    }
    return ng;
}

/* ntasks in proportion to the weights: largest remainder, ties to the lower index. */
static void spread(const long *weight, int n, int ntasks, int *out)
{
    long total = 0, rem[CT_BIND_MAX_GROUPS];
    int given = 0;

    for (int i = 0; i < n; i++)
        total += weight[i];
    for (int i = 0; i < n; i++) {
        out[i] = total ? (int)((long)ntasks * weight[i] / total) : 0;
        rem[i] = total ? (long)ntasks * weight[i] % total : 0;
        given += out[i];
    }
    while (given < ntasks && n > 0) {
        int best = 0;

        for (int i = 1; i < n; i++)
            if (rem[i] > rem[best])
                best = i;
        out[best]++;
        rem[best] = -1;
        given++;
    }
}

static void spread_tasks(struct group *g, int ng, int ntasks)
{
    long w[CT_BIND_MAX_GROUPS] = { 0 };
    int k[CT_BIND_MAX_GROUPS];

    for (int i = 0; i < ng; i++)
        w[i] = g[i].weight;
    spread(w, ng, ntasks, k);
    for (int i = 0; i < ng; i++)
        g[i].ntasks = k[i];
}

/* Packages first, then the domains inside each: tasks go to packages in proportion to their
 * weight, then inside a package to its domains, merged when the package has fewer tasks than
 * domains. A group so never straddles a package unless there are fewer tasks than packages. */
static int assign_groups(struct group *dom, int nd, int ntasks, struct group *out)
{
    int tops[CT_BIND_MAX_GROUPS], ntops = 0, per_top[CT_BIND_MAX_GROUPS], ng = 0;
    long w[CT_BIND_MAX_GROUPS] = { 0 };
    struct group *tmp = calloc(CT_BIND_MAX_GROUPS, sizeof(*tmp)), *whole = NULL;

    if (!tmp)
        return -1;
    for (int d = 0; d < nd; d++) {
        int seen = 0;

        for (int i = 0; i < ntops; i++)
            seen |= tops[i] == dom[d].top;
        if (!seen)
            tops[ntops++] = dom[d].top;
    }
    for (int i = 0; i < ntops; i++) {
        w[i] = 0;
        for (int d = 0; d < nd; d++)
            w[i] += dom[d].top == tops[i] ? dom[d].weight : 0;
    }
    if (ntasks < ntops && (whole = calloc(CT_BIND_MAX_GROUPS, sizeof(*whole)))) {
        /* Fewer tasks than packages: whole packages merge. */
        int nw = 0;

        for (int i = 0; i < ntops; i++) {
            int n = 0;

            for (int d = 0; d < nd; d++)
                if (dom[d].top == tops[i])
                    tmp[n++] = dom[d];
            nw += merge_domains(tmp, n, 1, &whole[nw]);
        }
        ng = merge_domains(whole, nw, ntasks, out);
        spread_tasks(out, ng, ntasks);
        free(whole);
        free(tmp);
        return ng;
    }
    spread(w, ntops, ntasks, per_top);
    for (int i = 0; i < ntops; i++) {
        int n = 0, k = per_top[i], made;

        for (int d = 0; d < nd; d++)
            if (dom[d].top == tops[i])
                tmp[n++] = dom[d];
        if (k == 0) {
            for (int d = 0; d < n; d++)
                out[ng++] = tmp[d]; /* kept for freeing; no task there */
            continue;
        }
        if (k < n) {
            made = merge_domains(tmp, n, k, &out[ng]);
        } else {
            memcpy(&out[ng], tmp, sizeof(tmp[0]) * (size_t)n);
            made = n;
        }
        spread_tasks(&out[ng], made, k);
        ng += made;
    }
    free(tmp);
    return ng;
}

static void task_set_cpus(ct_bind_task *task, const uint64_t *cs, unsigned nw)
{
    int n = ct_cpuset_weight(cs, nw), i = 0;

    task->cpus = calloc((size_t)(n > 0 ? n : 1), sizeof(int));
    task->ncpus = 0;
    if (!task->cpus)
        return; /* no CPU: the plugin refuses to apply an empty binding */
    for (int id = ct_cpuset_next(cs, nw, -1); id >= 0; id = ct_cpuset_next(cs, nw, id))
        task->cpus[i++] = id;
    task->ncpus = i;
}

#define APPEND(task, ...) snprintf((task)->reason + strlen((task)->reason), \
                                   sizeof((task)->reason) - strlen((task)->reason), __VA_ARGS__)

/* Cores of the group for task j of k: whole cores, else hardware threads, else shared PUs. */
static void assign_cpus(const struct group *g, int j, int k, int cpus_per_task, ct_bind_task *task)
{
    unsigned nw = g->nw;
    uint64_t *cs = ct_cpuset_alloc(nw);
    int npus = ct_cpuset_weight(g->cpuset, nw);

    if (!cs)
        return; /* no CPU: the plugin refuses to apply an empty binding */
    if (k <= g->nunits) {
        int lo = j * g->nunits / k, hi = (j + 1) * g->nunits / k;

        for (int u = lo; u < hi; u++)
            ct_cpuset_or(cs, cs, g->units[u], nw);
        task->threads = hi - lo;
        APPEND(task, "; %d core%s", hi - lo, hi - lo == 1 ? "" : "s");
    } else if (k <= npus) {
        int lo = j * npus / k, hi = (j + 1) * npus / k, i = 0;

        for (int id = ct_cpuset_next(g->cpuset, nw, -1); id >= 0; id = ct_cpuset_next(g->cpuset, nw, id), i++)
            if (i >= lo && i < hi)
                ct_cpuset_set(cs, nw, id);
        task->threads = hi - lo;
        APPEND(task, "; more tasks (%d) than cores (%d): %d hardware thread%s", k, g->nunits, hi - lo,
               hi - lo == 1 ? "" : "s");
    } else {
        int id = ct_cpuset_next(g->cpuset, nw, -1);

        for (int skip = j % npus; skip > 0; skip--)
            id = ct_cpuset_next(g->cpuset, nw, id);
        ct_cpuset_set(cs, nw, id);
        task->threads = 1;
        APPEND(task, "; oversubscribed: %d tasks on %d CPUs, CPU shared", k, npus);
    }
    if (cpus_per_task > 0) {
        int have = ct_cpuset_weight(cs, nw);

        if (cpus_per_task > have)
            APPEND(task, "; asked %d CPUs per task, %d available", cpus_per_task, have);
        task->threads = cpus_per_task < have ? cpus_per_task : have;
    }
    task_set_cpus(task, cs, nw);
    free(cs);
}

static void assign_gpus(const ct_topology *t, const struct group *g, int j, int k, const int *alloc_rank,
                        ct_bind_task *task, const uint64_t *taskcs)
{
    int uuids = 1, remote = 0;

    for (int i = 0; i < g->ngpus; i++) {
        const struct ct_node_summary_dev *gpu = &t->model.gpus[g->gpus[i]];

        if (i * k / g->ngpus != j || task->ngpus == CT_BIND_MAX_GPUS)
            continue;
        ct_str_copy(task->gpus[task->ngpus++], sizeof(task->gpus[0]), gpu->name);
        uuids &= gpu->uuid[0] != '\0';
        remote |= !ct_cpuset_intersects(ct_topology_set(t, gpu->locality), taskcs, g->nw);
    }
    task->cuda_visible_devices[0] = '\0';
    task->cuda_local_devices[0] = '\0';
    for (int i = 0, n = 0; i < g->ngpus; i++) {
        const struct ct_node_summary_dev *gpu = &t->model.gpus[g->gpus[i]];
        char one[80];

        if (i * k / g->ngpus != j || n == CT_BIND_MAX_GPUS)
            continue;
        if (uuids)
            snprintf(one, sizeof(one), "%s%s", n ? "," : "", gpu->uuid);
        else
            snprintf(one, sizeof(one), "%s%d", n ? "," : "", gpu->cuda_index);
        strncat(task->cuda_visible_devices, one,
                sizeof(task->cuda_visible_devices) - strlen(task->cuda_visible_devices) - 1);
        /* UUIDs name a GPU whatever the numbering. */
        if (!uuids)
            snprintf(one, sizeof(one), "%s%d", n ? "," : "", alloc_rank[g->gpus[i]]);
        strncat(task->cuda_local_devices, one,
                sizeof(task->cuda_local_devices) - strlen(task->cuda_local_devices) - 1);
        n++;
    }
    if (task->ngpus)
        APPEND(task, "; GPU %s%s%s", task->gpus[0], task->ngpus > 1 ? ".." : "",
               task->ngpus > 1 ? task->gpus[task->ngpus - 1] : "");
    if (task->ngpus && remote)
        APPEND(task, " (not all local to these cores)");
    else if (task->ngpus)
        APPEND(task, " local");
    else if (t->ngpus)
        APPEND(task, "; no GPU: %d GPU%s for %d task%s here", g->ngpus, g->ngpus == 1 ? "" : "s", k,
               k == 1 ? "" : "s");
}

/* The deepest PCI ancestor two devices share: 2 a PCIe switch (a PCI-to-PCI bridge), 1 the host
 * bridge, 0 none. Bridges are the same when their hwloc global indexes are. */
static int pci_kinship(const struct ct_node_summary_dev *a, const struct ct_node_summary_dev *b)
{
    int best = 0;

    for (int x = 0; x < a->nbridges; x++)
        for (int y = 0; y < b->nbridges; y++)
            if (a->bridge[x] == b->bridge[y]) {
                int k = a->bridge_host[x] ? 1 : 2;
                best = k > best ? k : best;
            }
    return best;
}

/* How close a NIC is to the task: its GPU's PCIe switch (5), host bridge (4), the task's cores
 * (3, deeper locality first through depth), else remote (0). */
static long nic_score(const ct_topology *t, const struct ct_node_summary_dev *n, const struct ct_node_summary_dev *gpu,
                      const uint64_t *taskcs)
{
    int kin = gpu && gpu->has_pci && n->has_pci ? pci_kinship(gpu, n) : 0;

    if (kin)
        return (3 + kin) * 1000L;
    if (ct_cpuset_intersects(ct_topology_set(t, n->locality), taskcs, words(t)))
        return 3000L + n->locality_depth;
    return 0;
}

/* PCI bus distance between the GPU and the NIC: the tie-break among equally close NICs. */
static unsigned bus_distance(const struct ct_node_summary_dev *n, const struct ct_node_summary_dev *gpu)
{
    int d;

    if (!gpu || !gpu->has_pci || !n->has_pci || n->pci[0] != gpu->pci[0])
        return 1u << 20;
    d = (int)n->pci[1] - (int)gpu->pci[1];
    return (unsigned)(d < 0 ? -d : d);
}

/* High-speed fabrics before Ethernet; among them the closest to the task's first GPU, else to its
 * cores; among equally close ones the one fewest tasks have so far (the first of those). */
static void assign_nic(const ct_topology *t, const struct group *g, int *use, ct_bind_task *task,
                       const uint64_t *taskcs)
{
    int cand[CT_TOPO_MAX_DEVS], nc = 0, fabric = 0;
    const struct ct_node_summary_dev *gpu = NULL, *nics = t->model.nics;
    long best = -1;
    unsigned near = ~0u;

    for (int i = 0; i < g->ngpus && !gpu; i++)
        if (task->ngpus && !strcmp(t->model.gpus[g->gpus[i]].name, task->gpus[0]))
            gpu = &t->model.gpus[g->gpus[i]];
    for (int i = 0; i < t->nnics; i++)
        fabric |= nics[i].fabric;
    for (int i = 0; i < t->nnics; i++) {
        const struct ct_node_summary_dev *n = &nics[i];
        long sc = nic_score(t, n, gpu, taskcs);
        unsigned dist = bus_distance(n, gpu);

        if (n->fabric != fabric || sc < best || (sc == best && dist > near))
            continue;
        if (sc > best || dist < near)
            nc = 0;
        best = sc;
        near = dist;
        cand[nc++] = i;
    }
    if (!nc) {
        APPEND(task, "; no NIC in the topology");
        return;
    }
    int pick = cand[0];
    for (int i = 1; i < nc; i++)
        if (use[cand[i]] < use[pick])
            pick = cand[i];
    use[pick]++;
    const struct ct_node_summary_dev *n = &nics[pick];
    ct_str_copy(task->nic, sizeof(task->nic), n->name);
    ct_str_copy(task->netdev, sizeof(task->netdev), n->netdev);
    task->nic_is_openfabrics = n->openfabrics;
    if (n->openfabrics)
        snprintf(task->ucx_net_devices, sizeof(task->ucx_net_devices), "%s:1", n->name);
    else
        ct_str_copy(task->ucx_net_devices, sizeof(task->ucx_net_devices), n->name);
    APPEND(task, "; NIC %s (%s) %s", n->name, n->fabric ? "fabric" : "Ethernet",
           best >= 5000 ? "on the GPU's PCIe switch" : best >= 4000 ? "on the GPU's host bridge" :
           best >= 3000 ? "local" : "remote (none near these cores)");
}

static int plan_groups(const ct_topology *t, const ct_bind_request *req, const struct group *g, int ng,
                       const int *alloc_rank, ct_bind_plan *plan)
{
    int rank = 0;

    for (int gi = 0; gi < ng; gi++) {
        for (int j = 0; j < g[gi].ntasks; j++, rank++) {
            ct_bind_task *task = &plan->tasks[rank];
            uint64_t *cs = ct_cpuset_alloc(words(t));

            if (!cs)
                return -1;
            task->local_rank = rank;
            snprintf(task->reason, sizeof(task->reason), "%s: task %d of %d there", g[gi].label, j + 1,
                     g[gi].ntasks);
            assign_cpus(&g[gi], j, g[gi].ntasks, req->cpus_per_task, task);
            for (int c = 0; c < task->ncpus; c++)
                ct_cpuset_set(cs, words(t), task->cpus[c]);
            assign_gpus(t, &g[gi], j, g[gi].ntasks, alloc_rank, task, cs);
            assign_nic(t, &g[gi], plan->nic_use, task, cs);
            free(cs);
        }
    }
    return rank;
}

/* Every high-speed HCA of the node, in hwloc's order, as NCCL_IB_HCA's exact-match list. */
static void plan_ib_hca(const ct_topology *t, ct_bind_plan *plan)
{
    size_t len = 0;

    plan->ib_hca[0] = '\0';
    for (int i = 0; i < t->nnics; i++) {
        const struct ct_node_summary_dev *n = &t->model.nics[i];

        if (n->openfabrics && n->fabric && len + strlen(n->name) + 2 < sizeof(plan->ib_hca))
            len += (size_t)snprintf(plan->ib_hca + len, sizeof(plan->ib_hca) - len, "%s%s", len ? "," : "=", n->name);
    }
}

int ct_bind_plan_create(const ct_topology *topo, const ct_bind_request *req, ct_bind_plan **out, ct_error *err)
{
    struct group *dom = calloc(CT_BIND_MAX_GROUPS, sizeof(*dom));
    struct group *grp = calloc(CT_BIND_MAX_GROUPS, sizeof(*grp));
    int sel[CT_TOPO_MAX_DEVS], alloc_rank[CT_TOPO_MAX_DEVS], nsel = 0, nd = 0, ng = 0, gpu_mode, rv, left_out;
    uint64_t *allowed = ct_cpuset_alloc(words(topo));
    ct_bind_plan *plan = NULL;

    *out = NULL;
    if (!dom || !grp || !allowed) {
        rv = ct_error_set(err, CT_ENOMEM, "out-of-memory", "binding plan: out of memory");
        goto fail;
    }
    if (req->ntasks < 1 || req->ntasks > 4096) {
        rv = ct_error_set(err, CT_EINVAL, "bind-tasks", "tasks on this node: %d is out of range", req->ntasks);
        ct_error_hint(err, "give 1 to 4096 tasks");
        goto fail;
    }
    if (req->cpus_per_task < 0) {
        rv = ct_error_set(err, CT_EINVAL, "bind-cpus-per-task", "cpus per task: %d is negative", req->cpus_per_task);
        ct_error_hint(err, "give 0 (an even share) or a positive number");
        goto fail;
    }
    if ((rv = parse_allowed(topo, req->allowed_cpus, allowed, err)) != 0 ||
        (rv = parse_gpus(topo, req->gpus, sel, &nsel, err)) != 0)
        goto fail;
    nd = make_domains(topo, allowed, dom, CT_BIND_MAX_GROUPS);
    left_out = place_gpus(topo, sel, req->ntasks, dom, nd);
    nsel -= left_out;
    gpu_mode = nsel > 0 && nsel >= req->ntasks;
    for (int d = 0; d < nd; d++)
        dom[d].weight = gpu_mode ? dom[d].ngpus : dom[d].nunits;
    ng = assign_groups(dom, nd, req->ntasks, grp);
    if (ng < 0) {
        ng = 0;
        rv = ct_error_set(err, CT_ENOMEM, "out-of-memory", "binding plan: out of memory");
        goto fail;
    }
    nd = 0; /* the domains now belong to the groups */
    rv = CT_ENOMEM;
    plan = calloc(1, sizeof(*plan));
    if (!plan || !(plan->tasks = calloc((size_t)req->ntasks, sizeof(ct_bind_task)))) {
        ct_error_set(err, CT_ENOMEM, "out-of-memory", "binding plan: out of memory");
        goto fail;
    }
    for (int k = 0, r = 0; k < topo->ngpus; k++)
        alloc_rank[k] = sel[k] ? r++ : -1;
    plan_ib_hca(topo, plan);
    if ((plan->ntasks = plan_groups(topo, req, grp, ng, alloc_rank, plan)) < 0) {
        plan->ntasks = req->ntasks; /* the tasks' CPU lists to free */
        ct_error_set(err, CT_ENOMEM, "out-of-memory", "binding plan: out of memory");
        goto fail;
    }
    if (left_out)
        for (int r = 0; r < plan->ntasks; r++)
            APPEND(&plan->tasks[r], "; %d allocated GPU%s near no allowed CPU left out", left_out,
                   left_out == 1 ? "" : "s");
    *out = plan;
    plan = NULL;
    rv = 0;
fail:
    for (int i = 0; grp && i < ng; i++)
        group_free(&grp[i]);
    for (int i = 0; dom && i < nd; i++)
        group_free(&dom[i]);
    free(grp);
    free(dom);
    free(allowed);
    ct_bind_plan_free(plan);
    return rv;
}

int ct_bind_task_gpus_in(const ct_topology *topo, const ct_bind_task *task, const char *list, ct_error *err)
{
    int sel[CT_TOPO_MAX_DEVS], nsel = 0, rv;

    if ((rv = parse_gpus(topo, list, sel, &nsel, err)) != 0)
        return rv;
    for (int i = 0; i < task->ngpus; i++) {
        int found = 0;

        for (int k = 0; k < topo->ngpus && !found; k++)
            found = sel[k] && !strcmp(topo->model.gpus[k].name, task->gpus[i]);
        if (!found)
            return 0;
    }
    return 1;
}

const char *ct_bind_plan_ib_hca(const ct_bind_plan *plan)
{
    return plan->ib_hca;
}

int ct_bind_plan_ntasks(const ct_bind_plan *plan)
{
    return plan->ntasks;
}

const ct_bind_task *ct_bind_plan_task(const ct_bind_plan *plan, int local_rank)
{
    return local_rank >= 0 && local_rank < plan->ntasks ? &plan->tasks[local_rank] : NULL;
}

char *ct_bind_plan_to_json(const ct_bind_plan *plan)
{
    cJSON *root = cJSON_CreateObject(), *tasks = cJSON_AddArrayToObject(root, "tasks");
    char *s;

    for (int i = 0; i < plan->ntasks; i++) {
        const ct_bind_task *t = &plan->tasks[i];
        cJSON *o = cJSON_CreateObject(), *cpus, *gpus;

        cJSON_AddItemToArray(tasks, o);
        cJSON_AddNumberToObject(o, "local_rank", t->local_rank);
        cpus = cJSON_AddArrayToObject(o, "cpus");
        for (int c = 0; c < t->ncpus; c++)
            cJSON_AddItemToArray(cpus, cJSON_CreateNumber(t->cpus[c]));
        gpus = cJSON_AddArrayToObject(o, "gpus");
        for (int g = 0; g < t->ngpus; g++)
            cJSON_AddItemToArray(gpus, cJSON_CreateString(t->gpus[g]));
        cJSON_AddStringToObject(o, "cuda_visible_devices", t->cuda_visible_devices);
        cJSON_AddStringToObject(o, "cuda_local_devices", t->cuda_local_devices);
        if (t->nic[0])
            cJSON_AddStringToObject(o, "nic", t->nic);
        else
            cJSON_AddNullToObject(o, "nic");
        if (t->netdev[0])
            cJSON_AddStringToObject(o, "netdev", t->netdev);
        else
            cJSON_AddNullToObject(o, "netdev");
        if (t->ucx_net_devices[0])
            cJSON_AddStringToObject(o, "ucx_net_devices", t->ucx_net_devices);
        else
            cJSON_AddNullToObject(o, "ucx_net_devices");
        cJSON_AddNumberToObject(o, "threads", t->threads);
        cJSON_AddStringToObject(o, "reason", t->reason);
    }
    if (plan->ib_hca[0])
        cJSON_AddStringToObject(root, "nccl_ib_hca", plan->ib_hca);
    else
        cJSON_AddNullToObject(root, "nccl_ib_hca");
    s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

void ct_bind_plan_free(ct_bind_plan *plan)
{
    if (!plan)
        return;
    for (int i = 0; plan->tasks && i < plan->ntasks; i++)
        free(plan->tasks[i].cpus);
    free(plan->tasks);
    free(plan);
}
