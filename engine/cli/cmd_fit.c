/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain fit | validate | test — the Trainer from the command line. The connector resolves the
 * accelerator/strategy/precision flags; the Trainer runs the ranks through the strategy. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ctrain/connector.h"
#include "ctrain/engine.h"
#include "ctrain/launcher.h"
#include "ctrain/trainer.h"
#include "engine/cli/commands.h"
#include "engine/cli/trainer_flags.h"

enum which { FIT, VALIDATE, TEST };

/* The exit status comes from the error's outcome (ct_error_exit), never from its id: stopped by a
 * signal after saving last.safetensors (requeued, or to continue by hand) 75; the training loss
 * became non-finite (Lightning's EarlyStopping check_finite: not bad flags, 2, nor a failure to
 * retry as is, 1; last.safetensors is still the last good checkpoint) 3; --on-straggler
 * stop|exclude named a node and saved 76; fit --preflight named a node 3, as ctrain preflight. */
_Static_assert(CT_LAUNCHER_EXIT_STOPPED == 75 && CT_LAUNCHER_EXIT_STRAGGLER == 76 && CT_LAUNCHER_EXIT_NONFINITE == 3,
               "ct_error_exit's statuses are the launchers'");

/* " val_bpb 1.2345" for each of the model's own metrics, into buf. */
static const char *metrics(const char *prefix, const char names[][24], const double *v, int n, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, ", %s_%s %.4f", prefix, names[i], v[i]);
    return buf;
}

/* "val_acc 0.8885 " or "" for a model without accuracy. */
static const char *acc_text(const char *prefix, double acc, char *buf, size_t size)
{
    if (isnan(acc))
        buf[0] = '\0';
    else
        snprintf(buf, size, "%s_acc %.4f ", prefix, acc);
    return buf;
}

static void report(enum which w, const ct_trainer_result *r)
{
    char a[160], b[160], a0[48];

    if (!r->filled)
        return; /* a supervisor: rank 0 reported */
    if (w == FIT) {
        printf("ctrain: fit done: %d epochs, %ld steps, world size %d, %.0f samples/s\n", r->epochs, r->steps,
               r->world_size, r->train_samples_per_sec);
        if (isnan(r->test_acc)) /* a model without accuracy (a language model) */
            printf("ctrain: val_loss %.4f%s, test_loss %.4f%s\n", r->val_loss,
                   metrics("val", r->metric_names, r->val_metrics, r->n_metrics, a, sizeof(a)), r->test_loss,
                   metrics("test", r->metric_names, r->test_metrics, r->n_metrics, b, sizeof(b)));
        else
            printf("ctrain: val_acc %.4f (best %.4f), test_acc %.4f, test_loss %.4f\n", r->val_acc, r->best_val_acc,
                   r->test_acc, r->test_loss);
        if (r->n_mem > 0) {
            printf("ctrain: memory peak (rank 0, resident):");
            for (int i = 0; i < r->n_mem; i++)
                printf("%s %s %.1f MiB", i ? "," : "", r->mem_names[i], r->mem_bytes[i] / 1048576.0);
            printf("\n");
        }
        printf("ctrain: checkpoints %s, %s; summary %s\n", r->last_checkpoint,
               r->best_checkpoint[0] ? r->best_checkpoint : "(no best)", r->summary_path);
    } else if (w == VALIDATE) {
        printf("ctrain: %sval_loss %.4f%s (%ld samples, %s)\n", acc_text("val", r->val_acc, a0, sizeof(a0)), r->val_loss,
               metrics("val", r->metric_names, r->val_metrics, r->n_metrics, a, sizeof(a)), r->eval_samples,
               r->evaluated_checkpoint);
    } else {
        printf("ctrain: %stest_loss %.4f%s (%ld samples, %s)\n", acc_text("test", r->test_acc, a0, sizeof(a0)), r->test_loss,
               metrics("test", r->metric_names, r->test_metrics, r->n_metrics, b, sizeof(b)), r->eval_samples,
               r->evaluated_checkpoint);
    }
    fflush(stdout);
}

/* --init-from starts a fit from another library's weights; validate and test evaluate a ctrain
 * checkpoint (--ckpt-path). The file itself is the connector's to read (its shape is the plan's). */
static int check_init_from(enum which w, const ct_trainer_config *cfg, ct_error *err)
{
    if (!cfg->init_from[0] || w == FIT)
        return 0;
    ct_error_set(err, CT_EINVAL, "flag-value", "--init-from starts a fit; %s evaluates --ckpt-path",
                 w == VALIDATE ? "validate" : "test");
    return ct_error_hint(err, "fit with --init-from, or give validate/test the --ckpt-path of a ctrain checkpoint");
}

static int run(enum which w, int argc, char **argv)
{
    ct_trainer_config cfg;
    ct_connector_flags cf;
    ct_cli_model_flags mf;
    ct_connector *conn = NULL;
    ct_trainer_result res;
    ct_error err;
    int help = 0, rc;

    ct_error_clear(&err);
    if ((rc = ct_trainer_flags_parse(argc, argv, &cfg, &cf, &mf, &help, &err))) {
        ct_error_prefix(&err, "%s: ", argv[0]);
        ct_error_print(stderr, &err);
        return ct_error_exit_status(rc);
    }
    if (help) {
        ct_trainer_flags_usage(argv[0], stdout);
        return 0;
    }
    ct_engine_init();
    if ((rc = ct_trainer_flags_fold(&cf, &mf, &err)) ||
        (rc = check_init_from(w, &cfg, &err)) ||
        (rc = ct_connector_create(&cf, NULL, &conn, &err))) {
        ct_error_print(stderr, &err);
        return ct_error_exit_status(rc);
    }
    for (int i = 0; i < ct_connector_plan(conn)->n_notices; i++)
        fprintf(stderr, "ctrain: notice: %s\n", ct_connector_plan(conn)->notices[i]);
    rc = w == FIT ? ct_trainer_fit(&cfg, conn, &res, &err)
       : w == VALIDATE ? ct_trainer_validate(&cfg, conn, &res, &err)
                       : ct_trainer_test(&cfg, conn, &res, &err);
    if (rc && err.outcome == CT_OUTCOME_STOPPED) {
        /* Not a failure: the checkpoint is safe and the run continues (requeued or by hand). */
        fprintf(stderr, "ctrain: %s\n", err.msg);
        if (err.hint[0])
            fprintf(stderr, "ctrain: %s\n", err.hint);
    } else if (rc) {
        ct_error_print(stderr, &err);
    } else {
        report(w, &res);
    }
    ct_connector_free(conn);
    return ct_error_exit(rc, &err);
}

int ct_cmd_fit(int argc, char **argv) { return run(FIT, argc, argv); }
int ct_cmd_validate(int argc, char **argv) { return run(VALIDATE, argc, argv); }
int ct_cmd_test(int argc, char **argv) { return run(TEST, argc, argv); }
