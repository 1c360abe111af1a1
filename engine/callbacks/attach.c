/* SPDX-License-Identifier: BSD-3-Clause */
/* The fit's callback table, built once before the fit loop runs. */
#include "engine/callbacks/callbacks.h"

int ct_fit_callbacks_attach(ct_run *run, const ct_callback *user, int n_user, ct_error *err)
{
    int rc;

    if ((rc = ct_callbacks_add(run, &ct_hang_callback, NULL, err)) || (rc = ct_test_data_stall_attach(run, err)) ||
        (rc = ct_callbacks_add(run, &ct_straggler_callback, NULL, err)) ||
        (rc = ct_callbacks_add(run, &ct_early_stopping_callback, NULL, err)) ||
        (rc = ct_callbacks_add(run, &ct_loggers_callback, NULL, err)))
        return rc;
    for (int i = 0; i < n_user; i++)
        if ((rc = ct_callbacks_add(run, user[i].ops, user[i].self, err)))
            return rc;
    return ct_callbacks_add(run, &ct_model_checkpoint_callback, NULL, err);
}
