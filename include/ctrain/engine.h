/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — libctrain start-up: attach the implementations to the registries' names.
 * Call once before creating a connector's strategy (the CLI and ct_trainer_* do it; idempotent). */
#ifndef CTRAIN_ENGINE_H
#define CTRAIN_ENGINE_H

void ct_engine_init(void);

#endif
