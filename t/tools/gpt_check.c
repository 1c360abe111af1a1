/* SPDX-License-Identifier: BSD-3-Clause */
/* gpt_check OUTDIR [--config k=v,...] [--batch B] [--steps N] [--seed S] [--lr X] [--bf16 | --f64 | --bf16-true]
 *
 * What t/gpt_torch.py compares against the same model in PyTorch (llm.c's test_gpt2 idea): builds
 * the GPT, draws its initial weights and a batch of B windows of random tokens, and writes
 *   OUTDIR/tokens.bin          the batch as a token shard (B*T+1 tokens; window b = tokens[b*T ..])
 *   OUTDIR/params.safetensors  the initial weights, PyTorch's names
 *   OUTDIR/grads.safetensors   the gradients of the mean loss of that batch, same names
 *   OUTDIR/losses.txt          "step loss" for N steps of AdamW (lr X, weight decay 0.01) on the batch
 * and prints "loss L" (the first loss) and "announced K tensors" (backward's ready calls).
 * --bf16: bf16-mixed's GEMMs; --f64: 64-true (the model, its tensors in the files and AdamW in fp64);
 * --bf16-true: bf16-true (the model, its tensors in the files (BF16) and AdamW's state in bf16).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/checkpoint_io.h"
#include "ctrain/nn.h"
#include "ctrain/rng.h"
#include "ctrain/util.h"
#include "engine/data/tokens.h"
#include "engine/models/gpt/gpt.h"

static int save_tensors(const char *path, const ct_gpt *m, const void *base, ct_error *err)
{
    static ct_ckpt ck;

    memset(&ck, 0, sizeof(ck));
    if (ct_gpt_num_tensors(m) > CT_CKPT_MAX_TENSORS)
        return fprintf(stderr, "gpt_check: %d tensors, a checkpoint holds %d: fewer layers\n", ct_gpt_num_tensors(m),
                       CT_CKPT_MAX_TENSORS), 1;
    ck.n_tensors = ct_gpt_num_tensors(m);
    for (int i = 0; i < ck.n_tensors; i++) {
        const ct_tensor *t = ct_gpt_tensor(m, i);
        ct_ckpt_tensor *c = &ck.tensors[i];

        snprintf(c->name, sizeof(c->name), "%s", t->name);
        size_t es = ct_dtype_size(ct_gpt_param_dtype(m));

        c->dtype = ct_gpt_param_dtype(m);
        c->ndim = t->ndim;
        memcpy(c->shape, t->shape, sizeof(c->shape));
        c->data = (char *)base + t->offset * es;
        c->nbytes = t->numel * es;
    }
    return ct_checkpoint_io_safetensors.save(path, &ck, err) ? 1 : 0;
}

/* Counts backward's announcements and checks they tile the gradient array from its end down. */
struct announced {
    size_t next_end;
    int count, out_of_order;
};

static int on_ready(void *ctx, size_t offset, size_t count)
{
    struct announced *a = ctx;

    if (offset + count != a->next_end)
        a->out_of_order = 1;
    a->next_end = offset;
    a->count++;
    return 0;
}

int main(int argc, char **argv)
{
    ct_gpt_config cfg;
    ct_optim_config ocfg;
    ct_optim *opt = NULL;
    ct_gpt *m = NULL;
    ct_rng rng;
    ct_error err;
    ct_token_windows w = { 0 };
    const char *dir;
    char path[4096];
    long batch = 4, steps = 20, seed = 1337;
    double lr = 1e-3;
    int bf16 = 0, f64 = 0, bf16_true = 0;
    int32_t *in, *tg;
    uint32_t *idx;
    FILE *losses;

    ct_gpt_config_default(&cfg);
    cfg.n_layer = 2;
    cfg.n_head = 4;
    cfg.n_embd = 64;
    cfg.seq_len = 32;
    if (argc < 2)
        return fprintf(stderr, "usage: gpt_check OUTDIR [--config k=v,..] [--batch B] [--steps N] [--seed S] "
                       "[--lr X] [--bf16 | --f64 | --bf16-true]\n"), 2;
    dir = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";

        if (!strcmp(argv[i], "--bf16-true")) {
            bf16_true = 1;
            continue;
        }
        if (!strcmp(argv[i], "--bf16") || !strcmp(argv[i], "--f64")) {
            *(argv[i][2] == 'b' ? &bf16 : &f64) = 1;
            continue;
        }
        if ((!strcmp(argv[i], "--config") && ct_gpt_config_parse(&cfg, v, &err)) ||
            (!strcmp(argv[i], "--batch") && ct_parse_long(v, 1, 1024, &batch)) ||
            (!strcmp(argv[i], "--steps") && ct_parse_long(v, 1, 100000, &steps)) ||
            (!strcmp(argv[i], "--seed") && ct_parse_long(v, 0, 1L << 40, &seed)) ||
            (!strcmp(argv[i], "--lr") && ct_parse_double(v, &lr)))
            return fprintf(stderr, "gpt_check: bad %s '%s'\n", argv[i], v), 2;
        i++;
    }
    if (ct_gpt_create(&cfg, (int)batch, &m, &err) ||
        (bf16 && ct_gpt_set_gemm_dtype(m, CT_DTYPE_BF16, &err)) ||
        (f64 && (ct_gpt_set_param_dtype(m, CT_DTYPE_F64, &err) || ct_gpt_set_gemm_dtype(m, CT_DTYPE_F64, &err))) ||
        (bf16_true &&
         (ct_gpt_set_param_dtype(m, CT_DTYPE_BF16, &err) || ct_gpt_set_gemm_dtype(m, CT_DTYPE_BF16, &err))))
        return fprintf(stderr, "gpt_check: %s (%s)\n", err.msg, err.hint), 1;
    ct_rng_seed(&rng, (uint64_t)seed);
    ct_gpt_init(m, &rng);

    /* the batch: random tokens as a shard, read back through the reader the data module uses */
    w.n = (size_t)batch * cfg.seq_len + 1;
    w.tokens = malloc(w.n * sizeof(uint16_t));
    for (size_t i = 0; i < w.n; i++)
        w.tokens[i] = (uint16_t)ct_rng_below(&rng, (uint64_t)cfg.vocab);
    snprintf(path, sizeof(path), "%s/tokens.bin", dir);
    if (ct_tokens_write(path, w.tokens, w.n, &err))
        return fprintf(stderr, "gpt_check: %s\n", err.msg), 1;
    free(w.tokens);
    if (ct_tokens_read(path, cfg.vocab, &w.tokens, &w.n, &err) ||
        ct_token_windows_set_len(&w, cfg.seq_len, path, &err))
        return fprintf(stderr, "gpt_check: %s\n", err.msg), 1;
    in = malloc(sizeof(int32_t) * (size_t)batch * cfg.seq_len);
    tg = malloc(sizeof(int32_t) * (size_t)batch * cfg.seq_len);
    idx = malloc(sizeof(uint32_t) * (size_t)batch);
    for (long b = 0; b < batch; b++)
        idx[b] = (uint32_t)b;
    ct_token_windows_gather(&w, idx, (int)batch, in, tg);

    snprintf(path, sizeof(path), "%s/params.safetensors", dir);
    if (save_tensors(path, m, ct_gpt_params(m), &err))
        return fprintf(stderr, "gpt_check: %s\n", err.msg), 1;
    ct_optim_config_default(&ocfg, CT_OPTIM_ADAMW);
    ocfg.lr = lr;
    ocfg.dtype = ct_gpt_param_dtype(m);
    if (ct_optim_create(&ocfg, ct_gpt_num_params(m), &opt, &err))
        return fprintf(stderr, "gpt_check: %s\n", err.msg), 1;
    snprintf(path, sizeof(path), "%s/losses.txt", dir);
    if (!(losses = fopen(path, "w")))
        return perror(path), 1;
    for (long s = 0; s < steps; s++) {
        double tokens = (double)batch * cfg.seq_len;
        double loss = ct_gpt_forward(m, in, tg, (int)batch, NULL, NULL) / tokens;
        struct announced a = { ct_gpt_num_params(m), 0, 0 };

        if (ct_gpt_backward(m, tokens, NULL, on_ready, &a))
            return fprintf(stderr, "gpt_check: backward failed\n"), 1;
        if (s == 0) {
            printf("loss %.17g\nannounced %d tensors%s\n", loss, a.count,
                   a.out_of_order || a.next_end != 0 ? " OUT OF ORDER" : "");
            snprintf(path, sizeof(path), "%s/grads.safetensors", dir);
            if (save_tensors(path, m, ct_gpt_grads(m), &err))
                return fprintf(stderr, "gpt_check: %s\n", err.msg), 1;
        }
        fprintf(losses, "%ld %.17g\n", s, loss);
        ct_optim_step(opt, ct_gpt_params(m), ct_gpt_grads(m));
    }
    fclose(losses);
    ct_optim_free(opt);
    ct_gpt_free(m);
    free(w.tokens);
    free(in);
    free(tg);
    free(idx);
    return 0;
}
