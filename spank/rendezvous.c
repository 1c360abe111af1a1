/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — MASTER_ADDR and MASTER_PORT of a step; see spank/rendezvous.h. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "ctrain/envs.h"
#include "ctrain/hostlist.h"
#include "ctrain/util.h"
#include "engine/util/slurm_compat.h"
#include "spank/rendezvous.h"

static int layout_node(const struct ct_spank_step_node *at, char *node, size_t size, ct_error *err);

static int resolves(const char *host)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
    int ok = getaddrinfo(host, NULL, &hints, &res) == 0;

    if (res)
        freeaddrinfo(res);
    return ok;
}

/* SLURM's NodeAddr of a node whose name does not resolve (NodeName differs from the host name,
 * as on clusters that name nodes by rack position, and on emulated nodes). Asks slurmctld; only
 * called when the name does not resolve. */
static int node_addr(const char *node, char *addr, size_t size, ct_error *err)
{
    node_info_msg_t *msg = NULL;
    char name[256];
    int rv;

    ct_str_copy(name, sizeof(name), node);
    if (slurm_load_node_single(&msg, name, 0) != SLURM_SUCCESS || !msg || msg->record_count < 1 ||
        !msg->node_array[0].node_addr) {
        rv = ct_error_set(err, CT_ECOMM, "rendezvous-host", "rank 0's node '%s' does not resolve and SLURM "
                          "did not give its NodeAddr (%s)", node, slurm_strerror(ct_slurm_errno()));
        ct_error_hint(err, "make node names resolve on the nodes (DNS or /etc/hosts) or set NodeAddr in slurm.conf");
    } else {
        rv = ct_str_copy(addr, size, msg->node_array[0].node_addr) == 0 ? 0 :
             ct_error_set(err, CT_EINVAL, "rendezvous-host", "NodeAddr of '%s' is too long", node);
    }
    if (msg)
        slurm_free_node_info_msg(msg);
    return rv;
}

/* Only a name from SLURM's own answer reaches slurmctld's node table: a name from the job's
 * environment (what srun sent, and a modified srun sends anything) is used when it resolves,
 * which anyone may look up, and else replaced by the layout's name for the same node. */
int ct_spank_node_address(const struct ct_spank_step_node *at, char *node, size_t nsize, char *addr, size_t size,
                          ct_error *err)
{
    int rv;

    if (node[0] && resolves(node))
        return ct_str_copy(addr, size, node) == 0 ? 0 :
               ct_error_set(err, CT_EINVAL, "env-malformed", "node name '%s' is too long", node);
    if (!at->from_slurm && (rv = layout_node(at, node, nsize, err)) != 0)
        return rv;
    if (resolves(node))
        return ct_str_copy(addr, size, node) == 0 ? 0 :
               ct_error_set(err, CT_EINVAL, "rendezvous-host", "node name '%s' is too long", node);
    return node_addr(node, addr, size, err);
}

/* A heterogeneous step (srun A : B). Of a heterogeneous job: SLURM_HET_SIZE (SLURM_PACK_SIZE before
 * 20.02) is set and its components are separate steps of separate job ids under the leader's
 * SLURM_JOB_ID. Of one allocation (srun A : B under salloc): no such variable, components 0, 1, ...
 * of one step; srun's SLURM_STEP_NUM_TASKS counts all of them, SLURM's item this component's. */
int ct_spank_het(ct_getenv_fn get, void *ctx, uint32_t step_tasks)
{
    const char *all = get("SLURM_STEP_NUM_TASKS", ctx);
    long n = 0;

    if (get("SLURM_HET_SIZE", ctx) != NULL || get("SLURM_PACK_SIZE", ctx) != NULL)
        return 1;
    return all && ct_parse_long(all, 1, 0x7fffffff, &n) == 0 && (uint32_t)n != step_tasks;
}

/* The index in the layout's node list of the node that runs task 0, or -1. */
static int task0_index(const slurm_step_layout_t *layout)
{
    for (uint32_t n = 0; n < layout->node_cnt; n++)
        for (uint16_t t = 0; t < layout->tasks[n]; t++)
            if (layout->tids[n][t] == 0)
                return (int)n;
    return -1;
}

/* slurmctld's record of job JOB_ID: *het_job = 1 when it leads a heterogeneous job (srun A : B
 * outside an allocation: each component a job of its own, with a plain step), 0 when it is one
 * allocation (srun A : B under salloc: one step with components 0, 1, ...); and, for a
 * heterogeneous job, the first node of component 0 into node, which still says where task 0 runs
 * once its step is gone. A component may end before another one's slurmstepd asks for the layout
 * (srun A : B where A exits at once, on a loaded machine: seen in t/48 with 4 test files at a
 * time), and slurmctld then knows that step no more. -1 when slurmctld does not answer. */
static int job_het_info(uint32_t job_id, int *het_job, char *node, size_t size)
{
    job_info_msg_t *msg = NULL;
    ct_hostlist *hl = NULL;
    ct_error ignored;

    *het_job = 0;
    node[0] = '\0';
    if (slurm_load_job(&msg, job_id, 0) != SLURM_SUCCESS || !msg)
        return -1;
    for (uint32_t i = 0; i < msg->record_count; i++) {
        const slurm_job_info_t *j = &msg->job_array[i];

        if (j->het_job_id != job_id || j->het_job_id == 0 || j->het_job_id == NO_VAL)
            continue;
        *het_job = 1;
        if (j->het_job_offset != 0 || !j->nodes || node[0])
            continue;
        if (ct_hostlist_expand(j->nodes, &hl, &ignored) == 0 && ct_hostlist_get(hl, 0))
            ct_str_copy(node, size, ct_hostlist_get(hl, 0));
        ct_hostlist_free(hl);
        hl = NULL;
    }
    slurm_free_job_info_msg(msg);
    return 0;
}

/* 1 when slurmctld holds step JOB.STEP as components (a heterogeneous step of one allocation),
 * 0 when as one plain step, -1 when it does not answer. A component that has ended is gone from
 * the list, the others are still components. */
static int step_has_components(uint32_t job_id, uint32_t step_id)
{
    job_step_info_response_msg_t *resp = NULL;
    int comps = 0;

    if (slurm_get_job_steps((time_t)0, job_id, step_id, &resp, SHOW_ALL) != SLURM_SUCCESS || !resp)
        return -1;
    for (uint32_t i = 0; i < resp->job_step_count; i++)
        comps |= resp->job_steps[i].step_id.step_het_comp != NO_VAL;
    slurm_free_job_step_info_response_msg(resp);
    return comps;
}

/* From slurmctld's layout of the step at->job_id.at->step_id (SPANK's items; component 0 of a
 * heterogeneous step), into node: the node running task 0 (at->task0: for an arbitrary
 * distribution, -m arbitrary or SLURM_HOSTFILE, and a heterogeneous step, where the step's
 * variables do not say) or node at->node_id. SLURM's answer for this job: no name from the job's
 * environment. */
static int layout_node(const struct ct_spank_step_node *at, char *node, size_t size, ct_error *err)
{
    int found = -1, het = at->het, het_job = 0, known = -1, comps = -1, ask_comp0, then_plain;
    slurm_step_id_t id = { .job_id = at->job_id, .step_id = at->step_id, .step_het_comp = NO_VAL };
    slurm_step_layout_t *layout = NULL;
    ct_hostlist *hl = NULL;
    char first[256] = "";
    ct_error ignored;

    /* A heterogeneous job's components are plain steps of separate jobs, the leader's first; a
     * heterogeneous step of one allocation has components 0, 1, ... of one step. Asked for the
     * other kind, SLURM 24.11 may answer with another component's layout (whose task 0 is that
     * component's own: t/25 saw n1 for n3): ask for the kind the job has. */
    if (het)
        known = job_het_info(at->job_id, &het_job, first, sizeof(first));
    if (het && known == 0 && !het_job)
        comps = step_has_components(at->job_id, at->step_id);
    /* Component 0 of a step of one allocation (or of one of either kind, when slurmctld did not
     * say which); the plain step of a heterogeneous job, or of a step that has no components after
     * all (the job's variables claimed them), or when slurmctld did not say. */
    ask_comp0 = het && !(known == 0 && het_job);
    then_plain = het && (known != 0 || (!het_job && comps == 0));
    /* srun creates a heterogeneous step's components one after another, and each component's
     * slurmstepd may ask before slurmctld knows component 0's step (SLURM 24.11 then answers
     * "Invalid job id specified"): ask again for up to 2 s. A component that has already ended
     * is known no more: a heterogeneous job's record still says where its component 0 runs. */
    for (int attempt = 0; !layout && attempt < 10; attempt++) {
        if (attempt)
            usleep(200 * 1000);
        id.step_het_comp = ask_comp0 ? 0 : NO_VAL;
        layout = slurm_job_step_layout_get(&id);
        if (!layout && ask_comp0 && then_plain) {
            id.step_het_comp = NO_VAL;
            layout = slurm_job_step_layout_get(&id);
        }
    }
    if (layout)
        found = at->task0 ? task0_index(layout) : at->node_id < layout->node_cnt ? (int)at->node_id : -1;
    if (found >= 0 && ct_hostlist_expand(layout->node_list, &hl, &ignored) == 0 && ct_hostlist_get(hl, (size_t)found))
        ct_str_copy(node, size, ct_hostlist_get(hl, (size_t)found));
    else
        found = -1;
    ct_hostlist_free(hl);
    if (layout)
        slurm_job_step_layout_free(layout);
    if (found < 0 && het && het_job && at->task0 && first[0] && ct_str_copy(node, size, first) == 0)
        found = 0;
    if (found < 0 && at->task0) {
        ct_error_set(err, CT_ECOMM, "rendezvous-host", "%s step %u.%u: slurmctld did not give the node of task 0 "
                     "(%s)", het ? "heterogeneous" : "arbitrary-distribution", at->job_id, at->step_id,
                     slurm_strerror(ct_slurm_errno()));
        return ct_error_hint(err, "set MASTER_ADDR to rank 0's node, or use a block or cyclic distribution");
    }
    if (found < 0) {
        ct_error_set(err, CT_ECOMM, "rendezvous-host", "step %u.%u: slurmctld did not give the name of node %u (%s)",
                     at->job_id, at->step_id, at->node_id, slurm_strerror(ct_slurm_errno()));
        return ct_error_hint(err, "make node names resolve on the nodes (DNS or /etc/hosts)");
    }
    return 0;
}

/* The step's environment as ct_env_slurm_rank0_host reads it in slurmstepd, less SLURM_HOSTFILE:
 * slurmstepd runs as root here and opens no file the user names (a FIFO would hang the step);
 * slurmctld's step layout says where an arbitrary distribution's task 0 is. */
struct no_hostfile {
    ct_getenv_fn get;
    void *ctx;
};

static const char *no_hostfile_get(const char *name, void *ctx)
{
    const struct no_hostfile *n = ctx;

    return strcmp(name, "SLURM_HOSTFILE") ? n->get(name, n->ctx) : NULL;
}

/* The node running task 0, into node: the envs/ rule (the first node of the step's list, else
 * where the variables say), and slurmctld's step layout where they cannot say. */
static int rank0_node(ct_getenv_fn get, void *ctx, struct ct_spank_step_node *at, uint32_t nnodes, char *node,
                      size_t size, ct_error *err)
{
    struct no_hostfile env = { get, ctx };
    const char *source = NULL;
    int rv;

    rv = ct_env_slurm_rank0_host(no_hostfile_get, &env, (int)nnodes, node, size, &source, err);
    if (rv < 0)
        return rv;
    if (at->het || rv == CT_RANK0_ELSEWHERE) {
        at->from_slurm = 1;
        return layout_node(at, node, size, err);
    }
    return 0;
}

/* The first port of srun --resv-ports (SLURM_STEP_RESV_PORTS="12000-12003" or "12000,12005"):
 * reserved by slurmctld for this step on its nodes, so no other step derives it; 0 when absent. */
static int reserved_port(ct_getenv_fn get, void *ctx)
{
    const char *v = get("SLURM_STEP_RESV_PORTS", ctx);
    char buf[16];
    long port = 0;

    if (!v)
        return 0;
    ct_str_copy(buf, sizeof(buf), v);
    buf[strcspn(buf, "-,")] = '\0';
    return ct_parse_long(buf, 1, 65535, &port) == 0 ? (int)port : 0;
}

int ct_spank_rendezvous(ct_getenv_fn get, void *ctx, uint32_t job_id, uint32_t step_id, uint32_t nnodes, int het,
                        long port_base, struct ct_spank_rendezvous *out, ct_error *err)
{
    struct ct_spank_step_node at = { job_id, step_id, 0, het, 1, 0 };
    int rv;

    if ((rv = rank0_node(get, ctx, &at, nnodes, out->node, sizeof(out->node), err)) != 0 ||
        (rv = ct_spank_node_address(&at, out->node, sizeof(out->node), out->address, sizeof(out->address), err)) != 0)
        return rv;
    out->port_reserved = 0;
    if ((out->port = reserved_port(get, ctx)) > 0) {
        out->port_reserved = 1;
        return 0;
    }
    out->port = ct_env_port_for_step(job_id, step_id, port_base ? (int)port_base : CT_ENV_PORT_BASE_DEFAULT);
    if (out->port < 0) {
        ct_error_set(err, CT_EINVAL, "plugstack-arg", "port_base=%ld leaves no room for the step ports", port_base);
        return ct_error_hint(err, "give port_base from 1024 to %d", 65535 - (CT_ENV_PORT_SPAN - 1));
    }
    return 0;
}

/* 0 when nothing listens on the port here (a bind with SO_REUSEADDR succeeds), else -1 with err. */
int ct_spank_port_free(int port, ct_error *err)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY), .sin_port = htons((uint16_t)port) };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, rv = 0;

    if (fd < 0)
        return 0; /* no socket to test with: the rank 0 process will say */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno == EADDRINUSE) {
        ct_error_set(err, CT_ECONFLICT, "rendezvous-port", "MASTER_PORT %d derived for this step is in use on rank 0's node",
                     port);
        ct_error_hint(err, "run srun --resv-ports (the plugin then uses a reserved port) or set MASTER_PORT");
        rv = -1;
    }
    close(fd);
    return rv;
}
