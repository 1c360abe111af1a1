/* SPDX-License-Identifier: BSD-3-Clause */
/* SLURM's GPU numbers to physical GPUs; see include/ctrain/gres.h for what SLURM's numbers are. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ctrain/gres.h"
#include "ctrain/hostlist.h"
#include "ctrain/util.h"
#include "engine/bind/topology_internal.h"

/* The value of key in a gres.conf line's words (keys are case-insensitive), else NULL. */
static const char *word_value(char *const *words, int n, const char *key)
{
    size_t len = strlen(key);
    const char *v = NULL;

    for (int i = 0; i < n; i++)
        if (!strncasecmp(words[i], key, len) && words[i][len] == '=')
            v = words[i] + len + 1;
    return v;
}

/* 1 when NodeName= (a hostlist) names node, or the line has none. */
static int line_is_node(char *const *words, int n, const char *node)
{
    const char *names = word_value(words, n, "NodeName");
    ct_hostlist *hl = NULL;
    ct_error err;
    int found;

    if (!names)
        return 1;
    if (!node || ct_hostlist_expand(names, &hl, &err) != 0)
        return 0;
    found = ct_hostlist_find(hl, node) >= 0;
    ct_hostlist_free(hl);
    return found;
}

/* File=/dev/nvidia[0-3] (or /dev/nvidia[0,2-3], or paths separated by commas): the basenames in
 * order, a hostlist expanded as slurmd does. The basename is what SLURM takes the number from. */
static int add_files(ct_gres_files *out, const char *file, ct_error *err)
{
    ct_hostlist *hl = NULL;

    if (ct_hostlist_expand(file, &hl, err) != 0 || ct_hostlist_count(hl) == 0) {
        ct_hostlist_free(hl);
        return ct_error_set(err, CT_EFORMAT, "gres-conf", "gres.conf: File=%s does not expand to device files", file);
    }
    for (size_t i = 0; i < ct_hostlist_count(hl) && out->nfiles < CT_GRES_MAX_FILES; i++) {
        const char *path = ct_hostlist_get(hl, i), *base = strrchr(path, '/');

        ct_str_copy(out->files[out->nfiles++], sizeof(out->files[0]), base ? base + 1 : path);
    }
    ct_hostlist_free(hl);
    return 0;
}

static int parse_line(char *line, const char *node, ct_gres_files *out, int *node_autodetect, ct_error *err)
{
    char *words[32], *save = NULL, *w;
    const char *name, *file, *autodetect;
    int n = 0;

    line[strcspn(line, "#")] = '\0';
    for (w = strtok_r(line, " \t\r", &save); w && n < 32; w = strtok_r(NULL, " \t\r", &save))
        words[n++] = w;
    if (n == 0)
        return 0;
    if (!strncasecmp(words[0], "Include", 7) && !strchr(words[0], '=')) {
        out->unknown = 1;
        return 0;
    }
    if (!line_is_node(words, n, node))
        return 0;
    name = word_value(words, n, "Name");
    autodetect = word_value(words, n, "AutoDetect");
    if (autodetect && (!name || !strcasecmp(name, "gpu"))) {
        /* A node's own AutoDetect wins over the global one, whatever their order. */
        int has_node = word_value(words, n, "NodeName") != NULL;

        if (has_node || !*node_autodetect)
            out->autodetect = strcasecmp(autodetect, "off") != 0;
        *node_autodetect |= has_node;
    }
    if (!name || strcasecmp(name, "gpu"))
        return 0;
    if (word_value(words, n, "MultipleFiles"))
        out->unknown = 1;
    file = word_value(words, n, "File");
    return file ? add_files(out, file, err) : 0;
}

int ct_gres_conf_parse(const char *text, const char *node, ct_gres_files *out, ct_error *err)
{
    char *copy = ct_strdup(text ? text : ""), *save = NULL;
    int node_autodetect = 0, rv = 0;

    memset(out, 0, sizeof(*out));
    if (!copy)
        return ct_error_set(err, CT_ENOMEM, "out-of-memory", "reading gres.conf: out of memory");
    for (char *line = strtok_r(copy, "\n", &save); line && rv == 0; line = strtok_r(NULL, "\n", &save))
        rv = parse_line(line, node, out, &node_autodetect, err);
    free(copy);
    return rv;
}

const char *ct_topology_gpu_pci(const ct_topology *topo, int k)
{
    static __thread char buf[16];
    const struct ct_gpu *g;

    if (k < 0 || k >= topo->ngpus || !topo->gpus[k].pcidev)
        return NULL;
    g = &topo->gpus[k];
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

int ct_gres_map(const ct_topology *topo, const char *list, const ct_gres_files *files, const ct_gpu_dev *devs,
                int ndevs, char *out, size_t size, char *why, size_t wsize, ct_error *err)
{
    char buf[1024], *save = NULL;
    int by_file = files && !files->autodetect && !files->unknown && files->nfiles > 0 && ndevs > 0;
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
