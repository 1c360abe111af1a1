/* SPDX-License-Identifier: BSD-3-Clause */
/* Hang forensics: each rank's progress record and its dump (DIR/hang/rank-R.json).
 *
 * The record is plain data: the loops store the step and the phase (and the monotonic time they
 * entered it) at the points they already pass, and the strategy stores which collective this rank
 * waits in through the ct_collective_trace it was handed. No lock and no system call on the step
 * (the clock is the vDSO's), so it costs nothing measurable.
 *
 * The record lives in a shared mapping of DIR/hang/rank-R.live (hang_live.h): a stopped or dead
 * process writes nothing, but its last stores are in the file, so ctrain diagnose still says where
 * it was (at once on the node's own file system and on file systems that show one client's writes
 * to the others, such as Lustre and GPFS; on NFS once the kernel has written the dirty page back,
 * within its writeback interval, ~30 s). The file's blocks are allocated up front, so a full file
 * system cannot fault a store on the step; where the file cannot be made, the record stays in this
 * process only (and the dump below still works). The file is made only once the run's directory
 * was made and checked (ct_hang_map): until then, and where it cannot be made, the record is this
 * process's.
 *
 * It is dumped on the dump signal (by the stop catcher thread, engine/trainer/stop.c: never from a
 * handler on a computing thread) and after a collective timeout. The dump copies the record first
 * (a snapshot: a transition that lands during the copy may leave the fields one transition apart,
 * which the reader can live with), then formats and writes outside any compute path: a temporary
 * file, fsync, rename, so a reader never sees half a record.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ctrain/util.h"
#include "engine/util/fsutil.h"
#include "engine/health/fit/hang_live.h"
#include "engine/health/fit/diagnose.h"
#include "engine/health/fit/hang.h"
#include "engine/events/event.h"

/* The record: in the live file's mapping when there is one, else here. */
static struct ct_hang_live local_live;
static struct ct_hang_live *live = &local_live;

static struct {
    int on;
    int rank, world;
    char dir[1100];                  /* DIR/hang */
    char live_path[1200];            /* DIR/hang/rank-R.live; "" when the record is this process's only */
} where;

/* A fresh temp file beside DIR/hang/rank-R.live (tmp receives its name), its blocks allocated, mapped;
 * NULL when it cannot be. Made exclusively (engine/util/fsutil.h), never opened by the name: a link
 * or a file someone planted as rank-R.live is replaced by the rename, never written through. */
static struct ct_hang_live *live_map(const char *path, char *tmp, size_t size)
{
    struct ct_hang_live *m;
    int fd;

    ct_fs_remove_stale_temps(path);
    if ((fd = ct_fs_create_temp(path, tmp, size)) < 0)
        return NULL;
    /* Never shorter than the mapping (a store past the end would fault), blocks allocated so a
     * full file system cannot fault one either. */
    if (ftruncate(fd, sizeof(*m)) || posix_fallocate(fd, 0, sizeof(*m))) {
        close(fd);
        unlink(tmp);
        return NULL;
    }
    m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        unlink(tmp);
    return m == MAP_FAILED ? NULL : m;
}

/* "ctrain: rank R DOES: MESSAGE", and its hint: the rank goes on without its record on disk. */
static void hang_warn(const char *does, const ct_error *err)
{
    fprintf(stderr, "ctrain: rank %d %s: %s\n", where.rank, does, err->msg);
    if (err->hint[0])
        fprintf(stderr, "ctrain: hint: %s\n", err->hint);
}

/* DIR/hang made, or the one there taken only when it is this user's own directory (not a link, not
 * another user's, not open to others): what is written there cannot be redirected. */
static int hang_dir(void)
{
    ct_error err;

    ct_error_clear(&err);
    if (!ct_fs_make_dir(where.dir, "the hang records' directory", &err))
        return 0;
    hang_warn("keeps its hang record in memory only (none is written)", &err);
    return -1;
}

/* The record's identity, then the magic last: a reader never takes a half-made record for this
 * run's. */
static void live_begin(struct ct_hang_live *m, const char *host)
{
    memset(m, 0, sizeof(*m));
    m->size = sizeof(*m);
    m->rank = where.rank;
    m->world = where.world;
    m->pid = getpid();
    ct_str_copy(m->host, sizeof(m->host), host);
    m->rec.coll.bucket = -1;
    m->rec.coll.n_missing = -1;
    m->rec.entered = ct_time_now();
    m->started_wall = ct_wall_now();
    m->mono_to_wall = m->started_wall - m->rec.entered;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(m->magic, CT_HANG_LIVE_MAGIC, sizeof(m->magic));
}

ct_collective_trace *ct_hang_init(int rank, int world, const char *root_dir)
{
    char host[CT_HANG_LIVE_HOST];

    if (live != &local_live)          /* an earlier fit of this process */
        munmap(live, sizeof(*live));
    live = &local_live;
    where.rank = rank;
    where.world = world;
    snprintf(where.dir, sizeof(where.dir), "%s/hang", root_dir[0] ? root_dir : ".");
    where.live_path[0] = '\0';
    /* SLURM's name for the node: what ctrain diagnose prints and ctrain supervise excludes. */
    if (ct_node_name(host, sizeof(host)) && !host[0])
        ct_str_copy(host, sizeof(host), "?");
    live_begin(&local_live, host);
    where.on = 1;
    return &live->rec.coll;
}

ct_collective_trace *ct_hang_map(void)
{
    struct ct_hang_live *m;
    char path[sizeof(where.live_path)], tmp[sizeof(where.live_path) + 16];

    if (!where.on || live != &local_live)
        return &live->rec.coll;
    snprintf(path, sizeof(path), "%s/rank-%d.live", where.dir, where.rank);
    /* DIR/hang only: DIR itself is rank 0's to make and check (a node that does not share it keeps
     * the record in the process). */
    if (hang_dir())
        return &live->rec.coll;
    if (!(m = live_map(path, tmp, sizeof(tmp))))
        goto events;
    live_begin(m, local_live.host);
    m->rec.step = local_live.rec.step;
    m->rec.phase = local_live.rec.phase;
    m->rec.entered = local_live.rec.entered;
    m->rec.coll = local_live.rec.coll;
    /* Under its name only once begun: a reader never finds a half-made record there. */
    if (rename(tmp, path)) {
        munmap(m, sizeof(*m));
        unlink(tmp);
        goto events;
    }
    ct_str_copy(where.live_path, sizeof(where.live_path), path);
    __atomic_store_n(&live, m, __ATOMIC_RELEASE);
events:
    /* The supervisor's event records go beside the hang records, stamped with this rank's step. */
    ct_sv_events_init(where.dir, where.rank, where.world, live->host, &live->rec.step);
    return &live->rec.coll;
}

/* A fit that ended well leaves no live file (a record of where it was is only worth keeping for
 * one that did not). */
void ct_hang_finish(int ok)
{
    if (!where.on)
        return;
    ct_hang_enter(CT_PHASE_DONE);
    if (ok && where.live_path[0] && unlink(where.live_path) == 0)
        rmdir(where.dir);             /* the last rank's empties it; a record or another rank's file keeps it */
}

void ct_hang_enter(int phase)
{
    live->rec.phase = phase;
    live->rec.entered = ct_time_now();
}

void ct_hang_step(int64_t step)
{
    live->rec.step = step;
}

static cJSON *collective_json(const ct_collective_trace *c, double now_mono)
{
    cJSON *o = cJSON_CreateObject(), *missing, *hosts;

    cJSON_AddNumberToObject(o, "seq", (double)c->seq);
    cJSON_AddStringToObject(o, "what", c->what ? c->what : "");
    cJSON_AddBoolToObject(o, "waiting", c->waiting);
    cJSON_AddNumberToObject(o, "waited_s", c->waiting ? now_mono - c->wait_since : 0);
    cJSON_AddBoolToObject(o, "timed_out", c->timed_out);
    missing = cJSON_AddArrayToObject(o, "missing");
    hosts = cJSON_AddArrayToObject(o, "missing_hosts");
    for (int i = 0; i < c->n_missing && i < CT_TRACE_MAX_MISSING; i++) {
        cJSON_AddItemToArray(missing, cJSON_CreateNumber(c->missing[i]));
        cJSON_AddItemToArray(hosts, cJSON_CreateString(c->missing_host[i]));
    }
    return o;
}

static char *record_json(const char *reason)
{
    double now_mono = ct_time_now(), now_wall = ct_wall_now();
    ct_collective_trace coll = live->rec.coll;   /* the snapshot: copied before anything is formatted */
    int64_t step = live->rec.step;
    int phase = live->rec.phase;
    double entered = live->rec.entered;
    cJSON *o = cJSON_CreateObject();
    char *text;

    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "rank", where.rank);
    cJSON_AddNumberToObject(o, "world", where.world);
    cJSON_AddStringToObject(o, "host", live->host);
    cJSON_AddNumberToObject(o, "pid", (double)getpid());
    cJSON_AddStringToObject(o, "reason", reason);
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddStringToObject(o, "phase", ct_hang_phase_name(phase));
    cJSON_AddNumberToObject(o, "bucket", coll.bucket);
    cJSON_AddItemToObject(o, "collective", collective_json(&coll, now_mono));
    cJSON_AddNumberToObject(o, "entered_wall", now_wall - (now_mono - entered));
    cJSON_AddNumberToObject(o, "entered_mono", entered);
    cJSON_AddNumberToObject(o, "now_wall", now_wall);
    cJSON_AddNumberToObject(o, "now_mono", now_mono);
    text = cJSON_Print(o);
    cJSON_Delete(o);
    return text;
}

int ct_hang_dump(const char *reason)
{
    char path[1200], *text;
    ct_error err;
    size_t len;
    int rc = -1;

    if (!where.on)
        return 0;
    ct_error_clear(&err);
    if (!(text = record_json(reason))) {
        ct_error_set(&err, CT_ENOMEM, "hang-dump", "out of memory");
        goto out;
    }
    if (hang_dir())
        goto quiet;
    len = strlen(text);
    text[len] = '\n';   /* cJSON_Print's terminator: the file ends with a newline */
    snprintf(path, sizeof(path), "%s/rank-%d.json", where.dir, where.rank);
    /* A fresh temp file beside it, renamed over it (engine/util/fsutil.h): never through a link. */
    rc = ct_fs_write_atomic(path, text, len + 1, &err);
out:
    if (rc)
        hang_warn("could not write its hang record", &err);
quiet:
    free(text);
    return rc;
}

/* The ranks the diagnosis has behind, with their nodes, as the supervisor's event record. */
static void behind_event(const ct_diagnosis *d)
{
    ct_sv_event ev = { .kind = CT_SV_EVENT_BEHIND, .seq = d->ranks[d->lead].seq };

    ct_str_copy(ev.what, sizeof(ev.what), d->ranks[d->lead].what);
    for (int r = 0; r < d->world && ev.n_nodes < CT_SV_EVENT_NODES; r++) {
        const char *node = ct_diagnosis_node(d, r);

        if (!d->ranks[r].behind)
            continue;
        ev.node_rank[ev.n_nodes] = r;
        ct_str_copy(ev.node[ev.n_nodes++], sizeof(ev.node[0]), node ? node : "");
    }
    ct_str_copy(ev.why, sizeof(ev.why), "its rank is behind in the hang records (ctrain diagnose)");
    if (ev.n_nodes)
        ct_sv_event_write(&ev);
}

static void print_diagnosis(void)
{
    char root[1100];
    ct_diagnosis d;
    ct_error err;

    ct_str_copy(root, sizeof(root), where.dir);
    root[strlen(root) - strlen("/hang")] = '\0';
    ct_error_clear(&err);
    fprintf(stderr, "ctrain: the ranks' hang records (ctrain diagnose %s):\n", root);
    if (ct_diagnose(root, &d, &err)) {
        ct_error_print(stderr, &err);
        return;
    }
    ct_diagnosis_print(&d, stderr);
    behind_event(&d);
    ct_diagnosis_free(&d);
}

/* After a collective timeout every rank dumps; rank 0 then waits a moment for the others' records
 * (those that can still write) and prints the diagnosis. */
/* Whether the timeout found rank 0 missing (then nobody prints the diagnosis: no one lingers). */
static int zero_missing(void)
{
    for (int i = 0; i < live->rec.coll.n_missing && i < CT_TRACE_MAX_MISSING; i++)
        if (live->rec.coll.missing[i] == 0)
            return 1;
    return 0;
}

/* How long rank 0 waits for the others' records after a timeout, and the others linger so that
 * their abort (which ends every rank) comes after it printed. Short beside the kill grace of the
 * launchers (5 s), so the whole job still ends within --collective-timeout + 10 s. */
#define LINGER_S 1.0

void ct_hang_after_timeout(int is_zero)
{
    double start = ct_wall_now(), end = ct_time_now() + LINGER_S;

    if (!where.on || ct_hang_dump("collective-timeout"))
        return;
    if (!is_zero) {
        if (!zero_missing())
            usleep((useconds_t)(LINGER_S * 1e6));
        return;
    }
    while (ct_time_now() < end) {
        int fresh = 0;

        for (int r = 0; r < where.world; r++) {
            char path[1200];
            struct stat sb;

            snprintf(path, sizeof(path), "%s/rank-%d.json", where.dir, r);
            fresh += !stat(path, &sb) && (double)sb.st_mtime >= start - 30;
        }
        /* The missing ranks write nothing: wait for all but them. */
        if (fresh >= where.world - (live->rec.coll.n_missing > 0 ? live->rec.coll.n_missing : 0))
            break;
        usleep(50 * 1000);
    }
    print_diagnosis();
}
