/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain supervise [--max-restarts N] [--spare-nodes K] -- ctrain fit ... — the body of a batch job
 * that keeps training inside its allocation: it runs the fit as a step (srun) on the job's healthy
 * nodes and, when the step fails, names the failed node, excludes it and starts a new step of the
 * same world size on the nodes left (spares included), which resumes from last.safetensors
 * (--ckpt-path auto, fit's default in a SLURM job). Only when too few healthy nodes are left does it
 * fall back to SLURM's requeue, the path a preempted fit takes.
 *
 * The step is srun, run as a program: srun does the PMIx wire-up, the I/O, the signal forwarding
 * and the step's cancellation, which libslurm's step-launch API would leave to us. SLURM's view of
 * the nodes (slurm_load_node), the step list (slurm_get_job_steps), a signal to a step (slurm_signal_job_step)
 * and the requeue (ct_slurm_requeue) are libslurm calls, as requeue.c explains: no scontrol needed,
 * SLURM's own error in the message.
 *
 * A failed node is named, in this order of trust, by slurmctld (DOWN, NOT_RESPONDING, FAIL or
 * DRAIN), by the ranks' collective-timeout message ("did not arrive (on HOST)"), by srun ("Node
 * failure on HOST", "HOST: task N: Killed"), and by the hang records the ranks wrote
 * (DIR/hang/rank-R.json, read as ctrain diagnose reads them). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "ctrain/hostlist.h"
#include "ctrain/launcher.h"
#include "ctrain/util.h"
#include "engine/cli/commands.h"
#include "engine/health/fit/hang.h"
#include "engine/trainer/requeue.h"
#include "engine/util/slurm_compat.h"

#define P "ctrain: supervise: "
/* The step's name in SLURM: how the supervisor finds its own steps to end them. */
#define STEP_NAME "ctrain-supervise"
#define MAX_RESTARTS 100
/* How long a new step waits at most for SLURM to stop listing the failed one (its slurmstepds ended). */
#define STEP_GONE_S 20.0
/* Once a node is named (or srun says it ends the step), srun has this long to end the step by
 * itself (it waits for the step's tasks, KillWait and its own timeouts) before the supervisor kills
 * it and the step. Not from the first failure message: Open MPI reports a lost peer at once, and
 * the ranks name its node only after their collective timeout; killing srun before that would leave
 * the node unnamed. */
#define TEARDOWN_S 30.0
/* After SIGTERM/SIGINT to the supervisor: the fit saves last.safetensors and ends within this. */
#define STOP_WAIT_S 20.0
#define MAX_LINE 4096

struct sv_opts {
    long max_restarts;
    long spares;
    long tasks_per_node;
    const char *mpi;
    char root_dir[1024];
    char **cmd; /* the fit's command line, NULL-terminated */
};

struct sv {
    struct sv_opts o;
    char job[32];
    ct_hostlist *alloc;  /* the job's nodes, as SLURM gave them at the start */
    ct_hostlist *bad;    /* excluded from every later step */
    ct_hostlist *named;  /* named as failed by the current step */
    ct_hostlist *weak;   /* nodes of the step's tasks that srun saw killed by a signal */
    long nodes;          /* nodes per step: the world size's */
    int sigfd;
    int stop_sig;        /* SIGTERM/SIGINT/SIGHUP received */
    double failed_at;    /* first failure message of the current step (0: none) */
    double ending_at;    /* a node named, or srun ending the step: srun's teardown runs from here */
    double step_start, srun_end;
};

struct stream {
    int fd, to;
    size_t len;
    char buf[MAX_LINE];
};

static void supervise_usage(FILE *out)
{
    fprintf(out,
            "usage: ctrain supervise [--max-restarts N] [--spare-nodes K] [--ntasks-per-node T] [--mpi TYPE]\n"
            "                        -- ctrain fit FLAGS...\n"
            "\n"
            "Run as the body of a batch job (sbatch --no-kill --requeue; scripts/sbatch/supervise.sbatch).\n"
            "It starts the fit as a step (srun --mpi=TYPE -N W, W = the job's nodes - K, T tasks a node) on\n"
            "the job's healthy nodes. When the step fails it names the failed node: from slurmctld (DOWN,\n"
            "NOT_RESPONDING, FAIL, DRAIN), the ranks' collective-timeout message (\"did not arrive (on\n"
            "HOST)\"), srun (\"Node failure on HOST\"), the plugin's --ctrain-preflight=fail|exclude and\n"
            "the fit's --on-straggler stop|exclude (a node they name; exclude requeues nothing in a step of\n"
            "the supervisor, which sets CTRAIN_SUPERVISED=1 for it), and when none of these names one, the\n"
            "hang records in DIR/hang (ctrain diagnose DIR) or srun's \"HOST: task N: Killed\" (a task\n"
            "ended by a signal); it excludes that node and starts a new step of W nodes (srun --overlap) on the\n"
            "nodes left and the spares, which resumes from DIR/last.safetensors (--ckpt-path auto, fit's\n"
            "default in a SLURM job; the fit's --ckpt-path may be auto or last only): the allocation is\n"
            "kept, nothing is requeued. A step that failed with no node named is started again on the\n"
            "same nodes. With fewer than W healthy nodes left it requeues the job through SLURM (as a\n"
            "preempted fit does; it starts again once SLURM has nodes for it, and resumes) and says so.\n"
            "\n"
            "  --max-restarts N      new steps after failures before it gives up (default 3, at most 100)\n"
            "  --spare-nodes K       nodes of the job kept out of the first step, to replace failed ones\n"
            "                        (default 0)\n"
            "  --ntasks-per-node T   ranks a node (default: SLURM_NTASKS_PER_NODE, else 1)\n"
            "  --mpi TYPE            srun --mpi (default pmix)\n"
            "\n"
            "The fit must save often enough to lose little: --checkpoint-every-n-steps N; a short\n"
            "--collective-timeout (e.g. 30) lets the ranks name a lost node quickly (the default waits\n"
            "300 s). SIGTERM, SIGINT or scancel end the step (the fit saves last.safetensors) and the\n"
            "supervisor; SIGUSR1/SIGUSR2 are passed on to the step (requeue and hang-dump signals).\n"
            "\n"
            "Exit status: 0 the fit completed; 2 bad input (nothing launched); %d the job was requeued\n"
            "(by the supervisor, or by the fit on its requeue signal);\n"
            "1 the restarts ran out or the step failed in a way a restart cannot mend (fit's exit 2 or\n"
            "3: bad flags, a non-finite loss); 128+SIG ended by signal SIG.\n",
            CT_LAUNCHER_EXIT_STOPPED);
}

static double now_s(void)
{
    return ct_time_now();
}

/* --- input ------------------------------------------------------------------------------------ */

/* The fit's --default-root-dir (default runs), and no --ckpt-path but auto or last: a restart must
 * resume the run's own last.safetensors, not start again from a file named at the start. (last
 * continues a run an earlier job saved, as after a scancel.) */
static int fit_args(struct sv_opts *o, ct_error *err)
{
    ct_str_copy(o->root_dir, sizeof(o->root_dir), "runs");
    for (int i = 0; o->cmd[i]; i++) {
        const char *a = o->cmd[i], *v = NULL;

        if (!strncmp(a, "--default-root-dir=", 19))
            v = a + 19;
        else if (!strcmp(a, "--default-root-dir") && o->cmd[i + 1])
            v = o->cmd[i + 1];
        if (v)
            ct_str_copy(o->root_dir, sizeof(o->root_dir), v);
        v = NULL;
        if (!strncmp(a, "--ckpt-path=", 12))
            v = a + 12;
        else if (!strcmp(a, "--ckpt-path") && o->cmd[i + 1])
            v = o->cmd[i + 1];
        if (v && strcmp(v, "auto") && strcmp(v, "last")) {
            ct_error_set(err, CT_EINVAL, "supervise-ckpt-path",
                         "supervise: the fit's --ckpt-path %s would be loaded again by every restart", v);
            return ct_error_hint(err, "leave --ckpt-path out (auto: each restart resumes this job's "
                                      "last.safetensors) or give last (an earlier job's run); start a fine-tune "
                                      "with --init-from");
        }
    }
    return 0;
}

static int parse_long_flag(const char *name, const char *v, long min, long max, long *out, ct_error *err)
{
    if (ct_parse_long(v, min, max, out) == 0)
        return 0;
    ct_error_set(err, CT_EINVAL, "supervise-flag", "supervise: %s '%s' is not a whole number from %ld to %ld", name,
                 v, min, max);
    return ct_error_hint(err, "ctrain supervise --max-restarts 3 --spare-nodes 1 -- ctrain fit ...");
}

/* srun --mpi=TYPE: a plugin's name (pmix, pmix_v4, pmi2, none, cray_shasta), not empty. */
static int parse_mpi(const char *v, const char **out, ct_error *err)
{
    if (*v && strlen(v) < 32 && v[strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_")] == '\0') {
        *out = v;
        return 0;
    }
    ct_error_set(err, CT_EINVAL, "supervise-flag", "supervise: --mpi '%s' is not an MPI plugin's name", v);
    return ct_error_hint(err, "srun --mpi=list names them: pmix (the default), pmix_v4, pmi2, none");
}

static int parse_args(int argc, char **argv, struct sv_opts *o, int *help, ct_error *err)
{
    static const char *const flags[] = { "--max-restarts", "--spare-nodes", "--ntasks-per-node", "--mpi", "--help",
                                         NULL };
    int i;

    o->max_restarts = 3;
    o->spares = 0;
    o->tasks_per_node = 0;
    o->mpi = "pmix";
    for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *v;
        int missing = 0, rc = 0;

        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            *help = 1;
            return 0;
        }
        /* Bounds a job can mean: each restart is a new step (minutes of SLURM's and the fit's start). */
        if ((v = ct_cli_flag_value(argc, argv, &i, "--max-restarts", &missing)))
            rc = parse_long_flag("--max-restarts", v, 0, MAX_RESTARTS, &o->max_restarts, err);
        else if ((v = ct_cli_flag_value(argc, argv, &i, "--spare-nodes", &missing)))
            rc = parse_long_flag("--spare-nodes", v, 0, 100000, &o->spares, err);
        else if ((v = ct_cli_flag_value(argc, argv, &i, "--ntasks-per-node", &missing)))
            rc = parse_long_flag("--ntasks-per-node", v, 1, 100000, &o->tasks_per_node, err);
        else if ((v = ct_cli_flag_value(argc, argv, &i, "--mpi", &missing)))
            rc = parse_mpi(v, &o->mpi, err);
        else if (missing) {
            ct_error_set(err, CT_EINVAL, "supervise-flag", "supervise: %s needs a value", argv[i]);
            return ct_error_hint(err, "ctrain supervise --help");
        } else
            return ct_cli_flag_unknown("supervise", argv[i], flags, err);
        if (rc)
            return rc;
    }
    if (i >= argc - 1) {
        ct_error_set(err, CT_EINVAL, "supervise-usage", "supervise needs the fit to run after --");
        return ct_error_hint(err, "ctrain supervise --spare-nodes 1 -- ctrain fit --strategy ddp "
                                  "--checkpoint-every-n-steps 100 ...");
    }
    o->cmd = argv + i + 1;
    return fit_args(o, err);
}

/* T from SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE ("2(x3)": the first node's count), else 1. */
static long env_tasks_per_node(void)
{
    const char *v = getenv("SLURM_NTASKS_PER_NODE");
    long t;

    if (!v || !*v)
        v = getenv("SLURM_TASKS_PER_NODE");
    if (v && *v) {
        char num[16];
        size_t n = strspn(v, "0123456789");

        if (n > 0 && n < sizeof(num)) {
            memcpy(num, v, n);
            num[n] = '\0';
            if (ct_parse_long(num, 1, 100000, &t) == 0)
                return t;
        }
    }
    return 1;
}

/* The job's id and nodes. (Whether it was submitted with --no-kill, SLURM's job record does not
 * tell a client before 23.02's; without it slurmctld ends the job, this supervisor with it, when one
 * of its nodes fails: the template and --help ask for it.) */
static int job_setup(struct sv *s, ct_error *err)
{
    const char *id = getenv("SLURM_JOB_ID"), *nl = getenv("SLURM_JOB_NODELIST");
    long jid;

    if (!id || !*id || !nl || !*nl) {
        ct_error_set(err, CT_ECONFLICT, "supervise-no-job", "supervise: not in a SLURM job (SLURM_JOB_ID%s unset)",
                     nl && *nl ? "" : " or SLURM_JOB_NODELIST");
        return ct_error_hint(err, "run it as the body of a batch job: sbatch scripts/sbatch/supervise.sbatch");
    }
    if (ct_parse_long(id, 1, 0xfffffffeL, &jid)) {
        ct_error_set(err, CT_EINVAL, "supervise-no-job", "supervise: SLURM_JOB_ID='%s' is not a job number", id);
        return ct_error_hint(err, "SLURM sets it in every job; unset it if you exported it yourself");
    }
    ct_str_copy(s->job, sizeof(s->job), id);
    return ct_hostlist_expand(nl, &s->alloc, err);
}

static int sizes(struct sv *s, ct_error *err)
{
    long n = (long)ct_hostlist_count(s->alloc);

    if (!s->o.tasks_per_node)
        s->o.tasks_per_node = env_tasks_per_node();
    s->nodes = n - s->o.spares;
    if (s->nodes < 1) {
        ct_error_set(err, CT_EINVAL, "supervise-spares",
                     "supervise: --spare-nodes %ld leaves no node for the step (the job has %ld)", s->o.spares, n);
        return ct_error_hint(err, "ask sbatch for more nodes (-N %ld) or fewer spares", s->o.spares + 1);
    }
    return 0;
}

/* --- naming failed nodes ------------------------------------------------------------------------ */

static void name_node(struct sv *s, const char *host, const char *why)
{
    ct_error e;

    if (ct_hostlist_find(s->alloc, host) < 0 || ct_hostlist_find(s->named, host) >= 0 ||
        ct_hostlist_find(s->bad, host) >= 0)
        return;
    ct_error_clear(&e);
    if (s->ending_at == 0)
        s->ending_at = now_s();
    if (ct_hostlist_push(s->named, host, &e) == 0) {
        fprintf(stderr, P "node %s failed: %s\n", host, why);
        fflush(stderr);
    }
}

/* Every host in "(on A, B)" after "did not arrive". */
static void scan_arrive(struct sv *s, const char *line)
{
    const char *p = strstr(line, "did not arrive (on ");
    char host[256];

    if (!p)
        return;
    p += strlen("did not arrive (on ");
    while (*p && *p != ')') {
        size_t n = strcspn(p, ",)");

        if (n > 0 && n < sizeof(host)) {
            memcpy(host, p, n);
            host[n] = '\0';
            name_node(s, host, "its rank(s) did not arrive in a collective (the ranks' collective timeout)");
        }
        p += n;
        while (*p == ',' || *p == ' ')
            p++;
    }
}

/* srun: "srun: error: Node failure on n2" names a node; "srun: error: n2: task 1: Killed" (a
 * signal, not the exit status the others give when a collective fails) only suggests one: once a
 * rank aborts, srun --kill-on-bad-exit kills the tasks on healthy nodes as well, so these count
 * only when nothing else names a node (after_failure). */
static void scan_srun(struct sv *s, const char *line)
{
    char host[256], what[64];
    int task;

    if (sscanf(line, "srun: error: Node failure on %255s", host) == 1) {
        name_node(s, host, "srun: Node failure (slurmctld lost it)");
        return;
    }
    if (sscanf(line, "srun: error: %255[^:]: task %d: %63[^\n]", host, &task, what) == 3 &&
        strncmp(what, "Exited with exit code", 21) && strncmp(what, "Terminated", 10) &&
        ct_hostlist_find(s->weak, host) < 0) {
        ct_error e;

        ct_error_clear(&e);
        ct_hostlist_push(s->weak, host, &e);
    }
}

/* ctrain's own checks: the plugin's preflight line of a bad node ("ctrain: preflight: node HOST:
 * WHY; the step ends before its programs start") and fit's straggler warning when it stops the fit
 * ("ctrain: warning: straggler: node HOST (rank R) ...; stopping (--on-straggler stop|exclude)").
 * A straggler named under warn goes on training: not a failure. */
static void scan_checks(struct sv *s, const char *line)
{
    char host[256], why[512];

    if (sscanf(line, "ctrain: preflight: node %255[^:]: %511[^\n]", host, why) == 2 &&
        strstr(why, CT_LINE_PREFLIGHT_STOPS)) {
        *strstr(why, CT_LINE_PREFLIGHT_STOPS) = '\0';
        name_node(s, host, why);
        return;
    }
    if (sscanf(line, "ctrain: warning: straggler: node %255s (rank", host) == 1 &&
        strstr(line, CT_LINE_STRAGGLER_STOPS))
        name_node(s, host, "the fit's straggler detection named it slow (--on-straggler)");
}

/* A line of the step's output: is it a failure, does it name a node? */
static void scan_line(struct sv *s, const char *line)
{
    int fail = strstr(line, "did not arrive") || strstr(line, "srun: error:") ||
               strstr(line, "unexpectedly disconnected") || strstr(line, "MPI_ABORT");

    if (fail && s->failed_at == 0)
        s->failed_at = now_s();
    if (strstr(line, "srun: Job step aborted") && s->ending_at == 0)
        s->ending_at = now_s();
    scan_arrive(s, line);
    scan_srun(s, line);
    scan_checks(s, line);
}

/* slurmctld's view: the job's nodes DOWN, NOT_RESPONDING, FAIL or DRAIN. */
static void scan_slurm_nodes(struct sv *s)
{
    node_info_msg_t *msg = NULL;

    ct_slurm_init_once();
    if (slurm_load_node(0, &msg, SHOW_ALL) != SLURM_SUCCESS || !msg) {
        fprintf(stderr, P "cannot read the nodes' state (slurm_load_node: %s); naming failed nodes from the "
                          "step's messages only\n", slurm_strerror(ct_slurm_errno()));
        return;
    }
    for (uint32_t i = 0; i < msg->record_count; i++) {
        const node_info_t *n = &msg->node_array[i];
        uint32_t st = n->node_state, base = st & NODE_STATE_BASE;
        const char *why = base == NODE_STATE_DOWN ? "DOWN"
                          : st & NODE_STATE_NO_RESPOND ? "NOT_RESPONDING"
                          : st & NODE_STATE_FAIL ? "FAIL"
                          : st & NODE_STATE_DRAIN ? "DRAIN" : NULL;
        char text[320];

        if (!n->name || !why)
            continue;
        snprintf(text, sizeof(text), "slurmctld has it %s%s%s", why, n->reason ? ": " : "", n->reason ? n->reason : "");
        name_node(s, n->name, text);
    }
    slurm_free_node_info_msg(msg);
}

/* The hang records (DIR/hang/rank-R.json): the hosts of the ranks ctrain diagnose finds behind. */
static void scan_hang(struct sv *s)
{
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ct_error e;

    if (!f)
        return;
    ct_error_clear(&e);
    ct_hang_diagnose(s->o.root_dir, f, &e);
    fclose(f);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char host[256];
        int r;

        /* "rank R (host H, pid P) is behind: ..." and, for a rank with no record that the others found
         * missing, "rank R (host H) is behind: no record ..." */
        if (sscanf(line, "ctrain: rank %d (host %255[^,)]", &r, host) == 2 && strstr(line, "is behind"))
            name_node(s, host, "its rank is behind in the hang records (ctrain diagnose)");
    }
    free(text);
}

/* --- the step ----------------------------------------------------------------------------------- */

/* The first s->nodes healthy nodes, in the job's order, as a hostlist; NULL with fewer. */
static char *pick_nodes(struct sv *s, long *healthy)
{
    ct_hostlist *pick = ct_hostlist_new();
    char *out = NULL;
    ct_error e;

    *healthy = 0;
    if (!pick)
        return NULL;
    ct_error_clear(&e);
    for (size_t i = 0; i < ct_hostlist_count(s->alloc); i++) {
        const char *h = ct_hostlist_get(s->alloc, i);

        if (ct_hostlist_find(s->bad, h) >= 0)
            continue;
        if (++*healthy <= s->nodes)
            ct_hostlist_push(pick, h, &e);
    }
    if (*healthy >= s->nodes)
        ct_hostlist_compress(pick, &out, &e);
    ct_hostlist_free(pick);
    return out;
}

static int relay(struct sv *s, struct stream *st)
{
    ssize_t r = read(st->fd, st->buf + st->len, sizeof(st->buf) - 1 - st->len);
    char *nl;

    if (r <= 0) {
        if (st->len) {
            st->buf[st->len] = '\0';
            dprintf(st->to, "%s\n", st->buf);
            scan_line(s, st->buf);
        }
        close(st->fd);
        st->fd = -1;
        return 0;
    }
    st->len += (size_t)r;
    st->buf[st->len] = '\0';
    while ((nl = strchr(st->buf, '\n')) || st->len == sizeof(st->buf) - 1) {
        size_t n = nl ? (size_t)(nl - st->buf) + 1 : st->len;
        char save = st->buf[n - 1];

        (void)!write(st->to, st->buf, n);
        st->buf[n - 1] = '\0';
        scan_line(s, st->buf);
        st->buf[n - 1] = save;
        memmove(st->buf, st->buf + n, st->len - n);
        st->len -= n;
        st->buf[st->len] = '\0';
    }
    return 0;
}

/* The srun command line: the same world size on the nodes given. A restart overlaps the failed
 * step: slurmctld keeps that step (and its CPUs on the healthy nodes) until the failed node
 * answers or is declared DOWN, and a step without --overlap would wait for it ("Requested nodes are
 * busy"); srun has ended every task of it that can still be reached before a restart. */
static char **srun_argv(struct sv *s, const char *nodes, int restart)
{
    size_t n = 0;
    char **av;
    static char a_n[32], a_nn[32], a_t[48], a_w[4096], a_m[64];

    while (s->o.cmd[n])
        n++;
    av = calloc(n + 16, sizeof(*av));
    if (!av)
        return NULL;
    snprintf(a_n, sizeof(a_n), "--nodes=%ld", s->nodes);
    snprintf(a_nn, sizeof(a_nn), "--ntasks=%ld", s->nodes * s->o.tasks_per_node);
    snprintf(a_t, sizeof(a_t), "--ntasks-per-node=%ld", s->o.tasks_per_node);
    snprintf(a_w, sizeof(a_w), "--nodelist=%s", nodes);
    snprintf(a_m, sizeof(a_m), "--mpi=%s", s->o.mpi);
    n = 0;
    av[n++] = "srun";
    av[n++] = a_m;
    av[n++] = a_n;
    av[n++] = a_nn;
    av[n++] = a_t;
    av[n++] = a_w;
    av[n++] = "--job-name=" STEP_NAME;
    av[n++] = "--kill-on-bad-exit=1";
    if (restart)
        av[n++] = "--overlap";
    for (size_t i = 0; s->o.cmd[i]; i++)
        av[n++] = s->o.cmd[i];
    av[n] = NULL;
    return av;
}

/* Signal every step of this job the supervisor started (by name) that SLURM still lists: SIGKILL
 * ends what is left of them; SIGTERM reaches the tasks through slurmstepd, as scancel sends it (srun
 * would turn its own SIGTERM into SIGKILL for the tasks, and the fit would not save). Returns how
 * many steps it signalled. */
static int signal_steps(struct sv *s, int sig)
{
    job_step_info_response_msg_t *r = NULL;
    long jid;
    int n = 0;

    if (ct_parse_long(s->job, 1, 0xfffffffeL, &jid))
        return 0;
    ct_slurm_init_once();
    if (slurm_get_job_steps(0, (uint32_t)jid, NO_VAL, &r, SHOW_ALL) != SLURM_SUCCESS || !r)
        fprintf(stderr, P "cannot list the job's steps (slurm_get_job_steps: %s)\n", slurm_strerror(ct_slurm_errno()));
    else {
        for (uint32_t i = 0; i < r->job_step_count; i++) {
            const job_step_info_t *st = &r->job_steps[i];

            if (!st->name || strcmp(st->name, STEP_NAME))
                continue;
            if (slurm_signal_job_step((uint32_t)jid, st->step_id.step_id, (uint32_t)sig) == SLURM_SUCCESS)
                n++;
            else if (sig != SIGKILL) /* a step that ended meanwhile is no news */
                fprintf(stderr, P "cannot signal step %s.%u: %s\n", s->job, st->step_id.step_id,
                        slurm_strerror(ct_slurm_errno()));
        }
        slurm_free_job_step_info_response_msg(r);
    }
    return n;
}

static pid_t spawn(char **av, int out[2], int errp[2])
{
    pid_t pid = fork();

    if (pid != 0)
        return pid;
    sigset_t none;

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* The step's checks (the plugin's preflight, fit's --on-straggler exclude) leave a bad node to
     * the supervisor instead of requeueing the job: srun passes this to every task. */
    setenv("CTRAIN_SUPERVISED", "1", 1);
    /* The supervisor gone (SIGKILL), srun still ends its step: it forwards SIGTERM to the tasks. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    dup2(out[1], 1);
    dup2(errp[1], 2);
    close(out[0]);
    close(out[1]);
    close(errp[0]);
    close(errp[1]);
    execvp(av[0], av);
    fprintf(stderr, P "cannot run %s: %s\n", av[0], strerror(errno));
    _exit(127);
}

static void on_signal(struct sv *s, pid_t srun, double *kill_at)
{
    struct signalfd_siginfo si;

    while (read(s->sigfd, &si, sizeof(si)) == sizeof(si)) {
        int sig = (int)si.ssi_signo;

        if (sig == SIGCHLD)
            continue;
        if (sig == SIGUSR1 || sig == SIGUSR2) {
            kill(srun, sig);
            continue;
        }
        if (!s->stop_sig) {
            fprintf(stderr, P "%s: ending the step (the fit saves last.safetensors)\n", strsignal(sig));
            s->stop_sig = sig;
            if (signal_steps(s, SIGTERM) == 0)
                kill(srun, SIGTERM); /* no step yet: srun gives up its launch */
            *kill_at = now_s() + STOP_WAIT_S;
        }
    }
}

/* Run one step on nodes; its wait status. The step's output goes to ours, scanned line by line. */
static int run_step(struct sv *s, const char *nodes, int restart)
{
    int out[2], errp[2], status = 0, done = 0;
    struct stream st[2];
    char **av = srun_argv(s, nodes, restart);
    double kill_at = 0;
    pid_t pid;

    if (!av || pipe2(out, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
        fprintf(stderr, P "cannot start srun: %s\n", strerror(errno));
        free(av);
        return 1 << 8;
    }
    s->failed_at = 0;
    s->ending_at = 0;
    s->step_start = now_s();
    pid = spawn(av, out, errp);
    free(av);
    close(out[1]);
    close(errp[1]);
    st[0] = (struct stream){ .fd = out[0], .to = 1 };
    st[1] = (struct stream){ .fd = errp[0], .to = 2 };
    if (pid < 0) {
        close(out[0]);
        close(errp[0]);
        return 1 << 8;
    }
    while (!done || st[0].fd >= 0 || st[1].fd >= 0) {
        struct pollfd p[3] = { { st[0].fd, POLLIN, 0 }, { st[1].fd, POLLIN, 0 }, { s->sigfd, POLLIN, 0 } };
        double t = now_s();

        if (!done && s->ending_at > 0 && !kill_at)
            kill_at = s->ending_at + TEARDOWN_S;
        if (!done && kill_at > 0 && t >= kill_at) {
            fprintf(stderr, P "srun has not ended the step %.0f s on: killing it and the step\n", t - s->step_start);
            kill(pid, SIGKILL);
            signal_steps(s, SIGKILL);
            kill_at = t + 3600;
        }
        if (done && (t - s->srun_end) > 5.0)
            break; /* a task of the step holds the pipes; the step is ended below */
        poll(p, 3, 500);
        for (int i = 0; i < 2; i++)
            if (st[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                relay(s, &st[i]);
        if (p[2].revents & POLLIN)
            on_signal(s, pid, &kill_at);
        if (!done && waitpid(pid, &status, WNOHANG) == pid) {
            done = 1;
            s->srun_end = now_s();
        }
    }
    for (int i = 0; i < 2; i++)
        if (st[i].fd >= 0)
            close(st[i].fd);
    return status;
}

/* --- the supervisor ------------------------------------------------------------------------------ */

static int exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The step failed: name the failed nodes and move them to the excluded set. */
static void after_failure(struct sv *s, int status)
{
    scan_slurm_nodes(s);
    if (ct_hostlist_count(s->named) == 0)
        scan_hang(s);
    for (size_t i = 0, none = ct_hostlist_count(s->named) == 0; none && i < ct_hostlist_count(s->weak); i++)
        name_node(s, ct_hostlist_get(s->weak, i), "srun: a task of it was killed by a signal (nothing else named "
                                                   "a node)");
    fprintf(stderr, P "the step ended (srun exit %d) %.1f s after it started", exit_code(status),
            s->srun_end - s->step_start);
    if (s->failed_at > 0)
        fprintf(stderr, ", %.1f s after its first failure message", s->srun_end - s->failed_at);
    fprintf(stderr, "\n");
    for (size_t i = 0; i < ct_hostlist_count(s->named); i++) {
        ct_error e;

        ct_error_clear(&e);
        ct_hostlist_push(s->bad, ct_hostlist_get(s->named, i), &e);
    }
}

static int requeue(struct sv *s, long healthy)
{
    ct_error e;
    char *badl = NULL;

    ct_error_clear(&e);
    ct_hostlist_compress(s->bad, &badl, &e);
    fprintf(stderr, P "%ld healthy node%s left (failed: %s), the step needs %ld: falling back to SLURM's requeue "
                      "of job %s (the allocation is given back; the job starts again when SLURM has nodes for "
                      "it, and resumes from last.safetensors)\n",
            healthy, healthy == 1 ? "" : "s", badl ? badl : "", s->nodes, s->job);
    free(badl);
    fflush(stderr);
    if (ct_slurm_requeue(s->job, &e)) {
        fprintf(stderr, P "the job was not requeued: ");
        ct_error_print(stderr, &e);
        return 1;
    }
    fprintf(stderr, P "requeueing SLURM job %s\n", s->job);
    return CT_LAUNCHER_EXIT_STOPPED;
}

/* Whether SLURM still lists a step of this job that the supervisor started: 1, 0, or -1 when the
 * steps cannot be listed. */
static int step_listed(struct sv *s)
{
    job_step_info_response_msg_t *r = NULL;
    long jid;
    int n = 0;

    if (ct_parse_long(s->job, 1, 0xfffffffeL, &jid))
        return -1;
    ct_slurm_init_once();
    if (slurm_get_job_steps(0, (uint32_t)jid, NO_VAL, &r, SHOW_ALL) != SLURM_SUCCESS || !r)
        return -1;
    for (uint32_t i = 0; i < r->job_step_count; i++)
        n |= r->job_steps[i].name && !strcmp(r->job_steps[i].name, STEP_NAME);
    slurm_free_job_step_info_response_msg(r);
    return n;
}

/* Before a new step: wait a little (STEP_GONE_S from the failure) for SLURM to stop listing the
 * failed one. srun returns before the failed step's slurmstepds have ended on its nodes, and a new
 * step started beside them on a node the two share (a healthy one) hung in its tasks' start (SLURM
 * 24.11, t/96: the failed step's slurmstepds ended 3 s after the new one began). The wait is short and never ends in a
 * kill: a node that died keeps the step listed until SLURM marks it down, and the new step does
 * not use that node. A stop signal meanwhile ends the supervisor (s->stop_sig). */
static void wait_step_gone(struct sv *s)
{
    /* Counted from the step's first failure: the healthy nodes' slurmstepds have been ending since,
     * while srun waited for the step's end (KillWait for a node that died). */
    double end = (s->failed_at > 0 ? s->failed_at : s->srun_end) + STEP_GONE_S;

    while (step_listed(s) == 1 && now_s() < end) {
        struct pollfd p = { s->sigfd, POLLIN, 0 };
        struct signalfd_siginfo si;

        if (poll(&p, 1, 200) > 0)
            while (read(s->sigfd, &si, sizeof(si)) == sizeof(si))
                if (si.ssi_signo != SIGCHLD && si.ssi_signo != SIGUSR1 && si.ssi_signo != SIGUSR2 && !s->stop_sig)
                    s->stop_sig = (int)si.ssi_signo;
        if (s->stop_sig)
            return;
    }
}

/* Before restart N: the failed step's hang records (DIR/hang) move to DIR/hang.restart-N, so the
 * next step's are not mixed with them and they stay for ctrain diagnose DIR/hang.restart-N. */
static void archive_hang(struct sv *s, int restart)
{
    char from[1100], to[1200];
    struct stat sb;

    snprintf(from, sizeof(from), "%s/hang", s->o.root_dir);
    if (stat(from, &sb) || !S_ISDIR(sb.st_mode))
        return;
    for (int k = 0; k < 100; k++) {
        if (k == 0)
            snprintf(to, sizeof(to), "%s.restart-%d", from, restart);
        else
            snprintf(to, sizeof(to), "%s.restart-%d.%d", from, restart, k);
        if (!rename(from, to)) {   /* rename(2) replaces only an empty directory: never one with records */
            fprintf(stderr, P "the failed step's hang records are in %s (ctrain diagnose %s)\n", to, to);
            return;
        }
        if (errno != EEXIST && errno != ENOTEMPTY)
            break;
    }
    fprintf(stderr, P "could not move %s aside: %s (the next step's hang records join them)\n", from,
            strerror(errno));
}

static int supervise_loop(struct sv *s)
{
    for (int restart = 0;; restart++) {
        long healthy;
        char *nodes = pick_nodes(s, &healthy);
        int status, code;

        if (!nodes)
            return requeue(s, healthy);
        if (restart) {
            wait_step_gone(s);
            if (s->stop_sig) {
                free(nodes);
                return 128 + s->stop_sig;
            }
            archive_hang(s, restart);
        }
        if (restart)
            fprintf(stderr, P "restart %d of at most %ld\n", restart, s->o.max_restarts);
        fprintf(stderr, P "%s step on %s (%ld node%s x %ld task%s%s)\n", restart ? "new" : "starting the", nodes,
                s->nodes, s->nodes == 1 ? "" : "s", s->o.tasks_per_node, s->o.tasks_per_node == 1 ? "" : "s",
                restart ? ", resuming from last.safetensors" : "");
        fflush(stderr);
        ct_hostlist_free(s->named);
        ct_hostlist_free(s->weak);
        s->named = ct_hostlist_new();
        s->weak = ct_hostlist_new();
        if (!s->named || !s->weak) {
            free(nodes);
            fprintf(stderr, P "out of memory\n");
            return 1;
        }
        status = run_step(s, nodes, restart);
        free(nodes);
        code = exit_code(status);
        if (s->stop_sig) {
            signal_steps(s, SIGKILL);
            return 128 + s->stop_sig;
        }
        if (code == 0)
            return 0;
        after_failure(s, status);
        if (code == CT_LAUNCHER_EXIT_STOPPED) {
            fprintf(stderr, P "the fit stopped on its requeue signal (exit %d)\n", code);
            return code;
        }
        if (ct_hostlist_count(s->named) == 0 && (code == 2 || code == CT_LAUNCHER_EXIT_NONFINITE)) {
            fprintf(stderr, P "the fit failed (exit %d) with no node named: a restart would fail alike\n", code);
            return 1;
        }
        if (restart >= s->o.max_restarts) {
            fprintf(stderr, P "%d restart%s done (--max-restarts %ld): giving up\n", restart, restart == 1 ? "" : "s",
                    s->o.max_restarts);
            return 1;
        }
        if (ct_hostlist_count(s->named) == 0)
            fprintf(stderr, P "no node named: the next step runs on the same nodes\n");
    }
}

int ct_cmd_supervise(int argc, char **argv)
{
    struct sv s = { 0 };
    sigset_t set;
    ct_error err;
    int help = 0, rc;

    ct_error_clear(&err);
    s.sigfd = -1;
    if (parse_args(argc, argv, &s.o, &help, &err))
        goto fail;
    if (help) {
        supervise_usage(stdout);
        return 0;
    }
    if (job_setup(&s, &err) || sizes(&s, &err))
        goto fail;
    s.bad = ct_hostlist_new();
    s.named = ct_hostlist_new();
    if (!s.bad || !s.named) {
        ct_error_set(&err, CT_ENOMEM, NULL, "supervise: out of memory");
        goto fail;
    }
    /* Signals are read from a signalfd in the step's poll loop: no handler, no race with srun's
     * exit. srun gets an unblocked mask (spawn). */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    s.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (s.sigfd < 0) {
        ct_error_set(&err, CT_EIO, NULL, "supervise: signalfd: %s", strerror(errno));
        goto fail;
    }
    scan_slurm_nodes(&s); /* nodes already failed before the first step */
    for (size_t i = 0; i < ct_hostlist_count(s.named); i++)
        ct_hostlist_push(s.bad, ct_hostlist_get(s.named, i), &err);
    ct_error_clear(&err);
    rc = supervise_loop(&s);
    signal_steps(&s, SIGKILL);
    close(s.sigfd);
    ct_hostlist_free(s.alloc);
    ct_hostlist_free(s.bad);
    ct_hostlist_free(s.named);
    ct_hostlist_free(s.weak);
    return rc;
fail:
    ct_error_print(stderr, &err);
    if (s.sigfd >= 0)
        close(s.sigfd);
    ct_hostlist_free(s.alloc);
    ct_hostlist_free(s.bad);
    ct_hostlist_free(s.named);
    ct_hostlist_free(s.weak);
    return ct_error_exit_status(err.code ? err.code : CT_EINVAL);
}
