/* SPDX-License-Identifier: BSD-3-Clause */
/* Asynchronous checkpoint writes (--async-checkpoint), Lightning's AsyncCheckpointIO: a wrapper of
 * the strategy's checkpoint IO whose save copies the checkpoint and writes it on a thread; see
 * engine/checkpoint_io/async.h.
 *
 * The writer blocks every signal (its mask is set before pthread_create): the stop and dump
 * signals are read by the Trainer's signal thread, and no handler may run on a thread of ours.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/util.h"
#include "engine/checkpoint_io/async.h"

struct ct_async_checkpoint_io {
    const struct ct_checkpoint_io_ops *inner;
    pthread_t thread;
    int running;               /* a write is pending (the thread is to be joined) */
    char path[1100];
    ct_ckpt *ckpt;             /* the copy: tensors point into data */
    unsigned char *data;
    size_t cap;                /* data's size: kept from save to save (a fresh buffer of the
                                * checkpoint's size costs a page fault per page of the copy) */
    int status;                /* the last write's: 0, or an error code in err */
    double write_s;            /* how long the last write took (the thread's; read after the join) */
    double written_s;          /* the writes joined so far */
    ct_error err;
};

int ct_async_checkpoint_io_new(const struct ct_checkpoint_io_ops *inner, ct_async_checkpoint_io **out, ct_error *err)
{
    if (!(*out = calloc(1, sizeof(**out))))
        return ct_error_set(err, CT_ENOMEM, "checkpoint-async", "out of memory for the asynchronous writer");
    (*out)->inner = inner;
    return 0;
}

static void *writer_main(void *arg)
{
    ct_async_checkpoint_io *a = arg;
    double t0 = ct_time_now();

    ct_error_clear(&a->err);
    a->status = a->inner->save(a->path, a->ckpt, &a->err);
    a->write_s = ct_time_now() - t0;
    return NULL;
}

int ct_async_checkpoint_io_wait(ct_async_checkpoint_io *a, ct_error *err)
{
    int status;

    if (!a || !a->running)
        return 0;
    pthread_join(a->thread, NULL);
    a->running = 0;
    a->written_s += a->write_s;
    status = a->status;
    if (status && err)
        *err = a->err;
    a->status = 0;
    return status;
}

double ct_async_checkpoint_io_write_seconds(const ct_async_checkpoint_io *a)
{
    return a ? a->written_s : 0;
}

/* The tensors' bytes and the metadata copied, so training may change the originals at once. */
static int copy_ckpt(ct_async_checkpoint_io *a, const ct_ckpt *c, ct_error *err)
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

int ct_async_checkpoint_io_save(ct_async_checkpoint_io *a, const char *path, const ct_ckpt *c, ct_error *err)
{
    sigset_t all, old;
    int rc;

    if ((rc = ct_async_checkpoint_io_wait(a, err)))
        return rc;
    if (ct_str_copy(a->path, sizeof(a->path), path))
        return ct_error_set(err, CT_EINVAL, "checkpoint-async", "checkpoint path too long: %s", path);
    if ((rc = copy_ckpt(a, c, err)))
        return rc;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&a->thread, NULL, writer_main, a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        return ct_error_set(err, CT_EINTERNAL, "checkpoint-async", "cannot start the checkpoint writer: %s",
                            strerror(rc));
    a->running = 1;
    return 0;
}

void ct_async_checkpoint_io_free(ct_async_checkpoint_io *a)
{
    if (!a)
        return;
    ct_async_checkpoint_io_wait(a, NULL);
    free(a->data);
    free(a->ckpt);
    free(a);
}
