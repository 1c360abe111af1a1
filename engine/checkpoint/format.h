/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — ctrain's checkpoint format, in one place: the model's tensors as a checkpoint names and
 * stores them, and the check every reader makes of their values (finite); the metadata is meta.h's
 * table. checkpoint.c (a run's state) and
 * ckpt_model.c (the model of a checkpoint outside a run) use these; the dtype names are checkpoint
 * IO's (ct_ckpt_dtype_name). */
#ifndef CTRAIN_CHECKPOINT_FORMAT_H
#define CTRAIN_CHECKPOINT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/checkpoint_io.h"
#include "ctrain/error.h"
#include "ctrain/model.h"

/* Append a tensor of numel elements of dtype at data (not copied). The caller keeps within
 * CT_CKPT_MAX_TENSORS. */
void ct_ckpt_tensor_add(ct_ckpt *c, const char *name, void *data, enum ct_dtype dtype, int ndim, const int64_t *shape,
                        size_t numel);
/* Append every tensor of the host model m by its name, in the type it stores its parameters in
 * (64-true: F64, bf16-true: BF16), so the file holds what trained. */
void ct_ckpt_model_tensors_add(ct_ckpt *c, const ct_model *m);
/* Every floating-point tensor of c (its data loaded) is finite: a checkpoint of NaN or Inf
 * weights (or optimizer state) would generate noise or train "loss nan" with exit 0. CT_EFORMAT
 * naming path, the tensor and the element otherwise. */
int ct_ckpt_check_finite(const char *path, const ct_ckpt *c, ct_error *err);

#endif
