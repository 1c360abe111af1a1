/* SPDX-License-Identifier: BSD-3-Clause */
/* EarlyStopping, as Lightning's: wait_count validations without improvement of the monitored
 * metric; the fit stops when it reaches --early-stopping-patience. Its count and whether it stopped
 * are the run's counters (run->st), which checkpoints carry, so a resumed run keeps them. */
#include <math.h>

#include "engine/callbacks/callbacks.h"

/* A metric not measured yet (train_loss before the first logged row) counts neither way; the count
 * restarts at each improvement whatever the patience (0: never stops). */
static int on_validation_end(void *self, ct_run *run, const ct_validation_end *v, ct_error *err)
{
    ct_progress_state *st = &run->st;

    (void)self;
    (void)err;
    if (v->improved)
        st->wait_count = 0;
    else if (!isnan(v->score) && run->opt.patience > 0 && ++st->wait_count >= run->opt.patience)
        st->early_stopped = 1;
    return 0;
}

const ct_callback_ops ct_early_stopping_callback = {
    .name = "early_stopping",
    .on_validation_end = on_validation_end,
};
