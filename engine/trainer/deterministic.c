/* SPDX-License-Identifier: BSD-3-Clause */
/* --deterministic: refuse to continue a checkpoint under settings that change the rounding. */
#include <stdio.h>
#include <string.h>

#include "ctrain/util.h"
#include "engine/trainer/deterministic.h"

static int refuse(const char *path, const char *what, const char *theirs, long mine, const char *how,
                  ct_error *err)
{
    ct_error_set(err, CT_ECONFLICT, "deterministic-resume",
                 "--deterministic: %s was written with %s %s, this run has %ld: its results would not be those of "
                 "the run that wrote it", path, what, theirs[0] ? theirs : "(not recorded)", mine);
    return ct_error_hint(err, "%s, or drop --deterministic to continue anyway", how);
}

int ct_deterministic_check_resume(ct_run *run, const char *path, ct_error *err)
{
    /* optional: checkpoints written before the key was recorded continue as before */
    static const struct {
        const char *key, *what, *how;
        int optional;
    } rules[] = {
        { "blas_threads", "BLAS threads", "set OPENBLAS_NUM_THREADS to the number it was written with", 0 },
        { "gemm_threads", "OpenMP (GEMM) threads", "set OMP_NUM_THREADS to the number it was written with", 1 },
        { "world_size", "world size", "resume with the --devices and --num-nodes that wrote it", 0 },
        { "batch_size", "batch size", "resume with the --batch-size that wrote it", 0 },
    };
    long mine[4] = { run->opt.blas_threads, run->opt.gemm_threads, run->world, run->opt.batch_size }, theirs;
    char value[64];
    int rc;

    for (int i = 0; i < 4; i++) {
        if ((rc = ct_run_checkpoint_meta(run, path, rules[i].key, value, sizeof(value), err)))
            return rc;
        if (!value[0] && rules[i].optional)
            continue;
        if (ct_parse_long(value, 0, 1L << 30, &theirs) || theirs != mine[i])
            return refuse(path, rules[i].what, value, mine[i], rules[i].how, err);
    }
    return 0;
}
