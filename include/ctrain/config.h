/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — "key=value,..." configurations checked against a schema (libctrain-core).
 *
 * A model's --model-config is a list of key=value pairs; its registry entry carries a schema (one
 * ct_config_key per accepted key: type, range, default, help), so the connector can check the
 * string inside srun (the SPANK plugin) where no model is linked, and `ctrain plan --list` can
 * print what each model accepts. The model's create() then reads typed values with the getters,
 * which fall back to the schema's default, and checks what concerns several keys at once
 * (n_embd divisible by n_head) itself.
 */
#ifndef CTRAIN_CONFIG_H
#define CTRAIN_CONFIG_H

#include <stddef.h>

#include "ctrain/error.h"

enum ct_config_type {
    CT_CONFIG_INT = 0,      /* a whole number in [min, max] */
    CT_CONFIG_INT_LIST,     /* whole numbers in [min, max] separated by '-' ("512-256"); "none" is empty */
    CT_CONFIG_DOUBLE,       /* a finite number in [min, max] */
    CT_CONFIG_STRING        /* any text without ',' or '=' */
};

typedef struct ct_config_key {
    const char *key;        /* NULL ends a schema */
    enum ct_config_type type;
    double min, max;        /* numbers: inclusive range; lists: each element; lists' length <= max_len */
    int max_len;            /* CT_CONFIG_INT_LIST: most elements */
    const char *dflt;       /* the default as text, e.g. "512-256"; used when the key is not given */
    const char *help;       /* one line for `ctrain plan --list` */
    const char *choices;    /* CT_CONFIG_STRING: the values it takes, "a|b|c" (NULL: any text) */
} ct_config_key;

#define CT_CONFIG_MAX_KEYS 16
#define CT_CONFIG_MAX_LIST 16
/* The longest text ct_config_parse takes, with its NUL (ct_config_print's text fits too). */
#define CT_CONFIG_TEXT_MAX 1024

/* A checked configuration: the pairs given, in order; values are the text given. It is the typed
 * value the connector parses --model-config into once (the plan's model_config): the Trainer and
 * the model read it with the getters below, nobody parses the text again. */
typedef struct ct_config {
    const ct_config_key *schema;
    int n;
    struct {
        char key[32];
        char value[128];
    } kv[CT_CONFIG_MAX_KEYS];
} ct_config;

/* Parse text ("" or NULL: no pairs) against schema. what names the input in messages
 * ("--model-config"), owner the thing configured ("model mlp"). Errors (CT_EINVAL, with a hint
 * listing the accepted keys or the range): model-config-syntax (not key=value, a key twice),
 * model-config-key (a key the schema lacks), model-config-value (wrong type or out of range). */
int ct_config_parse(const ct_config_key *schema, const char *what, const char *owner, const char *text,
                    ct_config *out, ct_error *err);
/* Set key to value (text, as parse takes it) in c, checked against c's schema by the same rule as
 * ct_config_parse (same errors and messages, what and owner as there): a key already given has its
 * value replaced in its place, another is added after the others. */
int ct_config_set(ct_config *c, const char *what, const char *owner, const char *key, const char *value,
                  ct_error *err);
/* The schema's row for key, or NULL when the schema (NULL: none) does not take it. */
const ct_config_key *ct_config_key_find(const ct_config_key *schema, const char *key);
/* The value of key as given, else the schema's default ("" when neither). */
const char *ct_config_text(const ct_config *c, const char *key);
/* Typed values (given or default). key must be in the schema with that type: parse checked them. */
long ct_config_int(const ct_config *c, const char *key);
double ct_config_double(const ct_config *c, const char *key);
/* Fills out[0..max) and returns the count. */
int ct_config_int_list(const ct_config *c, const char *key, int *out, int max);
/* 1 when key was given (not defaulted). */
int ct_config_given(const ct_config *c, const char *key);
/* The pairs given, in order, as "key=value,..." into buf ("" when none): the text parse took,
 * less empty items (",,"). Returns buf. */
const char *ct_config_print(const ct_config *c, char *buf, size_t size);

#endif
