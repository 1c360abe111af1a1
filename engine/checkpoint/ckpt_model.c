/* SPDX-License-Identifier: BSD-3-Clause */
/* The model a ctrain checkpoint holds, rebuilt outside a run (ctrain generate, ctrain export): the
 * model and its --model-config from the checkpoint's metadata, the weights from its tensors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ctrain/checkpoint_io.h"
#include "ctrain/model.h"
#include "engine/checkpoint/ckpt_model.h"
#include "engine/checkpoint/format.h"
#include "engine/checkpoint/meta.h"
#include "engine/checkpoint/sharded.h"

/* The model's name and --model-config as the run gave them (metadata "flags"). */
static int model_of(const char *path, const ct_ckpt_record *r, char *name, size_t nsize, char *config, size_t csize,
                    ct_error *err)
{
    const char *flags = r->text[CT_CKPT_F_FLAGS];
    cJSON *j = flags ? cJSON_Parse(flags) : NULL;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model");
    const cJSON *mc = cJSON_GetObjectItemCaseSensitive(j, "model_config");
    int rc = 0;

    if ((rc = ct_ckpt_record_format_check(r, "--ckpt-path ", path, err))) {
        /* not ctrain's: said */
    } else if (!cJSON_IsString(m) || !cJSON_IsString(mc)) {
        rc = ct_error_set(err, CT_EFORMAT, "ckpt-meta", "--ckpt-path %s: its metadata does not name the model", path);
    } else {
        snprintf(name, nsize, "%s", m->valuestring);
        snprintf(config, csize, "%s", mc->valuestring);
    }
    cJSON_Delete(j);
    return rc;
}

int ct_ckpt_model_load(const char *path, const char *command, ct_model **out, ct_error *err)
{
    const struct ct_checkpoint_io_ops *io = &ct_checkpoint_io_safetensors;
    ct_ckpt *c = calloc(1, sizeof(*c));
    ct_ckpt_record *r = malloc(sizeof(*r));
    ct_data_info data;
    ct_model *m = NULL;
    char name[64], config[512], want[320];
    const char *model;
    int stored, sharded = 0;
    struct stat st;
    int rc;

    *out = NULL;
    if (!c || !r) {
        rc = ct_error_set(err, CT_ENOMEM, "", "out of memory reading %s", path);
        goto out;
    }
    /* a directory: a sharded checkpoint (its index says which model), or a run's directory */
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        char index[1300];

        snprintf(index, sizeof(index), "%s/%s", path, CT_CKPT_SHARDED_INDEX);
        if (access(index, F_OK)) {
            ct_error_set(err, CT_EINVAL, "ckpt-path", "--ckpt-path %s is a directory without %s", path,
                         CT_CKPT_SHARDED_INDEX);
            rc = ct_error_hint(err, "give a checkpoint in it, e.g. %s/best.safetensors", path);
            goto out;
        }
        sharded = 1;
    }
    /* the header and metadata only: which model to build */
    if ((rc = sharded ? ct_ckpt_sharded_meta(io, path, c, err) : io->load(path, c, err))) {
        ct_error_prefix(err, "--ckpt-path: ");
        if (rc == CT_ENOENT) { /* a flag naming a file that is not there: bad input */
            err->code = rc = CT_EINVAL;
        }
        if (!err->hint[0])
            ct_error_hint(err, "give --ckpt-path the best.safetensors or last.safetensors of a ctrain fit run");
        goto out;
    }
    ct_ckpt_record_read(c, r);
    if ((rc = model_of(path, r, name, sizeof(name), config, sizeof(config), err)))
        goto out;
    /* A model used on its own sees token windows of its own length: a language model's input. */
    memset(&data, 0, sizeof(data));
    data.x.dtype = data.y.dtype = CT_DTYPE_I32;
    data.x.ndim = data.y.ndim = 1;
    if ((rc = ct_model_create(name, config, &data, 1, &m, err))) {
        if (!strcmp(err->id, "data-model-mismatch")) {
            ct_error_set(err, CT_EINVAL, "model-no-logits", "%s: model %s (from %s) does not offer %s: it is not a "
                         "language model on token windows", command, name, path,
                         strcmp(command, "export") ? "next-token logits" : "a Hugging Face layout");
            rc = ct_error_hint(err, "%s works on models such as gpt", command);
        } else { /* the shape is the checkpoint's (a model too large for one process): name it */
            ct_error_prefix(err, "--ckpt-path %s: ", path);
        }
        goto out;
    }
    /* A 64-true run's checkpoint holds F64 tensors, a bf16-true run's BF16: the model is rebuilt in
     * that type. */
    stored = ct_ckpt_dtype_parse(r->text[CT_CKPT_F_PARAM_DTYPE]);
    if ((stored == CT_DTYPE_F64 || stored == CT_DTYPE_BF16) && (rc = ct_model_set_param_dtype(m, stored, err)))
        goto out;
    model = r->text[CT_CKPT_F_MODEL];
    snprintf(want, sizeof(want), "%s %s", m->name, m->describe);
    if (!model || strcmp(model, want)) {
        rc = ct_error_set(err, CT_EFORMAT, "ckpt-model", "--ckpt-path %s: metadata model %s, its flags build %s", path,
                          model ? model : "(missing)", want);
        goto out;
    }
    if (m->n_tensors > CT_CKPT_MAX_TENSORS) {
        rc = ct_error_set(err, CT_EFORMAT, "ckpt-too-many-tensors", "model %s has %d tensors", m->name, m->n_tensors);
        goto out;
    }
    memset(c, 0, sizeof(*c));   /* r->text pointed into it: read no more */
    ct_ckpt_model_tensors_add(c, m);
    if (sharded && m->param_dtype != CT_DTYPE_F32) {
        rc = ct_error_set(err, CT_EFORMAT, "ckpt-sharded", "--ckpt-path %s: a sharded checkpoint of %s parameters",
                          path, ct_ckpt_dtype_name(m->param_dtype) ? ct_ckpt_dtype_name(m->param_dtype) : "non-F32");
        goto out;
    }
    /* sharded: every rank file read, checked against the index and put in the model's array */
    rc = sharded ? ct_ckpt_sharded_load(io, path, c, m->params, m->num_params, err) : io->load(path, c, err);
    if (rc || (rc = ct_ckpt_check_finite(path, c, err)))
        goto out;
    *out = m;
    m = NULL;
out:
    ct_model_free(m);
    free(r);
    free(c);
    return rc;
}
