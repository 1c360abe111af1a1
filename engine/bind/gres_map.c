/* SPDX-License-Identifier: BSD-3-Clause */
/* SLURM's GPU numbers to physical GPUs; see include/ctrain/gres.h for what SLURM's numbers are.
 * gres.conf is read by engine/bind/gres_conf.c (include/ctrain/gres_conf.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ctrain/gres.h"
#include "ctrain/util.h"
#include "engine/bind/topology_model.h"

const char *ct_topology_gpu_pci(const ct_topology *topo, int k)
{
    static __thread char buf[16];
    const struct ct_node_summary_dev *g;

    if (k < 0 || k >= topo->ngpus || !topo->model.gpus[k].has_pci)
        return NULL;
    g = &topo->model.gpus[k];
    snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", g->pci[0], g->pci[1], g->pci[2], g->pci[3]);
    return buf;
}

/* The topology's PCI position of a PCI bus id (case-insensitive: the driver writes lower case,
 * some tools upper), else -1. */
static int gpu_at_pci(const ct_topology *topo, const char *pci)
{
    for (int k = 0; k < topo->ngpus; k++) {
        const char *p = ct_topology_gpu_pci(topo, k);

        if (p && !strcasecmp(p, pci))
            return k;
    }
    return -1;
}

/* The GPU of SLURM's number n through its device file and the driver's table: its PCI position. */
static int gpu_of_file(const ct_topology *topo, long n, const ct_gres_files *files, const ct_gpu_dev *devs,
                       int ndevs, char *why, size_t wsize, ct_error *err)
{
    const char *file, *pci = NULL;
    int k;

    if (n >= files->nfiles) {
        ct_error_set(err, CT_EINVAL, "bind-gres", "SLURM's GPU %ld has no device file: gres.conf lists %d for "
                     "this node", n, files->nfiles);
        ct_error_hint(err, "restart slurmd after changing gres.conf, so that SLURM and its file agree");
        return CT_EINVAL;
    }
    file = files->files[n];
    for (int i = 0; i < ndevs && !pci; i++)
        if (!strcmp(devs[i].file, file))
            pci = devs[i].pci;
    if (!pci) {
        ct_error_set(err, CT_EINVAL, "bind-gres", "SLURM's GPU %ld is %s (gres.conf), a device the driver does not "
                     "list (/proc/driver/nvidia/gpus, /sys/class/drm)", n, file);
        ct_error_hint(err, "check gres.conf's File= against the node's GPUs (nvidia-smi -q | grep Minor)");
        return CT_EINVAL;
    }
    if ((k = gpu_at_pci(topo, pci)) < 0) {
        ct_error_set(err, CT_EINVAL, "bind-gres", "SLURM's GPU %ld is %s at PCI %s, which the topology has no GPU "
                     "at", n, file, pci);
        ct_error_hint(err, "give the plugin this node's topology (lstopo --of xml --whole-io FILE)");
        return CT_EINVAL;
    }
    if (k != n && strlen(why) + 1 < wsize)
        snprintf(why + strlen(why), wsize - strlen(why), "%sSLURM's GPU %ld is %s, at PCI %s (the driver's table): "
                 "GPU %d in PCI order, where SLURM's CUDA_VISIBLE_DEVICES counts GPU %ld",
                 why[0] ? "; " : "", n, file, pci, k, n);
    return k;
}

/* A device file a driver's table can name: NVIDIA's nvidiaM, DRM's renderDN. Others (MIG's
 * nvidia-caps/nvidia-capN, a site's own names) are not in the table: SLURM's PCI order stands. */
static int file_is_mappable(const char *file)
{
    const char *digits = !strncmp(file, "nvidia", 6) ? file + 6 : !strncmp(file, "renderD", 7) ? file + 7 : NULL;

    return digits && *digits && strspn(digits, "0123456789") == strlen(digits);
}

static int files_mappable(const ct_gres_files *files)
{
    for (int i = 0; i < files->nfiles; i++)
        if (!file_is_mappable(files->files[i]))
            return 0;
    return files->nfiles > 0;
}

int ct_gres_map(const ct_topology *topo, const char *list, const ct_gres_files *files, const ct_gpu_dev *devs,
                int ndevs, char *out, size_t size, char *why, size_t wsize, ct_error *err)
{
    char buf[1024], *save = NULL;
    int by_file = files && !files->autodetect && !files->unknown && files_mappable(files) && ndevs > 0;
    size_t len = 0;

    out[0] = '\0';
    if (wsize)
        why[0] = '\0';
    if (ct_str_copy(buf, sizeof(buf), list) != 0)
        return ct_error_set(err, CT_EINVAL, "bind-gpus", "SLURM's GPU list is longer than %zu characters",
                            sizeof(buf) - 1);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long n;
        int k;

        if (ct_parse_long(tok, 0, 1 << 20, &n) != 0)
            return ct_error_set(err, CT_EINVAL, "bind-gpus", "SLURM's GPU list '%s' has '%s', not a GPU number",
                                list, tok);
        if (by_file && (k = gpu_of_file(topo, n, files, devs, ndevs, why, wsize, err)) < 0)
            return k;
        if (!by_file && n >= topo->ngpus) {
            ct_error_set(err, CT_EINVAL, "bind-gpus", "SLURM's GPU %ld is not on this node's topology (%d GPU%s)",
                         n, topo->ngpus, topo->ngpus == 1 ? "" : "s");
            ct_error_hint(err, "give the plugin this node's topology (lstopo --of xml --whole-io FILE)");
            return CT_EINVAL;
        }
        if (!by_file)
            k = (int)n;
        if (len + 12 >= size)
            return ct_error_set(err, CT_EINVAL, "bind-gpus", "SLURM's GPU list '%s' is too long", list);
        len += (size_t)snprintf(out + len, size - len, "%s%d", len ? "," : "", k);
    }
    return 0;
}
