/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the model of a ctrain checkpoint, outside a run (ctrain generate, ctrain export). */
#ifndef CTRAIN_CHECKPOINT_CKPT_MODEL_H
#define CTRAIN_CHECKPOINT_CKPT_MODEL_H

#include "ctrain/checkpoint_io.h"
#include "ctrain/error.h"
#include "ctrain/model.h"

/* Build the host model a checkpoint written by ctrain fit holds (its model and --model-config
 * from the metadata; room for batches of one sequence) and load its weights. command names the
 * subcommand in messages. A model that does not work on token windows: CT_EINVAL, id
 * model-no-logits. */
int ct_ckpt_model_load(const char *path, const char *command, ct_model **out, ct_error *err);

#endif
