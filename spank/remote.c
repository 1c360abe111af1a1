/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd (S_CTX_REMOTE). init_post_opt (as root) reads the step's layout
 * once and finds rank 0 (the libslurm calls); user_init (privileges dropped to the user) plans the
 * binding from the node's topology; task_init checks the flags against the task's real layout,
 * gives each task its environment and applies its binding. An error found before task_init is kept
 * and reported from task_init: SLURM does not pass it to srun. Every task_init failure writes its
 * reason to the task's stderr and ends the task (ctrain.c): SLURM ignores an optional plugin's
 * failure. The step's state is this file's (one step per slurmstepd). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "ctrain/bind.h"
#include "ctrain/connector.h"
#include "ctrain/environment.h"
#include "ctrain/envs.h"
#include "ctrain/error.h"
#include "ctrain/hostlist.h"
#include "ctrain/net.h"
#include "ctrain/util.h"
#include "engine/util/rankvars.h"
#include "engine/util/slurm_compat.h"
#include "spank/args.h"
#include "spank/bind.h"
#include "spank/check.h"
#include "spank/gres.h"
#include "spank/log.h"
#include "spank/options.h"
#include "spank/preflight.h"
#include "spank/remote.h"
#include "spank/rendezvous.h"

struct step {
    uint32_t job_id, step_id, nnodes, node_id, local_tasks, total_tasks;
    int het;            /* a heterogeneous step: ranks and sizes from SLURM's task variables */
    struct ct_spank_rendezvous rdv;
    enum ct_spank_bind bind;
    const struct ct_spank_bind_ops *ops; /* ctrain-bind.so, loaded by the finder or else by user_init */
    ct_topology *topo;
    ct_bind_plan *plan;
    pthread_t finder;   /* discovers the node's topology between init_post_opt and user_init */
    int finding;        /* finder started and not joined yet */
    pid_t finder_pid;   /* the process it runs in (a child forked meanwhile has no such thread) */
    unsigned found_flags; /* the ct_topology_flags it discovers with */
    ct_topology *found; /* what it discovers; NULL: no discovery ahead */
    int found_rv;       /* its result, with found_err */
    ct_error found_err;
    int ahead;          /* s->topo is the thread's */
    int gpus_managed;   /* SLURM told which GPUs the step has: CUDA_VISIBLE_DEVICES is ours to set */
    char step_gpus[1024]; /* the step's SLURM_STEP_GPUS as user_init saw it (the step's, not a task's) */
    char step_mapped[1024]; /* the same GPUs as PCI positions in the topology (include/ctrain/gres.h) */
    struct ct_spank_gres gres; /* gres.conf's device files and the drivers' table, to map SLURM's numbers */
    char gres_why[1024]; /* where SLURM's numbers are not the PCI positions of its GPUs, why */
    char addrs[8][64];  /* this node's own addresses (numeric), for its Ethernet (include/ctrain/net.h) */
    int naddrs;
    int loopback_ok;    /* rank 0's address is a loopback one: every node of the step is this host */
    char addr_why[256]; /* why addrs is empty */
    ct_error err;       /* reported by every task_init */
    ct_nodecheck_result pf; /* --ctrain-preflight: the GPU checks' findings (as root) */
    int pf_gpus;        /* pf holds them */
    int pf_bad;         /* findings on this node, every check */
    char pf_line[2048]; /* its one line; "" when the checks did not run */
    int pf_supervised;  /* a step of ctrain supervise (CTRAIN_SUPERVISED=1): exclude acts as fail */
    char pf_node[256];  /* this node's name, as the line gives it */
};

static struct step *step_state; /* from init_post_opt to slurm_spank_exit; NULL: not a ctrain step */

/* The job's environment as a ct_getenv_fn (the envs/ readers take one). */
static const char *job_getenv(const char *name, void *ctx)
{
    char **env = ctx;
    size_t n = strlen(name);

    for (; env && *env; env++)
        if (!strncmp(*env, name, n) && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

/* A task's failure: in slurmd's log and on the task's stderr, which srun shows the user. */
static void __attribute__((format(printf, 1, 2))) task_say(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ct_spank_error("%s", msg);
    fprintf(stderr, "ctrain: error: %s\n", msg);
}

static int get_u32(spank_t sp, spank_item_t item, const char *what, uint32_t *out, ct_error *err)
{
    spank_err_t rc = spank_get_item(sp, item, out);

    if (rc != ESPANK_SUCCESS)
        return ct_error_set(err, CT_EINTERNAL, "spank-item", "reading the step's %s from SLURM failed: %s", what,
                            spank_strerror(rc));
    return 0;
}

static int read_layout(spank_t sp, struct step *s, ct_error *err)
{
    int rv;

    if ((rv = get_u32(sp, S_JOB_ID, "job id", &s->job_id, err)) ||
        (rv = get_u32(sp, S_JOB_NNODES, "node count", &s->nnodes, err)) ||
        (rv = get_u32(sp, S_JOB_NODEID, "node id", &s->node_id, err)) ||
        (rv = get_u32(sp, S_JOB_LOCAL_TASK_COUNT, "local task count", &s->local_tasks, err)) ||
        (rv = get_u32(sp, S_JOB_TOTAL_TASK_COUNT, "total task count", &s->total_tasks, err)))
        return rv;
    return 0;
}

static int env_u32(char **env, const char *name, uint32_t *out, ct_error *err)
{
    const char *v = job_getenv(name, env);
    long n = 0;

    if (!v || ct_parse_long(v, 0, 0x7fffffff, &n) != 0) {
        ct_error_set(err, CT_EINVAL, "env-malformed", "%s='%s' in a heterogeneous step is not a number", name,
                     v ? v : "(unset)");
        return ct_error_hint(err, "srun sets it; unset it if you exported it yourself");
    }
    *out = (uint32_t)n;
    return 0;
}

/* The job whose step layout and port the step's are: the leader of a heterogeneous job (its
 * het_job_id, from slurmctld: root asks about this very job, S_JOB_ID), else the job itself (a
 * heterogeneous step of one allocation, whose components share its id). */
static int het_leader(uint32_t job_id, uint32_t *leader, ct_error *err)
{
    job_info_msg_t *msg = NULL;
    uint32_t h;

    if (slurm_load_job(&msg, job_id, 0) != SLURM_SUCCESS || !msg || msg->record_count < 1) {
        ct_error_set(err, CT_ECOMM, "rendezvous-host", "heterogeneous step of job %u: slurmctld did not give the "
                     "job (%s)", job_id, slurm_strerror(ct_slurm_errno()));
        if (msg)
            slurm_free_job_info_msg(msg);
        return ct_error_hint(err, "set MASTER_ADDR and MASTER_PORT, or run the components as one step");
    }
    h = msg->job_array[0].het_job_id;
    *leader = h && h != NO_VAL ? h : job_id;
    slurm_free_job_info_msg(msg);
    return 0;
}

/* A heterogeneous step's components are separate steps (of separate job ids in a heterogeneous
 * job): SLURM's items give the component's tasks and job id, the whole step's task count is
 * SLURM_STEP_NUM_TASKS over all components (each task's rank and node layout come from the envs/
 * SLURM reader in task_init, as the user). The job's variables only hint that the step is one:
 * the ids root asks slurmctld about are SPANK's items and slurmctld's answer (the leader's), so
 * forged variables make root ask about this job and no other. */
static int read_het(struct step *s, char **env, ct_error *err)
{
    int rv;

    s->het = ct_spank_het(job_getenv, env, s->total_tasks);
    if (!s->het)
        return 0;
    if ((rv = het_leader(s->job_id, &s->job_id, err)) ||
        (rv = env_u32(env, "SLURM_STEP_NUM_TASKS", &s->total_tasks, err)))
        return rv;
    return 0;
}

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

/* The step's GPUs as SLURM gave them (gres indexes); NULL when the step has none. Never the
 * job's SLURM_JOB_GPUS: a batch script's value reaches `srun --gres=none` steps too. */
static const char *slurm_gpus(char **env)
{
    return job_getenv("SLURM_STEP_GPUS", env);
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

/* The step's node list at this node's id; "" where it cannot say (no list, or a heterogeneous
 * step, whose node ids count within its component). */
static void list_node(const struct step *s, char **env, char *out, size_t size)
{
    const char *list = job_getenv("SLURM_STEP_NODELIST", env);
    ct_hostlist *hl = NULL;
    ct_error err;

    out[0] = '\0';
    if (list && !s->het && ct_hostlist_expand(list, &hl, &err) == 0 && ct_hostlist_get(hl, s->node_id))
        ct_str_copy(out, size, ct_hostlist_get(hl, s->node_id));
    ct_hostlist_free(hl);
}

/* This node's SLURM name: the step's node list at this node's id, else (a heterogeneous step)
 * SLURMD_NODENAME. Not SLURMD_NODENAME first: the step's environment is srun's, and an srun in a
 * batch script passes on the batch host's SLURMD_NODENAME to every node (slurmstepd sets each
 * task's own only at exec), so every node would read the batch host's gres.conf lines. */
static void node_name(const struct step *s, char **env, char *out, size_t size)
{
    const char *name = job_getenv("SLURMD_NODENAME", env);

    list_node(s, env, out, size);
    if (!out[0] && name)
        ct_str_copy(out, size, name);
}

/* The step's GPUs in the planner's terms. SLURM's numbers are gres indexes: the GPU of the N-th
 * device file gres.conf lists for the node, which is the N-th in PCI order only when the files are
 * listed so (include/ctrain/gres.h). Where they differ the plugin binds the file's GPU, the one
 * SLURM allocated, and says so. */
static int map_step_gpus(struct step *s, const char *gpus, char **env, ct_error *err)
{
    char node[256], why[1024];
    int rv;

    node_name(s, env, node, sizeof(node));
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
    const char *gpus = slurm_gpus(env), *topology = ct_spank_args_get()->topology;

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

/* Loading ctrain-bind.so and hwloc, and hwloc's discovery of the node (0.7 ms, most of it the
 * kernel opening sysfs files), run in a thread of their own from init_post_opt to user_init, while
 * slurmstepd sets the step up (its cgroup, I/O and credentials: 5-20 ms), off the launch path. Not
 * for a topology file: that is read as the user, in user_init. The thread reads /sys and /proc (and
 * ctrain-bind.so from ctrain.so's directory) and writes only s->found* and s->ops; slurmstepd's
 * signals stay with its own threads. It is joined in user_init, or in exit when the step ends before
 * user_init: none outlives the step or the plugin. When it cannot start, user_init loads and
 * discovers as before. */
static void discovery_start(struct step *s, char **env)
{
    sigset_t all, old;

    if (ct_spank_args_get()->topology[0])
        return;
    s->found_flags = topology_flags(env);
    ct_error_clear(&s->found_err);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    s->finding = pthread_create(&s->finder, NULL, discover, s) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    s->finder_pid = getpid();
    if (s->finding)
        pthread_setname_np(s->finder, "ctrain-topology");
}

static void discovery_join(struct step *s)
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

    discovery_join(s);
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

static int plan_binding(spank_t sp, struct step *s, char **env, ct_error *err)
{
    char cpus[32768];
    const char *cpt = job_getenv("SLURM_CPUS_PER_TASK", env), *gpus = slurm_gpus(env);
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

/* The numeric addresses a host name or address resolves to, into s->addrs. */
static int resolve_into(struct step *s, const char *host)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;

    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return 0;
    for (struct addrinfo *a = res; a && s->naddrs < 8; a = a->ai_next) {
        char buf[64];

        if (getnameinfo(a->ai_addr, a->ai_addrlen, buf, sizeof(buf), NULL, 0, NI_NUMERICHOST) != 0)
            continue;
        buf[strcspn(buf, "%")] = '\0'; /* fe80::1%eth0: getifaddrs gives the address alone */
        ct_str_copy(s->addrs[s->naddrs++], sizeof(s->addrs[0]), buf);
    }
    freeaddrinfo(res);
    return s->naddrs;
}

static int is_loopback(const char *addr)
{
    struct in_addr v4;
    struct in6_addr v6;

    if (inet_pton(AF_INET, addr, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, addr, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

/* This node's own addresses, to find the interface that carries them (its Ethernet): what its
 * SLURM node name resolves to, else its NodeAddr (asked of slurmctld, as for rank 0's node). The
 * node is the step's node list at this node's id. As root (init_post_opt): libslurm's calls. */
static void node_addresses(struct step *s, char **env)
{
    struct ct_spank_rendezvous me = { 0 };
    struct ct_spank_step_node at = { s->job_id, s->step_id, s->node_id, 0, 0, 0 };
    ct_error err;
    char rank0[64] = "";

    s->naddrs = 0;
    if (resolve_into(s, s->rdv.address) > 0) /* rank 0's address: loopback means a one-host cluster */
        ct_str_copy(rank0, sizeof(rank0), s->addrs[0]);
    s->loopback_ok = rank0[0] && is_loopback(rank0);
    s->naddrs = 0;
    list_node(s, env, me.node, sizeof(me.node));
    if (!me.node[0]) {
        snprintf(s->addr_why, sizeof(s->addr_why), "this node's name is not known from SLURM_STEP_NODELIST%s",
                 s->het ? " in a heterogeneous step" : "");
        return;
    }
    if (!strcmp(me.node, s->rdv.node))
        ct_str_copy(me.address, sizeof(me.address), s->rdv.address);
    else if (ct_spank_node_address(&at, me.node, sizeof(me.node), me.address, sizeof(me.address), &err) != 0) {
        snprintf(s->addr_why, sizeof(s->addr_why), "%s", err.msg);
        return;
    }
    if (resolve_into(s, me.address) == 0)
        snprintf(s->addr_why, sizeof(s->addr_why), "node %s's address '%s' does not resolve", me.node, me.address);
}

static void preflight_gpus(struct step *s, char **env);
static void preflight(struct step *s, char **env);

int ct_spank_remote_step_init(spank_t sp)
{
    struct step *s = NULL;
    const ct_error *refused = ct_spank_options_refused();
    char **env = NULL;
    uint32_t step_id = 0;

    /* The batch script, the extern step and salloc's interactive step are not training steps. */
    if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS || step_id >= SLURM_INTERACTIVE_STEP)
        return 0;
    if (!ct_spank_active() && !refused)
        return 0;
    s = calloc(1, sizeof(*s));
    if (!s) {
        ct_spank_error("out of memory in slurmstepd");
        return -1;
    }
    step_state = s;
    s->step_id = step_id;
    s->bind = ct_spank_bind_mode();
    if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS)
        env = NULL;
    if (refused) {
        s->err = *refused;
        return 0;
    }
    if (read_layout(sp, s, &s->err) != 0 || read_het(s, env, &s->err) != 0)
        return 0;
    if (s->bind != CT_SPANK_BIND_NONE)
        discovery_start(s, env);
    if (ct_spank_rendezvous(job_getenv, env, s->job_id, s->step_id, s->nnodes, s->het, ct_spank_args_get()->port_base,
                            &s->rdv, &s->err) == 0 &&
        (s->bind != CT_SPANK_BIND_NONE || ct_spank_preflight_opts()->mode != CT_SPANK_PREFLIGHT_OFF))
        node_addresses(s, env);
    preflight_gpus(s, env);
    return 0;
}


/* The binding is planned as the user, not root: the topology file (topology=) must be one the
 * job's user can read (a root_squash NFS refuses root). A discovered topology comes from the thread
 * started in init_post_opt (as root: /sys and /proc only), joined here. */
int ct_spank_remote_user_init(spank_t sp)
{
    struct step *s = step_state;
    char **env = NULL;

    if (!s)
        return 0;
    discovery_join(s); /* here whatever happens next: no thread while slurmstepd forks the tasks */
    if (s->err.code)
        return 0;
    if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS)
        env = NULL;
    if (s->bind != CT_SPANK_BIND_NONE && plan_binding(sp, s, env, &s->err) != 0)
        return 0;
    preflight(s, env);
    ct_spank_info("step %u.%u node %u: %u of %u tasks, rank 0 on %s at %s:%d%s, binding %s", s->job_id, s->step_id,
                  s->node_id, s->local_tasks, s->total_tasks, s->rdv.node, s->rdv.address, s->rdv.port,
                  s->rdv.port_reserved ? " (srun --resv-ports)" : "",
                  !s->plan ? "off" : s->ahead ? "planned (topology discovered ahead)" : "planned");
    return 0;
}

static int set(spank_t sp, const char *name, const char *value, int overwrite)
{
    spank_err_t rc = spank_setenv(sp, name, value, overwrite);

    if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_EXISTS) {
        task_say("setting %s in the task's environment failed: %s", name, spank_strerror(rc));
        return -1;
    }
    return 0;
}

static int set_int(spank_t sp, const char *name, long value)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%ld", value);
    return set(sp, name, buf, 1);
}

/* MASTER_PORT; a user's own value is kept, like a user's MASTER_ADDR (every task of the step
 * inherits the same one from srun). */
static int set_port(spank_t sp, int port)
{
    char buf[16];

    snprintf(buf, sizeof(buf), "%d", port);
    return set(sp, CT_VAR_MASTER_PORT, buf, 0);
}

/* This node's interfaces and their addresses, as the planner of include/ctrain/net.h takes them. */
static int node_ifaces(ct_net_iface *out, int max)
{
    struct ifaddrs *ifa = NULL;
    int n = 0;

    if (getifaddrs(&ifa) != 0)
        return 0;
    for (struct ifaddrs *i = ifa; i && n < max; i = i->ifa_next) {
        ct_net_iface *f = &out[n];
        socklen_t len;

        if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        len = i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        memset(f, 0, sizeof(*f));
        if (getnameinfo(i->ifa_addr, len, f->addr, sizeof(f->addr), NULL, 0, NI_NUMERICHOST) != 0)
            continue;
        f->addr[strcspn(f->addr, "%")] = '\0';
        ct_str_copy(f->name, sizeof(f->name), i->ifa_name);
        f->up = (i->ifa_flags & IFF_UP) != 0;
        f->loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
        n++;
    }
    freeifaddrs(ifa);
    return n;
}

/* One network variable, unless the user set it: then theirs is kept, and verbose says so. */
static int set_net(spank_t sp, const struct step *s, uint32_t rank, const char *name, const char *value)
{
    char have[512];

    if (!value[0])
        return 0;
    if (spank_getenv(sp, name, have, sizeof(have)) != ESPANK_ENV_NOEXIST) {
        if (s->bind == CT_SPANK_BIND_VERBOSE && strcmp(have, value))
            fprintf(stderr, "ctrain: net: rank %u: %s kept as set by the user (%s; ctrain's choice: %s)\n", rank,
                    name, have, value);
        ct_spank_info("rank %u: %s kept as set by the user (%s; ctrain's choice: %s)", rank, name, have, value);
        return 0;
    }
    return set(sp, name, value, 0);
}

/* The network variables of the task's NIC (include/ctrain/net.h), for NCCL, Gloo, UCX and Open
 * MPI's TCP transport; nothing, with the reason in the log, when no interface can be told. */
static void choose_network(const struct step *s, const ct_bind_task *t, ct_net_vars *v)
{
    ct_net_iface ifaces[64];
    const char *addrs[8];
    ct_net_request req = { .task = t, .ib_hca = s->plan ? s->ops->plan_ib_hca(s->plan) : "", .ifaces = ifaces };

    for (int i = 0; i < s->naddrs; i++)
        addrs[i] = s->addrs[i];
    req.node_addrs = addrs;
    req.naddrs = s->naddrs;
    req.allow_loopback = s->loopback_ok;
    req.nifaces = node_ifaces(ifaces, 64);
    ct_net_choose(&req, v);
}

static int apply_network(spank_t sp, const struct step *s, const ct_bind_task *t, uint32_t rank)
{
    ct_net_vars v;
    char have[8];

    choose_network(s, t, &v);
    if (!s->naddrs && s->addr_why[0])
        snprintf(v.reason + strlen(v.reason), sizeof(v.reason) - strlen(v.reason), " (%s)", s->addr_why);
    if (s->bind == CT_SPANK_BIND_VERBOSE)
        fprintf(stderr, "ctrain: net: rank %u (node %u): %s%s%s: %s\n", rank, s->node_id,
                v.ifname[0] ? v.ifname : "no socket interface", v.ucx_net_devices[0] ? ", UCX " : "",
                v.ucx_net_devices, v.reason);
    ct_spank_info("rank %u network: %s: %s", rank, v.ifname[0] ? v.ifname : "no socket interface", v.reason);
    if (!v.ifname[0] && !v.ucx_net_devices[0])
        ct_spank_error("rank %u: no network interface set for NCCL, Gloo, UCX or Open MPI: %s", rank, v.reason);
    if (set_net(sp, s, rank, "NCCL_IB_HCA", v.ib_hca) || set_net(sp, s, rank, "UCX_NET_DEVICES", v.ucx_net_devices) ||
        set_net(sp, s, rank, "NCCL_SOCKET_IFNAME", v.socket_ifname) ||
        set_net(sp, s, rank, "GLOO_SOCKET_IFNAME", v.ifname))
        return -1;
    /* Open MPI refuses an include list beside an exclude list: a user's exclude list stands. */
    if (spank_getenv(sp, "OMPI_MCA_btl_tcp_if_exclude", have, sizeof(have)) != ESPANK_ENV_NOEXIST) {
        if (v.ifname[0])
            ct_spank_info("rank %u: OMPI_MCA_btl_tcp_if_include not set: the user set OMPI_MCA_btl_tcp_if_exclude",
                          rank);
        return 0;
    }
    return set_net(sp, s, rank, "OMPI_MCA_btl_tcp_if_include", v.ifname);
}

/* 1 when the task sees only the step's GPUs, numbered from 0: SLURM's gres/gpu plugin decides
 * it (local indexes exactly when cgroup.conf has ConstrainDevices=yes) and says so in the
 * variables it sets for the step: CUDA_VISIBLE_DEVICES (or ROCR_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL)
 * is "0,1,..." while SLURM_STEP_GPUS names other indexes. The plugin follows SLURM's decision:
 * probing device nodes instead would initialise every GPU a task may open. */
static int slurm_numbers_locally(char **env)
{
    static const char *const vars[] = { "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL" };
    const char *step = job_getenv("SLURM_STEP_GPUS", env), *seen = NULL;
    char want[1024];
    size_t len = 0;
    int n = 0;

    for (int i = 0; i < 3 && !seen; i++)
        seen = job_getenv(vars[i], env);
    if (!step || !seen)
        return 0;
    for (const char *p = step; *p; p++)
        n += p == step || p[-1] == ',';
    want[0] = '\0';
    for (int i = 0; i < n && len + 12 < sizeof(want); i++)
        len += (size_t)snprintf(want + len, sizeof(want) - len, "%s%d", i ? "," : "", i);
    return !strcmp(seen, want) && strcmp(step, want);
}

static int list_count(const char *list)
{
    int n = list[0] != '\0';

    for (const char *p = list; *p; p++)
        n += *p == ',';
    return n;
}

/* CUDA_VISIBLE_DEVICES for GPUs given as PCI positions (list): as they are, or numbered among the
 * step's GPUs (step, PCI positions too) when the cgroup hides the others. */
static void cuda_devices(const char *list, const char *step, int local_gpus, char *out, size_t size)
{
    char buf[1024], *save = NULL;
    size_t len = 0;

    out[0] = '\0';
    ct_str_copy(buf, sizeof(buf), list);
    for (char *tok = strtok_r(buf, ",", &save); tok && len + 12 < size; tok = strtok_r(NULL, ",", &save)) {
        long k = strtol(tok, NULL, 10), rank = 0;

        for (const char *p = step; local_gpus && *p; p += strcspn(p, ","), p += *p == ',')
            rank += strtol(p, NULL, 10) < k;
        len += (size_t)snprintf(out + len, size - len, "%s%ld", len ? "," : "", local_gpus ? rank : k);
    }
}

/* A task's GPUs, where SLURM may have bound some itself (--gpus-per-task, --gpu-bind,
 * --ntasks-per-gpu: the task's own SLURM_STEP_GPUS, gres indexes, mapped like the step's). The
 * plan's GPUs are set when they are among the task's; else SLURM's binding stands, and where
 * SLURM's numbers are not the GPUs' PCI positions (gres.conf's files out of PCI order) the plugin
 * names SLURM's GPUs by position in CUDA_VISIBLE_DEVICES. Either way a difference is said, in the
 * task's stderr with --ctrain-bind=verbose and in slurmd's log. */
static int apply_gpus(spank_t sp, const struct step *s, const ct_bind_task *t, uint32_t rank, int local_gpus,
                      const char *task_gpus, int *kept)
{
    const char *cvd = local_gpus ? t->cuda_local_devices : t->cuda_visible_devices;
    char why[1024] = "", mapped[1024] = "", moved[1024] = "", slurm_cvd[1024];
    ct_error err;
    int within = 1;

    /* CUDA_VISIBLE_DEVICES only where SLURM said which GPUs the step has: never more than those;
     * numbered among the step's GPUs when the cgroup hides the others. */
    if (!s->gpus_managed || s->ops->topology_gpu_count(s->topo) == 0)
        return 0;
    if (task_gpus && strcmp(task_gpus, s->step_gpus)) {
        ct_error_clear(&err);
        if (s->ops->gres_map(s->topo, task_gpus, &s->gres.files, s->gres.devs, s->gres.ndevs, mapped,
                             sizeof(mapped), moved, sizeof(moved), &err) != 0)
            mapped[0] = moved[0] = '\0';
        within = mapped[0] && t->ngpus > 0 && s->ops->task_gpus_in(s->topo, t, mapped, &err) == 1;
        if (!within)
            snprintf(why, sizeof(why), "SLURM bound this task to GPU%s %s%s%s%s of the step's %s, ctrain's plan chose "
                     "%s: SLURM's binding is kept%s%s", strchr(task_gpus, ',') ? "s" : "", task_gpus,
                     moved[0] ? " (" : "", moved[0] ? mapped : "", moved[0] ? " in PCI order)" : "", s->step_gpus,
                     t->ngpus ? t->cuda_visible_devices : "none", err.code ? " (" : "", err.code ? err.msg : "");
        if (!within && err.code)
            snprintf(why + strlen(why), sizeof(why) - strlen(why), ")");
    }
    if (within && task_gpus && t->ngpus != list_count(task_gpus))
        snprintf(why, sizeof(why), "SLURM gave this task GPU%s %s; ctrain narrows that to %s (%s)",
                 strchr(task_gpus, ',') ? "s" : "", task_gpus, t->ngpus ? t->cuda_visible_devices : "none",
                 t->ngpus ? "its share of the node's GPUs, nearest its cores" : "more tasks than GPUs here");
    if (why[0]) {
        ct_spank_info("rank %u: %s", rank, why);
        if (s->bind == CT_SPANK_BIND_VERBOSE)
            fprintf(stderr, "ctrain: bind: rank %u: %s\n", rank, why);
    }
    if (s->gres_why[0] && s->bind == CT_SPANK_BIND_VERBOSE)
        fprintf(stderr, "ctrain: bind: rank %u: %s\n", rank, s->gres_why);
    *kept = !within;
    /* SLURM's binding kept, but its CUDA_VISIBLE_DEVICES counts PCI order where its files are not
     * in PCI order: the GPUs SLURM allocated, by their positions. */
    if (!within && moved[0] && mapped[0]) {
        cuda_devices(mapped, s->step_mapped, local_gpus, slurm_cvd, sizeof(slurm_cvd));
        ct_spank_info("rank %u: %s: CUDA_VISIBLE_DEVICES=%s names them", rank, moved, slurm_cvd);
        if (s->bind == CT_SPANK_BIND_VERBOSE)
            fprintf(stderr, "ctrain: bind: rank %u: %s: CUDA_VISIBLE_DEVICES=%s names them\n", rank, moved,
                    slurm_cvd);
        return set(sp, "CUDA_VISIBLE_DEVICES", slurm_cvd, 1) || set(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1) ? -1 : 0;
    }
    if (!within)
        return 0;
    if (set(sp, "CUDA_VISIBLE_DEVICES", cvd, 1) ||
        (strncmp(cvd, "GPU-", 4) && set(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1)))
        return -1;
    return 0;
}

static int apply_binding(spank_t sp, const struct step *s, int local, uint32_t rank, int local_gpus,
                         const char *task_gpus)
{
    const ct_bind_task *t = s->ops->plan_task(s->plan, local);
    cpu_set_t *set_cpus;
    size_t setsize;
    char threads[16];
    int kept = 0, max = 0, rv;

    if (!t) {
        task_say("no binding planned for local task %d of %u", local, s->local_tasks);
        return -1;
    }
    if (t->ncpus == 0) {
        task_say("no CPU planned for task %u (out of memory in slurmstepd?)", rank);
        return -1;
    }
    /* Sized for the largest CPU planned (CPU_ALLOC): a fixed cpu_set_t drops CPUs past 1,023. */
    for (int c = 0; c < t->ncpus; c++)
        max = t->cpus[c] > max ? t->cpus[c] : max;
    if (!(set_cpus = CPU_ALLOC(max + 1))) {
        task_say("binding task %u: out of memory in slurmstepd", rank);
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
        task_say("binding task %u to its CPUs failed (%s)", rank, t->reason);
        return -1;
    }
    if (apply_gpus(sp, s, t, rank, local_gpus, task_gpus, &kept) != 0)
        return -1;
    snprintf(threads, sizeof(threads), "%d", t->threads);
    /* The user's own settings of these win. */
    if (set(sp, "OMP_NUM_THREADS", threads, 0))
        return -1;
    if (apply_network(sp, s, t, rank) != 0)
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

/* A task of a heterogeneous step: SLURM's items count within its component (S_TASK_GLOBAL_ID
 * without the component's task offset, S_TASK_ID and the local count without the other
 * components' tasks on this node), so rank, node rank, local rank and local size are the envs/
 * SLURM reader's, one rule for `ctrain env` and the plugin. The binding stays the component's
 * (its own CPUs and GPUs): components sharing a node without SLURM-managed GPUs would bind the
 * same devices, an error. */
static int het_task(const struct step *s, char **env, uint32_t *rank, int *local_rank, int *local_size,
                    uint32_t *node, ct_error *err)
{
    const struct ct_env_ops *slurm = ct_env_lookup("slurm");
    ct_env_info info;
    int rv;

    if (!slurm)
        return ct_error_set(err, CT_EINTERNAL, "spank-env", "the SLURM environment reader is not linked in");
    if ((rv = slurm->read(job_getenv, env, &info, err)) != 0)
        return rv;
    if (info.local_world_size != (int)s->local_tasks && s->plan && !s->gpus_managed) {
        ct_error_set(err, CT_ECONFLICT, "bind-het-shared-node", "components of the heterogeneous step share this "
                     "node (%d of its %d tasks here are this component's): each component would bind the same "
                     "GPUs and cores", (int)s->local_tasks, info.local_world_size);
        return ct_error_hint(err, "place the components on different nodes, or start the step with "
                                  "--ctrain-bind=none");
    }
    *rank = (uint32_t)info.global_rank;
    *node = (uint32_t)info.node_rank;
    *local_rank = info.local_rank;
    *local_size = info.local_world_size;
    return 0;
}

/* An error of the step in the task's stderr (SLURM does not pass the plugin's log to srun). */
/* The job's memory per node in MiB, as SLURM told the job (--mem, or --mem-per-cpu times the
 * node's CPUs); 0 when it did not ask. */
static uint64_t job_mem_mb(char **env)
{
    const char *per_node = job_getenv("SLURM_MEM_PER_NODE", env), *per_cpu = job_getenv("SLURM_MEM_PER_CPU", env);
    const char *cpus = job_getenv("SLURM_CPUS_ON_NODE", env);
    long n = 0, c = 0;

    if (per_node && ct_parse_long(per_node, 1, 1L << 40, &n) == 0)
        return (uint64_t)n;
    if (per_cpu && cpus && ct_parse_long(per_cpu, 1, 1L << 40, &n) == 0 && ct_parse_long(cpus, 1, 1L << 20, &c) == 0)
        return (uint64_t)n * (uint64_t)c;
    return 0;
}

/* --ctrain-preflight's GPU checks, as root in init_post_opt (a GPU held by another user's process
 * shows only to root). Where SLURM has not set SLURM_STEP_GPUS by then, user_init runs them, as the
 * user. */
static void preflight_gpus(struct step *s, char **env)
{
    struct ct_spank_preflight_node in = { 0 };
    ct_error err;

    if (ct_spank_preflight_opts()->mode == CT_SPANK_PREFLIGHT_OFF || s->err.code)
        return;
    in.step_gpus = slurm_gpus(env);
    if (!in.step_gpus || !in.step_gpus[0])
        return;
    node_name(s, env, s->pf_node, sizeof(s->pf_node));
    in.node = s->pf_node;
    if (ct_spank_gres_read(in.node, &s->gres, &err) == 0)
        in.files = &s->gres.files;
    in.gpus_mapped = 1;   /* the mapping is user_init's; a GPU it cannot map fails the step there */
    ct_spank_preflight_gpus(&in, &s->pf);
    s->pf_gpus = 1;
}

/* --ctrain-preflight: the node's checks, in user_init as the job's user, before any task starts
 * (the network interface is the one the plan gives the node's first task); task_init reports the
 * result and acts on it. */
static void preflight(struct step *s, char **env)
{
    const struct ct_spank_preflight *opt = ct_spank_preflight_opts();
    const ct_bind_task *t = s->plan ? s->ops->plan_task(s->plan, 0) : NULL;
    struct ct_spank_preflight_node in = { 0 };
    ct_net_vars v;
    ct_error err;

    if (opt->mode == CT_SPANK_PREFLIGHT_OFF)
        return;
    ct_error_clear(&err);
    node_name(s, env, s->pf_node, sizeof(s->pf_node));
    s->pf_supervised = ct_env_ctrain_supervised(job_getenv, env);
    in.node = s->pf_node[0] ? s->pf_node : "?";
    in.step_gpus = slurm_gpus(env);
    if (in.step_gpus && in.step_gpus[0] && (s->plan || ct_spank_gres_read(in.node, &s->gres, &err) == 0))
        in.files = &s->gres.files;
    /* planned: the plugin found every GPU in the topology; bind=none: no topology to ask */
    in.gpus_mapped = 1;
    in.hca = t && t->nic_is_openfabrics ? t->nic : NULL;
    choose_network(s, t, &v);
    in.ifname = v.ifname;
    in.job_mem_mb = job_mem_mb(env);
    s->pf_bad = ct_spank_preflight_node(opt, &in, s->pf_gpus ? &s->pf : NULL, s->pf_line, sizeof(s->pf_line));
    /* info, not error, level: slurmstepd passes its errors to srun, and the node's first task
     * writes the user's one line per node */
    ct_spank_info("preflight: %s", s->pf_line);
}

/* A bad node: with exclude, the job requeued without it (a batch job that may be requeued);
 * otherwise, or when that fails, the step ended (scancel JOB.STEP), so that the programs that
 * started on the other nodes do not wait for this node's. In a step of ctrain supervise, exclude
 * acts as fail: the supervisor reads the line and starts its next step without the node, inside
 * the allocation, where a requeue would give the allocation back. As the user, from the node's
 * first task, after its line is written. */
static void preflight_act(const struct step *s)
{
    const char *why = s->pf_line + strlen("node ") + strlen(s->pf_node) + 2;
    ct_error err;

    ct_error_clear(&err);
    if (ct_spank_preflight_opts()->mode == CT_SPANK_PREFLIGHT_EXCLUDE && s->pf_supervised)
        fprintf(stderr, "ctrain: preflight: a step of ctrain supervise: no requeue, the supervisor starts its next step "
                        "without node %s\n", s->pf_node);
    else if (ct_spank_preflight_opts()->mode == CT_SPANK_PREFLIGHT_EXCLUDE) {
        sigset_t term;

        /* The requeue ends the job's steps, this task first: SIGTERM, SIGKILL KillWait seconds
         * later. slurmctld takes the excluded node only after the requeue, so this task holds
         * SIGTERM off for that long (it never execs: ctrain.c ends it). */
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigaddset(&term, SIGINT);
        sigaddset(&term, SIGHUP);
        sigprocmask(SIG_BLOCK, &term, NULL);
        if (ct_spank_preflight_exclude(s->job_id, s->pf_node, why, &err) == 0) {
            fprintf(stderr, "ctrain: preflight: job %u requeued without node %s\n", s->job_id, s->pf_node);
            ct_spank_info("preflight: job %u requeued without node %s", s->job_id, s->pf_node);
            return;
        }
        fprintf(stderr, "ctrain: preflight: %s\nctrain: hint: %s\n", err.msg, err.hint);
        ct_spank_info("preflight: %s", err.msg);
    }
    fflush(stderr);
    if (ct_slurm_kill_step(s->job_id, s->step_id, SIGKILL) != SLURM_SUCCESS)
        ct_spank_error("preflight: ending step %u.%u failed: %s", s->job_id, s->step_id,
                       slurm_strerror(ct_slurm_errno()));
}

/* The preflight's line on the node's first task's stderr: every result with report, a bad node's
 * with fail and exclude, which then end every task of the node (the others quietly). */
static int preflight_report(const struct step *s, int local)
{
    enum ct_spank_preflight_mode mode = ct_spank_preflight_opts()->mode;
    int stop = s->pf_bad && mode != CT_SPANK_PREFLIGHT_REPORT;

    if (!s->pf_line[0])
        return 0;
    if (local == 0 && (s->pf_bad || mode == CT_SPANK_PREFLIGHT_REPORT))
        fprintf(stderr, "ctrain: preflight: %s%s\n", s->pf_line, stop ? "; the step ends before its programs start" : "");
    if (local == 0 && stop)
        preflight_act(s);
    return stop ? -1 : 0;
}

static int task_fail(const ct_error *err)
{
    task_say("%s", err->msg);
    if (err->hint[0]) {
        ct_spank_error("hint: %s", err->hint);
        fprintf(stderr, "ctrain: hint: %s\n", err->hint);
    }
    return -1;
}

int ct_spank_remote_task_init(spank_t sp)
{
    struct step *s = step_state;
    const char *strategy = ct_spank_strategy(), *accelerator = ct_spank_accelerator();
    const char *precision = ct_spank_precision();
    uint32_t rank = 0, node;
    int local = 0, local_rank, local_size, user_port, local_gpus;
    char **env = NULL, task_gpus[1024] = "";
    ct_error err;

    if (!s)
        return 0;
    node = s->node_id;
    if (s->err.code)
        return task_fail(&s->err);
    if (spank_get_item(sp, S_TASK_ID, &local) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS) {
        task_say("reading the task's rank from SLURM failed");
        return -1;
    }
    if (preflight_report(s, local) != 0)
        return -1;
    ct_error_clear(&err);
    /* The flags as the task's program will read them, in the task's own environment (its SLURM_*
     * variables: the step's real layout) against this node's plugstack arguments: srun checked
     * them without the layout, and a login node's plugstack.conf may differ from the node's. */
    if (ct_spank_check_flags(job_getenv, env, 0, &err) != 0)
        return task_fail(&err);
    local_rank = local;
    local_size = (int)s->local_tasks;
    /* Everything read from the task's environment is read now: spank_setenv below may move it.
     * slurmstepd has put the task's own SLURM_* variables in it by now. */
    if (s->het && het_task(s, env, &rank, &local_rank, &local_size, &node, &err) != 0)
        return task_fail(&err);
    user_port = job_getenv(CT_VAR_MASTER_PORT, env) != NULL;
    local_gpus = slurm_numbers_locally(env);
    if (job_getenv("SLURM_STEP_GPUS", env))
        ct_str_copy(task_gpus, sizeof(task_gpus), job_getenv("SLURM_STEP_GPUS", env));
    env = NULL;
    /* Rank 0's task runs on rank 0's node: the derived port must be free there. */
    if (rank == 0 && !s->rdv.port_reserved && !user_port && ct_spank_port_free(s->rdv.port, &err) != 0)
        return task_fail(&err);
    if (set_int(sp, CT_VAR_RANK, rank) || set_int(sp, CT_VAR_LOCAL_RANK, local_rank) ||
        set_int(sp, CT_VAR_WORLD_SIZE, s->total_tasks) || set_int(sp, CT_VAR_LOCAL_WORLD_SIZE, local_size) ||
        set_int(sp, CT_VAR_NODE_RANK, node) || set_int(sp, CT_VAR_GROUP_RANK, node) ||
        set(sp, CT_VAR_MASTER_ADDR, s->rdv.address, 0) || set_port(sp, s->rdv.port))
        return -1;
    if ((strategy && set(sp, CT_VAR_STRATEGY, strategy, 1)) ||
        (accelerator && set(sp, CT_VAR_ACCELERATOR, accelerator, 1)) ||
        (precision && set(sp, CT_VAR_PRECISION, precision, 1)))
        return -1;
    if (s->plan && apply_binding(sp, s, local, rank, local_gpus, task_gpus[0] ? task_gpus : NULL) != 0)
        return -1;
    return 0;
}

void ct_spank_remote_exit(void)
{
    struct step *s = step_state;

    if (!s)
        return;
    discovery_join(s);
    if (s->ops) {
        s->ops->topology_free(s->found);
        s->ops->plan_free(s->plan);
        s->ops->topology_retire(s->topo); /* hwloc's plugins unload at the process's exit, not here */
    }
    free(s);
    step_state = NULL;
    ct_spank_bind_close();
}
