/* SPDX-License-Identifier: BSD-3-Clause */
/* The element-wise passes where what is stored is what is computed in (fp32: gpt_passes.c, fp64:
 * gpt_passes_f64.c): loads and stores are plain and sums over rows accumulate straight into the
 * gradient. The includer defines real, SFX, EXP and SQRT first; bf16 storage has its own
 * (gpt_passes_bf16.c). */
#define elem real
#define LD(x) (x)
#define ST(v) (v)

static real *row_sums_begin(elem *out, size_t n) { return out; }
static void row_sums_end(elem *out, real *sums, size_t i0, size_t i1) {}

#include "engine/models/gpt/gpt_passes_tmpl.h"
