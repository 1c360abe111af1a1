/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the node summary: written by slurmd at its start, read by slurmstepd
 * (spank/summary.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "ctrain/gres.h"
#include "ctrain/util.h"
#include "spank/args.h"
#include "spank/log.h"
#include "spank/summary.h"

#ifndef CTRAIN_VERSION
#error "CTRAIN_VERSION is set by the Makefile (from the file VERSION)"
#endif

int ct_spank_summary_path(char *buf, size_t size, ct_error *err)
{
    const char *want = ct_spank_args_get()->summary, *h;
    struct utsname u;
    size_t len;

    buf[0] = '\0';
    if (!strcmp(want, "none"))
        return 0;
    want = want[0] ? want : CT_SPANK_SUMMARY_DEFAULT;
    /* The host name: several slurmd may share one filesystem (nodes as namespaces of one host, a
     * shared /var), each with a summary of its own. */
    if (uname(&u) != 0)
        return ct_error_set(err, CT_EIO, "topology-cache", "this node's host name cannot be read: %s",
                            strerror(errno));
    h = strstr(want, "%h");
    len = h ? (size_t)snprintf(buf, size, "%.*s%s%s", (int)(h - want), want, u.nodename, h + 2)
            : (size_t)snprintf(buf, size, "%s", want);
    if (len >= size) {
        buf[0] = '\0';
        return ct_error_set(err, CT_EINVAL, "topology-cache", "the node summary's path %s is too long", want);
    }
    return 0;
}

/* The default's directory, created as root can read it and only root write (mode 0755). */
static int summary_dir(const char *path, ct_error *err)
{
    char dir[1100];
    const char *slash = strrchr(path, '/');

    if (!slash || slash == path)
        return 0;
    snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        ct_error_set(err, CT_EIO, "topology-cache", "creating %s for the node summary failed: %s", dir,
                     strerror(errno));
        return ct_error_hint(err, "create it (root-owned, mode 0755) or give summary=PATH in plugstack.conf");
    }
    return 0;
}

void ct_spank_summary_write(void)
{
    const char *topology = ct_spank_args_get()->topology;
    const struct ct_spank_bind_ops *ops = NULL;
    ct_topology *topo = NULL;
    char path[1100];
    ct_error err;

    ct_error_clear(&err);
    if (ct_spank_summary_path(path, sizeof(path), &err) != 0)
        goto fail;
    if (!path[0])
        return;
    if (summary_dir(path, &err) != 0 || !(ops = ct_spank_bind_open(&err)) ||
        ops->topology_load(topology[0] ? topology : NULL, CT_TOPOLOGY_IO, &topo, &err) != 0 ||
        ct_topology_summary_write(topo, CTRAIN_VERSION, path, &err) != 0)
        goto fail;
    ct_spank_info("node summary %s written from %s: %d GPU%s", path, topology[0] ? topology : "hwloc's discovery",
                  ops->topology_gpu_count(topo), ops->topology_gpu_count(topo) == 1 ? "" : "s");
    ops->topology_free(topo);
    ct_spank_bind_close();
    return;
fail:
    if (topo)
        ops->topology_free(topo);
    ct_spank_bind_close();
    /* An older one must not outlive what it describes (a slurmd restarted after a change). */
    if (path[0] && unlink(path) != 0 && errno != ENOENT)
        ct_spank_error("removing the old node summary %s failed: %s", path, strerror(errno));
    ct_spank_report(&err);
    ct_spank_error("no node summary: each step's slurmstepd discovers the topology itself");
}

int ct_spank_summary_read(unsigned flags, char *path, size_t size, ct_topology **out, ct_error *err)
{
    const char *topology = ct_spank_args_get()->topology;
    int rv;

    *out = NULL;
    if ((rv = ct_spank_summary_path(path, size, err)) != 0)
        return rv;
    if (!path[0])
        return ct_error_set(err, CT_ENOENT, "topology-cache", "summary=none");
    return ct_topology_summary_read(path, flags, CTRAIN_VERSION, topology[0] ? topology : NULL, out, err);
}

/* A step's topology from the summary is freed at once in slurm_spank_exit: no hwloc to unload. */
static const struct ct_spank_bind_ops summary_ops = {
    CT_SPANK_BIND_PLANNER_OPS,
    .topology_retire = ct_topology_free,
};

const struct ct_spank_bind_ops *ct_spank_summary_ops(void)
{
    return &summary_ops;
}
