/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helper: drives ctrain's launchers directly.
 *
 *   launch_probe LAUNCHER MODE NPROCS [ARGS]     LAUNCHER: subprocess | fork | external
 *
 * MODE (what each rank's body does):
 *   mpi             MPI_Init, allreduce of the ranks, check the sum, MPI_Finalize
 *   exec PROG ARGS  replace the rank by PROG (e.g. mpi_allreduce: MPI without mpirun)
 *   kv              PMIx client before MPI_Init, put/commit/fence/get of every rank's value,
 *                   allreduce, MPI_Finalize, client finalize
 *   kvtimeout       rank 0 never reaches the fence; the others' 2 s fence times out
 *   hang DIR        MPI_Init, write DIR/rank.N.pid (rank 0: Open MPI's shared-memory and
 *                   session directories in DIR/ompi-dirs), sleep 120 s (the test kills a rank);
 *                   with PROBE_IGNORE_TERM set the ranks ignore SIGTERM
 *   exit R CODE     rank R exits with CODE at once, the others sleep 120 s
 *   usr1 DIR        write DIR/rank.N.pid, wait for SIGUSR1 (60 s at most), write DIR/rank.N.usr1
 *   result          nothing but rank 0 returning a result buffer
 *   args ...        rank 0 prints "probe: args N bytes B": the count and total length of ARGS as it
 *                   got them (the subprocess launcher re-executes the command line)
 *   env             the "pmix" cluster environment's detect/read/validate, then MPI (the shared
 *                   client stays connected under MPI_Init); with PROBE_LATE=R:S the rank whose
 *                   PMIX_RANK is R first sleeps S seconds, so its layout is read while the others
 *                   are in MPI_Init's fences
 *   detect          ct_pmix_env_register, then the registry's detection (pmix alone, or
 *                   enriching slurm / mpi), then MPI
 * With PROBE_CHILD=DIR set each rank first starts a child of its own (sleep 300) and writes its
 * pid to DIR/child.N.pid: the launcher must end it with the rank.
 * With PROBE_THREAD set the calling process first starts a thread that leaves every signal
 * unblocked and sleeps (a host program's thread, an OpenBLAS worker): a signal sent to the process
 * may be delivered there.
 * The calling process prints "probe: result: ..." (rank 0's result, fork launcher) and
 * "probe: ok", or the launcher's error; its exit status is ct_error_exit_status of the error.
 */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "ctrain/envs.h"
#include "ctrain/launcher.h"
#include "ctrain/pmix.h"
#include "pmix/environment.h"

struct probe {
    const char *mode;
    int argc;
    char **argv;   /* after NPROCS */
};

static int rank_env(void)
{
    const char *r = getenv(CT_LAUNCHER_ENV_RANK);
    return r ? atoi(r) : -1;
}

static int body_mpi(void *result, size_t size, ct_error *err)
{
    int rank, n;
    long mine, sum = -1;

    ct_pmix_client_before_mpi_init();   /* as the ddp strategy does (env, detect) */
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return ct_error_set(err, CT_ECOMM, "probe-mpi", "MPI_Init failed");
    if (ct_pmix_after_mpi_init(20, err))  /* as the ddp strategy does: no message into MPI_Init */
        return err->code;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    mine = rank;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (sum != (long)n * (n - 1) / 2)
        return ct_error_set(err, CT_ECOMM, "probe-sum", "rank %d of %d: allreduce sum %ld", rank,
                            n, sum);
    printf("allreduce ok rank %d of %d sum %ld\n", rank, n, sum);
    if (result)
        snprintf(result, size, "rank %d of %d sum %ld pid %ld", rank, n, sum, (long)getpid());
    return 0;
}

static int kv_exchange(ct_pmix_client *c, ct_error *err)
{
    int r = ct_pmix_client_rank(c), n = ct_pmix_client_size(c);
    char val[64], got[64];
    size_t len;
    int rc;

    snprintf(val, sizeof(val), "value-from-rank-%d", r);
    if ((rc = ct_pmix_put(c, "ctrain.probe", val, strlen(val) + 1, err)) ||
        (rc = ct_pmix_commit(c, err)) || (rc = ct_pmix_fence(c, 20, err)))
        return rc;
    for (int j = 0; j < n; j++) {
        if ((rc = ct_pmix_get(c, j, "ctrain.probe", got, sizeof(got), &len, err)))
            return rc;
        snprintf(val, sizeof(val), "value-from-rank-%d", j);
        if (strcmp(got, val))
            return ct_error_set(err, CT_ECOMM, "probe-kv", "rank %d read '%s' from rank %d", r,
                                got, j);
    }
    rc = ct_pmix_get(c, 0, "ctrain.absent", got, sizeof(got), &len, err);
    if (rc != CT_ENOENT)
        return ct_error_set(err, CT_EINTERNAL, "probe-kv", "absent key gave %d", rc);
    snprintf(val, sizeof(val), "value-from-rank-%d", n - 1);
    rc = ct_pmix_get(c, n - 1, "ctrain.probe", got, 4, &len, err);
    if (rc != CT_EINVAL || len != strlen(val) + 1)
        return ct_error_set(err, CT_EINTERNAL, "probe-kv", "small buffer gave %d, len %zu", rc, len);
    rc = ct_pmix_get(c, n, "ctrain.probe", got, sizeof(got), &len, err);
    if (rc != CT_EINVAL)
        return ct_error_set(err, CT_EINTERNAL, "probe-kv", "rank %d (out of range) gave %d", n, rc);
    rc = ct_pmix_put(c, "", "x", 1, err);
    if (rc != CT_EINVAL)
        return ct_error_set(err, CT_EINTERNAL, "probe-kv", "empty key gave %d", rc);
    ct_error_clear(err);
    return 0;
}

static int body_kv(void *result, size_t size, ct_error *err)
{
    ct_pmix_client *c;
    int rc = ct_pmix_client_init(&c, err);

    if (rc)
        return rc;
    printf("layout rank %d size %d local %d/%d node %d/%d equal %d host %s rank0 %s nspace %s\n",
           ct_pmix_client_rank(c), ct_pmix_client_size(c), ct_pmix_client_local_rank(c),
           ct_pmix_client_local_size(c), ct_pmix_client_node_rank(c),
           ct_pmix_client_num_nodes(c), ct_pmix_client_equal_per_node(c),
           ct_pmix_client_hostname(c), ct_pmix_client_rank0_host(c), ct_pmix_client_nspace(c));
    fflush(stdout);
    /* PMIx first, then MPI on the same connection under Open MPI 4.1 (PMIx_Init is
     * reference-counted), then the exchange. Open MPI 5 starts only without a PMIx client: the
     * exchange comes first and the client is gone before MPI_Init. */
    if (ct_pmix_mpi_init_needs_finalized()) {
        rc = kv_exchange(c, err);
        if (rc == 0)
            printf("kv ok rank %d of %d\n", ct_pmix_client_rank(c), ct_pmix_client_size(c));
        if (rc == 0 && result)
            snprintf(result, size, "kv ok size %d", ct_pmix_client_size(c));
        ct_pmix_client_finalize(c);
        return rc ? rc : body_mpi(NULL, 0, err);
    }
    rc = body_mpi(NULL, 0, err);
    if (rc == 0)
        rc = kv_exchange(c, err);
    if (rc == 0)
        printf("kv ok rank %d of %d\n", ct_pmix_client_rank(c), ct_pmix_client_size(c));
    if (rc == 0 && result)
        snprintf(result, size, "kv ok size %d", ct_pmix_client_size(c));
    ct_pmix_client_finalize(c);
    return rc;
}

static int body_kvtimeout(ct_error *err)
{
    ct_pmix_client *c;
    int rc = ct_pmix_client_init(&c, err);

    if (rc)
        return rc;
    if (ct_pmix_client_rank(c) == 0) {
        sleep(120);
        ct_pmix_client_finalize(c);
        return 0;
    }
    rc = ct_pmix_fence(c, 2, err);
    ct_pmix_client_finalize(c);
    return rc;
}

static int write_file(const char *dir, const char *ext, ct_error *err)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/rank.%d.%s", dir, rank_env(), ext);
    f = fopen(path, "w");
    if (!f)
        return ct_error_set(err, CT_EIO, "probe-file", "cannot write %s", path);
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
    return 0;
}

/* SIGUSR1 is the preemption warning: a rank notes it and ends cleanly. */
static int body_usr1(const char *dir, ct_error *err)
{
    sigset_t set;
    struct timespec tmo = { .tv_sec = 60 };
    int rc;

    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    if ((rc = write_file(dir, "pid", err)))
        return rc;
    if (sigtimedwait(&set, NULL, &tmo) != SIGUSR1)
        return ct_error_set(err, CT_ETIMEOUT, "probe-usr1", "rank %d: no SIGUSR1 in 60 s",
                            rank_env());
    return write_file(dir, "usr1", err);
}

static int body_hang(const char *dir, ct_error *err)
{
    int rc;

    if (getenv("PROBE_IGNORE_TERM"))
        signal(SIGTERM, SIG_IGN);   /* the supervisor must escalate to SIGKILL */
    ct_pmix_client_before_mpi_init();   /* as the ddp strategy does (env, detect) */
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return ct_error_set(err, CT_ECOMM, "probe-mpi", "MPI_Init failed");
    if ((rc = write_file(dir, "pid", err)))
        return rc;
    if (rank_env() == 0) {
        /* Where Open MPI keeps its files: the test checks they are gone after the kill. */
        char path[4096];
        FILE *f;
        snprintf(path, sizeof(path), "%s/ompi-dirs", dir);
        if ((f = fopen(path, "w"))) {
            /* Open MPI 4.1's names, else 5's (btl/sm; the session directory is the server's). */
            const char *a = getenv("OMPI_MCA_btl_vader_backing_directory");
            const char *b = getenv("OMPI_MCA_orte_tmpdir_base");
            if (!a)
                a = getenv("OMPI_MCA_btl_sm_backing_directory");
            if (!b)
                b = getenv("PMIX_SERVER_TMPDIR");
            fprintf(f, "%s %s\n", a ? a : "", b ? b : "");
            fclose(f);
        }
    }
    sleep(120);
    MPI_Finalize();
    return 0;
}

static const char *process_getenv(const char *name, void *ctx)
{
    return getenv(name);
}

static void late_rank_sleep(void)
{
    const char *late = getenv("PROBE_LATE"), *rank = getenv("PMIX_RANK"), *colon;

    if (late && rank && (colon = strchr(late, ':')) && atoi(late) == atoi(rank)) {
        struct timespec ts = { .tv_sec = 0, .tv_nsec = 0 };
        double s = atof(colon + 1);

        ts.tv_sec = (time_t)s;
        ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
}

static int body_env(ct_error *err)
{
    ct_env_info info;
    int rc;

    memset(&info, 0, sizeof(info));
    late_rank_sleep();
    if (!ct_env_pmix_ops.detect(process_getenv, NULL))
        return ct_error_set(err, CT_ENOTAVAIL, "probe-env", "pmix environment not detected");
    if ((rc = ct_env_pmix_ops.read(process_getenv, NULL, &info, err)) ||
        (rc = ct_env_pmix_ops.validate(&info, info.local_world_size, 1, err)))
        return rc;
    printf("env %s world %d rank %d local %d/%d node %d/%d equal %d main %s:%d job %s ext %d\n",
           info.name, info.world_size, info.global_rank, info.local_rank, info.local_world_size,
           info.node_rank, info.num_nodes, info.equal_tasks_per_node, info.main_address,
           info.main_port, info.job_id, info.creates_processes_externally);
    rc = ct_env_pmix_ops.validate(&info, info.local_world_size + 1, 0, err);
    if (rc != CT_ECONFLICT)
        return ct_error_set(err, CT_EINTERNAL, "probe-env", "--devices mismatch not refused");
    ct_error_clear(err);
    return body_mpi(NULL, 0, err);
}

static int body_detect(ct_error *err)
{
    const struct ct_env_ops *ops;
    ct_env_info info;
    int rc;

    if ((rc = ct_pmix_env_register()) ||
        (rc = ct_env_detect(process_getenv, NULL, NULL, &ops, &info, err)))
        return rc;
    printf("detect %s enriched_by %s world %d rank %d local %d/%d node %d/%d main %s\n", info.name,
           info.enriched_by[0] ? info.enriched_by : "-", info.world_size, info.global_rank,
           info.local_rank, info.local_world_size, info.node_rank, info.num_nodes,
           info.main_address);
    return body_mpi(NULL, 0, err);
}

/* PROBE_CHILD: a process the rank started, in the rank's process group. */
static void start_child(const char *dir)
{
    char path[4096];
    pid_t pid = fork();
    FILE *f;

    if (pid == 0) {
        execlp("sleep", "sleep", "300", (char *)NULL);
        _exit(127);
    }
    snprintf(path, sizeof(path), "%s/child.%d.pid", dir, rank_env());
    if (pid > 0 && (f = fopen(path, "w"))) {
        fprintf(f, "%ld\n", (long)pid);
        fclose(f);
    }
}

static int body(void *arg, void *result, size_t size, ct_error *err)
{
    const struct probe *p = arg;

    if (getenv("PROBE_CHILD"))
        start_child(getenv("PROBE_CHILD"));

    if (!strcmp(p->mode, "mpi"))
        return body_mpi(result, size, err);
    if (!strcmp(p->mode, "kv"))
        return body_kv(result, size, err);
    if (!strcmp(p->mode, "kvtimeout"))
        return body_kvtimeout(err);
    if (!strcmp(p->mode, "usr1") && p->argc >= 1)
        return body_usr1(p->argv[0], err);
    if (!strcmp(p->mode, "hang") && p->argc >= 1)
        return body_hang(p->argv[0], err);
    if (!strcmp(p->mode, "exit") && p->argc >= 2) {
        if (rank_env() == atoi(p->argv[0])) {
            if (getenv("PROBE_CHILD"))
                sleep(1);   /* every rank has started its child */
            fflush(NULL);
            _exit(atoi(p->argv[1]));
        }
        sleep(120);
        return 0;
    }
    if (!strcmp(p->mode, "exec") && p->argc >= 1) {
        execv(p->argv[0], p->argv);
        return ct_error_set(err, CT_ENOENT, "probe-exec", "cannot execute %s", p->argv[0]);
    }
    if (!strcmp(p->mode, "detect"))
        return body_detect(err);
    if (!strcmp(p->mode, "env"))
        return body_env(err);
    if (!strcmp(p->mode, "args")) {
        size_t bytes = 0;

        for (int i = 0; i < p->argc; i++)
            bytes += strlen(p->argv[i]);
        if (rank_env() <= 0)
            printf("probe: args %d bytes %zu\n", p->argc, bytes);
        return 0;
    }
    if (!strcmp(p->mode, "result")) {
        snprintf(result, size, "result from rank %d", rank_env());
        return 0;
    }
    return ct_error_set(err, CT_EINVAL, "probe-mode", "unknown mode '%s' or missing arguments",
                        p->mode);
}

static sem_t idle_started;

static void *idle_thread(void *arg)
{
    sigset_t none;

    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL);
    sem_post(&idle_started);
    for (;;)
        pause();
    return arg;
}

int main(int argc, char **argv)
{
    const struct ct_launcher_ops *ops = NULL;
    struct probe p;
    ct_launch_spec spec = { .kill_grace_s = 5 };
    char result[256] = "";
    int rc;
    ct_error err;

    if (argc < 4) {
        fprintf(stderr, "usage: launch_probe subprocess|fork|external MODE NPROCS [ARGS]\n");
        return 2;
    }
    if (!strcmp(argv[1], "subprocess"))
        ops = &ct_launcher_subprocess;
    else if (!strcmp(argv[1], "fork"))
        ops = &ct_launcher_fork;
    else if (!strcmp(argv[1], "external"))
        ops = &ct_launcher_external;
    if (!ops) {
        fprintf(stderr, "launch_probe: unknown launcher '%s'\n", argv[1]);
        return 2;
    }
    p.mode = argv[2];
    spec.nprocs = atoi(argv[3]);
    spec.quiet_others = getenv("PROBE_QUIET") != NULL;
    p.argc = argc - 4;
    p.argv = argv + 4;
    if (getenv("PROBE_IGNORE_CHLD"))
        signal(SIGCHLD, SIG_IGN);   /* a caller that ignores SIGCHLD must not hide the ranks' ends */
    if (getenv("PROBE_THREAD") && rank_env() < 0) {
        pthread_t t;

        if (sem_init(&idle_started, 0, 0) != 0 ||
            pthread_create(&t, NULL, idle_thread, NULL) != 0 || pthread_detach(t) != 0) {
            fprintf(stderr, "launch_probe: pthread_create failed\n");
            return 1;
        }
        /* The launch forks the PMIx server only once the thread runs its own code: a thread
         * still starting inside ASan's runtime (GCC 12's libsanitizer has no fork handlers)
         * holds its allocator's lock, and a fork then leaves that lock taken in the server for
         * good (seen as "did not get ready within 30 s" under make check-asan). */
        while (sem_wait(&idle_started) != 0)
            ;
    }
    ct_error_clear(&err);
    rc = ops->launch(&spec, body, &p, result, sizeof(result), &err);
    /* PROBE_TWICE: a second launch from the same process (fit, then test). */
    if (rc == 0 && getenv("PROBE_TWICE") && rank_env() < 0) {
        printf("probe: first launch: %s\n", result);
        rc = ops->launch(&spec, body, &p, result, sizeof(result), &err);
    }
    if (rc) {
        ct_error_print(stderr, &err);
        return ct_error_exit_status(rc);
    }
    /* Here in the caller (no rank variable): rank 0's result when the launcher returns it (fork,
     * external), none in subprocess's supervisor, whose ranks are other processes. */
    if (rank_env() < 0 && result[0])
        printf("probe: result: %s\n", result);
    if (rank_env() < 0)
        printf("probe: ok\n");
    return 0;
}
