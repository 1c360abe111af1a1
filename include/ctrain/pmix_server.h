/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the PMIx server ctrain's local launchers host, so Open MPI's MPI_Init (and
 * ct_pmix_client_init) work in ranks started without mpirun or srun.
 *
 * The server lives in a process of its own, forked by ct_pmix_server_start from the calling
 * (PMIx-free) process: a rank forked without exec from a process that hosts a PMIx server hangs
 * in MPI_Init. The server registers one namespace of nprocs ranks, all on this node, registers
 * each rank as a client, and sends back over a pipe the environment PMIx_server_setup_fork gives
 * each rank (plus, for Open MPI 4.1, OMPI_MCA_ess=pmi, OMPI_MCA_schizo=^orte so Open MPI uses it;
 * Open MPI 5 has no such frameworks and needs none). Its fence gathers every rank's contribution
 * and returns it (PMIX_COLLECT_DATA).
 *
 * The server's files live in a private $TMPDIR/ctrain-pmix.XXXXXX (the job's PMIX_TMPDIR and
 * PMIX_NSDIR: PMIx 5's job store), where the ranks' Open MPI session directory goes too
 * (OMPI_MCA_orte_tmpdir_base for 4.1, PMIX_NSDIR for 5), and Open MPI's shared-memory files in
 * /dev/shm/ctrain-ompi.XXXXXX (OMPI_MCA_btl_vader_backing_directory, btl_sm_backing_directory for
 * 5) — unless those variables are set already. ct_pmix_server_stop removes both, so ranks killed before MPI_Finalize leave nothing.
 * The server process dies with its parent (PR_SET_PDEATHSIG) and when the parent closes its end
 * of the control pipe.
 */
#ifndef CTRAIN_PMIX_SERVER_H
#define CTRAIN_PMIX_SERVER_H

#include <sys/types.h>

#include "ctrain/error.h"

typedef struct ct_pmix_server ct_pmix_server;

/* Fork the server process for a job of nprocs ranks on this node and wait (up to 30 s) until it
 * is ready and every rank's environment has arrived. Call from a process that never called
 * PMIx_Init / MPI_Init. The caller should block SIGCHLD handling it does not own: the server
 * process is a child of the caller until ct_pmix_server_stop reaps it. */
int ct_pmix_server_start(int nprocs, ct_pmix_server **out, ct_error *err);

/* The variables rank needs, "NAME=VALUE" strings, NULL-terminated (owned by the server handle). */
char *const *ct_pmix_server_rank_env(const ct_pmix_server *s, int rank);

/* setenv(3) each of rank's variables in this process (a forked rank, before it initialises PMIx). */
int ct_pmix_server_apply_env(const ct_pmix_server *s, int rank, ct_error *err);

/* A new environment: envp (e.g. environ) with rank's variables set, replacing same-named ones.
 * Free with ct_pmix_server_env_free. NULL on out of memory. */
char **ct_pmix_server_env_merge(const ct_pmix_server *s, int rank, char *const *envp);
void ct_pmix_server_env_free(char **env);

/* Pid of the server process (the supervisor watches it: a server that dies ends the job). */
pid_t ct_pmix_server_pid(const ct_pmix_server *s);
/* The namespace of the job, "ctrain.<pid>.<launch number>", unique per launch. */
const char *ct_pmix_server_nspace(const ct_pmix_server *s);

/* Mark the server process as reaped by the caller (it waited for the pid itself). */
void ct_pmix_server_reaped(ct_pmix_server *s, int wait_status);

/* In a process forked from the launcher (a rank): close the handle's descriptors so the rank
 * does not keep the server alive; the handle must not be stopped from there. */
void ct_pmix_server_detach(ct_pmix_server *s);

/* Stop the server process (SIGTERM; SIGKILL after 5 s), reap it, remove its temporary directory,
 * free the handle. NULL is fine. */
void ct_pmix_server_stop(ct_pmix_server *s);

#endif
