/* SPDX-License-Identifier: BSD-3-Clause */
/* The supervisor's event records (event.h): written by a rank, read by ctrain supervise. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ctrain/util.h"
#include "engine/events/event.h"
#include "engine/util/fsutil.h"

/* A record is a few fields and at most CT_SV_EVENT_NODES hosts: far below this. */
#define EVENT_MAX (64 << 10)
#define ANY_INT 9007199254740992.0   /* 2^53 */
#define MAX_RANKS 1000000.0

static const char *const kind_names[] = { "missing", "behind", "straggler" };
_Static_assert(sizeof(kind_names) / sizeof(kind_names[0]) == CT_SV_EVENT_N, "a name for every kind");

static struct {
    int on;
    char dir[1100];
    int rank, world;
    char host[CT_SV_EVENT_HOST];
    const volatile int64_t *step;
} me;

const char *ct_sv_event_kind_name(int kind)
{
    return kind >= 0 && kind < CT_SV_EVENT_N ? kind_names[kind] : "unknown";
}

static int kind_parse(const char *name)
{
    for (int i = 0; i < CT_SV_EVENT_N; i++)
        if (!strcmp(name, kind_names[i]))
            return i;
    return -1;
}

void ct_sv_events_init(const char *hang_dir, int rank, int world, const char *host, const volatile int64_t *step)
{
    ct_str_copy(me.dir, sizeof(me.dir), hang_dir);
    me.rank = rank;
    me.world = world;
    ct_str_copy(me.host, sizeof(me.host), host ? host : "");
    me.step = step;
    me.on = 1;
}

static cJSON *to_json(const ct_sv_event *ev)
{
    cJSON *o = cJSON_CreateObject(), *c = cJSON_CreateObject(), *n = cJSON_CreateArray();

    if (!o || !c || !n) {
        cJSON_Delete(o);
        cJSON_Delete(c);
        cJSON_Delete(n);
        return NULL;
    }
    cJSON_AddStringToObject(o, "event", ct_sv_event_kind_name(ev->kind));
    cJSON_AddNumberToObject(o, "rank", ev->rank);
    cJSON_AddNumberToObject(o, "world", ev->world);
    cJSON_AddNumberToObject(o, "pid", (double)ev->pid);
    cJSON_AddStringToObject(o, "host", ev->host);
    cJSON_AddNumberToObject(o, "step", (double)ev->step);
    cJSON_AddNumberToObject(c, "seq", (double)ev->seq);
    cJSON_AddStringToObject(c, "what", ev->what);
    cJSON_AddItemToObject(o, "collective", c);
    for (int i = 0; i < ev->n_nodes && i < CT_SV_EVENT_NODES; i++) {
        cJSON *e = cJSON_CreateObject();

        if (!e)
            break;
        cJSON_AddNumberToObject(e, "rank", ev->node_rank[i]);
        cJSON_AddStringToObject(e, "node", ev->node[i]);
        cJSON_AddItemToArray(n, e);
    }
    cJSON_AddItemToObject(o, "at_fault", n);
    cJSON_AddStringToObject(o, "why", ev->why);
    cJSON_AddNumberToObject(o, "wall", ev->wall);
    return o;
}

int ct_sv_event_write(ct_sv_event *ev)
{
    char path[1300], *text;
    cJSON *o;
    ct_error err;
    int rc;

    if (!me.on)
        return 0;
    ev->rank = me.rank;
    ev->world = me.world;
    ev->pid = (long)getpid();
    ct_str_copy(ev->host, sizeof(ev->host), me.host);
    ev->step = me.step ? *me.step : 0;
    ev->wall = ct_wall_now();
    snprintf(path, sizeof(path), "%s/event-%s-rank-%d.json", me.dir, ct_sv_event_kind_name(ev->kind), me.rank);
    o = to_json(ev);
    text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) {
        fprintf(stderr, "ctrain: cannot write %s: out of memory\n", path);
        return -1;
    }
    ct_error_clear(&err);
    rc = ct_fs_write_atomic(path, text, strlen(text), &err);
    free(text);
    if (rc) {
        fprintf(stderr, "ctrain: the supervisor's event record: ");
        ct_error_print(stderr, &err);
        return -1;
    }
    return 0;
}

int ct_sv_event_missing(long seq, const char *what, const int *ranks, const char (*hosts)[64], int n)
{
    ct_sv_event ev = { .kind = CT_SV_EVENT_MISSING, .seq = seq };

    if (n <= 0)
        return 0;
    ct_str_copy(ev.what, sizeof(ev.what), what ? what : "");
    for (int i = 0; i < n && i < CT_SV_EVENT_NODES; i++) {
        ev.node_rank[i] = ranks[i];
        ct_str_copy(ev.node[i], sizeof(ev.node[i]), hosts ? hosts[i] : "");
    }
    ev.n_nodes = n < CT_SV_EVENT_NODES ? n : CT_SV_EVENT_NODES;
    snprintf(ev.why, sizeof(ev.why), "its rank(s) did not arrive in a collective (the ranks' collective timeout, "
             "collective #%ld%s%s)", seq, ev.what[0] ? ": " : "", ev.what);
    return ct_sv_event_write(&ev);
}

/* --- reading ------------------------------------------------------------------------------------ */

static double num(const cJSON *o, const char *key, double lo, double hi, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi)) {
        *ok = 0;
        return 0;
    }
    return v->valuedouble;
}

/* A string field, escaped for the terminal (records are files anyone who can write DIR/hang may
 * have made). */
static void str(const cJSON *o, const char *key, char *out, size_t size, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsString(v)) {
        *ok = 0;
        out[0] = '\0';
        return;
    }
    ct_str_escape(out, size, v->valuestring);
}

static int parse(const cJSON *o, ct_sv_event *ev)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "collective");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "at_fault");
    char kind[32];
    int ok = cJSON_IsObject(c) && cJSON_IsArray(n);

    memset(ev, 0, sizeof(*ev));
    str(o, "event", kind, sizeof(kind), &ok);
    ev->kind = kind_parse(kind);
    ev->rank = (int)num(o, "rank", 0, MAX_RANKS, &ok);
    ev->world = (int)num(o, "world", 1, MAX_RANKS, &ok);
    ev->pid = (long)num(o, "pid", 0, 2147483647.0, &ok);
    str(o, "host", ev->host, sizeof(ev->host), &ok);
    ev->step = (int64_t)num(o, "step", 0, ANY_INT, &ok);
    str(o, "why", ev->why, sizeof(ev->why), &ok);
    ev->wall = num(o, "wall", 0, 1e12, &ok);
    if (!ok)
        return -1;
    ev->seq = (long)num(c, "seq", 0, ANY_INT, &ok);
    str(c, "what", ev->what, sizeof(ev->what), &ok);
    for (const cJSON *e = n->child; e && ok && ev->n_nodes < CT_SV_EVENT_NODES; e = e->next) {
        ev->node_rank[ev->n_nodes] = (int)num(e, "rank", 0, MAX_RANKS, &ok);
        str(e, "node", ev->node[ev->n_nodes], sizeof(ev->node[0]), &ok);
        ev->n_nodes++;
    }
    return ok && ev->kind >= 0 && ev->rank < ev->world ? 0 : -1;
}

static int read_one(const char *path, ct_sv_event *ev)
{
    char *text;
    cJSON *o;
    int rc;

    if (ct_fs_read_input(path, "event record", EVENT_MAX, &text, NULL, NULL))
        return -1;
    o = cJSON_Parse(text);
    free(text);
    rc = o ? parse(o, ev) : -1;
    cJSON_Delete(o);
    return rc;
}

int ct_sv_events_read(const char *hang_dir, ct_sv_event_fn fn, void *arg, int *bad)
{
    DIR *d = opendir(hang_dir);
    struct dirent *e;
    int stop = 0;

    if (bad)
        *bad = 0;
    if (!d)
        return 0;
    while (!stop && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        char path[1400];
        ct_sv_event ev;

        /* event-KIND-rank-R.json, not a temp beside one (event-...json.tmp.XXXXXX) */
        if (strncmp(e->d_name, "event-", 6) || len < 11 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", hang_dir, e->d_name);
        if (read_one(path, &ev)) {
            if (bad)
                ++*bad;
            continue;
        }
        stop = fn(&ev, arg);
    }
    closedir(d);
    return 0;
}
