/* SPDX-License-Identifier: BSD-3-Clause */
/* A node's own checks before a step's tasks start; see include/ctrain/nodecheck.h. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrain/nodecheck.h"
#include "ctrain/util.h"
#include "engine/util/fsutil.h"

static void __attribute__((format(printf, 2, 3))) finding(ct_nodecheck_result *r, const char *fmt, ...)
{
    va_list ap;

    if (r->nbad < CT_NODECHECK_MAX_FINDINGS) {
        va_start(ap, fmt);
        vsnprintf(r->bad[r->nbad], sizeof(r->bad[0]), fmt, ap);
        va_end(ap);
    }
    r->nbad++;
}

static void __attribute__((format(printf, 2, 3))) passed(ct_nodecheck_result *r, const char *fmt, ...)
{
    size_t len = strlen(r->summary);
    va_list ap;

    if (len && len + 2 < sizeof(r->summary))
        strcpy(r->summary + len, ", "), len += 2;
    va_start(ap, fmt);
    vsnprintf(r->summary + len, sizeof(r->summary) - len, fmt, ap);
    va_end(ap);
}

/* --- GPUs ---------------------------------------------------------------------------------------- */

/* One process holding one of the devices: the first fd whose file is one of them (same device
 * number of a character device). */
static int holds(const char *proc, const char *pid, const struct stat *devs, int ndevs)
{
    char path[512];
    struct dirent *e;
    struct stat st;
    int fd, found = -1;
    DIR *d;

    snprintf(path, sizeof(path), "%s/%s/fd", proc, pid);
    if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || !(d = fdopendir(fd))) {
        if (fd >= 0)
            close(fd);
        return -1;   /* gone, or another user's (the job's user sees its own processes only) */
    }
    while (found < 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, 0) != 0)
            continue;
        for (int i = 0; i < ndevs && found < 0; i++)
            if (S_ISCHR(st.st_mode) && st.st_rdev == devs[i].st_rdev)
                found = i;
    }
    closedir(d);
    return found;
}

static void process_name(const char *proc, const char *pid, char *out, size_t size)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s/comm", proc, pid);
    out[0] = '\0';
    if ((f = fopen(path, "re"))) {
        if (fgets(out, (int)size, f))
            out[strcspn(out, "\n")] = '\0';
        fclose(f);
    }
}

/* Processes other than the checking one that hold a GPU of the step open: a finding per GPU. */
static void check_holders(const ct_nodecheck_input *in, const struct stat *devs, const int *which, int ndevs,
                          ct_nodecheck_result *r)
{
    char self[24], name[64];
    int reported[CT_NODECHECK_MAX_GPUS] = { 0 };
    struct dirent *e;
    DIR *d = opendir(in->proc_root);

    snprintf(self, sizeof(self), "%ld", (long)in->self);
    while (d && (e = readdir(d))) {
        int k;

        if (!isdigit((unsigned char)e->d_name[0]) || !strcmp(e->d_name, self))
            continue;
        if ((k = holds(in->proc_root, e->d_name, devs, ndevs)) < 0 || reported[k])
            continue;
        reported[k] = 1;
        process_name(in->proc_root, e->d_name, name, sizeof(name));
        finding(r, "GPU %d (%s): held open by process %s (%s), not of this step", in->gpus[which[k]].index,
                in->gpus[which[k]].file, e->d_name, name[0] ? name : "?");
    }
    if (d)
        closedir(d);
}

static void check_gpus(const ct_nodecheck_input *in, ct_nodecheck_result *r)
{
    struct stat devs[CT_NODECHECK_MAX_GPUS];
    int which[CT_NODECHECK_MAX_GPUS], ndevs = 0, bad = r->nbad;

    if (in->ngpus <= 0) {
        passed(r, "no GPU in this step");
        return;
    }
    for (int i = 0; i < in->ngpus && i < CT_NODECHECK_MAX_GPUS; i++) {
        const ct_nodecheck_gpu *g = &in->gpus[i];

        if (!g->in_topology)
            finding(r, "GPU %d: not in the node's topology", g->index);
        if (!g->file)
            continue;   /* gres.conf names no file: SLURM's numbering, nothing to stat */
        if (stat(g->file, &devs[ndevs]) != 0)
            finding(r, "GPU %d (%s): %s", g->index, g->file,
                    errno == ENOENT ? "no such device file" : strerror(errno));
        else if (!S_ISCHR(devs[ndevs].st_mode))
            finding(r, "GPU %d (%s): not a character device", g->index, g->file);
        else
            which[ndevs++] = i;
    }
    if (ndevs)
        check_holders(in, devs, which, ndevs, r);
    if (r->nbad == bad)
        passed(r, "%d GPU%s present and free", in->ngpus, in->ngpus == 1 ? "" : "s");
}

/* --- network ------------------------------------------------------------------------------------- */

/* An OpenFabrics device with at least one port whose state is ACTIVE ("4: ACTIVE"). */
static int hca_active(const char *sys, const char *hca, char *state, size_t size)
{
    char path[512];
    struct dirent *e;
    int active = 0;
    DIR *d;

    snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports", sys, hca);
    ct_str_copy(state, size, "no such device in sysfs");
    if (!(d = opendir(path)))
        return 0;
    while (!active && (e = readdir(d))) {
        char file[768], line[64] = "";
        FILE *f;

        if (e->d_name[0] == '.')
            continue;
        snprintf(file, sizeof(file), "%s/%s/state", path, e->d_name);
        if (!(f = fopen(file, "re")))
            continue;
        if (fgets(line, sizeof(line), f)) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(state, size, "port %s %s", e->d_name, line);
            active = strstr(line, "ACTIVE") != NULL;
        }
        fclose(f);
    }
    closedir(d);
    return active;
}

static void check_nic(const ct_nodecheck_input *in, ct_nodecheck_result *r)
{
    char state[128];
    int up = 0, running = 0, addr = 0, seen = 0;

    if (in->hca && in->hca[0]) {
        if (!hca_active(in->sys_root, in->hca, state, sizeof(state)))
            finding(r, "fabric %s: no port ACTIVE (%s)", in->hca, state);
        else
            passed(r, "%s %s", in->hca, state);
    }
    if (!in->ifname || !in->ifname[0]) {
        finding(r, "no network interface for the step's sockets (none up with an address)");
        return;
    }
    for (int i = 0; i < in->nifaces; i++)
        if (!strcmp(in->ifaces[i].name, in->ifname)) {
            seen = 1;
            up |= in->ifaces[i].up;
            running |= in->ifaces[i].running;
            addr |= in->ifaces[i].has_addr;
        }
    if (!seen)
        finding(r, "interface %s: not on this node", in->ifname);
    else if (!up || !running)
        finding(r, "interface %s: %s", in->ifname, !up ? "down" : "no carrier (link down)");
    else if (!addr)
        finding(r, "interface %s: no address", in->ifname);
    else
        passed(r, "%s up", in->ifname);
}

/* --- run directory and memory -------------------------------------------------------------------- */

static void check_run_dir(const ct_nodecheck_input *in, ct_nodecheck_result *r)
{
    char base[4096], path[4200];
    int fd, ok;

    if (!in->run_dir || !in->run_dir[0])
        return;
    if (snprintf(base, sizeof(base), "%s/.ctrain-preflight", in->run_dir) >= (int)sizeof(base)) {
        finding(r, "run directory %s: path too long", in->run_dir);
        return;
    }
    /* The one way ctrain creates a file (engine/util/fsutil.h): exclusive, never through a link. */
    if ((fd = ct_fs_create_temp(base, path, sizeof(path))) < 0) {
        finding(r, "run directory %s: cannot create a file (%s)", in->run_dir, strerror(errno));
        return;
    }
    /* A byte written and synced: a full or read-only-remounted file system fails here, not at the
     * first checkpoint. */
    ok = write(fd, "", 1) == 1 && fsync(fd) == 0;
    if (!ok)
        finding(r, "run directory %s: cannot write a file (%s)", in->run_dir, strerror(errno));
    close(fd);
    unlink(path);
    if (ok)
        passed(r, "%s writable", in->run_dir);
}

/* MemAvailable in MiB from PROC/meminfo; 0 when it cannot say. */
static uint64_t mem_available_mb(const char *proc)
{
    char path[512], line[256];
    unsigned long long kb = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/meminfo", proc);
    if (!(f = fopen(path, "re")))
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return kb / 1024;
}

static void check_memory(const ct_nodecheck_input *in, ct_nodecheck_result *r)
{
    uint64_t avail = mem_available_mb(in->proc_root);

    if (!avail) {
        passed(r, "memory not measured (no MemAvailable in %s/meminfo)", in->proc_root);
        return;
    }
    if (avail < in->mem_needed_mb)
        finding(r, "memory: %llu MiB available, the step needs %llu MiB", (unsigned long long)avail,
                (unsigned long long)in->mem_needed_mb);
    else
        passed(r, "%llu MiB free", (unsigned long long)avail);
}

int ct_nodecheck_more(const ct_nodecheck_input *in, ct_nodecheck_result *out)
{
    unsigned c = in->checks ? in->checks : ~0u;

    if (c & CT_NODECHECK_GPUS)
        check_gpus(in, out);
    if (c & CT_NODECHECK_NET)
        check_nic(in, out);
    if (c & CT_NODECHECK_RUN_DIR)
        check_run_dir(in, out);
    if (c & CT_NODECHECK_MEMORY)
        check_memory(in, out);
    return out->nbad;
}

int ct_nodecheck_run(const ct_nodecheck_input *in, ct_nodecheck_result *out)
{
    memset(out, 0, sizeof(*out));
    return ct_nodecheck_more(in, out);
}

void ct_nodecheck_join(const ct_nodecheck_result *r, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int i = 0; i < r->nbad && i < CT_NODECHECK_MAX_FINDINGS && len + 1 < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "; " : "", r->bad[i]);
    if (r->nbad > CT_NODECHECK_MAX_FINDINGS && len + 1 < size)
        snprintf(buf + len, size - len, "; and %d more", r->nbad - CT_NODECHECK_MAX_FINDINGS);
}
