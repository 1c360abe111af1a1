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

/* Every line the plugin logs: formatted, prefixed "ctrain: ", handed to one of slurm's loggers. */
static void log_line(void (*out)(const char *fmt, ...), const char *fmt, va_list ap)
{
    char msg[2048];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    out("ctrain: %s", msg);
}

void ct_spank_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_line(slurm_error, fmt, ap);
    va_end(ap);
}

void ct_spank_info(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_line(verbose ? slurm_info : slurm_verbose, fmt, ap);
    va_end(ap);
}

void ct_spank_report(const ct_error *err)
{
    slurm_error("ctrain: %s", err->msg);
    if (err->hint[0])
        slurm_error("ctrain: hint: %s", err->hint);
}
