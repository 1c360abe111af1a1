/* SPDX-License-Identifier: BSD-3-Clause */
/* Reading the hang records (DIR/hang/rank-R.json, engine/health/fit/hang.c) back: which ranks are
 * behind, where and since when.
 *
 * A rank's position is (step, collective, phase): the step first; within a step the collective
 * number (the same count on every rank), a rank still waiting in collective n being behind one
 * that has completed it; then the phase in the order a step runs them. A rank without a record is
 * stopped, dead or could not write: its live record (DIR/hang/rank-R.live, the mapping it kept its
 * record in) says where it was, and the others' records name the collective they wait in and the
 * ranks the timeout found missing there.
 *
 * Records of an earlier run in the same DIR are left out: the live files say which run is the
 * latest (the newest start, and its world size), and a rank's rank-R.json counts only when it is
 * that run's (the live file's pid and host, or written after the run began).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ctrain/util.h"
#include "engine/util/fsutil.h"
#include "engine/health/fit/hang_live.h"
#include "engine/health/fit/diagnose.h"
#include "engine/health/fit/phase.h"

#define MAX_RANKS CT_DIAG_MAX_RANKS
/* A rank is behind only when the furthest one has waited for it this long in a collective: the
 * records of a healthy run are taken moments apart (a dump signal reaches the ranks one after the
 * other), so one rank may be a phase ahead of another without anything being wrong. Longer than
 * any skew between the dumps, far shorter than a hang anyone would diagnose. */
#define BEHIND_AFTER_S 1.0
/* Live files begun this long before the newest one are an earlier run's: the ranks of one run begin
 * theirs within moments of each other (after the rendezvous that starts every rank). */
#define STALE_S 300.0
/* A rank-R.json written this long before the latest run began is an earlier run's (clock skew
 * between nodes is far smaller; a restart far longer). */
#define SKEW_S 5.0


/* The live files of a directory: the latest run's, by rank. */
struct lives {
    struct ct_hang_live *m;                        /* [MAX_RANKS] */
    unsigned char *current;                        /* [MAX_RANKS]: m[r] is the latest run's */
    int world;                                     /* the latest run's world size; 0: no live file */
    double started;                                /* its earliest start */
};

/* The most a record can be: its few fields, and up to CT_TRACE_MAX_MISSING hosts of 64 bytes. */
#define RECORD_MAX (1 << 20)

/* A string of a record made safe for the terminal, in place (ct_str_escape): the records are
 * files anyone who can write DIR/hang may have made, and their host and collective names are
 * printed as they are. */
static void escape_field(char *s, size_t size)
{
    char buf[1024];

    ct_str_escape(buf, size < sizeof(buf) ? size : sizeof(buf), s);
    ct_str_copy(s, size, buf);
}

/* Every string field of r escaped. */
static void escape_rec(struct ct_diag_rank *r)
{
    escape_field(r->host, sizeof(r->host));
    escape_field(r->what, sizeof(r->what));
    for (int i = 0; i < r->n_missing; i++)
        escape_field(r->missing_host[i], sizeof(r->missing_host[i]));
}

/* A number of the record within [lo, hi] (so that it converts to its field's type: step 1e300 as
 * an int64_t is undefined); *ok = 0 and 0 when it is missing or out of range. */
static double num(const cJSON *o, const char *key, double lo, double hi, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi)) {
        *ok = 0;
        return 0;
    }
    return v->valuedouble;
}

#define ANY_INT 9007199254740992.0   /* 2^53: every whole number up to it is exact in a double */
#define ANY_TIME 1e12                /* seconds, wall or monotonic: finite and far beyond any clock */

static const char *str(const cJSON *o, const char *key, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsString(v)) {
        *ok = 0;
        return "";
    }
    return v->valuestring;
}

/* One parsed record into *r; its world into *world. 0, or -1 when a field is missing. */
static int parse_record(const cJSON *o, struct ct_diag_rank *r, int *rank, int *world)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "collective"), *m, *h;
    int ok = 1;

    *rank = (int)num(o, "rank", 0, MAX_RANKS - 1, &ok);
    *world = (int)num(o, "world", 1, MAX_RANKS, &ok);
    ct_str_copy(r->host, sizeof(r->host), str(o, "host", &ok));
    r->pid = (long)num(o, "pid", 0, 2147483647.0, &ok);
    r->step = (int64_t)num(o, "step", 0, ANY_INT, &ok);
    r->phase = ct_hang_phase_parse(str(o, "phase", &ok));
    r->bucket = (int)num(o, "bucket", -1, 2147483647.0, &ok);
    r->entered_wall = num(o, "entered_wall", -ANY_TIME, ANY_TIME, &ok);
    r->now_wall = num(o, "now_wall", -ANY_TIME, ANY_TIME, &ok);
    if (!cJSON_IsObject(c))
        return -1;
    r->seq = (long)num(c, "seq", 0, ANY_INT, &ok);
    ct_str_copy(r->what, sizeof(r->what), str(c, "what", &ok));
    r->waiting = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "waiting"));
    r->waited = num(c, "waited_s", -ANY_TIME, ANY_TIME, &ok);
    r->timed_out = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "timed_out"));
    m = cJSON_GetObjectItemCaseSensitive(c, "missing");
    r->n_missing = 0;
    h = cJSON_GetObjectItemCaseSensitive(c, "missing_hosts");
    h = cJSON_IsArray(h) ? h->child : NULL;
    for (const cJSON *e = cJSON_IsArray(m) ? m->child : NULL; e && r->n_missing < CT_TRACE_MAX_MISSING; e = e->next) {
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble < MAX_RANKS))
            continue;
        r->missing_host[r->n_missing][0] = '\0';
        if (cJSON_IsString(h))
            ct_str_copy(r->missing_host[r->n_missing], sizeof(r->missing_host[0]), h->valuestring);
        h = h ? h->next : NULL;
        r->missing[r->n_missing++] = e->valueint;
    }
    if (!ok || r->phase < 0 || *rank < 0 || *world < 1 || *world > MAX_RANKS || *rank >= *world)
        return -1;
    escape_rec(r);
    r->present = 1;
    return 0;
}

/* One live file into *m: 0, or -1 when it is not one this build wrote (or not yet begun). Read as
 * every input is (engine/util/fsutil.h): a FIFO or a device planted in its place is not waited on. */
static int live_read(const char *path, int rank, struct ct_hang_live *m)
{
    char *buf;
    size_t n;

    if (ct_fs_read_input(path, "live hang record", sizeof(*m), &buf, &n, NULL))
        return -1;
    if (n == sizeof(*m))
        memcpy(m, buf, sizeof(*m));
    free(buf);
    if (n != sizeof(*m) || memcmp(m->magic, CT_HANG_LIVE_MAGIC, sizeof(m->magic)) ||
        m->size != sizeof(*m) || m->rank != rank || m->world < 1 || m->world > MAX_RANKS || m->rank >= m->world ||
        m->rec.phase < 0 || m->rec.phase >= CT_PHASE_N || !isfinite(m->started_wall) || !isfinite(m->mono_to_wall))
        return -1;
    m->host[sizeof(m->host) - 1] = '\0';
    for (int i = 0; i < CT_TRACE_MAX_MISSING; i++)
        m->rec.coll.missing_host[i][sizeof(m->rec.coll.missing_host[i]) - 1] = '\0';
    return 0;
}

/* Every rank-R.live of hang/ (R < MAX_RANKS); which of them are the latest run's. */
static void lives_load(const char *hang, struct lives *L)
{
    DIR *d = opendir(hang);
    struct dirent *e;
    unsigned char *valid = calloc(MAX_RANKS, 1);
    double newest = -1;

    L->world = 0;
    if (!d || !valid) {
        if (d)
            closedir(d);
        free(valid);
        return;
    }
    while ((e = readdir(d))) {
        char path[1400], tail[8];
        int r;

        if (sscanf(e->d_name, "rank-%d.%7s", &r, tail) != 2 || strcmp(tail, "live") || r < 0 || r >= MAX_RANKS)
            continue;
        snprintf(path, sizeof(path), "%s/%s", hang, e->d_name);
        if (live_read(path, r, &L->m[r]))
            continue;
        valid[r] = 1;
        if (L->m[r].started_wall > newest) {
            newest = L->m[r].started_wall;
            L->world = L->m[r].world;
        }
    }
    closedir(d);
    L->started = newest;
    for (int r = 0; r < MAX_RANKS; r++) {
        L->current[r] = valid[r] && L->m[r].world == L->world && L->m[r].started_wall >= newest - STALE_S;
        if (L->current[r] && L->m[r].started_wall < L->started)
            L->started = L->m[r].started_wall;
    }
    free(valid);
}

/* A rank's record from its live file: where it was when last it stored, read now. */
static void from_live(const struct ct_hang_live *m, double now, struct ct_diag_rank *r)
{
    const ct_collective_trace *c = &m->rec.coll;

    memset(r, 0, sizeof(*r));
    r->present = r->from_live = 1;
    ct_str_copy(r->host, sizeof(r->host), m->host);
    r->pid = (long)m->pid;
    r->step = m->rec.step;
    r->phase = m->rec.phase;
    r->bucket = c->bucket;
    r->seq = c->seq;
    r->waiting = c->waiting;
    r->waited = c->waiting ? now - (c->wait_since + m->mono_to_wall) : 0;
    r->timed_out = c->timed_out;
    r->what[0] = '\0';                             /* a pointer into the writer: not readable here */
    r->n_missing = c->n_missing < 0 ? 0 : c->n_missing < CT_TRACE_MAX_MISSING ? c->n_missing : CT_TRACE_MAX_MISSING;
    for (int i = 0; i < r->n_missing; i++) {
        r->missing[i] = c->missing[i];
        ct_str_copy(r->missing_host[i], sizeof(r->missing_host[i]), c->missing_host[i]);
    }
    r->entered_wall = m->rec.entered + m->mono_to_wall;
    r->now_wall = now;
    escape_rec(r);
}

/* Whether rank's rank-R.json (r, of a run of w ranks) is an earlier run's than the live files'. */
static int stale(const struct lives *L, int rank, int w, const struct ct_diag_rank *r)
{
    if (!L->world)
        return 0;
    if (w != L->world || r->now_wall < L->started - SKEW_S)
        return 1;
    return L->current[rank] && (r->pid != (long)L->m[rank].pid || strcmp(r->host, L->m[rank].host));
}

/* hang/rank-R.json (name; R is want) into recs[R]. */
static int load_one(const char *hang, const char *name, int want, const struct lives *L, struct ct_diag_rank *recs,
                    int *world, int *n_stale, ct_error *err)
{
    char path[1400], *text;
    struct ct_diag_rank r;
    cJSON *o;
    int rank, w, rc;

    snprintf(path, sizeof(path), "%s/%s", hang, name);
    if (ct_fs_read_input(path, "hang record", RECORD_MAX, &text, NULL, err)) {
        /* Bad input, as a record that does not parse: a directory, a FIFO, a file too large. */
        if (err->code == CT_EFORMAT)
            err->code = CT_EINVAL;
        return ct_error_prefix(err, "diagnose: ");
    }
    memset(&r, 0, sizeof(r));
    o = cJSON_Parse(text);
    free(text);
    rc = o ? parse_record(o, &r, &rank, &w) : -1;
    cJSON_Delete(o);
    if (rc) {
        ct_error_set(err, CT_EINVAL, "diagnose-bad-record", "diagnose: %s is not a hang record ctrain wrote", path);
        return ct_error_hint(err, "remove it (the ranks write their records again on the dump signal or a "
                                  "collective timeout)");
    }
    /* The file's name says whose it is (each rank writes its own name): a record that names another
     * rank inside is not taken for that rank's. */
    if (rank != want) {
        ct_error_set(err, CT_EINVAL, "diagnose-bad-record", "diagnose: %s says it is rank %d's record, but rank %d "
                     "writes that file", path, rank, want);
        return ct_error_hint(err, "remove it (the ranks write their records again on the dump signal or a "
                                  "collective timeout)");
    }
    if (stale(L, rank, w, &r)) {
        ++*n_stale;
        return 0;
    }
    if (*world && w != *world) {
        ct_error_set(err, CT_EINVAL, "diagnose-mixed", "diagnose: %s is from a run of %d ranks, the others of %d",
                     path, w, *world);
        return ct_error_hint(err, "remove the records of the older run from %s", hang);
    }
    *world = w;
    recs[rank] = r;
    return 0;
}

static int is_dir(const char *path)
{
    struct stat sb;

    return !stat(path, &sb) && S_ISDIR(sb.st_mode);
}

/* Every DIR/hang/rank-R.json of the latest run into recs[0 .. *world), and the live record of each
 * of its ranks that wrote none. */
static int load_all(const char *dir, struct ct_diag_rank *recs, int *world, ct_error *err)
{
    char hang[1200];
    struct lives L = { calloc(MAX_RANKS, sizeof(*L.m)), calloc(MAX_RANKS, 1), 0, 0 };
    int rc = 0, any = 0, n_stale = 0, n_live = 0;
    double now = ct_wall_now();

    if (!L.m || !L.current) {
        free(L.m);
        free(L.current);
        return ct_error_set(err, CT_ENOMEM, NULL, "diagnose: out of memory");
    }
    /* DIR (a fit's --default-root-dir) holds hang/; a folder of records itself (hang.restart-N,
     * where ctrain supervise moves a failed step's) is read as it is. */
    snprintf(hang, sizeof(hang), "%s/hang", dir);
    if (!is_dir(hang))
        ct_str_copy(hang, sizeof(hang), dir);
    lives_load(hang, &L);
    *world = 0;
    for (int r = 0; r < MAX_RANKS && (!*world || r < *world) && (!L.world || r < L.world); r++) {
        char name[64], path[1300];
        struct stat sb;

        snprintf(name, sizeof(name), "rank-%d.json", r);
        snprintf(path, sizeof(path), "%s/%s", hang, name);
        if (stat(path, &sb))
            continue;
        if ((rc = load_one(hang, name, r, &L, recs, world, &n_stale, err)))
            goto out;
        any |= recs[r].present;
    }
    if (L.world)
        *world = L.world;
    for (int r = 0; r < *world; r++)
        if (!recs[r].present && L.current[r]) {
            from_live(&L.m[r], now, &recs[r]);
            n_live++;
        }
    if (!any && !n_live) {
        ct_error_set(err, CT_EINVAL, "diagnose-no-records", "diagnose: no hang records (rank-R.json) in %s", hang);
        rc = ct_error_hint(err, "give the fit's --default-root-dir; the ranks write their records on the dump "
                                "signal (scancel --signal=USR2 JOB, kill -USR2 PID) or after a "
                                "--collective-timeout");
        goto out;
    }
    if (n_stale)
        fprintf(stderr, "ctrain: diagnose: %d record%s in %s from an earlier run left out\n", n_stale,
                n_stale == 1 ? "" : "s", hang);
out:
    free(L.m);
    free(L.current);
    return rc;
}

/* Position order: step, then collective (waiting in n < done with n), then phase. */
static int cmp_pos(const struct ct_diag_rank *a, const struct ct_diag_rank *b)
{
    long sa = a->seq * 2 + !a->waiting, sb = b->seq * 2 + !b->waiting;

    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (sa != sb)
        return sa < sb ? -1 : 1;
    return a->phase < b->phase ? -1 : a->phase > b->phase;
}

static void when(double wall, char *buf, size_t size)
{
    time_t t = (time_t)wall;
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* "step 12, allreduce (waiting in collective #57: the gradient allreduce) since ... (3.2 s)" */
static void position(const struct ct_diag_rank *r, char *buf, size_t size)
{
    char at[32], detail[200] = "";

    when(r->entered_wall, at, sizeof(at));
    if (r->waiting)
        snprintf(detail, sizeof(detail), " (waiting %.1f s in collective #%ld%s%s)", r->waited, r->seq,
                 r->what[0] ? ": " : "", r->what);
    else if (r->phase == CT_PHASE_BACKWARD && r->bucket >= 0)
        snprintf(detail, sizeof(detail), " (gradient bucket %d started; collective #%ld done)", r->bucket, r->seq);
    else
        snprintf(detail, sizeof(detail), " (collective #%ld done)", r->seq);
    snprintf(buf, size, "step %lld, phase %s%s, since %s (%.1f s before %s)", (long long)r->step,
             ct_hang_phase_name(r->phase), detail, at, r->now_wall - r->entered_wall,
             r->from_live ? "this reading of its live record" : "its record was written");
}

/* The records that name rank r as missing: "ranks 0 and 1 waiting in collective #n (what) at step s". */
static void missing_from_others(const struct ct_diag_rank *recs, int world, int r, FILE *out)
{
    for (int o = 0; o < world; o++) {
        const struct ct_diag_rank *x = &recs[o];

        if (!x->present || !x->timed_out)
            continue;
        for (int i = 0; i < x->n_missing; i++)
            if (x->missing[i] == r) {
                fprintf(out, "ctrain:   rank %d (%s) found it missing in collective #%ld (%s) at step %lld, phase "
                             "%s: it had not reached that collective\n",
                        o, x->host, x->seq, x->what, (long long)x->step, ct_hang_phase_name(x->phase));
                return;
            }
    }
}

/* The node of rank r as the others' records name it when they found it missing; NULL: none does. */
static const char *missing_node(const struct ct_diag_rank *recs, int world, int r)
{
    for (int o = 0; o < world; o++)
        for (int i = 0; recs[o].present && i < recs[o].n_missing; i++)
            if (recs[o].missing[i] == r && recs[o].missing_host[i][0])
                return recs[o].missing_host[i];
    return NULL;
}

/* Whether some record found rank r missing after a collective timeout. */
static int found_missing(const struct ct_diag_rank *recs, int world, int r)
{
    for (int o = 0; o < world; o++)
        for (int i = 0; recs[o].present && recs[o].timed_out && i < recs[o].n_missing; i++)
            if (recs[o].missing[i] == r)
                return 1;
    return 0;
}

/* Which ranks are behind the furthest (d->lead): each one's behind flag, and their count. */
static void mark_behind(ct_diagnosis *d)
{
    const struct ct_diag_rank *recs = d->ranks, *lead = &recs[d->lead];
    double newest = 0;
    int lead_stuck = lead->waiting && lead->waited >= BEHIND_AFTER_S;

    for (int r = 0; r < d->world; r++)
        if (recs[r].present && recs[r].now_wall > newest)
            newest = recs[r].now_wall;
    d->n_behind = 0;
    for (int r = 0; r < d->world; r++) {
        struct ct_diag_rank *x = &d->ranks[r];

        /* A rank the others' timeout found missing is behind wherever its live record has it (it
         * may have entered the same collective and then stopped: it never answered). */
        x->behind = !x->present || (x->from_live && found_missing(recs, d->world, r)) ||
                    (cmp_pos(x, lead) < 0 && (lead_stuck || newest - x->now_wall > BEHIND_AFTER_S));
        x->stale_s = x->present && !x->from_live ? newest - x->now_wall : 0;
        d->n_behind += x->behind;
    }
}

static void print_rank(const ct_diagnosis *d, int r, FILE *out)
{
    const struct ct_diag_rank *recs = d->ranks, *x = &recs[r];
    char pos[512];

    if (!x->present) {
        const char *node = missing_node(recs, d->world, r);

        if (node)
            fprintf(out, "ctrain: rank %d (host %s) is behind: no record: the process is stopped, dead or could "
                         "not write\n", r, node);
        else
            fprintf(out, "ctrain: rank %d is behind: no record: the process is stopped, dead or could not "
                         "write\n", r);
        missing_from_others(recs, d->world, r, out);
        return;
    }
    position(x, pos, sizeof(pos));
    fprintf(out, "ctrain: rank %d (host %s, pid %ld) is behind: %s\n", r, x->host, x->pid, pos);
    if (x->from_live)
        fprintf(out, "ctrain:   it wrote no record (stopped, dead or could not write): this is its live record "
                     "(rank-%d.live), its last stores\n", r);
    else if (x->stale_s > 1.0)
        fprintf(out, "ctrain:   its record is %.0f s older than the newest: it wrote nothing since (stopped, "
                     "dead or hung in a way that also holds its dump thread)\n", x->stale_s);
    missing_from_others(recs, d->world, r, out);
}

void ct_diagnosis_print(const ct_diagnosis *d, FILE *out)
{
    const struct ct_diag_rank *lead = &d->ranks[d->lead];
    char pos[512];

    for (int r = 0; r < d->world; r++)
        if (d->ranks[r].behind)
            print_rank(d, r, out);
    position(lead, pos, sizeof(pos));
    if (d->n_behind)
        fprintf(out, "ctrain: %d of %d ranks behind; the furthest, rank %d (host %s): %s\n", d->n_behind, d->world,
                d->lead, lead->host, pos);
    else
        fprintf(out, "ctrain: all %d ranks are at the same point (none waits for another): %s\n", d->world, pos);
}

const char *ct_diagnosis_node(const ct_diagnosis *d, int rank)
{
    if (rank < 0 || rank >= d->world)
        return NULL;
    if (d->ranks[rank].present && d->ranks[rank].host[0])
        return d->ranks[rank].host;
    return missing_node(d->ranks, d->world, rank);
}

void ct_diagnosis_free(ct_diagnosis *d)
{
    free(d->ranks);
    d->ranks = NULL;
    d->world = 0;
}

int ct_diagnose(const char *dir, ct_diagnosis *d, ct_error *err)
{
    struct stat sb;
    int rc;

    memset(d, 0, sizeof(*d));
    if (!(d->ranks = calloc(MAX_RANKS, sizeof(*d->ranks))))
        return ct_error_set(err, CT_ENOMEM, NULL, "diagnose: out of memory");
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        ct_diagnosis_free(d);
        ct_error_set(err, CT_EINVAL, "diagnose-dir", "diagnose: %s is not a directory", dir);
        return ct_error_hint(err, "give the fit's --default-root-dir (its hang/ folder holds the records)");
    }
    if ((rc = load_all(dir, d->ranks, &d->world, err))) {
        ct_diagnosis_free(d);
        return rc;
    }
    d->lead = -1;
    for (int r = 0; r < d->world; r++)
        if (d->ranks[r].present && (d->lead < 0 || cmp_pos(&d->ranks[r], &d->ranks[d->lead]) > 0))
            d->lead = r;
    mark_behind(d);
    return 0;
}

int ct_hang_diagnose(const char *dir, FILE *out, ct_error *err)
{
    ct_diagnosis d;
    int rc = ct_diagnose(dir, &d, err);

    if (rc)
        return rc;
    ct_diagnosis_print(&d, out);
    rc = d.n_behind ? 1 : 0;
    ct_diagnosis_free(&d);
    return rc;
}
