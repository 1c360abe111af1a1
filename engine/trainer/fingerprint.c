/* SPDX-License-Identifier: BSD-3-Clause */
/* Before training, every rank checks that it runs the same run as rank 0 (issue 48 item 2): the
 * flags that decide what is computed (model and its config, optimizer, lr, batch, seed: the flags
 * record checkpoints keep; with the precision, strategy and world size), the data's identity and
 * the model's parameter count, before rank 0's weights are broadcast (other shapes there ended in
 * gloo's uncaught exception). A rank of another job that met this one's store (the same
 * MASTER_ADDR:PORT, no job id to tell them apart) trained with its own settings and corrupted the
 * run; ranks whose model shapes differ ended in gloo's uncaught exception. Now each rank that
 * differs names what differs, and every rank refuses before the first step. One broadcast of rank
 * 0's record and one sum of who differs: nothing on the step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ctrain/util.h"
#include "engine/trainer/trainer_internal.h"

struct fingerprint {
    char hparams[sizeof(((ct_loop_options *)0)->flags_json) + 256];
    char data[sizeof(((ct_loop_options *)0)->data_identity)];
    double params;
};

/* The run's flags record (what checkpoints keep), with where it runs: world size, strategy,
 * precision. */
static void fp_fill(const ct_run *run, struct fingerprint *fp)
{
    cJSON *o = cJSON_Parse(run->opt.flags_json);
    const struct ct_precision_ops *prec = ct_strategy_precision(run->strategy);
    char *text;

    memset(fp, 0, sizeof(*fp));
    if (!o)
        o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "world_size", run->world);
    cJSON_AddStringToObject(o, "strategy", ct_strategy_name(run->strategy) ? ct_strategy_name(run->strategy) : "");
    cJSON_AddStringToObject(o, "precision", prec ? prec->name : "");
    text = cJSON_PrintUnformatted(o);
    ct_str_copy(fp->hparams, sizeof(fp->hparams), text ? text : "{}");
    free(text);
    cJSON_Delete(o);
    ct_str_copy(fp->data, sizeof(fp->data), run->opt.data_identity);
    fp->params = (double)run->model->num_params;
}

/* The first field of mine that differs from rank 0's, as "KEY MINE (rank 0: THEIRS)"; 0 when none. */
static int fp_diff(const struct fingerprint *mine, const struct fingerprint *zero, char *buf, size_t size)
{
    cJSON *a = cJSON_Parse(mine->hparams), *b = cJSON_Parse(zero->hparams);
    int differs = 0;

    if (strcmp(mine->data, zero->data))
        differs = snprintf(buf, size, "the data (--data) %s (rank 0: %s)", mine->data, zero->data) > 0;
    else if (mine->params != zero->params)
        differs = snprintf(buf, size, "the model's parameters: %.0f (rank 0: %.0f)", mine->params, zero->params) > 0;
    for (cJSON *x = a ? a->child : NULL; !differs && x; x = x->next) {
        cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
        char *tx = cJSON_PrintUnformatted(x), *ty = y ? cJSON_PrintUnformatted(y) : NULL;

        if (!ty || strcmp(tx ? tx : "", ty))
            differs = snprintf(buf, size, "%s %s (rank 0: %s)", x->string, tx ? tx : "?", ty ? ty : "none") > 0;
        free(tx);
        free(ty);
    }
    if (!differs && strcmp(mine->hparams, zero->hparams))
        differs = snprintf(buf, size, "the run's flags (rank 0 has one this rank lacks)") > 0;
    cJSON_Delete(a);
    cJSON_Delete(b);
    return differs;
}

int ct_run_check_fingerprint(ct_run *run, ct_error *err)
{
    struct fingerprint mine, *zero = malloc(sizeof(*zero));
    double *who = calloc((size_t)run->world, sizeof(double));
    char what[1200] = "";
    int rc = 0, first = -1, n = 0;

    if (!zero || !who) {
        rc = ct_error_set(err, CT_ENOMEM, "", "out of memory for the run's fingerprint");
        goto out;
    }
    fp_fill(run, &mine);
    memcpy(zero, &mine, sizeof(mine));
    if ((rc = ct_strategy_broadcast(run->strategy, zero, sizeof(*zero), 0, err)))
        goto out;
    who[run->rank] = fp_diff(&mine, zero, what, sizeof(what));
    if ((rc = ct_strategy_reduce_sum(run->strategy, who, run->world, err)))
        goto out;
    for (int r = 0; r < run->world; r++)
        if (who[r] > 0.5 && (n++, first < 0))
            first = r;
    if (!n)
        goto out;
    if (what[0])
        rc = ct_error_set(err, CT_ECONFLICT, "run-fingerprint", "rank %d runs another run than rank 0: %s", run->rank,
                          what);
    else
        rc = ct_error_set(err, CT_ECONFLICT, "run-fingerprint", "%d rank%s (the first: rank %d) run%s another run than "
                          "rank 0 (each names what differs)", n, n == 1 ? "" : "s", first, n == 1 ? "s" : "");
    ct_error_hint(err, "give every rank the same flags and data; a rank of another job at this MASTER_ADDR:MASTER_PORT "
                       "needs a port of its own");
out:
    free(zero);
    free(who);
    return rc;
}
