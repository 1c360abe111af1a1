/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — the loggers' state behind run->loggers (engine/loggers only: logger.c, tensorboard.c). */
#ifndef CTRAIN_LOGGERS_LOGGER_STATE_H
#define CTRAIN_LOGGERS_LOGGER_STATE_H

#include <stdio.h>

struct ct_loggers {
    FILE *metrics;             /* metrics.csv, global zero only */
    struct ct_tb_writer *tb;   /* TensorBoard event file, global zero only (tensorboard.c) */
    int use_bar, use_plain;    /* --progress: a live bar, or plain lines (neither: off) */
    int bar_active;            /* a progress bar line is on screen */
    char stragglers[256];      /* metrics.csv's stragglers column (ct_logger_set_stragglers) */
};

#endif
