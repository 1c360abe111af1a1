/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd, --ctrain-preflight's step side: the node's checks gathered
 * (its GPUs as root in init_post_opt, the rest as the user in user_init), its line, and what a bad
 * node does (spank/nodecheck.c holds the option, the checks' summary and the requeue). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <slurm/slurm.h>

#include "ctrain/envs.h"
#include "ctrain/launcher.h"
#include "ctrain/util.h"
#include "engine/util/slurm_compat.h"
#include "spank/log.h"
#include "spank/nodecheck.h"
#include "spank/remote_gpus.h"
#include "spank/remote_net.h"
#include "spank/remote_nodecheck.h"
#include "spank/step.h"

/* The job's memory per node in MiB, as SLURM told the job (--mem, or --mem-per-cpu times the
 * node's CPUs); 0 when it did not ask. */
static uint64_t job_mem_mb(char **env)
{
    const char *per_node = ct_spank_job_getenv("SLURM_MEM_PER_NODE", env);
    const char *per_cpu = ct_spank_job_getenv("SLURM_MEM_PER_CPU", env);
    const char *cpus = ct_spank_job_getenv("SLURM_CPUS_ON_NODE", env);
    long n = 0, c = 0;

    if (per_node && ct_parse_long(per_node, 1, 1L << 40, &n) == 0)
        return (uint64_t)n;
    if (per_cpu && cpus && ct_parse_long(per_cpu, 1, 1L << 40, &n) == 0 && ct_parse_long(cpus, 1, 1L << 20, &c) == 0)
        return (uint64_t)n * (uint64_t)c;
    return 0;
}

/* --ctrain-preflight's GPU checks, as root in init_post_opt (a GPU held by another user's process
 * shows only to root). Where SLURM has not set SLURM_STEP_GPUS by then, user_init runs them, as the
 * user. */
void ct_spank_nodecheck_gather_gpus(struct step *s, char **env)
{
    struct ct_spank_nodecheck_node in = { 0 };
    ct_error err;

    if (ct_spank_nodecheck_opts()->mode == CT_SPANK_NODECHECK_OFF || s->err.code)
        return;
    in.step_gpus = ct_spank_slurm_gpus(env);
    if (!in.step_gpus || !in.step_gpus[0])
        return;
    ct_spank_step_node_name(s, env, s->pf_node, sizeof(s->pf_node));
    in.node = s->pf_node;
    if (ct_spank_gres_read(in.node, &s->gres, &err) == 0)
        in.files = &s->gres.files;
    in.gpus_mapped = 1;   /* the mapping is user_init's; a GPU it cannot map fails the step there */
    ct_spank_nodecheck_gpus(&in, &s->pf);
    s->pf_gpus = 1;
}

/* --ctrain-preflight: the node's checks, in user_init as the job's user, before any task starts
 * (the network interface is the one the plan gives the node's first task); task_init reports the
 * result and acts on it. */
void ct_spank_nodecheck_gather(struct step *s, char **env)
{
    const struct ct_spank_nodecheck *opt = ct_spank_nodecheck_opts();
    const ct_bind_task *t = s->plan ? s->ops->plan_task(s->plan, 0) : NULL;
    struct ct_spank_nodecheck_node in = { 0 };
    ct_net_vars v;
    ct_error err;

    if (opt->mode == CT_SPANK_NODECHECK_OFF)
        return;
    ct_error_clear(&err);
    ct_spank_step_node_name(s, env, s->pf_node, sizeof(s->pf_node));
    s->pf_supervised = ct_env_ctrain_supervised(ct_spank_job_getenv, env);
    in.node = s->pf_node[0] ? s->pf_node : "?";
    in.step_gpus = ct_spank_slurm_gpus(env);
    if (in.step_gpus && in.step_gpus[0] && (s->plan || ct_spank_gres_read(in.node, &s->gres, &err) == 0))
        in.files = &s->gres.files;
    /* planned: the plugin found every GPU in the topology; bind=none: no topology to ask */
    in.gpus_mapped = 1;
    in.hca = t && t->nic_is_openfabrics ? t->nic : NULL;
    ct_spank_network_choose(s, t, &v);
    in.ifname = v.ifname;
    in.job_mem_mb = job_mem_mb(env);
    s->pf_bad = ct_spank_nodecheck_node(opt, &in, s->pf_gpus ? &s->pf : NULL, s->pf_line, sizeof(s->pf_line));
    /* info, not error, level: slurmstepd passes its errors to srun, and the node's first task
     * writes the user's one line per node */
    ct_spank_info("preflight: %s", s->pf_line);
}

/* A bad node: with exclude, the job requeued without it (a batch job that may be requeued);
 * otherwise, or when that fails, the step ended (scancel JOB.STEP), so that the programs that
 * started on the other nodes do not wait for this node's. In a step of ctrain supervise, exclude
 * acts as fail: the supervisor reads the line and starts its next step without the node, inside
 * the allocation, where a requeue would give the allocation back. As the user, from the node's
 * first task, after its line is written. */
static void preflight_act(const struct step *s)
{
    const char *why = s->pf_line + strlen("node ") + strlen(s->pf_node) + 2;
    ct_error err;

    ct_error_clear(&err);
    if (ct_spank_nodecheck_opts()->mode == CT_SPANK_NODECHECK_EXCLUDE && !s->pf_supervised) {
        sigset_t term;

        /* The requeue ends the job's steps, this task first: SIGTERM, SIGKILL KillWait seconds
         * later. slurmctld takes the excluded node only after the requeue, so this task holds
         * SIGTERM off for that long (it never execs: ctrain.c ends it). */
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigaddset(&term, SIGINT);
        sigaddset(&term, SIGHUP);
        sigprocmask(SIG_BLOCK, &term, NULL);
        if (ct_spank_nodecheck_exclude(s->job_id, s->pf_node, why, &err) == 0) {
            fprintf(stderr, "ctrain: preflight: job %u requeued without node %s\n", s->job_id, s->pf_node);
            ct_spank_info("preflight: job %u requeued without node %s", s->job_id, s->pf_node);
            return;
        }
        fprintf(stderr, "ctrain: preflight: %s\nctrain: hint: %s\n", err.msg, err.hint);
        ct_spank_info("preflight: %s", err.msg);
    }
    fflush(stderr);
    if (ct_slurm_kill_step(s->job_id, s->step_id, SIGKILL) != SLURM_SUCCESS)
        ct_spank_error("preflight: ending step %u.%u failed: %s", s->job_id, s->step_id,
                       slurm_strerror(ct_slurm_errno()));
}

/* The preflight's line on the node's first task's stderr: every result with report, a bad node's
 * with fail and exclude, which then end every task of the node (the others quietly). */
int ct_spank_nodecheck_report(const struct step *s, int local)
{
    enum ct_spank_nodecheck_mode mode = ct_spank_nodecheck_opts()->mode;
    int stop = s->pf_bad && mode != CT_SPANK_NODECHECK_REPORT;

    if (!s->pf_line[0])
        return 0;
    /* One write: preflight_act ends the step right after, and a second line written just before
     * that (why exclude acts as fail under ctrain supervise) was once lost with the step. */
    if (local == 0 && (s->pf_bad || mode == CT_SPANK_NODECHECK_REPORT)) {
        char out[sizeof(s->pf_line) + 512];
        int n = snprintf(out, sizeof(out), "ctrain: preflight: %s%s\n", s->pf_line, stop ? CT_LINE_PREFLIGHT_STOPS : "");

        if (stop && mode == CT_SPANK_NODECHECK_EXCLUDE && s->pf_supervised && n > 0 && (size_t)n < sizeof(out))
            snprintf(out + n, sizeof(out) - (size_t)n, "ctrain: preflight: a step of ctrain supervise: no requeue, the "
                     "supervisor starts its next step without node %s\n", s->pf_node);
        fputs(out, stderr);
    }
    if (local == 0 && stop)
        preflight_act(s);
    return stop ? -1 : 0;
}
