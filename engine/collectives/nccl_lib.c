/* SPDX-License-Identifier: BSD-3-Clause */
/* NCCL collectives for ddp on cuda; see nccl_lib.h. Status: compiled, not yet run on a GPU. */
#ifdef CT_HAVE_CUDA
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "ctrain/pmix.h"
#include "ctrain/util.h"
#include "engine/nn/cuda_device.h"
#include "engine/collectives/nccl_lib.h"

#define NCCL_ID_KEY "ctrain.nccl_unique_id"

struct ct_nccl {
    ncclComm_t comm;
    cudaStream_t stream;   /* the allreduces' own stream */
    cudaStream_t compute;  /* the model's stream */
    cudaEvent_t ready;     /* compute stream's work so far (before an allreduce) */
    cudaEvent_t done;      /* allreduce stream's work so far (before the update) */
    double timeout_s;
    int failed;            /* the communicator must be aborted, not destroyed */
};

static int nccl_fail(ct_nccl *n, ncclResult_t r, const char *what, ct_error *err)
{
    if (n)
        n->failed = 1;
    ct_error_set(err, CT_ECOMM, "nccl", "ddp: NCCL %s failed: %s (%s)", what, ncclGetErrorString(r),
                 ncclGetLastError(n ? n->comm : NULL));
    return ct_error_hint(err, "a peer rank probably died or lost its network; see the other ranks' messages "
                              "(NCCL_DEBUG=WARN shows NCCL's own view)");
}

static int cuda_fail(ct_nccl *n, cudaError_t e, const char *what, ct_error *err)
{
    if (n)
        n->failed = 1;
    ct_error_set(err, CT_EIO, "cuda", "ddp: %s failed: %s", what, cudaGetErrorString(e));
    return ct_error_hint(err, "check the GPU with nvidia-smi");
}

static void nap(void)
{
    struct timespec ts = { 0, 100000 }; /* 0.1 ms: far below a collective's time, cheap for a core */

    nanosleep(&ts, NULL);
}

/* Non-blocking NCCL: a call may return ncclInProgress; poll the communicator's state until it
 * settles, an error shows or the deadline passes. */
static int settle(ct_nccl *n, ncclResult_t r, const char *what, ct_error *err)
{
    double deadline = ct_time_now() + n->timeout_s;

    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_fail(n, r, what, err);
    while (r == ncclInProgress) {
        if (ncclCommGetAsyncError(n->comm, &r) != ncclSuccess)
            return nccl_fail(n, r, what, err);
        if (r != ncclSuccess && r != ncclInProgress)
            return nccl_fail(n, r, what, err);
        if (r == ncclInProgress && ct_time_now() > deadline) {
            n->failed = 1;
            ct_error_set(err, CT_ETIMEOUT, "nccl-timeout", "ddp: NCCL %s did not finish in %.0f s", what,
                         n->timeout_s);
            return ct_error_hint(err, "a peer rank is probably dead or stuck; see the other ranks' messages");
        }
        if (r == ncclInProgress)
            nap();
    }
    return 0;
}

/* Wait for an event on the GPU while watching NCCL: a peer that dies mid-allreduce leaves the
 * kernel spinning, and only the communicator's async error (or the deadline) tells. */
static int wait_event(ct_nccl *n, cudaEvent_t ev, const char *what, ct_error *err)
{
    double deadline = ct_time_now() + n->timeout_s;
    ncclResult_t r;
    cudaError_t e;

    while ((e = cudaEventQuery(ev)) == cudaErrorNotReady) {
        if (ncclCommGetAsyncError(n->comm, &r) != ncclSuccess || (r != ncclSuccess && r != ncclInProgress))
            return nccl_fail(n, r, what, err);
        if (ct_time_now() > deadline) {
            n->failed = 1;
            ct_error_set(err, CT_ETIMEOUT, "nccl-timeout", "ddp: NCCL %s did not finish in %.0f s", what,
                         n->timeout_s);
            return ct_error_hint(err, "a peer rank is probably dead or stuck; see the other ranks' messages");
        }
        nap();
    }
    return e == cudaSuccess ? 0 : cuda_fail(n, e, what, err);
}

/* Rank 0's ncclUniqueId to every rank through the TCPStore (no PMIx server): rank 0 sets it, the
 * others wait for the key within timeout_s and read it. */
static int exchange_id_store(ct_tcpstore *store, int rank, double timeout_s, ncclUniqueId *id, ct_error *err)
{
    const char *const keys[1] = { NCCL_ID_KEY };
    void *v = NULL;
    size_t len = 0;
    ncclResult_t r;
    int rc;

    if (rank == 0) {
        if ((r = ncclGetUniqueId(id)) != ncclSuccess)
            return nccl_fail(NULL, r, "ncclGetUniqueId", err);
        return ct_tcpstore_set(store, NCCL_ID_KEY, id, sizeof(*id), err);
    }
    if ((rc = ct_tcpstore_wait(store, keys, 1, timeout_s, err)) ||
        (rc = ct_tcpstore_get(store, NCCL_ID_KEY, &v, &len, err)))
        return rc;
    if (len != sizeof(*id)) {
        free(v);
        return ct_error_set(err, CT_ECOMM, "nccl", "ddp: rank 0's NCCL id in the store at %s has %zu bytes, "
                            "expected %zu", ct_tcpstore_address(store), len, sizeof(*id));
    }
    memcpy(id, v, sizeof(*id));
    free(v);
    return 0;
}

/* Rank 0's ncclUniqueId to every rank through the PMIx key-value store. */
static int exchange_id(int rank, double timeout_s, ncclUniqueId *id, ct_error *err)
{
    ct_pmix_client *c = NULL;
    ncclResult_t r;
    size_t len = 0;
    int rc;

    if ((rc = ct_pmix_client_shared(&c, err)))
        return rc;
    if (rank == 0) {
        if ((r = ncclGetUniqueId(id)) != ncclSuccess)
            return nccl_fail(NULL, r, "ncclGetUniqueId", err);
        if ((rc = ct_pmix_put(c, NCCL_ID_KEY, id, sizeof(*id), err)))
            return rc;
    }
    if ((rc = ct_pmix_commit(c, err)) || (rc = ct_pmix_fence(c, timeout_s, err)))
        return rc;
    if ((rc = ct_pmix_get(c, 0, NCCL_ID_KEY, id, sizeof(*id), &len, err)))
        return rc;
    if (len != sizeof(*id))
        return ct_error_set(err, CT_ECOMM, "nccl", "ddp: rank 0's NCCL id has %zu bytes, expected %zu", len,
                            sizeof(*id));
    return 0;
}

int ct_nccl_create(int rank, int world, double timeout_s, ct_tcpstore *store, ct_nccl **out, ct_error *err)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    ct_nccl *n;
    cudaError_t e;
    int rc;

    *out = NULL;
    rc = store ? exchange_id_store(store, rank, timeout_s, &id, err) : exchange_id(rank, timeout_s, &id, err);
    if (rc)
        return rc;
    n = calloc(1, sizeof(*n));
    if (!n)
        return ct_error_set(err, CT_ENOMEM, NULL, "ddp: out of memory");
    n->timeout_s = timeout_s > 0 ? timeout_s : 600;
    n->compute = (cudaStream_t)ct_cuda_compute_stream();
    if ((e = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&n->done, cudaEventDisableTiming)) != cudaSuccess) {
        rc = cuda_fail(NULL, e, "creating the NCCL stream", err);
        ct_nccl_free(n);
        return rc;
    }
    /* Non-blocking: initialisation and collectives return at once, and we poll (settle), so a rank
     * that never arrives cannot hang this one. */
    config.blocking = 0;
    rc = settle(n, ncclCommInitRankConfig(&n->comm, world, id, rank, &config), "communicator set-up", err);
    if (rc) {
        ct_nccl_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

int ct_nccl_broadcast(ct_nccl *n, float *buf, size_t count, int root, ct_error *err)
{
    int rc;

    if ((rc = settle(n, ncclBroadcast(buf, buf, count, ncclFloat, root, n->comm, n->stream), "broadcast", err)))
        return rc;
    if (cudaEventRecord(n->done, n->stream) != cudaSuccess)
        return cuda_fail(n, cudaGetLastError(), "recording an event", err);
    return wait_event(n, n->done, "broadcast of the initial parameters", err);
}

int ct_nccl_allreduce_start(ct_nccl *n, float *buf, size_t count, ct_error *err)
{
    cudaError_t e;

    /* The bucket's gradients are final once the compute stream gets here. */
    if ((e = cudaEventRecord(n->ready, n->compute)) != cudaSuccess ||
        (e = cudaStreamWaitEvent(n->stream, n->ready, 0)) != cudaSuccess)
        return cuda_fail(n, e, "ordering an allreduce after backward", err);
    /* ncclAvg: the mean over the ranks in the collective itself, no scaling pass afterwards. */
    return settle(n, ncclAllReduce(buf, buf, count, ncclFloat, ncclAvg, n->comm, n->stream), "allreduce", err);
}

/* Order work on the collectives' stream after the compute stream's work so far. */
static int after_compute(ct_nccl *n, const char *what, ct_error *err)
{
    cudaError_t e;

    if ((e = cudaEventRecord(n->ready, n->compute)) != cudaSuccess ||
        (e = cudaStreamWaitEvent(n->stream, n->ready, 0)) != cudaSuccess)
        return cuda_fail(n, e, what, err);
    return 0;
}

int ct_nccl_allgather_start(ct_nccl *n, float *buf, size_t count, int rank, ct_error *err)
{
    int rc;

    if ((rc = after_compute(n, "ordering an all-gather after the compute stream", err)))
        return rc;
    /* In place: this rank's count floats at buf + rank * count (NCCL's in-place all-gather). */
    return settle(n, ncclAllGather(buf + (size_t)rank * count, buf, count, ncclFloat, n->comm, n->stream),
                  "all-gather", err);
}

int ct_nccl_reduce_scatter_start(ct_nccl *n, const float *send, float *recv, size_t count, ct_error *err)
{
    int rc;

    if ((rc = after_compute(n, "ordering a reduce-scatter after the compute stream", err)))
        return rc;
    /* ncclAvg, as the allreduce: the mean over the ranks of this rank's block. */
    return settle(n, ncclReduceScatter(send, recv, count, ncclFloat, ncclAvg, n->comm, n->stream), "reduce-scatter",
                  err);
}

int ct_nccl_wait(ct_nccl *n, ct_error *err)
{
    cudaError_t e;
    int rc;

    if ((e = cudaEventRecord(n->done, n->stream)) != cudaSuccess)
        return cuda_fail(n, e, "recording an event", err);
    if ((rc = wait_event(n, n->done, "gradient allreduce", err)))
        return rc;
    /* Already complete; keeps the ordering explicit for the update on the compute stream. */
    if ((e = cudaStreamWaitEvent(n->compute, n->done, 0)) != cudaSuccess)
        return cuda_fail(n, e, "ordering the update after the allreduce", err);
    return 0;
}

void ct_nccl_free(ct_nccl *n)
{
    if (!n)
        return;
    if (n->comm) {
        if (n->failed) {
            ncclCommAbort(n->comm); /* peers may be gone: destroy would wait for them */
        } else {
            ncclResult_t r = ncclCommFinalize(n->comm);
            double deadline = ct_time_now() + n->timeout_s;

            while (r == ncclInProgress && ct_time_now() < deadline) {
                nap();
                if (ncclCommGetAsyncError(n->comm, &r) != ncclSuccess)
                    break;
            }
            if (r == ncclSuccess)
                ncclCommDestroy(n->comm);
            else
                ncclCommAbort(n->comm);
        }
    }
    if (n->ready)
        cudaEventDestroy(n->ready);
    if (n->done)
        cudaEventDestroy(n->done);
    if (n->stream)
        cudaStreamDestroy(n->stream);
    free(n);
}
#endif
