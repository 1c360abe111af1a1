/* SPDX-License-Identifier: BSD-3-Clause */
/* Checkpoint IO in the safetensors format (https://github.com/huggingface/safetensors):
 *   8 bytes   little-endian uint64 N, the header length
 *   N bytes   JSON: {"__metadata__": {str: str}, "<tensor>": {"dtype": "F32", "shape": [..],
 *             "data_offsets": [begin, end]}, ...}, padded with spaces to a multiple of 8
 *   the data  tensors back to back; offsets are relative to the end of the header.
 * Files written here load in Python with safetensors.torch.load_file.
 *
 * Loading trusts nothing: header length against the file size, JSON shape, dtype names, shape
 * products against data_offsets, offsets against the data size — every failure is CT_EFORMAT
 * naming the file and the tensor. Writes are atomic: temp file in the same directory, fsync,
 * rename over the target, fsync the directory. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ctrain/util.h"
#include "ctrain/checkpoint_io.h"
#include "ctrain/dtype.h"
#include "engine/util/fsutil.h"

/* Limits that bound what a header costs: a ctrain checkpoint describes at most
 * CT_CKPT_MAX_TENSORS tensors and CT_CKPT_MAX_META metadata strings of ~1 KiB, a few tens of KiB
 * in all; other writers' files may hold more tensors, which are read and ignored. A header within
 * both limits costs at most its own bytes twice (the text and the strings cJSON copies) plus
 * ~80 bytes for each of at most VALUES_MAX JSON values: under 8 MiB. (Hugging Face's loader allows
 * 100 MB; its parser needs no node per value.) */
#define HEADER_MAX ((uint64_t)1 << 20)
#define VALUES_MAX 65536
#define ENTRIES_MAX 4096

/* Bytes per element of a type a checkpoint stores (one ct_ckpt_dtype_name names); 0 for another. */
static size_t dtype_size(int dtype)
{
    return ct_ckpt_dtype_name(dtype) ? ct_dtype_size((enum ct_dtype)dtype) : 0;
}

static size_t shape_numel(const ct_ckpt_tensor *t)
{
    size_t n = 1;

    for (int d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return n;
}

static void shape_str(const int64_t *shape, int ndim, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");

    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
}

/* --- save ------------------------------------------------------------------------------------ */

/* The JSON header, padded with spaces to a multiple of 8 (so the data is aligned). */
static char *build_header(const char *path, const ct_ckpt *ckpt, size_t *len, ct_error *err)
{
    cJSON *root = cJSON_CreateObject(), *meta = NULL;
    uint64_t off = 0;
    char *json = NULL, *padded = NULL;
    size_t n;

    if (!root)
        goto oom;
    if (ckpt->n_meta > 0) {
        if (!(meta = cJSON_AddObjectToObject(root, "__metadata__")))
            goto oom;
        for (int i = 0; i < ckpt->n_meta; i++)
            if (!cJSON_AddStringToObject(meta, ckpt->meta[i].key, ckpt->meta[i].value))
                goto oom;
    }
    for (int i = 0; i < ckpt->n_tensors; i++) {
        const ct_ckpt_tensor *t = &ckpt->tensors[i];
        const char *dn = ct_ckpt_dtype_name(t->dtype);
        cJSON *obj, *shape, *offs;

        if (!dn || t->ndim < 0 || t->ndim > CT_CKPT_MAX_SHAPE || shape_numel(t) * dtype_size(t->dtype) != t->nbytes) {
            cJSON_Delete(root);
            return ct_error_set(err, CT_EINTERNAL, "ckpt-tensor", "%s: tensor %s: dtype/shape/nbytes disagree",
                                path, t->name), NULL;
        }
        if (!(obj = cJSON_AddObjectToObject(root, t->name)) || !cJSON_AddStringToObject(obj, "dtype", dn) ||
            !(shape = cJSON_AddArrayToObject(obj, "shape")) || !(offs = cJSON_AddArrayToObject(obj, "data_offsets")))
            goto oom;
        for (int d = 0; d < t->ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + t->nbytes)));
        off += t->nbytes;
    }
    if (!(json = cJSON_PrintUnformatted(root)))
        goto oom;
    n = strlen(json);
    *len = (n + 7) / 8 * 8;
    if (!(padded = malloc(*len)))
        goto oom;
    memcpy(padded, json, n);
    memset(padded + n, ' ', *len - n);
    free(json);
    cJSON_Delete(root);
    return padded;
oom:
    free(json);
    cJSON_Delete(root);
    ct_error_set(err, CT_ENOMEM, "", "%s: out of memory building the header", path);
    return NULL;
}

/* For tests only (t/94): CTRAIN_TEST_CKPT_WRITE_DELAY=S holds every write S seconds (at most 60)
 * after its header, so that a test can kill the writer mid-write. Nothing else reads it. */
static void test_write_delay(void)
{
    const char *v = getenv("CTRAIN_TEST_CKPT_WRITE_DELAY");
    double s;

    if (v && !ct_parse_double(v, &s) && s > 0 && s <= 60)
        usleep((useconds_t)(s * 1e6));
}

static int st_save(const char *path, const ct_ckpt *ckpt, ct_error *err)
{
    char tmp[4200];
    unsigned char len8[8];
    size_t hlen = 0;
    char *header = build_header(path, ckpt, &hlen, err);
    int fd, rc = 0;

    if (!header)
        return err ? err->code : CT_ENOMEM;
    /* Temp files a killed writer left beside path are never a valid checkpoint: they go first (one
     * writer per path, rank 0, is the rule). The new one is exclusive and random-named, in the same
     * directory as the target, so rename() is atomic (same file system). */
    ct_fs_remove_stale_temps(path);
    fd = ct_fs_create_temp(path, tmp, sizeof(tmp));
    if (fd < 0 && errno == ENAMETOOLONG) {
        free(header);
        return ct_error_set(err, CT_EINVAL, "ckpt-path", "checkpoint path too long: %s", path);
    }
    if (fd < 0) {
        rc = ct_error_set(err, CT_EIO, "ckpt-write", "%s: cannot create a temporary file beside it: %s",
                          path, strerror(errno));
        ct_error_hint(err, "check that the directory exists and is writable");
        free(header);
        return rc;
    }
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    if (ct_write_all(fd, len8, 8) || ct_write_all(fd, header, hlen))
        goto io_fail;
    test_write_delay();
    for (int i = 0; i < ckpt->n_tensors; i++)
        if (ct_write_all(fd, ckpt->tensors[i].data, ckpt->tensors[i].nbytes))
            goto io_fail;
    if (fsync(fd))
        goto io_fail;
    if (close(fd)) {
        fd = -1;
        goto io_fail;
    }
    fd = -1;
    if (ct_fs_replace(tmp, path))   /* a sharded checkpoint's directory may be there */
        goto io_fail;
    free(header);
    if (ct_fsync_parent_dir(path))
        return ct_error_set(err, CT_EIO, "ckpt-write", "%s: written, but syncing its directory failed: %s",
                            path, strerror(errno));
    return 0;
io_fail:
    rc = ct_error_set(err, CT_EIO, "ckpt-write", "%s: writing the checkpoint failed: %s", path, strerror(errno));
    ct_error_hint(err, "check free space and permissions; the previous checkpoint is untouched");
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(header);
    return rc;
}

/* --- load ------------------------------------------------------------------------------------ */

/* FNV-1a over 8-byte words (then the tail bytes): fast enough for every byte of a checkpoint. */
static uint64_t digest_add(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t w;

    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; n > 0; p++, n--)
        h = (h ^ *p) * 0x100000001b3ULL;
    return h;
}

static int read_at(int fd, void *buf, size_t n, off_t off)
{
    char *p = buf;

    while (n > 0) {
        ssize_t r = pread(fd, p, n, off);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

/* An upper bound of the JSON values in text: every value but the first follows a ':', a '[' or a
 * ',' outside a string. Counted before parsing, so a header of a million tiny values is refused
 * for the cost of reading it, not of a million parsed nodes. */
static size_t json_values_bound(const char *text, size_t len)
{
    size_t n = 1;
    int in_string = 0;

    for (size_t i = 0; i < len; i++) {
        char c = text[i];

        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == ':' || c == '[' || c == ',') {
            n++;
        }
    }
    return n;
}

/* 1 when a JSON string in text holds a control character, raw or escaped (\u0000-\u001f, \n, \t,
 * ...): a key "w\u0000a" would be read as tensor "w" (C strings end at the NUL), and no name or
 * metadata ctrain writes has one. */
static int json_control_char(const char *text, size_t len)
{
    int in_string = 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];

        if (!in_string) {
            in_string = c == '"';
            continue;
        }
        if (c < 0x20)
            return 1;
        if (c == '"') {
            in_string = 0;
        } else if (c == '\\' && i + 1 < len) {
            char e = text[++i];

            if (strchr("bfnrt", e))
                return 1;
            if (e == 'u' && i + 4 < len && text[i + 1] == '0' && text[i + 2] == '0' &&
                (text[i + 3] == '0' || text[i + 3] == '1'))
                return 1;
        }
    }
    return 0;
}

/* A JSON number that is a non-negative integer below 2^53 (exact in a double). */
static int json_uint(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0.0) || j->valuedouble > 9007199254740992.0 ||
        floor(j->valuedouble) != j->valuedouble)
        return -1;
    *out = (uint64_t)j->valuedouble;
    return 0;
}

/* Validate one header entry; fill dtype, shape and the data range. */
static int parse_entry(const char *path, const cJSON *e, uint64_t data_size, ct_ckpt_tensor *t,
                       uint64_t *begin, uint64_t *end, ct_error *err)
{
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    const cJSON *d;
    uint64_t numel = 1, v;
    size_t esize;

    if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs) ||
        cJSON_GetArraySize(offs) != 2)
        return ct_error_set(err, CT_EFORMAT, "ckpt-corrupt",
                            "%s: tensor %s: header entry lacks dtype, shape or data_offsets", path, e->string);
    t->dtype = ct_ckpt_dtype_parse(dt->valuestring);
    esize = dtype_size(t->dtype);
    if (t->dtype < 0 || !esize)
        return ct_error_set(err, CT_EFORMAT, "ckpt-dtype", "%s: tensor %s: unsupported dtype %s", path,
                            e->string, dt->valuestring);
    if (cJSON_GetArraySize(shape) > CT_CKPT_MAX_SHAPE)
        return ct_error_set(err, CT_EFORMAT, "ckpt-shape", "%s: tensor %s: %d dimensions (at most %d)", path,
                            e->string, cJSON_GetArraySize(shape), CT_CKPT_MAX_SHAPE);
    t->ndim = 0;
    cJSON_ArrayForEach(d, shape) {
        if (json_uint(d, &v) || v > ((uint64_t)1 << 40) || (v && numel > UINT64_MAX / v))
            return ct_error_set(err, CT_EFORMAT, "ckpt-shape", "%s: tensor %s: bad shape entry", path, e->string);
        t->shape[t->ndim++] = (int64_t)v;
        numel *= v;
    }
    if (json_uint(cJSON_GetArrayItem(offs, 0), begin) || json_uint(cJSON_GetArrayItem(offs, 1), end) ||
        *begin > *end || *end > data_size)
        return ct_error_set(err, CT_EFORMAT, "ckpt-offsets",
                            "%s: tensor %s: data_offsets outside the %llu data bytes (truncated file?)", path,
                            e->string, (unsigned long long)data_size);
    if (numel > UINT64_MAX / esize || *end - *begin != numel * esize)
        return ct_error_set(err, CT_EFORMAT, "ckpt-offsets",
                            "%s: tensor %s: %llu data bytes do not hold its shape", path, e->string,
                            (unsigned long long)(*end - *begin));
    t->nbytes = (size_t)(numel * esize);
    return 0;
}

struct range {
    uint64_t begin, end;
    const char *name;
};

static int range_cmp(const void *a, const void *b)
{
    const struct range *x = a, *y = b;

    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Two members of one object with the same key: cJSON keeps both and a lookup finds the first,
 * so another reader of the same file could see the other. Refused. n is small (ENTRIES_MAX). */
static const char *duplicate_key(const cJSON *obj)
{
    for (const cJSON *a = obj->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (!strcmp(a->string, b->string))
                return a->string;
    return NULL;
}

/* The rules of Hugging Face's loader (Metadata::validate): sorted by offset, the tensors' data
 * ranges follow each other from 0 with no gap or overlap and end exactly at the end of the file.
 * Every entry is also valid on its own (parse_entry) and no key appears twice. */
static int check_layout(const char *path, const cJSON *root, uint64_t data_size, ct_error *err)
{
    struct range *r;
    const char *dup;
    const cJSON *e;
    ct_ckpt_tensor got;
    uint64_t at = 0;
    int n = cJSON_GetArraySize(root), k = 0, rc = 0;

    if (n > ENTRIES_MAX)
        return ct_error_set(err, CT_EFORMAT, "ckpt-header", "%s: the header has %d entries (at most %d)", path, n,
                            ENTRIES_MAX);
    if ((dup = duplicate_key(root)) != NULL)
        return ct_error_set(err, CT_EFORMAT, "ckpt-duplicate", "%s: the header names %s twice", path, dup);
    if (!(r = calloc((size_t)n + 1, sizeof(*r))))
        return ct_error_set(err, CT_ENOMEM, "", "%s: out of memory checking the header", path);
    cJSON_ArrayForEach(e, root) {
        if (!strcmp(e->string, "__metadata__"))
            continue;
        if ((rc = parse_entry(path, e, data_size, &got, &r[k].begin, &r[k].end, err)))
            goto out;
        r[k++].name = e->string;
    }
    qsort(r, (size_t)k, sizeof(*r), range_cmp);
    for (int i = 0; i < k; i++) {
        if (r[i].begin != at) {
            rc = ct_error_set(err, CT_EFORMAT, "ckpt-offsets", "%s: tensor %s: data_offsets [%llu, %llu] %s the "
                              "previous tensor's data, which ends at %llu", path, r[i].name,
                              (unsigned long long)r[i].begin, (unsigned long long)r[i].end,
                              r[i].begin < at ? "overlap" : "leave a gap after", (unsigned long long)at);
            goto out;
        }
        at = r[i].end;
    }
    if (at != data_size)
        rc = ct_error_set(err, CT_EFORMAT, "ckpt-trailing", "%s: %llu byte%s after the last tensor's data (the "
                          "tensors end at %llu of %llu data bytes)", path, (unsigned long long)(data_size - at),
                          data_size - at == 1 ? "" : "s", (unsigned long long)at, (unsigned long long)data_size);
out:
    free(r);
    return rc;
}

static int read_metadata(const char *path, const cJSON *meta, ct_ckpt *ckpt, ct_error *err)
{
    const cJSON *kv;
    const char *dup;

    ckpt->n_meta = 0;
    if (!meta)
        return 0;
    if (!cJSON_IsObject(meta))
        return ct_error_set(err, CT_EFORMAT, "ckpt-corrupt", "%s: __metadata__ is not an object", path);
    if (cJSON_GetArraySize(meta) > CT_CKPT_MAX_META)
        return ct_error_set(err, CT_EFORMAT, "ckpt-meta", "%s: __metadata__ has %d entries (at most %d)", path,
                            cJSON_GetArraySize(meta), CT_CKPT_MAX_META);
    if ((dup = duplicate_key(meta)) != NULL)
        return ct_error_set(err, CT_EFORMAT, "ckpt-duplicate", "%s: __metadata__ names %s twice", path, dup);
    cJSON_ArrayForEach(kv, meta) {
        ct_ckpt_meta *m;

        if (!cJSON_IsString(kv))
            return ct_error_set(err, CT_EFORMAT, "ckpt-corrupt", "%s: __metadata__ value of %s is not a string",
                                path, kv->string);
        if (ckpt->n_meta == CT_CKPT_MAX_META || strlen(kv->string) >= sizeof(m->key) ||
            strlen(kv->valuestring) >= sizeof(m->value))
            return ct_error_set(err, CT_EFORMAT, "ckpt-meta", "%s: __metadata__ entry %s is too large", path,
                                kv->string);
        m = &ckpt->meta[ckpt->n_meta++];
        snprintf(m->key, sizeof(m->key), "%s", kv->string);
        snprintf(m->value, sizeof(m->value), "%s", kv->valuestring);
    }
    return 0;
}

/* Every entry valid; every tensor the caller asked for present with its dtype and shape; data read. */
static int load_tensors(const char *path, int fd, const cJSON *root, uint64_t data_start, uint64_t data_size,
                        ct_ckpt *ckpt, ct_error *err)
{
    const cJSON *e;
    ct_ckpt_tensor got;
    uint64_t begin, end;
    int rc;

    if ((rc = check_layout(path, root, data_size, err)))
        return rc;
    for (int i = 0; i < ckpt->n_tensors; i++) {
        ct_ckpt_tensor *want = &ckpt->tensors[i];
        char ws[96], gs[96];

        e = cJSON_GetObjectItemCaseSensitive(root, want->name);
        if (!e) {
            ct_error_set(err, CT_EFORMAT, "ckpt-missing", "%s: has no tensor %s", path, want->name);
            return ct_error_hint(err, "the checkpoint was written for another model or optimizer "
                                      "(compare --model, --model-config and --optimizer with the run that wrote it)");
        }
        parse_entry(path, e, data_size, &got, &begin, &end, err);
        shape_str(want->shape, want->ndim, ws, sizeof(ws));
        shape_str(got.shape, got.ndim, gs, sizeof(gs));
        if (got.dtype != want->dtype || strcmp(ws, gs)) {
            ct_error_set(err, CT_EFORMAT, "ckpt-shape", "%s: tensor %s is %s %s, the model expects %s %s", path,
                         want->name, ct_ckpt_dtype_name(got.dtype), gs, ct_ckpt_dtype_name(want->dtype), ws);
            return ct_error_hint(err, "the checkpoint was written for another model shape: use the --model-config "
                                      "of the run that wrote it");
        }
        if (got.nbytes != want->nbytes)
            return ct_error_set(err, CT_EINTERNAL, "ckpt-tensor", "%s: tensor %s: buffer of %zu bytes for %zu",
                                path, want->name, want->nbytes, got.nbytes);
        if (read_at(fd, want->data, want->nbytes, (off_t)(data_start + begin)))
            return ct_error_set(err, CT_EFORMAT, "ckpt-truncated", "%s: tensor %s: cannot read its data: %s",
                                path, want->name, errno ? strerror(errno) : "file too short");
        ckpt->digest = digest_add(ckpt->digest, want->data, want->nbytes);
    }
    return 0;
}

/* Every entry valid (check_layout); then each tensor's name, dtype, shape and size into ckpt, data
 * NULL, in the header's order. */
static int list_tensors(const char *path, const cJSON *root, uint64_t data_size, ct_ckpt *ckpt, ct_error *err)
{
    const cJSON *e;
    uint64_t begin, end;
    int rc;

    if ((rc = check_layout(path, root, data_size, err)))
        return rc;
    ckpt->n_tensors = 0;
    cJSON_ArrayForEach(e, root) {
        ct_ckpt_tensor *t = &ckpt->tensors[ckpt->n_tensors];

        if (!strcmp(e->string, "__metadata__"))
            continue;
        if (ckpt->n_tensors == CT_CKPT_MAX_TENSORS)
            return ct_error_set(err, CT_EFORMAT, "ckpt-header", "%s: more than %d tensors", path, CT_CKPT_MAX_TENSORS);
        if (strlen(e->string) >= sizeof(t->name))
            return ct_error_set(err, CT_EFORMAT, "ckpt-header", "%s: tensor name %.64s... is longer than %zu "
                                "characters", path, e->string, sizeof(t->name) - 1);
        memset(t, 0, sizeof(*t));
        snprintf(t->name, sizeof(t->name), "%s", e->string);
        if ((rc = parse_entry(path, e, data_size, t, &begin, &end, err)))
            return rc;
        ckpt->n_tensors++;
    }
    return 0;
}

static int st_read(const char *path, ct_ckpt *ckpt, int list, ct_error *err)
{
    unsigned char len8[8];
    uint64_t hlen = 0;
    struct stat st;
    char *header = NULL;
    cJSON *root = NULL;
    int fd, rc;

    memset(&st, 0, sizeof(st));
    /* A FIFO or a device named as a checkpoint is refused, not waited on. */
    fd = ct_fs_open_input(path, "checkpoint", err);
    if (fd < 0)
        return err->code;
    if (fstat(fd, &st) || st.st_size < 8 || read_at(fd, len8, 8, 0)) {
        rc = ct_error_set(err, CT_EFORMAT, "ckpt-truncated", "%s: not a safetensors file (%lld bytes, "
                          "shorter than its 8-byte header length)", path, (long long)st.st_size);
        goto out;
    }
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)len8[i] << (8 * i);
    if (hlen > HEADER_MAX && hlen <= (uint64_t)st.st_size - 8) {
        rc = ct_error_set(err, CT_EFORMAT, "ckpt-header", "%s: header of %llu bytes is larger than ctrain reads "
                          "(%llu bytes)", path, (unsigned long long)hlen, (unsigned long long)HEADER_MAX);
        ct_error_hint(err, "a ctrain checkpoint's header is a few KiB: this file was not written by ctrain fit");
        goto out;
    }
    if (hlen < 2 || hlen > (uint64_t)st.st_size - 8) {
        rc = ct_error_set(err, CT_EFORMAT, "ckpt-header", "%s: header length %llu is impossible for a file of "
                          "%lld bytes (truncated or not a safetensors file)", path, (unsigned long long)hlen,
                          (long long)st.st_size);
        goto out;
    }
    if (!(header = malloc(hlen)) || read_at(fd, header, hlen, 8)) {
        rc = ct_error_set(err, CT_EIO, "ckpt-read", "%s: cannot read its header", path);
        goto out;
    }
    if (json_values_bound(header, hlen) > VALUES_MAX) {
        rc = ct_error_set(err, CT_EFORMAT, "ckpt-header", "%s: the header holds more than %d JSON values", path,
                          VALUES_MAX);
        ct_error_hint(err, "a ctrain checkpoint's header holds a few hundred: this file was not written by ctrain fit");
        goto out;
    }
    if (json_control_char(header, hlen)) {
        rc = ct_error_set(err, CT_EFORMAT, "ckpt-header", "%s: a name or value in the header holds a control "
                          "character (e.g. \\u0000, which would cut a tensor's name short)", path);
        ct_error_hint(err, "this file was not written by ctrain fit; names are printable text");
        goto out;
    }
    root = cJSON_ParseWithLength(header, hlen);
    if (!cJSON_IsObject(root)) {
        rc = ct_error_set(err, CT_EFORMAT, "ckpt-header", "%s: the header is not a JSON object (corrupt file)",
                          path);
        goto out;
    }
    ckpt->header_digest = digest_add(digest_add(0xcbf29ce484222325ULL, len8, 8), header, hlen);
    ckpt->digest = ckpt->header_digest;
    if ((rc = read_metadata(path, cJSON_GetObjectItemCaseSensitive(root, "__metadata__"), ckpt, err)))
        goto out;
    if (list)
        rc = list_tensors(path, root, (uint64_t)st.st_size - 8 - hlen, ckpt, err);
    else
        rc = load_tensors(path, fd, root, 8 + hlen, (uint64_t)st.st_size - 8 - hlen, ckpt, err);
out:
    cJSON_Delete(root);
    free(header);
    close(fd);
    return rc;
}

static int st_load(const char *path, ct_ckpt *ckpt, ct_error *err) { return st_read(path, ckpt, 0, err); }
static int st_list(const char *path, ct_ckpt *ckpt, ct_error *err) { return st_read(path, ckpt, 1, err); }

const struct ct_checkpoint_io_ops ct_checkpoint_io_safetensors = {
    .save = st_save,
    .load = st_load,
    .list = st_list,
};
