/* SPDX-License-Identifier: BSD-3-Clause */
/* The data-module seam: open a registered data module (the plan's descriptor) and dispatch to its ops
 * (include/ctrain/datamodule.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrain/datamodule.h"
#include "ctrain/registry.h"

int ct_datamodule_open(const ct_registry_entry *e, const char *dir, double val_fraction, unsigned splits,
                       ct_datamodule **out, ct_error *err)
{
    const struct ct_datamodule_class *cls = e->ops;

    *out = NULL;
    if (!cls || !cls->open) {
        ct_error_set(err, CT_ENOTAVAIL, "implementation-missing", "data module %s is not linked into this program",
                     e->name);
        return ct_error_hint(err, "call ct_engine_init() (and register your data module) before training");
    }
    return cls->open(dir && dir[0] ? dir : e->default_dir, val_fraction, splits, out, err);
}

int ct_datamodule_setup(ct_datamodule *dm, const ct_tensor_spec *x, const ct_tensor_spec *y, ct_error *err)
{
    return dm->ops->setup ? dm->ops->setup(dm, x, y, err) : 0;
}

size_t ct_datamodule_size(const ct_datamodule *dm, enum ct_split split)
{
    return dm->ops->size(dm, split);
}

int ct_datamodule_gather(const ct_datamodule *dm, enum ct_split split, const uint32_t *idx, int count,
                         ct_batch *b, ct_error *err)
{
    return dm->ops->gather(dm, split, idx, count, b, err);
}

const ct_data_info *ct_datamodule_info(const ct_datamodule *dm)
{
    return &dm->info;
}

void ct_datamodule_free(ct_datamodule *dm)
{
    if (dm && dm->ops && dm->ops->destroy)
        dm->ops->destroy(dm);
}

size_t ct_tensor_spec_numel(const ct_tensor_spec *spec)
{
    size_t n = 1;

    for (int d = 0; d < spec->ndim; d++)
        n *= (size_t)spec->shape[d];
    return n;
}

static const char *dtype_name(enum ct_dtype t)
{
    switch (t) {
    case CT_DTYPE_F32:  return "f32";
    case CT_DTYPE_F64:  return "f64";
    case CT_DTYPE_BF16: return "bf16";
    case CT_DTYPE_F16:  return "f16";
    case CT_DTYPE_U8:   return "u8";
    case CT_DTYPE_U16:  return "u16";
    case CT_DTYPE_I32:  return "i32";
    }
    return "?";
}

const char *ct_tensor_spec_str(const ct_tensor_spec *spec, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "%s[", dtype_name(spec->dtype));

    for (int d = 0; d < spec->ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "," : "", (long long)spec->shape[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

/* --------------------------------------------------------------- the data's identity */

#define ID_EDGE 65536   /* bytes hashed at each end of a file */

static void fnv1a(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        *h ^= b[i];
        *h *= 0x100000001b3ULL;
    }
}

/* One regular file: its name, size and both ends (*files counts it); a directory is skipped; a
 * FIFO, socket or device (data streamed in) makes the data unidentifiable: *files = -1. */
static int id_file(uint64_t *h, int dirfd, const char *name, uint64_t *bytes, int *files, ct_error *err)
{
    unsigned char *buf = malloc(ID_EDGE);
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK), rc = 0;
    struct stat st;
    ssize_t got;

    if (!buf || fd < 0 || fstat(fd, &st) != 0) {
        rc = ct_error_set(err, buf ? CT_EIO : CT_ENOMEM, "data-identity", "reading %s for the data's identity: %s",
                          name, buf ? strerror(errno) : "out of memory");
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        if (!S_ISDIR(st.st_mode))
            *files = -1;
        goto out;
    }
    if (*files < 0)
        goto out;
    fnv1a(h, name, strlen(name) + 1);
    fnv1a(h, &st.st_size, sizeof(st.st_size));
    *bytes += (uint64_t)st.st_size;
    (*files)++;
    if ((got = pread(fd, buf, ID_EDGE, 0)) > 0)
        fnv1a(h, buf, (size_t)got);
    if (st.st_size > ID_EDGE && (got = pread(fd, buf, ID_EDGE, st.st_size - ID_EDGE)) > 0)
        fnv1a(h, buf, (size_t)got);
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    return rc;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int visible(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

int ct_datamodule_identity(const ct_registry_entry *e, const char *dir, char *out, size_t size, ct_error *err)
{
    struct dirent **names = NULL;
    uint64_t h = 0xcbf29ce484222325ULL, bytes = 0;
    int n, dirfd, rc = 0, files = 0;

    out[0] = '\0';
    /* The directory the module opened: --data, else its default (ct_datamodule_open's rule). */
    if (!dir || !dir[0])
        dir = e->default_dir;
    if (!dir)
        return 0;

    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return ct_error_set(err, CT_EIO, "data-identity", "--data %s: %s", dir, strerror(errno));
    n = scandir(dir, &names, visible, by_name);
    if (n < 0)
        rc = ct_error_set(err, CT_EIO, "data-identity", "--data %s: %s", dir, strerror(errno));
    for (int i = 0; i < n; i++) {
        if (!rc)
            rc = id_file(&h, dirfd, names[i]->d_name, &bytes, &files, err);
        free(names[i]);
    }
    free(names);
    close(dirfd);
    if (!rc && files >= 0)
        snprintf(out, size, "%d files, %" PRIu64 " bytes, fnv1a64 %016" PRIx64, files, bytes, h);
    else if (!rc)
        out[0] = '\0';
    return rc;
}
