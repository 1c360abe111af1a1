/* SPDX-License-Identifier: BSD-3-Clause */
/* Attention's products per (sequence, head) on OpenBLAS's small-matrix kernels, on strided views of
 * qkv, for the types whose arithmetic is their storage (fp32, fp64): a path of the attention table
 * (struct gpt_attention_path) that always runs. Included by gpt_step_f32.c (32-true, and bf16-mixed
 * where oneDNN made no batched primitive: then on bf16-rounded fp32 copies, gemm_act) and
 * gpt_step_f64.c, after their kernels: elem = real, SQRT, BLAS_GEMM (cblas_sgemm or cblas_dgemm),
 * PASS(name) the type's element-wise passes, ACTS and VW(m) the type's activations and view,
 * gemm_act() and gemm_act_in_place() what a GEMM reads for an activation (a bf16-rounded copy under
 * bf16-mixed, else the activation itself). See gpt_internal.h for the map of the step's files. */

/* atty[BT,C] from qkv[BT,3C]: per sequence b and head h, att = causal_softmax(q k^T / sqrt(HS)),
 * then atty = att v. */
static int attention_forward_heads(ct_gpt *m, int l, int B)
{
    struct ACTS *a = &VW(m)->blocks[l];
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    real scale = (real)1 / SQRT((real)HS);
    const elem *qkv, *att;

    qkv = gemm_act(m, a->qkv, (size_t)B * T * C3, 1);

    /* Heads are independent: one per OpenMP thread, each GEMM single-threaded (OpenBLAS's small-
     * matrix kernels run on the calling thread). */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const elem *q = qkv + (size_t)b * T * C3 + h * HS, *k = q + C;
            elem *pre = a->att + ((size_t)b * NH + h) * T * T;

            for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, gpt_att_rows(r0, T), r0 + gpt_att_rows(r0, T), HS,
                            scale, q + (size_t)r0 * C3, C3, k, C3, (real)0, pre + (size_t)r0 * T, T);
            PASS(gpt_causal_softmax)(pre, T);
        }
    att = gemm_act(m, a->att, (size_t)B * NH * T * T, 2);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const elem *v = qkv + (size_t)b * T * C3 + 2 * C + h * HS;
            const elem *p = att + ((size_t)b * NH + h) * T * T;
            elem *out = a->atty + (size_t)b * T * C + h * HS;

            for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, gpt_att_rows(r0, T), HS, r0 + gpt_att_rows(r0, T),
                            (real)1, p + (size_t)r0 * T, T, v, C3, (real)0, out + (size_t)r0 * C, C);
        }
    return 0;
}

/* dqkv[BT,3C] from datty[BT,C] (VW(m)->dbt_c). */
static int attention_backward_heads(ct_gpt *m, int l, int B)
{
    const struct ACTS *a = &VW(m)->blocks[l];
    int T = m->cfg.seq_len, C = m->cfg.n_embd, NH = m->cfg.n_head, HS = C / NH, C3 = 3 * C;
    real scale = (real)1 / SQRT((real)HS);
    const elem *qkv, *att, *datty;

    qkv = gemm_act(m, a->qkv, (size_t)B * T * C3, 0);
    att = gemm_act(m, a->att, (size_t)B * NH * T * T, 1);
    datty = gemm_act(m, VW(m)->dbt_c, (size_t)B * T * C, 2);

#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            elem *d = VW(m)->datt + ((size_t)b * NH + h) * T * T;
            size_t row = (size_t)b * T * C3 + h * HS;
            const elem *q = qkv + row, *k = q + C, *v = q + 2 * C;
            const elem *p = att + ((size_t)b * NH + h) * T * T;
            const elem *pf = a->att + ((size_t)b * NH + h) * T * T;
            const elem *dy = datty + (size_t)b * T * C + h * HS;
            elem *dq = VW(m)->dqkv + row, *dk = dq + C, *dv = dq + 2 * C;

            /* datt = dy v^T (query rows over their keys); dv = att^T dy (keys over their queries) */
            for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, gpt_att_rows(r0, T), r0 + gpt_att_rows(r0, T), HS,
                            (real)1, dy + (size_t)r0 * C, C, v, C3, (real)0, d + (size_t)r0 * T, T);
            for (int k0 = 0; k0 < T; k0 += GPT_ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, gpt_att_rows(k0, T), HS, T - k0, (real)1,
                            p + (size_t)k0 * T + k0, T, dy + (size_t)k0 * C, C, (real)0, dv + (size_t)k0 * C3, C3);
            /* through the softmax (fp32 probabilities), then the scaled q k^T */
            PASS(gpt_causal_softmax_backward)(d, pf, T);
            gemm_act_in_place(m, d, (size_t)T * T);
            for (int r0 = 0; r0 < T; r0 += GPT_ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, gpt_att_rows(r0, T), HS, r0 + gpt_att_rows(r0, T),
                            scale, d + (size_t)r0 * T, T, k, C3, (real)0, dq + (size_t)r0 * C3, C3);
            for (int k0 = 0; k0 < T; k0 += GPT_ATT_BLOCK)
                BLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, gpt_att_rows(k0, T), HS, T - k0, scale,
                            d + (size_t)k0 * T + k0, T, q + (size_t)k0 * C3, C3, (real)0, dk + (size_t)k0 * C3, C3);
        }
    return 0;
}
