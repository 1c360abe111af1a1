/* SPDX-License-Identifier: BSD-3-Clause */
/* A signal's name ("SIGUSR1"); see include/ctrain/util.h. A file of its own: sigabbrev_np is a GNU
 * extension, and only this file asks for _GNU_SOURCE. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "ctrain/util.h"

const char *ct_signal_name(int sig, char *buf, size_t size)
{
    const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;

    if (abbrev)
        snprintf(buf, size, "SIG%s", abbrev);
    else
        snprintf(buf, size, "signal %d", sig);
    return buf;
}
