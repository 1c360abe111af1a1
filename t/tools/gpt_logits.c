/* SPDX-License-Identifier: BSD-3-Clause */
/* gpt_logits hf|ckpt FILE TOKENS
 *
 * The logits a model gives after every prefix of TOKENS (comma-separated ids), one line per
 * prefix length (1..n), space-separated, for t/gpt_hf.py to compare with Hugging Face's
 * GPT2LMHeadModel. "hf": FILE is a Hugging Face model.safetensors, loaded as `ctrain fit
 * --init-from` loads it (the model config from the file, then the weights); "ckpt": FILE is a
 * checkpoint of ctrain fit, loaded as `ctrain generate` and `ctrain export` load it. Both through
 * the model seam's next_token_logits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/engine.h"
#include "ctrain/model.h"
#include "ctrain/registry.h"
#include "engine/checkpoint/ckpt_model.h"
#include "engine/checkpoint/hf_io.h"

static int from_hf(const char *path, ct_model **m, ct_error *err)
{
    const ct_registry_entry *gpt = ct_registry_find(CT_REG_MODEL, "gpt");
    ct_data_info data;
    ct_config cfg;
    char config[CT_CONFIG_TEXT_MAX];
    int rc;

    memset(&data, 0, sizeof(data));
    data.x.dtype = data.y.dtype = CT_DTYPE_I32;
    data.x.ndim = data.y.ndim = 1;
    if (!gpt)
        return ct_error_set(err, CT_EINTERNAL, "", "gpt_logits: no gpt model is registered");
    if ((rc = ct_config_parse(gpt->config, "--model-config", "model gpt", "", &cfg, err)) ||
        (rc = ct_hf_model_config(gpt, path, &cfg, err)) || (rc = ct_model_create_config(gpt, &cfg, &data, 1, m, err)))
        return rc;
    fprintf(stderr, "gpt_logits: %s\n", ct_config_print(&cfg, config, sizeof(config)));
    return ct_hf_load(*m, path, err);
}

int main(int argc, char **argv)
{
    int32_t tokens[4096];
    ct_model *m = NULL;
    float *logits;
    ct_error err;
    int n = 0, rc;
    char *save = NULL, *list;

    if (argc != 4 || (strcmp(argv[1], "hf") && strcmp(argv[1], "ckpt")))
        return fprintf(stderr, "usage: gpt_logits hf|ckpt FILE TOKENS\n"), 2;
    ct_error_clear(&err);
    ct_engine_init();
    rc = !strcmp(argv[1], "hf") ? from_hf(argv[2], &m, &err) : ct_ckpt_model_load(argv[2], "gpt_logits", &m, &err);
    if (rc) {
        ct_error_print(stderr, &err);
        ct_model_free(m);
        return 1;
    }
    list = strdup(argv[3]);
    for (char *t = strtok_r(list, ",", &save); t && n < 4096; t = strtok_r(NULL, ",", &save))
        tokens[n++] = atoi(t);
    free(list);
    logits = malloc((size_t)m->info.vocab * sizeof(float));
    for (int len = 1; len <= n && rc == 0; len++) {
        if ((rc = ct_model_next_token_logits(m, tokens, len, logits, &err)))
            break;
        for (int v = 0; v < m->info.vocab; v++)
            printf("%s%.9g", v ? " " : "", logits[v]);
        printf("\n");
    }
    if (rc)
        ct_error_print(stderr, &err);
    free(logits);
    ct_model_free(m);
    return rc ? 1 : 0;
}
