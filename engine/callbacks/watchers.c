/* SPDX-License-Identifier: BSD-3-Clause */
/* The fit's watchers as callbacks: the hang record (engine/health/fit/hang.c) hears where the step
 * is; the straggler check (straggler.c) gathers its windows after the steps; and, for tests only,
 * a data phase that stalls (CTRAIN_TEST_DATA_STALL, read once when the callbacks are attached). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/callbacks/callbacks.h"
#include "engine/health/fit/hang.h"
#include "engine/health/fit/straggler.h"

/* The hang record's phases are the callbacks' (include/ctrain/callback.h), value for value. */
_Static_assert((int)CT_FIT_PHASE_DATA == (int)CT_PHASE_DATA && (int)CT_FIT_PHASE_ALLREDUCE == (int)CT_PHASE_ALLREDUCE &&
               (int)CT_FIT_PHASE_CHECKPOINT == (int)CT_PHASE_CHECKPOINT &&
               (int)CT_FIT_PHASE_VALIDATION == (int)CT_PHASE_VALIDATION && (int)CT_FIT_PHASE_DONE == (int)CT_PHASE_DONE,
               "enum ct_fit_phase follows enum ct_phase");

static void hang_phase(void *self, ct_run *run, enum ct_fit_phase phase)
{
    (void)self;
    (void)run;
    ct_hang_enter((int)phase);
}

static int hang_batch_end(void *self, ct_run *run, const ct_batch_end *b, ct_error *err)
{
    (void)self;
    (void)b;
    (void)err;
    ct_hang_step(run->st.global_step);
    return 0;
}

const ct_callback_ops ct_hang_callback = {
    .name = "hang",
    .on_phase = hang_phase,
    .on_train_batch_end = hang_batch_end,
};

static int straggler_fit_start(void *self, ct_run *run, ct_error *err)
{
    (void)self;
    return ct_straggler_start(run, err);
}

/* A node named with --on-straggler stop or exclude sets run->straggler_stop: the round ends here
 * and the fit loop stops (ct_callbacks_train_batch_end). */
static int straggler_batch_end(void *self, ct_run *run, const ct_batch_end *b, ct_error *err)
{
    (void)self;
    return ct_straggler_step(run, b->step_seconds, err);
}

const ct_callback_ops ct_straggler_callback = {
    .name = "straggler",
    .on_fit_start = straggler_fit_start,
    .on_train_batch_end = straggler_batch_end,
};

/* For tests only (t/93): CTRAIN_TEST_DATA_STALL=R:S makes rank R sleep in the data phase of
 * optimizer step S (from 0) for 60 s, as a rank blocked reading its data would (a FIFO is refused as
 * an input, so a test cannot block a read for real). */
struct data_stall {
    int rank;
    long step;
};

static void stall_phase(void *self, ct_run *run, enum ct_fit_phase phase)
{
    struct data_stall *d = self;

    if (phase == CT_FIT_PHASE_DATA && d->rank == run->rank && d->step == run->st.global_step) {
        d->step = -1;
        sleep(60);
    }
}

static const ct_callback_ops data_stall_callback = {
    .name = "test_data_stall",
    .on_phase = stall_phase,
    .free = free,
};

int ct_test_data_stall_attach(ct_run *run, ct_error *err)
{
    const char *v = getenv("CTRAIN_TEST_DATA_STALL");
    struct data_stall *d;
    int rc;

    if (!v)
        return 0;
    if (!(d = malloc(sizeof(*d))))
        return ct_error_set(err, CT_ENOMEM, "oom", "out of memory");
    if (sscanf(v, "%d:%ld", &d->rank, &d->step) != 2)
        d->rank = -1;
    if ((rc = ct_callbacks_add(run, &data_stall_callback, d, err)))
        free(d);
    return rc;
}
