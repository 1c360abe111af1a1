/* SPDX-License-Identifier: BSD-3-Clause */
/* Stragglers during fit (--on-straggler warn|stop|exclude): which node holds the others back.
 *
 * In synchronous data parallelism every rank's step takes as long as the slowest rank's: the
 * others wait for it in the gradient exchange. So a step's wall time names nobody; what does is
 * each rank's busy time, the step's wall time minus the time it waited in collectives
 * (ct_strategy_exposed_comm_seconds): the slow rank is busy all along, the others wait for it.
 * Every N optimizer steps (--straggler-every) each rank's busy and waiting time over the window go
 * into one allreduce of 2 x world doubles (each rank fills its own slots); every rank then holds the
 * same figures and decides alike. A node's busy time is its slowest rank's; a node whose busy time
 * per step, over the last --straggler-windows windows, is above --straggler-factor x the median
 * node's is named: in the log, the stragglers column of metrics.csv, TensorBoard (every node's busy time
 * per step, straggler/busy_ms/NODE) and summary.json. With stop, every rank stops after the same
 * step and the fit saves last.safetensors and exits with its own status; exclude also requeues the
 * SLURM job without the node (the signal connector). Needs at least three nodes to judge (a median
 * of two is their mean). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/launcher.h"
#include "ctrain/util.h"
#include "engine/health/fit/straggler.h"
#include "engine/loggers/loggers.h"
#include "engine/health/fit/rank_nodes.h"
#include "engine/events/event.h"

#define HOST_LEN CT_RANK_HOST_LEN

struct ct_straggler {
    int world, n_nodes;
    char (*host)[HOST_LEN];   /* [world] */
    int *node_of;             /* [world] */
    int *leader;              /* [n_nodes]: first rank */
    double *hist;             /* [n_nodes][windows]: each node's busy ms per step, the last windows */
    double *mean;             /* [n_nodes]: their mean */
    int filled;               /* windows gathered so far */
    int *named;               /* [n_nodes] */
    double *all;              /* [2 x world]: the window's gather */
    double *busy;             /* [n_nodes]: the window's busy ms per step */
    int steps;                /* steps in the window so far */
    double step_s;            /* their wall time */
    double wait_at_start;     /* exposed comm seconds when the window began */
    struct ct_straggler_named stragglers[CT_MAX_STRAGGLERS]; /* named so far */
    int n_stragglers;
    char now[256];            /* the nodes slow in the last window (metrics.csv's column) */
    double seconds;           /* spent in the windows' gathers and judgement */
};

static int gather_hosts(ct_run *run, struct ct_straggler *g, ct_error *err)
{
    return ct_rank_nodes(run->strategy, run->rank, g->world, g->host, g->node_of, g->leader, &g->n_nodes, err);
}

int ct_straggler_start(ct_run *run, ct_error *err)
{
    struct ct_straggler *g;
    int w = run->world;

    if (run->opt.on_straggler == CT_STRAGGLER_OFF || w < 2)
        return 0;
    if (!(g = calloc(1, sizeof(*g))))
        return ct_error_set(err, CT_ENOMEM, "straggler", "straggler detection: out of memory");
    g->world = w;
    g->host = calloc((size_t)w, HOST_LEN);
    g->node_of = calloc((size_t)w, sizeof(int));
    g->leader = calloc((size_t)w, sizeof(int));
    g->hist = calloc((size_t)w * (size_t)run->opt.straggler_windows, sizeof(double));
    g->mean = calloc((size_t)w, sizeof(double));
    g->named = calloc((size_t)w, sizeof(int));
    g->all = calloc(2 * (size_t)w, sizeof(double));
    g->busy = calloc((size_t)w, sizeof(double));
    run->strag = g;
    if (!g->host || !g->node_of || !g->leader || !g->hist || !g->mean || !g->named || !g->all || !g->busy)
        return ct_error_set(err, CT_ENOMEM, "straggler", "straggler detection: out of memory");
    g->wait_at_start = ct_strategy_exposed_comm_seconds(run->strategy);
    return gather_hosts(run, g, err);
}

void ct_straggler_free(ct_run *run)
{
    struct ct_straggler *g = run->strag;

    if (!g)
        return;
    free(g->host);
    free(g->node_of);
    free(g->leader);
    free(g->hist);
    free(g->mean);
    free(g->named);
    free(g->all);
    free(g->busy);
    free(g);
    run->strag = NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double median_of(const double *v, int n)
{
    double w[n > 0 ? n : 1];

    memcpy(w, v, sizeof(double) * (size_t)n);
    qsort(w, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
}

/* The fit stops over node (rank's): the supervisor's event record, from which ctrain supervise
 * excludes the node (the warning above is for people). */
static void stop_event(const char *node, int rank)
{
    ct_sv_event ev = { .kind = CT_SV_EVENT_STRAGGLER, .n_nodes = 1 };

    ev.node_rank[0] = rank;
    ct_str_copy(ev.node[0], sizeof(ev.node[0]), node);
    ct_str_copy(ev.why, sizeof(ev.why), "the fit's straggler detection named it slow (--on-straggler)");
    ct_sv_event_write(&ev);
}

/* A node over the threshold for enough windows: named once, and remembered for summary.json. */
static void name_node(ct_run *run, struct ct_straggler *g, int node, int rank, double med)
{
    const ct_loop_options *o = &run->opt;

    g->named[node] = 1;
    /* Said whatever --progress (off included): rank 0, on stderr, as a warning. */
    ct_progress_say(run, "warning: straggler: node %s (rank %d) busy %.1f ms a step, %.1fx the median node's %.1f ms "
                    "(threshold %.1fx), over the last %d windows of %d steps to step %lld%s",
                    g->host[rank], rank, g->mean[node], g->mean[node] / med, med, o->straggler_factor,
                    o->straggler_windows, o->straggler_every, (long long)run->st.global_step,
                    o->on_straggler == CT_STRAGGLER_STOP      ? CT_LINE_STRAGGLER_STOPS "stop)"
                    : o->on_straggler == CT_STRAGGLER_EXCLUDE ? CT_LINE_STRAGGLER_STOPS "exclude)"
                                                              : "");
    if (g->n_stragglers < CT_MAX_STRAGGLERS) {
        struct ct_straggler_named *s = &g->stragglers[g->n_stragglers++];

        snprintf(s->node, sizeof(s->node), "%s", g->host[rank]);
        s->rank = rank;
        s->step = run->st.global_step;
        s->busy_ms = g->mean[node];
        s->median_ms = med;
    }
    if (o->on_straggler == CT_STRAGGLER_STOP || o->on_straggler == CT_STRAGGLER_EXCLUDE) {
        run->straggler_stop = 1;
        stop_event(g->host[rank], rank);
    }
}

/* Every node's busy time per step in the window just gathered (its slowest rank's), and over the
 * last --straggler-windows windows against the median node's. The mean over those windows, not
 * each window alone: on a shared machine one window in a few is noisy, and a streak a single window
 * breaks would name a capped node late or never, while the mean of a few windows damps a healthy
 * node's odd slow one. */
static void judge(ct_run *run, struct ct_straggler *g)
{
    int k = run->opt.straggler_windows, slot = g->filled % k, slowest[g->n_nodes > 0 ? g->n_nodes : 1];
    double med;
    size_t used = 0;
    int newly = 0;

    for (int i = 0; i < g->n_nodes; i++) {
        g->busy[i] = -1;
        slowest[i] = g->leader[i];
    }
    for (int r = 0; r < g->world; r++) {
        int i = g->node_of[r];

        if (g->all[2 * r] > g->busy[i]) {
            g->busy[i] = g->all[2 * r];
            slowest[i] = r;
        }
    }
    g->filled++;
    for (int i = 0; i < g->n_nodes; i++) {
        char tag[96];

        snprintf(tag, sizeof(tag), "straggler/busy_ms/%s", g->host[g->leader[i]]);
        ct_tb_scalar(run, tag, g->busy[i]);
        g->hist[(size_t)i * (size_t)k + (size_t)slot] = g->busy[i];
        g->mean[i] = 0;
        for (int j = 0; j < k; j++)
            g->mean[i] += g->hist[(size_t)i * (size_t)k + (size_t)j] / k;
    }
    g->now[0] = '\0';
    if (g->filled < k || g->n_nodes < 3)
        goto out;
    med = median_of(g->mean, g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        if (!(g->mean[i] > run->opt.straggler_factor * med))
            continue;
        if (used + strlen(g->host[g->leader[i]]) + 2 < sizeof(g->now))
            used += (size_t)snprintf(g->now + used, sizeof(g->now) - used, "%s%s",
                                     used ? ";" : "", g->host[g->leader[i]]);
        if (!g->named[i]) {
            name_node(run, g, i, slowest[i], med);
            newly = 1;
        }
    }
out:
    ct_logger_set_stragglers(run, g->now);
    /* A row of metrics.csv at the step a node is named, whatever --log-every-n-steps. */
    if (newly)
        ct_logger_row(run, NAN, NULL, ct_optim_get_config(run->optim)->lr, NAN, NAN);
}

int ct_straggler_step(ct_run *run, double step_seconds, ct_error *err)
{
    struct ct_straggler *g = run->strag;
    double wait, t0;
    int rc;

    if (!g)
        return 0;
    g->steps++;
    g->step_s += step_seconds;
    if (run->st.global_step % run->opt.straggler_every)
        return 0;
    t0 = ct_time_now();
    wait = ct_strategy_exposed_comm_seconds(run->strategy) - g->wait_at_start;
    memset(g->all, 0, sizeof(double) * 2 * (size_t)g->world);
    /* ms per step: busy (the step less its waiting in collectives) and waiting. */
    g->all[2 * run->rank] = (g->step_s - wait) / g->steps * 1e3;
    g->all[2 * run->rank + 1] = wait / g->steps * 1e3;
    if ((rc = ct_strategy_reduce_sum(run->strategy, g->all, 2 * g->world, err)))
        return rc;
    judge(run, g);
    g->steps = 0;
    g->step_s = 0;
    g->wait_at_start = ct_strategy_exposed_comm_seconds(run->strategy);
    /* Its cost, for summary.json: the gather (a wait for a slower rank included, which the next
     * gradient exchange would otherwise have taken) and the judgement. */
    g->seconds += ct_time_now() - t0;
    return 0;
}

int ct_straggler_count(const ct_run *run)
{
    return run->strag ? run->strag->n_stragglers : 0;
}

const struct ct_straggler_named *ct_straggler_at(const ct_run *run, int i)
{
    return run->strag && i >= 0 && i < run->strag->n_stragglers ? &run->strag->stragglers[i] : NULL;
}

double ct_straggler_seconds(const ct_run *run)
{
    return run->strag ? run->strag->seconds : 0;
}
