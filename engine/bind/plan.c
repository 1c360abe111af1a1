/* The binding planner; the rules are in include/ctrain/bind.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ctrain/bind.h"
#include "ctrain/error.h"
#include "ctrain/util.h"
#include "engine/bind/topology_internal.h"

#define CT_BIND_MAX_GROUPS 256

struct ct_bind_plan {
    int ntasks;
    ct_bind_task *tasks;
};

/* A group of neighbouring domains (NUMA nodes or packages) that a set of tasks shares. */
struct group {
    char label[96];
    hwloc_bitmap_t cpuset;       /* allowed PUs of the group */
    hwloc_bitmap_t *units;       /* allowed PUs of each core, in logical order */
    int nunits;
    int gpus[CT_TOPO_MAX_DEVS];  /* indexes into topo->gpus, PCI order */
    int ngpus;
    int weight;
    int ntasks;
};

static void group_free(struct group *g)
{
    hwloc_bitmap_free(g->cpuset);
    for (int i = 0; i < g->nunits; i++)
        hwloc_bitmap_free(g->units[i]);
    free(g->units);
}

/* Append a core's PUs to the group; the array grows as needed. */
static void group_push_unit(struct group *g, hwloc_bitmap_t unit)
{
    hwloc_bitmap_t *grown = realloc(g->units, sizeof(*grown) * (size_t)(g->nunits + 1));

    if (!grown) {
        hwloc_bitmap_free(unit);
        return;
    }
    g->units = grown;
    g->units[g->nunits++] = unit;
}

/* Domains: the level of NUMA nodes or packages with more objects (the finer one). */
static hwloc_obj_type_t domain_type(hwloc_topology_t hw)
{
    int numa = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    int pkg = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PACKAGE);

    if (numa <= 0 && pkg <= 0)
        return HWLOC_OBJ_MACHINE;
    return pkg > numa ? HWLOC_OBJ_PACKAGE : HWLOC_OBJ_NUMANODE;
}

static const char *domain_name(hwloc_obj_type_t t)
{
    return t == HWLOC_OBJ_PACKAGE ? "package" : t == HWLOC_OBJ_NUMANODE ? "NUMA" : "machine";
}

/* The allowed PUs of each core of cs (or of each PU when the topology has no cores). */
static void group_add_units(hwloc_topology_t hw, struct group *g, hwloc_const_cpuset_t cs)
{
    hwloc_obj_type_t ut = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    int n = hwloc_get_nbobjs_by_type(hw, ut);

    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(hw, ut, (unsigned)i);
        hwloc_bitmap_t unit;

        if (!hwloc_bitmap_intersects(o->cpuset, cs))
            continue;
        unit = hwloc_bitmap_alloc();
        hwloc_bitmap_and(unit, o->cpuset, cs);
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
            if (!strcmp(tok, t->gpus[i].name) || (t->gpus[i].uuid[0] && !strcmp(tok, t->gpus[i].uuid)))
                found = i;
        if (found < 0) {
            ct_error_set(err, CT_EINVAL, "bind-gpu-unknown", "GPU '%s' in the allocated GPU list '%s' is not on this node",
                         tok, list);
            if (t->ngpus)
                return ct_error_hint(err, "this node has %d GPUs: indexes 0-%d in PCI bus order, or names %s..%s",
                                     t->ngpus, t->ngpus - 1, t->gpus[0].name, t->gpus[t->ngpus - 1].name);
            return ct_error_hint(err, "this node has no GPU; give an empty list");
        }
        if (!sel[found])
            (*nsel)++;
        sel[found] = 1;
    }
    return 0;
}

static int parse_allowed(hwloc_topology_t hw, const char *list, hwloc_bitmap_t allowed, ct_error *err)
{
    hwloc_bitmap_copy(allowed, hwloc_topology_get_allowed_cpuset(hw));
    if (list) {
        hwloc_bitmap_t want = hwloc_bitmap_alloc();
        int bad = hwloc_bitmap_list_sscanf(want, list) != 0 || hwloc_bitmap_iszero(want);

        hwloc_bitmap_and(allowed, allowed, want);
        hwloc_bitmap_free(want);
        if (bad) {
            ct_error_set(err, CT_EINVAL, "bind-cpus", "allowed CPU list '%s' does not parse", list);
            return ct_error_hint(err, "write OS CPU indexes as a list, e.g. 0-7,16-23");
        }
    }
    if (hwloc_bitmap_iszero(allowed)) {
        ct_error_set(err, CT_EINVAL, "bind-cpus", "allowed CPU list '%s' has no CPU of this topology",
                     list ? list : "(all)");
        return ct_error_hint(err, "list OS indexes of PUs the topology has (hwloc-calc --input FILE -I pu all)");
    }
    return 0;
}

/* One group per domain with allowed PUs; GPUs go to the first domain their locality touches. */
static int make_domains(const ct_topology *t, hwloc_const_bitmap_t allowed, const int *sel, struct group *g,
                        int max)
{
    hwloc_obj_type_t dt = domain_type(t->hw);
    int n = hwloc_get_nbobjs_by_type(t->hw, dt), nd = 0;

    for (int i = 0; i < n && nd < max; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(t->hw, dt, (unsigned)i);

        if (!hwloc_bitmap_intersects(o->cpuset, allowed))
            continue;
        memset(&g[nd], 0, sizeof(g[nd]));
        g[nd].cpuset = hwloc_bitmap_alloc();
        hwloc_bitmap_and(g[nd].cpuset, o->cpuset, allowed);
        snprintf(g[nd].label, sizeof(g[nd].label), "%s %u", domain_name(dt), o->os_index);
        group_add_units(t->hw, &g[nd], g[nd].cpuset);
        nd++;
    }
    for (int k = 0; k < t->ngpus && nd > 0; k++) {
        int home = -1;

        if (!sel[k])
            continue;
        for (int d = 0; d < nd && home < 0; d++)
            if (hwloc_bitmap_intersects(t->gpus[k].locality->cpuset, g[d].cpuset))
                home = d;
        /* A GPU near no allowed CPU still goes to some task, spread over the domains. */
        if (home < 0)
            home = k % nd;
        g[home].gpus[g[home].ngpus++] = k;
    }
    return nd;
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
        hwloc_bitmap_or(g->cpuset, g->cpuset, d[i].cpuset);
        hwloc_bitmap_free(d[i].cpuset);
        for (int u = 0; u < d[i].nunits; u++)
            group_push_unit(g, d[i].units[u]);
        free(d[i].units);
        for (int k = 0; k < d[i].ngpus; k++)
            g->gpus[g->ngpus++] = d[i].gpus[k];
        g->weight += d[i].weight;
        /* "NUMA 0+1", or "package 1..7" (first..last) when more merge. */
        char *plus = strchr(g->label, '+'), *dots = strstr(g->label, "..");
        char *end = dots ? dots : plus ? plus : g->label + strlen(g->label);
        snprintf(end, sizeof(g->label) - (size_t)(end - g->label), "%s%s", plus || dots ? ".." : "+",
                 strrchr(d[i].label, ' ') + 1);
    }
    return ng;
}

/* Tasks per group in proportion to weight: largest remainder, ties to the lower group. */
static void spread_tasks(struct group *g, int ng, int ntasks)
{
    long total = 0;
    int given = 0;
    long rem[CT_BIND_MAX_GROUPS];

    for (int i = 0; i < ng; i++)
        total += g[i].weight;
    for (int i = 0; i < ng; i++) {
        g[i].ntasks = total ? (int)((long)ntasks * g[i].weight / total) : 0;
        rem[i] = total ? (long)ntasks * g[i].weight % total : 0;
        given += g[i].ntasks;
    }
    while (given < ntasks) {
        int best = 0;

        for (int i = 1; i < ng; i++)
            if (rem[i] > rem[best])
                best = i;
        g[best].ntasks++;
        rem[best] = -1;
        given++;
    }
}

static void task_set_cpus(ct_bind_task *task, hwloc_const_bitmap_t cs)
{
    int n = hwloc_bitmap_weight(cs), i = 0;
    unsigned id;

    task->cpus = calloc((size_t)(n > 0 ? n : 1), sizeof(int));
    task->ncpus = 0;
    if (!task->cpus)
        return; /* no CPU: the plugin refuses to apply an empty binding */
    hwloc_bitmap_foreach_begin(id, cs)
        task->cpus[i++] = (int)id;
    hwloc_bitmap_foreach_end();
    task->ncpus = i;
}

#define APPEND(task, ...) snprintf((task)->reason + strlen((task)->reason), \
                                   sizeof((task)->reason) - strlen((task)->reason), __VA_ARGS__)

/* Cores of the group for task j of k: whole cores, else hardware threads, else shared PUs. */
static void assign_cpus(const struct group *g, int j, int k, int cpus_per_task, ct_bind_task *task)
{
    hwloc_bitmap_t cs = hwloc_bitmap_alloc();
    int npus = hwloc_bitmap_weight(g->cpuset);

    if (k <= g->nunits) {
        int lo = j * g->nunits / k, hi = (j + 1) * g->nunits / k;

        for (int u = lo; u < hi; u++)
            hwloc_bitmap_or(cs, cs, g->units[u]);
        task->threads = hi - lo;
        APPEND(task, "; %d core%s", hi - lo, hi - lo == 1 ? "" : "s");
    } else if (k <= npus) {
        int lo = j * npus / k, hi = (j + 1) * npus / k, i = 0;
        unsigned id;

        hwloc_bitmap_foreach_begin(id, g->cpuset)
            if (i >= lo && i < hi)
                hwloc_bitmap_set(cs, id);
            i++;
        hwloc_bitmap_foreach_end();
        task->threads = hi - lo;
        APPEND(task, "; more tasks (%d) than cores (%d): %d hardware thread%s", k, g->nunits, hi - lo,
               hi - lo == 1 ? "" : "s");
    } else {
        int id = hwloc_bitmap_first(g->cpuset);

        for (int skip = j % npus; skip > 0; skip--)
            id = hwloc_bitmap_next(g->cpuset, id);
        hwloc_bitmap_set(cs, (unsigned)id);
        task->threads = 1;
        APPEND(task, "; oversubscribed: %d tasks on %d CPUs, CPU shared", k, npus);
    }
    if (cpus_per_task > 0) {
        int have = hwloc_bitmap_weight(cs);

        if (cpus_per_task > have)
            APPEND(task, "; asked %d CPUs per task, %d available", cpus_per_task, have);
        task->threads = cpus_per_task < have ? cpus_per_task : have;
    }
    task_set_cpus(task, cs);
    hwloc_bitmap_free(cs);
}

static void assign_gpus(const ct_topology *t, const struct group *g, int j, int k, ct_bind_task *task,
                        hwloc_const_bitmap_t taskcs)
{
    int uuids = 1, remote = 0;

    for (int i = 0; i < g->ngpus; i++) {
        const struct ct_gpu *gpu = &t->gpus[g->gpus[i]];

        if (i * k / g->ngpus != j || task->ngpus == CT_BIND_MAX_GPUS)
            continue;
        ct_str_copy(task->gpus[task->ngpus++], sizeof(task->gpus[0]), gpu->name);
        uuids &= gpu->uuid[0] != '\0';
        remote |= !hwloc_bitmap_intersects(gpu->locality->cpuset, taskcs);
    }
    task->cuda_visible_devices[0] = '\0';
    for (int i = 0, n = 0; i < g->ngpus; i++) {
        const struct ct_gpu *gpu = &t->gpus[g->gpus[i]];
        char one[80];

        if (i * k / g->ngpus != j || n == CT_BIND_MAX_GPUS)
            continue;
        if (uuids)
            snprintf(one, sizeof(one), "%s%s", n ? "," : "", gpu->uuid);
        else
            snprintf(one, sizeof(one), "%s%d", n ? "," : "", gpu->cuda_index);
        strncat(task->cuda_visible_devices, one,
                sizeof(task->cuda_visible_devices) - strlen(task->cuda_visible_devices) - 1);
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

/* The NIC whose locality is smallest among those that touch the task's cores; HCAs first. */
static void assign_nic(const ct_topology *t, int j, ct_bind_task *task, hwloc_const_bitmap_t taskcs)
{
    int cand[CT_TOPO_MAX_DEVS], nc = 0, best_local = 0, best_depth = -1, best_ofed = 0;

    for (int i = 0; i < t->nnics; i++) {
        const struct ct_nic *n = &t->nics[i];
        int local = hwloc_bitmap_intersects(n->locality->cpuset, taskcs);
        int depth = local ? n->locality->depth : -1;

        if (nc && (local < best_local || (local == best_local && depth < best_depth) ||
                   (local == best_local && depth == best_depth && n->openfabrics < best_ofed)))
            continue;
        if (!nc || local > best_local || depth > best_depth || n->openfabrics > best_ofed)
            nc = 0;
        best_local = local;
        best_depth = depth;
        best_ofed = n->openfabrics;
        cand[nc++] = i;
    }
    if (!nc) {
        APPEND(task, "; no NIC in the topology");
        return;
    }
    const struct ct_nic *n = &t->nics[cand[j % nc]];
    ct_str_copy(task->nic, sizeof(task->nic), n->name);
    ct_str_copy(task->netdev, sizeof(task->netdev), n->netdev);
    task->nic_is_openfabrics = n->openfabrics;
    APPEND(task, "; NIC %s %s", n->name, best_local ? "local" : "remote (none near these cores)");
}

static int plan_groups(const ct_topology *t, const ct_bind_request *req, const struct group *g, int ng,
                       ct_bind_plan *plan)
{
    int rank = 0;

    for (int gi = 0; gi < ng; gi++) {
        for (int j = 0; j < g[gi].ntasks; j++, rank++) {
            ct_bind_task *task = &plan->tasks[rank];
            hwloc_bitmap_t cs = hwloc_bitmap_alloc();

            task->local_rank = rank;
            snprintf(task->reason, sizeof(task->reason), "%s: task %d of %d there", g[gi].label, j + 1,
                     g[gi].ntasks);
            assign_cpus(&g[gi], j, g[gi].ntasks, req->cpus_per_task, task);
            for (int c = 0; c < task->ncpus; c++)
                hwloc_bitmap_set(cs, (unsigned)task->cpus[c]);
            assign_gpus(t, &g[gi], j, g[gi].ntasks, task, cs);
            assign_nic(t, j, task, cs);
            hwloc_bitmap_free(cs);
        }
    }
    return rank;
}

int ct_bind_plan_create(const ct_topology *topo, const ct_bind_request *req, ct_bind_plan **out, ct_error *err)
{
    struct group *dom = calloc(CT_BIND_MAX_GROUPS, sizeof(*dom));
    struct group *grp = calloc(CT_BIND_MAX_GROUPS, sizeof(*grp));
    int sel[CT_TOPO_MAX_DEVS], nsel = 0, nd = 0, ng = 0, gpu_mode, rv;
    hwloc_bitmap_t allowed = hwloc_bitmap_alloc();
    ct_bind_plan *plan = NULL;

    *out = NULL;
    if (!dom || !grp) {
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
    if ((rv = parse_allowed(topo->hw, req->allowed_cpus, allowed, err)) != 0 ||
        (rv = parse_gpus(topo, req->gpus, sel, &nsel, err)) != 0)
        goto fail;
    nd = make_domains(topo, allowed, sel, dom, CT_BIND_MAX_GROUPS);
    gpu_mode = nsel > 0 && nsel >= req->ntasks;
    for (int d = 0; d < nd; d++)
        dom[d].weight = gpu_mode ? dom[d].ngpus : dom[d].nunits;
    if (req->ntasks < nd) {
        ng = merge_domains(dom, nd, req->ntasks, grp);
    } else {
        memcpy(grp, dom, sizeof(dom[0]) * (size_t)nd);
        ng = nd;
    }
    nd = 0; /* the domains now belong to the groups */
    spread_tasks(grp, ng, req->ntasks);
    rv = CT_ENOMEM;
    plan = calloc(1, sizeof(*plan));
    if (!plan || !(plan->tasks = calloc((size_t)req->ntasks, sizeof(ct_bind_task)))) {
        ct_error_set(err, CT_ENOMEM, "out-of-memory", "binding plan: out of memory");
        goto fail;
    }
    plan->ntasks = plan_groups(topo, req, grp, ng, plan);
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
    hwloc_bitmap_free(allowed);
    ct_bind_plan_free(plan);
    return rv;
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
        if (t->nic[0])
            cJSON_AddStringToObject(o, "nic", t->nic);
        else
            cJSON_AddNullToObject(o, "nic");
        if (t->netdev[0])
            cJSON_AddStringToObject(o, "netdev", t->netdev);
        else
            cJSON_AddNullToObject(o, "netdev");
        cJSON_AddNumberToObject(o, "threads", t->threads);
        cJSON_AddStringToObject(o, "reason", t->reason);
    }
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
