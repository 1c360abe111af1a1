/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain generate — text from a trained language model: the checkpoint's model (through the model
 * seam's next_token_logits), a prompt, then one sampled token at a time (temperature, top-k, a seeded
 * PRNG: the same seed gives the same text). Byte tokens (vocab 256) are text; another vocabulary
 * takes and prints token ids. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/engine.h"
#include "ctrain/model.h"
#include "ctrain/rng.h"
#include "ctrain/util.h"
#include "engine/checkpoint/ckpt_model.h"
#include "engine/cli/commands.h"
#include "engine/nn/sample.h"
#include "engine/util/fsutil.h"

#define GEN_MAX_NEW    1000000
#define GEN_MAX_PROMPT (16 << 20)  /* bytes of --prompt-file */

struct gen_opts {
    const char *ckpt_path, *prompt, *prompt_file, *prompt_tokens;
    long max_new_tokens, top_k, seed;
    double temperature;
};

static void generate_usage(FILE *out)
{
    fprintf(out,
            "usage: ctrain generate --ckpt-path FILE (--prompt TEXT | --prompt-file FILE | --prompt-tokens IDS)\n"
            "                       [--max-new-tokens N] [--temperature X] [--top-k K] [--seed N]\n"
            "\n"
            "Write what a trained language model (--model gpt) continues a prompt with: the prompt, then\n"
            "N sampled tokens. Byte-level models (vocab 256, ctrain tokenize) read and write text; a model\n"
            "with another vocabulary (GPT-2's 50257 BPE tokens) takes --prompt-tokens and prints token ids.\n"
            "A prompt longer than the model's context keeps its last seq_len tokens, as generation does.\n"
            "\n"
            "  --ckpt-path FILE     a checkpoint written by ctrain fit (best.safetensors, last.safetensors;\n"
            "                       a file, or the directory of fsdp's sharded checkpoint)\n"
            "  --prompt TEXT        the text to continue\n"
            "  --prompt-file FILE   the text to continue, from a file\n"
            "  --prompt-tokens IDS  token ids to continue, comma-separated (any vocabulary)\n"
            "  --max-new-tokens N   tokens to generate (default 200)\n"
            "  --temperature X      divide the logits by X before sampling (default 1.0; 0: always the most\n"
            "                       likely token)\n"
            "  --top-k K            sample among the K most likely tokens only (default 0: all)\n"
            "  --seed N             seed of the sampling: the same seed gives the same text (default 42)\n");
}

static int bad(ct_error *err, const char *flag, const char *value, const char *what, const char *hint)
{
    ct_error_set(err, CT_EINVAL, "flag-value", "generate: %s '%s' is not %s", flag, value, what);
    return ct_error_hint(err, "%s", hint);
}

static int parse_flags(int argc, char **argv, struct gen_opts *o, int *help, ct_error *err)
{
    static const char *const flags[] = { "--ckpt-path", "--prompt", "--prompt-file", "--prompt-tokens",
                                         "--max-new-tokens", "--temperature", "--top-k", "--seed", "--help", NULL };
    const char *v;
    int missing;

    memset(o, 0, sizeof(*o));
    o->max_new_tokens = 200;
    o->temperature = 1.0;
    o->seed = 42;
    for (int i = 1; i < argc; i++) {
        missing = 0;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            *help = 1;
            return 0;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--ckpt-path", &missing))) {
            o->ckpt_path = v;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--prompt-file", &missing))) {
            o->prompt_file = v;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--prompt-tokens", &missing))) {
            o->prompt_tokens = v;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--prompt", &missing))) {
            o->prompt = v;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--max-new-tokens", &missing))) {
            if (ct_parse_long(v, 1, GEN_MAX_NEW, &o->max_new_tokens))
                return bad(err, "--max-new-tokens", v, "an integer in [1, 1000000]", "e.g. --max-new-tokens 200");
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--temperature", &missing))) {
            if (ct_parse_double(v, &o->temperature) || !(o->temperature >= 0) || o->temperature > 100)
                return bad(err, "--temperature", v, "a number in [0, 100]",
                           "1.0 samples the model as trained, lower is more conservative, 0 always takes the most "
                           "likely token");
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--top-k", &missing))) {
            if (ct_parse_long(v, 0, 1 << 30, &o->top_k))
                return bad(err, "--top-k", v, "a non-negative integer", "e.g. --top-k 40; 0 samples from every token");
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--seed", &missing))) {
            if (ct_parse_long(v, 0, LONG_MAX, &o->seed))
                return bad(err, "--seed", v, "a non-negative integer", "e.g. --seed 1");
        } else if (missing) {
            ct_error_set(err, CT_EINVAL, "flag-missing-value", "generate: %s needs a value", argv[i]);
            return ct_error_hint(err, "ctrain generate --help lists the flags");
        } else {
            return ct_cli_flag_unknown("generate", argv[i], flags, err);
        }
    }
    if (!o->ckpt_path) {
        ct_error_set(err, CT_EINVAL, "generate-usage", "generate needs --ckpt-path FILE");
        return ct_error_hint(err, "ctrain generate --ckpt-path runs/gpt/best.safetensors --prompt 'Once upon'");
    }
    if (!!o->prompt + !!o->prompt_file + !!o->prompt_tokens != 1) {
        ct_error_set(err, CT_EINVAL, "generate-usage", "generate needs %s of --prompt, --prompt-file and --prompt-tokens",
                     o->prompt || o->prompt_file || o->prompt_tokens ? "only one" : "one");
        return ct_error_hint(err, "ctrain generate --ckpt-path runs/gpt/best.safetensors --prompt 'Once upon'");
    }
    if (o->prompt && !o->prompt[0]) {
        ct_error_set(err, CT_EINVAL, "generate-prompt", "generate: --prompt is empty");
        return ct_error_hint(err, "give at least one character for the model to continue");
    }
    return 0;
}

/* The prompt's bytes (--prompt or --prompt-file) as tokens; *n the count. The file is read as every
 * input is (ct_fs_read_input): a regular file only, opened without blocking (a FIFO is refused, not
 * waited on), at most GEN_MAX_PROMPT bytes. */
static int prompt_bytes(const struct gen_opts *o, int32_t **tokens, size_t *n, ct_error *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc;

    if (o->prompt_file && (rc = ct_fs_read_input(o->prompt_file, "--prompt-file", GEN_MAX_PROMPT, &text, &len, err))) {
        if (rc == CT_ENOMEM)
            return rc;
        if (rc == CT_ENOENT || rc == CT_EFORMAT)
            err->code = CT_EINVAL;
        return ct_error_hint(err, "give a readable text file of at most 16 MiB");
    }
    if (o->prompt_file && len == 0) {
        free(text);
        ct_error_set(err, CT_EINVAL, "generate-prompt", "--prompt-file %s is empty", o->prompt_file);
        return ct_error_hint(err, "give a file with the text to continue");
    }
    if (!o->prompt_file && (text = strdup(o->prompt)))
        len = strlen(text);
    if (!text || !(*tokens = malloc(len * sizeof(int32_t)))) {
        free(text);
        return ct_error_set(err, CT_ENOMEM, "", "out of memory");
    }
    for (size_t i = 0; i < len; i++)
        (*tokens)[i] = (unsigned char)text[i];
    *n = len;
    free(text);
    return 0;
}

/* --prompt-tokens "464,3290": ids below vocab. */
static int prompt_ids(const char *list, int vocab, int32_t **tokens, size_t *n, ct_error *err)
{
    size_t cap = 1;
    char *copy = strdup(list), *save = NULL;
    long id;

    for (const char *p = list; *p; p++)
        cap += *p == ',';
    if (!copy || !(*tokens = malloc(cap * sizeof(int32_t)))) {
        free(copy);
        return ct_error_set(err, CT_ENOMEM, "", "out of memory");
    }
    *n = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (ct_parse_long(t, 0, vocab - 1, &id)) {
            ct_error_set(err, CT_EINVAL, "generate-prompt", "--prompt-tokens: '%s' is not a token id in [0, %d] "
                         "(the model's vocabulary)", t, vocab - 1);
            free(copy);
            return ct_error_hint(err, "write the ids comma-separated, e.g. --prompt-tokens 464,3290");
        }
        (*tokens)[(*n)++] = (int32_t)id;
    }
    free(copy);
    if (*n == 0) {
        ct_error_set(err, CT_EINVAL, "generate-prompt", "--prompt-tokens '%s' holds no token id", list);
        return ct_error_hint(err, "write the ids comma-separated, e.g. --prompt-tokens 464,3290");
    }
    return 0;
}

static void emit(int32_t token, int bytes, int first)
{
    if (bytes)
        putchar(token);
    else
        printf("%s%d", first ? "" : ",", token);
}

static int generate(ct_model *m, const struct gen_opts *o, int32_t *prompt, size_t n_prompt, ct_error *err)
{
    int V = m->info.vocab, T = m->info.context, bytes = V == 256;
    size_t total = n_prompt + (size_t)o->max_new_tokens;
    int32_t *seq = malloc(total * sizeof(int32_t));
    float *logits = malloc((size_t)V * sizeof(float));
    struct ct_sample_entry *scratch = malloc((size_t)V * sizeof(*scratch));
    ct_rng r;
    int rc = 0;

    if (!seq || !logits || !scratch) {
        rc = ct_error_set(err, CT_ENOMEM, "", "out of memory");
        goto out;
    }
    ct_rng_seed(&r, (uint64_t)o->seed);
    memcpy(seq, prompt, n_prompt * sizeof(int32_t));
    for (size_t i = 0; i < n_prompt; i++)
        emit(seq[i], bytes, i == 0);
    for (size_t n = n_prompt; n < total; n++) {
        /* the model sees at most its context: the last T tokens */
        size_t len = n < (size_t)T ? n : (size_t)T;

        if ((rc = ct_model_next_token_logits(m, seq + n - len, (int)len, logits, err)))
            goto out;
        seq[n] = ct_sample_token(logits, V, o->temperature, o->top_k, scratch, &r);
        emit(seq[n], bytes, 0);
        fflush(stdout);
    }
    if (!bytes || seq[total - 1] != '\n')
        putchar('\n');
out:
    free(scratch);
    free(logits);
    free(seq);
    return rc;
}

int ct_cmd_generate(int argc, char **argv)
{
    struct gen_opts o;
    ct_model *m = NULL;
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    int help = 0, rc;
    ct_error err;

    ct_error_clear(&err);
    if ((rc = parse_flags(argc, argv, &o, &help, &err)))
        goto fail;
    if (help) {
        generate_usage(stdout);
        return 0;
    }
    ct_engine_init();
    if ((rc = ct_ckpt_model_load(o.ckpt_path, "generate", &m, &err)))
        goto fail;
    if (!m->ops->next_token_logits || m->info.vocab < 1) {
        /* the seam's own refusal, naming the model */
        rc = ct_model_next_token_logits(m, NULL, 0, NULL, &err);
        goto fail;
    }
    if (o.top_k > m->info.vocab) {
        ct_error_set(&err, CT_EINVAL, "flag-value", "generate: --top-k %ld is more than the model's %d tokens", o.top_k,
                     m->info.vocab);
        ct_error_hint(&err, "use --top-k %d or less (0: all)", m->info.vocab);
        rc = CT_EINVAL;
        goto fail;
    }
    if (!o.prompt_tokens && m->info.vocab != 256) {
        ct_error_set(&err, CT_EINVAL, "generate-prompt", "generate: model %s has a vocabulary of %d tokens, not bytes: "
                     "text cannot be turned into its tokens here", m->name, m->info.vocab);
        ct_error_hint(&err, "give the prompt's token ids with --prompt-tokens (e.g. from GPT-2's tokenizer)");
        rc = CT_EINVAL;
        goto fail;
    }
    rc = o.prompt_tokens ? prompt_ids(o.prompt_tokens, m->info.vocab, &prompt, &n_prompt, &err)
                         : prompt_bytes(&o, &prompt, &n_prompt, &err);
    if (rc || (rc = generate(m, &o, prompt, n_prompt, &err)))
        goto fail;
    free(prompt);
    ct_model_free(m);
    return 0;
fail:
    fflush(stdout);
    free(prompt);
    ct_model_free(m);
    ct_error_print(stderr, &err);
    return ct_error_exit_status(rc ? rc : err.code);
}
