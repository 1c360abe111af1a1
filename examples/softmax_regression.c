/* SPDX-License-Identifier: BSD-3-Clause */
/* examples/softmax_regression.c — bring your own model to ctrain.
 *
 * A complete user program: it defines a model of its own (multinomial logistic regression: one
 * Linear layer and softmax cross-entropy, forward and backward by hand) through the public model
 * header, registers it under the name "softmax_regression", and trains it with ctrain's Trainer on
 * any data module that gives f32 inputs and u8 classes (Fashion-MNIST by default). Every strategy
 * works unchanged, e.g. two processes with DDP:
 *
 *   make examples
 *   build/examples/softmax_regression --strategy ddp --devices 2 --max-epochs 1
 *
 * It also adds a callback of its own (the public callback header): after each validation rank 0
 * prints the step, val_loss and the batches this rank trained since the last one, and at the end of
 * fit the step it ended at.
 *
 * Flags: --max-epochs N, --batch-size N, --lr X, --default-root-dir DIR, --data DIR, --seed N; every
 * other flag goes to the connector (--strategy, --devices, --precision, --model-config bias=0, ...).
 * Built against the installed headers and libctrain only (<ctrain/...>, -lctrain).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrain/callback.h>
#include <ctrain/connector.h>
#include <ctrain/engine.h>
#include <ctrain/model.h>
#include <ctrain/trainer.h>

/* --- the model ---------------------------------------------------------------------------------- */

struct softmax_regression {
    ct_model m;
    int in, classes, bias;
    float *params, *grads;     /* weight [classes, in] then bias [classes] */
    ct_tensor tensors[2];
    float *probs;              /* [max_batch, classes]: softmax of the last forward */
    const float *x;            /* the last forward's batch, kept for backward */
    const uint8_t *y;
    int batch;
};

static struct softmax_regression *self(const ct_model *m) { return m->impl; }

static void sr_destroy(ct_model *m)
{
    struct softmax_regression *s = self(m);

    free(s->params);
    free(s->grads);
    free(s->probs);
    free(s);
}

/* PyTorch's nn.Linear default: uniform in +-1/sqrt(in); the bias starts at 0 when disabled. */
static void sr_init(ct_model *m, ct_rng *r)
{
    struct softmax_regression *s = self(m);
    double bound = 1.0 / sqrt((double)s->in);

    for (size_t i = 0; i < m->num_params; i++)
        s->params[i] = (float)((2.0 * ct_rng_uniform(r) - 1.0) * bound);
    if (!s->bias)
        memset(s->params + (size_t)s->classes * s->in, 0, sizeof(float) * (size_t)s->classes);
}

/* logits = x W^T + b, softmax, cross-entropy summed over the batch. */
/* It does not announce its parameters (info.announces_params 0): the engine waits for all of them
 * before forward, so need is always NULL here. */
static int sr_forward(ct_model *m, const ct_batch *b, ct_param_need_fn need, void *ctx, ct_model_sums *out,
                      ct_error *err)
{
    struct softmax_regression *s = self(m);
    const float *x = b->x.data, *w = s->params, *bias = s->params + (size_t)s->classes * s->in;
    const uint8_t *y = b->y.data;
    double loss = 0;
    int correct = 0;

    for (int n = 0; n < b->count; n++) {
        float *p = s->probs + (size_t)n * s->classes;
        float max = -INFINITY, sum = 0;
        int arg = 0;

        for (int c = 0; c < s->classes; c++) {
            const float *wc = w + (size_t)c * s->in, *xn = x + (size_t)n * s->in;
            float z = bias[c];

            for (int i = 0; i < s->in; i++)
                z += wc[i] * xn[i];
            p[c] = z;
            if (z > max) {
                max = z;
                arg = c;
            }
        }
        for (int c = 0; c < s->classes; c++)
            sum += p[c] = expf(p[c] - max);
        for (int c = 0; c < s->classes; c++)
            p[c] /= sum;
        loss -= log((double)p[y[n]] > 1e-30 ? (double)p[y[n]] : 1e-30);
        correct += arg == y[n];
    }
    s->x = x;
    s->y = y;
    s->batch = b->count;
    out->loss = loss;
    out->count = b->count;
    out->correct = correct;
    return 0;
}

/* Gradient of the mean loss: dlogits = (p - onehot) / grad_scale; the bias (the last tensor) is
 * announced first, as backward finishes it, then the weight: DDP overlaps their allreduce. With
 * bias=0 the bias is an unused parameter: backward gives it no gradient and does not announce it,
 * which ddp refuses unless it runs as ddp_find_unused_parameters_true (Lightning's name). */
static int sr_backward(ct_model *m, double grad_scale, ct_param_need_fn need, ct_grad_ready_fn ready, void *ctx,
                       ct_error *err)
{
    struct softmax_regression *s = self(m);
    size_t wn = (size_t)s->classes * s->in;
    float *dw = s->grads, *db = s->grads + wn;
    int rc;

    memset(s->grads, 0, sizeof(float) * m->num_params);
    for (int n = 0; n < s->batch; n++) {
        const float *xn = s->x + (size_t)n * s->in;
        float *p = s->probs + (size_t)n * s->classes;

        p[s->y[n]] -= 1.0f;
        for (int c = 0; c < s->classes; c++) {
            float d = p[c] / (float)grad_scale;
            float *dwc = dw + (size_t)c * s->in;

            if (s->bias)
                db[c] += d;
            for (int i = 0; i < s->in; i++)
                dwc[i] += d * xn[i];
        }
    }
    if (s->bias && (rc = ready(ctx, wn, (size_t)s->classes)))
        return rc;
    return ready(ctx, 0, wn);
}

static const struct ct_model_ops sr_ops = {
    .destroy = sr_destroy,
    .init = sr_init,
    .forward = sr_forward,
    .backward = sr_backward,
};

static int sr_create(const ct_config *cfg, const ct_data_info *data, int max_batch, ct_model **out, ct_error *err)
{
    struct softmax_regression *s;
    char have[64];

    *out = NULL;
    if (data->x.dtype != CT_DTYPE_F32 || data->y.dtype != CT_DTYPE_U8 || data->classes < 2) {
        ct_error_set(err, CT_EINVAL, "data-model-mismatch", "softmax_regression takes f32 inputs and u8 classes, "
                     "not x %s", ct_tensor_spec_str(&data->x, have, sizeof(have)));
        return ct_error_hint(err, "use --datamodule fashion-mnist");
    }
    if (!(s = calloc(1, sizeof(*s))))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory");
    s->in = (int)ct_tensor_spec_numel(&data->x);
    s->classes = (int)data->classes;
    s->bias = (int)ct_config_int(cfg, "bias");
    s->m.num_params = (size_t)s->classes * s->in + (size_t)s->classes;
    s->params = calloc(s->m.num_params, sizeof(float));
    s->grads = calloc(s->m.num_params, sizeof(float));
    s->probs = calloc((size_t)max_batch * s->classes, sizeof(float));
    if (!s->params || !s->grads || !s->probs) {
        s->m.impl = s;
        sr_destroy(&s->m);
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for softmax_regression");
    }
    /* Named tensors viewing the parameter array (checkpoints store them under these names). */
    snprintf(s->tensors[0].name, sizeof(s->tensors[0].name), "linear.weight");
    s->tensors[0].ndim = 2;
    s->tensors[0].shape[0] = s->classes;
    s->tensors[0].shape[1] = s->in;
    s->tensors[0].numel = (size_t)s->classes * s->in;
    s->tensors[0].data = s->params;
    snprintf(s->tensors[1].name, sizeof(s->tensors[1].name), "linear.bias");
    s->tensors[1].ndim = 1;
    s->tensors[1].shape[0] = s->classes;
    s->tensors[1].numel = (size_t)s->classes;
    s->tensors[1].offset = s->tensors[0].numel;
    s->tensors[1].data = s->params + s->tensors[0].numel;

    s->m.ops = &sr_ops;
    s->m.impl = s;
    snprintf(s->m.describe, sizeof(s->m.describe), "%d-%d%s", s->in, s->classes, s->bias ? "" : "-nobias");
    s->m.info.has_accuracy = 1;
    s->m.x = data->x;
    s->m.y = data->y;
    s->m.max_batch = max_batch;
    s->m.params = s->params;
    s->m.grads = s->grads;
    s->m.n_tensors = 2;
    s->m.tensors = s->tensors;
    *out = &s->m;
    return 0;
}

static const ct_config_key sr_config[] = {
    { .key = "bias", .type = CT_CONFIG_INT, .min = 0, .max = 1, .dflt = "1", .help = "1: learn a bias per class" },
    { .key = NULL },
};

static const struct ct_model_class sr_class = { .create = sr_create };

static const ct_registry_entry sr_entry = {
    .name = "softmax_regression",
    .description = "multinomial logistic regression (example: examples/softmax_regression.c)",
    .accelerators = CT_ACCEL_CPU,
    .config = sr_config,
    .precisions = "32-true",
    .datamodule = "fashion-mnist",
};

/* --- a callback: what a fit tells the program ------------------------------------------------------ */

struct batch_counter {
    long batches;              /* optimizer steps since the last validation, on this rank */
};

static int count_batch(void *self, ct_run *run, const ct_batch_end *b, ct_error *err)
{
    struct batch_counter *c = self;

    (void)run;
    (void)b;
    (void)err;
    c->batches++;
    return 0;
}

static int report_validation(void *self, ct_run *run, const ct_validation_end *v, ct_error *err)
{
    struct batch_counter *c = self;
    ct_fit_counters k;

    (void)err;
    ct_run_counters(run, &k);
    if (k.is_zero)
        printf("softmax_regression: callback: epoch %lld step %lld val_loss %.6f after %ld batches\n",
               (long long)v->trained_epoch + 1, (long long)k.global_step, v->val->loss, c->batches);
    c->batches = 0;
    return 0;
}

static int report_end(void *self, ct_run *run, ct_error *err)
{
    ct_fit_counters k;

    (void)self;
    (void)err;
    ct_run_counters(run, &k);
    if (k.is_zero)
        printf("softmax_regression: callback: fit ended at step %lld\n", (long long)k.global_step);
    return 0;
}

static const ct_callback_ops batch_counter_ops = {
    .name = "batch_counter",
    .on_train_batch_end = count_batch,
    .on_validation_end = report_validation,
    .on_fit_end = report_end,
};

/* --- the program --------------------------------------------------------------------------------- */

static int parse(int argc, char **argv, ct_trainer_config *cfg, ct_connector_flags *cf, ct_error *err)
{
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        int rc;

        if (!value) {
            ct_error_set(err, CT_EINVAL, "flag-missing-value", "%s needs a value", flag);
            return ct_error_hint(err, "write %s VALUE", flag);
        }
        i++;
        if (!strcmp(flag, "--max-epochs"))
            cfg->max_epochs = atoi(value);
        else if (!strcmp(flag, "--batch-size"))
            cfg->batch_size = atoi(value);
        else if (!strcmp(flag, "--lr"))
            cfg->lr = atof(value);
        else if (!strcmp(flag, "--seed"))
            cfg->seed = strtoull(value, NULL, 10);
        else if (!strcmp(flag, "--default-root-dir"))
            snprintf(cfg->default_root_dir, sizeof(cfg->default_root_dir), "%s", value);
        else if (!strcmp(flag, "--data"))
            snprintf(cfg->data_dir, sizeof(cfg->data_dir), "%s", value);
        else if ((rc = ct_connector_flags_set(cf, flag, value, err)) == 1) {
            ct_error_set(err, CT_EINVAL, "flag-unknown", "unknown flag %s", flag);
            return ct_error_hint(err, "see the comment at the top of examples/softmax_regression.c");
        } else if (rc) {
            return rc;
        }
    }
    return 0; /* ct_trainer_fit checks the config */
}

int main(int argc, char **argv)
{
    ct_connector_flags cf = { 0 };
    ct_connector *conn = NULL;
    struct batch_counter counter = { 0 };
    ct_trainer_config cfg;
    ct_trainer_result res;
    ct_error err;
    int rc;

    ct_error_clear(&err);
    ct_engine_init();
    ct_trainer_config_default(&cfg);
    cfg.progress = CT_TRAINER_PROGRESS_PLAIN;
    cfg.lr = 5e-3;
    snprintf(cfg.default_root_dir, sizeof(cfg.default_root_dir), "runs/softmax_regression");
    /* Register before the connector resolves --model: every rank runs main() and registers too. */
    if ((rc = ct_model_register(&sr_entry, &sr_class, &err)) || (rc = parse(argc, argv, &cfg, &cf, &err)) ||
        (rc = ct_trainer_add_callback(&cfg, &batch_counter_ops, &counter, &err)))
        goto out;
    if (!cf.model)
        cf.model = "softmax_regression";
    if ((rc = ct_connector_create(&cf, NULL, &conn, &err)) || (rc = ct_trainer_fit(&cfg, conn, &res, &err)))
        goto out;
    if (res.filled)
        printf("softmax_regression: %d epochs on %d ranks: val_acc %.4f test_acc %.4f (summary %s)\n", res.epochs,
               res.world_size, res.val_acc, res.test_acc, res.summary_path);
out:
    if (rc)
        ct_error_print(stderr, &err);
    ct_connector_free(conn);
    return rc ? ct_error_exit_status(rc) : 0;
}
