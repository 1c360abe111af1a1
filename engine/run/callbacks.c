/* SPDX-License-Identifier: BSD-3-Clause */
/* The run's callback table: every hook called in the order the callbacks were added. */
#include "engine/run/callbacks.h"

int ct_callbacks_add(ct_run *run, const ct_callback_ops *ops, void *self, ct_error *err)
{
    if (!ops || run->n_callbacks >= CT_RUN_MAX_CALLBACKS) {
        ct_error_set(err, CT_EINVAL, "callback-add", "callback %s: %s", ops && ops->name ? ops->name : "(no ops)",
                     ops ? "the run's table is full" : "no hooks given");
        return ct_error_hint(err, "a fit takes at most %d callbacks, its own included", CT_RUN_MAX_CALLBACKS);
    }
    run->callbacks[run->n_callbacks].ops = ops;
    run->callbacks[run->n_callbacks].self = self;
    run->n_callbacks++;
    return 0;
}

void ct_callbacks_free(ct_run *run)
{
    while (run->n_callbacks > 0) {
        ct_callback *c = &run->callbacks[--run->n_callbacks];

        if (c->ops->free)
            c->ops->free(c->self);
    }
}

void ct_run_counters(const ct_run *run, ct_fit_counters *out)
{
    out->rank = run->rank;
    out->world = run->world;
    out->is_zero = run->is_zero;
    out->epoch = run->st.epoch;
    out->step_in_epoch = run->st.step_in_epoch;
    out->global_step = run->st.global_step;
    out->max_epochs = run->opt.max_epochs;
    out->max_steps = run->opt.max_steps;
    out->last_train_loss = run->st.last_train_loss;
    out->last_val_loss = run->st.last_val_loss;
    out->last_val_acc = run->st.last_val_acc;
    out->best_score = run->st.best_score;
    out->monitor = run->opt.monitor_name;
    out->root_dir = run->opt.root_dir;
}

/* Each hook of the table in turn; the first error ends the round. */
#define EACH_HOOK(hook, ...)                                                                                           \
    for (int i_ = 0; i_ < run->n_callbacks; i_++) {                                                                   \
        const ct_callback *c_ = &run->callbacks[i_];                                                                   \
        int rc_;                                                                                                       \
                                                                                                                       \
        if (c_->ops->hook && (rc_ = c_->ops->hook(c_->self, run, __VA_ARGS__)))                                         \
            return rc_;                                                                                                \
    }                                                                                                                  \
    return 0

int ct_callbacks_fit_start(ct_run *run, ct_error *err)
{
    EACH_HOOK(on_fit_start, err);
}

void ct_callbacks_phase(ct_run *run, enum ct_fit_phase phase)
{
    for (int i = 0; i < run->n_callbacks; i++)
        if (run->callbacks[i].ops->on_phase)
            run->callbacks[i].ops->on_phase(run->callbacks[i].self, run, phase);
}

int ct_callbacks_train_batch_end(ct_run *run, const ct_batch_end *b, ct_error *err)
{
    for (int i = 0; i < run->n_callbacks && !run->straggler_stop; i++) {
        const ct_callback *c = &run->callbacks[i];
        int rc;

        if (c->ops->on_train_batch_end && (rc = c->ops->on_train_batch_end(c->self, run, b, err)))
            return rc;
    }
    return 0;
}

int ct_callbacks_train_epoch_end(ct_run *run, const ct_epoch_end *e, ct_error *err)
{
    EACH_HOOK(on_train_epoch_end, e, err);
}

int ct_callbacks_validation_end(ct_run *run, const ct_validation_end *v, ct_error *err)
{
    EACH_HOOK(on_validation_end, v, err);
}

int ct_callbacks_signal(ct_run *run, const ct_stop_event *s, ct_error *err)
{
    EACH_HOOK(on_signal, s, err);
}

int ct_callbacks_fit_end(ct_run *run, ct_error *err)
{
    EACH_HOOK(on_fit_end, err);
}

void ct_callbacks_exception(ct_run *run, const ct_error *err)
{
    for (int i = 0; i < run->n_callbacks; i++)
        if (run->callbacks[i].ops->on_exception)
            run->callbacks[i].ops->on_exception(run->callbacks[i].self, run, err);
}
