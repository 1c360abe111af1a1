/* SPDX-License-Identifier: BSD-3-Clause */
/* gpt_step [--config k=v,...] [--batch B] [--steps N] [--precision P | --bf16]
 *
 * Times ctrain's GPT training step on its own (forward, backward, AdamW on random byte tokens cut
 * into windows in order, as scripts/bench/torch_gpt.py does for PyTorch): 3 warm-up steps, then N
 * timed ones. --precision is one of the engine's cpu precisions (32-true, the default; bf16-mixed,
 * which --bf16 also names; bf16-true; 64-true), set up as `ctrain fit --precision` sets it: the
 * model's parameter and GEMM types from the precision's row, the optimizer's state in the
 * parameters' type. Prints one JSON line with tokens_per_sec (wall clock) and tokens_per_cpu_sec (the
 * process's CPU time, all threads: on a shared machine the steadier per-core figure). For scripts/bench/gpt-throughput and
 * profiling (perf record build/t/gpt_step); OpenBLAS's threads follow OPENBLAS_NUM_THREADS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctrain/nn.h"
#include "ctrain/precision.h"
#include "ctrain/registry.h"
#include "ctrain/rng.h"
#include "ctrain/util.h"
#include "engine/models/gpt/gpt.h"

/* The number formats of a precision the engine computes in (its row's ops); NULL for any other name. */
static const struct ct_precision_ops *precision_named(const char *name)
{
    const ct_registry_entry *e = ct_registry_find(CT_REG_PRECISION, name);

    return e ? e->ops : NULL;
}

int main(int argc, char **argv)
{
    ct_gpt_config cfg;
    ct_optim_config ocfg;
    ct_optim *opt = NULL;
    ct_gpt *m = NULL;
    ct_rng rng;
    ct_error err;
    long batch = 16, steps = 20;
    const struct ct_precision_ops *prec = precision_named("32-true");
    int T;
    int32_t *stream;
    size_t n;
    double t0 = 0, c0 = 0, loss = 0;

    ct_gpt_config_default(&cfg);
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";

        if (!strcmp(argv[i], "--bf16")) {
            prec = precision_named("bf16-mixed");
            continue;
        }
        if (!strcmp(argv[i], "--precision") && (!(prec = precision_named(v)) || prec->gemm_dtype == CT_DTYPE_F16))
            return fprintf(stderr, "gpt_step: --precision '%s': the cpu runs 32-true, bf16-mixed, bf16-true or "
                           "64-true\n", v), 2;
        if ((!strcmp(argv[i], "--config") && ct_gpt_config_parse(&cfg, v, &err)) ||
            (!strcmp(argv[i], "--batch") && ct_parse_long(v, 1, 4096, &batch)) ||
            (!strcmp(argv[i], "--steps") && ct_parse_long(v, 1, 1000000, &steps)) ||
            (strcmp(argv[i], "--config") && strcmp(argv[i], "--batch") && strcmp(argv[i], "--steps") &&
             strcmp(argv[i], "--precision")))
            return fprintf(stderr, "usage: gpt_step [--config k=v,..] [--batch B] [--steps N] "
                           "[--precision 32-true|bf16-mixed|bf16-true|64-true | --bf16]\n"), 2;
        i++;
    }
    if (ct_gpt_create(&cfg, (int)batch, &m, &err) || ct_gpt_set_param_dtype(m, prec->param_dtype, &err) ||
        ct_gpt_set_gemm_dtype(m, prec->gemm_dtype, &err))
        return fprintf(stderr, "gpt_step: %s (%s)\n", err.msg, err.hint), 1;
    ct_rng_seed(&rng, 1337);
    ct_gpt_init(m, &rng);
    ct_optim_config_default(&ocfg, CT_OPTIM_ADAMW);
    ocfg.lr = 3e-4;
    ocfg.dtype = prec->param_dtype;
    if (ct_optim_create(&ocfg, ct_gpt_num_params(m), &opt, &err))
        return fprintf(stderr, "gpt_step: %s\n", err.msg), 1;
    T = cfg.seq_len;
    n = (size_t)batch * T * (size_t)(steps + 3) + 1;
    stream = malloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++)
        stream[i] = (int32_t)ct_rng_below(&rng, (uint64_t)cfg.vocab);
    for (long s = 0; s < steps + 3; s++) {
        const int32_t *x = stream + (size_t)s * batch * T;

        if (s == 3) {
            t0 = ct_time_now();
            c0 = (double)clock() / CLOCKS_PER_SEC;
        }
        loss = ct_gpt_forward(m, x, x + 1, (int)batch, NULL, NULL) / ((double)batch * T);
        ct_gpt_backward(m, (double)batch * T, NULL, NULL, NULL);
        ct_optim_step(opt, ct_gpt_params(m), ct_gpt_grads(m));
    }
    printf("{\"tokens_per_sec\": %.1f, \"tokens_per_cpu_sec\": %.1f, \"steps\": %ld, \"precision\": \"%s\", "
           "\"loss\": %.6f}\n", (double)batch * T * steps / (ct_time_now() - t0),
           (double)batch * T * steps / ((double)clock() / CLOCKS_PER_SEC - c0), steps, prec->name,
           loss);
    ct_optim_free(opt);
    ct_gpt_free(m);
    free(stream);
    return 0;
}
