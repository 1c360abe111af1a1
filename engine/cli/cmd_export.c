/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain export — a ctrain checkpoint's weights in another library's layout. --format hf: a
 * Hugging Face model directory (model.safetensors in GPT2LMHeadModel's names and Conv1D layout,
 * config.json) that transformers' from_pretrained loads. */
#include <stdio.h>
#include <string.h>

#include "ctrain/engine.h"
#include "ctrain/model.h"
#include "engine/checkpoint/ckpt_model.h"
#include "engine/cli/commands.h"
#include "engine/checkpoint/hf_io.h"

static void export_usage(FILE *out)
{
    fprintf(out,
            "usage: ctrain export --ckpt-path FILE --format hf --output-dir DIR\n"
            "\n"
            "Write the weights of a checkpoint from ctrain fit in another library's layout.\n"
            "\n"
            "  --ckpt-path FILE   a checkpoint written by ctrain fit (best.safetensors, last.safetensors;\n"
            "                     a file, or the directory of fsdp's sharded checkpoint)\n"
            "  --format hf        Hugging Face transformers: DIR/model.safetensors (GPT2LMHeadModel's\n"
            "                     transformer.* names, Conv1D weights [in, out], the tied lm_head left out)\n"
            "                     and DIR/config.json; GPT2LMHeadModel.from_pretrained(DIR) loads it.\n"
            "                     Models: gpt.\n"
            "  --output-dir DIR   where the files go (created when missing; each file replaced atomically)\n");
}

int ct_cmd_export(int argc, char **argv)
{
    static const char *const flags[] = { "--ckpt-path", "--format", "--output-dir", "--help", NULL };
    const char *ckpt = NULL, *format = NULL, *dir = NULL, *v;
    ct_model *m = NULL;
    ct_error err;
    int missing, rc = CT_EINVAL;

    ct_error_clear(&err);
    for (int i = 1; i < argc; i++) {
        missing = 0;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            export_usage(stdout);
            return 0;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--ckpt-path", &missing))) {
            ckpt = v;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--format", &missing))) {
            format = v;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--output-dir", &missing))) {
            dir = v;
        } else if (missing) {
            ct_error_set(&err, CT_EINVAL, "flag-missing-value", "export: %s needs a value", argv[i]);
            ct_error_hint(&err, "ctrain export --help lists the flags");
            goto fail;
        } else {
            rc = ct_cli_flag_unknown("export", argv[i], flags, &err);
            goto fail;
        }
    }
    if (!ckpt || !format || !dir) {
        ct_error_set(&err, CT_EINVAL, "export-usage", "export needs %s", !ckpt ? "--ckpt-path FILE"
                     : !format ? "--format hf" : "--output-dir DIR");
        ct_error_hint(&err, "ctrain export --ckpt-path runs/gpt/best.safetensors --format hf --output-dir gpt-hf");
        goto fail;
    }
    if (strcmp(format, "hf")) {
        ct_error_set(&err, CT_EINVAL, "flag-value", "export: --format '%s' is not a format ctrain writes", format);
        ct_error_hint(&err, "--format hf (Hugging Face transformers)");
        goto fail;
    }
    if (!dir[0]) {
        ct_error_set(&err, CT_EINVAL, "flag-value", "export: --output-dir is empty");
        ct_error_hint(&err, "give the directory the model goes to");
        goto fail;
    }
    ct_engine_init();
    if ((rc = ct_ckpt_model_load(ckpt, "export", &m, &err)) || (rc = ct_hf_save(m, dir, &err)))
        goto fail;
    printf("ctrain: export: %s (%s %s) -> %s/model.safetensors, %s/config.json\n", ckpt, m->name, m->describe, dir,
           dir);
    ct_model_free(m);
    return 0;
fail:
    ct_model_free(m);
    ct_error_print(stderr, &err);
    return ct_error_exit_status(rc ? rc : CT_EINVAL);
}
