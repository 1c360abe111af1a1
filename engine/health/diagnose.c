/* SPDX-License-Identifier: BSD-3-Clause */
/* Reading the hang records (DIR/hang/rank-R.json, engine/loops/hang.c) back: which ranks are
 * behind, where and since when.
 *
 * A rank's position is (step, collective, phase): the step first; within a step the collective
 * number (the same count on every rank), a rank still waiting in collective n being behind one
 * that has completed it; then the phase in the order a step runs them. A rank without a record is
 * stopped, dead or could not write: it is named from the others' records (the collective they
 * wait in, and the ranks the timeout found missing there).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "ctrain/util.h"
#include "engine/loops/loops.h"

#define MAX_RANKS 4096
/* A rank is behind only when the furthest one has waited for it this long in a collective: the
 * records of a healthy run are taken moments apart (a dump signal reaches the ranks one after the
 * other), so one rank may be a phase ahead of another without anything being wrong. Longer than
 * any skew between the dumps, far shorter than a hang anyone would diagnose. */
#define BEHIND_AFTER_S 1.0

struct rank_rec {
    int present;
    char host[256];
    long pid;
    int64_t step;
    int phase;
    int bucket;
    long seq;
    int waiting, timed_out;
    double waited;
    char what[96];
    int n_missing;
    int missing[CT_TRACE_MAX_MISSING];
    char missing_host[CT_TRACE_MAX_MISSING][64];   /* "": not known (or a record from before they were kept) */
    double entered_wall, now_wall;
};

static int read_text(const char *path, char **out)
{
    FILE *f = fopen(path, "r");
    long n;
    char *buf;

    *out = NULL;
    if (!f)
        return errno == ENOENT ? 1 : -1;
    if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || n > (1 << 20) || fseek(f, 0, SEEK_SET) ||
        !(buf = malloc((size_t)n + 1))) {
        fclose(f);
        return -1;
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return -1;
    }
    buf[n] = '\0';
    fclose(f);
    *out = buf;
    return 0;
}

static double num(const cJSON *o, const char *key, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsNumber(v)) {
        *ok = 0;
        return 0;
    }
    return v->valuedouble;
}

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
static int parse_record(const cJSON *o, struct rank_rec *r, int *rank, int *world)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "collective"), *m, *h;
    int ok = 1;

    *rank = (int)num(o, "rank", &ok);
    *world = (int)num(o, "world", &ok);
    ct_str_copy(r->host, sizeof(r->host), str(o, "host", &ok));
    r->pid = (long)num(o, "pid", &ok);
    r->step = (int64_t)num(o, "step", &ok);
    r->phase = ct_hang_phase_parse(str(o, "phase", &ok));
    r->bucket = (int)num(o, "bucket", &ok);
    r->entered_wall = num(o, "entered_wall", &ok);
    r->now_wall = num(o, "now_wall", &ok);
    if (!cJSON_IsObject(c))
        return -1;
    r->seq = (long)num(c, "seq", &ok);
    ct_str_copy(r->what, sizeof(r->what), str(c, "what", &ok));
    r->waiting = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "waiting"));
    r->waited = num(c, "waited_s", &ok);
    r->timed_out = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "timed_out"));
    m = cJSON_GetObjectItemCaseSensitive(c, "missing");
    r->n_missing = 0;
    h = cJSON_GetObjectItemCaseSensitive(c, "missing_hosts");
    h = cJSON_IsArray(h) ? h->child : NULL;
    for (const cJSON *e = cJSON_IsArray(m) ? m->child : NULL; e && r->n_missing < CT_TRACE_MAX_MISSING; e = e->next) {
        if (!cJSON_IsNumber(e))
            continue;
        r->missing_host[r->n_missing][0] = '\0';
        if (cJSON_IsString(h))
            ct_str_copy(r->missing_host[r->n_missing], sizeof(r->missing_host[0]), h->valuestring);
        h = h ? h->next : NULL;
        r->missing[r->n_missing++] = e->valueint;
    }
    if (!ok || r->phase < 0 || *rank < 0 || *world < 1 || *world > MAX_RANKS || *rank >= *world)
        return -1;
    r->present = 1;
    return 0;
}

static int load_one(const char *hang, const char *name, struct rank_rec *recs, int *world, ct_error *err)
{
    char path[1400], *text;
    struct rank_rec r;
    cJSON *o;
    int rank, w, rc;

    snprintf(path, sizeof(path), "%s/%s", hang, name);
    if ((rc = read_text(path, &text)))
        return ct_error_set(err, CT_EIO, "diagnose-read", "diagnose: cannot read %s: %s", path, strerror(errno));
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
    if (*world && w != *world) {
        ct_error_set(err, CT_EINVAL, "diagnose-mixed", "diagnose: %s is from a run of %d ranks, the others of %d",
                     path, w, *world);
        return ct_error_hint(err, "remove the records of the older run from %s", hang);
    }
    *world = w;
    recs[rank] = r;
    return 0;
}

/* Every DIR/hang/rank-R.json into recs[0 .. *world). */
static int load_all(const char *dir, struct rank_rec *recs, int *world, ct_error *err)
{
    char hang[1200];
    int rc = 0, any = 0;

    snprintf(hang, sizeof(hang), "%s/hang", dir);
    *world = 0;
    for (int r = 0; r < MAX_RANKS && (!*world || r < *world); r++) {
        char name[64], path[1300];
        struct stat sb;

        snprintf(name, sizeof(name), "rank-%d.json", r);
        snprintf(path, sizeof(path), "%s/%s", hang, name);
        if (stat(path, &sb))
            continue;
        if ((rc = load_one(hang, name, recs, world, err)))
            return rc;
        any = 1;
    }
    if (!any) {
        ct_error_set(err, CT_EINVAL, "diagnose-no-records", "diagnose: no hang records (rank-R.json) in %s", hang);
        return ct_error_hint(err, "give the fit's --default-root-dir; the ranks write their records on the dump "
                                  "signal (scancel --signal=USR2 JOB, kill -USR2 PID) or after a "
                                  "--collective-timeout");
    }
    return 0;
}

/* Position order: step, then collective (waiting in n < done with n), then phase. */
static int cmp_pos(const struct rank_rec *a, const struct rank_rec *b)
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
static void position(const struct rank_rec *r, char *buf, size_t size)
{
    char at[32], detail[200] = "";

    when(r->entered_wall, at, sizeof(at));
    if (r->waiting)
        snprintf(detail, sizeof(detail), " (waiting %.1f s in collective #%ld: %s)", r->waited, r->seq, r->what);
    else if (r->phase == CT_PHASE_BACKWARD && r->bucket >= 0)
        snprintf(detail, sizeof(detail), " (gradient bucket %d started; collective #%ld done)", r->bucket, r->seq);
    else
        snprintf(detail, sizeof(detail), " (collective #%ld done)", r->seq);
    snprintf(buf, size, "step %lld, phase %s%s, since %s (%.1f s before its record was written)",
             (long long)r->step, ct_hang_phase_name(r->phase), detail, at, r->now_wall - r->entered_wall);
}

/* The records that name rank r as missing: "ranks 0 and 1 waiting in collective #n (what) at step s". */
static void missing_from_others(const struct rank_rec *recs, int world, int r, FILE *out)
{
    for (int o = 0; o < world; o++) {
        const struct rank_rec *x = &recs[o];

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
static const char *missing_node(const struct rank_rec *recs, int world, int r)
{
    for (int o = 0; o < world; o++)
        for (int i = 0; recs[o].present && i < recs[o].n_missing; i++)
            if (recs[o].missing[i] == r && recs[o].missing_host[i][0])
                return recs[o].missing_host[i];
    return NULL;
}

static void report(const struct rank_rec *recs, int world, int lead, FILE *out, int *behind)
{
    char pos[512];
    double newest = 0;
    int lead_stuck = recs[lead].waiting && recs[lead].waited >= BEHIND_AFTER_S;

    for (int r = 0; r < world; r++)
        if (recs[r].present && recs[r].now_wall > newest)
            newest = recs[r].now_wall;
    *behind = 0;
    for (int r = 0; r < world; r++) {
        const struct rank_rec *x = &recs[r];

        if (!x->present) {
            const char *node = missing_node(recs, world, r);

            /* "(host N)" as for a rank with a record: ctrain supervise reads the node from it. */
            if (node)
                fprintf(out, "ctrain: rank %d (host %s) is behind: no record: the process is stopped, dead or could "
                             "not write\n", r, node);
            else
                fprintf(out, "ctrain: rank %d is behind: no record: the process is stopped, dead or could not "
                             "write\n", r);
            missing_from_others(recs, world, r, out);
            ++*behind;
            continue;
        }
        if (cmp_pos(x, &recs[lead]) >= 0 || !(lead_stuck || newest - x->now_wall > BEHIND_AFTER_S))
            continue;
        position(x, pos, sizeof(pos));
        fprintf(out, "ctrain: rank %d (host %s, pid %ld) is behind: %s\n", r, x->host, x->pid, pos);
        if (newest - x->now_wall > 1.0)
            fprintf(out, "ctrain:   its record is %.0f s older than the newest: it wrote nothing since (stopped, "
                         "dead or hung in a way that also holds its dump thread)\n", newest - x->now_wall);
        missing_from_others(recs, world, r, out);
        ++*behind;
    }
}

int ct_hang_diagnose(const char *dir, FILE *out, ct_error *err)
{
    struct rank_rec *recs = calloc(MAX_RANKS, sizeof(*recs));
    char pos[512];
    int world = 0, lead = -1, behind = 0, rc;
    struct stat sb;

    if (!recs)
        return ct_error_set(err, CT_ENOMEM, NULL, "diagnose: out of memory");
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        free(recs);
        ct_error_set(err, CT_EINVAL, "diagnose-dir", "diagnose: %s is not a directory", dir);
        return ct_error_hint(err, "give the fit's --default-root-dir (its hang/ folder holds the records)");
    }
    if ((rc = load_all(dir, recs, &world, err))) {
        free(recs);
        return rc;
    }
    for (int r = 0; r < world; r++)
        if (recs[r].present && (lead < 0 || cmp_pos(&recs[r], &recs[lead]) > 0))
            lead = r;
    report(recs, world, lead, out, &behind);
    position(&recs[lead], pos, sizeof(pos));
    if (behind)
        fprintf(out, "ctrain: %d of %d ranks behind; the furthest, rank %d (host %s): %s\n", behind, world, lead,
                recs[lead].host, pos);
    else
        fprintf(out, "ctrain: all %d ranks are at the same point (none waits for another): %s\n", world, pos);
    free(recs);
    return behind ? 1 : 0;
}
