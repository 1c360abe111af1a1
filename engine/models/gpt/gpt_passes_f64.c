/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPT's element-wise passes in fp64 for 64-true (gpt_passes_tmpl.h, through gpt_passes_real.h),
 * with the scalar libm functions: their results are correctly rounded or nearly, as PyTorch's
 * float64 CPU operators. */
#include <math.h>
#include <stddef.h>

#define real double
#define SFX(name) name##_f64
#define EXP exp
#define SQRT sqrt
#include "engine/models/gpt/gpt_passes_real.h"
