/* SPDX-License-Identifier: BSD-3-Clause */
/* The PMIx server ctrain's launchers host; see include/ctrain/pmix_server.h.
 *
 * Two halves: the parent side (start, env, stop) runs in the launcher and never touches libpmix
 * state; server_main runs in the forked server process. They talk over two pipes: the server
 * writes a report (ready + each rank's environment, or an error message) and blocks reading the
 * control pipe, whose end-of-file tells it to finalize and exit.
 * The sequence follows OpenPMIx's examples/server.c: server_init with a private tmpdir,
 * register_nspace with job- and per-rank data, setup_local_support, then per rank setup_fork and
 * register_client.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>
#include <pmix.h>
#include <pmix_server.h>

#include "ctrain/pmix_server.h"
#include "ctrain/util.h"

#define START_TIMEOUT_S 30.0

struct ct_pmix_server {
    pid_t pid;
    int reaped;
    int ctl_fd;               /* write end of the control pipe; closing it stops the server */
    int nprocs;
    char tmpdir[4096];
    char shmdir[4096];        /* Open MPI's shared-memory files, "" when /dev/shm is not usable */
    char nspace[PMIX_MAX_NSLEN + 1];
    char ***env;              /* env[rank] = NULL-terminated "NAME=VALUE" strings */
    volatile int32_t *stage;  /* shared with the server process: where its start-up is */
};

/* Where the server process is in its start-up, in a page it shares with the launcher: a start that
 * times out says which libpmix call the process was in, not only that it was late. */
enum server_stage { STAGE_FORKED, STAGE_INIT, STAGE_NSPACE, STAGE_CLIENTS, STAGE_READY };

static const char *const stage_names[] = {
    [STAGE_FORKED] = "not yet in libpmix",
    [STAGE_INIT] = "in PMIx_server_init",
    [STAGE_NSPACE] = "registering the job (PMIx_server_register_nspace, setup_local_support)",
    [STAGE_CLIENTS] = "registering the ranks (PMIx_server_setup_fork, register_client)",
    [STAGE_READY] = "ready",
};

/* ---------------------------------------------------------------- the server process */

/* Completion of a libpmix non-blocking call, signalled from its progress thread. */
struct op_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    pmix_status_t status;
};

static void op_init(struct op_wait *w)
{
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->done = 0;
    w->status = PMIX_SUCCESS;
}

static void op_done(pmix_status_t status, void *cbdata)
{
    struct op_wait *w = cbdata;

    pthread_mutex_lock(&w->lock);
    w->status = status;
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static pmix_status_t op_wait(struct op_wait *w, pmix_status_t rc)
{
    /* PMIX_OPERATION_SUCCEEDED: done at once, no callback comes. */
    if (rc == PMIX_OPERATION_SUCCEEDED)
        return PMIX_SUCCESS;
    if (rc != PMIX_SUCCESS)
        return rc;
    pthread_mutex_lock(&w->lock);
    while (!w->done)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    return w->status;
}

static pmix_status_t srv_connected(const pmix_proc_t *proc, void *server_object,
                                   pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t srv_finalized(const pmix_proc_t *proc, void *server_object,
                                   pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    return PMIX_OPERATION_SUCCEEDED;
}

/* MPI_Abort: acknowledge; the rank then exits with the status and the supervisor ends the job. */
static pmix_status_t srv_abort(const pmix_proc_t *proc, void *server_object, int status,
                               const char msg[], pmix_proc_t procs[], size_t nprocs,
                               pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    return PMIX_OPERATION_SUCCEEDED;
}

/* The library calls this once every local participant has contributed; all ranks are local, so
 * what it gathered is the whole job's data. libpmix may free data on return: hand back a copy. */
static pmix_status_t srv_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                               size_t ninfo, char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc,
                               void *cbdata)
{
    char *copy = NULL;

    if (ndata) {
        copy = malloc(ndata);
        if (!copy)
            return PMIX_ERR_NOMEM;
        memcpy(copy, data, ndata);
    }
    cbfunc(PMIX_SUCCESS, copy, ndata, cbdata, free, copy);
    return PMIX_SUCCESS;
}

/* Asked only for ranks on other nodes, and this job has none. */
static pmix_status_t srv_dmodex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                                pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    return PMIX_ERR_NOT_FOUND;
}

static pmix_server_module_t srv_module = {
    .client_connected = srv_connected,
    .client_finalized = srv_finalized,
    .abort = srv_abort,
    .fence_nb = srv_fence,
    .direct_modex = srv_dmodex,
};

/* "0,1,...,n-1" */
static char *rank_list(int n)
{
    size_t cap = (size_t)n * 12 + 1;
    char *s = malloc(cap);
    size_t off = 0;

    if (!s)
        return NULL;
    s[0] = '\0';
    for (int r = 0; r < n; r++)
        off += (size_t)snprintf(s + off, cap - off, r ? ",%d" : "%d", r);
    return s;
}

static void add_u32(void *list, const char *key, uint32_t v)
{
    PMIx_Info_list_add(list, key, &v, PMIX_UINT32);
}

static void add_rank(void *list, const char *key, pmix_rank_t v)
{
    PMIx_Info_list_add(list, key, &v, PMIX_PROC_RANK);
}

/* A map produced by PMIx_generate_regex/ppn is passed as is when it is a "pmix:" expression;
 * anything else (a compressed "blob:") is replaced by the plain list, which PMIx also parses. */
static void add_map(void *list, const char *key, const char *plain, int ppn)
{
    char *regex = NULL;
    pmix_status_t rc = ppn ? PMIx_generate_ppn(plain, &regex) : PMIx_generate_regex(plain, &regex);

    if (rc == PMIX_SUCCESS && regex && !strncmp(regex, "pmix:", 5))
        PMIx_Info_list_add(list, key, regex, PMIX_STRING);
    else
        PMIx_Info_list_add(list, key, plain, PMIX_STRING);
    free(regex);
}

/* Per-rank data (PMIX_PROC_DATA, PMIX_RANK first) as Open MPI's ess/pmi reads it. */
static void add_proc_data(void *job, int r, const char *host)
{
    void *p = PMIx_Info_list_start();
    pmix_data_array_t arr;
    uint16_t lr = (uint16_t)r;
    uint32_t zero = 0;

    add_rank(p, PMIX_RANK, (pmix_rank_t)r);
    PMIx_Info_list_add(p, PMIX_APPNUM, &zero, PMIX_UINT32);
    add_rank(p, PMIX_APPLDR, 0);
    add_rank(p, PMIX_APP_RANK, (pmix_rank_t)r);
    add_rank(p, PMIX_GLOBAL_RANK, (pmix_rank_t)r);
    PMIx_Info_list_add(p, PMIX_LOCAL_RANK, &lr, PMIX_UINT16);
    PMIx_Info_list_add(p, PMIX_NODE_RANK, &lr, PMIX_UINT16);
    PMIx_Info_list_add(p, PMIX_NODEID, &zero, PMIX_UINT32);
    PMIx_Info_list_add(p, PMIX_HOSTNAME, host, PMIX_STRING);
    PMIx_Info_list_convert(p, &arr);
    PMIx_Info_list_add(job, PMIX_PROC_DATA, &arr, PMIX_DATA_ARRAY);
    PMIX_DATA_ARRAY_DESTRUCT(&arr);
    PMIx_Info_list_release(p);
}

static pmix_status_t register_job(const char *nspace, int n, const char *tmpdir)
{
    char host[256] = "localhost";
    char *ranks = rank_list(n);
    void *job = PMIx_Info_list_start();
    pmix_data_array_t arr;
    struct op_wait w;
    pmix_status_t rc;
    pmix_nspace_t ns;

    if (!ranks)
        return PMIX_ERR_NOMEM;
    gethostname(host, sizeof(host) - 1);
    PMIx_Info_list_add(job, PMIX_JOBID, nspace, PMIX_STRING);
    /* The job's directories are ours, removed when the launch ends: PMIx 5's shared-memory job
     * store (gds/shmem2) and Open MPI 5's session directory go there instead of /tmp. */
    PMIx_Info_list_add(job, PMIX_TMPDIR, tmpdir, PMIX_STRING);
    PMIx_Info_list_add(job, PMIX_NSDIR, tmpdir, PMIX_STRING);
    add_u32(job, PMIX_UNIV_SIZE, (uint32_t)n);
    add_u32(job, PMIX_JOB_SIZE, (uint32_t)n);
    add_u32(job, PMIX_MAX_PROCS, (uint32_t)n);
    add_u32(job, PMIX_LOCAL_SIZE, (uint32_t)n);
    add_u32(job, PMIX_NODE_SIZE, (uint32_t)n);
    add_u32(job, PMIX_NUM_NODES, 1);
    add_u32(job, PMIX_JOB_NUM_APPS, 1);
    add_u32(job, PMIX_APPNUM, 0);
    add_rank(job, PMIX_LOCALLDR, 0);
    add_rank(job, PMIX_APPLDR, 0);
    PMIx_Info_list_add(job, PMIX_LOCAL_PEERS, ranks, PMIX_STRING);
    PMIx_Info_list_add(job, PMIX_HOSTNAME, host, PMIX_STRING);
    add_map(job, PMIX_NODE_MAP, host, 0);
    add_map(job, PMIX_PROC_MAP, ranks, 1);
    for (int r = 0; r < n; r++)
        add_proc_data(job, r, host);
    PMIx_Info_list_convert(job, &arr);
    PMIX_LOAD_NSPACE(ns, nspace);
    op_init(&w);
    rc = op_wait(&w, PMIx_server_register_nspace(ns, n, arr.array, arr.size, op_done, &w));
    if (rc == PMIX_SUCCESS) {
        op_init(&w);
        rc = op_wait(&w, PMIx_server_setup_local_support(ns, NULL, 0, op_done, &w));
    }
    PMIX_DATA_ARRAY_DESTRUCT(&arr);
    PMIx_Info_list_release(job);
    free(ranks);
    return rc;
}

static int write_str(int fd, const char *s)
{
    uint32_t len = (uint32_t)strlen(s);

    return ct_write_all(fd, &len, sizeof(len)) || ct_write_all(fd, s, len) ? -1 : 0;
}

static void report_error(int fd, const char *what, pmix_status_t rc)
{
    int32_t status = -1;
    char msg[512];

    snprintf(msg, sizeof(msg), "%s: %s", what, PMIx_Error_string(rc));
    if (ct_write_all(fd, &status, sizeof(status)) == 0)
        write_str(fd, msg);
}

/* Register rank r as a client and send its environment (setup_fork's PMIX_* variables). */
static pmix_status_t send_rank_env(int fd, const char *nspace, int r)
{
    pmix_proc_t proc;
    char **env = NULL;
    struct op_wait w;
    pmix_status_t rc;
    uint32_t count = 0;

    PMIX_LOAD_PROCID(&proc, nspace, (pmix_rank_t)r);
    rc = PMIx_server_setup_fork(&proc, &env);
    if (rc != PMIX_SUCCESS)
        return rc;
    op_init(&w);
    rc = op_wait(&w, PMIx_server_register_client(&proc, geteuid(), getegid(), NULL, op_done, &w));
    for (size_t i = 0; env && env[i]; i++)
        count++;
    if (rc == PMIX_SUCCESS && ct_write_all(fd, &count, sizeof(count)) != 0)
        rc = PMIX_ERR_UNREACH;
    for (size_t i = 0; rc == PMIX_SUCCESS && env && env[i]; i++)
        if (write_str(fd, env[i]) != 0)
            rc = PMIX_ERR_UNREACH;
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
    return rc;
}

static pmix_status_t init_server(const char *tmpdir)
{
    pmix_info_t info[2];
    pmix_status_t rc;

    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_SYSTEM_TMPDIR, tmpdir, PMIX_STRING);
    rc = PMIx_server_init(&srv_module, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    return rc;
}

/* Body of the server process. Never returns. */
static void server_main(int nprocs, const char *tmpdir, const char *nspace, int rep_fd,
                        int ctl_fd, pid_t parent, volatile int32_t *stage)
{
    pmix_status_t rc;
    int32_t ok = 0;
    char c;
    sigset_t none;

    /* Die with the launcher; Ctrl-C and SIGUSR1 are for the ranks, the launcher stops us. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    signal(SIGINT, SIG_IGN);
    signal(SIGUSR1, SIG_IGN);
    /* libpmix writes to its clients' sockets without MSG_NOSIGNAL (Linux has no SO_NOSIGPIPE): a
     * rank that dies while the server answers it would take the server, and with it every other
     * rank, down with SIGPIPE. The write's EPIPE is libpmix's lost connection instead. */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    /* Our clients are our own children under our uid: the kernel's peer credentials (psec
     * native) prove that. libpmix would otherwise pick munge whenever munged answers at
     * server_init, and a munged restarted while the ranks connect (its credential encoded,
     * not yet decoded) turns their MPI_Init into 'Unreachable'. A site's own choice stays. */
    setenv("PMIX_MCA_psec", "native", 0);
    *stage = STAGE_INIT;
    rc = init_server(tmpdir);
    if (rc != PMIX_SUCCESS) {
        report_error(rep_fd, "PMIx_server_init", rc);
        _exit(1);
    }
    *stage = STAGE_NSPACE;
    rc = register_job(nspace, nprocs, tmpdir);
    if (rc != PMIX_SUCCESS) {
        report_error(rep_fd, "PMIx_server_register_nspace", rc);
        PMIx_server_finalize();
        _exit(1);
    }
    if (ct_write_all(rep_fd, &ok, sizeof(ok)) != 0)
        _exit(1);
    *stage = STAGE_CLIENTS;
    for (int r = 0; r < nprocs; r++) {
        rc = send_rank_env(rep_fd, nspace, r);
        if (rc != PMIX_SUCCESS)
            _exit(1);   /* the parent sees a short report and says so */
    }
    *stage = STAGE_READY;
    close(rep_fd);
    /* Serve (libpmix's progress thread does the work) until the launcher closes the pipe. */
    for (;;) {
        ssize_t r = read(ctl_fd, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        break;
    }
    PMIx_server_finalize();
    _exit(0);
}

/* ---------------------------------------------------------------- the launcher side */

static int read_full(int fd, void *buf, size_t len, double deadline)
{
    char *p = buf;

    while (len) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        double left = deadline - ct_time_now();
        int pr;
        ssize_t r;

        if (left <= 0)
            return CT_ETIMEOUT;
        pr = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        r = read(fd, p, len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return CT_EIO;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

static int read_string(int fd, char **out, double deadline)
{
    uint32_t len;
    char *s;
    int rc = read_full(fd, &len, sizeof(len), deadline);

    if (rc)
        return rc;
    if (len > (1u << 20))
        return CT_EFORMAT;
    s = malloc((size_t)len + 1);
    if (!s)
        return CT_ENOMEM;
    rc = read_full(fd, s, len, deadline);
    if (rc) {
        free(s);
        return rc;
    }
    s[len] = '\0';
    *out = s;
    return 0;
}

#define OMPI_VARS_MAX 4

static int add_var(char ***slot, const char *name, const char *value)
{
    size_t len = strlen(name) + strlen(value) + 2;

    if (!(**slot = malloc(len)))
        return CT_ENOMEM;
    snprintf(**slot, len, "%s=%s", name, value);
    (*slot)++;
    return 0;
}

/* What Open MPI needs besides PMIx's variables. Its session directory and shared-memory files go
 * into our directories (unless the user chose others), so that ranks killed before MPI_Finalize
 * leave nothing in /tmp and /dev/shm once the launch is over.
 * Open MPI 4.1 (ORTE): ess=pmi and schizo=^orte make it take its layout from our server instead
 * of starting as a singleton; orte_tmpdir_base places its session directory; btl/vader's files.
 * Open MPI 5 (PRRTE): a rank has neither framework and reads its layout from any PMIx server as
 * is; its session directory is the job's PMIX_NSDIR (register_job); vader is now btl/sm. */
static int add_ompi_vars(const ct_pmix_server *s, char **slot)
{
    int rc = 0;

#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
    if (s->shmdir[0] && !getenv("OMPI_MCA_btl_sm_backing_directory") &&
        !getenv("OMPI_MCA_btl_vader_backing_directory"))
        rc = add_var(&slot, "OMPI_MCA_btl_sm_backing_directory", s->shmdir);
#else
    rc = add_var(&slot, "OMPI_MCA_ess", "pmi");
    if (rc == 0)
        rc = add_var(&slot, "OMPI_MCA_schizo", "^orte");
    if (rc == 0 && !getenv("OMPI_MCA_orte_tmpdir_base"))
        rc = add_var(&slot, "OMPI_MCA_orte_tmpdir_base", s->tmpdir);
    if (rc == 0 && s->shmdir[0] && !getenv("OMPI_MCA_btl_vader_backing_directory"))
        rc = add_var(&slot, "OMPI_MCA_btl_vader_backing_directory", s->shmdir);
#endif
    return rc;
}

static const char *stage_name(int32_t stage)
{
    if (stage < 0 || stage > STAGE_READY)
        return "in an unknown state";
    return stage_names[stage];
}

/* The first line of a small /proc file, without its newline; "" when it cannot be read. */
static void read_proc(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, size - 1) : -1;

    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    if (fd >= 0)
        close(fd);
}

/* "S futex_wait_queue, S do_epoll_wait": each thread's state and the kernel function it sleeps in
 * (/proc/PID/task/TID/stat and wchan), which tells a lock from a wait for events. */
static void describe_threads(pid_t pid, char *buf, size_t size)
{
    char path[64];
    DIR *d;
    struct dirent *e;
    size_t len = 0;

    snprintf(buf, size, "unknown");
    snprintf(path, sizeof(path), "/proc/%ld/task", (long)pid);
    if (!(d = opendir(path)))
        return;
    while ((e = readdir(d)) && len + 1 < size) {
        char state = '?', wchan[64] = "", stat[512] = "", *p;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/task/%.16s/stat", (long)pid, e->d_name);
        read_proc(path, stat, sizeof(stat));
        if ((p = strrchr(stat, ')')) && p[1])
            state = p[2];
        snprintf(path, sizeof(path), "/proc/%ld/task/%.16s/wchan", (long)pid, e->d_name);
        read_proc(path, wchan, sizeof(wchan));
        len += (size_t)snprintf(buf + len, size - len, "%s%c %s", len ? ", " : "", state,
                                wchan[0] && strcmp(wchan, "0") ? wchan : "running");
    }
    closedir(d);
}

static int read_report(ct_pmix_server *s, int fd, ct_error *err)
{
    double deadline = ct_time_now() + START_TIMEOUT_S;
    int32_t status;
    int rc = read_full(fd, &status, sizeof(status), deadline);

    if (rc == 0 && status != 0) {
        char *msg = NULL;
        read_string(fd, &msg, deadline);
        ct_error_set(err, CT_ECOMM, "pmix-server-start", "the PMIx server for %d ranks could not "
                     "start: %s", s->nprocs, msg ? msg : "(no message)");
        free(msg);
        return ct_error_hint(err, "check that %s is writable and that libpmix (PMIx 4) is "
                                  "installed; PMIX_MCA_* variables may also interfere", s->tmpdir);
    }
    for (int r = 0; rc == 0 && r < s->nprocs; r++) {
        uint32_t count;
        rc = read_full(fd, &count, sizeof(count), deadline);
        if (rc == 0 && count > 4096)
            rc = CT_EFORMAT;
        if (rc == 0 && !(s->env[r] = calloc((size_t)count + OMPI_VARS_MAX + 1, sizeof(char *))))
            rc = CT_ENOMEM;
        for (uint32_t i = 0; rc == 0 && i < count; i++)
            rc = read_string(fd, &s->env[r][i], deadline);
        if (rc == 0)
            rc = add_ompi_vars(s, s->env[r] + count);
    }
    if (rc == CT_ETIMEOUT) {
        char threads[512];

        describe_threads(s->pid, threads, sizeof(threads));
        ct_error_set(err, CT_ETIMEOUT, "pmix-server-start", "the PMIx server for %d ranks did not "
                     "get ready within %g s: its process (pid %ld) is still %s (threads: %s)",
                     s->nprocs, START_TIMEOUT_S, (long)s->pid, stage_name(*s->stage), threads);
        return ct_error_hint(err, "libpmix stalled at its start; PMIX_MCA_* variables, or a slow "
                                  "file system under TMPDIR, can do this");
    }
    if (rc)
        return ct_error_set(err, CT_ECOMM, "pmix-server-start", "the PMIx server for %d ranks "
                            "stopped before handing out every rank's environment (%s)",
                            s->nprocs, ct_error_code_name(rc));
    return 0;
}

static int make_tmpdir(ct_pmix_server *s, ct_error *err)
{
    const char *base = getenv("TMPDIR");

    if (!base || !*base)
        base = "/tmp";
    snprintf(s->tmpdir, sizeof(s->tmpdir), "%s/ctrain-pmix.XXXXXX", base);
    if (!mkdtemp(s->tmpdir)) {
        ct_error_set(err, CT_EIO, "pmix-tmpdir", "cannot create the PMIx server directory "
                     "%s: %s", s->tmpdir, strerror(errno));
        s->tmpdir[0] = '\0';
        return ct_error_hint(err, "set TMPDIR to a writable directory");
    }
    /* Shared memory stays on tmpfs (speed); without a usable /dev/shm Open MPI keeps its default. */
    snprintf(s->shmdir, sizeof(s->shmdir), "/dev/shm/ctrain-ompi.XXXXXX");
    if (!mkdtemp(s->shmdir))
        s->shmdir[0] = '\0';
    return 0;
}

static int launches;

int ct_pmix_server_start(int nprocs, ct_pmix_server **out, ct_error *err)
{
    ct_pmix_server *s;
    int rep[2] = { -1, -1 }, ctl[2] = { -1, -1 };
    pid_t parent = getpid();
    int rc;

    *out = NULL;
    if (nprocs < 1 || nprocs > 4096)
        return ct_error_set(err, CT_EINVAL, "pmix-nprocs", "PMIx server for %d ranks: the count "
                            "must be 1..4096", nprocs);
    s = calloc(1, sizeof(*s));
    if (!s || !(s->env = calloc((size_t)nprocs, sizeof(char **)))) {
        free(s);
        return ct_error_set(err, CT_ENOMEM, "oom", "out of memory starting the PMIx server");
    }
    s->nprocs = nprocs;
    s->pid = -1;
    s->ctl_fd = -1;
    s->stage = mmap(NULL, sizeof(*s->stage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                    -1, 0);
    if (s->stage == MAP_FAILED) {
        s->stage = NULL;
        rc = ct_error_set(err, CT_ENOMEM, "oom", "the PMIx server's shared page: %s",
                          strerror(errno));
        goto fail;
    }
    *s->stage = STAGE_FORKED;
    /* Unique per launch: Open MPI derives its job id from the namespace. */
    snprintf(s->nspace, sizeof(s->nspace), "ctrain.%ld.%d", (long)parent, launches++);
    rc = make_tmpdir(s, err);
    if (rc)
        goto fail;
    if (pipe2(rep, O_CLOEXEC) || pipe2(ctl, O_CLOEXEC)) {
        rc = ct_error_set(err, CT_EIO, "pmix-pipe", "pipe for the PMIx server: %s",
                          strerror(errno));
        goto fail;
    }
    fflush(NULL);   /* no buffered output copied into the server process */
    s->pid = fork();
    if (s->pid < 0) {
        rc = ct_error_set(err, CT_EIO, "pmix-fork", "fork of the PMIx server process: %s",
                          strerror(errno));
        goto fail;
    }
    if (s->pid == 0) {
        close(rep[0]);
        close(ctl[1]);
        server_main(nprocs, s->tmpdir, s->nspace, rep[1], ctl[0], parent, s->stage);
    }
    close(rep[1]);
    close(ctl[0]);
    rep[1] = ctl[0] = -1;
    s->ctl_fd = ctl[1];
    ctl[1] = -1;
    rc = read_report(s, rep[0], err);
    if (rc)
        goto fail;
    close(rep[0]);
    *out = s;
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        if (rep[i] >= 0)
            close(rep[i]);
        if (ctl[i] >= 0)
            close(ctl[i]);
    }
    ct_pmix_server_stop(s);
    return rc;
}

char *const *ct_pmix_server_rank_env(const ct_pmix_server *s, int rank)
{
    if (rank < 0 || rank >= s->nprocs)
        return NULL;
    return s->env[rank];
}

int ct_pmix_server_apply_env(const ct_pmix_server *s, int rank, ct_error *err)
{
    char *const *env = ct_pmix_server_rank_env(s, rank);

    for (size_t i = 0; env && env[i]; i++) {
        char name[256];
        const char *eq = strchr(env[i], '=');
        if (!eq || (size_t)(eq - env[i]) >= sizeof(name))
            continue;
        snprintf(name, sizeof(name), "%.*s", (int)(eq - env[i]), env[i]);
        if (setenv(name, eq + 1, 1) != 0)
            return ct_error_set(err, CT_ENOMEM, "oom", "setenv %s: %s", name, strerror(errno));
    }
    return 0;
}

static int env_has_name(char *const *env, const char *var)
{
    size_t n = strcspn(var, "=");

    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], var, n) && env[i][n] == '=')
            return 1;
    return 0;
}

char **ct_pmix_server_env_merge(const ct_pmix_server *s, int rank, char *const *envp)
{
    char *const *add = ct_pmix_server_rank_env(s, rank);
    size_t na = 0, ne = 0, k = 0;
    char **out;

    while (add && add[na])
        na++;
    while (envp && envp[ne])
        ne++;
    out = calloc(na + ne + 1, sizeof(char *));
    if (!out)
        return NULL;
    for (size_t i = 0; i < ne; i++)
        if (!env_has_name(add, envp[i]) && !(out[k++] = strdup(envp[i])))
            goto oom;
    for (size_t i = 0; i < na; i++)
        if (!(out[k++] = strdup(add[i])))
            goto oom;
    return out;
oom:
    ct_pmix_server_env_free(out);
    return NULL;
}

void ct_pmix_server_env_free(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

pid_t ct_pmix_server_pid(const ct_pmix_server *s)
{
    return s->pid;
}

const char *ct_pmix_server_nspace(const ct_pmix_server *s)
{
    return s->nspace;
}

void ct_pmix_server_reaped(ct_pmix_server *s, int wait_status)
{
    s->reaped = 1;
}

void ct_pmix_server_detach(ct_pmix_server *s)
{
    if (s && s->ctl_fd >= 0) {
        close(s->ctl_fd);
        s->ctl_fd = -1;
    }
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    remove(path);
    return 0;
}

/* Wait for pid until deadline; 1 when reaped. */
static int wait_until(pid_t pid, double deadline)
{
    for (;;) {
        pid_t r = waitpid(pid, NULL, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD))
            return 1;
        if (ct_time_now() >= deadline)
            return 0;
        usleep(10000);
    }
}

void ct_pmix_server_stop(ct_pmix_server *s)
{
    if (!s)
        return;
    ct_pmix_server_detach(s);    /* end-of-file: the server finalizes and exits */
    if (s->pid > 0 && !s->reaped) {
        if (!wait_until(s->pid, ct_time_now() + 2.0)) {
            kill(s->pid, SIGTERM);
            if (!wait_until(s->pid, ct_time_now() + 3.0)) {
                kill(s->pid, SIGKILL);
                wait_until(s->pid, ct_time_now() + 60.0);
            }
        }
    }
    if (s->tmpdir[0])
        nftw(s->tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (s->shmdir[0])
        nftw(s->shmdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    for (int r = 0; s->env && r < s->nprocs; r++)
        ct_pmix_server_env_free(s->env[r]);
    free(s->env);
    if (s->stage)
        munmap((void *)s->stage, sizeof(*s->stage));
    free(s);
}
