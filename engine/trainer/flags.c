/* SPDX-License-Identifier: BSD-3-Clause */
/* The Trainer's flags, one table (see flags.h): what the CLI parses and prints, what
 * ct_trainer_config_check checks, what the "flags" record holds. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ctrain/util.h"
#include "engine/run/run.h"
#include "engine/trainer/flags.h"

_Static_assert(CT_STRAGGLER_OFF == 0 && CT_STRAGGLER_EXCLUDE == 3 && CT_LR_COSINE == 0 && CT_LR_CONSTANT == 1 &&
               CT_CLIP_VALUE == CT_CLIP_NORM + 1, "the choices are in their enums' order");

const char *const ct_trainer_straggler_names[] = { "off", "warn", "stop", "exclude", NULL };
const char *const ct_trainer_schedule_names[] = { "cosine", "constant", NULL };
const char *const ct_trainer_clip_names[] = { "norm", "value", NULL };
static const char *const progress_names[] = { "auto", "bar", "plain", "off", NULL };
static const char *const optimizer_names[] = { "adamw", "sgd", NULL };
const char *const ct_trainer_mode_names[] = { "min", "max", NULL };

#define AT(f) offsetof(ct_trainer_config, f), sizeof(((ct_trainer_config *)0)->f)
#define NUM(name, type, lo, hi, help) { name, type, lo, hi, 0, NULL, help, NULL }
/* Text: .min is the fewest characters (1: never empty); the field's size bounds the most. */
#define TXT(name, dflt, help) { name, CT_CONFIG_STRING, 0, 0, 0, dflt, help, NULL }
#define TXT1(name, dflt, help) { name, CT_CONFIG_STRING, 1, 0, 0, dflt, help, NULL }
/* The largest double below 1: --val-fraction's range is [0, 1). */
#define BELOW_1 0.99999999999999989

const ct_trainer_flag ct_trainer_flags[] = {
    { NUM("--max-epochs", CT_CONFIG_INT, 1, 1000000, "epochs to train (default 5)"), "N", CT_TF_INT, AT(max_epochs),
      NULL, NULL, "trainer-max-epochs", "max_epochs" },
    { NUM("--max-steps", CT_CONFIG_INT, -1, LONG_MAX, "stop after N optimizer steps in all (default -1: no limit)"), "N",
      CT_TF_LONG, AT(max_steps), NULL, NULL, "trainer-max-steps", "max_steps" },
    { NUM("--batch-size", CT_CONFIG_INT, 1, 65536, "samples per step on each rank (default 128)"), "N", CT_TF_INT,
      AT(batch_size), NULL, NULL, "trainer-batch-size", "batch_size" },
    { NUM("--lr", CT_CONFIG_DOUBLE, 1e-300, HUGE_VAL, "peak learning rate (default 1e-3)"), "X", CT_TF_DOUBLE, AT(lr),
      NULL, "a positive number", "trainer-lr", "lr" },
    { TXT("--lr-schedule", "cosine", "cosine (default: from --lr down to --min-lr over the fit, by optimizer step, "
          "after --warmup-steps) or constant"), "NAME", CT_TF_CHOICE, AT(lr_schedule), ct_trainer_schedule_names, NULL,
      "trainer-lr-schedule", "lr_schedule" },
    { TXT("--optimizer", "adamw", "adamw (default) or sgd"), "NAME", CT_TF_CHOICE, AT(optimizer), optimizer_names, NULL,
      "trainer-optimizer", "optimizer" },
    { NUM("--weight-decay", CT_CONFIG_DOUBLE, 0, HUGE_VAL, "adamw: decoupled, default 0.01; sgd: L2, default 0"), "X",
      CT_TF_DOUBLE, AT(weight_decay), NULL, NULL, NULL, "weight_decay" },
    { NUM("--momentum", CT_CONFIG_DOUBLE, 0, HUGE_VAL, "sgd momentum (default 0.9)"), "X", CT_TF_DOUBLE, AT(momentum),
      NULL, NULL, NULL, "momentum" },
    { TXT("--hidden", NULL, "mlp: hidden layer widths (default 512,256; 'none': no hidden layer); the same as "
          "--model-config hidden=W-W"), "W,W,...", CT_TF_HIDDEN, 0, 0, NULL, NULL, NULL, "hidden" },
    { NUM("--seed", CT_CONFIG_INT, 0, LONG_MAX, "seed of initialisation and shuffling (default 42)"), "N", CT_TF_U64,
      AT(seed), NULL, NULL, NULL, "seed" },
    { NUM("--deterministic", CT_CONFIG_INT, 0, 1, "reproducible bit for bit: refuse to resume a checkpoint written with "
          "other BLAS threads, world size or batch size; recorded in summary.json and the plan"), NULL,
      CT_TF_DETERMINISTIC, 0, 0, NULL, NULL, NULL, "deterministic" },
    { NUM("--activation-checkpointing", CT_CONFIG_INT, 0, 1, "keep only each block's input in forward and recompute "
          "the block in backward: less activation memory (summary.json's memory.activation_bytes_peak) for more "
          "compute, the same results bit for bit; models that can say so (gpt on cpu), others are refused"), NULL,
      CT_TF_ACTIVATION_CHECKPOINTING, 0, 0, NULL, NULL, NULL, NULL },
    { TXT1("--default-root-dir", "runs", "where metrics.csv, checkpoints and summary.json go (default runs); yours, and "
          "not writable by others unless sticky"), "DIR", CT_TF_TEXT, AT(default_root_dir), NULL, "a path", NULL, NULL },
    { TXT1("--ckpt-path", "", "fit: resume from it (default: auto in a SLURM job, i.e. last.safetensors when this job "
          "wrote it; none outside SLURM); validate/test: the weights to evaluate (default best)"), "auto|last|best|FILE",
      CT_TF_TEXT, AT(ckpt_path), NULL, "a path", NULL, NULL },
    { TXT1("--init-from", "", "fit: start from these weights, a Hugging Face GPT-2 model.safetensors (--model gpt; its "
          "n_layer, n_head, n_embd, n_positions and vocab set --model-config, n_head from the config.json beside it)"),
      "FILE", CT_TF_TEXT, AT(init_from), NULL, "a path", NULL, NULL },
    { NUM("--weights-only", CT_CONFIG_INT, 0, 1, "fit with --ckpt-path: load only the checkpoint's weights and start a "
          "new run (fine-tuning: epoch 1, a fresh optimizer, this run's seed, data and split); without it a resume must "
          "match the checkpoint's seed, data, datamodule, val fraction and model config"), NULL, CT_TF_ON,
      AT(weights_only), NULL, NULL, NULL, NULL },
    { NUM("--log-every-n-steps", CT_CONFIG_INT, 1, INT_MAX, "metrics.csv row and plain progress line every N steps "
          "(default 50)"), "N", CT_TF_INT, AT(log_every_n_steps), NULL, NULL, "trainer-log-every", NULL },
    { NUM("--checkpoint-every-n-steps", CT_CONFIG_INT, 0, INT_MAX, "also write last.safetensors every N steps (default "
          "0: at epoch ends only)"), "N", CT_TF_INT, AT(checkpoint_every_n_steps), NULL, NULL, "trainer-ckpt-every", NULL },
    { TXT("--requeue-signal", "USR1", "on this signal stop after the step, save last.safetensors and requeue the SLURM "
          "job (default USR1; SIGTERM and SIGINT stop and save without requeueing)"), "SIG", CT_TF_TEXT,
      AT(requeue_signal), NULL, "a signal name like USR1", NULL, NULL },
    { TXT1("--dump-signal", "", "on this signal every rank writes DIR/hang/rank-R.json (where it is, since when) and "
          "training goes on; read them with ctrain diagnose DIR (default USR2: scancel --signal=USR2 JOB; none when "
          "USR2 is the requeue signal)"), "SIG|none", CT_TF_TEXT, AT(dump_signal), NULL,
      "a signal name like USR2, or none", NULL, NULL },
    { NUM("--no-auto-requeue", CT_CONFIG_INT, 0, 1, "on the requeue signal stop and save, but do not requeue the job"),
      NULL, CT_TF_OFF, AT(auto_requeue), NULL, NULL, NULL, NULL },
    { NUM("--async-checkpoint", CT_CONFIG_INT, 0, 1, "write last.safetensors from a copy in host memory on a background "
          "thread while training goes on (the same atomic write; the next save, the end of fit and a stop wait for "
          "it)"), NULL, CT_TF_ON, AT(async_checkpoint), NULL, NULL, NULL, NULL },
    { NUM("--collective-timeout", CT_CONFIG_DOUBLE, 0, HUGE_VAL, "a collective not done in SECONDS ends every rank, "
          "naming the rank(s) missing (default 300; 0: wait forever)"), "SECONDS", CT_TF_DOUBLE, AT(collective_timeout),
      NULL, NULL, "trainer-collective-timeout", NULL },
    { TXT1("--run-id", "", "ddp without PMIx: the TCP store's keys are this run's (beside the SLURM or torchrun job's "
          "id), so runs given one MASTER_ADDR:MASTER_PORT do not mix; the same on every rank (default $CTRAIN_RUN_ID)"),
      "NAME", CT_TF_TEXT, AT(run_id), NULL, "a name of at most 64 letters, digits, '.', '_' and '-'", NULL, NULL },
    { TXT1("--store-bind", "", "ddp without PMIx: where rank 0's TCP store listens (default $CTRAIN_STORE_BIND, else "
          "MASTER_ADDR's addresses on its host; all: every interface)"), "all|ADDR,...", CT_TF_TEXT, AT(store_bind),
      NULL, "all, or this host's addresses, comma-separated", NULL, NULL },
    { TXT1("--store-secret-file", "", "ddp without PMIx: every TCP store client proves it holds this file's bytes (16 "
          "to 4096, the file readable only by you, the same on every rank); others are dropped (default "
          "$CTRAIN_STORE_SECRET_FILE)"), "FILE", CT_TF_TEXT, AT(store_secret_file), NULL, "a path", NULL, NULL },
    { TXT("--progress", "auto", "auto (default: bar on a TTY, plain lines otherwise), bar, plain or off"), "MODE",
      CT_TF_ENUM, AT(progress), progress_names, NULL, NULL, NULL },
    { TXT1("--data", "", "the data module's directory (default: the data module's own, which ctrain plan --list "
          "shows; tokens: train.bin and val.bin from ctrain tokenize)"), "DIR", CT_TF_TEXT, AT(data_dir), NULL,
      "a path", NULL, NULL },
    { NUM("--val-fraction", CT_CONFIG_DOUBLE, 0, BELOW_1, "share of the training set held out for validation (default "
          "1/12)"), "X", CT_TF_DOUBLE, AT(val_fraction), NULL, "a fraction in [0, 1)", "trainer-val-fraction",
      "val_fraction" },
    { NUM("--accumulate-grad-batches", CT_CONFIG_INT, 1, 1000000, "an optimizer step every N batches, their gradients "
          "summed (ddp exchanges only the last one's); the effective batch is N x --batch-size x ranks (default 1)"),
      "N", CT_TF_INT, AT(accumulate_grad_batches), NULL, NULL, "trainer-accumulate", "accumulate_grad_batches" },
    { NUM("--gradient-clip-val", CT_CONFIG_DOUBLE, 0, HUGE_VAL, "clip the gradient before each optimizer step (default "
          "0: no clipping)"), "X", CT_TF_DOUBLE, AT(gradient_clip_val), NULL, NULL, "trainer-gradient-clip",
      "gradient_clip_val" },
    { TXT("--gradient-clip-algorithm", "", "norm (default): scale the whole gradient, over all ranks, to L2 norm X at "
          "most; value: clamp each value to [-X, X]"), "norm|value", CT_TF_CHOICE, AT(gradient_clip_algorithm),
      ct_trainer_clip_names, NULL, "trainer-gradient-clip", NULL },
    { NUM("--val-check-interval", CT_CONFIG_INT, 1, LONG_MAX, "validate (and checkpoint, early-stop) every N optimizer "
          "steps instead of at epoch ends"), "N", CT_TF_LONG, AT(val_check_interval), NULL, NULL, NULL, NULL },
    { NUM("--limit-val-batches", CT_CONFIG_DOUBLE, 0, 1, "validate on N batches per rank (an integer) or a fraction X "
          "of them (with a point: 0.25); default 1.0: all"), "N|X", CT_TF_LIMIT, AT(limit_val_batches), NULL,
      "a count of batches or a fraction in [0.0, 1.0]", NULL, NULL },
    { NUM("--warmup-steps", CT_CONFIG_INT, 0, LONG_MAX, "linear warm-up of the learning rate over the first N optimizer "
          "steps, before the schedule (default 0)"), "N", CT_TF_LONG, AT(warmup_steps), NULL, NULL,
      "trainer-warmup-steps", "warmup_steps" },
    { NUM("--min-lr", CT_CONFIG_DOUBLE, 0, HUGE_VAL, "the learning rate the cosine schedule ends at (default 0)"), "X",
      CT_TF_MIN_LR, AT(min_lr), NULL, NULL, NULL, "min_lr" },
    { TXT1("--monitor", "", "what best.safetensors, --save-top-k and early stopping watch: val_loss, val_acc, "
          "val_<metric> or train_loss (default val_acc, val_loss for a model without accuracy)"), "METRIC", CT_TF_TEXT,
      AT(monitor), NULL, "a metric name like val_loss", NULL, NULL },
    { TXT("--mode", "", "whether lower or higher --monitor is better (default max for val_acc, min otherwise)"),
      "min|max", CT_TF_CHOICE, AT(mode), ct_trainer_mode_names, NULL, "trainer-mode", NULL },
    { NUM("--save-top-k", CT_CONFIG_INT, -1, CT_TOP_K_MAX, "1 (default): best.safetensors; K > 1: also the K best as "
          "epoch=E-step=S.safetensors; -1: every validation's; 0: no best checkpoint"), "K", CT_TF_INT, AT(save_top_k),
      NULL, NULL, "trainer-save-top-k", NULL },
    { NUM("--early-stopping-patience", CT_CONFIG_INT, 0, INT_MAX, "stop fit after N validations without --monitor "
          "improving (default 0: never)"), "N", CT_TF_INT, AT(early_stopping_patience), NULL, NULL,
      "trainer-early-stopping-patience", NULL },
    { NUM("--no-tensorboard", CT_CONFIG_INT, 0, 1, "write no TensorBoard event file beside metrics.csv"), NULL, CT_TF_OFF,
      AT(tensorboard), NULL, NULL, NULL, NULL },
    { TXT("--on-straggler", "off", "fit: every --straggler-every steps find a node whose busy time a step (its step "
          "less its waiting in collectives), averaged over the last --straggler-windows windows, is above "
          "--straggler-factor x the median node's; warn names it (log, metrics.csv, TensorBoard, summary.json), stop "
          "also saves last.safetensors and exits 76, exclude also requeues the SLURM batch job without it (under "
          "ctrain supervise: the supervisor restarts the step without it) (default off)"), "off|warn|stop|exclude",
      CT_TF_TEXT, AT(on_straggler), ct_trainer_straggler_names, "off, warn or stop", "trainer-straggler", NULL },
    { NUM("--straggler-every", CT_CONFIG_INT, 1, 1000000, "the window of straggler detection, in optimizer steps "
          "(default 8)"), "N", CT_TF_INT, AT(straggler_every), NULL, NULL, "trainer-straggler", NULL },
    { NUM("--straggler-factor", CT_CONFIG_DOUBLE, 0, HUGE_VAL, "a node busy more than X times the median node is slow "
          "(default 2)"), "X", CT_TF_DOUBLE, AT(straggler_factor), NULL, NULL, NULL, NULL },
    { NUM("--straggler-windows", CT_CONFIG_INT, 1, 1000000, "the windows a node's busy time is averaged over (default "
          "3)"), "K", CT_TF_INT, AT(straggler_windows), NULL, NULL, "trainer-straggler", NULL },
    { NUM("--preflight", CT_CONFIG_INT, 0, 1, "fit: run ctrain preflight's checks before the first step; a node named "
          "stops the fit (exit status 3)"), NULL, CT_TF_ON, AT(preflight), NULL, NULL, NULL, NULL },
    { TXT("--preflight-checks", "all", "preflight: which checks, of compute, network and allreduce (default all)"),
      "LIST", CT_TF_TEXT, AT(preflight_checks), NULL, "a list of compute, network and allreduce", NULL, NULL },
    { NUM("--preflight-compute-factor", CT_CONFIG_DOUBLE, 0, HUGE_VAL, "preflight: name a rank whose GEMM rate is below "
          "the median rank's / X (default 3)"), "X", CT_TF_DOUBLE, AT(preflight_compute_factor), NULL, NULL, NULL, NULL },
    { NUM("--preflight-latency-factor", CT_CONFIG_DOUBLE, 0, HUGE_VAL, "preflight: name a node whose latency is above X "
          "times the median node's (default 4) ..."), "X", CT_TF_DOUBLE, AT(preflight_latency_factor), NULL, NULL, NULL,
      NULL },
    { NUM("--preflight-latency-floor", CT_CONFIG_DOUBLE, 0, HUGE_VAL, "preflight: ... and above the median + MS "
          "milliseconds (default 5)"), "MS", CT_TF_DOUBLE, AT(preflight_latency_floor_ms), NULL, NULL, NULL, NULL },
    { NUM("--preflight-bandwidth-factor", CT_CONFIG_DOUBLE, 0, HUGE_VAL, "preflight: name a node whose bandwidth is "
          "below the median node's / X (default 4)"), "X", CT_TF_DOUBLE, AT(preflight_bandwidth_factor), NULL, NULL,
      NULL, NULL },
    { { NULL, 0, 0, 0, 0, NULL, NULL, NULL }, NULL, 0, 0, 0, NULL, NULL, NULL, NULL }
};

int ct_trainer_choice(const char *const *names, const char *value)
{
    for (int i = 0; names && names[i]; i++)
        if (!strcmp(names[i], value))
            return i;
    return -1;
}

const ct_trainer_flag *ct_trainer_flag_find(const char *name)
{
    for (const ct_trainer_flag *f = ct_trainer_flags; f->key.key; f++)
        if (!strcmp(f->key.key, name))
            return f;
    return NULL;
}

const char *ct_trainer_flag_left(const ct_trainer_flag *f, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s", f->key.key, f->metavar ? " " : "", f->metavar ? f->metavar : "");
    return buf;
}

int ct_trainer_flag_bad(const ct_trainer_flag *f, const char *value, const char *what, ct_error *err)
{
    ct_error_set(err, CT_EINVAL, "flag-value", "%s '%s' is not %s", f->key.key, value, what);
    return ct_error_hint(err, "%s %s: %s", f->key.key, f->metavar, f->key.help);
}

static int bad_choice(const ct_trainer_flag *f, const char *value, ct_error *err)
{
    const char *guess = ct_str_closest(value, f->choices);

    ct_error_set(err, CT_EINVAL, "flag-value", "%s '%s' is not one of the choices", f->key.key, value);
    if (guess)
        return ct_error_hint(err, "did you mean %s %s?", f->key.key, guess);
    return ct_error_hint(err, "%s %s: %s", f->key.key, f->metavar, f->key.help);
}

/* Lightning's int-or-float: "50" counts batches, "0.25" or "1.0" is a fraction. */
static int set_limit(const ct_trainer_flag *f, const char *value, ct_trainer_config *cfg, ct_error *err)
{
    long n;
    double d;

    if (!ct_parse_long(value, 0, LONG_MAX, &n)) {
        cfg->limit_val_batches = (double)n;
        cfg->limit_val_is_count = 1;
        return 0;
    }
    if (ct_parse_double(value, &d) || !(d >= f->key.min && d <= f->key.max))
        return ct_trainer_flag_bad(f, value, f->what, err);
    cfg->limit_val_batches = d;
    cfg->limit_val_is_count = 0;
    return 0;
}

static int set_number(const ct_trainer_flag *f, const char *value, char *at, ct_error *err)
{
    char range[96];
    long l;
    double d;

    if (f->key.type == CT_CONFIG_DOUBLE) {
        if (ct_parse_double(value, &d) || !isfinite(d) || d < f->key.min || d > f->key.max)
            return ct_trainer_flag_bad(f, value, f->what ? f->what : "a non-negative number", err);
        memcpy(at, &d, sizeof(d));
        return 0;
    }
    /* LONG_MAX is above the doubles' exact integers: the range's top is clamped back to it. */
    long lo = (long)f->key.min, hi = f->key.max >= (double)LONG_MAX ? LONG_MAX : (long)f->key.max;

    snprintf(range, sizeof(range), "an integer in [%ld, %ld]", lo, hi);
    if (ct_parse_long(value, lo, hi, &l))
        return ct_trainer_flag_bad(f, value, range, err);
    if (f->field == CT_TF_INT)
        *(int *)(void *)at = (int)l;
    else if (f->field == CT_TF_U64)
        *(uint64_t *)(void *)at = (uint64_t)l;
    else
        *(long *)(void *)at = l;
    return 0;
}

int ct_trainer_flag_set(const ct_trainer_flag *f, const char *value, ct_trainer_config *cfg, ct_error *err)
{
    char *at = (char *)cfg + f->offset;
    int i;

    switch (f->field) {
    case CT_TF_ON:
    case CT_TF_OFF:
        *(int *)(void *)at = f->field == CT_TF_ON;
        return 0;
    case CT_TF_LIMIT:
        return set_limit(f, value, cfg, err);
    case CT_TF_MIN_LR:
        cfg->min_lr_set = 1;
        /* fall through */
    case CT_TF_INT:
    case CT_TF_LONG:
    case CT_TF_U64:
    case CT_TF_DOUBLE:
        return set_number(f, value, at, err);
    case CT_TF_CHOICE:
    case CT_TF_ENUM:
        if ((i = ct_trainer_choice(f->choices, value)) < 0)
            return bad_choice(f, value, err);
        if (f->field == CT_TF_ENUM)
            *(int *)(void *)at = i;
        else
            snprintf(at, f->size, "%s", f->choices[i]);
        return 0;
    case CT_TF_TEXT:
        /* It must fit (and be given, where .min says so); what it says is checked by its reader
         * (the signal connector, the store, the preflight checks) or by ct_trainer_config_check. */
        if (strlen(value) < (size_t)f->key.min || ct_str_copy(at, f->size, value))
            return ct_trainer_flag_bad(f, value, f->size == CT_TRAINER_PATH_MAX && *value
                                                     ? "a path shorter than 1024 bytes" : f->what, err);
        return 0;
    default:
        return ct_error_set(err, CT_EINTERNAL, "flag-value", "%s is the CLI's own flag", f->key.key);
    }
}

/* The value of a numeric row as a double (ints and longs convert exactly within their ranges). */
static double number_of(const ct_trainer_flag *f, const ct_trainer_config *cfg)
{
    const char *at = (const char *)cfg + f->offset;

    switch (f->field) {
    case CT_TF_INT:  return *(const int *)(const void *)at;
    case CT_TF_LONG: return (double)*(const long *)(const void *)at;
    case CT_TF_U64:  return (double)*(const uint64_t *)(const void *)at;
    default:         return *(const double *)(const void *)at;
    }
}

/* "adamw or sgd", "off, warn, stop or exclude". */
static const char *choice_list(const char *const *names, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; names[i] && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i == 0 ? "" : names[i + 1] ? ", " : " or ",
                                 names[i]);
    return buf;
}

int ct_trainer_flags_check(const ct_trainer_config *cfg, ct_error *err)
{
    char list[96];

    for (const ct_trainer_flag *f = ct_trainer_flags; f->key.key; f++) {
        const char *text = (const char *)cfg + f->offset;
        double v;

        if (!f->id)
            continue;
        if (f->choices) {
            /* "" where the row's default is "": decided from the rest (--mode from --monitor). */
            if (ct_trainer_choice(f->choices, text) >= 0 || (!*text && f->key.dflt && !*f->key.dflt))
                continue;
            ct_error_set(err, CT_EINVAL, f->id, "%s '%s' is not %s", f->key.key, text,
                         choice_list(f->choices, list, sizeof(list)));
            return ct_error_hint(err, "write %s %s (ctrain fit --help says what each does)", f->key.key,
                                 choice_list(f->choices, list, sizeof(list)));
        }
        v = number_of(f, cfg);
        if (isfinite(v) && v >= f->key.min && v <= f->key.max)
            continue;
        if (f->key.type == CT_CONFIG_DOUBLE)
            ct_error_set(err, CT_EINVAL, f->id, "%s %g is not %s", f->key.key, v,
                         f->what ? f->what : "a non-negative number");
        else
            ct_error_set(err, CT_EINVAL, f->id, "%s %.0f is outside [%.0f, %.0f]", f->key.key, v, f->key.min,
                         f->key.max);
        return ct_error_hint(err, "%s %s: %s", f->key.key, f->metavar, f->key.help);
    }
    return 0;
}
