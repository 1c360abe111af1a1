/* SPDX-License-Identifier: BSD-3-Clause */
/* Asynchronous checkpoints (--async-checkpoint): rank 0 copies the checkpoint's tensors and
 * metadata into host memory of its own at the step boundary, and a thread of its own writes the
 * file through the checkpoint IO (the same atomic write: temp file, fsync, rename), so the ranks
 * train on while it is written. One write at a time: the next save, a load, the end of fit, a stop
 * and an error path wait for the one pending; its failure is told to every rank at the next
 * collective wait (ct_strategy_checkpoint_wait) or save. A crash mid-write leaves the previous file
 * (the rename never happened).
 *
 * The writer blocks every signal (its mask is set before pthread_create): the stop and dump
 * signals are read by the loops' signal thread, and no handler may run on a thread of ours.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/util.h"
#include "engine/strategies/strategy_impl.h"

struct ct_async_ckpt {
    pthread_t thread;
    int running;               /* a write is pending (the thread is to be joined) */
    char path[1100];
    ct_ckpt *ckpt;             /* the copy: tensors point into data */
    unsigned char *data;
    size_t cap;                /* data's size: kept from save to save (a fresh buffer of the
                                * checkpoint's size costs a page fault per page of the copy) */
    int status;                /* the last write's: 0, or an error code in err */
    double write_s;            /* how long the last write took (the thread's; read after the join) */
    ct_error err;
};

static void *writer_main(void *arg)
{
    ct_strategy *s = arg;
    struct ct_async_ckpt *a = s->async_ckpt;
    double t0 = ct_time_now();

    ct_error_clear(&a->err);
    a->status = s->checkpoint_io->save(a->path, a->ckpt, &a->err);
    a->write_s = ct_time_now() - t0;
    return NULL;
}

/* Rank 0: wait for the pending write; its status (0 when none was pending), err filled on failure. */
int ct_async_ckpt_join(ct_strategy *s, ct_error *err)
{
    struct ct_async_ckpt *a = s->async_ckpt;
    int status;

    if (!a || !a->running)
        return 0;
    pthread_join(a->thread, NULL);
    a->running = 0;
    s->ckpt_write_s += a->write_s;
    status = a->status;
    if (status && err)
        *err = a->err;
    a->status = 0;
    return status;
}

/* The tensors' bytes and the metadata copied, so training may change the originals at once. */
static int copy_ckpt(struct ct_async_ckpt *a, const ct_ckpt *c, ct_error *err)
{
    size_t total = 0, off = 0;

    for (int i = 0; i < c->n_tensors; i++)
        total += c->tensors[i].nbytes;
    if (!a->ckpt)
        a->ckpt = malloc(sizeof(*a->ckpt));
    if (total > a->cap || !a->data) {
        free(a->data);
        a->cap = total ? total : 1;
        a->data = malloc(a->cap);
    }
    if (!a->ckpt || !a->data) {
        free(a->ckpt);
        free(a->data);
        a->ckpt = NULL;
        a->data = NULL;
        a->cap = 0;
        ct_error_set(err, CT_ENOMEM, "checkpoint-async", "out of memory copying the checkpoint (%zu bytes) for "
                     "the asynchronous write", total);
        return ct_error_hint(err, "leave out --async-checkpoint: a synchronous save needs no copy");
    }
    memcpy(a->ckpt, c, sizeof(*c));
    for (int i = 0; i < c->n_tensors; i++) {
        memcpy(a->data + off, c->tensors[i].data, c->tensors[i].nbytes);
        a->ckpt->tensors[i].data = a->data + off;
        off += c->tensors[i].nbytes;
    }
    return 0;
}

/* Rank 0: copy and start the write (the previous one already joined). */
int ct_async_ckpt_start(ct_strategy *s, const char *path, const ct_ckpt *c, ct_error *err)
{
    struct ct_async_ckpt *a = s->async_ckpt;
    sigset_t all, old;
    int rc;

    if (!a && !(a = s->async_ckpt = calloc(1, sizeof(*a))))
        return ct_error_set(err, CT_ENOMEM, "checkpoint-async", "out of memory for the asynchronous writer");
    if (ct_str_copy(a->path, sizeof(a->path), path))
        return ct_error_set(err, CT_EINVAL, "checkpoint-async", "checkpoint path too long: %s", path);
    if ((rc = copy_ckpt(a, c, err)))
        return rc;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&a->thread, NULL, writer_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        return ct_error_set(err, CT_EINTERNAL, "checkpoint-async", "cannot start the checkpoint writer: %s",
                            strerror(rc));
    a->running = 1;
    return 0;
}

void ct_async_ckpt_free(ct_strategy *s)
{
    ct_async_ckpt_join(s, NULL);
    if (s->async_ckpt) {
        free(s->async_ckpt->data);
        free(s->async_ckpt->ckpt);
    }
    free(s->async_ckpt);
    s->async_ckpt = NULL;
}
