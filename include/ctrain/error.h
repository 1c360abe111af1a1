/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — errors as codes plus a message the caller can print.
 *
 * Every fallible ctrain function returns 0 on success or a negative CT_E* code, and fills a
 * caller-provided ct_error with a message that names the bad input and a hint saying what to
 * do instead. Nothing in the libraries prints errors or exits: the caller decides (the CLI
 * prints "ctrain: error: ..." and exits 2 for bad input; the SPANK plugin hands it to slurm_error).
 */
#ifndef CTRAIN_ERROR_H
#define CTRAIN_ERROR_H

#include <stdio.h>

enum ct_errcode {
    CT_OK        = 0,
    CT_EINVAL    = -1,  /* malformed input: flag, environment variable, plugstack argument */
    CT_ECONFLICT = -2,  /* valid inputs that contradict each other or the environment */
    CT_ENOTAVAIL = -3,  /* asked for something this machine or build does not have */
    CT_ENOENT    = -4,  /* a file or directory that should exist does not */
    CT_EIO       = -5,  /* read/write/fsync failed */
    CT_EFORMAT   = -6,  /* a file exists but its content is wrong (truncated, bad magic, ...) */
    CT_ENOMEM    = -7,
    CT_ECOMM     = -8,  /* a peer, collective or PMIx/MPI call failed */
    CT_ETIMEOUT  = -9,
    CT_EINTR     = -10, /* stopped on request (signal, preemption) */
    CT_EINTERNAL = -11  /* a bug in ctrain */
};

/* How a run ended, beside its code: what a caller chooses its exit status from (ct_error_exit),
 * never from the id's text. ct_error_set resets it to CT_OUTCOME_CODE; the few places that end a
 * run in one of these ways say so with ct_error_outcome. It crosses processes with the error
 * (a rank's report to its supervisor carries the whole ct_error). */
enum ct_outcome {
    CT_OUTCOME_CODE = 0,        /* the code says it all: 0, 1 or 2 (ct_error_exit_status) */
    CT_OUTCOME_STOPPED,         /* stopped on request after saving its state (requeued or to resume): 75 */
    CT_OUTCOME_STRAGGLER,       /* --on-straggler stop|exclude named a node and saved: 76 */
    CT_OUTCOME_NONFINITE,       /* the training loss became non-finite: 3 */
    CT_OUTCOME_NODE_NAMED       /* a preflight check named a node: 3 */
};

typedef struct ct_error {
    int  code;       /* CT_E*, 0 when no error */
    int  outcome;    /* enum ct_outcome */
    char id[48];     /* stable catalogue id, e.g. "devices-duplicate"; "" when none */
    char msg[1024];  /* what is wrong, naming the input; no "ctrain:" prefix, no newline */
    char hint[512];  /* what to do instead; may be "" */
} ct_error;

/* Reset to "no error". */
void ct_error_clear(ct_error *err);

/* Fill err (may be NULL) and return code, so callers can write `return ct_error_set(...)`. */
int ct_error_set(ct_error *err, int code, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Set or replace the hint of an error already set. Returns err->code. */
int ct_error_hint(ct_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefix the message with context ("reading FILE: ") keeping code, id and hint. */
int ct_error_prefix(ct_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "invalid argument", "conflict", ... */
const char *ct_error_code_name(int code);

/* Process exit status for a code: 2 for bad input (EINVAL, ECONFLICT, ENOTAVAIL), 1 otherwise. */
int ct_error_exit_status(int code);

/* Mark how the run ended (enum ct_outcome) on an error already set. Returns err->code. */
int ct_error_outcome(ct_error *err, enum ct_outcome outcome);

/* The exit status of a command that ended with rc and err: the outcome's (75, 76, 3) when err
 * has one, else ct_error_exit_status(rc). */
int ct_error_exit(int rc, const ct_error *err);

/* "ctrain: error: MSG\nctrain: hint: HINT\n" on stream. */
void ct_error_print(FILE *stream, const ct_error *err);

#endif
