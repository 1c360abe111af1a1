/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — reads gres.conf and the GPU drivers' tables on the node; see spank/gres.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "spank/gres.h"

#define NVIDIA_GPUS "/proc/driver/nvidia/gpus"
#define DRM_CLASS   "/sys/class/drm"

/* The whole of a small text file, malloc'd; NULL when it cannot be read. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (!f)
        return NULL;
    do {
        if (len + 4096 + 1 > cap) {
            char *p = realloc(buf, cap = len + 4096 + 1);

            if (!p) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
        n = fread(buf + len, 1, 4096, f);
        len += n;
    } while (n > 0 && len < (1 << 20));
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

static void add_dev(struct ct_spank_gres *g, const char *file, const char *pci)
{
    if (g->ndevs == CT_GRES_MAX_FILES)
        return;
    ct_str_copy(g->devs[g->ndevs].file, sizeof(g->devs[0].file), file);
    ct_str_copy(g->devs[g->ndevs].pci, sizeof(g->devs[0].pci), pci);
    g->ndevs++;
}

/* NVIDIA: /dev/nvidiaM is minor M; the driver names each GPU's minor under its PCI bus id. */
static void read_nvidia(struct ct_spank_gres *g)
{
    DIR *d = opendir(NVIDIA_GPUS);
    struct dirent *e;

    while (d && (e = readdir(d))) {
        char path[PATH_MAX], file[64], *text, *minor;
        long m;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s/information", NVIDIA_GPUS, e->d_name);
        if (!(text = read_text(path)))
            continue;
        if ((minor = strstr(text, "Device Minor:"))) {
            minor += strlen("Device Minor:");
            minor += strspn(minor, " \t");
            minor[strcspn(minor, " \t\n")] = '\0';
            if (ct_parse_long(minor, 0, 1 << 20, &m) == 0) {
                snprintf(file, sizeof(file), "nvidia%ld", m);
                add_dev(g, file, e->d_name);
            }
        }
        free(text);
    }
    if (d)
        closedir(d);
}

/* AMD (and every DRM driver): /sys/class/drm/renderDN/device links to the PCI device. */
static void read_drm(struct ct_spank_gres *g)
{
    DIR *d = opendir(DRM_CLASS);
    struct dirent *e;

    while (d && (e = readdir(d))) {
        char path[PATH_MAX], target[PATH_MAX];
        const char *base;
        ssize_t n;

        if (strncmp(e->d_name, "renderD", 7))
            continue;
        snprintf(path, sizeof(path), "%s/%s/device", DRM_CLASS, e->d_name);
        if ((n = readlink(path, target, sizeof(target) - 1)) <= 0)
            continue;
        target[n] = '\0';
        base = strrchr(target, '/');
        add_dev(g, e->d_name, base ? base + 1 : target);
    }
    if (d)
        closedir(d);
}

int ct_spank_gres_read(const char *node, struct ct_spank_gres *g, ct_error *err)
{
    const char *conf = getenv("SLURM_CONF"), *slash = conf ? strrchr(conf, '/') : NULL;
    char *text;
    int rv;

    memset(g, 0, sizeof(*g));
    if (slash)
        snprintf(g->conf, sizeof(g->conf), "%.*s/gres.conf", (int)(slash - conf), conf);
    else
        ct_str_copy(g->conf, sizeof(g->conf), "/etc/slurm/gres.conf");
    if (!(text = read_text(g->conf))) {
        g->conf[0] = '\0';
    } else {
        rv = ct_gres_conf_parse(text, node, &g->files, err);
        free(text);
        if (rv != 0)
            return ct_error_prefix(err, "%s: ", g->conf);
    }
    read_nvidia(g);
    read_drm(g);
    return 0;
}
