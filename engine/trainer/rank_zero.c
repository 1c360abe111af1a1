/* SPDX-License-Identifier: BSD-3-Clause */
/* Rank 0's steps told to every rank: a step only rank 0 performs (creating files, looking at one)
 * is broadcast, so every rank takes the same branch instead of the others waiting forever in the
 * next collective. */
#include <unistd.h>

#include "engine/trainer/trainer_internal.h"

/* A step only rank 0 performs (creating files): its status is broadcast so every rank stops
 * together instead of the others waiting forever in the next collective. */
int ct_rank_zero_status(ct_run *run, int rc, ct_error *err)
{
    int status = rc;
    ct_error bcast_err;

    if (ct_strategy_broadcast(run->strategy, &status, sizeof(status), 0, &bcast_err))
        return *err = bcast_err, bcast_err.code;
    if (status && !run->is_zero)
        return ct_error_set(err, status, "trainer-rank0", "rank 0 failed to prepare the output directory");
    return status;
}

int ct_rank_zero_file_exists(ct_run *run, const char *path, int *exists, ct_error *err)
{
    *exists = run->is_zero ? access(path, R_OK) == 0 : 0;
    return ct_strategy_broadcast(run->strategy, exists, sizeof(*exists), 0, err);
}
