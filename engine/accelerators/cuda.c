/* SPDX-License-Identifier: BSD-3-Clause */
/* The cuda accelerator: NVIDIA GPUs through the CUDA runtime, one process per GPU.
 *
 * In the CUDA module libctrain-cuda.so.0 (CT_HAVE_CUDA builds; cuda_module.h), which libctrain loads
 * on the first question about cuda. Nothing here runs at start-up:
 * ct_engine_init() only registers the ops. Availability and the device count are asked in a child
 * process (see probe()), so the process that runs the connector stays CUDA-free until set_device.
 * On a machine without the driver (no libcuda.so.1) the answer is the reason the connector prints.
 *
 * Device ids are relative to CUDA_VISIBLE_DEVICES (the CUDA runtime numbers the visible devices
 * from 0), which is how SLURM's gres and the SPANK plugin hand GPUs to tasks.
 */
#ifdef CT_HAVE_CUDA
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "engine/accelerators/accelerators.h"
#include "engine/accelerators/cpu_threads.h"
#include "engine/nn/cuda_device.h"

/* The driver library is what the runtime needs; looking for it first gives a clearer reason than
 * the runtime's "CUDA driver version is insufficient" when there is no driver at all. */
static int driver_present(char *why, size_t why_size)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);

    if (!h) {
        snprintf(why, why_size, "no CUDA driver (libcuda.so.1 not found)");
        return 0;
    }
    dlclose(h);
    return 1;
}

/* What the probe found: the device count, or why there is none. */
struct probe {
    int done;
    int count;
    char why[200];
};

/* Ask the runtime in this process (the child of probe_in_child). */
static void probe_here(struct probe *p)
{
    cudaError_t e;
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");

    p->count = 0;
    p->why[0] = '\0';
    if (!driver_present(p->why, sizeof(p->why)))
        return;
    e = cudaGetDeviceCount(&p->count);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && p->count == 0)) {
        p->count = 0;
        snprintf(p->why, sizeof(p->why), "no CUDA device%s%s%s", vis ? " (CUDA_VISIBLE_DEVICES=" : "",
                 vis ? vis : "", vis ? ")" : "");
    } else if (e != cudaSuccess) {
        p->count = 0;
        snprintf(p->why, sizeof(p->why), "CUDA runtime: %s", cudaGetErrorString(e));
    }
}

/* The first CUDA call initialises the driver in the calling process, and a process forked after
 * that cannot use CUDA (the fork launcher forks the ranks from the process that ran the
 * connector). So the question is asked in a short-lived child, and the answer kept. */
static const struct probe *probe(void)
{
    static struct probe p;
    int fds[2];
    pid_t pid;
    int status;

    if (p.done)
        return &p;
    p.done = 1;
    if (pipe(fds) != 0 || (pid = fork()) < 0) {
        probe_here(&p); /* no child to spare: ask here (only ddp_fork then suffers) */
        return &p;
    }
    if (pid == 0) {
        struct probe c;

        close(fds[0]);
        probe_here(&c);
        if (write(fds[1], &c, sizeof(c)) != (ssize_t)sizeof(c))
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], &p, sizeof(p)) != (ssize_t)sizeof(p)) {
        p.count = 0;
        snprintf(p.why, sizeof(p.why), "the CUDA probe process failed");
    }
    p.done = 1;
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return &p;
}

static int cuda_is_available(char *why, size_t why_size)
{
    const struct probe *p = probe();

    if (why_size)
        snprintf(why, why_size, "%s", p->why);
    return p->count > 0;
}

static int cuda_device_count(void)
{
    return probe()->count;
}

/* A process that sees exactly one device was bound to it (SLURM's gres, the SPANK plugin's
 * CUDA_VISIBLE_DEVICES per task): it is this process's device whatever the local rank. */
static int local_device(int id)
{
    return cuda_device_count() == 1 ? 0 : id;
}

/* The strategy passes the device of this process's local rank. */
static int cuda_set_device(int id, ct_error *err)
{
    int n = cuda_device_count();
    cudaError_t e;

    id = local_device(id);
    if (id < 0 || id >= n) {
        ct_error_set(err, CT_ENOTAVAIL, "accelerator-device", "cuda device %d does not exist: this process sees %d",
                     id, n);
        return ct_error_hint(err, "device ids count from 0 within CUDA_VISIBLE_DEVICES; check --devices");
    }
    e = cudaSetDevice(id);
    if (e != cudaSuccess) {
        ct_error_set(err, CT_EIO, "accelerator-device", "cudaSetDevice(%d): %s", id, cudaGetErrorString(e));
        return ct_error_hint(err, "check nvidia-smi and the GPU's compute mode");
    }
    return 0;
}

/* Free/total from the driver; this process's use and peak from ctrain's device allocator. */
static int cuda_memory_stats(int id, ct_memstats *out)
{
    size_t free_b = 0, total_b = 0;
    int cur = -1;

    memset(out, 0, sizeof(*out));
    id = local_device(id);
    if (cudaGetDevice(&cur) != cudaSuccess || cur != id)
        if (cudaSetDevice(id) != cudaSuccess)
            return CT_EIO;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        return CT_EIO;
    out->total_bytes = total_b;
    out->used_bytes = ct_cuda_alloc_bytes();
    out->peak_bytes = ct_cuda_alloc_peak_bytes();
    return 0;
}

/* The model's CUDA implementation, when one is registered (the MLP's: engine/models). */
static int cuda_model_to_device(ct_model *host, const ct_model_placement *where, ct_model **out, ct_error *err)
{
    ct_model_impl_fn fn = ct_model_find_impl(host->name, "cuda");

    *out = NULL;
    if (!fn) {
        ct_error_set(err, CT_ENOTAVAIL, "model-not-on-accelerator", "model %s is not implemented on cuda", host->name);
        return ct_error_hint(err, "use --accelerator cpu");
    }
    return fn(host, where, out, err);
}

/* Its name is its descriptor's (engine/registry/accelerator_cuda.c): accelerators.c copies it in. */
const struct ct_accelerator_ops ct_accelerator_cuda = {
    .device_memory = 1,
    .model_to_device = cuda_model_to_device,
    .is_available = cuda_is_available,
    .device_count = cuda_device_count,
    .set_device = cuda_set_device,
    .memory_stats = cuda_memory_stats,
    /* Its ranks' host threads are shared as cpu's are (every run shared them before this op). */
    .host_threads_setup = ct_cpu_threads_setup,
};
#endif
