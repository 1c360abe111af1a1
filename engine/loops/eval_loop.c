/* SPDX-License-Identifier: BSD-3-Clause */
/* The evaluation loop: forward only, sharded over the ranks without padding, sums reduced. */
#include <math.h>

#include "engine/loops/loops.h"

/* The batches a rank of per_rank samples runs: --limit-val-batches counts each rank's batches, as
 * Lightning's does each process's loader (the sums are reduced once at the end, so the ranks need
 * not run the same number). */
static size_t eval_steps(const ct_run *run, size_t per_rank, int limited)
{
    size_t steps = (per_rank + (size_t)run->eval_batch - 1) / (size_t)run->eval_batch;

    if (limited && run->opt.limit_val_is_count && run->opt.limit_val < (double)steps)
        steps = (size_t)run->opt.limit_val;
    else if (limited && !run->opt.limit_val_is_count && run->opt.limit_val < 1) {
        size_t part = (size_t)((double)steps * run->opt.limit_val);

        steps = part > 0 ? part : steps > 0 && run->opt.limit_val > 0 ? 1 : 0;
    }
    return steps;
}

static int eval_run(ct_run *run, enum ct_split split, int limited, ct_eval_result *out, ct_error *err)
{
    size_t n = ct_datamodule_size(run->data, split), steps, rounds;
    const ct_model_info *info = &run->model->info;
    ct_sampler s;
    double v[3] = { 0, 0, 0 }; /* loss sum, correct, loss terms */
    ct_model_sums total;
    int rc;

    out->loss = out->acc = out->count = NAN;
    for (int i = 0; i < CT_MODEL_MAX_METRICS; i++)
        out->metrics[i] = NAN;
    if ((rc = ct_sampler_init(&s, n, run->eval_batch, run->rank, run->world, 0, 0, err)))
        return rc;
    steps = eval_steps(run, s.per_rank, limited);
    /* In fit (validation, and the test after it) a stop signal is acted on before the next batch,
     * as in training: every rank asks before each of the most batches any rank runs (rank 0's, the
     * shards' largest), a rank that has run its own asking with the others. The flags the last
     * training step carried are left for a fresh question: a signal may have come since. */
    rounds = run->stop_enabled ? eval_steps(run, (n + (size_t)run->world - 1) / (size_t)run->world, limited) : steps;
    run->stop_posted = 0;
    for (size_t step = 0; step < rounds; step++) {
        const uint32_t *idx;
        int count;
        ct_model_sums sums;

        if (run->stop_enabled && (rc = ct_run_stop_agreed(run, err)) != 0) {
            ct_sampler_free(&s);
            return rc < 0 ? rc : 0;   /* run->stop.agreed: the caller saves and stops, nothing measured */
        }
        if (step >= steps)
            continue;
        count = ct_sampler_batch(&s, step, &idx);
        if ((rc = ct_datamodule_gather(run->data, split, idx, count, &run->batch, err)) ||
            (rc = ct_run_forward(run, &sums, err))) {
            ct_sampler_free(&s);
            return rc;
        }
        v[0] += sums.loss;
        v[1] += sums.correct;
        v[2] += sums.count;
    }
    ct_sampler_free(&s);
    if ((rc = ct_strategy_reduce_sum(run->strategy, v, 3, err)))
        return rc;
    if (!(v[2] > 0))
        return 0;
    out->loss = v[0] / v[2];
    out->acc = info->has_accuracy ? v[1] / v[2] : NAN;
    out->count = v[2];
    total.loss = v[0];
    total.correct = v[1];
    total.count = v[2];
    if (info->n_metrics > 0 && info->metrics)
        info->metrics(run->model, &total, out->metrics);
    return 0;
}

int ct_eval_loop_run(ct_run *run, enum ct_split split, ct_eval_result *out, ct_error *err)
{
    return eval_run(run, split, 0, out, err);
}

int ct_eval_loop_run_limited(ct_run *run, enum ct_split split, ct_eval_result *out, ct_error *err)
{
    return eval_run(run, split, 1, out, err);
}
