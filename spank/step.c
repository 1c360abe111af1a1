/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd, what every file of the remote side uses (spank/step.h): the
 * job's environment, a task's failure message, a task's variable, this node's name. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctrain/hostlist.h"
#include "ctrain/util.h"
#include "spank/log.h"
#include "spank/step.h"

/* The job's environment as a ct_getenv_fn (the envs/ readers take one). */
const char *ct_spank_job_getenv(const char *name, void *ctx)
{
    char **env = ctx;
    size_t n = strlen(name);

    for (; env && *env; env++)
        if (!strncmp(*env, name, n) && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

/* A task's failure: in slurmd's log and on the task's stderr, which srun shows the user. */
void __attribute__((format(printf, 1, 2))) ct_spank_task_say(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ct_spank_error("%s", msg);
    fprintf(stderr, "ctrain: error: %s\n", msg);
}

/* The step's node list at this node's id; "" where it cannot say (no list, or a heterogeneous
 * step, whose node ids count within its component). */
void ct_spank_step_list_node(const struct step *s, char **env, char *out, size_t size)
{
    const char *list = ct_spank_job_getenv("SLURM_STEP_NODELIST", env);
    ct_hostlist *hl = NULL;
    ct_error err;

    out[0] = '\0';
    if (list && !s->het && ct_hostlist_expand(list, &hl, &err) == 0 && ct_hostlist_get(hl, s->node_id))
        ct_str_copy(out, size, ct_hostlist_get(hl, s->node_id));
    ct_hostlist_free(hl);
}

/* This node's SLURM name: the step's node list at this node's id, else (a heterogeneous step)
 * SLURMD_NODENAME. Not SLURMD_NODENAME first: the step's environment is srun's, and an srun in a
 * batch script passes on the batch host's SLURMD_NODENAME to every node (slurmstepd sets each
 * task's own only at exec), so every node would read the batch host's gres.conf lines. */
void ct_spank_step_node_name(const struct step *s, char **env, char *out, size_t size)
{
    const char *name = ct_spank_job_getenv("SLURMD_NODENAME", env);

    ct_spank_step_list_node(s, env, out, size);
    if (!out[0] && name)
        ct_str_copy(out, size, name);
}

int ct_spank_task_setenv(spank_t sp, const char *name, const char *value, int overwrite)
{
    spank_err_t rc = spank_setenv(sp, name, value, overwrite);

    if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_EXISTS) {
        ct_spank_task_say("setting %s in the task's environment failed: %s", name, spank_strerror(rc));
        return -1;
    }
    return 0;
}
