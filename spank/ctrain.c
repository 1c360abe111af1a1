/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — entry points. Each dispatches on spank_context() to the file of that
 * context; each file owns its state (file-static, reached through its header's functions) and
 * calls only files below it, in this order (t/90-layering.t checks it):
 *   log.c         logging through SLURM, "ctrain: " prefix (the leaf)
 *   args.c        plugstack.conf arguments (the site's settings)
 *   options.c     the --ctrain-* options (the user's settings)
 *   check.c       the options through libctrain-core's connector
 *   rendezvous.c  MASTER_ADDR and MASTER_PORT of a step
 *   gres.c        gres.conf's device files and the drivers' table
 *   bind.c        loads ctrain-bind.so, the binding planner with hwloc (spank/bind.h)
 *   summary.c     the node summary: written by slurmd at its start, planned on in slurmstepd
 *   srun.c        srun, sbatch, salloc: check the flags before anything launches
 *   remote.c      slurmstepd: rank layout, environment and binding of each task
 *   ctrain.c      this dispatcher
 * SPANK counts any return >= 0 as success (ESPANK_* codes are
 * positive), so every failure here returns -1.
 *
 * Where a refusal holds. The package ships the plugin `optional`, and SLURM logs and ignores the
 * failure of an optional plugin's init, init_post_opt, local_user_init, user_init and task_init
 * (src/common/spank.c: only a required plugin's error stops the stack). Two places hold whatever
 * the plugstack line says:
 *   - an option callback's failure in srun, sbatch and salloc: SLURM prints it and exits before
 *     anything is allocated or queued (spank_process_option). So every --ctrain-* option is
 *     checked in its callback against the options seen so far, the connector included: the last
 *     option of a bad combination is the one refused.
 *   - the task itself, just before exec: what only the node can judge (the step's real layout, the
 *     node's own plugstack arguments, its topology, rank 0's port) is checked in slurmstepd, and a
 *     task that fails it ends itself with ctrain's message on its stderr and exit status 1, the
 *     status slurmstepd gives a task whose required plugin failed. No task runs with a
 *     configuration ctrain refused.
 * init_post_opt and local_user_init still check (a required plugin stops srun there too). */
#include <unistd.h>

#include <slurm/slurm_version.h>
#include <slurm/spank.h>

#include "ctrain/error.h"
#include "spank/args.h"
#include "spank/srun.h"
#include "spank/log.h"
#include "spank/options.h"
#include "spank/remote.h"
#include "spank/summary.h"

#ifndef CTRAIN_VERSION
#error "CTRAIN_VERSION is set by the Makefile (from the file VERSION)"
#endif

/* plugin_version is SLURM_VERSION_NUMBER of the spank.h it was built with: SLURM loads the
 * plugin only into a srun/slurmstepd of the same major.minor release (debian/rules pins it). */
SPANK_PLUGIN(ctrain, 1);

/* A bad plugstack argument: the plugin does nothing more in this process. */
static int disabled;

/* SPANK's callback for every --ctrain-* option (the options table's cb). Not static so that the
 * fuzz target t/fuzz/fuzz_spank_options.c calls what SPANK calls; not exported (ctrain.map). */
int ct_spank_option_cb(int val, const char *arg, int in_remote);

/* The load message: which ctrain, built for which SLURM. At verbose level (slurmd's log with
 * SlurmdDebug=verbose, srun -v), at info level with the `verbose` argument. */
static void log_version(void)
{
    ct_spank_info("version %s, built for SLURM %d.%02d.%d", CTRAIN_VERSION,
                  SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER), SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER),
                  SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
}

/* slurmd, once at its start, as root (SPANK's init in slurmd's own context): the node summary each
 * step's slurmstepd plans from (spank/summary.c). Never a failure: a bad argument is logged, and
 * without a summary steps discover for themselves. */
static int slurmd_init(int ac, char **av)
{
    ct_error err;

    ct_error_clear(&err);
    if (ct_spank_args_parse(ac, av, &err) != 0) {
        ct_spank_report(&err);
        return 0;
    }
    ct_spank_log_verbose(ct_spank_args_get()->verbose);
    ct_spank_summary_write();
    return 0;
}

/* Every --ctrain-* option. In srun, sbatch and salloc SLURM honours a failure here even for an
 * optional plugin (see the top of this file). In slurmstepd (remote) it ignores it, and the task
 * would run without the option: remote.c keeps the error for the tasks. */
int ct_spank_option_cb(int val, const char *arg, int in_remote)
{
    ct_error err;
    int rv;

    ct_error_clear(&err);
    rv = ct_spank_option_store(val, arg, &err); /* keeps a refusal for remote.c */
    if (in_remote)
        goto out;
    if (rv == 0 && !disabled)
        rv = ct_spank_local_options_check(&err);
    if (rv != 0) {
        ct_spank_report(&err);
        rv = -1;
    }
out:
    return rv;
}

/* Every context that sees the options registers them: srun and slurmstepd, and sbatch/salloc
 * so that "#SBATCH --ctrain-strategy=ddp" works. A bad plugstack.conf argument disables the
 * plugin: SLURM fails the job when the plugin is `required` and carries on when it is `optional`. */
int slurm_spank_init(spank_t sp, int ac, char **av)
{
    spank_context_t ctx = spank_context();
    ct_error err;
    int rv = -1;

    ct_error_clear(&err);
    disabled = 0;
    ct_spank_options_free();
    if (ctx == S_CTX_SLURMD)
        return slurmd_init(ac, av);
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR)
        return 0;
    /* Options first: with an optional plugin disabled below, srun must still accept them. */
    if (ct_spank_options_register(sp, ct_spank_option_cb, &err) != 0) {
        ct_spank_report(&err);
        disabled = 1;
        goto fail;
    }
    rv = ct_spank_args_parse(ac, av, &err);
    ct_spank_log_verbose(ct_spank_args_get()->verbose);
    if (rv != 0) {
        ct_spank_report(&err);
        ct_spank_error("plugin disabled for this job because of the plugstack.conf argument above "
                       "(a 'required' plugin fails the job; an 'optional' one lets it run without ctrain)");
        disabled = 1;
        rv = -1;
        goto fail;
    }
    if (ctx == S_CTX_REMOTE)
        log_version();
    rv = 0;
fail:
    return rv;
}

/* srun/sbatch/salloc: the flags are checked here, before an allocation or a task exists.
 * slurmstepd: the step's layout and rendezvous, once per step, as root. Not in
 * slurm_spank_user_init: slurmstepd runs that with privileges dropped, and a newer SLURM
 * (24.11 here) holds its auth lock meanwhile, so the libslurm calls the rendezvous may need (rank 0's
 * NodeAddr, an arbitrary step's layout) abort slurmstepd ("fatal: auth_g_create:
 * pthread_rwlock_rdlock(): Resource deadlock avoided"). The binding stays in user_init, as the
 * user. Errors are kept for task_init: srun never sees one from here. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    ct_error err;
    int rv = 0;

    ct_error_clear(&err);
    if (disabled)
        goto out;
    switch (spank_context()) {
    case S_CTX_REMOTE:
        rv = ct_spank_remote_step_init(sp);
        break;
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR:
        if (ct_spank_local_post_opt(sp, &err) != 0) {
            ct_spank_report(&err);
            rv = -1;
        }
        break;
    default:
        break;
    }
out:
    return rv;
}

/* srun, with the allocation and the step's task layout: checked again with the layout. */
int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
    ct_error err;
    int rv = 0;

    ct_error_clear(&err);
    if (spank_context() != S_CTX_LOCAL)
        goto out;
    /* Here, not in slurm_spank_init: srun applies -v only after its options are parsed. */
    log_version();
    if (!disabled && ct_spank_local_user_init(sp, &err) != 0) {
        ct_spank_report(&err);
        rv = -1;
    }
out:
    return rv;
}

/* slurmstepd, once per step, with privileges dropped to the job's user: the binding (remote.c).
 * Errors are kept for task_init: srun never sees one from here. */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    if (disabled || spank_context() != S_CTX_REMOTE)
        return 0;
    return ct_spank_remote_user_init(sp);
}

/* The task, as the user, just before exec. A task ctrain cannot set up ends here, its reason on
 * its stderr: SLURM would exec an optional plugin's failed task without its rank or binding. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    if (disabled || spank_context() != S_CTX_REMOTE)
        return 0;
    if (ct_spank_remote_task_init(sp) != 0)
        _exit(1);
    return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    if (spank_context() == S_CTX_REMOTE)
        ct_spank_remote_exit();
    ct_spank_options_free();
    return 0;
}
