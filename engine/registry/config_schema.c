/* SPDX-License-Identifier: BSD-3-Clause */
/* "key=value,..." configurations checked against a schema; see include/ctrain/config.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/config.h"
#include "ctrain/util.h"

const ct_config_key *ct_config_key_find(const ct_config_key *schema, const char *key)
{
    for (const ct_config_key *k = schema; k && k->key; k++)
        if (!strcmp(k->key, key))
            return k;
    return NULL;
}

/* "n_layer, n_head, n_embd" into buf, for hints. */
static const char *key_list(const ct_config_key *schema, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (const ct_config_key *k = schema; k && k->key && used < size; k++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "", k->key);
    if (!buf[0])
        snprintf(buf, size, "none");
    return buf;
}

/* One number of a value: a whole one for INT and INT_LIST, within [min, max]. */
static int check_number(const ct_config_key *k, const char *text, double *out)
{
    long l;

    if (k->type == CT_CONFIG_DOUBLE)
        return ct_parse_double(text, out) || !isfinite(*out) || *out < k->min || *out > k->max ? -1 : 0;
    if (ct_parse_long(text, (long)k->min, (long)k->max, &l))
        return -1;
    *out = (double)l;
    return 0;
}

/* Split a list value on '-' into out[]; returns the count, or -1 when an element is bad. */
static int parse_list(const ct_config_key *k, const char *value, int *out, int max)
{
    char buf[128], *save = NULL;
    int n = 0;

    if (!strcmp(value, "none"))
        return 0;
    snprintf(buf, sizeof(buf), "%s", value);
    for (char *tok = strtok_r(buf, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
        double v;

        if (n >= max || check_number(k, tok, &v))
            return -1;
        out[n++] = (int)v;
    }
    return n > 0 ? n : -1;
}

/* 1 when value is one of choices ("a|b|c"). */
static int choice_of(const char *choices, const char *value)
{
    size_t len = strlen(value);

    for (const char *c = choices; *c; c += strcspn(c, "|") + (c[strcspn(c, "|")] == '|'))
        if (strcspn(c, "|") == len && !strncmp(c, value, len))
            return 1;
    return 0;
}

static int check_value(const ct_config_key *k, const char *what, const char *owner, const char *value,
                       ct_error *err)
{
    int list[CT_CONFIG_MAX_LIST];
    double v;

    switch (k->type) {
    case CT_CONFIG_INT:
        if (!check_number(k, value, &v))
            return 0;
        ct_error_set(err, CT_EINVAL, "model-config-value", "%s %s=%s: %s takes a whole number in [%.0f, %.0f]",
                     what, k->key, value, owner, k->min, k->max);
        return ct_error_hint(err, "%s: %s (default %s)", k->key, k->help, k->dflt ? k->dflt : "none");
    case CT_CONFIG_DOUBLE:
        if (!check_number(k, value, &v))
            return 0;
        ct_error_set(err, CT_EINVAL, "model-config-value", "%s %s=%s: %s takes a number in [%g, %g]", what, k->key,
                     value, owner, k->min, k->max);
        return ct_error_hint(err, "%s: %s (default %s)", k->key, k->help, k->dflt ? k->dflt : "none");
    case CT_CONFIG_INT_LIST:
        if (parse_list(k, value, list, k->max_len < CT_CONFIG_MAX_LIST ? k->max_len : CT_CONFIG_MAX_LIST) >= 0)
            return 0;
        ct_error_set(err, CT_EINVAL, "model-config-value",
                     "%s %s=%s: %s takes up to %d whole numbers in [%.0f, %.0f] joined by '-', or 'none'", what,
                     k->key, value, owner, k->max_len, k->min, k->max);
        return ct_error_hint(err, "e.g. %s=%s", k->key, k->dflt ? k->dflt : "none");
    case CT_CONFIG_STRING:
        if (value[0] && (!k->choices || choice_of(k->choices, value)))
            return 0;
        if (value[0]) {
            ct_error_set(err, CT_EINVAL, "model-config-value", "%s %s=%s: %s takes one of %s", what, k->key, value,
                         owner, k->choices);
            return ct_error_hint(err, "%s: %s (default %s)", k->key, k->help, k->dflt ? k->dflt : "none");
        }
        ct_error_set(err, CT_EINVAL, "model-config-value", "%s %s=: %s needs a value", what, k->key, owner);
        return ct_error_hint(err, "%s: %s", k->key, k->help);
    }
    return ct_error_set(err, CT_EINTERNAL, "model-config-value", "%s: key %s has no type", owner, k->key);
}

/* One pair into c, checked against c's schema: the one rule of what a configuration holds, for the
 * text parse reads and the values set reads from elsewhere (a checkpoint's shape). A key the
 * schema lacks, a value too long, of the wrong type or out of range is refused; a key already in c
 * is refused as given twice (parse) or has its value replaced (set). */
static int put_pair(ct_config *c, const char *what, const char *owner, const char *key, const char *value,
                    int replace, ct_error *err)
{
    const ct_config_key *k;
    char keys[512];
    int at = c->n, rc;

    if (!(k = ct_config_key_find(c->schema, key))) {
        ct_error_set(err, CT_EINVAL, "model-config-key", "%s: %s has no key '%s'", what, owner, key);
        return ct_error_hint(err, "%s takes %s (ctrain plan --list shows them)", owner,
                             key_list(c->schema, keys, sizeof(keys)));
    }
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->kv[i].key, key))
            at = i;
    if (at < c->n && !replace) {
        ct_error_set(err, CT_EINVAL, "model-config-syntax", "%s: key '%s' given twice", what, key);
        return ct_error_hint(err, "give each key once");
    }
    if (at >= CT_CONFIG_MAX_KEYS || strlen(key) >= sizeof(c->kv[0].key) || strlen(value) >= sizeof(c->kv[0].value))
        return ct_error_set(err, CT_EINVAL, "model-config-syntax", "%s: '%s=%s' is too long", what, key, value);
    if ((rc = check_value(k, what, owner, value, err)))
        return rc;
    snprintf(c->kv[at].key, sizeof(c->kv[0].key), "%s", key);
    snprintf(c->kv[at].value, sizeof(c->kv[0].value), "%s", value);
    if (at == c->n)
        c->n++;
    return 0;
}

int ct_config_parse(const ct_config_key *schema, const char *what, const char *owner, const char *text,
                    ct_config *out, ct_error *err)
{
    char buf[CT_CONFIG_TEXT_MAX], keys[512], *save = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    out->schema = schema;
    if (!text || !text[0])
        return 0;
    if (strlen(text) >= sizeof(buf))
        return ct_error_set(err, CT_EINVAL, "model-config-syntax", "%s is longer than %zu characters", what,
                            sizeof(buf) - 1);
    snprintf(buf, sizeof(buf), "%s", text);
    for (char *pair = strtok_r(buf, ",", &save); pair; pair = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(pair, '=');

        if (!eq || eq == pair) {
            ct_error_set(err, CT_EINVAL, "model-config-syntax", "%s '%s': '%s' is not key=value", what, text, pair);
            return ct_error_hint(err, "write %s key=value,key=value; %s takes %s", what, owner,
                                 key_list(schema, keys, sizeof(keys)));
        }
        *eq = '\0';
        if ((rc = put_pair(out, what, owner, pair, eq + 1, 0, err)))
            return rc;
    }
    return 0;
}

int ct_config_set(ct_config *c, const char *what, const char *owner, const char *key, const char *value,
                  ct_error *err)
{
    return put_pair(c, what, owner, key, value, 1, err);
}

int ct_config_given(const ct_config *c, const char *key)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->kv[i].key, key))
            return 1;
    return 0;
}

const char *ct_config_print(const ct_config *c, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < c->n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s=%s", i ? "," : "", c->kv[i].key, c->kv[i].value);
    return buf;
}

const char *ct_config_text(const ct_config *c, const char *key)
{
    const ct_config_key *k = ct_config_key_find(c->schema, key);

    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->kv[i].key, key))
            return c->kv[i].value;
    return k && k->dflt ? k->dflt : "";
}

long ct_config_int(const ct_config *c, const char *key)
{
    long v = 0;

    ct_parse_long(ct_config_text(c, key), -(1L << 62), 1L << 62, &v);
    return v;
}

double ct_config_double(const ct_config *c, const char *key)
{
    double v = 0;

    ct_parse_double(ct_config_text(c, key), &v);
    return v;
}

int ct_config_int_list(const ct_config *c, const char *key, int *out, int max)
{
    const ct_config_key *k = ct_config_key_find(c->schema, key);
    int n = k ? parse_list(k, ct_config_text(c, key), out, max) : -1;

    return n > 0 ? n : 0;
}
