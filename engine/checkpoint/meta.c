/* SPDX-License-Identifier: BSD-3-Clause */
/* A checkpoint's metadata as one table (engine/checkpoint/meta.h): each row a key, its type, where
 * its value lives in a ct_ckpt_record, what a load must match and what a resume needs. Writing,
 * reading and the resume's comparisons all walk the table; no other file names a key (t/90). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/model.h"
#include "ctrain/registry.h"
#include "ctrain/util.h"
#include "engine/checkpoint/meta.h"

/* A count in the metadata: no run reaches 10^12 epochs, steps, ranks or samples a batch, and the
 * bound leaves room for the arithmetic on them (an epoch of INT64_MAX wrapped to negative). */
#define COUNT_MAX 1000000000000L

enum type {
    TEXT,      /* a string, cut to the record's array */
    COUNT,     /* int64_t from 0 to 10^12, decimal */
    REAL,      /* double, %.17g (compared as a number) */
    U64,       /* uint64_t, decimal (compared as text, as written) */
    RNG,       /* the xoshiro256** state: 4 x uint64_t as 64 hex digits */
    FLAG       /* int: "1" is set, anything else not */
};

/* What must match, and when (the rules a restore asks for, meta.h). */
enum match {
    M_LOAD = 1,      /* every load: its own message (refuse) */
    M_RESUME = 2,    /* a resume: its own message (refuse) */
    M_RUN = 4,       /* a resume: the settings that decide what is trained ("resuming would mix two runs") */
    M_EPOCH = 8,     /* a resume stopped inside an epoch: the sample order depends on it */
    /* --deterministic: the engine sums in a fixed order for a fixed world size, batch size and thread
     * count, OpenBLAS's and the OpenMP team's (OpenBLAS and oneDNN divide a GEMM's work by their
     * threads, and the rounding follows; oneDNN's AVX2 GEMM rounds differently on 1 and 2 threads):
     * continuing under another would not reproduce the run that wrote it */
    M_DET = 16,
    M_JOB = 32       /* --ckpt-path auto: the job that wrote it (its own message) */
};

/* How a field may be absent (older files) or unknown. */
enum absent {
    A_COMPARED = 0,  /* absent: compared as its default ("" when none) */
    A_SKIPPED = 1,   /* absent: not compared (written before ctrain recorded it) */
    A_EMPTY = 2      /* "" on either side: not compared (data that could not be identified) */
};

typedef int refuse_fn(const ct_ckpt_record *theirs, const ct_ckpt_record *mine, const char *path, unsigned rules,
                      ct_error *err);

typedef struct field {
    const char *key;
    enum type type;
    size_t off, size;          /* the value in ct_ckpt_record; size: a TEXT's array */
    unsigned match;            /* enum match */
    int need;                  /* a resume needs it present and of its type */
    enum absent absent;
    const char *dflt;          /* read when absent or not of its type (NULL: zero, "") */
    const char *flag;          /* M_RUN: the flag that sets it */
    const char *what, *how;    /* M_DET: its name and how to set it */
    refuse_fn *refuse;         /* M_LOAD, M_RESUME, M_JOB: the message */
} field;

static refuse_fn refuse_format, refuse_model, refuse_optimizer, refuse_storage, refuse_job;

#define AT(m) offsetof(ct_ckpt_record, m), sizeof(((ct_ckpt_record *)0)->m)

/* The table: every key ctrain fit writes, in the order it writes them. */
static const field fields[CT_CKPT_N_FIELDS] = {
    [CT_CKPT_F_FORMAT] = { "format", TEXT, AT(format), M_LOAD, .refuse = refuse_format },
    [CT_CKPT_F_MODEL] = { "model", TEXT, AT(model), M_LOAD, .refuse = refuse_model },
    [CT_CKPT_F_OPTIMIZER] = { "optimizer", TEXT, AT(optimizer), M_RESUME, .refuse = refuse_optimizer },
    [CT_CKPT_F_PRECISION] = { "precision", TEXT, AT(precision), 0 },
    /* the parameters' storage type is the precision's: another cannot be loaded into this run's
     * arrays (a checkpoint written before ctrain recorded it holds F32) */
    [CT_CKPT_F_PARAM_DTYPE] = { "param_dtype", TEXT, AT(param_dtype), M_LOAD, .dflt = "F32", .refuse = refuse_storage },
    [CT_CKPT_F_OPTIMIZER_STEPS] = { "optimizer_steps", COUNT, AT(optimizer_steps), 0, 1 },
    [CT_CKPT_F_EPOCH] = { "epoch", COUNT, AT(epoch), 0, 1 },
    [CT_CKPT_F_STEP_IN_EPOCH] = { "step_in_epoch", COUNT, AT(step_in_epoch), 0, 1 },
    [CT_CKPT_F_GLOBAL_STEP] = { "global_step", COUNT, AT(global_step), 0, 1 },
    [CT_CKPT_F_BEST_VAL_ACC] = { "best_val_acc", REAL, AT(best_val_acc), 0, .dflt = "-1" },
    [CT_CKPT_F_BEST_VAL_LOSS] = { "best_val_loss", REAL, AT(best_val_loss), 0, .dflt = "nan" },
    [CT_CKPT_F_VAL_ACC] = { "val_acc", REAL, AT(val_acc), 0, .dflt = "nan" },
    [CT_CKPT_F_VAL_LOSS] = { "val_loss", REAL, AT(val_loss), 0, .dflt = "nan" },
    [CT_CKPT_F_WORLD_SIZE] = { "world_size", COUNT, AT(world_size), M_EPOCH | M_DET, 1, .what = "world size",
                               .how = "resume with the --devices and --num-nodes that wrote it" },
    [CT_CKPT_F_BATCH_SIZE] = { "batch_size", COUNT, AT(batch_size), M_EPOCH | M_DET, 1, .what = "batch size",
                               .how = "resume with the --batch-size that wrote it" },
    [CT_CKPT_F_BLAS_THREADS] = { "blas_threads", COUNT, AT(blas_threads), M_DET, .what = "BLAS threads",
                                 .how = "set OPENBLAS_NUM_THREADS to the number it was written with" },
    [CT_CKPT_F_GEMM_THREADS] = { "gemm_threads", COUNT, AT(gemm_threads), M_DET, .absent = A_SKIPPED,
                                 .what = "OpenMP (GEMM) threads",
                                 .how = "set OMP_NUM_THREADS to the number it was written with" },
    [CT_CKPT_F_SEED] = { "seed", U64, AT(seed), M_RUN, .absent = A_SKIPPED, .flag = "--seed" },
    [CT_CKPT_F_RNG] = { "rng", RNG, AT(rng), 0, 1 },
    [CT_CKPT_F_FLAGS] = { "flags", TEXT, AT(flags), 0 },
    [CT_CKPT_F_SLURM_JOB_ID] = { "slurm_job_id", TEXT, AT(slurm_job_id), M_JOB, .refuse = refuse_job },
    /* Lightning's ModelCheckpoint and EarlyStopping: restored when the monitor is this run's */
    [CT_CKPT_F_MONITOR] = { "monitor", TEXT, AT(monitor), 0 },
    [CT_CKPT_F_BEST_SCORE] = { "best_score", REAL, AT(best_score), 0, .dflt = "nan" },
    [CT_CKPT_F_WAIT_COUNT] = { "wait_count", COUNT, AT(wait_count), 0 },
    [CT_CKPT_F_EARLY_STOPPED] = { "early_stopped", FLAG, AT(early_stopped), 0 },
    [CT_CKPT_F_TOP_K] = { "top_k", TEXT, AT(top_k), 0 },
    /* what decides the data order, the split and what is trained */
    [CT_CKPT_F_DATAMODULE] = { "datamodule", TEXT, AT(datamodule), M_RUN, .absent = A_SKIPPED, .flag = "--datamodule" },
    [CT_CKPT_F_DATA] = { "data", TEXT, AT(data), M_RUN, .absent = A_SKIPPED | A_EMPTY, .flag = "--data (its files)" },
    [CT_CKPT_F_VAL_FRACTION] = { "val_fraction", REAL, AT(val_fraction), M_RUN, .absent = A_SKIPPED,
                                 .flag = "--val-fraction" },
    [CT_CKPT_F_MODEL_CONFIG] = { "model_config", TEXT, AT(model_config), M_RUN, .absent = A_SKIPPED,
                                 .flag = "--model-config" },
};

#define VALUE(r, f, t) ((t *)((char *)(r) + fields[f].off))
#define CVALUE(r, f, t) ((const t *)((const char *)(r) + fields[f].off))

/* --- the metadata entries: only here ------------------------------------------------------------ */

static const char *meta_get(const ct_ckpt *c, const char *key)
{
    for (int i = 0; i < c->n_meta; i++)
        if (!strcmp(c->meta[i].key, key))
            return c->meta[i].value;
    return NULL;
}

/* key = the formatted value (cut to the value's size); nothing past CT_CKPT_MAX_META entries. */
static void __attribute__((format(printf, 3, 4))) meta_add(ct_ckpt *c, const char *key, const char *fmt, ...)
{
    ct_ckpt_meta *m;
    va_list ap;

    if (c->n_meta >= CT_CKPT_MAX_META)
        return;
    m = &c->meta[c->n_meta++];
    snprintf(m->key, sizeof(m->key), "%s", key);
    va_start(ap, fmt);
    vsnprintf(m->value, sizeof(m->value), fmt, ap);
    va_end(ap);
}

void ct_ckpt_meta_hf(ct_ckpt *c)
{
    meta_add(c, "format", "pt");
}

/* --- values as text, and back ------------------------------------------------------------------- */

/* Field f of r as a checkpoint writes it. */
static const char *value_text(const ct_ckpt_record *r, int f, char *buf, size_t size)
{
    switch (fields[f].type) {
    case TEXT:
        return CVALUE(r, f, char);
    case COUNT:
        snprintf(buf, size, "%" PRId64, *CVALUE(r, f, int64_t));
        break;
    case REAL:
        snprintf(buf, size, "%.17g", *CVALUE(r, f, double));
        break;
    case U64:
        snprintf(buf, size, "%" PRIu64, *CVALUE(r, f, uint64_t));
        break;
    case RNG: {
        const uint64_t *s = CVALUE(r, f, uint64_t);

        snprintf(buf, size, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, s[0], s[1], s[2], s[3]);
        break;
    }
    case FLAG:
        snprintf(buf, size, "%d", *CVALUE(r, f, int));
        break;
    }
    return buf;
}

static int parse_u64(const char *v, uint64_t *out)
{
    char *end;

    if (!v[0] || v[0] == '-' || v[0] == '+' || v[0] == ' ')
        return -1;
    *out = strtoull(v, &end, 10);
    return *end ? -1 : 0;
}

/* v into field f of r; -1 when it is not of the field's type (r unchanged then). */
static int value_parse(ct_ckpt_record *r, int f, const char *v)
{
    long n;
    double d;

    switch (fields[f].type) {
    case TEXT:
        snprintf(VALUE(r, f, char), fields[f].size, "%s", v);
        return 0;
    case COUNT:
        if (ct_parse_long(v, 0, COUNT_MAX, &n))
            return -1;
        *VALUE(r, f, int64_t) = n;
        return 0;
    case REAL:
        if (ct_parse_double(v, &d))
            return -1;
        *VALUE(r, f, double) = d;
        return 0;
    case U64:
        return parse_u64(v, VALUE(r, f, uint64_t));
    case RNG: {
        uint64_t s[4];

        if (strlen(v) != 64 || sscanf(v, "%16" SCNx64 "%16" SCNx64 "%16" SCNx64 "%16" SCNx64, &s[0], &s[1], &s[2],
                                      &s[3]) != 4)
            return -1;
        memcpy(VALUE(r, f, uint64_t), s, sizeof(s));
        return 0;
    }
    case FLAG:
        *VALUE(r, f, int) = !strcmp(v, "1");
        return 0;
    }
    return -1;
}

void ct_ckpt_record_write(const ct_ckpt_record *r, ct_ckpt *c)
{
    char buf[96];

    for (int f = 0; f < CT_CKPT_N_FIELDS; f++)
        if (r->has & CT_CKPT_BIT(f))
            meta_add(c, fields[f].key, "%s", value_text(r, f, buf, sizeof(buf)));
}

void ct_ckpt_record_read(const ct_ckpt *c, ct_ckpt_record *r)
{
    memset(r, 0, sizeof(*r));
    for (int f = 0; f < CT_CKPT_N_FIELDS; f++) {
        const char *v = meta_get(c, fields[f].key);

        if (fields[f].dflt)
            value_parse(r, f, fields[f].dflt);
        if (!v)
            continue;
        r->has |= CT_CKPT_BIT(f);
        r->text[f] = v;
        if (value_parse(r, f, v)) {
            r->bad |= CT_CKPT_BIT(f);
            if (fields[f].dflt)
                value_parse(r, f, fields[f].dflt);
        }
    }
}

/* --- what a restore compares -------------------------------------------------------------------- */

/* Their text of field f: as the file has it; absent: the default, or NULL when there is none. */
static const char *their_text(const ct_ckpt_record *theirs, int f)
{
    return theirs->text[f] ? theirs->text[f] : fields[f].dflt;
}

static int refuse_format(const ct_ckpt_record *theirs, const ct_ckpt_record *mine, const char *path, unsigned rules,
                         ct_error *err)
{
    (void)mine;
    (void)rules;
    return ct_ckpt_record_format_check(theirs, "", path, err);
}

int ct_ckpt_record_format_check(const ct_ckpt_record *r, const char *flag, const char *path, ct_error *err)
{
    const char *fmt = r->text[CT_CKPT_F_FORMAT];

    if (fmt && !strcmp(fmt, CT_CKPT_FORMAT))
        return 0;
    ct_error_set(err, CT_EFORMAT, "ckpt-format", "%s%s: not a ctrain checkpoint (metadata format is %s)", flag, path,
                 fmt ? fmt : "missing");
    return ct_error_hint(err, "pass a last.safetensors or best.safetensors written by ctrain fit");
}

/* The flags that build the checkpoint's model, from its metadata: the model's own hint when its
 * class has one (the flags that set its shape), else --model and --model-config. */
static int model_hint(const ct_ckpt_record *theirs, ct_error *err)
{
    const char *model = theirs->text[CT_CKPT_F_MODEL], *config = theirs->text[CT_CKPT_F_MODEL_CONFIG];
    size_t name = model ? strcspn(model, " ") : 0;
    char known[32];
    const char *hint;

    if (!name)
        return ct_error_hint(err, "use the --model and --model-config of the run that wrote it");
    snprintf(known, sizeof(known), "%.*s", (int)name, model);
    if ((hint = ct_model_shape_hint(ct_registry_find(CT_REG_MODEL, known))))
        return ct_error_hint(err, "%s", hint);
    return ct_error_hint(err, "use the flags of the run that wrote it: --model %.*s%s%s", (int)name, model,
                         config && config[0] ? " --model-config " : "", config && config[0] ? config : "");
}

/* Loading another model is a conflict of this run's flags with the checkpoint's (exit 2) when it
 * resumes, a wrong file (exit 1) when it only loads weights. */
static int refuse_model(const ct_ckpt_record *theirs, const ct_ckpt_record *mine, const char *path, unsigned rules,
                        ct_error *err)
{
    const char *model = theirs->text[CT_CKPT_F_MODEL];

    ct_error_set(err, rules & CT_CKPT_RULE_RESUME ? CT_ECONFLICT : CT_EFORMAT, "ckpt-model", "%s: checkpoint is for "
                 "model %s, this run builds %s", path, model ? model : "(missing)", mine->model);
    return model_hint(theirs, err);
}

static int refuse_optimizer(const ct_ckpt_record *theirs, const ct_ckpt_record *mine, const char *path,
                            unsigned rules, ct_error *err)
{
    const char *opt = theirs->text[CT_CKPT_F_OPTIMIZER];

    (void)rules;
    ct_error_set(err, CT_EFORMAT, "ckpt-optimizer", "%s: checkpoint has %s optimizer state, this run uses %s", path,
                 opt ? opt : "no", mine->optimizer);
    return ct_error_hint(err, "resume with --optimizer %s", opt ? opt : "of the run that wrote it");
}

/* Precisions that store alike (32-true, bf16-mixed) resume each other; a checkpoint stored in
 * another type is refused for a resume and for --weights-only alike. */
static int refuse_storage(const ct_ckpt_record *theirs, const ct_ckpt_record *mine, const char *path, unsigned rules,
                          ct_error *err)
{
    const char *prec = theirs->text[CT_CKPT_F_PRECISION];
    int resume = rules & CT_CKPT_RULE_RESUME;

    ct_error_set(err, resume ? CT_ECONFLICT : CT_EFORMAT, "ckpt-resume-mismatch",
                 "%s: the checkpoint stores its parameters in %s (--precision %s), this run stores them in %s "
                 "(--precision %s)", path, their_text(theirs, CT_CKPT_F_PARAM_DTYPE), prec ? prec : "32-true",
                 mine->param_dtype, mine->precision);
    return ct_error_hint(err, "%s with --precision %s", resume ? "resume" : "load it", prec ? prec : "32-true");
}

/* --ckpt-path auto resumes only what this job wrote: one written by another job (or outside
 * SLURM) is neither resumed nor overwritten silently, the user says which. */
static int refuse_job(const ct_ckpt_record *theirs, const ct_ckpt_record *mine, const char *path, unsigned rules,
                      ct_error *err)
{
    const char *writer = theirs->text[CT_CKPT_F_SLURM_JOB_ID] ? theirs->text[CT_CKPT_F_SLURM_JOB_ID] : "";

    (void)rules;
    ct_error_set(err, CT_ECONFLICT, "ckpt-auto-other-job", "--ckpt-path auto: %s was written by %s%s, not by this job %s",
                 path, writer[0] ? "SLURM job " : "a run outside SLURM", writer, mine->slurm_job_id);
    return ct_error_hint(err, "pass --ckpt-path last to resume it, or another --default-root-dir to start fresh");
}

/* The settings that decide the data order, the split and what is trained. */
static int refuse_run(int f, const char *theirs, const char *mine, const char *path, ct_error *err)
{
    const char *flag = fields[f].flag;

    ct_error_set(err, CT_ECONFLICT, "ckpt-resume-mismatch", "%s: the checkpoint's run has %s %s%s%s, this run "
                 "has %s%s%s: resuming would mix two runs", path, flag, theirs[0] ? "" : "'", theirs,
                 theirs[0] ? "" : "'", mine[0] ? "" : "'", mine, mine[0] ? "" : "'");
    return ct_error_hint(err, "resume with the checkpoint's %s, or add --weights-only to load its weights and start "
                              "a new run (in another --default-root-dir to keep this one)", flag);
}

/* Inside an epoch the sample order depends on the shards and the batch: another world size or
 * batch size cannot continue that epoch exactly. At an epoch boundary both may change. */
static int refuse_epoch(const ct_ckpt_record *theirs, const ct_ckpt_record *mine, const char *path, ct_error *err)
{
    ct_error_set(err, CT_ECONFLICT, "ckpt-resume-layout",
                 "%s: stopped inside epoch %" PRId64 " with %" PRId64 " ranks x batch %" PRId64 "; this run has %"
                 PRId64 " x %" PRId64, path, theirs->epoch + 1, theirs->world_size, theirs->batch_size,
                 mine->world_size, mine->batch_size);
    return ct_error_hint(err, "resume with the same world size and --batch-size");
}

/* --deterministic: a setting that changes the rounding. */
static int refuse_det(int f, const char *theirs, const ct_ckpt_record *mine, const char *path, ct_error *err)
{
    ct_error_set(err, CT_ECONFLICT, "deterministic-resume",
                 "--deterministic: %s was written with %s %s, this run has %" PRId64 ": its results would not be those "
                 "of the run that wrote it", path, fields[f].what, theirs[0] ? theirs : "(not recorded)",
                 *CVALUE(mine, f, int64_t));
    return ct_error_hint(err, "%s, or drop --deterministic to continue anyway", fields[f].how);
}

/* The checkpoint's --model-config as this run prints its own (the same keys and values in the
 * same order, "hidden=64," as "hidden=64"), so a checkpoint whose text was recorded as given
 * resumes under the same values; text the schema refuses stays as it is, and differs. */
static const char *config_as_mine(const ct_config_key *schema, const char *theirs, char *buf, size_t size)
{
    ct_config parsed;
    ct_error ignored;

    if (!schema || ct_config_parse(schema, "--model-config", "checkpoint", theirs, &parsed, &ignored) != 0)
        return theirs;
    return ct_config_print(&parsed, buf, size);
}

/* Whether their text of field f is mine: the same text, or the same number (a REAL or a COUNT
 * written another way: "0.1" and "0.10000000000000001"), or the same configuration. */
static int same_value(const ct_ckpt_record *theirs, const ct_ckpt_record *mine, int f, const char *t, const char *m,
                      const ct_config_key *schema)
{
    char buf[CT_CONFIG_TEXT_MAX];

    if (!strcmp(t, m))
        return 1;
    if (theirs->bad & CT_CKPT_BIT(f) || !theirs->text[f])
        return 0;
    if (fields[f].type == REAL)
        return *CVALUE(theirs, f, double) == *CVALUE(mine, f, double);
    if (fields[f].type == COUNT)
        return *CVALUE(theirs, f, int64_t) == *CVALUE(mine, f, int64_t);
    if (f == CT_CKPT_F_MODEL_CONFIG)
        return !strcmp(config_as_mine(schema, t, buf, sizeof(buf)), m);
    return 0;
}

/* A resume needs its counters and its PRNG state whole. */
static int need(const ct_ckpt_record *theirs, const char *path, ct_error *err)
{
    for (int f = 0; f < CT_CKPT_N_FIELDS; f++) {
        const char *v = theirs->text[f];

        if (!fields[f].need || (v && !(theirs->bad & CT_CKPT_BIT(f))))
            continue;
        if (fields[f].type == RNG)
            return ct_error_set(err, CT_EFORMAT, "ckpt-meta", "%s: metadata %s is missing or malformed", path,
                                fields[f].key);
        ct_error_set(err, CT_EFORMAT, "ckpt-meta", "%s: metadata %s is %s%s%s", path, fields[f].key,
                     v ? "'" : "missing", v ? v : "", v ? "', not a count from 0 to 10^12" : "");
        return ct_error_hint(err, "the file was altered or damaged: use another checkpoint");
    }
    return 0;
}

/* The fields of kind (enum match) under theirs and mine, in the table's order. */
static int compare(const ct_ckpt_record *theirs, const ct_ckpt_record *mine, const ct_config_key *schema,
                   unsigned kind, unsigned rules, const char *path, ct_error *err)
{
    char mb[96];

    for (int f = 0; f < CT_CKPT_N_FIELDS; f++) {
        const char *t = their_text(theirs, f), *m;
        unsigned k = fields[f].match & kind;

        if (!k)
            continue;
        /* written before ctrain recorded it (a count recorded empty alike) */
        if (fields[f].absent & A_SKIPPED && (!t || (!t[0] && fields[f].type == COUNT)))
            continue;
        t = t ? t : "";
        m = value_text(mine, f, mb, sizeof(mb));
        if (k & M_JOB && !m[0])   /* outside SLURM: any writer */
            continue;
        if (fields[f].absent & A_EMPTY && (!t[0] || !m[0]))
            continue;
        if (k & M_EPOCH) {   /* compared as the counts the resume continues with */
            if (*CVALUE(theirs, f, int64_t) == *CVALUE(mine, f, int64_t))
                continue;
            return refuse_epoch(theirs, mine, path, err);
        }
        if (same_value(theirs, mine, f, t, m, schema))
            continue;
        if (k & M_RUN)
            return refuse_run(f, t, m, path, err);
        if (k & M_DET)
            return refuse_det(f, t, mine, path, err);
        return fields[f].refuse(theirs, mine, path, rules, err);
    }
    return 0;
}

int ct_ckpt_record_check(const ct_ckpt_record *theirs, const ct_ckpt_record *mine, const ct_config_key *schema,
                         unsigned rules, const char *path, ct_error *err)
{
    int resume = rules & CT_CKPT_RULE_RESUME, rc;

    /* The order of the messages: whose file, which format and model, then what a resume continues. */
    if ((rules & CT_CKPT_RULE_JOB && (rc = compare(theirs, mine, schema, M_JOB, rules, path, err))) ||
        (rc = compare(theirs, mine, schema, M_LOAD | (resume ? M_RESUME | M_RUN : 0), rules, path, err)))
        return rc;
    if (!resume)
        return 0;
    if ((rc = need(theirs, path, err)) ||
        (theirs->step_in_epoch > 0 && (rc = compare(theirs, mine, schema, M_EPOCH, rules, path, err))))
        return rc;
    if (rules & CT_CKPT_RULE_DETERMINISTIC && (rc = compare(theirs, mine, schema, M_DET, rules, path, err)))
        return rc;
    return 0;
}
