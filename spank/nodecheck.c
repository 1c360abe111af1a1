/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — --ctrain-preflight; see nodecheck.h. The checks themselves are
 * libctrain-core's (engine/health/nodecheck.c, unit-tested on made-up /proc and /sys trees); this
 * file gathers the step's side of them and does SLURM's side of `exclude`. */
#define _GNU_SOURCE
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "ctrain/util.h"
#include "engine/slurm/exclude.h"
#include "engine/util/slurm_compat.h"
#include "spank/nodecheck.h"

/* --- the option ---------------------------------------------------------------------------------- */

static int bad_option(ct_error *err, const char *value, const char *what)
{
    ct_error_set(err, CT_EINVAL, "spank-option", "--ctrain-preflight='%s': %s", value, what);
    return ct_error_hint(err, "use --ctrain-preflight=report|fail|exclude, optionally followed by ,dir=PATH (a run "
                              "directory to check is writable) and ,mem=MIB (the memory each node must have free)");
}

int ct_spank_nodecheck_parse(const char *value, struct ct_spank_nodecheck *out, ct_error *err)
{
    static const char *const modes[] = { "off", "report", "fail", "exclude", NULL };
    char buf[1200], *save = NULL, *w;
    int first = 1;

    memset(out, 0, sizeof(*out));
    if (!value || ct_str_copy(buf, sizeof(buf), value))
        return bad_option(err, value ? value : "", value ? "too long" : "no value");
    for (w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save), first = 0) {
        long n = 0;

        if (first) {
            int m = 0;

            while (modes[m] && strcmp(modes[m], w))
                m++;
            if (!modes[m])
                return bad_option(err, value, "not a preflight mode");
            out->mode = (enum ct_spank_nodecheck_mode)m;
        } else if (!strncmp(w, "dir=", 4)) {
            if (w[4] != '/')
                return bad_option(err, value, "dir= takes an absolute path");
            ct_str_copy(out->dir, sizeof(out->dir), w + 4);
        } else if (!strncmp(w, "mem=", 4)) {
            if (ct_parse_long(w + 4, 1, 1L << 40, &n) != 0)
                return bad_option(err, value, "mem= takes a number of MiB");
            out->mem_mb = (uint64_t)n;
        } else {
            return bad_option(err, value, "unknown setting");
        }
    }
    if (first)
        return bad_option(err, value, "no mode");
    return 0;
}

/* --- the node's checks --------------------------------------------------------------------------- */

/* SLURM_STEP_GPUS ("0,1" or "0-3") into gpus[], each with its gres.conf device file. */
static int step_gpus(const struct ct_spank_nodecheck_node *in, ct_nodecheck_gpu *gpus, int max)
{
    const char *p = in->step_gpus;
    int n = 0;

    while (p && *p && n < max) {
        char *end;
        long a = strtol(p, &end, 10), b = a;

        if (end == p || a < 0)
            break;
        if (*end == '-')
            b = strtol(end + 1, &end, 10);
        for (long k = a; k <= b && n < max; k++, n++) {
            gpus[n].index = (int)k;
            gpus[n].file = in->files && k < in->files->nfiles ? in->files->paths[k] : NULL;
            gpus[n].in_topology = in->gpus_mapped;
        }
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

static int node_ifaces(ct_nodecheck_iface *out, char names[][IF_NAMESIZE + 1], int max)
{
    struct ifaddrs *ifa = NULL;
    int n = 0;

    if (getifaddrs(&ifa) != 0)
        return 0;
    for (struct ifaddrs *i = ifa; i && n < max; i = i->ifa_next) {
        int family = i->ifa_addr ? i->ifa_addr->sa_family : -1;

        ct_str_copy(names[n], IF_NAMESIZE + 1, i->ifa_name);
        out[n].name = names[n];
        out[n].up = (i->ifa_flags & IFF_UP) != 0;
        out[n].running = (i->ifa_flags & IFF_RUNNING) != 0;
        out[n].has_addr = family == AF_INET || family == AF_INET6;
        n++;
    }
    freeifaddrs(ifa);
    return n;
}

/* The checks' input from what the plugin gathered. */
static void input(const struct ct_spank_nodecheck_node *in, ct_nodecheck_input *ci)
{
    static ct_nodecheck_gpu gpus[CT_NODECHECK_MAX_GPUS];
    static ct_nodecheck_iface ifaces[128];
    static char names[128][IF_NAMESIZE + 1];

    memset(ci, 0, sizeof(*ci));
    ci->node = in->node;
    ci->gpus = gpus;
    ci->ngpus = step_gpus(in, gpus, CT_NODECHECK_MAX_GPUS);
    ci->hca = in->hca;
    ci->ifname = in->ifname;
    ci->ifaces = ifaces;
    ci->nifaces = in->ifname ? node_ifaces(ifaces, names, 128) : 0;
    ci->self = getpid();
    ci->proc_root = "/proc";
    ci->sys_root = "/sys";
}

void ct_spank_nodecheck_gpus(const struct ct_spank_nodecheck_node *in, ct_nodecheck_result *r)
{
    ct_nodecheck_input ci;

    input(in, &ci);
    ci.checks = CT_NODECHECK_GPUS;
    ct_nodecheck_run(&ci, r);
}

int ct_spank_nodecheck_node(const struct ct_spank_nodecheck *opt, const struct ct_spank_nodecheck_node *in,
                            ct_nodecheck_result *r, char *line, size_t size)
{
    ct_nodecheck_result own;
    ct_nodecheck_input ci;
    char bad[2048];

    input(in, &ci);
    ci.run_dir = opt->dir;
    ci.mem_needed_mb = opt->mem_mb ? opt->mem_mb : in->job_mem_mb;
    if (r) {
        ci.checks = CT_NODECHECK_NET | CT_NODECHECK_RUN_DIR | CT_NODECHECK_MEMORY;
        ct_nodecheck_more(&ci, r);
    } else {
        ct_nodecheck_run(&ci, &own);
        r = &own;
    }
    if (r->nbad == 0) {
        snprintf(line, size, "node %s: ok: %s", in->node, r->summary);
        return 0;
    }
    ct_nodecheck_join(r, bad, sizeof(bad));
    snprintf(line, size, "node %s: %s", in->node, bad);
    return r->nbad;
}

/* --- exclude: SLURM's requeue, without the node -------------------------------------------------- */

int ct_spank_nodecheck_exclude(uint32_t job_id, const char *node, const char *why, ct_error *err)
{
    char comment[512];
    int rc, requeued;

    snprintf(comment, sizeof(comment), "ctrain preflight excluded %s: %s", node, why);
    if ((rc = ct_slurm_requeue_excluding(job_id, node, comment, "preflight-exclude", &requeued, err)) == 0 || requeued)
        return rc;
    if (rc == CT_ENOTAVAIL)
        return ct_error_hint(err, "--ctrain-preflight=exclude requeues a batch job submitted with sbatch --requeue "
                                  "(or a cluster's JobRequeue=1); the step ends as with fail");
    return ct_error_hint(err, "the step ends as with --ctrain-preflight=fail");
}
