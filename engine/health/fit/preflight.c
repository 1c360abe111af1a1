/* SPDX-License-Identifier: BSD-3-Clause */
/* Preflight checks across the nodes of a run (see preflight.h and README, "Preflight").
 *
 * Every figure is the best of several repetitions: other processes on a node (the OS, a
 * neighbour's job, this machine's other users) only ever make a repetition slower, while a fault
 * (a throttled or capped CPU, a slow link) makes every repetition slow. Best-of keeps noise from
 * naming a healthy node; each compute window outlasts the CFS bandwidth period (100 ms), so a
 * cgroup-capped node cannot finish a window inside one quota. Thresholds are relative to the
 * median of the nodes, which one bad node cannot move, so they hold whatever the hardware.
 *
 * Network: the nodes form a ring in the order of their first rank; each node's first rank
 * measures the pair with the next node (round trips of 8 bytes, then one-way messages of 1 MiB
 * answered by 8 bytes) in two phases (three for an odd ring), each node in one pair per phase.
 * The pairs of a phase run at once, so the check takes the same time at 4 nodes as at 1,000, and
 * each node is measured with both neighbours: its figure is the better of its two pairs, so a
 * node with a slow link is slow in both and named, while its neighbours each have one good pair.
 * (All pairs would name it too, in O(nodes) time; two nodes cannot tell which end is slow.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ctrain/util.h"
#include "engine/health/fit/preflight.h"
#include "engine/health/fit/rank_nodes.h"
#include "engine/nn/gemm.h"
#include "engine/util/fsutil.h"

#define HOST_LEN CT_RANK_HOST_LEN

void ct_preflight_defaults(ct_preflight_options *o)
{
    memset(o, 0, sizeof(*o));
    o->checks = CT_PREFLIGHT_ALL;
    o->compute_factor = 3;
    o->latency_factor = 4;
    o->latency_floor_ms = 5;
    o->bandwidth_factor = 4;
    o->gemm_n = 256;
    o->gemm_windows = 3;
    o->gemm_window_s = 0.25;
    o->pings = 16;
    o->bandwidth_bytes = 1 << 20;
    o->bandwidth_reps = 10;
    o->allreduce_bytes = 4 << 20;
    o->allreduce_reps = 3;
}

int ct_preflight_parse_checks(const char *list, int *out, ct_error *err)
{
    static const char *const names[] = { "compute", "network", "allreduce", "all", NULL };
    char buf[128], *rest = buf, *tok;

    *out = 0;
    if (ct_str_copy(buf, sizeof(buf), list) || !*list)
        goto bad;
    /* Every name of the list, empty ones included (",," names no check: it would run none and
     * report every node passed). */
    while ((tok = strsep(&rest, ",")) != NULL) {
        int i;

        for (i = 0; names[i] && strcmp(tok, names[i]); i++)
            ;
        if (!names[i]) {
            ct_error_set(err, CT_EINVAL, "flag-value", "--preflight-checks %s: '%s' is not a check", list, tok);
            return ct_error_hint(err, "a list of compute, network and allreduce, or all (the default)");
        }
        *out |= i == 3 ? CT_PREFLIGHT_ALL : 1 << i;
    }
    return 0;
bad:
    ct_error_set(err, CT_EINVAL, "flag-value", "--preflight-checks: '%s' is not a check", list);
    return ct_error_hint(err, "a list of compute, network and allreduce, or all (the default)");
}

/* --- what every rank knows after the gathers ------------------------------------------------- */

struct pf {
    const ct_preflight_options *o;
    ct_strategy *s;
    int rank, world;
    char (*host)[HOST_LEN]; /* [world] */
    int n_nodes;
    int *node_of;           /* [world]: node index of each rank */
    int *leader;            /* [n_nodes]: each node's first rank */
    double *gflops;         /* [world]: GEMM rate; NAN when not measured */
    double *bad;            /* [world]: 1 when a rank's check failed (non-finite GEMM, wrong sum) */
    double *edge_lat, *edge_bw; /* [n_nodes]: the pair (node i, node i + 1), measured by i */
    double *node_lat, *node_bw; /* [n_nodes]: the better of each node's two pairs */
    double allreduce_s;     /* best time of the timed allreduce (this rank's) */
    int allreduce_skipped;  /* 1: not run, a node's link was named already */
    double check_s[3];      /* seconds each check took on this rank: compute, network, allreduce */
    double wall_s;
};

/* An allgather through the strategy's allreduce: each rank fills its k values, the others zeros. */
static int gather(struct pf *p, const double *mine, int k, double *all, ct_error *err)
{
    memset(all, 0, sizeof(double) * (size_t)k * (size_t)p->world);
    memcpy(all + (size_t)p->rank * (size_t)k, mine, sizeof(double) * (size_t)k);
    return ct_strategy_reduce_sum(p->s, all, k * p->world, err);
}

/* Every rank's host name (the node it runs on), and the nodes in the order of their first rank. */
static int gather_hosts(struct pf *p, ct_error *err)
{
    return ct_rank_nodes(p->s, p->rank, p->world, p->host, p->node_of, p->leader, &p->n_nodes, err);
}

/* --- compute ------------------------------------------------------------------------------- */

/* GFLOP/s of the fixed GEMM, the best of o->gemm_windows windows; NAN when its result is not finite. */
static double gemm_rate(const ct_preflight_options *o)
{
    int n = o->gemm_n;
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float)), *c = malloc(nn * sizeof(float));
    double best = 0, flop = 2.0 * n * n * n;

    if (!a || !b || !c) {
        best = NAN;
        goto out;
    }
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)((int)(i % 13) - 6) / 16.0f;
        b[i] = (float)((int)(i % 7) - 3) / 8.0f;
    }
    ct_gemm_prepare(0, 0, n, n, n, n, n, CT_DTYPE_F32, 0, n);
    ct_gemm(0, 0, n, n, n, a, n, b, n, CT_DTYPE_F32, 0, c, n); /* the first call pays for set-up */
    for (int w = 0; w < o->gemm_windows; w++) {
        double t0 = ct_time_now(), t;
        long reps = 0;

        do {
            ct_gemm(0, 0, n, n, n, a, n, b, n, CT_DTYPE_F32, 0, c, n);
            reps++;
        } while ((t = ct_time_now() - t0) < o->gemm_window_s);
        if (flop * (double)reps / t / 1e9 > best)
            best = flop * (double)reps / t / 1e9;
    }
    for (size_t i = 0; i < nn; i += 97)
        if (!isfinite(c[i]))
            best = NAN;
out:
    free(a);
    free(b);
    free(c);
    return best;
}

static int check_compute(struct pf *p, ct_error *err)
{
    double mine = NAN;

    if (p->o->checks & CT_PREFLIGHT_COMPUTE) {
        /* Start together: a rank still computing would slow the others' windows. */
        double go = 1;

        int rc = ct_strategy_reduce_sum(p->s, &go, 1, err);

        if (rc)
            return rc;
        mine = gemm_rate(p->o);
    }
    {
        double pair[2] = { isnan(mine) ? -1 : mine, 0 }, *all = malloc(sizeof(double) * 2 * (size_t)p->world);
        int rc;

        if (!all)
            return ct_error_set(err, CT_ENOMEM, "preflight", "out of memory");
        if ((p->o->checks & CT_PREFLIGHT_COMPUTE) && isnan(mine))
            pair[1] = 1;
        rc = gather(p, pair, 2, all, err);
        for (int r = 0; !rc && r < p->world; r++) {
            p->gflops[r] = (p->o->checks & CT_PREFLIGHT_COMPUTE) && all[2 * r] >= 0 ? all[2 * r] : NAN;
            p->bad[r] += all[2 * r + 1];
        }
        free(all);
        return rc;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* The median of the finite values of v[0..n) (the mean of the middle two for an even count); NAN: none. */
static double median(const double *v, int n)
{
    double *w = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)), m;
    int k = 0;

    if (!w)
        return NAN;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]))
            w[k++] = v[i];
    qsort(w, (size_t)k, sizeof(double), cmp_double);
    m = k == 0 ? NAN : k % 2 ? w[k / 2] : (w[k / 2 - 1] + w[k / 2]) / 2;
    free(w);
    return m;
}

/* --- network: a ring of pairs of nodes ------------------------------------------------------ */

/* The phase the pair (i, i + 1) is measured in: alternate, the closing pair of an odd ring last. */
static int pair_phase(int i, int n) { return n % 2 && i == n - 1 ? 2 : i % 2; }
static int pair_exists(int i, int n) { return n > 2 || i == 0; }

/* Round trips of 8 bytes with peer (this node's first rank measures, the peer's answers): the
 * best / 2, in ms. The first connects and is not counted. */
static int ping_pair(struct pf *p, int peer, int measure, double *lat_ms, ct_error *err)
{
    double v = 0, best = INFINITY;
    int rc;

    for (int i = 0; i <= p->o->pings; i++) {
        double t0 = ct_time_now();

        if (measure)
            rc = ct_strategy_sendrecv(p->s, &v, sizeof(v), peer, NULL, 0, -1, err) ||
                 ct_strategy_sendrecv(p->s, NULL, 0, -1, &v, sizeof(v), peer, err);
        else
            rc = ct_strategy_sendrecv(p->s, NULL, 0, -1, &v, sizeof(v), peer, err) ||
                 ct_strategy_sendrecv(p->s, &v, sizeof(v), peer, NULL, 0, -1, err);
        if (rc)
            return err && err->code ? err->code : CT_ECOMM;
        if (i && ct_time_now() - t0 < best)
            best = ct_time_now() - t0;
    }
    if (measure)
        *lat_ms = best / 2 * 1e3;
    return 0;
}

/* Seconds the bandwidth repetitions of one pair may take, after the first. */
#define BW_BUDGET_S 1.0

/* One-way messages of o->bandwidth_bytes, each answered by 8 bytes: the best rate in MB/s. Before
 * each the measuring rank says whether one more comes (8 bytes), so it alone decides when the time
 * is up and a slow pair cannot hold the check for o->bandwidth_reps slow messages. */
static int bw_pair(struct pf *p, int peer, int measure, double *bw, char *buf, ct_error *err)
{
    const ct_preflight_options *o = p->o;
    double t_start = ct_time_now(), best = 0, more = 1, ack = 0;
    int rc;

    for (int i = 0;; i++) {
        double t0;

        if (measure)
            more = i < o->bandwidth_reps && (i == 0 || ct_time_now() - t_start < BW_BUDGET_S);
        rc = measure ? ct_strategy_sendrecv(p->s, &more, sizeof(more), peer, NULL, 0, -1, err)
                     : ct_strategy_sendrecv(p->s, NULL, 0, -1, &more, sizeof(more), peer, err);
        if (rc || !more)
            return rc;
        t0 = ct_time_now();
        if (measure)
            rc = ct_strategy_sendrecv(p->s, buf, o->bandwidth_bytes, peer, NULL, 0, -1, err) ||
                 ct_strategy_sendrecv(p->s, NULL, 0, -1, &ack, sizeof(ack), peer, err);
        else
            rc = ct_strategy_sendrecv(p->s, NULL, 0, -1, buf, o->bandwidth_bytes, peer, err) ||
                 ct_strategy_sendrecv(p->s, &ack, sizeof(ack), peer, NULL, 0, -1, err);
        if (rc)
            return err && err->code ? err->code : CT_ECOMM;
        if (measure && (double)o->bandwidth_bytes / (ct_time_now() - t0) / 1e6 > best)
            *bw = best = (double)o->bandwidth_bytes / (ct_time_now() - t0) / 1e6;
    }
}

/* The pairs, phase by phase: this node's first rank measures the pair with the next node and
 * answers the previous one's. skip[i]: pair i is not measured (bandwidth of a pair already named
 * for its latency: it would only take long). */
static int ring_pairs(struct pf *p, int bandwidth, const double *skip, double *mine, char *buf, ct_error *err)
{
    int n = p->n_nodes, me = p->node_of[p->rank], prev = (me + n - 1) % n, next = (me + 1) % n, rc = 0;

    if (p->leader[me] != p->rank)
        return 0;
    for (int phase = 0; phase < 3 && !rc; phase++) {
        if (pair_exists(me, n) && pair_phase(me, n) == phase && !skip[me])
            rc = bandwidth ? bw_pair(p, p->leader[next], 1, &mine[me], buf, err)
                           : ping_pair(p, p->leader[next], 1, &mine[me], err);
        if (!rc && pair_exists(prev, n) && pair_phase(prev, n) == phase && !skip[prev])
            rc = bandwidth ? bw_pair(p, p->leader[prev], 0, NULL, buf, err) : ping_pair(p, p->leader[prev], 0, NULL, err);
    }
    return rc;
}

/* Each node's figure from its pairs: the better of the two (the one pair of a two-node ring). */
static void node_figures(const struct pf *p, const double *edge, double *node, int higher_better)
{
    int n = p->n_nodes;

    for (int i = 0; i < n; i++) {
        int prev = (i + n - 1) % n;
        double a = pair_exists(i, n) ? edge[i] : NAN, b = pair_exists(prev, n) ? edge[prev] : NAN;

        node[i] = isnan(a) ? b : isnan(b) ? a : higher_better ? fmax(a, b) : fmin(a, b);
    }
}

static double latency_threshold(const ct_preflight_options *o, double med)
{
    return fmax(o->latency_factor * med, med + o->latency_floor_ms);
}

/* One round of the ring: every pair's latency, then the bandwidth of the pairs whose latency is not
 * named already, into lat[] and bw[] (NAN: not measured), the same on every rank. */
#define CT_PREFLIGHT_MAX_NODES_STACK 64

static int network_round(struct pf *p, double *mine, double *skip, char *buf, double *lat, double *bw,
                         ct_error *err)
{
    int n = p->n_nodes, rc;
    double node[CT_PREFLIGHT_MAX_NODES_STACK], *nl = n <= CT_PREFLIGHT_MAX_NODES_STACK ? node : NULL, lthr;

    if (!nl && !(nl = calloc((size_t)n, sizeof(double))))
        return ct_error_set(err, CT_ENOMEM, "preflight", "out of memory");
    for (int i = 0; i < n; i++)
        mine[i] = 0, skip[i] = 0;
    if ((rc = ring_pairs(p, 0, skip, mine, buf, err)) || (rc = ct_strategy_reduce_sum(p->s, mine, n, err)))
        goto out;
    for (int i = 0; i < n; i++)
        lat[i] = pair_exists(i, n) ? mine[i] : NAN;
    node_figures(p, lat, nl, 0);
    lthr = latency_threshold(p->o, median(nl, n));
    for (int i = 0; i < n; i++) {
        skip[i] = !pair_exists(i, n) || lat[i] > lthr;
        mine[i] = 0;
    }
    if ((rc = ring_pairs(p, 1, skip, mine, buf, err)) || (rc = ct_strategy_reduce_sum(p->s, mine, n, err)))
        goto out;
    for (int i = 0; i < n; i++)
        bw[i] = skip[i] ? NAN : mine[i];
out:
    if (nl != node)
        free(nl);
    return rc;
}

/* Whether any node's latency or bandwidth is an outlier (defined below). */
static int network_named(const struct pf *p, int i);

/* The ring, and when it names a node, the ring once more, each pair keeping the better of its two
 * rounds: a node whose link or NIC is bad is slow in both, while a healthy node that other work on
 * its cores held back for a moment (seen: one pair of a loaded test machine at 4% of the median's
 * bandwidth) is not named for it. Every rank decides the same (the same reduced figures). */
static int check_network(struct pf *p, ct_error *err)
{
    int n = p->n_nodes, rc = 0, named = 0;
    double *mine = calloc((size_t)n, sizeof(double)), *skip = calloc((size_t)n, sizeof(double));
    double *lat = calloc((size_t)n, sizeof(double)), *bw = calloc((size_t)n, sizeof(double));
    char *buf = NULL;

    for (int i = 0; i < n; i++)
        p->edge_lat[i] = p->edge_bw[i] = p->node_lat[i] = p->node_bw[i] = NAN;
    if (!(p->o->checks & CT_PREFLIGHT_NETWORK) || n < 2)
        goto out;
    if (!mine || !skip || !lat || !bw || !(buf = malloc(p->o->bandwidth_bytes))) {
        rc = ct_error_set(err, CT_ENOMEM, "preflight", "out of memory");
        goto out;
    }
    memset(buf, 0x5a, p->o->bandwidth_bytes);
    if ((rc = network_round(p, mine, skip, buf, p->edge_lat, p->edge_bw, err)))
        goto out;
    node_figures(p, p->edge_lat, p->node_lat, 0);
    node_figures(p, p->edge_bw, p->node_bw, 1);
    for (int i = 0; i < n; i++)
        named |= network_named(p, i);
    if (!named)
        goto out;
    if ((rc = network_round(p, mine, skip, buf, lat, bw, err)))
        goto out;
    for (int i = 0; i < n; i++) {
        p->edge_lat[i] = isnan(lat[i]) ? p->edge_lat[i] : isnan(p->edge_lat[i]) ? lat[i] : fmin(lat[i], p->edge_lat[i]);
        p->edge_bw[i] = isnan(bw[i]) ? p->edge_bw[i] : isnan(p->edge_bw[i]) ? bw[i] : fmax(bw[i], p->edge_bw[i]);
    }
    node_figures(p, p->edge_lat, p->node_lat, 0);
    node_figures(p, p->edge_bw, p->node_bw, 1);
out:
    free(mine);
    free(skip);
    free(lat);
    free(bw);
    free(buf);
    return rc;
}

/* --- the verdict ---------------------------------------------------------------------------- */

/* Whether node i's latency or bandwidth is an outlier. */
static int network_named(const struct pf *p, int i)
{
    double lmed = median(p->node_lat, p->n_nodes), bmed = median(p->node_bw, p->n_nodes);

    return (isfinite(p->node_lat[i]) && p->node_lat[i] > latency_threshold(p->o, lmed)) ||
           (isfinite(p->node_bw[i]) && p->node_bw[i] < bmed / p->o->bandwidth_factor);
}

struct finding {
    int node, rank;          /* rank -1: the node's (network) */
    const char *check, *unit;
    double measured, med, threshold;
};

/* --- allreduce ------------------------------------------------------------------------------ */

static int check_allreduce(struct pf *p, ct_error *err)
{
    size_t n = p->o->allreduce_bytes / sizeof(double);
    double *v, want = (double)p->world * (p->world + 1) / 2, best = INFINITY;
    int rc = 0, wrong = 0;

    p->allreduce_s = NAN;
    if (!(p->o->checks & CT_PREFLIGHT_ALLREDUCE) || p->world < 2 || n == 0 || n > 1 << 28)
        return 0;
    /* Over a link already named, the allreduce would measure that link again, only slower (every
     * rank knows the same figures: all skip alike). */
    for (int i = 0; i < p->n_nodes; i++)
        if (network_named(p, i))
            return p->allreduce_skipped = 1, 0;
    if (!(v = malloc(n * sizeof(double))))
        return ct_error_set(err, CT_ENOMEM, "preflight", "out of memory");
    for (int i = 0; i <= p->o->allreduce_reps && !rc; i++) { /* the first: not timed */
        double t0;

        for (size_t j = 0; j < n; j++)
            v[j] = p->rank + 1;
        t0 = ct_time_now();
        if ((rc = ct_strategy_reduce_sum(p->s, v, (int)n, err)))
            break;
        if (i && ct_time_now() - t0 < best)
            best = ct_time_now() - t0;
        for (size_t j = 0; j < n; j += 4093)
            wrong |= v[j] != want;
        wrong |= v[n - 1] != want;
    }
    free(v);
    p->allreduce_s = best;
    if (!rc) {
        double w = wrong, *all = malloc(sizeof(double) * (size_t)p->world);

        if (!all)
            return ct_error_set(err, CT_ENOMEM, "preflight", "out of memory");
        rc = gather(p, &w, 1, all, err);
        for (int r = 0; !rc && r < p->world; r++)
            p->bad[r] += all[r] * 2; /* 2: the allreduce's sum was wrong there */
        free(all);
    }
    return rc;
}

#define MAX_FINDINGS 256

static int judge(const struct pf *p, struct finding *f, int *node_named)
{
    const ct_preflight_options *o = p->o;
    double gmed = median(p->gflops, p->world), lmed = median(p->node_lat, p->n_nodes),
           bmed = median(p->node_bw, p->n_nodes);
    double lthr = latency_threshold(o, lmed);
    int k = 0;

    for (int r = 0; r < p->world && k < MAX_FINDINGS; r++) {
        if (p->bad[r] > 0) {
            f[k++] = (struct finding){ p->node_of[r], r, (int)p->bad[r] & 2 ? "allreduce" : "compute", "",
                                       NAN, NAN, NAN };
            node_named[p->node_of[r]] = 1;
        } else if (isfinite(p->gflops[r]) && p->gflops[r] < gmed / o->compute_factor) {
            f[k++] = (struct finding){ p->node_of[r], r, "compute", "GFLOP/s", p->gflops[r], gmed,
                                       gmed / o->compute_factor };
            node_named[p->node_of[r]] = 1;
        }
    }
    for (int i = 0; i < p->n_nodes && k < MAX_FINDINGS - 1; i++) {
        if (isfinite(p->node_lat[i]) && p->node_lat[i] > lthr) {
            f[k++] = (struct finding){ i, p->leader[i], "latency", "ms", p->node_lat[i], lmed, lthr };
            node_named[i] = 1;
        }
        if (isfinite(p->node_bw[i]) && p->node_bw[i] < bmed / o->bandwidth_factor) {
            f[k++] = (struct finding){ i, p->leader[i], "bandwidth", "MB/s", p->node_bw[i], bmed,
                                       bmed / o->bandwidth_factor };
            node_named[i] = 1;
        }
    }
    return k;
}

/* --- the report (rank 0) -------------------------------------------------------------------- */

static const char *fig(double v, const char *fmt, char *buf, size_t size)
{
    if (!isfinite(v))
        return "-";
    snprintf(buf, size, fmt, v);
    return buf;
}

static void print_table(const struct pf *p, const struct finding *f, int k, const int *node_named, FILE *out)
{
    const ct_preflight_options *o = p->o;
    char a[32], b[32], c[32];
    int named = 0;

    fprintf(out, "ctrain: preflight: %d node%s, %d rank%s\n", p->n_nodes, p->n_nodes == 1 ? "" : "s", p->world,
            p->world == 1 ? "" : "s");
    fprintf(out, "%-16s %5s %14s %12s %16s  %s\n", "node", "rank", "gemm GFLOP/s", "latency ms", "bandwidth MB/s",
            "verdict");
    for (int r = 0; r < p->world; r++) {
        int node = p->node_of[r], lead = p->leader[node] == r;
        const char *verdict = "ok";

        for (int i = 0; i < k; i++)
            if (f[i].rank == r)
                verdict = f[i].check;
        fprintf(out, "%-16s %5d %14s %12s %16s  %s%s\n", p->host[r], r, fig(p->gflops[r], "%.2f", a, sizeof(a)),
                lead ? fig(p->node_lat[node], "%.3f", b, sizeof(b)) : "", lead ? fig(p->node_bw[node], "%.0f", c, sizeof(c)) : "",
                verdict, strcmp(verdict, "ok") ? ": OUTLIER" : "");
    }
    if (p->allreduce_skipped)
        fprintf(out, "ctrain: preflight: allreduce not run: a node's link is named already\n");
    else if (isfinite(p->allreduce_s))
        fprintf(out, "ctrain: preflight: allreduce of %zu bytes over %d ranks: %.3f ms (best of %d), %.0f MB/s\n",
                o->allreduce_bytes, p->world, p->allreduce_s * 1e3, o->allreduce_reps,
                (double)o->allreduce_bytes / p->allreduce_s / 1e6);
    if (p->n_nodes == 2 && (o->checks & CT_PREFLIGHT_NETWORK))
        fprintf(out, "ctrain: preflight: note: two nodes share their one pair: a slow link cannot be told to one of "
                     "them and is not named\n");
    for (int i = 0; i < k; i++) {
        if (isfinite(f[i].measured))
            fprintf(out, "ctrain: preflight: outlier: node %s rank %d: %s %.3f %s, median %.3f, threshold %.3f\n",
                    p->host[p->leader[f[i].node]], f[i].rank, f[i].check, f[i].measured, f[i].unit, f[i].med,
                    f[i].threshold);
        else
            fprintf(out, "ctrain: preflight: failed: node %s rank %d: %s\n", p->host[p->leader[f[i].node]], f[i].rank,
                    !strcmp(f[i].check, "allreduce") ? "the allreduce's sum was wrong" : "the GEMM's result was not finite");
    }
    for (int i = 0; i < p->n_nodes; i++)
        named += node_named[i];
    fprintf(out, "ctrain: preflight: %s (%.2f s)\n", named ? "nodes named (exit status 3)" : "every node passed",
            p->wall_s);
    fflush(out);
}

static void add_num(cJSON *o, const char *key, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

static int write_json(const struct pf *p, const struct finding *f, int k, const int *node_named, ct_error *err)
{
    const ct_preflight_options *o = p->o;
    cJSON *root = cJSON_CreateObject(), *nodes, *ranks, *out, *thr, *med, *ar;
    char path[1100], *text;
    int rc, named = 0;

    if (!root)
        return ct_error_set(err, CT_ENOMEM, "preflight", "out of memory");
    for (int i = 0; i < p->n_nodes; i++)
        named += node_named[i];
    cJSON_AddBoolToObject(root, "ok", !named);
    cJSON_AddNumberToObject(root, "nodes_named", named);
    cJSON_AddNumberToObject(root, "num_nodes", p->n_nodes);
    cJSON_AddNumberToObject(root, "world_size", p->world);
    cJSON_AddNumberToObject(root, "wall_seconds", p->wall_s);
    thr = cJSON_AddObjectToObject(root, "thresholds");
    cJSON_AddNumberToObject(thr, "compute_factor", o->compute_factor);
    cJSON_AddNumberToObject(thr, "latency_factor", o->latency_factor);
    cJSON_AddNumberToObject(thr, "latency_floor_ms", o->latency_floor_ms);
    cJSON_AddNumberToObject(thr, "bandwidth_factor", o->bandwidth_factor);
    med = cJSON_AddObjectToObject(root, "medians");
    add_num(med, "gemm_gflops", median(p->gflops, p->world));
    add_num(med, "latency_ms", median(p->node_lat, p->n_nodes));
    add_num(med, "bandwidth_mbps", median(p->node_bw, p->n_nodes));
    nodes = cJSON_AddArrayToObject(root, "nodes");
    for (int i = 0; i < p->n_nodes; i++) {
        cJSON *n = cJSON_CreateObject();

        cJSON_AddStringToObject(n, "node", p->host[p->leader[i]]);
        cJSON_AddNumberToObject(n, "first_rank", p->leader[i]);
        add_num(n, "latency_ms", p->node_lat[i]);
        add_num(n, "bandwidth_mbps", p->node_bw[i]);
        add_num(n, "pair_next_latency_ms", p->edge_lat[i]);
        add_num(n, "pair_next_bandwidth_mbps", p->edge_bw[i]);
        cJSON_AddBoolToObject(n, "named", node_named[i]);
        cJSON_AddItemToArray(nodes, n);
    }
    ranks = cJSON_AddArrayToObject(root, "ranks");
    for (int r = 0; r < p->world; r++) {
        cJSON *n = cJSON_CreateObject();

        cJSON_AddNumberToObject(n, "rank", r);
        cJSON_AddStringToObject(n, "node", p->host[r]);
        add_num(n, "gemm_gflops", p->gflops[r]);
        cJSON_AddItemToArray(ranks, n);
    }
    ar = cJSON_AddObjectToObject(root, "allreduce");
    cJSON_AddNumberToObject(ar, "bytes", (double)o->allreduce_bytes);
    add_num(ar, "seconds", p->allreduce_s);
    cJSON_AddBoolToObject(ar, "skipped", p->allreduce_skipped);
    {
        cJSON *t = cJSON_AddObjectToObject(root, "check_seconds");

        cJSON_AddNumberToObject(t, "compute", p->check_s[0]);
        cJSON_AddNumberToObject(t, "network", p->check_s[1]);
        cJSON_AddNumberToObject(t, "allreduce", p->check_s[2]);
    }
    out = cJSON_AddArrayToObject(root, "outliers");
    for (int i = 0; i < k; i++) {
        cJSON *n = cJSON_CreateObject();

        cJSON_AddStringToObject(n, "node", p->host[p->leader[f[i].node]]);
        cJSON_AddNumberToObject(n, "rank", f[i].rank);
        cJSON_AddStringToObject(n, "check", f[i].check);
        cJSON_AddStringToObject(n, "kind", isfinite(f[i].measured) ? "outlier" : "failed");
        add_num(n, "measured", f[i].measured);
        add_num(n, "median", f[i].med);
        add_num(n, "threshold", f[i].threshold);
        cJSON_AddStringToObject(n, "unit", f[i].unit);
        cJSON_AddItemToArray(out, n);
    }
    text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return ct_error_set(err, CT_ENOMEM, "preflight", "out of memory");
    snprintf(path, sizeof(path), "%s/preflight.json", o->root_dir);
    rc = ct_fs_write_atomic(path, text, strlen(text), err);
    free(text);
    return rc;
}

/* --- the whole check ------------------------------------------------------------------------ */

static int pf_alloc(struct pf *p, ct_error *err)
{
    int w = p->world;

    p->host = calloc((size_t)w, HOST_LEN);
    p->node_of = calloc((size_t)w, sizeof(int));
    p->leader = calloc((size_t)w, sizeof(int));
    p->gflops = calloc((size_t)w, sizeof(double));
    p->bad = calloc((size_t)w, sizeof(double));
    /* Nodes are at most ranks. */
    p->edge_lat = calloc((size_t)w, sizeof(double));
    p->edge_bw = calloc((size_t)w, sizeof(double));
    p->node_lat = calloc((size_t)w, sizeof(double));
    p->node_bw = calloc((size_t)w, sizeof(double));
    if (!p->host || !p->node_of || !p->leader || !p->gflops || !p->bad || !p->edge_lat || !p->edge_bw || !p->node_lat ||
        !p->node_bw)
        return ct_error_set(err, CT_ENOMEM, "preflight", "out of memory");
    return 0;
}

static void pf_free(struct pf *p)
{
    free(p->host);
    free(p->node_of);
    free(p->leader);
    free(p->gflops);
    free(p->bad);
    free(p->edge_lat);
    free(p->edge_bw);
    free(p->node_lat);
    free(p->node_bw);
}

/* Rank 0's report; its status reaches every rank, so all exit alike. */
static int report(struct pf *p, int *named, ct_error *err)
{
    struct finding *f = calloc(MAX_FINDINGS, sizeof(*f));
    int *node_named = calloc((size_t)p->n_nodes, sizeof(int)), k, status = 0, rc = 0;
    ct_error local;

    ct_error_clear(&local);
    if (!f || !node_named) {
        free(f);
        free(node_named);
        return ct_error_set(err, CT_ENOMEM, "preflight", "out of memory");
    }
    k = judge(p, f, node_named);
    *named = 0;
    for (int i = 0; i < p->n_nodes; i++)
        *named += node_named[i];
    if (p->rank == 0) {
        if (p->o->out)
            print_table(p, f, k, node_named, p->o->out);
        if (p->o->root_dir && p->o->root_dir[0])
            status = write_json(p, f, k, node_named, &local);
    }
    if (p->world > 1)
        rc = ct_strategy_broadcast(p->s, &status, sizeof(status), 0, err);
    if (!rc && status) {
        if (p->rank == 0)
            *err = local;
        else
            ct_error_set(err, status, "preflight-report", "rank 0 could not write %s/preflight.json",
                         p->o->root_dir);
        rc = status;
    }
    free(f);
    free(node_named);
    return rc;
}

static int timed(struct pf *p, int i, int (*check)(struct pf *, ct_error *), ct_error *err)
{
    double t0 = ct_time_now();
    int rc = check(p, err);

    p->check_s[i] = ct_time_now() - t0;
    return rc;
}

int ct_preflight_run(ct_strategy *s, const ct_preflight_options *o, int *named, ct_error *err)
{
    struct pf p;
    double t0 = ct_time_now();
    int rc;

    memset(&p, 0, sizeof(p));
    p.o = o;
    p.s = s;
    p.rank = ct_strategy_global_rank(s);
    p.world = ct_strategy_world_size(s);
    *named = 0;
    if (!(rc = pf_alloc(&p, err)) && !(rc = gather_hosts(&p, err)) && !(rc = timed(&p, 0, check_compute, err)) &&
        !(rc = timed(&p, 1, check_network, err)) && !(rc = timed(&p, 2, check_allreduce, err))) {
        p.wall_s = ct_time_now() - t0;
        rc = report(&p, named, err);
    }
    pf_free(&p);
    if (rc)
        ct_error_prefix(err, "preflight: ");
    return rc;
}
