/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — loading ctrain-bind.so (spank/bind.h). Its path is ctrain.so's own
 * directory, as the dynamic loader recorded it when SLURM loaded the plugin (plugstack.conf's
 * absolute path, or SLURM's PluginDir): a root-owned directory an admin chose, never one read from
 * the job's environment or the current directory. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "spank/bind.h"

static void *handle;
static const struct ct_spank_bind_ops *ops;

/* PATH_MAX bytes: ctrain.so's directory and "/ctrain-bind.so". */
static int helper_path(char *path, size_t size, ct_error *err)
{
    Dl_info info = { 0 };
    const char *slash;

    if (!dladdr((void *)ct_spank_bind_open, &info) || !info.dli_fname || info.dli_fname[0] != '/' ||
        !(slash = strrchr(info.dli_fname, '/'))) {
        ct_error_set(err, CT_EINTERNAL, "bind-helper", "the directory ctrain.so was loaded from is not known (%s)",
                     info.dli_fname ? info.dli_fname : "no path");
        return ct_error_hint(err, "give ctrain.so's absolute path in plugstack.conf, or start the step with "
                                  "--ctrain-bind=none");
    }
    if ((size_t)snprintf(path, size, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, CT_SPANK_BIND_FILE) >=
        size)
        return ct_error_set(err, CT_EINTERNAL, "bind-helper", "ctrain.so's directory path is too long");
    return 0;
}

const struct ct_spank_bind_ops *ct_spank_bind_open(ct_error *err)
{
    char path[PATH_MAX];
    const struct ct_spank_bind_ops *o;
    const char *why;

    if (ops)
        return ops;
    if (helper_path(path, sizeof(path), err) != 0)
        return NULL;
    /* NODELETE: it keeps the step's topology to the process's exit (topology_retire). */
    if (!(handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE))) {
        why = dlerror();
        ct_error_set(err, CT_ENOENT, "bind-helper", "loading the binding planner %s failed: %s", path,
                     why ? why : "unknown error");
        ct_error_hint(err, "install ctrain-bind.so beside ctrain.so (the same package, the same build), or start "
                           "the step with --ctrain-bind=none");
        return NULL;
    }
    o = dlsym(handle, CT_SPANK_BIND_SYMBOL);
    if (!o || o->size != sizeof(*o) || !o->version || strcmp(o->version, CTRAIN_VERSION)) {
        ct_error_set(err, CT_EINTERNAL, "bind-helper", "%s is not the binding planner of this ctrain.so (version %s, "
                     "it is %s)", path, CTRAIN_VERSION, o && o->version ? o->version : "unknown");
        ct_error_hint(err, "install ctrain.so and ctrain-bind.so of the same build");
        dlclose(handle);
        handle = NULL;
        return NULL;
    }
    ops = o;
    return ops;
}

void ct_spank_bind_close(void)
{
    if (handle)
        dlclose(handle);
    handle = NULL;
    ops = NULL;
}
