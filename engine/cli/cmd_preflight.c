/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain preflight — check the nodes of a run before it trains: a GEMM rate on every rank,
 * latency and bandwidth between nodes, a timed allreduce; a node far from the median is named.
 * Launched like fit (srun --mpi=pmix, mpirun, torchrun or by hand with ddp's gloo backend), with
 * fit's flags, so a job script gives both the same; the checks are engine/health/fit/preflight.c. */
#include <stdio.h>
#include <string.h>

#include "ctrain/connector.h"
#include "ctrain/engine.h"
#include "ctrain/trainer.h"
#include "engine/cli/commands.h"
#include "engine/cli/trainer_flags.h"

/* Exit status when a node failed a check or is an outlier. */
#define CT_EXIT_PREFLIGHT_NAMED 3

static void preflight_usage(FILE *out)
{
    fprintf(out,
            "usage: ctrain preflight [flags]   (under srun, mpirun, torchrun or by hand, as ctrain fit)\n"
            "\n"
            "Check the nodes of a run before it trains, on every rank of the process group fit would\n"
            "make (--strategy ddp; --strategy ddp:backend=gloo without a PMIx server):\n"
            "  compute    a fixed fp32 GEMM (256 x 256 x 256, oneDNN as the cpu accelerator runs it),\n"
            "             GFLOP/s of the best of 3 windows of 0.25 s, on every rank;\n"
            "  network    latency (8-byte round trips, the best / 2) and bandwidth (1 MiB messages, the\n"
            "             best of 10) between the first ranks of neighbouring nodes on a ring of nodes,\n"
            "             all pairs of a phase at once; a node's figure is the better of its two pairs;\n"
            "  allreduce  4 MiB over every rank, timed (the best of 3) and its sum checked.\n"
            "Each figure is set against the median: a rank whose GEMM rate is below the median / X\n"
            "(--preflight-compute-factor, default 3), a node whose latency is above X times the median\n"
            "(--preflight-latency-factor, default 4) and the median + MS (--preflight-latency-floor,\n"
            "default 5), or whose bandwidth is below the median / X (--preflight-bandwidth-factor,\n"
            "default 4) is named, as is a rank whose GEMM or allreduce gave a wrong result.\n"
            "--preflight-checks compute,network,allreduce picks checks (default all).\n"
            "\n"
            "Rank 0 prints a table and writes DIR/preflight.json (--default-root-dir DIR, default runs).\n"
            "fit's other flags are accepted (and those about training ignored), so one set of flags\n"
            "serves both steps of a job; ctrain fit --preflight runs the same checks before training.\n"
            "Not the SLURM plugin's node checks (srun --ctrain-preflight: each node's own GPUs, network\n"
            "and memory before a step's tasks start, man ctrain-spank).\n"
            "\n"
            "Exit status: 0 every node passed, 3 a node failed or is an outlier, 2 bad flags, 1 the checks\n"
            "could not run (a rank missing past --collective-timeout is named).\n");
}

int ct_cmd_preflight(int argc, char **argv)
{
    ct_trainer_config cfg;
    ct_connector_flags cf;
    ct_cli_model_flags mf;
    ct_connector *conn = NULL;
    ct_error err;
    int help = 0, named = 0, rc;

    ct_error_clear(&err);
    if ((rc = ct_trainer_flags_parse(argc, argv, &cfg, &cf, &mf, &help, &err))) {
        ct_error_prefix(&err, "preflight: ");
        ct_error_print(stderr, &err);
        return ct_error_exit_status(rc);
    }
    if (help) {
        preflight_usage(stdout);
        return 0;
    }
    if (cfg.preflight) {
        ct_error_set(&err, CT_EINVAL, "flag-value", "preflight: --preflight belongs to fit");
        ct_error_hint(&err, "ctrain preflight runs the checks itself; drop --preflight");
        ct_error_print(stderr, &err);
        return 2;
    }
    /* --init-from is about training (the weights fit starts from): ignored here like fit's other
     * training flags, so the connector does not read the file for a run that trains nothing. */
    cf.init_from = NULL;
    ct_engine_init();
    if ((rc = ct_connector_create(&cf, NULL, &conn, &err))) {
        ct_error_print(stderr, &err);
        return ct_error_exit_status(rc);
    }
    rc = ct_trainer_preflight(&cfg, conn, &named, &err);
    if (rc)
        ct_error_print(stderr, &err);
    ct_connector_free(conn);
    if (rc)
        return ct_error_exit_status(rc);
    return named ? CT_EXIT_PREFLIGHT_NAMED : 0;
}
