/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helper: ddp's NCCL path (engine/strategies/ddp_nccl.c) on this machine's GPUs (TAP).
 *
 *   nccl_check [--ranks N] [--timeout S]
 *
 * ctrain's own launcher (subprocess: fresh processes, a PMIx server of ctrain's) starts N ranks
 * (default 1), each on GPU N % devices. Rank 0's ncclUniqueId travels through the PMIx key-value
 * store and every rank joins a non-blocking communicator (ct_nccl_create: ncclConfig_t blocking=0,
 * ncclCommGetAsyncError polled against a deadline of S seconds, default 60); then a broadcast from
 * rank 0, an allreduce with ncclAvg (ct_nccl_allreduce_start + ct_nccl_wait, ordered after the
 * compute stream), the communicator's clean end, and on rank 0 the abort path: a communicator
 * of one more rank than there are, whose missing peer never comes, still in progress after 3 s,
 * is ended by ncclCommAbort in bounded time. The supervisor adds "every rank exited 0".
 *
 * With one rank the collectives run NCCL's code paths but move no data between GPUs; the output
 * says so: two GPUs (--ranks 2) check the transport and ncclAvg's division over ranks.
 * Exit 0: every test passed, or all were skipped (no CUDA device, no CUDA in the build: "1..0 #
 * SKIP" and why); 1: a test failed or a rank died; 2: bad arguments.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctrain/accelerator.h"
#include "ctrain/engine.h"
#include "ctrain/launcher.h"
#include "ctrain/registry.h"
#include "ctrain/util.h"

#ifdef CT_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "engine/nn/cuda_device.h"
#include "engine/collectives/nccl_lib.h"
#endif

#define N_RANK_TESTS 5
#define ABORT_WAIT_S 3.0
#define ABORT_LIMIT_S 10.0
#define COUNT (1u << 20) /* 4 MiB of floats: NCCL's large-message path, not only its small one */

struct opts {
    int ranks;
    double timeout_s;
};

static const struct ct_accelerator_ops *cuda_ops(void)
{
    const ct_registry_entry *e;

    ct_engine_init();
    e = ct_registry_find(CT_REG_ACCELERATOR, "cuda");
    return e ? e->ops : NULL;
}

#ifdef CT_HAVE_CUDA
static int n_done;

__attribute__((format(printf, 2, 3))) static int tap(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%sok %d - ", ok ? "" : "not ", ++n_done);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    return ok ? 0 : 1;
}

/* Host <-> device through the compute stream, waited for (as the CUDA MLP's host copies). */
static int copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    cudaStream_t s = (cudaStream_t)ct_cuda_compute_stream();

    return cudaMemcpyAsync(dst, src, bytes, kind, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess;
}

/* Elements of h that differ from want (every element, or i * 0.5 with want < 0). */
static size_t mismatches(const float *h, float want)
{
    size_t bad = 0;

    for (size_t i = 0; i < COUNT; i++)
        bad += h[i] != (want < 0 ? (float)i * 0.5f : want);
    return bad;
}

/* The abort path, as ddp_nccl.c's settle: a communicator whose last rank never arrives stays
 * ncclInProgress; at the deadline ncclCommAbort must end it promptly. */
static int check_abort(int world)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    ncclResult_t r, state = ncclInProgress;
    double t0, t1, t2;

    if ((r = ncclGetUniqueId(&id)) != ncclSuccess)
        return tap(0, "abort path: ncclGetUniqueId failed: %s", ncclGetErrorString(r));
    config.blocking = 0;
    t0 = ct_time_now();
    r = ncclCommInitRankConfig(&comm, world + 1, id, 0, &config);
    while ((r == ncclSuccess || r == ncclInProgress) && comm && state == ncclInProgress &&
           ct_time_now() - t0 < ABORT_WAIT_S) {
        struct timespec ts = { 0, 10000000 };

        nanosleep(&ts, NULL);
        if (ncclCommGetAsyncError(comm, &state) != ncclSuccess)
            break;
    }
    t1 = ct_time_now();
    if (comm)
        ncclCommAbort(comm);
    t2 = ct_time_now();
    printf("# abort path: init of %d ranks returned %s, state after %.1f s: %s; ncclCommAbort took %.3f s\n",
           world + 1, ncclGetErrorString(r), t1 - t0, ncclGetErrorString(state), t2 - t1);
    return tap(comm && state == ncclInProgress && t2 - t1 < ABORT_LIMIT_S,
               "abort path: a communicator missing a rank is still in progress after %.0f s; ncclCommAbort "
               "ends it in %.3f s",
               t1 - t0, t2 - t1);
}

static int rank_checks(int rank, int world, double timeout_s, ct_error *err)
{
    const struct ct_accelerator_ops *ops = cuda_ops();
    float *dev = NULL, *host = NULL;
    ct_nccl *n = NULL;
    double t0;
    int failed = 0, rc;

    if ((rc = ops->set_device(rank, err)))
        return rc;
    if (cudaMalloc((void **)&dev, COUNT * sizeof(float)) != cudaSuccess ||
        cudaMallocHost((void **)&host, COUNT * sizeof(float)) != cudaSuccess) {
        rc = ct_error_set(err, CT_ENOMEM, "nccl-check", "rank %d: no device or pinned memory for %u floats", rank,
                          COUNT);
        goto out;
    }

    t0 = ct_time_now();
    rc = ct_nccl_create(rank, world, timeout_s, NULL, &n, err);
    if (rc)
        printf("# rank %d: %s\n", rank, err->msg);
    failed += tap(rc == 0, "PMIx id exchange and non-blocking communicator set-up over %d rank(s) in %.2f s",
                  world, ct_time_now() - t0);
    if (rc)
        goto out;

    for (size_t i = 0; i < COUNT; i++)
        host[i] = rank == 0 ? (float)i * 0.5f : -1.0f;
    t0 = ct_time_now();
    rc = copy(dev, host, COUNT * sizeof(float), cudaMemcpyHostToDevice) ||
         ct_nccl_broadcast(n, dev, COUNT, 0, err) || copy(host, dev, COUNT * sizeof(float), cudaMemcpyDeviceToHost);
    failed += tap(rc == 0 && mismatches(host, -1) == 0, "broadcast of %u floats from rank 0 arrives whole (%.3f s)",
                  COUNT, ct_time_now() - t0);

    for (size_t i = 0; i < COUNT; i++)
        host[i] = (float)(rank + 1);
    t0 = ct_time_now();
    rc = copy(dev, host, COUNT * sizeof(float), cudaMemcpyHostToDevice) ||
         ct_nccl_allreduce_start(n, dev, COUNT, err) || ct_nccl_wait(n, err) ||
         copy(host, dev, COUNT * sizeof(float), cudaMemcpyDeviceToHost);
    failed += tap(rc == 0 && mismatches(host, (float)(world + 1) / 2) == 0,
                  "allreduce with ncclAvg: every element is the ranks' mean %.1f (%.3f s)", (world + 1) / 2.0,
                  ct_time_now() - t0);
    if (rc && err->msg[0])
        printf("# rank %d: %s\n", rank, err->msg);

    t0 = ct_time_now();
    ct_nccl_free(n);
    n = NULL;
    failed += tap(ct_time_now() - t0 < timeout_s, "ct_nccl_free ends the communicator in %.3f s (finalize and destroy; abort had finalize failed)",
                  ct_time_now() - t0);
    if (rank == 0)
        failed += check_abort(world);
    else
        n_done++; /* rank 0 prints the abort path's test */
    if (world == 1)
        printf("# one rank: the broadcast and allreduce ran NCCL's code but moved nothing between GPUs; "
               "two GPUs (nccl_check --ranks 2) check the transport and ncclAvg over ranks\n");
out:
    ct_nccl_free(n);
    cudaFree(dev);
    cudaFreeHost(host);
    if (failed && !rc)
        rc = ct_error_set(err, CT_EINTERNAL, "nccl-check", "rank %d: %d NCCL check(s) failed", rank, failed);
    return rc;
}
#endif

static int body(void *arg, void *result, size_t size, ct_error *err)
{
    const struct opts *o = arg;
    const char *r = getenv(CT_LAUNCHER_ENV_RANK);

#ifdef CT_HAVE_CUDA
    return rank_checks(r ? atoi(r) : 0, o->ranks, o->timeout_s, err);
#else
    (void)o, (void)r;
    return ct_error_set(err, CT_ENOTAVAIL, "nccl-check", "this build of ctrain has no CUDA support");
#endif
}

static int parse(int argc, char **argv, struct opts *o)
{
    o->ranks = 1;
    o->timeout_s = 60;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            o->ranks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            o->timeout_s = atof(argv[++i]);
        else
            return -1;
    }
    return o->ranks >= 1 && o->timeout_s > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    const struct ct_accelerator_ops *ops;
    ct_launch_spec spec = { .kill_grace_s = 5 };
    struct opts o;
    char why[256] = "this build of ctrain has no CUDA support";
    int rc, ndev = 0;
    ct_error err;

    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: nccl_check [--ranks N] [--timeout SECONDS]\n");
        return 2;
    }
    spec.nprocs = o.ranks;
    ct_error_clear(&err);
    /* A rank (the launcher re-executed this command line): only the body. */
    if (getenv(CT_LAUNCHER_ENV_RANK)) {
        rc = ct_launcher_subprocess.launch(&spec, body, &o, NULL, 0, &err);
        if (rc)
            ct_error_print(stderr, &err);
        return rc ? 1 : 0;
    }
    /* The supervisor never touches CUDA: availability is asked in a short-lived child. */
    ops = cuda_ops();
    if (!ops || !ops->is_available(why, sizeof(why))) {
        printf("1..0 # SKIP no CUDA device (%s): nothing of NCCL can run here\n", why);
        return 0;
    }
    ndev = ops->device_count();
    printf("1..%d\n# %d CUDA device(s), %d rank(s)\n", N_RANK_TESTS + 1, ndev, o.ranks);
    fflush(stdout);
    if (o.ranks > ndev) {
        printf("Bail out! --ranks %d needs %d GPUs; this machine has %d\n", o.ranks, o.ranks, ndev);
        return 1;
    }
    rc = ct_launcher_subprocess.launch(&spec, body, &o, NULL, 0, &err);
    if (rc)
        ct_error_print(stdout, &err);
    printf("%sok %d - every rank exited 0\n", rc ? "not " : "", N_RANK_TESTS + 1);
    return rc ? 1 : 0;
}
