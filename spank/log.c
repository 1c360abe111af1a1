/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — logging; see spank/log.h. */
#include <stdarg.h>
#include <stdio.h>

#include <slurm/spank.h>

#include "spank/log.h"

static int verbose;

void ct_spank_log_verbose(int on)
{
    verbose = on;
}

void ct_spank_error(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    slurm_error("ctrain: %s", msg);
}

void ct_spank_info(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (verbose)
        slurm_info("ctrain: %s", msg);
    else
        slurm_verbose("ctrain: %s", msg);
}

void ct_spank_report(const ct_error *err)
{
    slurm_error("ctrain: %s", err->msg);
    if (err->hint[0])
        slurm_error("ctrain: hint: %s", err->hint);
}
