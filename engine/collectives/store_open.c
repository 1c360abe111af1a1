/* SPDX-License-Identifier: BSD-3-Clause */
/* The TCP store of the collectives without a PMIx server (gloo, and nccl's id beside it): where
 * rank 0's store listens and under which prefix the run's keys are (issue 48 item 2). See
 * coll_impl.h. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/tcpstore.h"
#include "engine/collectives/coll_impl.h"
#include "engine/util/fsutil.h"

/* The store's keys: under torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True) where
 * PyTorch's workers put theirs, /worker/attempt_<restart count>, and ctrain's own below it; else
 * ctrain/<the job's identity> (the environment's job id: SLURM's job, PMIx's namespace, torchrun's
 * TORCHELASTIC_RUN_ID, LSF's job), so that a rank of another job given the same MASTER_ADDR:PORT
 * waits for keys of its own and times out instead of joining this one; and the user's --run-id
 * below it, for runs no job names (or several runs in one job). */
static void store_prefix(char *buf, size_t size, const char *job_id, const char *run_id, int *agent)
{
    const char *use = getenv("TORCHELASTIC_USE_AGENT_STORE"), *restarts = getenv("TORCHELASTIC_RESTART_COUNT");
    size_t used;

    *agent = use && (!strcmp(use, "True") || !strcmp(use, "true") || !strcmp(use, "1"));
    if (*agent)
        used = (size_t)snprintf(buf, size, "/worker/attempt_%s/ctrain", restarts && *restarts ? restarts : "0");
    else
        used = (size_t)snprintf(buf, size, "ctrain%s%s", job_id[0] ? "/" : "", job_id);
    if (run_id[0] && used < size)
        snprintf(buf + used, size - used, "/run/%s", run_id);
}

/* --store-secret-file: this user's own file, unreadable by others, 16 to 4096 bytes. */
static int read_secret(const struct ct_coll_store_setup *s, int agent, char **secret, size_t *len, ct_error *err)
{
    const char *path = s->secret_file;
    int rc;

    *secret = NULL;
    *len = 0;
    if (!path[0])
        return 0;
    if (agent) {
        /* The store is PyTorch's (torchrun's agent), which knows no secret. */
        ct_error_set(err, CT_EINVAL, "store-secret", "rank %d: --store-secret-file (or CTRAIN_STORE_SECRET_FILE) "
                     "under torchrun's agent store: PyTorch's store cannot check it", s->rank);
        return ct_error_hint(err, "leave --store-secret-file out under torchrun, or start the ranks with srun or by hand");
    }
    if ((rc = ct_fs_read_private(path, "--store-secret-file", CT_TCPSTORE_SECRET_MAX, secret, len, err)))
        return rc;
    if (*len < CT_TCPSTORE_SECRET_MIN) {
        free(*secret);
        *secret = NULL;
        ct_error_set(err, CT_EINVAL, "store-secret", "--store-secret-file %s holds %zu bytes, fewer than %d", path, *len,
                     CT_TCPSTORE_SECRET_MIN);
        return ct_error_hint(err, "(umask 077; head -c 32 /dev/urandom > %s), the same file for every rank", path);
    }
    return 0;
}

/* Rank 0: the store on the addresses the plan gives, its notice said once. */
static int host_store(const struct ct_coll_store_setup *s, int port, const char *secret, size_t slen, ct_tcpstore_bind *plan,
                      struct ct_tcpstore_server **srv, ct_error *err)
{
    ct_tcpstore_bind bind;
    int rc;

    if ((rc = ct_tcpstore_bind_plan(s->env->main_address, s->bind, s->num_nodes, s->rank, &bind,
                                    err)))
        return rc;
    if ((rc = ct_tcpstore_server_start_on(&bind, secret, slen, port, s->rank, srv, err)))
        return rc;
    if (bind.notice[0])
        fprintf(stderr, "ctrain: rank 0: %s\n", bind.notice);
    *plan = bind;
    return 0;
}

static int loopback_text(const char *a)
{
    return !strncmp(a, "127.", 4) || !strcmp(a, "::1") || !strncmp(a, "::ffff:127.", 11);
}

#define REACH_KEY "store_reach"

/* Debian's case again: a rank that reaches the store over loopback (MASTER_ADDR is its own host's
 * name, 127.0.1.1 here) on a run of several nodes would give gloo that loopback address for its
 * pairs (the address it reaches the store by, ddp_gloo.cc), which the other nodes cannot reach.
 * Such ranks share rank 0's host: rank 0 publishes the first of this host's other addresses its
 * store listens on, and they connect again by it, so gloo's pairs use it. GLOO_SOCKET_IFNAME, when
 * set, chooses the pairs' interface itself. */
static int reach_by_host_address(const struct ct_coll_store_setup *s, const ct_tcpstore_bind *plan, double timeout_s, const char *secret,
                                 size_t slen, const char *prefix, struct ct_tcpstore **store, ct_error *err)
{
    char local[CT_TCPSTORE_ADDR_LEN], addr[CT_TCPSTORE_ADDR_LEN] = "";
    struct ct_tcpstore *again = NULL;
    void *val = NULL;
    size_t len = 0;
    int rc;

    if (s->num_nodes == 1 || getenv("GLOO_SOCKET_IFNAME") ||
        ct_tcpstore_local_address(*store, local, sizeof(local)) || !loopback_text(local))
        return 0;
    if (s->rank == 0) {
        for (int i = 0; plan && i < plan->n && !addr[0]; i++)
            if (!loopback_text(plan->addr[i]))
                snprintf(addr, sizeof(addr), "%s", plan->addr[i]);
        if ((rc = ct_tcpstore_set(*store, REACH_KEY, addr, strlen(addr), err)))
            return rc;
    } else {
        if ((rc = ct_tcpstore_get(*store, REACH_KEY, &val, &len, err)))
            return rc;
        snprintf(addr, sizeof(addr), "%.*s", (int)(len < sizeof(addr) ? len : sizeof(addr) - 1), (char *)val);
        free(val);
    }
    if (!addr[0])
        return 0;   /* the store listens on loopback only: nothing better to give */
    if ((rc = ct_tcpstore_connect_auth(addr, s->env->main_port, prefix, s->rank, timeout_s, secret, slen,
                                       &again, err)))
        return rc;
    ct_tcpstore_close(*store);
    *store = again;
    return 0;
}

int ct_coll_store_open(const struct ct_coll_store_setup *s, double timeout_s, struct ct_tcpstore_server **srv, struct ct_tcpstore **store,
                           ct_error *err)
{
    char prefix[256], *secret = NULL;
    ct_tcpstore_bind plan = { 0 };
    size_t slen = 0;
    int agent, rc;

    store_prefix(prefix, sizeof(prefix), s->env->job_id, s->run_id, &agent);
    if ((rc = read_secret(s, agent, &secret, &slen, err)))
        return rc;
    if (!agent && s->rank == 0 && (rc = host_store(s, s->env->main_port, secret, slen, &plan, srv, err)))
        goto out;
    rc = ct_tcpstore_connect_auth(s->env->main_address, s->env->main_port, prefix, s->rank, timeout_s,
                                  secret, slen, store, err);
    if (!rc && !agent)
        rc = reach_by_host_address(s, &plan, timeout_s, secret, slen, prefix, store, err);
out:
    if (secret)
        explicit_bzero(secret, slen);
    free(secret);
    return rc;
}
