/* The evaluation loop: forward only, sharded over the ranks without padding, sums reduced. */
#include <math.h>

#include "engine/loops/loops.h"

int ct_eval_loop_run(ct_run *run, const ct_dataset *d, double *loss, double *acc, ct_error *err)
{
    ct_sampler s;
    double v[3] = { 0, 0, 0 }; /* loss sum, correct, samples */
    int rc;

    *loss = *acc = NAN;
    if ((rc = ct_sampler_init(&s, d->n, run->eval_batch, run->rank, run->world, 0, 0, err)))
        return rc;
    for (size_t step = 0; step < ct_sampler_steps(&s); step++) {
        const uint32_t *idx;
        int count = ct_sampler_batch(&s, step, &idx), correct = 0;

        ct_dataset_gather(d, idx, count, run->batch_x, run->batch_y);
        if (run->cuda_model) {
            double sum;

            if ((rc = ct_cuda_eval_forward(run, count, &sum, &correct, err))) {
                ct_sampler_free(&s);
                return rc;
            }
            v[0] += sum;
        } else {
            v[0] += ct_mlp_forward(run->model, run->batch_x, run->batch_y, count, &correct);
        }
        v[1] += correct;
        v[2] += count;
    }
    ct_sampler_free(&s);
    if ((rc = ct_strategy_reduce_sum(run->strategy, v, 3, err)))
        return rc;
    if (v[2] > 0) {
        *loss = v[0] / v[2];
        *acc = v[1] / v[2];
    }
    return 0;
}
