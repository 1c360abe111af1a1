/* SPDX-License-Identifier: BSD-3-Clause */
/* The fork launcher (ddp_fork, alias ddp_spawn): for programs that call the library. The call
 * forks nprocs workers at that point; each takes its PMIx variables from the server process
 * (through the handle filled over the server's pipe), runs the body, and sends its outcome to
 * the caller through a pipe; rank 0 sends its result buffer too, so the call returns as if it had
 * run in-process. The caller must not have initialised MPI or PMIx itself.
 * See include/ctrain/launcher.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctrain/launcher.h"
#include "engine/launchers/proc_supervisor.h"

struct fork_job {
    ct_launch_body body;
    void *arg;
    size_t result_size;
};

static void fork_rank_main(const struct ct_rank_ctx *ctx)
{
    const struct fork_job *job = ctx->arg;
    void *result = job->result_size ? calloc(1, job->result_size) : NULL;
    ct_error e;
    int rc;

    ct_error_clear(&e);
    if (job->result_size && !result)
        rc = ct_error_set(&e, CT_ENOMEM, "oom", "rank %d: out of memory for the result buffer",
                          ctx->rank);
    else
        rc = ct_pmix_server_apply_env(ctx->server, ctx->rank, &e);
    if (rc == 0)
        rc = job->body(job->arg, result, job->result_size, &e);
    ct_proc_supervisor_report(ctx->report_fd, rc, &e, ctx->rank == 0 && rc == 0 ? result : NULL,
                         job->result_size);
    fflush(NULL);
    /* _exit: the caller's atexit handlers belong to the caller, not to its workers. */
    _exit(rc == 0 ? 0 : rc == CT_EINTR ? CT_LAUNCHER_EXIT_STOPPED : ct_error_exit_status(rc));
}

static int fork_launch(const ct_launch_spec *spec, ct_launch_body body, void *arg, void *result,
                       size_t result_size, ct_error *err)
{
    struct fork_job job = { .body = body, .arg = arg, .result_size = result ? result_size : 0 };

    /* The caller goes on with rank 0's result, as if it had run it. */
    return ct_proc_supervisor_run(spec, fork_rank_main, &job, result, job.result_size, err);
}

const struct ct_launcher_ops ct_launcher_fork = {
    .launch = fork_launch,
};
