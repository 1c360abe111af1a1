/* SPDX-License-Identifier: BSD-3-Clause */
/* A model's weights in Hugging Face's layout, read and written through safetensors checkpoint IO;
 * see engine/checkpoint/hf_io.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/checkpoint/format.h"
#include "engine/checkpoint/hf_io.h"
#include "engine/checkpoint/meta.h"
#include "engine/nn/bf16_inline.h"
#include "engine/util/fsutil.h"

#define CONFIG_JSON_MAX (1 << 20)

static const struct ct_checkpoint_io_ops *io(void) { return &ct_checkpoint_io_safetensors; }

/* DIR/config.json beside path ("config.json" for a bare file name). */
static int config_path(const char *path, char *out, size_t size)
{
    const char *slash = strrchr(path, '/');
    int n = slash ? snprintf(out, size, "%.*s/config.json", (int)(slash - path), path)
                  : snprintf(out, size, "config.json");

    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* The config.json beside path, malloc'd; NULL with *rc 0 when there is none. */
static char *read_config_json(const char *path, int *rc, ct_error *err)
{
    char cpath[4200], *text = NULL;
    FILE *f = NULL;
    long len;
    int fd;

    *rc = 0;
    if (config_path(path, cpath, sizeof(cpath)))
        return NULL;
    /* A FIFO or device named config.json is refused, not waited on; an absent one is no config. */
    if ((fd = ct_fs_open_input(cpath, "--init-from's config", err)) < 0 || !(f = fdopen(fd, "rb"))) {
        if (fd >= 0)
            close(fd);
        if (fd >= 0 || err->code != CT_ENOENT)
            *rc = fd >= 0 ? ct_error_set(err, CT_ENOMEM, "", "out of memory reading %s", cpath) : err->code;
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || len > CONFIG_JSON_MAX || fseek(f, 0, SEEK_SET) ||
        !(text = calloc(1, (size_t)len + 1)) || fread(text, 1, (size_t)len, f) != (size_t)len) {
        *rc = ct_error_set(err, CT_EFORMAT, "init-from-config-json", "%s: cannot read it (or larger than %d bytes)",
                           cpath, CONFIG_JSON_MAX);
        free(text);
        text = NULL;
    }
    fclose(f);
    return text;
}

/* The model's parser sees config.json's text, not where it lies: its messages say "config.json";
 * here they name the file (the one beside --init-from's checkpoint). */
static void name_config(const char *path, ct_error *err)
{
    static const char *const says[] = { "the config.json beside the --init-from checkpoint", "config.json" };
    char cpath[4200], msg[sizeof(err->msg)];

    if (config_path(path, cpath, sizeof(cpath)))
        return;
    for (int i = 0; i < 2; i++)
        if (!strncmp(err->msg, says[i], strlen(says[i]))) {
            snprintf(msg, sizeof(msg), "%s%s", cpath, err->msg + strlen(says[i]));
            ct_str_copy(err->msg, sizeof(err->msg), msg);
            return;
        }
}

/* The file's tensors without data (list), with "--init-from" naming the file in errors. */
static int list_file(const char *path, ct_ckpt *c, ct_error *err)
{
    struct stat st;
    int rc;

    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        ct_error_set(err, CT_EINVAL, "init-from", "--init-from %s is a directory", path);
        return ct_error_hint(err, "give the model.safetensors inside it");
    }
    if ((rc = io()->list(path, c, err))) {
        ct_error_prefix(err, "--init-from: ");
        if (rc == CT_ENOENT) { /* a flag naming a file that is not there: bad input */
            err->code = rc = CT_EINVAL;
            ct_error_hint(err, "give a Hugging Face model.safetensors (GPT-2: transformer.* tensors)");
        }
    }
    return rc;
}

/* The class's hf_config over the file's tensors and its config.json; a model without one is
 * refused after the file is read (a missing or unreadable file is named first, as it always was). */
static int class_config(const ct_registry_entry *model, const ct_model_file_tensor *file, int n, const char *json,
                        ct_config *cfg, ct_error *err)
{
    const struct ct_model_class *cls = model->ops;

    if (!cls || !cls->hf_config) {
        ct_error_set(err, CT_EINVAL, "model-no-hf", "--init-from: model %s has no Hugging Face layout to load",
                     model->name);
        return ct_error_hint(err, "--init-from reads GPT-2 checkpoints: use --model gpt");
    }
    return cls->hf_config(file, n, json, cfg, err);
}

int ct_hf_model_config(const ct_registry_entry *model, const char *path, ct_config *cfg, ct_error *err)
{
    ct_ckpt *c = calloc(1, sizeof(*c));
    ct_model_file_tensor *file = NULL;
    char *json = NULL;
    int rc;

    if (!c)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory reading %s", path);
    if ((rc = list_file(path, c, err)))
        goto out;
    if (!(file = calloc((size_t)c->n_tensors + 1, sizeof(*file)))) {
        rc = ct_error_set(err, CT_ENOMEM, "", "out of memory reading %s", path);
        goto out;
    }
    for (int i = 0; i < c->n_tensors; i++) {
        file[i].name = c->tensors[i].name;
        file[i].ndim = c->tensors[i].ndim;
        file[i].shape = c->tensors[i].shape;
    }
    json = read_config_json(path, &rc, err);
    if (!rc && (rc = class_config(model, file, c->n_tensors, json, cfg, err)) && json)
        name_config(path, err);
out:
    free(json);
    free(file);
    free(c);
    return rc;
}

/* --- load --------------------------------------------------------------------------------------- */

/* The file's entry for the model's name: the name itself, or without its first component (a
 * checkpoint of the base model: GPT2Model's "wte.weight" for GPT2LMHeadModel's
 * "transformer.wte.weight", as from_pretrained allows). */
static const ct_ckpt_tensor *find_entry(const ct_ckpt *c, const char *name)
{
    const char *dot = strchr(name, '.');

    for (int i = 0; i < c->n_tensors; i++)
        if (!strcmp(c->tensors[i].name, name))
            return &c->tensors[i];
    for (int i = 0; dot && i < c->n_tensors; i++)
        if (!strcmp(c->tensors[i].name, dot + 1))
            return &c->tensors[i];
    return NULL;
}

/* One tensor of the file into buf (the file's own shape). */
static int read_one(const char *path, const ct_ckpt_tensor *entry, float *buf, ct_error *err)
{
    ct_ckpt *one = calloc(1, sizeof(*one));
    int rc;

    if (!one)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory loading %s", path);
    one->n_tensors = 1;
    one->tensors[0] = *entry;
    one->tensors[0].data = buf;
    rc = io()->load(path, one, err);
    free(one);
    return rc;
}

/* The shape the file must have for model tensor t under map (transposed: [in, out]). */
static void file_shape(const ct_tensor *t, const ct_model_hf_tensor *map, int64_t *shape)
{
    shape[0] = t->shape[0];
    shape[1] = t->ndim > 1 ? t->shape[1] : 0;
    if (map->transposed && t->ndim == 2) {
        shape[0] = t->shape[1];
        shape[1] = t->shape[0];
    }
}

static int check_entry(const char *path, const ct_tensor *t, const ct_model_hf_tensor *map, const ct_ckpt_tensor *e,
                       ct_error *err)
{
    int64_t want[2];
    int ok;

    file_shape(t, map, want);
    if (e->dtype != CT_DTYPE_F32) {
        ct_error_set(err, CT_EFORMAT, "init-from-dtype", "--init-from %s: tensor %s is not float32", path, e->name);
        return ct_error_hint(err, "save the model in float32 (model.float().save_pretrained(DIR))");
    }
    ok = e->ndim == t->ndim && e->shape[0] == want[0] && (t->ndim < 2 || e->shape[1] == want[1]);
    /* a longer first dimension is allowed where the model takes the first rows (positions) */
    if (!ok && map->prefix_rows && e->ndim == t->ndim && e->shape[0] >= want[0] && (t->ndim < 2 || e->shape[1] == want[1]))
        ok = 1;
    if (!ok) {
        ct_error_set(err, CT_EFORMAT, "init-from-shape", "--init-from %s: tensor %s is %lldx%lld, the model's %s "
                     "needs %lldx%lld", path, e->name, (long long)e->shape[0], (long long)(e->ndim > 1 ? e->shape[1] : 1),
                     t->name, (long long)want[0], (long long)(t->ndim > 1 ? want[1] : 1));
        return ct_error_hint(err, "the checkpoint is another configuration: leave the shape keys out of --model-config");
    }
    return 0;
}

/* Element i of model tensor t as fp32 (Hugging Face's files are fp32; a 64-true model's fp64, a
 * bf16-true model's bf16, exact in fp32). */
static float value_at(const ct_model *m, const ct_tensor *t, size_t i)
{
    if (m->param_dtype == CT_DTYPE_BF16)
        return ct_bf16_load(((const uint16_t *)t->data)[i]);
    return m->param_dtype == CT_DTYPE_F64 ? (float)((const double *)t->data)[i] : ((const float *)t->data)[i];
}

/* Model tensor t from the file's data f (the file's layout), into fp32 dst. */
static void place(float *dst, const ct_tensor *t, const ct_model_hf_tensor *map, const float *f)
{
    if (map->transposed && t->ndim == 2) {
        size_t rows = (size_t)t->shape[0], cols = (size_t)t->shape[1];

        for (size_t r = 0; r < rows; r++)
            for (size_t k = 0; k < cols; k++)
                dst[r * cols + k] = f[k * rows + r];
    } else {
        memcpy(dst, f, t->numel * sizeof(float)); /* prefix rows: the first numel values */
    }
}

/* 1 when tensor t holds exactly the fp32 values f (a tied tensor of the file). */
static int same_values(const ct_model *m, const ct_tensor *t, const float *f)
{
    for (size_t i = 0; i < t->numel; i++)
        if (value_at(m, t, i) != f[i])
            return 0;
    return 1;
}

/* Every tensor of the file is one the model maps, one tied to the model's, or a buffer. */
static int check_extras(const ct_model *host, const char *path, const ct_ckpt *c, const char *used, float *scratch,
                        ct_error *err)
{
    int rc;

    for (int i = 0; i < c->n_tensors; i++) {
        const ct_ckpt_tensor *e = &c->tensors[i];
        int tied;

        if (used[i])
            continue;
        tied = ct_model_hf_extra(host, e->name);
        if (tied == CT_MODEL_HF_BUFFER)
            continue;
        if (tied < 0 || tied >= host->n_tensors) {
            ct_error_set(err, CT_EFORMAT, "init-from-unknown", "--init-from %s: tensor %s is not part of model %s",
                         path, e->name, host->name);
            return ct_error_hint(err, "give a checkpoint of the same architecture (GPT-2 for gpt)");
        }
        if (e->dtype != CT_DTYPE_F32 || e->nbytes != host->tensors[tied].numel * sizeof(float) ||
            (rc = read_one(path, e, scratch, err)) != 0 || !same_values(host, &host->tensors[tied], scratch)) {
            ct_error_set(err, CT_EFORMAT, "init-from-untied", "--init-from %s: tensor %s differs from %s, to which "
                         "model %s ties it", path, e->name, host->tensors[tied].name, host->name);
            return ct_error_hint(err, "model %s has no separate output layer: give a checkpoint with tied weights",
                                 host->name);
        }
    }
    return 0;
}

int ct_hf_load(ct_model *host, const char *path, ct_error *err)
{
    ct_ckpt *c = calloc(1, sizeof(*c));
    char *used = NULL;
    float *scratch = NULL, *placed = NULL;
    size_t biggest = 0, widest = 0;
    int rc;

    if (!c)
        return ct_error_set(err, CT_ENOMEM, "", "out of memory loading %s", path);
    if (!ct_model_has_hf(host)) {
        ct_error_set(err, CT_EINVAL, "model-no-hf", "--init-from: model %s has no Hugging Face layout", host->name);
        rc = ct_error_hint(err, "--init-from reads GPT-2 checkpoints: use --model gpt");
        goto out;
    }
    if ((rc = list_file(path, c, err)))
        goto out;
    for (int i = 0; i < c->n_tensors; i++)
        if (c->tensors[i].nbytes > biggest)
            biggest = c->tensors[i].nbytes;
    for (int i = 0; i < host->n_tensors; i++)
        if (host->tensors[i].numel > widest)
            widest = host->tensors[i].numel;
    if (!(used = calloc((size_t)c->n_tensors + 1, 1)) || !(scratch = malloc(biggest ? biggest : 1)) ||
        !(placed = malloc(widest * sizeof(float) + 1))) {
        rc = ct_error_set(err, CT_ENOMEM, "", "out of memory loading %s", path);
        goto out;
    }
    for (int i = 0; i < host->n_tensors; i++) {
        const ct_tensor *t = &host->tensors[i];
        const ct_ckpt_tensor *e;
        ct_model_hf_tensor map;

        if ((rc = ct_model_hf_map(host, i, &map))) {
            rc = ct_error_set(err, CT_EINTERNAL, "init-from", "model %s: no Hugging Face name for %s", host->name,
                              t->name);
            goto out;
        }
        if (!(e = find_entry(c, map.name))) {
            ct_error_set(err, CT_EFORMAT, "init-from-missing", "--init-from %s has no tensor %s (model %s's %s)", path,
                         map.name, host->name, t->name);
            rc = ct_error_hint(err, "give a checkpoint of the same architecture (GPT-2 for gpt)");
            goto out;
        }
        used[e - c->tensors] = 1;
        if ((rc = check_entry(path, t, &map, e, err)) || (rc = read_one(path, e, scratch, err)))
            goto out;
        /* fp32 values, widened where the model stores fp64 (64-true: Lightning's load, then double()),
         * rounded where it stores bf16 (bf16-true: load, then to(torch.bfloat16)) */
        place(placed, t, &map, scratch);
        for (size_t k = 0; k < t->numel; k++) {
            if (host->param_dtype == CT_DTYPE_F64)
                ((double *)t->data)[k] = placed[k];
            else if (host->param_dtype == CT_DTYPE_BF16)
                ((uint16_t *)t->data)[k] = ct_bf16_store(placed[k]);
            else
                ((float *)t->data)[k] = placed[k];
        }
    }
    rc = check_extras(host, path, c, used, scratch, err);
out:
    free(placed);
    free(scratch);
    free(used);
    free(c);
    return rc;
}

/* --- save --------------------------------------------------------------------------------------- */

static int make_dir(const char *dir, ct_error *err)
{
    struct stat st;

    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)))
        return 0;
    ct_error_set(err, CT_EINVAL, "export-output", "--output-dir %s: %s", dir,
                 errno == EEXIST ? "exists and is not a directory" : strerror(errno));
    return ct_error_hint(err, "give a directory you can write (its parent must exist)");
}

int ct_hf_save(const ct_model *host, const char *dir, ct_error *err)
{
    ct_ckpt *c = calloc(1, sizeof(*c));
    float *copy = malloc(host->num_params * sizeof(float) + 1);
    char path[4200], json[8192];
    int rc = 0;

    if (!c || !copy) {
        rc = ct_error_set(err, CT_ENOMEM, "", "out of memory exporting model %s", host->name);
        goto out;
    }
    if (!ct_model_has_hf(host) || ct_model_hf_config_json(host, json, sizeof(json))) {
        ct_error_set(err, CT_EINVAL, "model-no-hf", "export --format hf: model %s has no Hugging Face layout",
                     host->name);
        rc = ct_error_hint(err, "--format hf writes GPT-2 checkpoints (--model gpt)");
        goto out;
    }
    if (host->n_tensors > CT_CKPT_MAX_TENSORS) {
        rc = ct_error_set(err, CT_EINVAL, "ckpt-too-many-tensors", "model %s has %d tensors; a checkpoint holds at "
                          "most %d", host->name, host->n_tensors, CT_CKPT_MAX_TENSORS);
        goto out;
    }
    for (int i = 0; i < host->n_tensors; i++) {
        const ct_tensor *t = &host->tensors[i];
        ct_ckpt_tensor *o = &c->tensors[c->n_tensors++];
        ct_model_hf_tensor map;
        float *dst = copy + t->offset;

        if (ct_model_hf_map(host, i, &map)) {
            rc = ct_error_set(err, CT_EINTERNAL, "export", "model %s: no Hugging Face name for %s", host->name,
                              t->name);
            goto out;
        }
        snprintf(o->name, sizeof(o->name), "%s", map.name);
        o->dtype = CT_DTYPE_F32;
        o->ndim = t->ndim;
        file_shape(t, &map, o->shape);
        o->data = dst;
        o->nbytes = t->numel * sizeof(float);
        if (map.transposed && t->ndim == 2) {
            size_t rows = (size_t)t->shape[0], cols = (size_t)t->shape[1];

            for (size_t r = 0; r < rows; r++)
                for (size_t k = 0; k < cols; k++)
                    dst[k * rows + r] = value_at(host, t, r * cols + k);
        } else {
            /* fp32 files; a 64-true model's values rounded to fp32, a bf16-true model's widened */
            for (size_t k = 0; k < t->numel; k++)
                dst[k] = value_at(host, t, k);
        }
    }
    ct_ckpt_meta_hf(c);
    if ((rc = make_dir(dir, err)))
        goto out;
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    if ((rc = io()->save(path, c, err)))
        goto out;
    snprintf(path, sizeof(path), "%s/config.json", dir);
    rc = ct_fs_write_atomic(path, json, strlen(json), err);
out:
    free(copy);
    free(c);
    return rc;
}
