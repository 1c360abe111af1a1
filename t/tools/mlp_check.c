/* SPDX-License-Identifier: BSD-3-Clause */
/* mlp_check OUTDIR [--dims 20-16-8-5] [--batch B] [--steps N] [--seed S] [--lr X] [--optimizer adamw|sgd] [--f64]
 *
 * What t/mlp_torch.py compares against the same MLP in PyTorch: builds the MLP (fp32, or fp64 with
 * --f64: 64-true), draws its initial weights and one batch (inputs uniform in [0, 1), labels below
 * the class count), and writes
 *   OUTDIR/batch.safetensors   "x" [B, in] (F32, the data's type) and "y" [B] (the labels, as F32)
 *   OUTDIR/params.safetensors  the initial weights, PyTorch's names (layers.0.weight, ...), in the
 *                              model's type
 *   OUTDIR/grads.safetensors   the gradients of the mean loss of that batch, same names and type
 *   OUTDIR/losses.txt          "step loss" for N steps of the optimizer (lr X, PyTorch's defaults)
 * and prints "loss L" (the first mean loss, %.17g).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/checkpoint_io.h"
#include "ctrain/nn.h"
#include "engine/models/mlp/mlp.h"
#include "ctrain/rng.h"
#include "ctrain/util.h"

static ct_ckpt ck;

static int save_model(const char *path, ct_mlp *m, const void *base, ct_error *err)
{
    size_t es = ct_dtype_size(ct_mlp_param_dtype(m));

    memset(&ck, 0, sizeof(ck));
    ck.n_tensors = ct_mlp_num_tensors(m);
    for (int i = 0; i < ck.n_tensors; i++) {
        const ct_tensor *t = ct_mlp_tensor(m, i);
        ct_ckpt_tensor *c = &ck.tensors[i];

        snprintf(c->name, sizeof(c->name), "%s", t->name);
        c->dtype = ct_mlp_param_dtype(m);
        c->ndim = t->ndim;
        memcpy(c->shape, t->shape, sizeof(c->shape));
        c->data = (char *)base + t->offset * es;
        c->nbytes = t->numel * es;
    }
    return ct_checkpoint_io_safetensors.save(path, &ck, err);
}

static int save_batch(const char *path, float *x, float *y, int batch, int in, ct_error *err)
{
    memset(&ck, 0, sizeof(ck));
    ck.n_tensors = 2;
    snprintf(ck.tensors[0].name, sizeof(ck.tensors[0].name), "x");
    ck.tensors[0].dtype = CT_DTYPE_F32;
    ck.tensors[0].ndim = 2;
    ck.tensors[0].shape[0] = batch;
    ck.tensors[0].shape[1] = in;
    ck.tensors[0].data = x;
    ck.tensors[0].nbytes = sizeof(float) * (size_t)batch * in;
    snprintf(ck.tensors[1].name, sizeof(ck.tensors[1].name), "y");
    ck.tensors[1].dtype = CT_DTYPE_F32;
    ck.tensors[1].ndim = 1;
    ck.tensors[1].shape[0] = batch;
    ck.tensors[1].data = y;
    ck.tensors[1].nbytes = sizeof(float) * (size_t)batch;
    return ct_checkpoint_io_safetensors.save(path, &ck, err);
}

int main(int argc, char **argv)
{
    int dims[CT_MLP_MAX_LAYERS + 1] = { 20, 16, 8, 5 }, n_dims = 4, f64 = 0;
    long batch = 8, steps = 20, seed = 7;
    double lr = 1e-3;
    enum ct_optim_kind kind = CT_OPTIM_ADAMW;
    ct_optim_config ocfg;
    ct_optim *opt = NULL;
    ct_mlp *m = NULL;
    ct_error err;
    ct_rng rng;
    char path[4096];
    float *x, *yf;
    uint8_t *y;
    FILE *losses;

    if (argc < 2)
        return fprintf(stderr, "usage: mlp_check OUTDIR [--dims a-b-c] [--batch B] [--steps N] [--seed S] [--lr X] "
                       "[--optimizer adamw|sgd] [--f64]\n"), 2;
    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";

        if (!strcmp(argv[i], "--f64")) {
            f64 = 1;
            continue;
        }
        if (!strcmp(argv[i], "--dims")) {
            char buf[256], *save = NULL;

            n_dims = 0;
            snprintf(buf, sizeof(buf), "%s", v);
            for (char *tok = strtok_r(buf, "-", &save); tok && n_dims <= CT_MLP_MAX_LAYERS;
                 tok = strtok_r(NULL, "-", &save))
                dims[n_dims++] = atoi(tok);
        } else if ((!strcmp(argv[i], "--batch") && ct_parse_long(v, 1, 4096, &batch)) ||
                   (!strcmp(argv[i], "--steps") && ct_parse_long(v, 1, 100000, &steps)) ||
                   (!strcmp(argv[i], "--seed") && ct_parse_long(v, 0, 1L << 40, &seed)) ||
                   (!strcmp(argv[i], "--lr") && ct_parse_double(v, &lr)) ||
                   (!strcmp(argv[i], "--optimizer") && ct_optim_parse_kind(v, &kind))) {
            return fprintf(stderr, "mlp_check: bad %s '%s'\n", argv[i], v), 2;
        }
        i++;
    }
    if (ct_mlp_create(dims, n_dims, (int)batch, &m, &err) ||
        (f64 && (ct_mlp_set_param_dtype(m, CT_DTYPE_F64, &err) || ct_mlp_set_gemm_dtype(m, CT_DTYPE_F64, &err))))
        return fprintf(stderr, "mlp_check: %s\n", err.msg), 1;
    ct_rng_seed(&rng, (uint64_t)seed);
    ct_mlp_init(m, &rng);
    x = malloc(sizeof(float) * (size_t)batch * dims[0]);
    y = malloc((size_t)batch);
    yf = malloc(sizeof(float) * (size_t)batch);
    for (size_t i = 0; i < (size_t)batch * dims[0]; i++)
        x[i] = (float)ct_rng_uniform(&rng);
    for (long b = 0; b < batch; b++)
        yf[b] = y[b] = (uint8_t)ct_rng_below(&rng, (uint64_t)dims[n_dims - 1]);
    snprintf(path, sizeof(path), "%s/batch.safetensors", argv[1]);
    if (save_batch(path, x, yf, (int)batch, dims[0], &err))
        return fprintf(stderr, "mlp_check: %s\n", err.msg), 1;
    snprintf(path, sizeof(path), "%s/params.safetensors", argv[1]);
    if (save_model(path, m, ct_mlp_params(m), &err))
        return fprintf(stderr, "mlp_check: %s\n", err.msg), 1;
    ct_optim_config_default(&ocfg, kind);
    ocfg.lr = lr;
    ocfg.dtype = ct_mlp_param_dtype(m);
    if (ct_optim_create(&ocfg, ct_mlp_num_params(m), &opt, &err))
        return fprintf(stderr, "mlp_check: %s\n", err.msg), 1;
    snprintf(path, sizeof(path), "%s/losses.txt", argv[1]);
    if (!(losses = fopen(path, "w")))
        return perror(path), 1;
    for (long s = 0; s < steps; s++) {
        double loss = ct_mlp_forward(m, x, y, (int)batch, NULL, NULL, NULL) / (double)batch;

        ct_mlp_backward(m, (int)batch, NULL, NULL, NULL);
        if (s == 0) {
            printf("loss %.17g\n", loss);
            snprintf(path, sizeof(path), "%s/grads.safetensors", argv[1]);
            if (save_model(path, m, ct_mlp_grads(m), &err))
                return fprintf(stderr, "mlp_check: %s\n", err.msg), 1;
        }
        fprintf(losses, "%ld %.17g\n", s, loss);
        ct_optim_step(opt, ct_mlp_params(m), ct_mlp_grads(m));
    }
    fclose(losses);
    ct_optim_free(opt);
    ct_mlp_free(m);
    free(x);
    free(y);
    free(yf);
    return 0;
}
