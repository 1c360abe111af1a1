/* SPDX-License-Identifier: BSD-3-Clause */
/* The flags of ctrain fit / validate / test (see trainer_flags.h). The accelerator/strategy/
 * precision flags go to the connector untouched; the rest fill a ct_trainer_config. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/fashion_mnist.h"
#include "ctrain/util.h"
#include "engine/cli/commands.h"
#include "engine/cli/trainer_flags.h"

enum kind { F_INT, F_LONG, F_DOUBLE, F_STRING, F_SWITCH, F_SPECIAL };

struct flag {
    const char *name;
    enum kind kind;
    long min, max;       /* F_INT / F_LONG */
    const char *metavar;
    const char *help;
};

static const struct flag flags[] = {
    { "--max-epochs", F_INT, 1, 1000000, "N", "epochs to train (default 5)" },
    { "--max-steps", F_LONG, -1, LONG_MAX, "N", "stop after N optimizer steps in all (default -1: no limit)" },
    { "--batch-size", F_INT, 1, 65536, "N", "samples per step on each rank (default 128)" },
    { "--lr", F_DOUBLE, 0, 0, "X", "peak learning rate (default 1e-3)" },
    { "--lr-schedule", F_SPECIAL, 0, 0, "NAME",
      "cosine (default: from --lr down to --min-lr over the fit, by optimizer step, after --warmup-steps) or "
      "constant" },
    { "--optimizer", F_SPECIAL, 0, 0, "NAME", "adamw (default) or sgd" },
    { "--weight-decay", F_DOUBLE, 0, 0, "X", "adamw: decoupled, default 0.01; sgd: L2, default 0" },
    { "--momentum", F_DOUBLE, 0, 0, "X", "sgd momentum (default 0.9)" },
    { "--hidden", F_SPECIAL, 0, 0, "W,W,...", "mlp: hidden layer widths (default 512,256; 'none': no hidden layer); the same as "
      "--model-config hidden=W-W" },
    { "--seed", F_LONG, 0, LONG_MAX, "N", "seed of initialisation and shuffling (default 42)" },
    { "--deterministic", F_SWITCH, 0, 0, NULL,
      "reproducible bit for bit: refuse to resume a checkpoint written with other BLAS threads, world size or "
      "batch size; recorded in summary.json and the plan" },
    { "--default-root-dir", F_STRING, 0, 0, "DIR",
      "where metrics.csv, checkpoints and summary.json go (default runs); yours, and not writable by others "
      "unless sticky" },
    { "--ckpt-path", F_STRING, 0, 0, "auto|last|best|FILE",
      "fit: resume from it (default: auto in a SLURM job, i.e. last.safetensors when this job wrote it; "
      "none outside SLURM); validate/test: the weights to evaluate (default best)" },
    { "--init-from", F_STRING, 0, 0, "FILE",
      "fit: start from these weights, a Hugging Face GPT-2 model.safetensors (--model gpt; its n_layer, n_head, "
      "n_embd, n_positions and vocab set --model-config, n_head from the config.json beside it)" },
    { "--weights-only", F_SWITCH, 0, 0, NULL,
      "fit with --ckpt-path: load only the checkpoint's weights and start a new run (fine-tuning: epoch 1, a "
      "fresh optimizer, this run's seed, data and split); without it a resume must match the checkpoint's "
      "seed, data, datamodule, val fraction and model config" },
    { "--log-every-n-steps", F_INT, 1, INT_MAX, "N", "metrics.csv row and plain progress line every N steps (default 50)" },
    { "--checkpoint-every-n-steps", F_INT, 0, INT_MAX, "N",
      "also write last.safetensors every N steps (default 0: at epoch ends only)" },
    { "--requeue-signal", F_STRING, 0, 0, "SIG",
      "on this signal stop after the step, save last.safetensors and requeue the SLURM job (default USR1; "
      "SIGTERM and SIGINT stop and save without requeueing)" },
    { "--dump-signal", F_STRING, 0, 0, "SIG|none",
      "on this signal every rank writes DIR/hang/rank-R.json (where it is, since when) and training goes on; "
      "read them with ctrain diagnose DIR (default USR2: scancel --signal=USR2 JOB; none when USR2 is the "
      "requeue signal)" },
    { "--no-auto-requeue", F_SWITCH, 0, 0, NULL, "on the requeue signal stop and save, but do not requeue the job" },
    { "--async-checkpoint", F_SWITCH, 0, 0, NULL,
      "write last.safetensors from a copy in host memory on a background thread while training goes on "
      "(the same atomic write; the next save, the end of fit and a stop wait for it)" },
    { "--collective-timeout", F_DOUBLE, 0, 0, "SECONDS",
      "a collective not done in SECONDS ends every rank, naming the rank(s) missing (default 300; 0: wait forever)" },
    { "--run-id", F_STRING, 0, 0, "NAME",
      "ddp without PMIx: the TCP store's keys are this run's (beside the SLURM or torchrun job's id), so runs "
      "given one MASTER_ADDR:MASTER_PORT do not mix; the same on every rank (default $CTRAIN_RUN_ID)" },
    { "--store-bind", F_STRING, 0, 0, "all|ADDR,...",
      "ddp without PMIx: where rank 0's TCP store listens (default $CTRAIN_STORE_BIND, else MASTER_ADDR's "
      "addresses on its host; all: every interface)" },
    { "--store-secret-file", F_STRING, 0, 0, "FILE",
      "ddp without PMIx: every TCP store client proves it holds this file's bytes (16 to 4096, the file "
      "readable only by you, the same on every rank); others are dropped (default $CTRAIN_STORE_SECRET_FILE)" },
    { "--progress", F_SPECIAL, 0, 0, "MODE",
      "auto (default: bar on a TTY, plain lines otherwise), bar, plain or off" },
    { "--data", F_STRING, 0, 0, "DIR", "the data module's directory (fashion-mnist: default "
      CT_FMNIST_DEFAULT_DIR "; tokens: train.bin and val.bin from ctrain tokenize)" },
    { "--val-fraction", F_DOUBLE, 0, 0, "X", "share of the training set held out for validation (default 1/12)" },
    { "--accumulate-grad-batches", F_INT, 1, 1000000, "N",
      "an optimizer step every N batches, their gradients summed (ddp exchanges only the last one's); the "
      "effective batch is N x --batch-size x ranks (default 1)" },
    { "--gradient-clip-val", F_DOUBLE, 0, 0, "X", "clip the gradient before each optimizer step (default 0: no clipping)" },
    { "--gradient-clip-algorithm", F_SPECIAL, 0, 0, "norm|value",
      "norm (default): scale the whole gradient, over all ranks, to L2 norm X at most; value: clamp each value to [-X, X]" },
    { "--val-check-interval", F_LONG, 1, LONG_MAX, "N",
      "validate (and checkpoint, early-stop) every N optimizer steps instead of at epoch ends" },
    { "--limit-val-batches", F_SPECIAL, 0, 0, "N|X",
      "validate on N batches per rank (an integer) or a fraction X of them (with a point: 0.25); default 1.0: all" },
    { "--warmup-steps", F_LONG, 0, LONG_MAX, "N", "linear warm-up of the learning rate over the first N optimizer "
      "steps, before the schedule (default 0)" },
    { "--min-lr", F_DOUBLE, 0, 0, "X", "the learning rate the cosine schedule ends at (default 0)" },
    { "--monitor", F_STRING, 0, 0, "METRIC",
      "what best.safetensors, --save-top-k and early stopping watch: val_loss, val_acc, val_<metric> or train_loss "
      "(default val_acc, val_loss for a model without accuracy)" },
    { "--mode", F_SPECIAL, 0, 0, "min|max", "whether lower or higher --monitor is better (default max for val_acc, "
      "min otherwise)" },
    { "--save-top-k", F_INT, -1, 12, "K", "1 (default): best.safetensors; K > 1: also the K best as "
      "epoch=E-step=S.safetensors; -1: every validation's; 0: no best checkpoint" },
    { "--early-stopping-patience", F_INT, 0, INT_MAX, "N",
      "stop fit after N validations without --monitor improving (default 0: never)" },
    { "--no-tensorboard", F_SWITCH, 0, 0, NULL, "write no TensorBoard event file beside metrics.csv" },
    { "--on-straggler", F_STRING, 0, 0, "off|warn|stop|exclude",
      "fit: every --straggler-every steps find a node whose busy time a step (its step less its waiting in "
      "collectives), averaged over the last --straggler-windows windows, is above --straggler-factor x the "
      "median node's; "
      "warn names it (log, metrics.csv, TensorBoard, summary.json), stop also saves last.safetensors and exits "
      "76, exclude also requeues the SLURM batch job without it (under ctrain supervise: the supervisor restarts "
      "the step without it) (default off)" },
    { "--straggler-every", F_INT, 1, 1000000, "N", "the window of straggler detection, in optimizer steps (default 8)" },
    { "--straggler-factor", F_DOUBLE, 0, 0, "X", "a node busy more than X times the median node is slow (default 2)" },
    { "--straggler-windows", F_INT, 1, 1000000, "K", "the windows a node's busy time is averaged over (default 3)" },
    { "--preflight", F_SWITCH, 0, 0, NULL,
      "fit: run ctrain preflight's checks before the first step; a node named stops the fit (exit status 3)" },
    { "--preflight-checks", F_STRING, 0, 0, "LIST",
      "preflight: which checks, of compute, network and allreduce (default all)" },
    { "--preflight-compute-factor", F_DOUBLE, 0, 0, "X",
      "preflight: name a rank whose GEMM rate is below the median rank's / X (default 3)" },
    { "--preflight-latency-factor", F_DOUBLE, 0, 0, "X",
      "preflight: name a node whose latency is above X times the median node's (default 4) ..." },
    { "--preflight-latency-floor", F_DOUBLE, 0, 0, "MS",
      "preflight: ... and above the median + MS milliseconds (default 5)" },
    { "--preflight-bandwidth-factor", F_DOUBLE, 0, 0, "X",
      "preflight: name a node whose bandwidth is below the median node's / X (default 4)" },
    { NULL, 0, 0, 0, NULL, NULL }
};

static const char *const connector_help[][3] = {
    { "--accelerator", "NAME", "cpu, cuda or auto (ctrain plan --help has the rules)" },
    { "--strategy", "NAME", "single_device, ddp, ddp_sharded, ddp_fork, ... or auto" },
    { "--devices", "SPEC", "auto, N, -1 or a list of ids" },
    { "--num-nodes", "N", "nodes in the run" },
    { "--precision", "P", "32-true (default), bf16-mixed, 64-true or bf16-true; 16-mixed on cuda" },
    { "--cluster-env", "NAME", "auto or a cluster environment name (ctrain plan --list)" },
    { "--model", "NAME", "the model to train (default mlp; ctrain plan --list shows the models)" },
    { "--model-config", "K=V,...", "the model's settings, e.g. hidden=1024-512 (mlp); keys in ctrain plan --list" },
    { "--datamodule", "NAME", "the data to train on (default: the model's, fashion-mnist for mlp)" },
    { NULL, NULL, NULL }
};

static int bad_value(const struct flag *f, const char *value, const char *what, ct_error *err);

static const char *const progress_names[] = { "auto", "bar", "plain", "off", NULL };
static const char *const optimizer_names[] = { "adamw", "sgd", NULL };
static const char *const schedule_names[] = { "cosine", "constant", NULL };
static const char *const clip_names[] = { "norm", "value", NULL };
static const char *const mode_names[] = { "min", "max", NULL };

/* Lightning's int-or-float: "50" counts batches, "0.25" or "1.0" is a fraction. */
static int parse_limit(const struct flag *f, const char *value, ct_trainer_config *cfg, ct_error *err)
{
    long n;
    double d;

    if (!ct_parse_long(value, 0, LONG_MAX, &n)) {
        cfg->limit_val_batches = (double)n;
        cfg->limit_val_is_count = 1;
        return 0;
    }
    if (ct_parse_double(value, &d) || !(d >= 0 && d <= 1))
        return bad_value(f, value, "a count of batches or a fraction in [0.0, 1.0]", err);
    cfg->limit_val_batches = d;
    cfg->limit_val_is_count = 0;
    return 0;
}

void ct_trainer_flags_usage(const char *cmd, FILE *out)
{
    fprintf(out, "usage: ctrain %s [flags]\n", cmd);
    if (!strcmp(cmd, "fit"))
        fprintf(out, "Train a model (default: an MLP on Fashion-MNIST), validating and checkpointing after every\n"
                     "epoch (or every --val-check-interval steps), then test the best checkpoint on the test split.\n");
    else if (!strcmp(cmd, "validate"))
        fprintf(out, "Evaluate a checkpoint (--ckpt-path, default best) on the validation split.\n");
    else
        fprintf(out, "Evaluate a checkpoint (--ckpt-path, default best) on the official test set.\n");
    fprintf(out, "\nTrainer flags (--flag VALUE or --flag=VALUE):\n");
    for (const struct flag *f = flags; f->name; f++) {
        char left[64];

        snprintf(left, sizeof(left), "%s%s%s", f->name, f->metavar ? " " : "", f->metavar ? f->metavar : "");
        fprintf(out, "  %-34s %s\n", left, f->help);
    }
    fprintf(out, "\nAccelerator, strategy, precision and model (resolved by the connector, as `ctrain plan` shows):\n");
    for (int i = 0; connector_help[i][0]; i++) {
        char left[64];

        snprintf(left, sizeof(left), "%s %s", connector_help[i][0], connector_help[i][1]);
        fprintf(out, "  %-34s %s\n", left, connector_help[i][2]);
    }
    fprintf(out, "\n  %-34s %s\n", "--help", "this text");
    fprintf(out, "\nOutputs in --default-root-dir: metrics.csv, events.out.tfevents.* (TensorBoard), last.safetensors,\n"
                 "best.safetensors, summary.json.\n"
                 "Exit status: 0 success, 1 failure (files, I/O, a rank, a collective timeout), 2 bad flags or\n"
                 "configuration, 75 (fit) stopped by a signal after saving last.safetensors: the SLURM job was\n"
                 "requeued (requeue signal) or the run continues with --ckpt-path last.\n");
}

void ct_trainer_flags_summary(FILE *out)
{
    fprintf(out, "\nfit, validate and test flags (ctrain fit --help has the details):\n");
    for (const struct flag *f = flags; f->name; f++) {
        char left[64];

        snprintf(left, sizeof(left), "%s%s%s", f->name, f->metavar ? " " : "", f->metavar ? f->metavar : "");
        fprintf(out, "  %-34s %s\n", left, f->help);
    }
    for (int i = 0; connector_help[i][0]; i++) {
        char left[64];

        snprintf(left, sizeof(left), "%s %s", connector_help[i][0], connector_help[i][1]);
        fprintf(out, "  %-34s %s\n", left, connector_help[i][2]);
    }
}

static int unknown_flag(const char *command, const char *name, ct_error *err)
{
    const char *names[96];
    int n = 0;

    for (const struct flag *f = flags; f->name; f++)
        names[n++] = f->name;
    for (int i = 0; connector_help[i][0]; i++)
        names[n++] = connector_help[i][0];
    names[n++] = "--help";
    names[n] = NULL;
    return ct_cli_flag_unknown(command, name, names, err);
}

static int bad_value(const struct flag *f, const char *value, const char *what, ct_error *err)
{
    ct_error_set(err, CT_EINVAL, "flag-value", "%s '%s' is not %s", f->name, value, what);
    return ct_error_hint(err, "%s %s: %s", f->name, f->metavar, f->help);
}

static int parse_choice(const struct flag *f, const char *value, const char *const *names, ct_error *err)
{
    const char *guess;

    for (int i = 0; names[i]; i++)
        if (!strcmp(value, names[i]))
            return i;
    ct_error_set(err, CT_EINVAL, "flag-value", "%s '%s' is not one of the choices", f->name, value);
    guess = ct_str_closest(value, names);
    if (guess)
        ct_error_hint(err, "did you mean %s %s?", f->name, guess);
    else
        ct_error_hint(err, "%s %s: %s", f->name, f->metavar, f->help);
    return CT_EINVAL;
}

/* --hidden W,W as the config key's value W-W ('none': no hidden layer). The widths' checks are
 * the key's (1 to 15 widths in [1, 65536]), said in the flag's own terms. */
static int parse_hidden(const struct flag *f, const char *value, ct_cli_model_flags *mf, ct_error *err)
{
    char buf[256], *save = NULL, *tok;
    size_t used = 0;
    int n = 0;

    if (!strcmp(value, "none")) {
        snprintf(mf->hidden, sizeof(mf->hidden), "none");
        return 0;
    }
    if (snprintf(buf, sizeof(buf), "%s", value) >= (int)sizeof(buf) || !*value || value[strlen(value) - 1] == ',')
        return bad_value(f, value, "a list of widths like 512,256", err);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long w;

        if (n++ == 15)
            return bad_value(f, value, "a list of at most 15 widths", err);
        if (ct_parse_long(tok, 1, 65536, &w))
            return bad_value(f, value, "a list of widths in [1, 65536] like 512,256", err);
        used += (size_t)snprintf(mf->hidden + used, sizeof(mf->hidden) - used, "%s%ld", used ? "-" : "", w);
    }
    return 0;
}

/* 1 when the "k=v,..." text sets key. */
static int config_sets(const char *text, const char *key)
{
    size_t len = strlen(key);

    for (const char *p = text; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, key, len) && p[len] == '=')
            return 1;
    return 0;
}

int ct_trainer_flags_fold(ct_connector_flags *cf, ct_cli_model_flags *mf, ct_error *err)
{
    const ct_registry_entry *model = ct_connector_model(cf, NULL);
    const char *given = cf->model_config ? cf->model_config : "";

    if (!mf->hidden[0])
        return 0;
    /* An unknown --model is the connector's to refuse, naming it. */
    if (model && !ct_config_key_find(model->config, "hidden")) {
        ct_error_set(err, CT_EINVAL, "trainer-hidden", "--hidden sets --model-config hidden=, a key model %s does "
                     "not take", model->name);
        return ct_error_hint(err, "use --model-config for %s (ctrain plan --list shows its keys)", model->name);
    }
    if (config_sets(given, "hidden")) {
        ct_error_set(err, CT_EINVAL, "trainer-hidden", "--hidden and --model-config hidden=... both set the layers");
        return ct_error_hint(err, "give one of them");
    }
    if (snprintf(mf->model_config, sizeof(mf->model_config), "%s%shidden=%s", given, given[0] ? "," : "",
                 mf->hidden) >= (int)sizeof(mf->model_config))
        return ct_error_set(err, CT_EINVAL, "model-config-syntax", "--model-config with --hidden is longer than "
                            "%zu characters", sizeof(mf->model_config) - 1);
    cf->model_config = mf->model_config;
    return 0;
}

static int apply(const struct flag *f, const char *value, ct_trainer_config *cfg, ct_error *err)
{
    long l;
    double d;
    int i;
    char range[96];

    snprintf(range, sizeof(range), "an integer in [%ld, %ld]", f->min, f->max);
    if ((f->kind == F_INT || f->kind == F_LONG) && ct_parse_long(value, f->min, f->max, &l))
        return bad_value(f, value, range, err);
    if (f->kind == F_DOUBLE && (ct_parse_double(value, &d) || d < 0))
        return bad_value(f, value, "a non-negative number", err);
    if (!strcmp(f->name, "--max-epochs")) cfg->max_epochs = (int)l;
    else if (!strcmp(f->name, "--max-steps")) cfg->max_steps = l;
    else if (!strcmp(f->name, "--batch-size")) cfg->batch_size = (int)l;
    else if (!strcmp(f->name, "--seed")) cfg->seed = (uint64_t)l;
    else if (!strcmp(f->name, "--log-every-n-steps")) cfg->log_every_n_steps = (int)l;
    else if (!strcmp(f->name, "--checkpoint-every-n-steps")) cfg->checkpoint_every_n_steps = (int)l;
    else if (!strcmp(f->name, "--accumulate-grad-batches")) cfg->accumulate_grad_batches = (int)l;
    else if (!strcmp(f->name, "--val-check-interval")) cfg->val_check_interval = l;
    else if (!strcmp(f->name, "--warmup-steps")) cfg->warmup_steps = l;
    else if (!strcmp(f->name, "--save-top-k")) cfg->save_top_k = (int)l;
    else if (!strcmp(f->name, "--early-stopping-patience")) cfg->early_stopping_patience = (int)l;
    else if (!strcmp(f->name, "--gradient-clip-val")) cfg->gradient_clip_val = d;
    else if (!strcmp(f->name, "--min-lr")) {
        cfg->min_lr = d;
        cfg->min_lr_set = 1;
    } else if (!strcmp(f->name, "--limit-val-batches")) return parse_limit(f, value, cfg, err);
    else if (!strcmp(f->name, "--gradient-clip-algorithm")) {
        if ((i = parse_choice(f, value, clip_names, err)) < 0)
            return i;
        snprintf(cfg->gradient_clip_algorithm, sizeof(cfg->gradient_clip_algorithm), "%s", clip_names[i]);
    } else if (!strcmp(f->name, "--mode")) {
        if ((i = parse_choice(f, value, mode_names, err)) < 0)
            return i;
        snprintf(cfg->mode, sizeof(cfg->mode), "%s", mode_names[i]);
    } else if (!strcmp(f->name, "--monitor")) {
        if (!*value || ct_str_copy(cfg->monitor, sizeof(cfg->monitor), value))
            return bad_value(f, value, "a metric name like val_loss", err);
    }
    else if (!strcmp(f->name, "--lr")) {
        if (!(d > 0))
            return bad_value(f, value, "a positive number", err);
        cfg->lr = d;
    } else if (!strcmp(f->name, "--weight-decay")) cfg->weight_decay = d;
    else if (!strcmp(f->name, "--momentum")) cfg->momentum = d;
    else if (!strcmp(f->name, "--collective-timeout")) cfg->collective_timeout = d;
    else if (!strcmp(f->name, "--preflight-compute-factor")) cfg->preflight_compute_factor = d;
    else if (!strcmp(f->name, "--preflight-latency-factor")) cfg->preflight_latency_factor = d;
    else if (!strcmp(f->name, "--preflight-latency-floor")) cfg->preflight_latency_floor_ms = d;
    else if (!strcmp(f->name, "--preflight-bandwidth-factor")) cfg->preflight_bandwidth_factor = d;
    else if (!strcmp(f->name, "--straggler-every")) cfg->straggler_every = (int)l;
    else if (!strcmp(f->name, "--straggler-windows")) cfg->straggler_windows = (int)l;
    else if (!strcmp(f->name, "--straggler-factor")) cfg->straggler_factor = d;
    else if (!strcmp(f->name, "--on-straggler")) {
        if (ct_str_copy(cfg->on_straggler, sizeof(cfg->on_straggler), value))
            return bad_value(f, value, "off, warn or stop", err);
    } else if (!strcmp(f->name, "--preflight-checks")) {
        if (ct_str_copy(cfg->preflight_checks, sizeof(cfg->preflight_checks), value))
            return bad_value(f, value, "a list of compute, network and allreduce", err);
    }
    else if (!strcmp(f->name, "--val-fraction")) {
        if (d >= 1)
            return bad_value(f, value, "a fraction in [0, 1)", err);
        cfg->val_fraction = d;
    } else if (!strcmp(f->name, "--optimizer")) {
        if ((i = parse_choice(f, value, optimizer_names, err)) < 0)
            return i;
        snprintf(cfg->optimizer, sizeof(cfg->optimizer), "%s", optimizer_names[i]);
    } else if (!strcmp(f->name, "--lr-schedule")) {
        if ((i = parse_choice(f, value, schedule_names, err)) < 0)
            return i;
        snprintf(cfg->lr_schedule, sizeof(cfg->lr_schedule), "%s", schedule_names[i]);
    } else if (!strcmp(f->name, "--progress")) {
        if ((i = parse_choice(f, value, progress_names, err)) < 0)
            return i;
        cfg->progress = (enum ct_trainer_progress)i;
    } else {
        char *dst = !strcmp(f->name, "--default-root-dir") ? cfg->default_root_dir
                    : !strcmp(f->name, "--store-secret-file") ? cfg->store_secret_file
                    : !strcmp(f->name, "--ckpt-path")      ? cfg->ckpt_path
                    : !strcmp(f->name, "--init-from")      ? cfg->init_from
                                                           : cfg->data_dir;

        if (!strcmp(f->name, "--requeue-signal")) {
            if (ct_str_copy(cfg->requeue_signal, sizeof(cfg->requeue_signal), value))
                return bad_value(f, value, "a signal name like USR1", err);
            return 0;
        }
        if (!strcmp(f->name, "--run-id")) {
            if (!*value || ct_str_copy(cfg->run_id, sizeof(cfg->run_id), value))
                return bad_value(f, value, "a name of at most 64 letters, digits, '.', '_' and '-'", err);
            return 0;
        }
        if (!strcmp(f->name, "--store-bind")) {
            if (!*value || ct_str_copy(cfg->store_bind, sizeof(cfg->store_bind), value))
                return bad_value(f, value, "all, or this host's addresses, comma-separated", err);
            return 0;
        }
        if (!strcmp(f->name, "--dump-signal")) {
            if (!*value || ct_str_copy(cfg->dump_signal, sizeof(cfg->dump_signal), value))
                return bad_value(f, value, "a signal name like USR2, or none", err);
            return 0;
        }
        if (!*value)
            return bad_value(f, value, "a path", err);
        if (ct_str_copy(dst, CT_TRAINER_PATH_MAX, value))
            return bad_value(f, value, "a path shorter than 1024 bytes", err);
    }
    return 0;
}

/* The store's settings from the environment too: a launcher or batch script sets them once for
 * every rank, as it sets MASTER_ADDR; a flag given wins. The Trainer checks them (config.c). */
static void env_defaults(ct_trainer_config *cfg)
{
    const char *v;

    if ((v = getenv("CTRAIN_RUN_ID")))
        snprintf(cfg->run_id, sizeof(cfg->run_id), "%s", v);
    if ((v = getenv("CTRAIN_STORE_BIND")))
        snprintf(cfg->store_bind, sizeof(cfg->store_bind), "%s", v);
    if ((v = getenv("CTRAIN_STORE_SECRET_FILE")))
        snprintf(cfg->store_secret_file, sizeof(cfg->store_secret_file), "%s", v);
}

int ct_trainer_flags_parse(int argc, char **argv, ct_trainer_config *cfg, ct_connector_flags *cf,
                           ct_cli_model_flags *mf, int *help, ct_error *err)
{
    ct_trainer_config_default(cfg);
    env_defaults(cfg);
    memset(cf, 0, sizeof(*cf));
    memset(mf, 0, sizeof(*mf));
    *help = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *eq = strchr(arg, '='), *value = NULL;
        const struct flag *f = NULL;
        char name[64];
        int rc;

        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            *help = 1;
            return 0;
        }
        if (strncmp(arg, "--", 2)) {
            ct_error_set(err, CT_EINVAL, "flag-positional", "unexpected argument '%s'", arg);
            return ct_error_hint(err, "every setting is a --flag; see --help");
        }
        snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
        for (const struct flag *g = flags; g->name; g++)
            if (!strcmp(g->name, name))
                f = g;
        if (f && f->kind == F_SWITCH) {
            if (eq) {
                ct_error_set(err, CT_EINVAL, "flag-value", "%s takes no value (got '%s')", name, eq + 1);
                return ct_error_hint(err, "write %s alone", name);
            }
            if (!strcmp(name, "--no-auto-requeue")) {
                cfg->auto_requeue = 0;
                continue;
            }
            if (!strcmp(name, "--async-checkpoint")) {
                cfg->async_checkpoint = 1;
                continue;
            }
            if (!strcmp(name, "--no-tensorboard")) {
                cfg->tensorboard = 0;
                continue;
            }
            if (!strcmp(name, "--weights-only")) {
                cfg->weights_only = 1;
                continue;
            }
            if (!strcmp(name, "--preflight")) {
                cfg->preflight = 1;
                continue;
            }
            cf->deterministic = 1;
            continue;
        }
        if (eq)
            value = eq + 1;
        else if (i + 1 < argc && (f || strncmp(argv[i + 1], "--", 2)))
            value = argv[++i];
        if (!f) {
            rc = ct_connector_flags_set(cf, name, value ? value : "", err);
            if (rc == 1)
                return unknown_flag(argv[0], name, err);
            if (rc)
                return rc;
        }
        if (!value) {
            ct_error_set(err, CT_EINVAL, "flag-missing-value", "%s needs a value", name);
            return ct_error_hint(err, "write %s VALUE or %s=VALUE", name, name);
        }
        if (f && !strcmp(f->name, "--hidden") && (rc = parse_hidden(f, value, mf, err)))
            return rc;
        if (f && strcmp(f->name, "--hidden") && (rc = apply(f, value, cfg, err)))
            return rc;
        /* A Trainer flag (run.c loads the weights) and a connector flag (the plan holds the file's
         * shape): the connector reads the path the Trainer keeps. */
        if (f && !strcmp(f->name, "--init-from"))
            cf->init_from = cfg->init_from;
    }
    /* The Trainer checks the config, once, when fit/validate/test start. */
    return 0;
}
