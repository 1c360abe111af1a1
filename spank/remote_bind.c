/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd, the binding: the node's topology, read from the node summary
 * slurmd wrote (spank/summary.h), else discovered in a thread between init_post_opt and user_init
 * (or read from topology=); the plan for the step's tasks (ctrain.so's planner on the summary, else
 * ctrain-bind.so's, loaded only then), and each task's CPUs and GPUs in task_init. */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "ctrain/util.h"
#include "spank/log.h"
#include "spank/remote_bind.h"
#include "spank/remote_gpus.h"
#include "spank/remote_net.h"
#include "spank/step.h"

/* slurmstepd's CPU affinity in a set as large as the kernel's CPU mask (CPU_ALLOC): a fixed
 * cpu_set_t holds 1,024 CPUs, and sched_getaffinity fails with EINVAL on a node with more. *n the
 * CPUs the set covers; NULL when it cannot be read. */
static cpu_set_t *affinity_read(int *n, size_t *size)
{
    for (int cpus = CPU_SETSIZE; cpus <= (1 << 22); cpus *= 2) {
        cpu_set_t *set = CPU_ALLOC(cpus);

        if (!set)
            return NULL;
        *size = CPU_ALLOC_SIZE(cpus);
        CPU_ZERO_S(*size, set);
        if (sched_getaffinity(0, *size, set) == 0) {
            *n = cpus;
            return set;
        }
        CPU_FREE(set);
        if (errno != EINVAL)
            return NULL;
    }
    return NULL;
}

/* The CPUs slurmstepd may use: the step's cpuset (cgroup or affinity) as an OS index list, runs as
 * ranges ("0-127,256-383"). A list that does not fit is an error, never a shorter list. */
static int allowed_cpus(char *buf, size_t size, ct_error *err)
{
    size_t len = 0, setsize = 0;
    int n = 0, c = 0, first, rv = 0;
    cpu_set_t *set = affinity_read(&n, &setsize);

    if (!set)
        return ct_error_set(err, CT_EINTERNAL, "bind-affinity", "reading slurmstepd's CPU affinity failed: %s",
                            strerror(errno));
    buf[0] = '\0';
    while (c < n && !rv) {
        if (!CPU_ISSET_S(c, setsize, set)) {
            c++;
            continue;
        }
        for (first = c; c + 1 < n && CPU_ISSET_S(c + 1, setsize, set); c++)
            ;
        len += (size_t)snprintf(buf + len, size - len, first == c ? "%s%d" : "%s%d-%d", len ? "," : "", first, c);
        if (len >= size)
            rv = ct_error_set(err, CT_EINTERNAL, "bind-affinity", "slurmstepd's CPU affinity does not fit in "
                              "%zu bytes as a list", size);
        c++;
    }
    CPU_FREE(set);
    return rv;
}

/* A high-speed fabric on this node: an OpenFabrics device (InfiniBand, RoCE, Omni-Path, EFA all
 * register in /sys/class/infiniband) or HPE Slingshot's CXI devices. */
static int node_has_fabric(void)
{
    static const char *const dirs[] = { "/sys/class/infiniband", "/sys/class/cxi" };
    int found = 0;

    for (int i = 0; i < 2 && !found; i++) {
        DIR *d = opendir(dirs[i]);
        struct dirent *e;

        while (d && !found && (e = readdir(d)))
            found = e->d_name[0] != '.';
        if (d)
            closedir(d);
    }
    return found;
}

/* The step's GPUs in the planner's terms. SLURM's numbers are gres indexes: the GPU of the N-th
 * device file gres.conf lists for the node, which is the N-th in PCI order only when the files are
 * listed so (include/ctrain/gres.h). Where they differ the plugin binds the file's GPU, the one
 * SLURM allocated, and says so. */
static int map_step_gpus(struct step *s, const char *gpus, char **env, ct_error *err)
{
    char node[256], why[1024];
    int rv;

    ct_spank_step_node_name(s, env, node, sizeof(node));
    if ((rv = ct_spank_gres_read(node, &s->gres, err)) != 0)
        return rv;
    if ((rv = s->ops->gres_map(s->topo, gpus, &s->gres.files, s->gres.devs, s->gres.ndevs, s->step_mapped,
                               sizeof(s->step_mapped), why, sizeof(why), err)) != 0)
        return ct_error_prefix(err, "the step's GPUs (SLURM_STEP_GPUS=%s): ", gpus);
    if (why[0]) {
        snprintf(s->gres_why, sizeof(s->gres_why), "%s: ctrain binds the GPUs of the device files SLURM allocated "
                 "(%s)", why, s->gres.conf);
        ct_spank_info("node %u: %s", s->node_id, s->gres_why);
    }
    return 0;
}

/* GPUs and NICs matter to a step with GPUs, and to any step on a node with a fabric (its MPI,
 * Gloo and UCX traffic goes there). A CPU-only step on an Ethernet-only node skips hwloc's PCI
 * scan (about 8 ms a step): its interface is the one carrying the node's address
 * (include/ctrain/net.h). A topology file costs no scan. */
static unsigned topology_flags(char **env)
{
    const char *gpus = ct_spank_slurm_gpus(env), *topology = ct_spank_args_get()->topology;

    return (gpus && gpus[0]) || topology[0] || node_has_fabric() ? CT_TOPOLOGY_IO : 0;
}

/* The finder: ctrain-bind.so loaded (0.1-0.2 ms), hwloc set up (hwloc_topology_init loads hwloc's
 * plugins, 2-6 ms here: main's init_post_opt did it on the launch path), then the node discovered.
 * Whatever fails here, user_init loads or discovers again and reports it. */
static void *discover(void *arg)
{
    struct step *s = arg;

    if (!(s->ops = ct_spank_bind_open(&s->found_err)))
        return NULL;
    if (s->ops->topology_prepare(s->found_flags, &s->found, &s->found_err) != 0)
        return NULL;
    s->found_rv = s->ops->topology_discover(s->found, &s->found_err);
    return NULL;
}

/* The node summary slurmd wrote at its start: no hwloc, no ctrain-bind.so, no thread (a read of a
 * few kilobytes). Why it does not serve is said once per step; then the step discovers as before. */
static int summary_load(struct step *s)
{
    ct_error err;
    int rv;

    ct_error_clear(&err);
    rv = ct_spank_summary_read(s->found_flags, s->summary, sizeof(s->summary), &s->found, &err);
    if (rv != 0 && strcmp(ct_spank_args_get()->summary, "none"))
        ct_spank_info("node %u: %s; %s instead", s->node_id, err.msg,
                      ct_spank_args_get()->topology[0] ? "the topology file" : "hwloc's discovery");
    if (rv != 0) {
        s->summary[0] = '\0';
        return 0;
    }
    s->ops = ct_spank_summary_ops();
    s->found_rv = 0;
    return 1;
}

/* Without a node summary that serves: loading ctrain-bind.so and hwloc, and hwloc's discovery of
 * the node (0.7 ms, most of it the kernel opening sysfs files), run in a thread of their own from
 * init_post_opt to user_init, while
 * slurmstepd sets the step up (its cgroup, I/O and credentials: 5-20 ms), off the launch path. Not
 * for a topology file: that is read as the user, in user_init. The thread reads /sys and /proc (and
 * ctrain-bind.so from ctrain.so's directory) and writes only s->found* and s->ops; slurmstepd's
 * signals stay with its own threads. It is joined in user_init, or in exit when the step ends before
 * user_init: none outlives the step or the plugin. When it cannot start, user_init loads and
 * discovers as before. */
void ct_spank_discovery_start(struct step *s, char **env)
{
    sigset_t all, old;

    s->found_flags = topology_flags(env);
    ct_error_clear(&s->found_err);
    if (summary_load(s) || ct_spank_args_get()->topology[0])
        return;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    s->finding = pthread_create(&s->finder, NULL, discover, s) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    s->finder_pid = getpid();
    if (s->finding)
        pthread_setname_np(s->finder, "ctrain-topology");
}

void ct_spank_discovery_join(struct step *s)
{
    if (s->finding && s->finder_pid == getpid())
        pthread_join(s->finder, NULL);
    else if (s->finding) {
        s->found = NULL; /* a forked child's copy, half made: left alone */
        s->ops = NULL;
    }
    s->finding = 0;
}

/* The node's topology: the thread's discovery when it used the flags this step needs and its
 * view of the CPUs covers the step's (hwloc leaves out the CPUs outside the cpuset of the process
 * that discovers: slurmstepd joins the step's cgroup in between, and a node with core
 * specialization starts it in slurmd's own, narrower one); else discovered here, as before. The
 * planner takes the step's CPUs from the affinity either way. */
static int load_topology(struct step *s, unsigned flags, const char *cpus, ct_error *err)
{
    const char *topology = ct_spank_args_get()->topology;
    int rv = 0;

    ct_spank_discovery_join(s);
    if (s->summary[0] && !(s->found_flags == flags && s->ops->topology_allows(s->found, cpus))) {
        /* slurmd's view of the CPUs (its cpuset at its start) lacks some of the step's. */
        ct_spank_info("node %u: the node summary %s does not cover this step's CPUs %s; %s instead", s->node_id,
                      s->summary, cpus, topology[0] ? "the topology file" : "hwloc's discovery");
        s->ops->topology_free(s->found);
        s->found = NULL;
        s->ops = NULL;
        s->summary[0] = '\0';
    }
    if (!s->ops && !(s->ops = ct_spank_bind_open(err)))
        return err->code;
    if (s->found && s->found_flags == flags && (s->found_rv != 0 || s->ops->topology_allows(s->found, cpus))) {
        if (s->found_rv != 0) {
            *err = s->found_err;
            rv = s->found_rv;
        } else {
            s->topo = s->found;
            s->found = NULL;
            s->ahead = 1;
        }
        return rv;
    }
    return s->ops->topology_load(topology[0] ? topology : NULL, flags, &s->topo, err);
}

int ct_spank_binding_plan(spank_t sp, struct step *s, char **env, ct_error *err)
{
    char cpus[32768];
    const char *cpt = ct_spank_job_getenv("SLURM_CPUS_PER_TASK", env), *gpus = ct_spank_slurm_gpus(env);
    ct_bind_request req = { .ntasks = (int)s->local_tasks };
    long n = 0;
    int rv;

    if (cpt && ct_parse_long(cpt, 1, 65536, &n) != 0) {
        ct_error_set(err, CT_EINVAL, "env-malformed", "SLURM_CPUS_PER_TASK='%s' is not a positive number", cpt);
        return ct_error_hint(err, "unset it or give srun -c N");
    }
    req.cpus_per_task = (int)n;
    if ((rv = allowed_cpus(cpus, sizeof(cpus), err)) != 0)
        return rv;
    req.allowed_cpus = cpus;
    s->gpus_managed = gpus != NULL;
    ct_str_copy(s->step_gpus, sizeof(s->step_gpus), gpus ? gpus : "");
    if ((rv = load_topology(s, topology_flags(env), cpus, err)) != 0)
        return rv;
    if (gpus && gpus[0] && (rv = map_step_gpus(s, gpus, env, err)) != 0)
        return rv;
    req.gpus = gpus && gpus[0] ? s->step_mapped : "";
    if ((rv = s->ops->plan_create(s->topo, &req, &s->plan, err)) != 0)
        return ct_error_prefix(err, "binding %u tasks on node %u: ", s->local_tasks, s->node_id);
    return 0;
}

int ct_spank_binding_apply(spank_t sp, const struct step *s, int local, uint32_t rank, int local_gpus,
                         const char *task_gpus)
{
    const ct_bind_task *t = s->ops->plan_task(s->plan, local);
    cpu_set_t *set_cpus;
    size_t setsize;
    char threads[16];
    int kept = 0, max = 0, rv;

    if (!t) {
        ct_spank_task_say("no binding planned for local task %d of %u", local, s->local_tasks);
        return -1;
    }
    if (t->ncpus == 0) {
        ct_spank_task_say("no CPU planned for task %u (out of memory in slurmstepd?)", rank);
        return -1;
    }
    /* Sized for the largest CPU planned (CPU_ALLOC): a fixed cpu_set_t drops CPUs past 1,023. */
    for (int c = 0; c < t->ncpus; c++)
        max = t->cpus[c] > max ? t->cpus[c] : max;
    if (!(set_cpus = CPU_ALLOC(max + 1))) {
        ct_spank_task_say("binding task %u: out of memory in slurmstepd", rank);
        return -1;
    }
    setsize = CPU_ALLOC_SIZE(max + 1);
    CPU_ZERO_S(setsize, set_cpus);
    for (int c = 0; c < t->ncpus; c++)
        if (t->cpus[c] >= 0)
            CPU_SET_S(t->cpus[c], setsize, set_cpus);
    rv = sched_setaffinity(0, setsize, set_cpus);
    CPU_FREE(set_cpus);
    if (rv != 0) {
        ct_spank_task_say("binding task %u to its CPUs failed (%s)", rank, t->reason);
        return -1;
    }
    if (ct_spank_gpus_apply(sp, s, t, rank, local_gpus, task_gpus, &kept) != 0)
        return -1;
    snprintf(threads, sizeof(threads), "%d", t->threads);
    /* The user's own settings of these win. */
    if (ct_spank_task_setenv(sp, "OMP_NUM_THREADS", threads, 0))
        return -1;
    if (ct_spank_network_apply(sp, s, t, rank) != 0)
        return -1;
    if (s->bind == CT_SPANK_BIND_VERBOSE) {
        fprintf(stderr, "ctrain: bind: rank %u (node %u, local %d): cpus", rank, s->node_id, local);
        for (int c = 0; c < t->ncpus; c++)
            fprintf(stderr, "%s%d", c ? "," : " ", t->cpus[c]);
        fprintf(stderr, ", gpus %s%s, nic %s, %d threads: %s\n", kept ? "SLURM's " : "",
                kept ? task_gpus : t->ngpus ? t->cuda_visible_devices : "none",
                t->nic[0] ? t->nic : "none", t->threads, t->reason);
    }
    return 0;
}
