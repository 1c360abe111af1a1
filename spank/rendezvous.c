/* ctrain SPANK plugin — MASTER_ADDR and MASTER_PORT of a step; see spank/rendezvous.h. */
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>

#include <slurm/slurm.h>

#include "ctrain/envs.h"
#include "ctrain/hostlist.h"
#include "ctrain/util.h"
#include "spank/rendezvous.h"

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
                          "did not give its NodeAddr (%s)", node, slurm_strerror(slurm_get_errno()));
        ct_error_hint(err, "make node names resolve on the nodes (DNS or /etc/hosts) or set NodeAddr in slurm.conf");
    } else {
        rv = ct_str_copy(addr, size, msg->node_array[0].node_addr) == 0 ? 0 :
             ct_error_set(err, CT_EINVAL, "rendezvous-host", "NodeAddr of '%s' is too long", node);
    }
    if (msg)
        slurm_free_node_info_msg(msg);
    return rv;
}

/* The index in the step's node list of the node running task 0. Block, cyclic and plane
 * distributions start on the first node; an arbitrary one (-m arbitrary, SLURM_HOSTFILE) may
 * start anywhere: slurmctld's step layout says where. */
static int rank0_node(ct_getenv_fn get, void *ctx, uint32_t job_id, uint32_t step_id, ct_error *err)
{
    const char *dist = get("SLURM_DISTRIBUTION", ctx);
    slurm_step_id_t id = { .job_id = job_id, .step_id = step_id, .step_het_comp = NO_VAL };
    slurm_step_layout_t *layout;
    int node = -1;

    if (!dist || strncmp(dist, "arbitrary", 9))
        return 0;
    layout = slurm_job_step_layout_get(&id);
    for (uint32_t n = 0; layout && n < layout->node_cnt && node < 0; n++)
        for (uint16_t t = 0; t < layout->tasks[n] && node < 0; t++)
            if (layout->tids[n][t] == 0)
                node = (int)n;
    if (layout)
        slurm_job_step_layout_free(layout);
    if (node < 0) {
        ct_error_set(err, CT_ECOMM, "rendezvous-host", "SLURM_DISTRIBUTION=%s: slurmctld did not give step %u.%u's "
                     "task layout (%s)", dist, job_id, step_id, slurm_strerror(slurm_get_errno()));
        return ct_error_hint(err, "set MASTER_ADDR to rank 0's node, or use a block or cyclic distribution");
    }
    return node;
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

int ct_spank_rendezvous(ct_getenv_fn get, void *ctx, uint32_t job_id, uint32_t step_id, long port_base,
                        char *addr, size_t size, int *port, ct_error *err)
{
    const char *var = "SLURM_STEP_NODELIST", *list = get(var, ctx);
    ct_hostlist *hl = NULL;
    const char *first;
    int rv, node;

    if (!list) {
        var = "SLURM_JOB_NODELIST";
        list = get(var, ctx);
    }
    if (!list) {
        ct_error_set(err, CT_EINVAL, "env-missing", "neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is in the "
                     "step's environment");
        return ct_error_hint(err, "run the step with srun inside a SLURM allocation");
    }
    if ((rv = ct_hostlist_expand(list, &hl, err)) != 0)
        return ct_error_prefix(err, "%s: ", var);
    if ((node = rank0_node(get, ctx, job_id, step_id, err)) < 0) {
        ct_hostlist_free(hl);
        return node;
    }
    first = ct_hostlist_get(hl, (size_t)node);
    if (!first) {
        ct_hostlist_free(hl);
        ct_error_set(err, CT_EINVAL, "env-malformed", "%s='%s' names no node", var, list);
        return ct_error_hint(err, "run the step with srun inside a SLURM allocation");
    }
    if (resolves(first))
        rv = ct_str_copy(addr, size, first) == 0 ? 0 :
             ct_error_set(err, CT_EINVAL, "env-malformed", "%s: node name '%s' is too long", var, first);
    else
        rv = node_addr(first, addr, size, err);
    ct_hostlist_free(hl);
    if (rv != 0)
        return rv;
    if ((*port = reserved_port(get, ctx)) > 0)
        return 0;
    *port = ct_env_port_for_step(job_id, step_id, port_base ? (int)port_base : CT_ENV_PORT_BASE_DEFAULT);
    if (*port < 0) {
        ct_error_set(err, CT_EINVAL, "plugstack-arg", "port_base=%ld leaves no room for the step ports", port_base);
        return ct_error_hint(err, "give port_base from 1024 to %d", 65535 - (CT_ENV_PORT_SPAN - 1));
    }
    return 0;
}
