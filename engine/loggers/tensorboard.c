/* SPDX-License-Identifier: BSD-3-Clause */
/* TensorBoard event files beside metrics.csv (global zero only).
 *
 * The records are TensorBoard's own messages (engine/loggers/proto/tensorboard.proto, a subset of its
 * event.proto and summary.proto and of the hparams plugin's protos), packed by protobuf-c, in
 * TFRecord framing: a little-endian uint64 length, the masked CRC32C of those 8 bytes, the
 * message, the masked CRC32C of the message. The file opens with an Event whose file_version is
 * "brain.Event:2" and the hparams plugin's session start (the run's flags), then one Event per
 * scalar at the run's global step, under metrics.csv's column names.
 *
 * A fit from scratch replaces the directory's event files, as it does metrics.csv. Resuming appends
 * to the newest event file of the directory, first cut after its last record of
 * a step the checkpoint had reached: what the stopped run logged past its checkpoint would
 * otherwise appear twice (TensorBoard shows both), and a record cut off by a kill is dropped.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ctrain/util.h"
#include "engine/loggers/logger_state.h"
#include "engine/loggers/loggers.h"
#include "engine/loggers/proto/tensorboard.pb-c.h"
#include "engine/util/fsutil.h"

#define EVENT_PREFIX "events.out.tfevents."

struct ct_tb_writer {
    FILE *f;
    char path[1200];
    int failed;    /* a write failed: said once, then the file is left alone */
};

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses; Debian ships no C
 * library for it (zlib's crc32 is the other polynomial). Table made on first use. */
static uint32_t crc32c(const unsigned char *p, size_t n)
{
    static uint32_t table[256];
    uint32_t crc = 0xffffffffu;

    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;

            for (int k = 0; k < 8; k++)
                c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
            table[i] = c;
        }
    while (n--)
        crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc ^ 0xffffffffu;
}

/* TFRecord's masked CRC: rotated right by 15 bits plus a constant. */
static uint32_t masked_crc(const unsigned char *p, size_t n)
{
    uint32_t crc = crc32c(p, n);

    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;

    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void write_event(struct ct_tb_writer *w, const Ctrain__Tb__Event *ev)
{
    size_t n = ctrain__tb__event__get_packed_size(ev);
    unsigned char head[12], tail[4], *buf = malloc(n ? n : 1);

    if (!buf || w->failed) {
        free(buf);
        return;
    }
    ctrain__tb__event__pack(ev, buf);
    put_le(head, n, 8);
    put_le(head + 8, masked_crc(head, 8), 4);
    put_le(tail, masked_crc(buf, n), 4);
    if (fwrite(head, 1, 12, w->f) != 12 || fwrite(buf, 1, n, w->f) != n || fwrite(tail, 1, 4, w->f) != 4) {
        fprintf(stderr, "ctrain: warning: %s: %s; no more TensorBoard records\n", w->path, strerror(errno));
        w->failed = 1;
    }
    free(buf);
}

static void event_init(Ctrain__Tb__Event *ev, int64_t step)
{
    ctrain__tb__event__init(ev);
    ev->wall_time = ct_time_now();
    ev->step = step;
}

/* One Summary.Value in an Event. */
static void write_summary_value(struct ct_tb_writer *w, int64_t step, Ctrain__Tb__Summary__Value *v)
{
    Ctrain__Tb__Event ev;
    Ctrain__Tb__Summary sum = CTRAIN__TB__SUMMARY__INIT;
    Ctrain__Tb__Summary__Value *values[1] = { v };

    event_init(&ev, step);
    sum.n_value = 1;
    sum.value = values;
    ev.what_case = CTRAIN__TB__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    write_event(w, &ev);
}

/* The hparams plugin's session start: every flag of hparams_json (numbers, strings, booleans) as
 * a hyper-parameter, as Lightning's TensorBoardLogger.log_hyperparams does. */
static void write_hparams(struct ct_tb_writer *w, const char *hparams_json)
{
    cJSON *o = cJSON_Parse(hparams_json), *it;
    Ctrain__Tb__HParamsPluginData pd = CTRAIN__TB__HPARAMS_PLUGIN_DATA__INIT;
    Ctrain__Tb__SessionStartInfo start = CTRAIN__TB__SESSION_START_INFO__INIT;
    Ctrain__Tb__SummaryMetadata md = CTRAIN__TB__SUMMARY_METADATA__INIT;
    Ctrain__Tb__SummaryMetadata__PluginData plugin = CTRAIN__TB__SUMMARY_METADATA__PLUGIN_DATA__INIT;
    Ctrain__Tb__Summary__Value v = CTRAIN__TB__SUMMARY__VALUE__INIT;
    Ctrain__Tb__HParamEntry *entries = NULL, **ptrs = NULL;
    Ctrain__Tb__HParamValue *vals = NULL;
    unsigned char *content = NULL;
    int n = 0, cap = o ? cJSON_GetArraySize(o) : 0;

    if (!o || !(entries = calloc((size_t)cap + 1, sizeof(*entries))) || !(ptrs = calloc((size_t)cap + 1, sizeof(*ptrs))) ||
        !(vals = calloc((size_t)cap + 1, sizeof(*vals))))
        goto out;
    cJSON_ArrayForEach(it, o) {
        ctrain__tb__hparam_entry__init(&entries[n]);
        ctrain__tb__hparam_value__init(&vals[n]);
        if (cJSON_IsNumber(it)) {
            vals[n].kind_case = CTRAIN__TB__HPARAM_VALUE__KIND_NUMBER_VALUE;
            vals[n].number_value = it->valuedouble;
        } else if (cJSON_IsString(it)) {
            vals[n].kind_case = CTRAIN__TB__HPARAM_VALUE__KIND_STRING_VALUE;
            vals[n].string_value = it->valuestring;
        } else if (cJSON_IsBool(it)) {
            vals[n].kind_case = CTRAIN__TB__HPARAM_VALUE__KIND_BOOL_VALUE;
            vals[n].bool_value = cJSON_IsTrue(it);
        } else {
            continue;
        }
        entries[n].key = it->string;
        entries[n].value = &vals[n];
        ptrs[n] = &entries[n];
        n++;
    }
    start.n_hparams = (size_t)n;
    start.hparams = ptrs;
    start.start_time_secs = ct_time_now();
    pd.version = 0; /* the plugin's PLUGIN_DATA_VERSION */
    pd.data_case = CTRAIN__TB__HPARAMS_PLUGIN_DATA__DATA_SESSION_START_INFO;
    pd.session_start_info = &start;
    if (!(content = malloc(ctrain__tb__hparams_plugin_data__get_packed_size(&pd) + 1)))
        goto out;
    plugin.plugin_name = "hparams";
    plugin.content.len = ctrain__tb__hparams_plugin_data__pack(&pd, content);
    plugin.content.data = content;
    md.plugin_data = &plugin;
    v.tag = "_hparams_/session_start_info";
    v.metadata = &md;
    write_summary_value(w, 0, &v);
out:
    free(content);
    free(vals);
    free(ptrs);
    free(entries);
    cJSON_Delete(o);
}

/* The newest event file of dir (names start with the creation time in seconds, so the largest
 * name is the newest); 0 when there is one. */
static int newest_event_file(const char *dir, char *out, size_t size)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char best[256] = "";

    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, EVENT_PREFIX, strlen(EVENT_PREFIX)) && strcmp(e->d_name, best) > 0 &&
            strlen(e->d_name) < sizeof(best))
            snprintf(best, sizeof(best), "%s", e->d_name);
    closedir(d);
    if (!best[0])
        return -1;
    snprintf(out, size, "%s/%s", dir, best);
    return 0;
}

/* A fit from scratch overwrites metrics.csv; the event files of an earlier run in the directory go
 * too, or TensorBoard would draw both runs' steps as one curve. unlink removes a planted symlink
 * itself, never its target. */
static void remove_event_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[1400];

    if (!d)
        return;
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, EVENT_PREFIX, strlen(EVENT_PREFIX))) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

/* What a resume keeps of an event file: its intact records of steps up to the checkpoint's, in
 * order (kept, len bytes); damaged records (a CRC or message that does not check out) are dropped
 * and counted. A record cut short at the end (a killed writer) and those after the checkpoint's
 * step (logged past it) go without a word: the run writes them again. */
struct tb_keep {
    unsigned char *kept;
    size_t len, cap;
    long damaged;        /* records dropped whole (length known, data bad) */
    long lost;           /* bytes dropped after a damaged length: no record boundary to go on from */
    long prefix;         /* kept is the file's first prefix bytes, untouched */
};

static int keep_append(struct tb_keep *k, const unsigned char *head, const unsigned char *buf, size_t n,
                       const unsigned char *tail)
{
    if (k->len + 16 + n > k->cap) {
        size_t cap = (k->len + 16 + n) * 2;
        unsigned char *p = realloc(k->kept, cap);

        if (!p)
            return -1;
        k->kept = p;
        k->cap = cap;
    }
    memcpy(k->kept + k->len, head, 12);
    memcpy(k->kept + k->len + 12, buf, n);
    memcpy(k->kept + k->len + 12 + n, tail, 4);
    k->len += 16 + n;
    return 0;
}

/* One record at the file's position: 1 read (into *step; *intact 0 when its data or message is
 * damaged), 0 at the end or a record cut short, -1 when its length does not check out. */
static int read_record(FILE *f, unsigned char *head, unsigned char **buf, size_t *n, unsigned char *tail,
                       int64_t *step, int *intact)
{
    Ctrain__Tb__Event *ev;

    *buf = NULL;
    if (fread(head, 1, 12, f) != 12)
        return 0;
    *n = get_le(head, 8);
    if ((uint32_t)get_le(head + 8, 4) != masked_crc(head, 8) || *n > (64u << 20) || !(*buf = malloc(*n ? *n : 1)))
        return -1;
    if (fread(*buf, 1, *n, f) != *n || fread(tail, 1, 4, f) != 4)
        return 0;
    ev = (uint32_t)get_le(tail, 4) == masked_crc(*buf, *n) ? ctrain__tb__event__unpack(NULL, *n, *buf) : NULL;
    *intact = ev != NULL;
    *step = ev ? ev->step : 0;
    if (ev)
        ctrain__tb__event__free_unpacked(ev, NULL);
    return 1;
}

/* Scan the file for what to keep (the file version and hparams records, at step 0, always stay). */
static int keep_scan(FILE *f, int64_t last_step, struct tb_keep *k)
{
    unsigned char head[12], tail[4], *buf;
    size_t n = 0;
    long pos = 0, end;
    int64_t step;
    int intact = 0, r;

    rewind(f);
    while ((r = read_record(f, head, &buf, &n, tail, &step, &intact)) == 1 && (!intact || step <= last_step)) {
        pos += 16 + (long)n;
        if (!intact)
            k->damaged++;
        else if (keep_append(k, head, buf, n, tail)) {
            free(buf);
            return -1;
        }
        if (intact && !k->damaged)
            k->prefix = pos;
        free(buf);
    }
    free(buf);
    if (r < 0 && fseek(f, 0, SEEK_END) == 0 && (end = ftell(f)) > pos)
        k->lost = end - pos;
    return 0;
}

/* Write the kept records over w->path (atomically: a temp file renamed over it) and open the new
 * file for appending; then say what was dropped. */
static int rewrite_kept(struct ct_tb_writer *w, int *fd, const struct tb_keep *k, int64_t resume_step,
                        ct_error *err)
{
    char what[160];

    close(*fd);
    *fd = -1;
    if (ct_fs_write_atomic(w->path, k->kept, k->len, err) || (*fd = ct_fs_open_output(w->path, 1, err)) < 0)
        return err->code;
    snprintf(what, sizeof(what), "%ld damaged record%s", k->damaged, k->damaged == 1 ? "" : "s");
    if (k->lost)
        snprintf(what + strlen(what), sizeof(what) - strlen(what), " and the %ld bytes after a damaged record "
                 "length (no record boundary to go on from)", k->lost);
    fprintf(stderr, "ctrain: warning: %s: dropped %s; kept its intact records up to step %lld\n", w->path, what,
            (long long)resume_step);
    return 0;
}

/* Resuming: keep the event file's intact records up to the checkpoint's step, read through the
 * same descriptor's file (so the file checked is the file cut). A file that cannot be read back is
 * refused as it is: cutting it blind would lose every record. */
static int cut_file(struct ct_tb_writer *w, int *fd, int64_t resume_step, long *kept, ct_error *err)
{
    struct tb_keep k = { 0 };
    char self[64];
    FILE *rf;
    int rc = 0;

    snprintf(self, sizeof(self), "/proc/self/fd/%d", *fd);
    if (!(rf = fopen(self, "rb"))) {
        ct_error_set(err, CT_EIO, "tensorboard-open", "%s: cannot read it back to keep its records up to step %lld: "
                     "%s; it is left as it is", w->path, (long long)resume_step, strerror(errno));
        return ct_error_hint(err, "make it readable (chmod u+r), or move it out of the run directory to start a "
                                  "new event file");
    }
    if (keep_scan(rf, resume_step, &k))
        rc = ct_error_set(err, CT_ENOMEM, "", "%s: out of memory reading it back", w->path);
    fclose(rf);
    if (!rc && (k.damaged || k.lost))
        rc = rewrite_kept(w, fd, &k, resume_step, err);
    else if (!rc && ftruncate(*fd, k.prefix))
        rc = ct_error_set(err, CT_EIO, "tensorboard-open", "%s: cannot cut it after step %lld: %s", w->path,
                          (long long)resume_step, strerror(errno));
    *kept = (long)k.len;
    free(k.kept);
    return rc;
}

/* Open w->path the safe way (no symlink, this user's file: engine/util/fsutil.h). Resuming, it is
 * first cut to its intact records up to resume_step (cut_file) and written at its end. */
static int open_file(struct ct_tb_writer *w, int append, int64_t resume_step, long *kept, ct_error *err)
{
    int fd = ct_fs_open_output(w->path, append, err);

    if (fd < 0)
        return err->code;
    *kept = 0;
    if (append && cut_file(w, &fd, resume_step, kept, err)) {
        if (fd >= 0)
            close(fd);
        return err->code;
    }
    if (!(w->f = fdopen(fd, append ? "a" : "w"))) {
        close(fd);
        return ct_error_set(err, CT_EIO, "tensorboard-open", "%s: cannot open for writing: %s", w->path, strerror(errno));
    }
    return 0;
}

int ct_tb_open(ct_run *run, int64_t resume_step, ct_error *err)
{
    struct ct_tb_writer *w;
    char host[128] = "localhost";
    int rc, resumed = 0;

    if (!run->is_zero || !run->opt.tensorboard || !run->loggers)
        return 0;
    if (!(w = calloc(1, sizeof(*w))))
        return ct_error_set(err, CT_ENOMEM, "", "out of memory for the TensorBoard writer");
    if (resume_step >= 0 && newest_event_file(run->opt.root_dir, w->path, sizeof(w->path)) == 0) {
        long keep;

        if ((rc = open_file(w, 1, resume_step, &keep, err))) {
            free(w);
            return rc;
        }
        resumed = keep > 0;
    } else {
        long none;

        remove_event_files(run->opt.root_dir);
        gethostname(host, sizeof(host) - 1);
        snprintf(w->path, sizeof(w->path), "%s/" EVENT_PREFIX "%lld.%s.%ld.0", run->opt.root_dir,
                 (long long)time(NULL), host, (long)getpid());
        if ((rc = open_file(w, 0, -1, &none, err))) {
            free(w);
            return rc;
        }
    }
    run->loggers->tb = w;
    if (!resumed) {
        Ctrain__Tb__Event ev;

        event_init(&ev, 0);
        ev.what_case = CTRAIN__TB__EVENT__WHAT_FILE_VERSION;
        ev.file_version = "brain.Event:2";
        write_event(w, &ev);
        write_hparams(w, run->opt.hparams_json);
    }
    ct_tb_flush(run);
    return 0;
}

void ct_tb_scalar(ct_run *run, const char *tag, double value)
{
    Ctrain__Tb__Summary__Value v = CTRAIN__TB__SUMMARY__VALUE__INIT;
    struct ct_tb_writer *w = run->loggers ? run->loggers->tb : NULL;

    if (!w || isnan(value))
        return;
    v.tag = (char *)tag;
    v.value_case = CTRAIN__TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = (float)value;
    write_summary_value(w, run->st.global_step, &v);
}

void ct_tb_flush(ct_run *run)
{
    struct ct_tb_writer *w = run->loggers ? run->loggers->tb : NULL;

    if (w && !w->failed)
        fflush(w->f);
}

void ct_tb_close(ct_run *run)
{
    struct ct_tb_writer *w = run->loggers ? run->loggers->tb : NULL;

    if (!w)
        return;
    fclose(w->f);
    free(w);
    run->loggers->tb = NULL;
}
