/* SPDX-License-Identifier: BSD-3-Clause */
/* The loader of libctrain-cuda.so.0 (engine/accelerators/cuda_module.h): libctrain's only way to
 * CUDA. The module is loaded once (pthread_once), with dlopen(RTLD_NOW | RTLD_LOCAL), on the first
 * call that needs it; nothing at registration.
 *
 * Where it is looked for:
 *  - CTRAIN_CUDA_MODULE, when set: that file only (tests, or a site that keeps it elsewhere);
 *  - already in the process: an executable that linked the module's objects (t/tools/cuda_check,
 *    nccl_check, gpt_cuda_check) exports the table, and it is used as is (never a second copy);
 *  - beside the object this code is in: libctrain.so.0's directory (make install puts both in
 *    LIBDIR), or, for an executable linked with libctrain.a (the ctrain CLI), the executable's own
 *    directory (build/ctrain beside build/libctrain-cuda.so.0; a GPU kit keeps that layout);
 *  - then LIBDIR as `make install` was told (CT_CUDA_MODULE_LIBDIR): an installed ctrain in BINDIR.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/accelerators/cpu_threads.h"
#include "engine/accelerators/cuda_module.h"

#ifdef CT_HAVE_CUDA
#ifndef CTRAIN_VERSION
#error "CTRAIN_VERSION is set by the Makefile (from the file VERSION)"
#endif
#include "engine/accelerators/cuda_module_libdir.h" /* generated: CT_CUDA_MODULE_LIBDIR */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const struct ct_cuda_module *module;
static ct_error load_err;
static int loaded; /* set once module is */

/* dlerror's text names paths and libraries: escaped before it reaches a terminal. */
static int load_fail(const char *path, const char *what, const char *detail, const char *hint)
{
    char p[PATH_MAX * 2], d[600];

    ct_str_escape(p, sizeof(p), path);
    ct_str_escape(d, sizeof(d), detail ? detail : "");
    ct_error_set(&load_err, CT_ENOTAVAIL, "cuda-module", "cannot load ctrain's CUDA module %s: %s%s%s", p, what,
                 detail ? ": " : "", d);
    return ct_error_hint(&load_err, "%s", hint);
}

/* The directory of the object this code was linked into: libctrain.so's, or the executable's (the
 * main program's link map has an empty name: /proc/self/exe is its path). */
static int own_dir(char *dir, size_t size)
{
    Dl_info info;
    struct link_map *lm = NULL;
    char obj[PATH_MAX];
    char *slash;

    if (!dladdr1((void *)ct_cuda_module_get, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_name)
        return -1;
    if (!realpath(lm->l_name[0] ? lm->l_name : "/proc/self/exe", obj) || !(slash = strrchr(obj, '/')))
        return -1;
    *slash = '\0';
    snprintf(dir, size, "%s", obj[0] ? obj : "/");
    return 0;
}

/* The path to dlopen: CTRAIN_CUDA_MODULE, else the first of own_dir and LIBDIR that has it (own_dir
 * when neither has: the error names it). */
static void module_path(char *path, size_t size, int *from_env)
{
    const char *env = getenv("CTRAIN_CUDA_MODULE");
    char dir[PATH_MAX];

    *from_env = env && *env;
    if (*from_env) {
        snprintf(path, size, "%s", env);
        return;
    }
    if (!own_dir(dir, sizeof(dir))) {
        snprintf(path, size, "%s/%s", dir, CT_CUDA_MODULE_SONAME);
        if (!access(path, F_OK))
            return;
    }
    snprintf(path, size, "%s/%s", CT_CUDA_MODULE_LIBDIR, CT_CUDA_MODULE_SONAME);
    if (access(path, F_OK) && !own_dir(dir, sizeof(dir)))
        snprintf(path, size, "%s/%s", dir, CT_CUDA_MODULE_SONAME);
}

static int check_table(const char *path, const struct ct_cuda_module *m)
{
    char detail[160];

    if (m->abi != CT_CUDA_MODULE_ABI || m->size != sizeof(*m) || !m->version || strcmp(m->version, CTRAIN_VERSION)) {
        snprintf(detail, sizeof(detail), "table ABI %u (size %zu, ctrain %.40s), this ctrain needs ABI %d (size %zu, "
                 "ctrain %s)", m->abi, m->size, m->version ? m->version : "?", CT_CUDA_MODULE_ABI, sizeof(*m),
                 CTRAIN_VERSION);
        return load_fail(path, "it is from another build of ctrain", detail,
                         "install the libctrain-cuda.so.0 built with this ctrain (make install puts it beside "
                         "libctrain.so.0)");
    }
    return 0;
}

static void load(void)
{
    char path[PATH_MAX];
    const struct ct_cuda_module *m;
    int from_env;
    void *h;

    /* Linked in already (the CUDA test tools): that copy, not a second one. */
    if ((m = dlsym(RTLD_DEFAULT, CT_CUDA_MODULE_SYMBOL))) {
        if (!check_table("(linked into this program)", m)) {
            module = m;
            __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
        }
        return;
    }
    module_path(path, sizeof(path), &from_env);
    if (!(h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
        const char *why = dlerror();

        if (access(path, F_OK))
            load_fail(path, "no such file", NULL,
                      from_env ? "CTRAIN_CUDA_MODULE names a file that does not exist: unset it or fix the path"
                               : "this ctrain was built with CUDA but its module is not installed beside it "
                                 "(make install puts it in LIBDIR); or use --accelerator cpu");
        else
            load_fail(path, "dlopen failed", why,
                      "a CUDA library it needs (libcudart, libcublas, libcublasLt, libnccl) is missing or not "
                      "in the library path: check `ldd` on it and LD_LIBRARY_PATH (module load cuda); or use "
                      "--accelerator cpu");
        return;
    }
    if (!(m = dlsym(h, CT_CUDA_MODULE_SYMBOL))) {
        load_fail(path, "not a ctrain CUDA module", "no " CT_CUDA_MODULE_SYMBOL,
                  "install the libctrain-cuda.so.0 built with this ctrain, or unset CTRAIN_CUDA_MODULE");
        dlclose(h);
        return;
    }
    if (check_table(path, m)) {
        dlclose(h);
        return;
    }
    module = m; /* kept loaded for the process's life */
    __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
}

const struct ct_cuda_module *ct_cuda_module_get(ct_error *err)
{
    pthread_once(&once, load);
    if (!module && err)
        *err = load_err;
    return module;
}

int ct_cuda_module_loaded(void)
{
    /* Only a module already asked for counts: this loads nothing. */
    return __atomic_load_n(&loaded, __ATOMIC_ACQUIRE);
}

/* --- the cuda accelerator: the module's ops behind a load ------------------------------------- */

/* Whether the CUDA driver library is on this machine at all, without loading the module: auto-
 * detection on a CPU node stops here with the module's own reason (engine/accelerators/cuda.c). */
static int cuda_is_present(char *why, size_t why_size)
{
    void *h;

    if (ct_cuda_module_loaded())
        return 1;
    if (!(h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL))) {
        if (why_size)
            snprintf(why, why_size, "no CUDA driver (libcuda.so.1 not found)");
        return 0;
    }
    dlclose(h);
    return 1;
}

static int cuda_is_available(char *why, size_t why_size)
{
    ct_error err = { 0 };
    const struct ct_cuda_module *m = ct_cuda_module_get(&err);

    if (!m) {
        if (why_size)
            snprintf(why, why_size, "%s; %s", err.msg, err.hint);
        return 0;
    }
    return m->accelerator->is_available(why, why_size);
}

static int cuda_device_count(void)
{
    const struct ct_cuda_module *m = ct_cuda_module_get(NULL);

    return m ? m->accelerator->device_count() : 0;
}

static int cuda_set_device(int id, ct_error *err)
{
    const struct ct_cuda_module *m = ct_cuda_module_get(err);

    return m ? m->accelerator->set_device(id, err) : CT_ENOTAVAIL;
}

static int cuda_memory_stats(int id, ct_memstats *out)
{
    const struct ct_cuda_module *m = ct_cuda_module_get(NULL);

    memset(out, 0, sizeof(*out));
    return m ? m->accelerator->memory_stats(id, out) : CT_ENOTAVAIL;
}

static int cuda_model_to_device(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err)
{
    const struct ct_cuda_module *m = ct_cuda_module_get(err);

    *out = NULL;
    return m ? m->accelerator->model_to_device(host, where, out, err) : CT_ENOTAVAIL;
}

const struct ct_accelerator_ops ct_cuda_module_accelerator = {
    .device_memory = 1,
    .is_present = cuda_is_present,
    .is_available = cuda_is_available,
    .device_count = cuda_device_count,
    .set_device = cuda_set_device,
    .memory_stats = cuda_memory_stats,
    .model_to_device = cuda_model_to_device,
    /* libctrain's own (cuda's ranks share the host's threads as cpu's do): no load for it. */
    .host_threads_setup = ct_cpu_threads_setup,
};

int ct_cuda_module_mlp_create(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err)
{
    const struct ct_cuda_module *m = ct_cuda_module_get(err);

    *out = NULL;
    return m ? m->mlp_create(host, where, out, err) : CT_ENOTAVAIL;
}

int ct_cuda_module_gpt_create(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err)
{
    const struct ct_cuda_module *m = ct_cuda_module_get(err);

    *out = NULL;
    return m ? m->gpt_create(host, where, out, err) : CT_ENOTAVAIL;
}
#else /* no CUDA in this build: the cuda accelerator is not registered, so ddp never asks */
const struct ct_cuda_module *ct_cuda_module_get(ct_error *err)
{
    ct_error_set(err, CT_ENOTAVAIL, "accelerator-not-available", "this build of ctrain has no NCCL (no CUDA support)");
    ct_error_hint(err, "rebuild with the CUDA toolkit installed (make CUDA=1), or use --accelerator cpu");
    return NULL;
}

int ct_cuda_module_loaded(void) { return 0; }
#endif
