/* SPDX-License-Identifier: BSD-3-Clause */
/* gres.conf as slurmd reads it for one node: its gpu device files in slurmd's order (the gres
 * indexes SLURM_STEP_GPUS counts) and its AutoDetect; see include/ctrain/gres_conf.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ctrain/gres_conf.h"
#include "ctrain/hostlist.h"
#include "ctrain/util.h"

/* SLURM's GRES name for GPUs (gres.conf Name=), not ctrain's accelerator. */
static const char gres_gpu[] = "gpu";

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

        base = base ? base + 1 : path;
        if (!base[0]) {
            ct_error_set(err, CT_EFORMAT, "gres-conf", "gres.conf: File=%s names a directory (%s), not a device file",
                         file, path);
            ct_hostlist_free(hl);
            return CT_EFORMAT;
        }
        ct_str_copy(out->paths[out->nfiles], sizeof(out->paths[0]), path);
        ct_str_copy(out->files[out->nfiles++], sizeof(out->files[0]), base);
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
    if (autodetect && (!name || !strcasecmp(name, gres_gpu))) {
        /* A node's own AutoDetect wins over the global one, whatever their order. */
        int has_node = word_value(words, n, "NodeName") != NULL;

        if (has_node || !*node_autodetect)
            out->autodetect = strcasecmp(autodetect, "off") != 0;
        *node_autodetect |= has_node;
    }
    if (!name || strcasecmp(name, gres_gpu))
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

