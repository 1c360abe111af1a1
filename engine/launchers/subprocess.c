/* SPDX-License-Identifier: BSD-3-Clause */
/* The subprocess launcher: this process becomes the supervisor (and starts the PMIx server
 * process), and fork+execs nprocs copies of its own command line (/proc/self/exe with
 * /proc/self/cmdline) as ranks 0..n-1, each with its PMIx variables and CTRAIN_LAUNCHER_RANK /
 * CTRAIN_LAUNCHER_NPROCS. A rank runs the same program, reaches the same launch call and, seeing
 * CTRAIN_LAUNCHER_RANK, runs the body there. See include/ctrain/launcher.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/launcher.h"
#include "engine/launchers/proc_supervisor.h"

extern char **environ;

/* The kernel's own bound on a command line is ARG_MAX (a quarter of the stack limit); this is
 * far above any real one and only stops a runaway read. */
#define CMDLINE_MAX (64 << 20)

static char **cmdline_fail(char *buf, int fd, ct_error *err, const char *why)
{
    ct_error_set(err, CT_ENOTAVAIL, "launch-cmdline", "cannot read /proc/self/cmdline: %s", why);
    ct_error_hint(err, "the subprocess launcher needs /proc; use the fork launcher (ddp_fork) "
                       "or start the ranks with mpirun or srun");
    free(buf);
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* /proc/self/cmdline, whole, as a NULL-terminated argv (one allocation for the strings). The
 * last argument gets its NUL when the kernel gave none (a program that rewrote its arguments). */
static char **read_cmdline(char **blob, ct_error *err)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    size_t len = 0, cap = 4096, argc = 0, k = 0;
    char *buf = NULL, *grown;
    char **argv;

    *blob = NULL;
    if (fd < 0)
        return cmdline_fail(NULL, fd, err, strerror(errno));
    for (;;) {
        ssize_t r;

        if (!buf || len + 1 >= cap) {
            if (buf && cap >= CMDLINE_MAX)
                return cmdline_fail(buf, fd, err, "longer than 64 MiB");
            cap = buf ? cap * 2 : cap;
            if (!(grown = realloc(buf, cap)))
                return cmdline_fail(buf, fd, err, "out of memory");
            buf = grown;
        }
        r = read(fd, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return cmdline_fail(buf, fd, err, strerror(errno));
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    if (len == 0)
        return cmdline_fail(buf, -1, err, "it is empty");
    if (buf[len - 1] != '\0')
        buf[len++] = '\0';   /* room kept by the read loop */
    for (size_t i = 0; i < len; i++)
        if (buf[i] == '\0')
            argc++;
    argv = calloc(argc + 1, sizeof(char *));
    if (!argv)
        return cmdline_fail(buf, -1, err, "out of memory");
    for (size_t i = 0; i < len && k < argc; i += strlen(buf + i) + 1)
        argv[k++] = buf + i;
    *blob = buf;
    return argv;
}

struct self_exec {
    char exe[4096];   /* our executable's path, so the ranks show its name in ps */
    char **argv;
};

/* The path of our executable; /proc/self/exe itself when the file was removed or replaced. */
static void find_exe(char *exe, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", exe, size - 1);

    if (n <= 0 || (size_t)n >= size - 1 || (exe[n] = '\0', access(exe, X_OK) != 0))
        snprintf(exe, size, "/proc/self/exe");
}

/* In the forked rank: exec the program again with the rank's PMIx variables. */
static void subprocess_rank_main(const struct ct_rank_ctx *ctx)
{
    const struct self_exec *self = ctx->arg;
    char **argv = self->argv;
    char **envp = ct_pmix_server_env_merge(ctx->server, ctx->rank, environ);
    ct_error e;

    if (envp)
        execve(self->exe, argv, envp);
    ct_error_set(&e, CT_ENOTAVAIL, "launch-exec", "rank %d: cannot execute %s (%s): %s",
                 ctx->rank, self->exe, argv[0], envp ? strerror(errno) : "out of memory");
    ct_proc_supervisor_report(ctx->report_fd, e.code, &e, NULL, 0);
    _exit(127);
}

static int subprocess_launch(const ct_launch_spec *spec, ct_launch_body body, void *arg,
                             void *result, size_t result_size, ct_error *err)
{
    char *blob = NULL;
    struct self_exec self;
    int rc;

    if (getenv(CT_LAUNCHER_ENV_RANK)) {
        /* We are one of the ranks this launcher execed. */
        return body(arg, result, result_size, err);
    }
    self.argv = read_cmdline(&blob, err);
    if (!self.argv)
        return err ? err->code : CT_ENOTAVAIL;
    find_exe(self.exe, sizeof(self.exe));
    rc = ct_proc_supervisor_run(spec, subprocess_rank_main, &self, NULL, 0, err);
    free(self.argv);
    free(blob);
    return rc;
}

const struct ct_launcher_ops ct_launcher_subprocess = {
    .launch = subprocess_launch,
};
