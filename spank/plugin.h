/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — state shared by the files of the plugin, one per SPANK context:
 *   ctrain.c   the SPANK entry points, dispatching on spank_context()
 *   args.c     plugstack.conf arguments (the site's settings)
 *   options.c  the --ctrain-* options (the user's settings)
 *   local.c    srun, sbatch, salloc: check the flags before anything launches
 *   remote.c   slurmstepd: rank layout, environment and binding of each task
 * SPANK gives a plugin no context pointer, so the state is one static struct per process. */
#ifndef CTRAIN_SPANK_PLUGIN_H
#define CTRAIN_SPANK_PLUGIN_H

#include <slurm/spank.h>

#include "ctrain/error.h"

enum ct_spank_bind {
    CT_SPANK_BIND_UNSET = 0,
    CT_SPANK_BIND_NONE,
    CT_SPANK_BIND_CLOSEST,
    CT_SPANK_BIND_VERBOSE  /* closest, and each task's binding and reason on its stderr */
};

/* plugstack.conf arguments. */
struct ct_spank_args {
    char default_strategy[64];
    char allowed_strategies[512]; /* "" = any strategy the connector accepts */
    enum ct_spank_bind bind;      /* site default; CT_SPANK_BIND_UNSET = closest */
    char topology[1024];          /* hwloc XML to load instead of discovering; "" = discover */
    long port_base;               /* 0 = the envs/ default */
    int verbose;
};

/* --ctrain-* options as the user gave them (NULL/UNSET = not given). */
struct ct_spank_opts {
    char *strategy;
    char *accelerator;
    char *precision;
    enum ct_spank_bind bind;
};

struct ct_spank_state {
    int disabled;                 /* bad plugstack arguments: the plugin does nothing more */
    struct ct_spank_args args;
    struct ct_spank_opts opts;
    void *step;                   /* remote.c's per-step data */
    ct_error option_err;          /* slurmstepd: an option the node refused (SLURM ignores it there) */
};

extern struct ct_spank_state ct_spank;

/* Log through SLURM with the "ctrain: " prefix (slurm_error/slurm_info/slurm_verbose). */
void ct_spank_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ct_spank_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An error with its hint, as two lines. */
void ct_spank_report(const ct_error *err);

/* args.c: parse the plugstack.conf arguments into ct_spank.args. */
int ct_spank_args_parse(int ac, char **av, ct_error *err);

/* options.c */
/* The option values SPANK passes to ct_spank_option_cb (the options table's val). */
enum ct_spank_opt { CT_SPANK_OPT_STRATEGY = 1, CT_SPANK_OPT_ACCELERATOR, CT_SPANK_OPT_PRECISION, CT_SPANK_OPT_BIND };
/* ctrain.c: SPANK's callback for every --ctrain-* option (the options table's cb). In srun, sbatch
 * and salloc (remote 0) it stores the value and checks every option seen so far; -1 with a
 * "ctrain: " message stops them, whatever the plugstack line. Not static so that the fuzz target
 * t/fuzz/fuzz_spank_options.c calls what SPANK calls. */
int ct_spank_option_cb(int val, const char *optarg, int remote);
/* Store a value after checking its form. */
int ct_spank_option_store(int val, const char *optarg, ct_error *err);
int ct_spank_options_register(spank_t sp, ct_error *err);
void ct_spank_options_free(void);
/* 1 when the step is ctrain's: a --ctrain-* option was given or the site set default_strategy. */
int ct_spank_active(void);
/* The strategy in effect: the option, else the site default, else NULL. */
const char *ct_spank_strategy(void);
enum ct_spank_bind ct_spank_bind_mode(void);
/* Check a strategy name against allowed_strategies. */
int ct_spank_strategy_allowed(const char *name, ct_error *err);

/* local.c: srun (S_CTX_LOCAL) and sbatch/salloc (S_CTX_ALLOCATOR). */
/* The options given so far, against each other and the site's list, without the step's layout. */
int ct_spank_local_options_check(ct_error *err);
int ct_spank_local_post_opt(spank_t sp, ct_error *err);
/* The connector's flag names (--strategy) as srun users typed them (--ctrain-strategy), in place. */
void ct_spank_srun_names(char *text, size_t size);
int ct_spank_local_user_init(spank_t sp, ct_error *err);

/* remote.c: slurmstepd (S_CTX_REMOTE). */
/* init_post_opt: the step's layout and rank 0 (libslurm calls: as root, see ctrain.c). */
int ct_spank_remote_step_init(spank_t sp);
/* user_init: the binding, as the job's user. */
int ct_spank_remote_user_init(spank_t sp);
/* 0, or -1 after writing the reason to the task's stderr: the task must not run. */
int ct_spank_remote_task_init(spank_t sp);
void ct_spank_remote_exit(void);

#endif
