/* SPDX-License-Identifier: BSD-3-Clause */
/* The Trainer's flags as one table (engine/trainer/flags.c): each row a ct_config_key (the flag,
 * its type, range, default and help) and where its value lands in a ct_trainer_config. The CLI
 * parses fit/validate/test's flags and prints their --help from it, ct_trainer_config_check checks
 * a config against it, and summary.json's (and a checkpoint's) "flags" record is written from it:
 * a flag is added here once. */
#ifndef CTRAIN_TRAINER_FLAGS_TABLE_H
#define CTRAIN_TRAINER_FLAGS_TABLE_H

#include <stddef.h>

#include "ctrain/config.h"
#include "ctrain/trainer.h"

/* How a row's value lands in the config. */
enum ct_trainer_field {
    CT_TF_INT = 0,      /* int, in [min, max] */
    CT_TF_LONG,         /* long, in [min, max] */
    CT_TF_U64,          /* uint64_t (--seed), in [min, max] */
    CT_TF_DOUBLE,       /* double, in [min, max] */
    CT_TF_MIN_LR,       /* --min-lr: a double, and min_lr_set */
    CT_TF_LIMIT,        /* --limit-val-batches: a count or a fraction (limit_val_is_count) */
    CT_TF_TEXT,         /* char[size]; choices (if any) checked by ct_trainer_config_check only */
    CT_TF_CHOICE,       /* char[size], one of choices (parse and check) */
    CT_TF_ENUM,         /* an enum: the index of the value among choices */
    CT_TF_ON,           /* a switch: the int set to 1 */
    CT_TF_OFF,          /* a switch: the int set to 0 */
    CT_TF_HIDDEN,       /* the CLI's --hidden (the model config's hidden=): recorded from the plan */
    CT_TF_DETERMINISTIC, /* the connector's --deterministic: recorded from the plan */
    CT_TF_ACTIVATION_CHECKPOINTING /* the connector's --activation-checkpointing (the plan's; summary.json) */
};

typedef struct ct_trainer_flag {
    ct_config_key key;          /* .key the flag ("--lr"); .type; .min/.max its range; .dflt; .help */
    const char *metavar;        /* NULL: a switch */
    enum ct_trainer_field field;
    size_t offset, size;        /* the field in ct_trainer_config */
    const char *const *choices; /* the values it takes, NULL-ended (CHOICE, ENUM, TEXT) */
    const char *what;           /* what the value must be, for a parse error ("a positive number") */
    const char *id;             /* ct_trainer_config_check's id ("trainer-lr"); NULL: checked elsewhere */
    const char *json;           /* the "flags" record's key; NULL: not recorded */
} ct_trainer_flag;

/* The rows, ending with one whose key.key is NULL, in --help's (and the record's) order. */
extern const ct_trainer_flag ct_trainer_flags[];

/* Choices in their enums' order (engine/run/run.h's ct_on_straggler, ct_lr_schedule; the clip
 * algorithm after CT_CLIP_NONE). */
extern const char *const ct_trainer_straggler_names[];
extern const char *const ct_trainer_schedule_names[];
extern const char *const ct_trainer_clip_names[];
extern const char *const ct_trainer_mode_names[];   /* min, max: --monitor lower or higher is better */

/* The index of value in names, or -1. */
int ct_trainer_choice(const char *const *names, const char *value);
/* The row of flag name ("--lr"), or NULL. */
const ct_trainer_flag *ct_trainer_flag_find(const char *name);
/* Set the row's field in cfg from text, as the CLI gives it. CT_EINVAL (flag-value) naming the
 * flag, the value and what it must be. Not for CT_TF_HIDDEN / CT_TF_DETERMINISTIC /
 * CT_TF_ACTIVATION_CHECKPOINTING (the CLI's). */
int ct_trainer_flag_set(const ct_trainer_flag *f, const char *value, ct_trainer_config *cfg, ct_error *err);
/* CT_EINVAL (flag-value): "FLAG 'VALUE' is not WHAT", the hint the flag's help. */
int ct_trainer_flag_bad(const ct_trainer_flag *f, const char *value, const char *what, ct_error *err);
/* Check every row with an id against its range or choices (ct_trainer_config_check calls it). */
int ct_trainer_flags_check(const ct_trainer_config *cfg, ct_error *err);
/* "--flag METAVAR" into buf. */
const char *ct_trainer_flag_left(const ct_trainer_flag *f, char *buf, size_t size);

#endif
