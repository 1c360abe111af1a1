/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — plugstack.conf arguments:
 *   default_strategy=NAME      the strategy of steps that give no --ctrain-strategy (makes every step ctrain's)
 *   allowed_strategies=A,B     the strategies users may choose
 *   bind=closest|none          the site default for --ctrain-bind
 *   topology=FILE              an hwloc XML to load on the nodes instead of discovering
 *   summary=PATH|none          the node summary slurmd writes at its start and steps plan from
 *                              (%h: the node's host name); default /run/ctrain/node-%h.summary
 *   port_base=N                base of MASTER_PORT (1024-49152; the envs/ rule adds job and step)
 *   verbose                    log what the plugin decides at info level */
#include <string.h>
#include <unistd.h>

#include "ctrain/envs.h"
#include "ctrain/error.h"
#include "ctrain/util.h"
#include "spank/args.h"

static struct ct_spank_args args;

static const char *const arg_names[] = { "default_strategy", "allowed_strategies", "bind", "topology",
                                         "summary", "port_base", "verbose", NULL };

static int bad_arg(ct_error *err, const char *arg, const char *what, const char *hint)
{
    ct_error_set(err, CT_EINVAL, "plugstack-arg", "plugstack.conf argument '%s': %s", arg, what);
    return ct_error_hint(err, "%s", hint);
}

static int unknown_arg(ct_error *err, const char *arg, const char *key)
{
    const char *near = ct_str_closest(key, arg_names);

    ct_error_set(err, CT_EINVAL, "plugstack-arg", "plugstack.conf argument '%s': unknown argument", arg);
    if (near)
        return ct_error_hint(err, "did you mean '%s%s'?", near, strcmp(near, "verbose") ? "=" : "");
    return ct_error_hint(err, "the arguments are default_strategy=, allowed_strategies=, bind=, topology=, "
                         "summary=, port_base= and verbose (see ctrain-spank(8))");
}

/* A strategy list: names of letters, digits, '_' and '-' separated by single commas. */
static int names_ok(const char *s)
{
    if (!*s || *s == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-,") == strlen(s);
}

static int parse_one(const char *arg, struct ct_spank_args *a, ct_error *err)
{
    const char *eq = strchr(arg, '=');
    size_t klen = eq ? (size_t)(eq - arg) : strlen(arg);
    const char *val = eq ? eq + 1 : NULL;
    char key[64];
    long n;

    if (klen >= sizeof(key))
        klen = sizeof(key) - 1;
    memcpy(key, arg, klen);
    key[klen] = '\0';
    if (!strcmp(key, "verbose")) {
        if (val)
            return bad_arg(err, arg, "takes no value", "write 'verbose' alone");
        a->verbose = 1;
    } else if (!val) {
        for (int i = 0; arg_names[i]; i++)
            if (!strcmp(key, arg_names[i]))
                return bad_arg(err, arg, "needs a value", "write it as KEY=VALUE (see ctrain-spank(8))");
        return unknown_arg(err, arg, key);
    } else if (!strcmp(key, "default_strategy")) {
        if (!names_ok(val) || strchr(val, ',') || ct_str_copy(a->default_strategy, sizeof(a->default_strategy), val))
            return bad_arg(err, arg, "not a strategy name", "give one name, e.g. default_strategy=ddp");
    } else if (!strcmp(key, "allowed_strategies")) {
        if (!names_ok(val) || ct_str_copy(a->allowed_strategies, sizeof(a->allowed_strategies), val))
            return bad_arg(err, arg, "not a comma-separated list of strategy names",
                           "e.g. allowed_strategies=ddp,fsdp (no spaces, no empty names)");
    } else if (!strcmp(key, "bind")) {
        if (!strcmp(val, "closest"))
            a->bind = CT_SPANK_BIND_CLOSEST;
        else if (!strcmp(val, "none"))
            a->bind = CT_SPANK_BIND_NONE;
        else
            return bad_arg(err, arg, "not a binding mode", "use bind=closest or bind=none");
    } else if (!strcmp(key, "topology")) {
        /* Read only by steps that use ctrain (remote.c): a missing file must not fail the
         * node's other steps, and srun and sbatch may run where it does not exist. */
        if (val[0] != '/' || ct_str_copy(a->topology, sizeof(a->topology), val))
            return bad_arg(err, arg, "not an absolute path", "give the full path of an hwloc XML file");
    } else if (!strcmp(key, "summary")) {
        /* Written and read by root: an absolute path an admin chose, never the job's. */
        if ((val[0] != '/' && strcmp(val, "none")) || ct_str_copy(a->summary, sizeof(a->summary), val))
            return bad_arg(err, arg, "not an absolute path or 'none'",
                           "e.g. summary=/run/ctrain/node-%h.summary (%h: the host name), or summary=none");
    } else if (!strcmp(key, "port_base")) {
        /* envs/ derives up to CT_ENV_PORT_SPAN ports from it: the last must stay a port. */
        if (ct_parse_long(val, 1024, 65535 - (CT_ENV_PORT_SPAN - 1), &n) != 0)
            return bad_arg(err, arg, "not a port base from 1024 to 49152 (ports base..base+16383 are used)",
                           "e.g. port_base=15000");
        a->port_base = n;
    } else {
        return unknown_arg(err, arg, key);
    }
    return 0;
}

int ct_spank_args_parse(int ac, char **av, ct_error *err)
{
    struct ct_spank_args *a = &args;
    int rv;

    memset(a, 0, sizeof(*a));
    for (int i = 0; i < ac; i++)
        if ((rv = parse_one(av[i], a, err)) != 0)
            return rv;
    if (a->default_strategy[0] && a->allowed_strategies[0] &&
        ct_spank_args_strategy_allowed(a->default_strategy, NULL)) {
        ct_error_set(err, CT_ECONFLICT, "plugstack-arg", "plugstack.conf: default_strategy=%s is not in allowed_strategies=%s",
                     a->default_strategy, a->allowed_strategies);
        return ct_error_hint(err, "add it to allowed_strategies or choose an allowed default");
    }
    return 0;
}

const struct ct_spank_args *ct_spank_args_get(void)
{
    return &args;
}

int ct_spank_args_strategy_allowed(const char *name, ct_error *err)
{
    char list[sizeof(args.allowed_strategies)], *save = NULL;
    const char *cands[64];
    int n = 0;

    if (!args.allowed_strategies[0])
        return 0;
    ct_str_copy(list, sizeof(list), args.allowed_strategies);
    for (char *tok = strtok_r(list, ",", &save); tok && n < 63; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, name))
            return 0;
        cands[n++] = tok;
    }
    cands[n] = NULL;
    ct_error_set(err, CT_EINVAL, "strategy-not-allowed", "--ctrain-strategy=%s is not allowed on this cluster", name);
    if (ct_str_closest(name, cands))
        return ct_error_hint(err, "did you mean --ctrain-strategy=%s? (allowed: %s)", ct_str_closest(name, cands),
                             args.allowed_strategies);
    return ct_error_hint(err, "the administrators allow: %s", args.allowed_strategies);
}
