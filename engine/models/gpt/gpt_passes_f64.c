/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's element-wise passes in fp64 for 64-true (gpt_passes_tmpl.h), with the scalar libm
 * functions: their results are correctly rounded or nearly, as PyTorch's float64 CPU operators. */
#include <math.h>
#include <stddef.h>

#define real double
#define SFX(name) name##_f64
#define EXP exp
#define SQRT sqrt
#define elem real
#define LD(x) (x)
#define ST(v) (v)

/* Sums over rows accumulate straight into the gradient (elem is real). */
static real *row_sums_begin(elem *out, size_t n) { return out; }
static void row_sums_end(elem *out, real *sums, size_t i0, size_t i1) {}

#include "engine/models/gpt/gpt_passes_tmpl.h"
