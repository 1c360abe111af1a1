/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain diagnose DIR — which ranks of a hung or timed-out fit are behind, from the hang records
 * the ranks wrote (DIR/hang/rank-R.json, on the dump signal or after a collective timeout) and
 * their live records (DIR/hang/rank-R.live). */
#include <stdio.h>
#include <string.h>

#include "engine/cli/commands.h"
#include "engine/health/fit/diagnose.h"

static void diagnose_usage(FILE *out)
{
    fprintf(out,
            "usage: ctrain diagnose DIR\n"
            "\n"
            "Name the ranks of a fit that are behind the others, where they are and since when, from\n"
            "the records its ranks wrote in DIR/hang/rank-R.json (DIR: the fit's --default-root-dir, or\n"
            "a folder of records itself, such as DIR/hang.restart-N where ctrain supervise keeps a\n"
            "failed step's). The ranks write them on the dump signal (--dump-signal, default USR2:\n"
            "scancel --signal=USR2 JOB, or kill -USR2 on ctrain fit; training goes on) and after a\n"
            "--collective-timeout. A rank is behind at a lower step, or at the same step in an earlier\n"
            "collective or phase (data, forward, backward, allreduce, optimizer, checkpoint,\n"
            "validation). A rank that wrote no record (stopped, dead or could not write) is read from\n"
            "its live record, DIR/hang/rank-R.live (where it last was), and the others' records say in\n"
            "which collective they found it missing. Records of an earlier run in DIR are left out.\n"
            "\n"
            "Exit status: 0 every rank at the same point, 3 some behind, 2 bad input (DIR missing, a\n"
            "record that is not one).\n");
}

int ct_cmd_diagnose(int argc, char **argv)
{
    const char *dir = NULL;
    ct_error err;
    int rc;

    ct_error_clear(&err);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            diagnose_usage(stdout);
            return 0;
        }
        if (argv[i][0] == '-' || dir) {
            static const char *const flags[] = { "--help", NULL };

            if (argv[i][0] == '-')
                ct_cli_flag_unknown("diagnose", argv[i], flags, &err);
            else
                ct_error_set(&err, CT_EINVAL, "diagnose-usage", "diagnose: one DIR only ('%s' is a second)", argv[i]);
            goto fail;
        }
        dir = argv[i];
    }
    if (!dir) {
        ct_error_set(&err, CT_EINVAL, "diagnose-usage", "diagnose needs DIR, the fit's --default-root-dir");
        ct_error_hint(&err, "ctrain diagnose runs/gpt");
        goto fail;
    }
    rc = ct_hang_diagnose(dir, stdout, &err);
    if (rc < 0) {
        ct_error_print(stderr, &err);
        return 2;
    }
    return rc ? 3 : 0;
fail:
    ct_error_print(stderr, &err);
    return 2;
}
