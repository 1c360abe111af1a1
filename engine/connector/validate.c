/* SPDX-License-Identifier: BSD-3-Clause */
/* Connector, part 1: check every flag on its own and against the others, and fix the final flags.
 *
 * Names are resolved against the registries, ignoring case; a name from the wrong registry
 * (`--accelerator ddp`) is its own error. A flag and its CTRAIN_* variable (which the SPANK
 * plugin sets from --ctrain-*) must agree when both are given: equal choices are fine, different
 * ones an error naming both (flag-env-conflict). Nothing here looks at the cluster environment or
 * the hardware (that is part 2).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ctrain/model.h"
#include "ctrain/util.h"
#include "engine/connector/connector_internal.h"
#include "engine/util/rankvars.h"

/* One of the three name flags, with where its value came from. */
struct name_input {
    enum ct_registry_kind kind;
    const char *flag;        /* "--accelerator" */
    const char *env_var;     /* "CTRAIN_ACCELERATOR" */
    const char *value;       /* the text to resolve, NULL when neither is set */
    int from_env;            /* 1: value came from env_var */
};

static const char *input_name(const struct name_input *in)
{
    return in->from_env ? in->env_var : in->flag;
}

static const char *flag_of_kind(enum ct_registry_kind kind)
{
    switch (kind) {
    case CT_REG_ACCELERATOR: return "--accelerator";
    case CT_REG_STRATEGY:    return "--strategy";
    case CT_REG_PRECISION:   return "--precision";
    case CT_REG_MODEL:       return "--model";
    case CT_REG_DATAMODULE:  return "--datamodule";
    default:                 return "?";
    }
}

static void known_names(enum ct_registry_kind kind, char *buf, size_t size)
{
    const char *const *names = ct_registry_names(kind);
    size_t used = 0;

    buf[0] = '\0';
    for (; names && *names && used < size; names++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "", *names);
}

static const char *plural(enum ct_registry_kind kind)
{
    switch (kind) {
    case CT_REG_ACCELERATOR: return "accelerators";
    case CT_REG_STRATEGY:    return "strategies";
    case CT_REG_PRECISION:   return "precisions";
    case CT_REG_MODEL:       return "models";
    case CT_REG_DATAMODULE:  return "data modules";
    default:                 return "names";
    }
}

static const char *article(const char *noun)
{
    return strchr("aeiou", noun[0]) ? "an" : "a";
}

/* A name that is not in its registry: empty, from another registry, or a typo. */
static int name_error(const struct name_input *in, ct_error *err)
{
    static const enum ct_registry_kind others[] = { CT_REG_ACCELERATOR, CT_REG_STRATEGY, CT_REG_PRECISION };
    const char *kind = ct_registry_kind_name(in->kind);
    char id[48], names[512];
    const char *guess;

    known_names(in->kind, names, sizeof(names));
    if (!in->value[0]) {
        snprintf(id, sizeof(id), "%s-empty", kind);
        ct_error_set(err, CT_EINVAL, id, "%s is empty", input_name(in));
        return ct_error_hint(err, "give a %s name (%s%s), or leave %s out", kind, names,
                             in->kind == CT_REG_ACCELERATOR || in->kind == CT_REG_STRATEGY ? ", auto" : "",
                             input_name(in));
    }
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        if (others[i] == in->kind || !ct_registry_find(others[i], in->value))
            continue;
        snprintf(id, sizeof(id), "%s-is-%s", kind, ct_registry_kind_name(others[i]));
        ct_error_set(err, CT_EINVAL, id, "%s '%s' is %s %s, not %s %s", input_name(in), in->value,
                     article(ct_registry_kind_name(others[i])), ct_registry_kind_name(others[i]), article(kind), kind);
        return ct_error_hint(err, "use %s %s%s (%s: %s)", flag_of_kind(others[i]), in->value,
                             in->from_env ? " instead of the environment variable" : "", plural(in->kind), names);
    }
    snprintf(id, sizeof(id), "%s-unknown", kind);
    ct_error_set(err, CT_EINVAL, id, "%s '%s' is not %s known %s", input_name(in), in->value, "a", kind);
    guess = ct_str_closest(in->value, ct_registry_names(in->kind));
    if (guess)
        return ct_error_hint(err, "did you mean '%s'? %s: %s (ctrain plan --list)", guess, plural(in->kind), names);
    return ct_error_hint(err, "%s: %s (ctrain plan --list)", plural(in->kind), names);
}

/* The flag, else the CTRAIN_* variable; both absent means auto. *env_value is the variable when
 * the flag was given as well (checked against the flag by same_choice), else NULL. */
static void take_input(struct name_input *in, const char *flag_value, const ct_connector_context *ctx,
                       const char **env_value)
{
    const char *env = ct_connector_getenv(ctx, in->env_var);

    in->value = flag_value;
    in->from_env = 0;
    *env_value = flag_value ? env : NULL;
    if (!in->value) {
        in->value = env;
        in->from_env = in->value != NULL;
    }
}

static void note_source(ct_final_flags *ff, enum ct_plan_field f, const struct name_input *in)
{
    ff->source[f] = in->from_env ? CT_SOURCE_ENV : CT_SOURCE_FLAG;
    snprintf(ff->source_detail[f], sizeof(ff->source_detail[f]), "%s", input_name(in));
}

static void add_notice(ct_final_flags *ff, const char *text)
{
    if (ff->n_notices < 4)
        snprintf(ff->notices[ff->n_notices++], sizeof(ff->notices[0]), "%s", text);
}

/* "auto" or a registered name; sets *out (NULL for auto). */
static int resolve_name(struct name_input *in, int allow_auto, const ct_registry_entry **out, ct_error *err)
{
    *out = NULL;
    if (!in->value || (allow_auto && !strcasecmp(in->value, "auto")))
        return 0;
    *out = ct_registry_find(in->kind, in->value);
    return *out ? 0 : name_error(in, err);
}

/* --- strategy options: "ddp:bucket_mb=2,overlap=0" ------------------------------------------- */

int ct_connector_strategy_defaults(const ct_registry_entry *st, ct_config *out, ct_error *err)
{
    char text[128];

    ct_registry_strategy_options(st, NULL, text, sizeof(text));
    return ct_config_parse(st->option_schema, "--strategy", st->name, text, out, err);
}

/* One "key=value" of the user's, checked against the schema and set in out (typed once: the plan's
 * strategy_config, which the strategy reads). */
static int check_option(const ct_registry_entry *st, const char *input, const char *item, ct_config *out,
                        ct_error *err)
{
    char key[64], defaults[128];
    const char *eq = strchr(item, '=');
    const ct_config_key *spec;
    const char *options = ct_registry_strategy_options(st, NULL, defaults, sizeof(defaults));
    ct_error ignored;

    if (!eq || eq == item || (size_t)(eq - item) >= sizeof(key)) {
        ct_error_set(err, CT_EINVAL, "strategy-option-malformed", "%s: strategy option '%s' is not key=value",
                     input, item);
        return ct_error_hint(err, "write %s:key=value[,key=value] (options of %s: %s)", st->name, st->name,
                             options ? options : "none");
    }
    memcpy(key, item, (size_t)(eq - item));
    key[eq - item] = '\0';
    if (!(spec = ct_config_key_find(st->option_schema, key))) {
        ct_error_set(err, CT_EINVAL, "strategy-option-unknown", "%s: strategy '%s' has no option '%s'", input,
                     st->name, key);
        return ct_error_hint(err, "options of %s: %s", st->name, options ? options : "none");
    }
    /* The schema checks the value, as the strategy will read it. */
    if (ct_config_set(out, input, st->name, key, eq + 1, &ignored)) {
        ct_error_set(err, CT_EINVAL, "strategy-option-value", "%s: option %s=%s is out of range", input, key,
                     eq + 1);
        if (spec->choices)
            return ct_error_hint(err, "%s takes one of %s (default %s)", key, spec->choices,
                                 spec->dflt ? spec->dflt : "none");
        return ct_error_hint(err, "%s takes %s from %g to %g", key,
                             spec->type == CT_CONFIG_DOUBLE ? "a number" : "an integer", spec->min, spec->max);
    }
    return 0;
}

static int split_strategy(struct name_input *in, char *name, size_t size, const char **options)
{
    const char *colon = in->value ? strchr(in->value, ':') : NULL;

    *options = NULL;
    if (!colon)
        return 0;
    if ((size_t)(colon - in->value) >= size)
        return -1;
    memcpy(name, in->value, (size_t)(colon - in->value));
    name[colon - in->value] = '\0';
    *options = colon + 1;
    in->value = name;
    return 0;
}

/* What a name stands for: its entry (the current name for a legacy precision, NULL for auto or
 * an unknown name) and, for a strategy, its options merged over the defaults. */
static const ct_registry_entry *choice_of(enum ct_registry_kind kind, const char *value, char *options,
                                          size_t size)
{
    const char *colon = kind == CT_REG_STRATEGY ? strchr(value, ':') : NULL;
    const ct_registry_entry *e;
    char name[64];

    snprintf(name, sizeof(name), "%.*s", colon ? (int)(colon - value) : (int)strlen(value), value);
    e = ct_registry_find(kind, name);
    if (e && e->legacy_of)
        e = ct_registry_find(kind, e->legacy_of);
    options[0] = '\0';
    if (e && kind == CT_REG_STRATEGY)
        ct_registry_strategy_options(e, colon ? colon + 1 : NULL, options, size);
    return e;
}

/* A flag given together with its CTRAIN_* variable: the same choice (ignoring case, legacy
 * names and default options) is fine, anything else is an error naming both. */
static int same_choice(const struct name_input *in, const char *flag_value, const char *env_value, ct_error *err)
{
    char fopt[128], eopt[128];
    const ct_registry_entry *fe, *ee;

    if (!env_value || !strcasecmp(flag_value, env_value))
        return 0;
    fe = choice_of(in->kind, flag_value, fopt, sizeof(fopt));
    ee = choice_of(in->kind, env_value, eopt, sizeof(eopt));
    if (fe && fe == ee && !strcmp(fopt, eopt))
        return 0;
    ct_error_set(err, CT_ECONFLICT, "flag-env-conflict", "%s %s disagrees with %s=%s", in->flag, flag_value,
                 in->env_var, env_value);
    /* Only strategy, accelerator and precision have a SPANK option that sets the variable. */
    if (in->kind == CT_REG_MODEL || in->kind == CT_REG_DATAMODULE)
        return ct_error_hint(err, "give the same %s in both, or only one of them (unset %s, or leave out %s)",
                             ct_registry_kind_name(in->kind), in->env_var, in->flag);
    return ct_error_hint(err, "%s is set by the SPANK plugin's --ctrain-%s or by you; give the same %s in both, or "
                              "only one of them (unset %s, or leave out %s)", in->env_var, in->flag + 2,
                         ct_registry_kind_name(in->kind), in->env_var, in->flag);
}

static int check_strategy(struct name_input in, ct_final_flags *ff, ct_error *err)
{
    char name[64], copy[128];
    const char *options;
    int rc;

    if (split_strategy(&in, name, sizeof(name), &options))
        return name_error(&in, err);
    if ((rc = resolve_name(&in, 1, &ff->strategy, err)))
        return rc;
    if (in.value)
        note_source(ff, CT_PLAN_STRATEGY, &in);
    if (options && !ff->strategy) {
        ct_error_set(err, CT_EINVAL, "strategy-option-without-strategy", "%s: options '%s' given to strategy auto",
                     input_name(&in), options);
        return ct_error_hint(err, "name the strategy, e.g. ddp:%s", options);
    }
    if (!ff->strategy)
        return 0;
    if ((rc = ct_connector_strategy_defaults(ff->strategy, &ff->strategy_config, err)))
        return rc;
    if (options) {
        snprintf(copy, sizeof(copy), "%s", options);
        for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            if ((rc = check_option(ff->strategy, input_name(&in), tok, &ff->strategy_config, err)))
                return rc;
        if (!*options)
            return check_option(ff->strategy, input_name(&in), "", &ff->strategy_config, err);
    }
    ct_registry_strategy_options(ff->strategy, options, ff->strategy_options, sizeof(ff->strategy_options));
    return 0;
}

/* The flag's own errors first (a typo gets "did you mean"), then its agreement with the variable. */
static int validate_strategy(const ct_connector_flags *f, const ct_connector_context *ctx, ct_final_flags *ff,
                             ct_error *err)
{
    struct name_input in = { CT_REG_STRATEGY, "--strategy", CT_VAR_STRATEGY, NULL, 0 };
    const char *env_value;
    int rc;

    take_input(&in, f->strategy, ctx, &env_value);
    if ((rc = check_strategy(in, ff, err)))
        return rc;
    return same_choice(&in, f->strategy, env_value, err);
}

static int validate_precision(const ct_connector_flags *f, const ct_connector_context *ctx, ct_final_flags *ff,
                              ct_error *err)
{
    struct name_input in = { CT_REG_PRECISION, "--precision", CT_VAR_PRECISION, NULL, 0 };
    const char *env_value;
    char note[256];
    int rc;

    take_input(&in, f->precision, ctx, &env_value);
    if ((rc = resolve_name(&in, 0, &ff->precision, err)) || (rc = same_choice(&in, f->precision, env_value, err)))
        return rc;
    if (!ff->precision)
        return 0;
    note_source(ff, CT_PLAN_PRECISION, &in);
    if (ff->precision->legacy_of) {
        snprintf(note, sizeof(note), "%s '%s' is the legacy name of '%s'; ctrain uses '%s'", input_name(&in),
                 ff->precision->name, ff->precision->legacy_of, ff->precision->legacy_of);
        add_notice(ff, note);
        ff->precision = ct_registry_find(CT_REG_PRECISION, ff->precision->legacy_of);
    }
    if (!ff->precision->accelerators) {
        ct_error_set(err, CT_ENOTAVAIL, "precision-not-implemented",
                     "%s '%s' is not implemented by ctrain's engine on any accelerator: %s", input_name(&in),
                     ff->precision->name, ff->precision->description);
        return ct_error_hint(err, "use --precision 32-true (any accelerator), bf16-mixed (cpu, cuda), 64-true "
                                  "or bf16-true (cpu), or 16-mixed (cuda)");
    }
    return 0;
}

/* --- devices: auto, N, -1, "0,1", "1," --------------------------------------------------------- */

static int devices_error(const char *id, const char *value, const char *why, ct_error *err)
{
    ct_error_set(err, CT_EINVAL, id, "--devices '%s': %s", value, why);
    return ct_error_hint(err, "use --devices auto, a count N >= 1, -1 for all, or a list of device ids "
                              "like 0,1 (a single id as a list: 1,)");
}

static int parse_device_list(const char *value, ct_final_flags *ff, ct_error *err)
{
    const char *p = value;
    long id;

    ff->devices_kind = CT_DEVICES_LIST;
    ff->n_device_ids = 0;
    while (*p) {
        char item[32];
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0 || len >= sizeof(item))
            return devices_error("devices-list-malformed", value, "empty or overlong entry in the list", err);
        memcpy(item, p, len);
        item[len] = '\0';
        if (ct_parse_long(item, -1000000, 1000000, &id))
            return devices_error("devices-not-number", value, "list entries must be device ids", err);
        if (id < 0)
            return devices_error("devices-negative", value, "device ids cannot be negative", err);
        if (id >= CT_MAX_DEVICES)
            return devices_error("devices-out-of-range", value, "device id beyond what any node has", err);
        for (int i = 0; i < ff->n_device_ids; i++)
            if (ff->device_ids[i] == id)
                return devices_error("devices-duplicate", value, "a device id appears twice", err);
        ff->device_ids[ff->n_device_ids++] = (int)id;
        if (!end)
            break;
        p = end + 1;  /* a trailing comma ends the list: "1," is device 1 */
    }
    return 0;
}

static int validate_devices(const ct_connector_flags *f, ct_final_flags *ff, ct_error *err)
{
    long n;

    ff->devices_kind = CT_DEVICES_AUTO;
    if (!f->devices)
        return 0;
    ff->source[CT_PLAN_DEVICES] = CT_SOURCE_FLAG;
    snprintf(ff->source_detail[CT_PLAN_DEVICES], sizeof(ff->source_detail[0]), "--devices");
    if (!f->devices[0])
        return devices_error("devices-empty", f->devices, "empty value", err);
    if (!strcasecmp(f->devices, "auto"))
        return 0;
    if (strchr(f->devices, ','))
        return parse_device_list(f->devices, ff, err);
    if (ct_parse_long(f->devices, -1000000000L, 1000000000L, &n))
        return devices_error("devices-not-number", f->devices, "not a number", err);
    if (n == 0)
        return devices_error("devices-zero", f->devices, "zero devices would train nothing", err);
    if (n == -1) {
        ff->devices_kind = CT_DEVICES_ALL;
        return 0;
    }
    if (n < -1)
        return devices_error("devices-negative", f->devices, "only -1 (all devices) may be negative", err);
    if (n > CT_MAX_DEVICES)
        return devices_error("devices-too-many", f->devices, "more devices than any node has", err);
    ff->devices_kind = CT_DEVICES_COUNT;
    ff->devices_count = (int)n;
    return 0;
}

int ct_connector_devices_parse(const char *value, int *per_node, ct_error *err)
{
    const ct_connector_flags f = { .devices = value };
    ct_final_flags ff;
    int rc;

    memset(&ff, 0, sizeof(ff));
    *per_node = 0;
    if (!value)
        return devices_error("devices-empty", "", "empty value", err);
    if ((rc = validate_devices(&f, &ff, err)))
        return rc;
    *per_node = ff.devices_kind == CT_DEVICES_COUNT ? ff.devices_count
                : ff.devices_kind == CT_DEVICES_LIST ? ff.n_device_ids : 0;
    return 0;
}

static int validate_num_nodes(const ct_connector_flags *f, ct_final_flags *ff, ct_error *err)
{
    long n;

    ff->num_nodes = 0;
    if (!f->num_nodes)
        return 0;
    ff->source[CT_PLAN_NUM_NODES] = CT_SOURCE_FLAG;
    snprintf(ff->source_detail[CT_PLAN_NUM_NODES], sizeof(ff->source_detail[0]), "--num-nodes");
    if (ct_parse_long(f->num_nodes, -1000000000L, 1000000000L, &n)) {
        ct_error_set(err, CT_EINVAL, "num-nodes-not-number", "--num-nodes '%s' is not a number", f->num_nodes);
        return ct_error_hint(err, "give the number of nodes, e.g. --num-nodes 2 (the srun -N value)");
    }
    if (n <= 0 || n > 1000000) {
        ct_error_set(err, CT_EINVAL, "num-nodes-nonpositive", "--num-nodes %ld is out of range", n);
        return ct_error_hint(err, "--num-nodes counts nodes: 1 or more (default: what the cluster says, else 1)");
    }
    ff->num_nodes = (int)n;
    return 0;
}

/* --- the model and its data ------------------------------------------------------------------ */
const ct_registry_entry *ct_connector_model(const ct_connector_flags *f, const ct_connector_context *ctx)
{
    struct name_input model = { CT_REG_MODEL, "--model", "CTRAIN_MODEL", NULL, 0 };
    ct_connector_context c;
    const char *env_value;

    ct_connector_context_fill(ctx, &c);
    take_input(&model, f->model, &c, &env_value);
    return model.value ? ct_registry_find(CT_REG_MODEL, model.value) : ct_registry_default(CT_REG_MODEL);
}

/* The reader of --init-from's file, registered by libctrain (see ct_connector_set_model_file). */
static ct_connector_model_file_fn model_file;

void ct_connector_set_model_file(ct_connector_model_file_fn fn) { model_file = fn; }

/* --init-from: the file's shape set into the parsed --model-config in place (no text between). */
static int model_from_file(const char *path, ct_final_flags *ff, ct_error *err)
{
    if (!model_file) {
        ct_error_set(err, CT_EINVAL, "init-from", "--init-from %s: this program cannot read model files (no "
                     "checkpoint reader is linked)", path);
        return ct_error_hint(err, "give --init-from to ctrain fit, which reads the file and plans its shape");
    }
    return model_file(ff->model, path, &ff->model_config, err);
}

/* --model (default the registry's), its --model-config parsed once against the model's schema
 * into the typed value the plan carries (with --init-from, holding the file's shape), and
 * --datamodule (default the model's own). Checks that concern several keys or the data are the
 * model's, at create. */
static int validate_model(const ct_connector_flags *f, const ct_connector_context *ctx, ct_final_flags *ff,
                          ct_error *err)
{
    struct name_input model = { CT_REG_MODEL, "--model", "CTRAIN_MODEL", NULL, 0 };
    struct name_input data = { CT_REG_DATAMODULE, "--datamodule", "CTRAIN_DATAMODULE", NULL, 0 };
    const struct ct_model_class *cls;
    const char *env_value;
    char owner[64];
    int rc;

    take_input(&model, f->model, ctx, &env_value);
    if ((rc = resolve_name(&model, 0, &ff->model, err)) || (rc = same_choice(&model, f->model, env_value, err)))
        return rc;
    if (!ff->model && !(ff->model = ct_registry_default(CT_REG_MODEL)))
        return ct_error_set(err, CT_EINTERNAL, "implementation-missing", "no default model is registered");
    snprintf(owner, sizeof(owner), "model %s", ff->model->name);
    if ((rc = ct_config_parse(ff->model->config, "--model-config", owner, f->model_config, &ff->model_config, err)))
        return rc;
    if (f->init_from && (rc = model_from_file(f->init_from, ff, err)))
        return rc;
    /* Checks across keys, where the model's implementation is linked (not in the SPANK plugin). */
    cls = ff->model->ops;
    if (cls && cls->check && (rc = cls->check(&ff->model_config, err)))
        return rc;
    take_input(&data, f->datamodule, ctx, &env_value);
    if ((rc = resolve_name(&data, 0, &ff->datamodule, err)) ||
        (rc = same_choice(&data, f->datamodule, env_value, err)))
        return rc;
    if (!ff->datamodule && ff->model->datamodule)
        ff->datamodule = ct_registry_find(CT_REG_DATAMODULE, ff->model->datamodule);
    if (!ff->datamodule) {
        ct_error_set(err, CT_EINVAL, "datamodule-missing", "model %s names no default data module", ff->model->name);
        return ct_error_hint(err, "pass --datamodule NAME (ctrain plan --list shows them)");
    }
    return 0;
}

/* --- the flags against each other -------------------------------------------------------------- */

static int requested_devices(const ct_final_flags *ff)
{
    if (ff->devices_kind == CT_DEVICES_COUNT)
        return ff->devices_count;
    if (ff->devices_kind == CT_DEVICES_LIST)
        return ff->n_device_ids;
    return 0;
}

static int cross_check(ct_final_flags *ff, ct_error *err)
{
    char list[128];
    const char *st = ff->strategy ? ff->strategy->name : NULL;
    int one_process = ff->strategy && ff->strategy->one_process;
    unsigned accel = ff->accelerator ? ff->accelerator->accelerators : 0;

    if (one_process && requested_devices(ff) > 1) {
        ct_error_set(err, CT_ECONFLICT, "strategy-single-device-many",
                     "--strategy %s runs one process on one device, but --devices asks for %d", st,
                     requested_devices(ff));
        return ct_error_hint(err, "use --strategy ddp to train on %d devices, or --devices 1",
                             requested_devices(ff));
    }
    if (one_process && ff->num_nodes > 1) {
        ct_error_set(err, CT_ECONFLICT, "strategy-single-device-multinode",
                     "--strategy %s cannot span --num-nodes %d", st, ff->num_nodes);
        return ct_error_hint(err, "use --strategy ddp for several nodes, or --num-nodes 1");
    }
    if (ff->strategy && ff->strategy->launch == CT_LAUNCH_FORK && ff->num_nodes > 1) {
        ct_error_set(err, CT_ECONFLICT, "strategy-fork-multinode",
                     "--strategy %s forks workers on this node only, but --num-nodes is %d", st, ff->num_nodes);
        return ct_error_hint(err, "use --strategy ddp under srun -N %d (or mpirun) for several nodes",
                             ff->num_nodes);
    }
    if (ff->accelerator && !ff->accelerator->probe_devices && ff->devices_kind == CT_DEVICES_LIST) {
        ct_error_set(err, CT_EINVAL, "devices-list-on-cpu",
                     "--accelerator %s takes a process count in --devices, not a list of ids", ff->accelerator->name);
        return ct_error_hint(err, "use --devices %d for %d processes", ff->n_device_ids, ff->n_device_ids);
    }
    if (accel && ff->strategy && !(ff->strategy->accelerators & accel)) {
        ct_error_set(err, CT_ECONFLICT, "strategy-unsupported-accelerator",
                     "--strategy %s does not run on --accelerator %s", st, ff->accelerator->name);
        return ct_error_hint(err, "%s runs on: %s; pick one of those or another strategy (ctrain plan --list)", st,
                             ct_registry_accel_list(ff->strategy->accelerators, list, sizeof(list)));
    }
    if (accel && ff->precision && !(ff->precision->accelerators & accel)) {
        ct_error_set(err, CT_ECONFLICT, "precision-unsupported-accelerator",
                     "--precision %s is not supported on --accelerator %s", ff->precision->name,
                     ff->accelerator->name);
        return ct_error_hint(err, "%s runs on: %s; on %s use --precision 32-true", ff->precision->name,
                             ct_registry_accel_list(ff->precision->accelerators, list, sizeof(list)),
                             ff->accelerator->name);
    }
    return 0;
}

int ct_connector_validate(const ct_connector_flags *f, const ct_connector_context *ctx, ct_final_flags *ff,
                          ct_error *err)
{
    struct name_input accel = { CT_REG_ACCELERATOR, "--accelerator", CT_VAR_ACCELERATOR, NULL, 0 };
    const char *env_value;
    int rc;

    memset(ff, 0, sizeof(*ff));
    ff->deterministic = f->deterministic;
    ff->activation_checkpointing = f->activation_checkpointing;
    ff->cluster_env = f->cluster_env;
    if (f->cluster_env) {
        ff->source[CT_PLAN_CLUSTER_ENV] = CT_SOURCE_FLAG;
        snprintf(ff->source_detail[CT_PLAN_CLUSTER_ENV], sizeof(ff->source_detail[0]), "--cluster-env");
    }
    take_input(&accel, f->accelerator, ctx, &env_value);
    if ((rc = resolve_name(&accel, 1, &ff->accelerator, err)) ||
        (rc = same_choice(&accel, f->accelerator, env_value, err)))
        return rc;
    if (ff->accelerator)
        note_source(ff, CT_PLAN_ACCELERATOR, &accel);
    if ((rc = validate_strategy(f, ctx, ff, err)))
        return rc;
    if ((rc = validate_precision(f, ctx, ff, err)))
        return rc;
    if ((rc = validate_devices(f, ff, err)))
        return rc;
    if ((rc = validate_num_nodes(f, ff, err)))
        return rc;
    if ((rc = validate_model(f, ctx, ff, err)))
        return rc;
    return cross_check(ff, err);
}
