/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — a checkpoint's metadata as one table of fields (engine/checkpoint/meta.c): each key, its
 * type and what a resume must match is written there once, and the metadata is written and read by
 * that table alone. A record (ct_ckpt_record) holds the values typed: the run describes itself as
 * one (what a save writes, and what a restore compares against), a file's metadata is read into
 * another. No other file names a metadata key (t/90). */
#ifndef CTRAIN_CHECKPOINT_META_H
#define CTRAIN_CHECKPOINT_META_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/checkpoint_io.h"
#include "ctrain/config.h"
#include "ctrain/error.h"

/* Metadata "format" of every checkpoint ctrain fit writes. */
#define CT_CKPT_FORMAT "ctrain-checkpoint-1"

/* The fields, in the order a checkpoint holds them (the table's rows). */
enum ct_ckpt_field {
    CT_CKPT_F_FORMAT, CT_CKPT_F_MODEL, CT_CKPT_F_OPTIMIZER, CT_CKPT_F_PRECISION, CT_CKPT_F_PARAM_DTYPE,
    CT_CKPT_F_OPTIMIZER_STEPS, CT_CKPT_F_EPOCH, CT_CKPT_F_STEP_IN_EPOCH, CT_CKPT_F_GLOBAL_STEP,
    CT_CKPT_F_BEST_VAL_ACC, CT_CKPT_F_BEST_VAL_LOSS, CT_CKPT_F_VAL_ACC, CT_CKPT_F_VAL_LOSS,
    CT_CKPT_F_WORLD_SIZE, CT_CKPT_F_BATCH_SIZE, CT_CKPT_F_BLAS_THREADS, CT_CKPT_F_GEMM_THREADS,
    CT_CKPT_F_SEED, CT_CKPT_F_RNG, CT_CKPT_F_FLAGS, CT_CKPT_F_SLURM_JOB_ID,
    CT_CKPT_F_MONITOR, CT_CKPT_F_BEST_SCORE, CT_CKPT_F_WAIT_COUNT, CT_CKPT_F_EARLY_STOPPED, CT_CKPT_F_TOP_K,
    CT_CKPT_F_DATAMODULE, CT_CKPT_F_DATA, CT_CKPT_F_VAL_FRACTION, CT_CKPT_F_MODEL_CONFIG,
    CT_CKPT_N_FIELDS
};

/* A checkpoint's metadata, typed. Text is cut to what the file's values hold. */
typedef struct ct_ckpt_record {
    char format[32];
    char model[320];           /* "<name> <describe>" */
    char optimizer[32];
    char precision[32];
    char param_dtype[16];      /* "F32", "F64", "BF16" (absent: F32) */
    int64_t optimizer_steps, epoch, step_in_epoch, global_step;
    double best_val_acc, best_val_loss, val_acc, val_loss;
    int64_t world_size, batch_size, blas_threads, gemm_threads;
    uint64_t seed;
    uint64_t rng[4];
    char flags[1024];          /* the run's flags as JSON */
    char slurm_job_id[64];
    char monitor[64];          /* "<metric> min|max" */
    double best_score;
    int64_t wait_count;
    int early_stopped;
    char top_k[1024];          /* "score name;score name..." */
    char datamodule[32];
    char data[128];
    double val_fraction;
    char model_config[CT_CONFIG_TEXT_MAX];
    /* Read: the fields the file holds (bit = 1 << field), those of them not of their type, and
     * their text as the file has it (pointers into the ct_ckpt read: valid while it lives).
     * Written: the fields a save writes. */
    uint64_t has, bad;
    const char *text[CT_CKPT_N_FIELDS];
} ct_ckpt_record;

#define CT_CKPT_BIT(f) ((uint64_t)1 << (f))
/* Every field: what a save of a run writes (best_val_loss only for a model without accuracy). */
#define CT_CKPT_ALL_FIELDS (CT_CKPT_BIT(CT_CKPT_N_FIELDS) - 1)

/* The record's fields (r->has) appended to c's metadata, in the table's order. */
void ct_ckpt_record_write(const ct_ckpt_record *r, ct_ckpt *c);
/* c's metadata into r: every key of the table it holds, typed (r->has, r->bad, r->text); a field
 * absent or not of its type keeps the table's default (param_dtype F32, best_val_acc -1, the
 * losses and scores NaN, counts 0). */
void ct_ckpt_record_read(const ct_ckpt *c, ct_ckpt_record *r);
/* r names ctrain's format; otherwise CT_EFORMAT "<flag><path>: not a ctrain checkpoint" with a
 * hint (flag: "" or "--ckpt-path "). */
int ct_ckpt_record_format_check(const ct_ckpt_record *r, const char *flag, const char *path, ct_error *err);

/* What a restore compares, by the table's match column. */
enum ct_ckpt_rules {
    CT_CKPT_RULE_LOAD = 1,            /* any load: format, model, the parameters' storage type */
    CT_CKPT_RULE_RESUME = 2,          /* a resume: the optimizer, the counters, and the settings of the run */
    CT_CKPT_RULE_DETERMINISTIC = 4,   /* --deterministic: world size, batch size, BLAS and OpenMP threads */
    CT_CKPT_RULE_JOB = 8              /* --ckpt-path auto: the SLURM job that wrote it */
};
/* theirs (read from path) against mine (the run's own record) under rules: the first field the
 * table says must match and does not, an error naming path, the setting, both values and a hint
 * (CT_ECONFLICT, CT_EFORMAT for a damaged value or another optimizer; a weights-only load's model or
 * storage type: CT_EFORMAT). schema: mine's model's config schema (its text is compared by value). */
int ct_ckpt_record_check(const ct_ckpt_record *theirs, const ct_ckpt_record *mine, const ct_config_key *schema,
                         unsigned rules, const char *path, ct_error *err);

/* The one metadata entry Hugging Face's own files carry (format pt: transformers refuses a
 * safetensors file whose format is not one of its frameworks), for ctrain export --format hf. */
void ct_ckpt_meta_hf(ct_ckpt *c);

#endif
