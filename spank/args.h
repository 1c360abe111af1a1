/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the plugstack.conf arguments (the site's settings), parsed once per
 * process in slurm_spank_init and read through ct_spank_args_get(). */
#ifndef CTRAIN_SPANK_ARGS_H
#define CTRAIN_SPANK_ARGS_H

#include "ctrain/error.h"

enum ct_spank_bind {
    CT_SPANK_BIND_UNSET = 0,
    CT_SPANK_BIND_NONE,
    CT_SPANK_BIND_CLOSEST,
    CT_SPANK_BIND_VERBOSE  /* closest, and each task's binding and reason on its stderr */
};

struct ct_spank_args {
    char default_strategy[64];
    char allowed_strategies[512]; /* "" = any strategy the connector accepts */
    enum ct_spank_bind bind;      /* site default; CT_SPANK_BIND_UNSET = closest */
    char topology[1024];          /* hwloc XML to load instead of discovering; "" = discover */
    char summary[1024];           /* the node summary's path (%h: host name), "none"; "" = the default */
    long port_base;               /* 0 = the envs/ default */
    int verbose;
};

/* Parse the plugstack.conf arguments (replacing any parsed before). */
int ct_spank_args_parse(int ac, char **av, ct_error *err);
/* The arguments last parsed (all empty before). */
const struct ct_spank_args *ct_spank_args_get(void);
/* 0 when allowed_strategies is empty or names the strategy, else CT_EINVAL with a hint (err may be NULL). */
int ct_spank_args_strategy_allowed(const char *name, ct_error *err);

#endif
