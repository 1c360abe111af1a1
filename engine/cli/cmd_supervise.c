/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain supervise [--max-restarts N] [--spare-nodes K] [--restart-backoff S] -- ctrain fit ... —
 * the body of a batch job that keeps training inside its allocation. The flags are read here; the
 * supervisor is engine/supervise (supervise.h says what it does and from which records). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/launcher.h"
#include "ctrain/util.h"
#include "engine/cli/commands.h"
#include "engine/supervise/supervise.h"

static void supervise_usage(FILE *out)
{
    fprintf(out,
            "usage: ctrain supervise [--max-restarts N] [--spare-nodes K] [--ntasks-per-node T] [--mpi TYPE]\n"
            "                        [--restart-backoff S] -- ctrain fit FLAGS...\n"
            "\n"
            "Run as the body of a batch job (sbatch --no-kill --requeue; scripts/sbatch/supervise.sbatch);\n"
            "without --no-kill in the job's script it warns at its start (slurmctld would end the whole job\n"
            "at the first failed node). It starts the fit as a step (srun --mpi=TYPE -N W, W = the job's\n"
            "nodes - K, T tasks a node) on the job's healthy nodes. When the step fails it names the failed\n"
            "node from records, never from what the ranks print: slurmctld's node states (DOWN,\n"
            "NOT_RESPONDING, FAIL, DRAIN); the ranks' event records in DIR/hang (event-*.json: the ranks a\n"
            "collective timeout found missing, with their nodes; the ranks the hang diagnosis after it has\n"
            "behind; the node the fit's --on-straggler stop|exclude names); srun (\"Node failure on HOST\");\n"
            "the plugin's --ctrain-preflight=fail|exclude line (exclude requeues nothing in a step of the\n"
            "supervisor, which sets CTRAIN_SUPERVISED=1 for it); and when none of these names one, the hang\n"
            "records in DIR/hang read as ctrain diagnose DIR reads them, or srun's \"HOST: task N: Killed\"\n"
            "(a task ended by a signal). It excludes that node and starts a new step of W nodes (srun\n"
            "--overlap) on the nodes left and the spares, which resumes from DIR/last.safetensors\n"
            "(--ckpt-path auto, fit's default in a SLURM job; the fit's --ckpt-path may be auto or last\n"
            "only): the allocation is kept, nothing is requeued. A step that failed with no node named is\n"
            "started again on the same nodes. Before restart N it waits S x 2^(N-1) seconds (at most %.0f)\n"
            "from the failed step's end. The failed step's records move to DIR/hang.restart-N. With fewer\n"
            "than W healthy nodes left it requeues the job through SLURM (as a preempted fit does; it\n"
            "starts again once SLURM has nodes for it, and resumes) and says so.\n"
            "\n"
            "  --max-restarts N      new steps after failures before it gives up (default 3, at most %d)\n"
            "  --spare-nodes K       nodes of the job kept out of the first step, to replace failed ones\n"
            "                        (default 0)\n"
            "  --ntasks-per-node T   ranks a node (default: SLURM_NTASKS_PER_NODE, else 1)\n"
            "  --mpi TYPE            srun --mpi (default pmix)\n"
            "  --restart-backoff S   seconds before the first restart, doubled for each later one, at most\n"
            "                        %.0f (default %.0f; 0: none)\n"
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
            CT_SUPERVISE_BACKOFF_MAX_S, CT_SUPERVISE_MAX_RESTARTS, CT_SUPERVISE_BACKOFF_MAX_S,
            CT_SUPERVISE_BACKOFF_S, CT_LAUNCHER_EXIT_STOPPED);
}

/* The fit's --default-root-dir (default runs), and no --ckpt-path but auto or last: a restart must
 * resume the run's own last.safetensors, not start again from a file named at the start. (last
 * continues a run an earlier job saved, as after a scancel.) */
static int fit_args(ct_supervise_opts *o, ct_error *err)
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

/* --restart-backoff S: seconds, from 0 (none) to the cap. */
static int parse_backoff(const char *v, double *out, ct_error *err)
{
    char *end;
    double d = strtod(v, &end);

    if (*v && !*end && d >= 0 && d <= CT_SUPERVISE_BACKOFF_MAX_S) {
        *out = d;
        return 0;
    }
    ct_error_set(err, CT_EINVAL, "supervise-flag", "supervise: --restart-backoff '%s' is not a number of seconds "
                 "from 0 to %g", v, CT_SUPERVISE_BACKOFF_MAX_S);
    return ct_error_hint(err, "--restart-backoff 5 (the default: 5 s before the first restart, 10 before the next, ...)");
}

static int parse_flag(int argc, char **argv, int *i, ct_supervise_opts *o, ct_error *err)
{
    static const char *const flags[] = { "--max-restarts", "--spare-nodes", "--ntasks-per-node", "--mpi",
                                         "--restart-backoff", "--help", NULL };
    const char *v;
    int missing = 0;

    /* Bounds a job can mean: each restart is a new step (minutes of SLURM's and the fit's start). */
    if ((v = ct_cli_flag_value(argc, argv, i, "--max-restarts", &missing)))
        return parse_long_flag("--max-restarts", v, 0, CT_SUPERVISE_MAX_RESTARTS, &o->max_restarts, err);
    if ((v = ct_cli_flag_value(argc, argv, i, "--spare-nodes", &missing)))
        return parse_long_flag("--spare-nodes", v, 0, 100000, &o->spares, err);
    if ((v = ct_cli_flag_value(argc, argv, i, "--ntasks-per-node", &missing)))
        return parse_long_flag("--ntasks-per-node", v, 1, 100000, &o->tasks_per_node, err);
    if ((v = ct_cli_flag_value(argc, argv, i, "--mpi", &missing)))
        return parse_mpi(v, &o->mpi, err);
    if ((v = ct_cli_flag_value(argc, argv, i, "--restart-backoff", &missing)))
        return parse_backoff(v, &o->backoff_s, err);
    if (missing) {
        ct_error_set(err, CT_EINVAL, "supervise-flag", "supervise: %s needs a value", argv[*i]);
        return ct_error_hint(err, "ctrain supervise --help");
    }
    return ct_cli_flag_unknown("supervise", argv[*i], flags, err);
}

static int parse_args(int argc, char **argv, ct_supervise_opts *o, int *help, ct_error *err)
{
    int i;

    o->max_restarts = 3;
    o->backoff_s = CT_SUPERVISE_BACKOFF_S;
    o->mpi = "pmix";
    for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            *help = 1;
            return 0;
        }
        if (parse_flag(argc, argv, &i, o, err))
            return -1;
    }
    if (i >= argc - 1) {
        ct_error_set(err, CT_EINVAL, "supervise-usage", "supervise needs the fit to run after --");
        return ct_error_hint(err, "ctrain supervise --spare-nodes 1 -- ctrain fit --strategy ddp "
                                  "--checkpoint-every-n-steps 100 ...");
    }
    o->cmd = argv + i + 1;
    return fit_args(o, err);
}

int ct_cmd_supervise(int argc, char **argv)
{
    ct_supervise_opts o = { 0 };
    ct_error err;
    int help = 0, rc;

    ct_error_clear(&err);
    if (parse_args(argc, argv, &o, &help, &err))
        goto fail;
    if (help) {
        supervise_usage(stdout);
        return 0;
    }
    if ((rc = ct_supervise_run(&o, &err)) >= 0)
        return rc;
fail:
    ct_error_print(stderr, &err);
    return ct_error_exit_status(err.code ? err.code : CT_EINVAL);
}
