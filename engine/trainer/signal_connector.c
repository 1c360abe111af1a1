/* SPDX-License-Identifier: BSD-3-Clause */
/* The signal connector (Lightning's SignalConnector): the requeue signal, parsed once, and what
 * fit does after the ranks stopped on a signal: requeue the SLURM job (requeue.c) or say how to
 * continue. stop.c beside it catches the signals; the loops agree on the stop at a step boundary
 * (ct_run_stop_agreed, engine/loops/step.c). */
#include <math.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/trainer/requeue.h"
#include "engine/trainer/trainer_internal.h"

int ct_signal_connector_parse(const ct_trainer_config *cfg, int *sig, ct_error *err)
{
    if (ct_stop_signal_parse(cfg->requeue_signal, sig) == 0)
        return 0;
    ct_error_set(err, CT_EINVAL, "trainer-requeue-signal", "--requeue-signal '%s' is not a signal ctrain can "
                 "stop on", cfg->requeue_signal);
    return ct_error_hint(err, "use USR1 (default), USR2, TERM, INT, HUP, XCPU, ALRM or QUIT, as in "
                              "#SBATCH --signal=USR1@90");
}

/* The dump signal must not be the requeue signal: one signal cannot both stop the run and leave it
 * running. The default (USR2) gives way to a requeue signal of USR2 silently: nobody chose it. */
int ct_signal_connector_parse_dump(const ct_trainer_config *cfg, int requeue_sig, int *sig, ct_error *err)
{
    char name[32];

    *sig = 0;
    if (!strcasecmp(cfg->dump_signal, "none"))
        return 0;
    if (!cfg->dump_signal[0]) {
        *sig = requeue_sig == SIGUSR2 ? 0 : SIGUSR2;
        return 0;
    }
    if (ct_stop_signal_parse(cfg->dump_signal, sig)) {
        ct_error_set(err, CT_EINVAL, "trainer-dump-signal", "--dump-signal '%s' is not a signal ctrain can catch",
                     cfg->dump_signal);
        return ct_error_hint(err, "use USR2 (default), USR1, HUP, XCPU, ALRM or QUIT, or none");
    }
    if (*sig == requeue_sig || *sig == SIGTERM || *sig == SIGINT) {
        ct_error_set(err, CT_EINVAL, "trainer-dump-signal", "--dump-signal %s is also a stop signal (--requeue-signal "
                     "%s, TERM, INT): it cannot both stop the run and leave it running",
                     ct_signal_name(*sig, name, sizeof(name)), cfg->requeue_signal);
        return ct_error_hint(err, "give the two different signals, e.g. --requeue-signal USR1 --dump-signal USR2");
    }
    return 0;
}

/* --on-straggler stop|exclude: every rank stopped after the same step and rank 0 saved
 * last.safetensors; not requeued as is (it would start on the same nodes). exclude requeues the job
 * with the named nodes in its excluded nodes (rank 0 asks slurmctld; every rank learns the outcome),
 * except in a step of ctrain supervise, which starts the next step without them itself. The error
 * id stays fit-straggler whatever the outcome: the CLI's exit status 76 says a node was named. */
static int straggler_finish(ct_run *run, const ct_trainer_config *cfg, ct_error *err)
{
    char nodes[CT_MAX_STRAGGLERS * 72] = "", where[CT_TRAINER_PATH_MAX + 1024], comment[1024];
    const char *job = run->opt.job_id;
    size_t used = 0;
    int status = 0, rc;
    ct_error rq;
    const struct ct_straggler_named *first = ct_straggler_at(run, 0);
    int named = ct_straggler_count(run);

    for (int i = 0; i < named && used < sizeof(nodes); i++)
        used += (size_t)snprintf(nodes + used, sizeof(nodes) - used, "%s%s", i ? "," : "",
                                 ct_straggler_at(run, i)->node);
    snprintf(where, sizeof(where), "stopped at epoch %lld, step %lld: node%s %s %s; checkpoint %s/last.safetensors "
             "written", (long long)run->st.epoch + 1, (long long)run->st.global_step, named > 1 ? "s" : "",
             nodes, named > 1 ? "are stragglers" : "is a straggler", cfg->default_root_dir);
    ct_error_set(err, CT_EINTR, "fit-straggler", "%s", where);
    ct_error_outcome(err, CT_OUTCOME_STRAGGLER);
    if (run->opt.on_straggler != CT_STRAGGLER_EXCLUDE)
        return ct_error_hint(err, "resubmit without that node (--exclude=%s) and --ckpt-path last", nodes);
    if (run->opt.supervised)
        return ct_error_hint(err, "ctrain supervise starts the next step without %s", nodes);
    if (!job[0])
        return ct_error_hint(err, "not in a SLURM job, so nothing was requeued (--on-straggler exclude); run again "
                                  "on other nodes with --ckpt-path last");
    /* Said before asking, whatever --progress: SLURM ends the job's processes (and srun, which
     * carries their output) as soon as the requeue is accepted, and the error is not seen then. */
    ct_progress_say(run, "%s; requeueing SLURM job %s without %s", where, job, nodes);
    /* A moment for srun to relay the line: it is the run's last word on why it ended. */
    if (run->is_zero)
        usleep(300 * 1000);
    ct_error_clear(&rq);
    snprintf(comment, sizeof(comment), "ctrain straggler excluded %s: busy %.1f ms a step, %.1fx the median node's "
             "%.1f ms, at step %lld", nodes, first ? first->busy_ms : NAN,
             first ? first->busy_ms / first->median_ms : NAN, first ? first->median_ms : NAN,
             first ? (long long)first->step : -1LL);
    if (run->is_zero)
        status = ct_slurm_requeue_without(job, nodes, comment, &rq);
    if ((rc = ct_strategy_broadcast(run->strategy, &status, sizeof(status), 0, err)))
        return rc;
    if (status && run->is_zero) {
        ct_error_set(err, CT_EINTR, "fit-straggler", "%s; but SLURM job %s was not requeued without %s: %s", where, job,
                     nodes, rq.msg);
        ct_error_outcome(err, CT_OUTCOME_STRAGGLER);
        return ct_error_hint(err, "%s; or resubmit with --exclude=%s and --ckpt-path last", rq.hint, nodes);
    }
    if (status) {
        ct_error_set(err, CT_EINTR, "fit-straggler", "%s; rank 0 could not requeue job %s without %s", where, job, nodes);
        ct_error_outcome(err, CT_OUTCOME_STRAGGLER);
        return ct_error_hint(err, "see rank 0's message");
    }
    ct_error_set(err, CT_EINTR, "fit-straggler", "%s; SLURM job %s requeued without %s", where, job, nodes);
    ct_error_outcome(err, CT_OUTCOME_STRAGGLER);
    return ct_error_hint(err, "the job starts again on other nodes and resumes from that checkpoint (--ckpt-path auto)");
}

/* Every rank stopped after the same step and rank 0 saved last.safetensors. Requeue the job when
 * the requeue signal came inside SLURM (rank 0 asks slurmctld; every rank learns the outcome),
 * then end fit with CT_EINTR: the CLI exits 75. */
int ct_signal_connector_finish(ct_run *run, const ct_trainer_config *cfg, ct_error *err)
{
    char sig[32], where[CT_TRAINER_PATH_MAX + 160];
    const char *job = run->opt.job_id;
    int want = run->stop.requeue && cfg->auto_requeue && job[0];
    /* Asked again now, after the checkpoint: this rank's own copy of a forwarded signal may have
     * come after the ranks agreed (the supervisor forwards to them one after another, and the
     * catcher thread may wait for a busy core); it was sent here too, not only elsewhere. */
    int local = run->stop.local || (run->signals && run->signals->signal);
    int status = 0, rc;
    ct_error rq;

    ct_error_clear(&rq);
    if (run->straggler_stop)
        return straggler_finish(run, cfg, err);
    ct_signal_name(run->stop.signal, sig, sizeof(sig));
    snprintf(where, sizeof(where), "stopped by %s%s at epoch %lld, step %lld; checkpoint %s/last.safetensors written",
             sig, local ? "" : " (on another rank)", (long long)run->st.epoch + 1,
             (long long)run->st.global_step, cfg->default_root_dir);
    /* Said before asking: SLURM ends the job's processes (and srun, which carries their output) as
     * soon as the requeue is accepted, so nothing printed after it is sure to be seen. */
    if (want)
        ct_progress_line(run, "ctrain: %s; requeueing SLURM job %s", where, job);
    if (want && run->is_zero)
        status = ct_slurm_requeue(job, &rq);
    if (want && (rc = ct_strategy_broadcast(run->strategy, &status, sizeof(status), 0, err)))
        return rc;
    if (want && status) {
        if (run->is_zero) {
            ct_error_set(err, status, rq.id, "%s; but the job was not requeued: %s", where, rq.msg);
            return ct_error_hint(err, "%s", rq.hint);
        }
        ct_error_set(err, status, "requeue-failed", "%s; rank 0 could not requeue job %s", where, job);
        return ct_error_hint(err, "see rank 0's message");
    }
    if (want) {
        ct_error_set(err, CT_EINTR, "fit-requeued", "%s; SLURM job %s requeued", where, job);
        ct_error_outcome(err, CT_OUTCOME_STOPPED);
        return ct_error_hint(err, "the job starts again under the same id and resumes from that checkpoint "
                                  "(--ckpt-path auto)");
    }
    ct_error_set(err, CT_EINTR, "fit-stopped", "%s", where);
    ct_error_outcome(err, CT_OUTCOME_STOPPED);
    if (!job[0])
        return ct_error_hint(err, "not in a SLURM job, so nothing was requeued; run the same command with "
                                  "--ckpt-path last to continue");
    if (!cfg->auto_requeue)
        return ct_error_hint(err, "--no-auto-requeue: job %s was not requeued; resubmit with --ckpt-path last "
                                  "to continue", job);
    return ct_error_hint(err, "%s is not the requeue signal (--requeue-signal %s), so job %s was not requeued; "
                              "resubmit with --ckpt-path last to continue", sig, cfg->requeue_signal, job);
}
