/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — writing, reading and validating a node summary (engine/bind/node_summary.h), without hwloc:
 * what a step's slurmstepd runs instead of hwloc's discovery. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/bind/node_summary.h"
#include "engine/util/fsutil.h"

uint64_t ct_node_summary_checksum(const void *buf, size_t size)
{
    const unsigned char *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < size; i++) {
        /* The checksum field itself counts as zero. */
        size_t at = offsetof(struct ct_node_summary_head, checksum);
        h ^= i >= at && i < at + sizeof(uint64_t) ? 0 : p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The node's identity: this boot (a reboot may change CPUs, devices and their PCI positions) and
 * its host name (a spool directory shared or copied between nodes). */
int ct_node_summary_identity(char *boot_id, size_t bsize, char *host, size_t hsize)
{
    struct utsname u;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    int ok = f && fgets(boot_id, (int)bsize, f) != NULL;

    if (f)
        fclose(f);
    if (!ok || uname(&u) != 0)
        return -1;
    boot_id[strcspn(boot_id, "\n")] = '\0';
    ct_str_copy(host, hsize, u.nodename);
    return 0;
}

int ct_node_summary_source_stat(const char *source, int64_t *mtime_ns, int64_t *size)
{
    struct stat st;

    if (stat(source, &st) != 0)
        return -1;
    *mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    *size = (int64_t)st.st_size;
    return 0;
}

size_t ct_node_summary_size(const struct ct_node_summary_head *h)
{
    return sizeof(*h) + (size_t)h->nsets * h->nwords * sizeof(uint64_t) +
           (size_t)(h->ngpus + h->nnics) * sizeof(struct ct_node_summary_dev) +
           (size_t)(h->nnuma + h->npackages) * sizeof(uint32_t);
}

void ct_node_summary_bind(ct_node_summary *s)
{
    const struct ct_node_summary_head *h = s->head;

    s->sets = (const uint64_t *)(h + 1);
    s->gpus = (const struct ct_node_summary_dev *)(s->sets + (size_t)h->nsets * h->nwords);
    s->nics = s->gpus + h->ngpus;
    s->os_index = (const uint32_t *)(s->nics + h->nnics);
}

/* Counts that fit the size read, so that ct_node_summary_size cannot overflow or index past it (each
 * bounded first: their sum is an int). */
static int counts_sane(const struct ct_node_summary_head *h)
{
    const int32_t big = 1 << 20;

    return h->nwords >= 1 && h->nwords <= 4096 && h->nnuma >= 0 && h->nnuma <= big && h->npackages >= 0 &&
           h->npackages <= big && h->nunits >= 0 && h->nunits <= big && h->ngpus >= 0 &&
           h->ngpus <= CT_NODE_SUMMARY_MAX_DEVS && h->nnics >= 0 && h->nnics <= CT_NODE_SUMMARY_MAX_DEVS &&
           h->nsets == 1 + h->nnuma + h->npackages + h->nunits + h->ngpus + h->nnics;
}

static int devs_sane(const ct_node_summary *s)
{
    const struct ct_node_summary_head *h = s->head;

    for (int i = 0; i < h->ngpus + h->nnics; i++) {
        const struct ct_node_summary_dev *d = &s->gpus[i];

        if (d->locality < 0 || d->locality >= h->nsets || d->nbridges < 0 || d->nbridges > CT_NODE_SUMMARY_MAX_BRIDGES ||
            !memchr(d->name, 0, sizeof(d->name)) || !memchr(d->uuid, 0, sizeof(d->uuid)) ||
            !memchr(d->netdev, 0, sizeof(d->netdev)))
            return 0;
    }
    return 1;
}

static int stale(const char *path, const char *what, ct_error *err)
{
    ct_error_set(err, CT_EFORMAT, "topology-cache", "the node summary %s is not usable: %s", path, what);
    return ct_error_hint(err, "the SPANK plugin rewrites it when slurmd starts; restart slurmd if this repeats");
}

/* Loaded from the topology file the reader would load, unchanged since; or discovered, as the
 * reader would. */
static int same_source(const struct ct_node_summary_head *h, const char *source)
{
    int64_t mtime, size;

    if (!memchr(h->source, 0, sizeof(h->source)) || strcmp(h->source, source ? source : "") != 0)
        return 0;
    return !source || (ct_node_summary_source_stat(source, &mtime, &size) == 0 && mtime == h->source_mtime_ns &&
                       size == h->source_size);
}

static int check_head(const char *path, const struct ct_node_summary_head *h, size_t size, unsigned flags,
                      const char *version, const char *source, ct_error *err)
{
    char boot[64], host[64];

    if (size < sizeof(*h) || memcmp(h->magic, CT_NODE_SUMMARY_MAGIC, sizeof(h->magic)) != 0)
        return stale(path, "it is not a ctrain node summary", err);
    if (h->format != CT_NODE_SUMMARY_FORMAT)
        return stale(path, "it is of another format", err);
    if (h->size != size || !counts_sane(h) || ct_node_summary_size(h) != size)
        return stale(path, "its size does not match its contents (truncated?)", err);
    if (ct_node_summary_checksum(h, size) != h->checksum)
        return stale(path, "its checksum does not match (corrupt)", err);
    if (!memchr(h->version, 0, sizeof(h->version)) || strcmp(h->version, version) != 0)
        return stale(path, "another ctrain version wrote it", err);
    if (ct_node_summary_identity(boot, sizeof(boot), host, sizeof(host)) != 0)
        return stale(path, "this node's boot id or host name cannot be read", err);
    if (strncmp(h->boot_id, boot, sizeof(h->boot_id)) != 0)
        return stale(path, "it was written before this node's last boot", err);
    if (strncmp(h->host, host, sizeof(h->host)) != 0)
        return stale(path, "another node wrote it", err);
    if ((h->flags & flags) != flags)
        return stale(path, "it was discovered without the GPUs and NICs this step needs", err);
    if (!same_source(h, source))
        return stale(path, source ? "it was not made from the topology file as it is now" :
                                    "it was made from a topology file, not discovered", err);
    return 0;
}

/* Its directory root's and writable by root only: else another user could put an older summary of
 * this node (root's, valid, of this boot) in its place. */
static int dir_trusted(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    struct stat st;

    if (!slash)
        return stat(".", &st) == 0 && st.st_uid == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH));
    if ((size_t)snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path) >= sizeof(dir))
        return 0;
    return stat(dir, &st) == 0 && st.st_uid == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* Root's file, writable by root only, in root's directory: the plugin runs as root and binds on what
 * it says. */
static int trusted(const char *path, const struct stat *st, ct_error *err)
{
    struct stat lst;

    if (!S_ISREG(st->st_mode) || st->st_uid != 0 || (st->st_mode & (S_IWGRP | S_IWOTH)))
        return stale(path, "it is not a regular file owned and writable by root only", err);
    if (!dir_trusted(path))
        return stale(path, "its directory is not owned and writable by root only", err);
    /* In root's own directory only root made the name: a link there is refused all the same (the
     * file read is the file checked). */
    if (lstat(path, &lst) != 0 || S_ISLNK(lst.st_mode))
        return stale(path, "it is a symbolic link", err);
    if (st->st_size <= 0 || (unsigned long long)st->st_size > CT_NODE_SUMMARY_MAX_SIZE)
        return stale(path, "its size is out of range", err);
    return 0;
}

int ct_node_summary_read(const char *path, unsigned flags, const char *version, const char *source,
                         ct_node_summary *out, ct_error *err)
{
    struct stat st;
    ssize_t got = 0, r;
    void *buf = NULL;
    ct_error why;
    int fd, rv;

    memset(out, 0, sizeof(*out));
    /* Opened as every input is (engine/util/fsutil.h): a FIFO planted there is never waited on in
     * slurmstepd; its trust is checked on the descriptor before a byte is read. */
    if ((fd = ct_fs_open_input(path, "node summary", &why)) < 0) {
        if (why.code == CT_EFORMAT)
            return stale(path, "it is not a regular file", err);
        ct_error_set(err, errno == ENOENT ? CT_ENOENT : CT_EIO, "topology-cache", "reading the node summary %s "
                     "failed: %s", path, strerror(errno));
        return ct_error_hint(err, "the SPANK plugin writes it when slurmd starts with ctrain.so in plugstack.conf");
    }
    if (fstat(fd, &st) != 0) {
        rv = stale(path, "it cannot be examined", err);
        goto fail;
    }
    if ((rv = trusted(path, &st, err)) != 0)
        goto fail;
    if (!(buf = malloc((size_t)st.st_size))) {
        rv = ct_error_set(err, CT_ENOMEM, "topology-cache", "no memory for the node summary %s", path);
        goto fail;
    }
    while (got < st.st_size && (r = read(fd, (char *)buf + got, (size_t)(st.st_size - got))) > 0)
        got += r;
    if (got != st.st_size) {
        rv = stale(path, "it changed or failed while being read", err);
        goto fail;
    }
    if ((rv = check_head(path, buf, (size_t)got, flags, version, source, err)) != 0)
        goto fail;
    out->head = buf;
    ct_node_summary_bind(out);
    if (!devs_sane(out)) {
        out->head = NULL;
        rv = stale(path, "a device in it is malformed", err);
        goto fail;
    }
    close(fd);
    return 0;
fail:
    free(buf);
    close(fd);
    return rv;
}

void ct_node_summary_free(ct_node_summary *s)
{
    if (s)
        free(s->head);
    if (s)
        memset(s, 0, sizeof(*s));
}

int ct_node_summary_write(ct_node_summary *s, const char *version, const char *path, ct_error *err)
{
    char tmp[4096];
    size_t done = 0;
    ssize_t w = 0;
    int fd, ok;

    ct_str_copy(s->head->version, sizeof(s->head->version), version);
    s->head->checksum = ct_node_summary_checksum(s->head, s->head->size);
    if (strlen(path) + 32 >= sizeof(tmp))
        return ct_error_set(err, CT_EINVAL, "topology-cache", "the node summary's path %s is too long", path);
    /* The one way ctrain writes a file (engine/util/fsutil.h): a fresh exclusive temp, renamed. */
    if ((fd = ct_fs_create_temp(path, tmp, sizeof(tmp))) < 0) {
        ct_error_set(err, CT_EIO, "topology-cache", "writing the node summary %s failed: %s", path, strerror(errno));
        return ct_error_hint(err, "check that the directory exists and that root can write to it");
    }
    while (done < s->head->size && (w = write(fd, (const char *)s->head + done, s->head->size - done)) > 0)
        done += (size_t)w;
    ok = done == s->head->size && fchmod(fd, 0644) == 0 && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        ct_error_set(err, CT_EIO, "topology-cache", "writing the node summary %s failed: %s", path,
                     strerror(errno ? errno : EIO));
        unlink(tmp);
        return err->code;
    }
    return 0;
}
