/* SPDX-License-Identifier: BSD-3-Clause */
/* Registries of names: what the connector may resolve to, and what libctrain implements.
 * Every component describes itself in its own descriptor file (components.h): accelerators,
 * strategies, launchers, checkpoint IO, models and data modules one file each, the precisions
 * one row each of precisions.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ctrain/error.h"
#include "ctrain/util.h"
#include "ctrain/registry.h"
#include "engine/registry/components.h"

/* Each kind's descriptor arrays, each ended by a row without a name, as the Makefile found their
 * files (components.gen.h); the precisions' rows are one array. A user program's models and data
 * modules come after them (ct_registry_add). */
#define CT_DESC_ROW(kind, name) ct_##kind##_##name##_desc,
#define CT_ACCELERATOR_ROW(name) CT_DESC_ROW(accelerator, name)
#define CT_STRATEGY_ROW(name) CT_DESC_ROW(strategy, name)
#define CT_LAUNCHER_ROW(name) CT_DESC_ROW(launcher, name)
#define CT_CHECKPOINT_IO_ROW(name) CT_DESC_ROW(checkpoint_io, name)
#define CT_MODEL_ROW(name) CT_DESC_ROW(model, name)
#define CT_DATAMODULE_ROW(name) CT_DESC_ROW(datamodule, name)
static ct_registry_entry *const accelerator_descs[] = { CT_ACCELERATORS(CT_ACCELERATOR_ROW) NULL };
static ct_registry_entry *const strategy_descs[] = { CT_STRATEGIES(CT_STRATEGY_ROW) NULL };
static ct_registry_entry *const precision_descs[] = { ct_precision_desc, NULL };
static ct_registry_entry *const checkpoint_io_descs[] = { CT_CHECKPOINT_IOS(CT_CHECKPOINT_IO_ROW) NULL };
static ct_registry_entry *const launcher_descs[] = { CT_LAUNCHERS(CT_LAUNCHER_ROW) NULL };
static ct_registry_entry *const model_descs[] = { CT_MODELS(CT_MODEL_ROW) NULL };
static ct_registry_entry *const datamodule_descs[] = { CT_DATAMODULES(CT_DATAMODULE_ROW) NULL };

/* A kind's rows, gathered from its descriptors on first use and sorted by list_order; the table
 * grows with what it holds (and what a program adds), so no count is written by hand. */
struct table {
    const char *kind_name;
    ct_registry_entry *const *descs;
    ct_registry_entry **entries;
    int n, cap;
    const char **names; /* names and aliases, NULL-terminated, built on first use */
};

static struct table tables[CT_REG_NKINDS] = {
    [CT_REG_ACCELERATOR]   = { .kind_name = "accelerator", .descs = accelerator_descs },
    [CT_REG_STRATEGY]      = { .kind_name = "strategy", .descs = strategy_descs },
    [CT_REG_PRECISION]     = { .kind_name = "precision", .descs = precision_descs },
    [CT_REG_CHECKPOINT_IO] = { .kind_name = "checkpoint IO", .descs = checkpoint_io_descs },
    [CT_REG_LAUNCHER]      = { .kind_name = "launcher", .descs = launcher_descs },
    [CT_REG_MODEL]         = { .kind_name = "model", .descs = model_descs },
    [CT_REG_DATAMODULE]    = { .kind_name = "datamodule", .descs = datamodule_descs },
};

/* Insert e keeping the table sorted by list_order, after the rows of the same order (stable).
 * CT_ENOMEM when the table cannot grow. */
static int table_insert(struct table *t, ct_registry_entry *e)
{
    int i;

    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        ct_registry_entry **grown = realloc(t->entries, (size_t)cap * sizeof(*grown));

        if (!grown)
            return CT_ENOMEM;
        t->entries = grown;
        t->cap = cap;
    }
    for (i = t->n++; i > 0 && t->entries[i - 1]->list_order > e->list_order; i--)
        t->entries[i] = t->entries[i - 1];
    t->entries[i] = e;
    free(t->names);
    t->names = NULL; /* rebuilt with the new name on next use */
    return 0;
}

/* Every kind's rows with a name, gathered from its descriptors on first use. */
static void count_tables(void)
{
    static int gathered;

    if (gathered)
        return;
    gathered = 1;
    for (int k = 0; k < CT_REG_NKINDS; k++) {
        struct table *t = &tables[k];

        for (int d = 0; t->descs[d]; d++)
            for (ct_registry_entry *e = t->descs[d]; e->name && !table_insert(t, e); e++)
                ;
    }
}

const char *ct_registry_kind_name(enum ct_registry_kind kind)
{
    return (unsigned)kind < CT_REG_NKINDS ? tables[kind].kind_name : "?";
}

int ct_registry_count(enum ct_registry_kind kind)
{
    count_tables();
    return (unsigned)kind < CT_REG_NKINDS ? tables[kind].n : 0;
}

const ct_registry_entry *ct_registry_at(enum ct_registry_kind kind, int i)
{
    count_tables();
    if ((unsigned)kind >= CT_REG_NKINDS || i < 0 || i >= tables[kind].n)
        return NULL;
    return tables[kind].entries[i];
}

const ct_registry_entry *ct_registry_find(enum ct_registry_kind kind, const char *name)
{
    if ((unsigned)kind >= CT_REG_NKINDS || !name)
        return NULL;
    count_tables();
    for (int i = 0; i < tables[kind].n; i++) {
        const ct_registry_entry *e = tables[kind].entries[i];
        /* Names are case-insensitive, as in Lightning ("DDP", "CPU", "BF16-Mixed"). */
        if (!strcasecmp(e->name, name))
            return e;
        for (int a = 0; a < 4 && e->aliases[a]; a++)
            if (!strcasecmp(e->aliases[a], name))
                return e;
    }
    return NULL;
}

const char *const *ct_registry_names(enum ct_registry_kind kind)
{
    struct table *t;
    int n = 0, total = 1;

    if ((unsigned)kind >= CT_REG_NKINDS)
        return NULL;
    count_tables();
    t = &tables[kind];
    if (t->names)
        return t->names;
    for (int i = 0; i < t->n; i++)
        for (int a = -1; a < 4 && (a < 0 || t->entries[i]->aliases[a]); a++)
            total++;
    if (!(t->names = malloc((size_t)total * sizeof(*t->names)))) {
        static const char *none[] = { NULL };
        return none;
    }
    for (int i = 0; i < t->n; i++) {
        const ct_registry_entry *e = t->entries[i];
        t->names[n++] = e->name;
        for (int a = 0; a < 4 && e->aliases[a]; a++)
            t->names[n++] = e->aliases[a];
    }
    t->names[n] = NULL;
    return t->names;
}

int ct_registry_set_ops(enum ct_registry_kind kind, const char *name, const void *ops)
{
    if ((unsigned)kind >= CT_REG_NKINDS)
        return CT_EINVAL;
    count_tables();
    for (int i = 0; i < tables[kind].n; i++) {
        if (!strcmp(tables[kind].entries[i]->name, name)) {
            tables[kind].entries[i]->ops = ops;
            return 0;
        }
    }
    return CT_EINVAL;
}

int ct_registry_add(enum ct_registry_kind kind, const ct_registry_entry *entry)
{
    ct_registry_entry *copy;
    int rc;

    if ((kind != CT_REG_MODEL && kind != CT_REG_DATAMODULE) || !entry || !entry->name || !entry->name[0] ||
        ct_registry_find(kind, entry->name))
        return CT_EINVAL;
    /* Kept as long as the registry: the process. */
    if (!(copy = malloc(sizeof(*copy))))
        return CT_ENOMEM;
    *copy = *entry;
    /* After every built-in row whatever its list_order: a program's own come last. */
    copy->list_order = tables[kind].n ? tables[kind].entries[tables[kind].n - 1]->list_order : 0;
    if ((rc = table_insert(&tables[kind], copy)))
        free(copy);
    return rc;
}

const ct_registry_entry *ct_registry_default(enum ct_registry_kind kind)
{
    for (int i = 0; i < ct_registry_count(kind); i++)
        if (tables[kind].entries[i]->is_default)
            return tables[kind].entries[i];
    return NULL;
}

const char *ct_registry_strategy_options(const ct_registry_entry *st, const char *user, char *buf, size_t size)
{
    char val[64];
    size_t used = 0;

    buf[0] = '\0';
    if (!st || !st->option_schema || !st->option_schema->key)
        return NULL;
    for (const ct_config_key *k = st->option_schema; k->key; k++) {
        const char *v = k->dflt ? k->dflt : "";

        if (user && ct_options_get(user, k->key, val, sizeof(val)))
            v = val;
        else if (st->options && ct_options_get(st->options, k->key, val, sizeof(val)))
            v = val;
        used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "%s%s=%s", used ? "," : "", k->key, v);
    }
    return buf;
}

int ct_registry_model_has_precision(const ct_registry_entry *model, const char *precision)
{
    const char *p = model && model->precisions ? model->precisions : "32-true";
    size_t len = strlen(precision);

    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);

        if (n == len && !strncmp(p, precision, len))
            return 1;
        p += n + (end != NULL);
    }
    return 0;
}

unsigned ct_registry_accel_bit(const char *accelerator)
{
    const ct_registry_entry *e = accelerator ? ct_registry_find(CT_REG_ACCELERATOR, accelerator) : NULL;

    return e ? e->accelerators : 0;
}

const char *ct_registry_accel_list(unsigned mask, char *buf, int size)
{
    int used = 0;

    buf[0] = '\0';
    for (int i = 0; i < tables[CT_REG_ACCELERATOR].n; i++) {
        const ct_registry_entry *e = tables[CT_REG_ACCELERATOR].entries[i];
        if (!(mask & e->accelerators) || used >= size)
            continue;
        used += snprintf(buf + used, (size_t)(size - used), "%s%s", used ? ", " : "", e->name);
    }
    if (!buf[0])
        snprintf(buf, (size_t)size, "none");
    return buf;
}
