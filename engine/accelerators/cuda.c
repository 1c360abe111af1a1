/* The cuda accelerator: NVIDIA GPUs through the CUDA runtime, one process per GPU.
 *
 * Compiled only when the CUDA toolkit is present (CT_HAVE_CUDA). Nothing here runs at start-up:
 * ct_engine_init() only registers the ops, and the first CUDA call happens when the connector asks
 * whether cuda is available. On a machine without the driver (no libcuda.so.1) the runtime's calls
 * fail cleanly; is_available turns that into the reason the connector prints.
 *
 * Device ids are relative to CUDA_VISIBLE_DEVICES (the CUDA runtime numbers the visible devices
 * from 0), which is how SLURM's gres and the SPANK plugin hand GPUs to tasks.
 */
#ifdef CT_HAVE_CUDA
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "engine/accelerators/accelerators.h"
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

static int cuda_is_available(char *why, size_t why_size)
{
    int n = 0;
    cudaError_t e;

    if (why_size)
        why[0] = '\0';
    if (!driver_present(why, why_size))
        return 0;
    e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");

        snprintf(why, why_size, "no CUDA device%s%s%s", vis ? " (CUDA_VISIBLE_DEVICES=" : "",
                 vis ? vis : "", vis ? ")" : "");
        return 0;
    }
    if (e != cudaSuccess) {
        snprintf(why, why_size, "CUDA runtime: %s", cudaGetErrorString(e));
        return 0;
    }
    return 1;
}

static int cuda_device_count(void)
{
    int n = 0;
    char why[128];

    if (!cuda_is_available(why, sizeof(why)))
        return 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

/* The strategy passes the device of this process's local rank. When the process sees exactly one
 * device, SLURM or the SPANK plugin bound it to this task (CUDA_VISIBLE_DEVICES per task), so
 * whatever the local rank, that device is ours. */
static int cuda_set_device(int id, ct_error *err)
{
    int n = cuda_device_count();
    cudaError_t e;

    if (n == 1)
        id = 0;
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

const struct ct_accelerator_ops ct_accelerator_cuda = {
    .name = "cuda",
    .is_available = cuda_is_available,
    .device_count = cuda_device_count,
    .set_device = cuda_set_device,
    .memory_stats = cuda_memory_stats,
};
#endif
