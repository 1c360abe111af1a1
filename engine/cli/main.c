/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — command-line entry: dispatch to one function per subcommand (engine/cli/cmd_*.c). */
#include <stdio.h>
#include <string.h>

#include <slurm/slurm_version.h>

#include "ctrain/trainer.h"
#include "engine/cli/commands.h"
#include "engine/cli/trainer_flags.h"

/* The Makefile sets it from the file VERSION: one version for the CLI, the plugin, ctrain.pc and
 * the packages (Debian, RPM, EasyBuild). */
#ifndef CTRAIN_VERSION
#error "CTRAIN_VERSION is set by the Makefile (from the file VERSION)"
#endif

struct ct_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

/* One line per subcommand, in the order `ctrain --help` lists them. */
static const struct ct_command commands[] = {
    { "fit", ct_cmd_fit, "train a model (--model, default an MLP on Fashion-MNIST), validate, checkpoint, then test the best" },
    { "validate", ct_cmd_validate, "evaluate a checkpoint on the validation split" },
    { "test", ct_cmd_test, "evaluate a checkpoint on the data module's test split" },
    { "plan", ct_cmd_plan, "resolve flags into a training plan (JSON) without training" },
    { "env", ct_cmd_env, "show the cluster environment: ranks, nodes, rank 0's address and port" },
    { "tokenize", ct_cmd_tokenize, "turn text files into byte-level token shards for --model gpt" },
    { "generate", ct_cmd_generate, "continue a prompt with a trained language model (--model gpt checkpoints)" },
    { "export", ct_cmd_export, "write a checkpoint in Hugging Face's layout (--format hf: GPT-2 safetensors, config.json)" },
    { "preflight", ct_cmd_preflight, "check the nodes before training: GEMM rate, latency and bandwidth, allreduce; name outliers" },
    { "diagnose", ct_cmd_diagnose, "name the ranks of a hung fit that are behind, from their records in DIR/hang" },
    { "supervise", ct_cmd_supervise, "run a fit as a batch job's step, restarting it on the job's other nodes when a node fails" },
    { "bind", ct_cmd_bind, "print the cores, GPUs and NIC each task of a node gets (the SPANK plan)" },
    { NULL, NULL, NULL }
};

static void usage(FILE *out)
{
    fprintf(out, "usage: ctrain <command> [flags]   (ctrain <command> --help for its flags)\n\ncommands:\n");
    for (const struct ct_command *c = commands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    ct_trainer_flags_summary(out);
    fprintf(out, "\n  --help     this text\n  --version  print the version\n");
}

int main(int argc, char **argv)
{
    /* fit: a stop signal from now on waits for the run's first step boundary (see
     * ct_trainer_hold_stop_signals); before any thread exists, so every thread inherits it. */
    if (argc >= 2 && !strcmp(argv[1], "fit"))
        ct_trainer_hold_stop_signals();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        /* The SLURM release of the headers libctrain was built with (requeue uses libslurm). */
        printf("ctrain %s (built for SLURM %d.%02d.%d)\n", CTRAIN_VERSION,
               SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER), SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER),
               SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
        return 0;
    }
    for (const struct ct_command *c = commands; c->name; c++)
        if (!strcmp(argv[1], c->name))
            return c->run(argc - 1, argv + 1);
    fprintf(stderr, "ctrain: error: unknown command '%s'\nctrain: hint: run 'ctrain --help' for the list\n",
            argv[1]);
    return 2;
}
