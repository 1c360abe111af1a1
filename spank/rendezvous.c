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

int ct_spank_rendezvous(ct_getenv_fn get, void *ctx, uint32_t job_id, uint32_t step_id, long port_base,
                        char *addr, size_t size, int *port, ct_error *err)
{
    const char *var = "SLURM_STEP_NODELIST", *list = get(var, ctx);
    ct_hostlist *hl = NULL;
    const char *first;
    int rv;

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
    first = ct_hostlist_get(hl, 0);
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
    *port = ct_env_port_for_step(job_id, step_id, port_base ? (int)port_base : CT_ENV_PORT_BASE_DEFAULT);
    if (*port < 0) {
        ct_error_set(err, CT_EINVAL, "plugstack-arg", "port_base=%ld leaves no room for the step ports", port_base);
        return ct_error_hint(err, "give port_base from 1024 to %d", 65535 - (CT_ENV_PORT_SPAN - 1));
    }
    return 0;
}
