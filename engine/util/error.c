/* SPDX-License-Identifier: BSD-3-Clause */
/* Error codes and messages; see include/ctrain/error.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctrain/error.h"
#include "ctrain/util.h"

void ct_error_clear(ct_error *err)
{
    if (!err)
        return;
    err->code = 0;
    err->outcome = CT_OUTCOME_CODE;
    err->id[0] = '\0';
    err->msg[0] = '\0';
    err->hint[0] = '\0';
}

int ct_error_set(ct_error *err, int code, const char *id, const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return code;
    err->code = code;
    err->outcome = CT_OUTCOME_CODE;
    snprintf(err->id, sizeof(err->id), "%s", id ? id : "");
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    err->hint[0] = '\0';
    return code;
}

int ct_error_hint(ct_error *err, const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return 0;
    va_start(ap, fmt);
    vsnprintf(err->hint, sizeof(err->hint), fmt, ap);
    va_end(ap);
    return err->code;
}

int ct_error_prefix(ct_error *err, const char *fmt, ...)
{
    char prefix[512];
    char old[sizeof(err->msg)];
    va_list ap;

    if (!err)
        return 0;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    snprintf(err->msg, sizeof(err->msg), "%s%s", prefix, old);
    return err->code;
}

const char *ct_error_code_name(int code)
{
    switch (code) {
    case CT_OK:        return "success";
    case CT_EINVAL:    return "invalid argument";
    case CT_ECONFLICT: return "conflicting settings";
    case CT_ENOTAVAIL: return "not available";
    case CT_ENOENT:    return "not found";
    case CT_EIO:       return "I/O error";
    case CT_EFORMAT:   return "bad file format";
    case CT_ENOMEM:    return "out of memory";
    case CT_ECOMM:     return "communication failure";
    case CT_ETIMEOUT:  return "timed out";
    case CT_EINTR:     return "interrupted";
    case CT_EINTERNAL: return "internal error";
    }
    return "unknown error";
}

int ct_error_exit_status(int code)
{
    if (code == CT_EINVAL || code == CT_ECONFLICT || code == CT_ENOTAVAIL)
        return 2;
    return code == CT_OK ? 0 : 1;
}

int ct_error_outcome(ct_error *err, enum ct_outcome outcome)
{
    if (!err)
        return 0;
    err->outcome = outcome;
    return err->code;
}

int ct_error_exit(int rc, const ct_error *err)
{
    /* The statuses are ctrain fit's (README "Exit status"; include/ctrain/launcher.h). */
    static const int status[] = { [CT_OUTCOME_STOPPED] = 75, [CT_OUTCOME_STRAGGLER] = 76,
                                  [CT_OUTCOME_NONFINITE] = 3, [CT_OUTCOME_NODE_NAMED] = 3 };

    if (rc && err && err->outcome > CT_OUTCOME_CODE && err->outcome <= CT_OUTCOME_NODE_NAMED)
        return status[err->outcome];
    return ct_error_exit_status(rc);
}

void ct_error_print(FILE *stream, const ct_error *err)
{
    /* Messages name files, records and what other ranks sent: escaped for the terminal (a control
     * character in a path or a peer's host name cannot erase a line or print a fake one). */
    char text[4 * sizeof(err->msg)];

    ct_str_escape(text, sizeof(text), err->msg[0] ? err->msg : ct_error_code_name(err->code));
    fprintf(stream, "ctrain: error: %s\n", text);
    if (err->hint[0])
        fprintf(stream, "ctrain: hint: %s\n", ct_str_escape(text, sizeof(text), err->hint));
}
