/* SPDX-License-Identifier: BSD-3-Clause */
/* The Trainer: checks the config, creates the strategy from the plan and runs the rank body on
 * every rank through the strategy's launcher: build -> place -> fit (or evaluate) -> report.
 * Each step is a call into its own file (trainer_internal.h); see include/ctrain/trainer.h. */
#include <string.h>

#include "ctrain/trainer.h"
#include "ctrain/util.h"
#include "engine/trainer/trainer_internal.h"

/* Train, then test the best checkpoint; rank 0 writes summary.json. */
static int fit(ct_run *run, const ct_trainer_job *job, ct_trainer_result *res, ct_error *err)
{
    char best[CT_TRAINER_PATH_MAX + 32];
    ct_eval_result test;
    int resumed, rc;

    if ((rc = ct_run_prepare_fit(run, job->cfg, err)))
        return rc;
    if ((rc = ct_ckpt_connector_restore(run, job, &resumed, err)) ||
        (rc = ct_ckpt_connector_open_outputs(run, job->cfg, resumed, err)))
        return rc;
    /* The run's directory is checked: the hang record moves into its live file there. */
    ct_strategy_set_trace(run->strategy, ct_hang_map());
    if ((rc = ct_fit_loop_run(run, err)))
        return rc;
    /* The end of fit tests best.safetensors (never the file written in the background) while the
     * last write completes. A stop (in training, validation or the test), like the end of fit,
     * leaves last.safetensors complete: the pending write is waited for (every rank learns whether
     * it failed) before anything reads it, the summary names it or the ranks exit 75. */
    if (!run->stop.agreed && !run->straggler_stop &&
        ((rc = ct_ckpt_connector_load_best(run, job->cfg, best, sizeof(best), err)) ||
         (rc = ct_eval_loop_run(run, CT_SPLIT_TEST, &test, err))))
        return rc;
    if ((rc = ct_run_checkpoint_wait(run, err)) || run->stop.agreed || run->straggler_stop)
        return rc ? rc : ct_signal_connector_finish(run, job->cfg, err);
    ct_result_fit(res, run, &test, best);
    rc = run->is_zero ? ct_summary_write(job, res, run, err) : 0;
    return ct_rank_zero_status(run, rc, err);
}

/* Validate or test a checkpoint (--ckpt-path, default best). */
static int evaluate(ct_run *run, const ct_trainer_job *job, ct_trainer_result *res, ct_error *err)
{
    enum ct_split split = job->mode == CT_TRAINER_TEST ? CT_SPLIT_TEST : CT_SPLIT_VAL;
    char path[CT_TRAINER_PATH_MAX + 32];
    ct_eval_result r;
    int rc;

    if ((rc = ct_ckpt_connector_load_eval(run, job->cfg, path, sizeof(path), err)))
        return rc;
    if (ct_datamodule_size(run->data, split) == 0)
        return ct_error_set(err, CT_EINVAL, "trainer-no-val", "validate: --val-fraction 0 leaves no validation set");
    if ((rc = ct_eval_loop_run(run, split, &r, err)))
        return rc;
    ct_result_eval(res, job->mode, &r, (long)ct_datamodule_size(run->data, split), path);
    return 0;
}

/* What every rank runs (the launcher calls it back); rank 0's result goes back to the caller. */
static int rank_body(ct_strategy *s, void *arg, void *result, size_t result_size, ct_error *err)
{
    const ct_trainer_job *job = arg;
    ct_trainer_result res;
    ct_run run;
    int rc;

    memset(&run, 0, sizeof(run));
    ct_result_init(&res);
    run.start_time = ct_time_now();
    /* fit: catch the stop signals before the slow start (rendezvous, data, model): a requeue signal
     * that comes then is kept, and the ranks stop at the first step boundary with a checkpoint,
     * instead of the signal's default action ending the job without a requeue. */
    if (job->mode == CT_TRAINER_FIT && (rc = ct_stop_install(job->requeue_signal, &run.signals, err)))
        return rc;
    if ((rc = ct_strategy_setup_environment(s, err))) {
        ct_stop_uninstall();
        return rc;
    }
    run.strategy = s;
    run.rank = ct_strategy_global_rank(s);
    run.world = res.world_size = ct_strategy_world_size(s);
    run.is_zero = ct_strategy_is_global_zero(s);
    run.stop_enabled = job->mode == CT_TRAINER_FIT;
    ct_run_options(&run, job);
    /* The hang record: the strategy notes its collectives in it; dumped on the dump signal (the
     * stop catcher thread) and after a collective timeout (below). */
    if (job->mode == CT_TRAINER_FIT)
        ct_strategy_set_trace(s, ct_hang_init(run.rank, run.world, run.opt.root_dir));
    /* fit --preflight: the checks before anything is built (the compute threads are set). */
    if (!(rc = ct_trainer_fit_preflight(s, job, err)) && !(rc = ct_run_build(&run, job, err)) &&
        !(rc = ct_run_place(&run, job->cfg, err))) {
        ct_result_model(&res, ct_model_host(run.model));
        rc = job->mode == CT_TRAINER_FIT ? fit(&run, job, &res, err) : evaluate(&run, job, &res, err);
    }
    /* An error: rank 0 still finishes the write pending (the file stays the previous one otherwise). */
    ct_strategy_checkpoint_wait_local(s);
    if (job->mode == CT_TRAINER_FIT && rc == CT_ETIMEOUT)
        ct_hang_after_timeout(run.is_zero);
    else if (job->mode == CT_TRAINER_FIT)
        ct_hang_finish(rc == 0);
    if (!rc && run.is_zero && result && result_size >= sizeof(res)) {
        res.filled = 1;
        memcpy(result, &res, sizeof(res));
    }
    /* Still caught while the ranks tear down (MPI_Finalize waits for every rank): a stop that comes
     * after the last step finds the run complete and changes nothing. */
    ct_run_free(&run);
    ct_strategy_teardown(s);
    ct_stop_uninstall();
    return rc;
}

/* The config is checked once, before anything is launched; its errors name the command ("fit: --lr ..."). */
static int launch(const ct_trainer_config *cfg, enum ct_trainer_mode mode, ct_connector *conn,
                  ct_trainer_result *res, ct_error *err)
{
    static const char *const verb[] = { "fit", "validate", "test" };
    ct_trainer_job job = { cfg, ct_connector_plan(conn), mode, 0, 0 };
    ct_strategy *s;
    int rc;

    ct_result_init(res);
    if ((rc = ct_trainer_config_check(cfg, err)) || (rc = ct_signal_connector_parse(cfg, &job.requeue_signal, err)) ||
        (rc = ct_signal_connector_parse_dump(cfg, job.requeue_signal, &job.dump_signal, err)))
        return ct_error_prefix(err, "%s: ", verb[mode]), rc;
    if ((rc = ct_trainer_strategy_create(cfg, job.plan, &s, err)))
        return rc;
    /* Under ctrain's own launcher the supervisor must pass the requeue signal on to the ranks. */
    ct_strategy_set_forward_signal(s, job.requeue_signal);
    if (mode == CT_TRAINER_FIT) {
        ct_strategy_set_forward_signal2(s, job.dump_signal);
        ct_stop_set_dump_signal(job.dump_signal);
        ct_stop_keep_blocked(job.requeue_signal);
    }
    rc = ct_strategy_launch(s, rank_body, &job, res, sizeof(*res), err);
    ct_strategy_free_reported(s, rc ? err : NULL);
    return rc;
}

int ct_trainer_fit(const ct_trainer_config *cfg, ct_connector *conn, ct_trainer_result *res, ct_error *err)
{
    return launch(cfg, CT_TRAINER_FIT, conn, res, err);
}

void ct_trainer_hold_stop_signals(void)
{
    ct_stop_block_early();
}

int ct_trainer_validate(const ct_trainer_config *cfg, ct_connector *conn, ct_trainer_result *res, ct_error *err)
{
    return launch(cfg, CT_TRAINER_VALIDATE, conn, res, err);
}

int ct_trainer_test(const ct_trainer_config *cfg, ct_connector *conn, ct_trainer_result *res, ct_error *err)
{
    return launch(cfg, CT_TRAINER_TEST, conn, res, err);
}
