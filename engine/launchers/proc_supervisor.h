/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the process supervisor shared by the subprocess and fork launchers (internal).
 *
 * ct_proc_supervisor_run starts the PMIx server process, forks nprocs ranks (each runs rank_main,
 * which never returns), and watches them: forwards SIGINT, SIGTERM and SIGUSR1; when a rank dies
 * or exits non-zero, ends the others (SIGTERM, then SIGKILL after kill_grace_s) and reports which
 * rank failed and how; passes rank 0's output as is and prefixes the others' lines "[rank N] ".
 * Returns only when every rank and the server are reaped and the server's directory is gone.
 */
#ifndef CTRAIN_LAUNCHERS_PROC_SUPERVISOR_H
#define CTRAIN_LAUNCHERS_PROC_SUPERVISOR_H

#include <stddef.h>

#include "ctrain/error.h"
#include "ctrain/launcher.h"
#include "ctrain/pmix_server.h"

struct ct_rank_ctx {
    int rank;
    int nprocs;
    ct_pmix_server *server;   /* the rank's PMIx variables: ct_pmix_server_rank_env / apply_env */
    int report_fd;            /* ct_proc_supervisor_report writes here (close-on-exec) */
    void *arg;
};

/* Runs in the forked rank with signals, descriptors and CTRAIN_LAUNCHER_* set up. Must not
 * return (exec or _exit). */
typedef void (*ct_rank_main_fn)(const struct ct_rank_ctx *ctx);

/* result (result_size bytes) receives what rank 0 sent with ct_proc_supervisor_report, when it did. */
int ct_proc_supervisor_run(const ct_launch_spec *spec, ct_rank_main_fn rank_main, void *arg,
                      void *result, size_t result_size, ct_error *err);

/* In a rank: tell the supervisor how the rank's work ended (rc, err) and, from rank 0, its result.
 * A rank that exits without reporting is judged by its exit status alone. */
int ct_proc_supervisor_report(int fd, int rc, const ct_error *err, const void *result, size_t size);

#endif
