/* SPDX-License-Identifier: BSD-3-Clause */
/* Output files in shared directories; see fsutil.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/util/fsutil.h"

int ct_fs_mkdirs(const char *dir, char *failed, size_t size)
{
    char path[4096];

    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = path + 1;; p++) {
        char c = *p;

        if (c != '/' && c != '\0')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) && errno != EEXIST) {
            if (failed)
                snprintf(failed, size, "%s", path);
            return -1;
        }
        *p = c;
        if (c == '\0')
            return 0;
    }
}

/* The directory's owner and mode: ours, and not open to others unless sticky. */
static int check_dir_st(const char *dir, const char *flag, const struct stat *st, ct_error *err)
{
    if (!S_ISDIR(st->st_mode))
        return ct_error_set(err, CT_ECONFLICT, "fs-dir", "%s %s is not a directory", flag, dir);
    if (st->st_uid != geteuid()) {
        ct_error_set(err, CT_ECONFLICT, "fs-dir-owner", "%s %s belongs to uid %ld, not to this user (uid %ld): "
                     "its owner could replace what ctrain writes there", flag, dir, (long)st->st_uid,
                     (long)geteuid());
        return ct_error_hint(err, "choose a directory of your own, e.g. %s %s/<run name> after mkdir", flag, dir);
    }
    /* Others may create names in it: without the sticky bit they may also rename or delete ours. */
    if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX)) {
        ct_error_set(err, CT_ECONFLICT, "fs-dir-mode", "%s %s is writable by every user (mode %04o) and "
                     "not sticky: anyone could replace what ctrain writes there", flag, dir,
                     (unsigned)(st->st_mode & 07777));
        return ct_error_hint(err, "chmod o-w %s (or chmod +t), or choose another directory", dir);
    }
    return 0;
}

int ct_fs_check_dir(const char *dir, const char *flag, ct_error *err)
{
    struct stat st;

    if (stat(dir, &st))
        return ct_error_set(err, errno == ENOENT ? CT_ENOENT : CT_EIO, "fs-dir", "%s %s: %s", flag, dir,
                            strerror(errno));
    return check_dir_st(dir, flag, &st, err);
}

int ct_fs_make_dir(const char *dir, const char *what, ct_error *err)
{
    struct stat st;

    if (mkdir(dir, 0777) && errno != EEXIST)
        return ct_error_set(err, CT_EIO, "fs-dir", "%s %s: cannot make it: %s", what, dir, strerror(errno));
    /* lstat: a name someone else planted in a shared run directory (a link to a directory of this
     * user's elsewhere, or one of theirs) is not where ctrain's files go. */
    if (lstat(dir, &st))
        return ct_error_set(err, CT_EIO, "fs-dir", "%s %s: %s", what, dir, strerror(errno));
    if (S_ISLNK(st.st_mode)) {
        ct_error_set(err, CT_ECONFLICT, "fs-symlink", "%s %s is a symbolic link: ctrain does not write run "
                     "files through one", what, dir);
        return ct_error_hint(err, "remove the link (ctrain makes the directory itself), or choose a "
                                  "--default-root-dir of your own");
    }
    if (check_dir_st(dir, what, &st, err))
        return ct_error_hint(err, "remove %s (ctrain makes it itself), or choose a --default-root-dir that only "
                                  "you can write", dir);
    return 0;
}

static int check_fd_owned(int fd, const char *path, const char *what, ct_error *err)
{
    struct stat st;

    if (fstat(fd, &st))
        return ct_error_set(err, CT_EIO, "fs-file", "%s %s: %s", what, path, strerror(errno));
    /* A second name for the file (a hard link planted in a shared sticky directory, to a file of
     * this user's elsewhere) would have that other file truncated or appended to. */
    if (S_ISREG(st.st_mode) && st.st_nlink != 1) {
        ct_error_set(err, CT_ECONFLICT, "fs-file-links", "%s %s has %ld names (hard links): writing it would "
                     "change another file too", what, path, (long)st.st_nlink);
        return ct_error_hint(err, "remove it (the other names keep their content), or choose another "
                                  "--default-root-dir");
    }
    if (!S_ISREG(st.st_mode))
        return ct_error_set(err, CT_ECONFLICT, "fs-file", "%s %s is not a regular file", what, path),
               ct_error_hint(err, "remove it, or choose another --default-root-dir");
    if (st.st_uid != geteuid()) {
        ct_error_set(err, CT_ECONFLICT, "fs-file-owner", "%s %s belongs to uid %ld, not to this user (uid %ld)",
                     what, path, (long)st.st_uid, (long)geteuid());
        return ct_error_hint(err, "ctrain neither trusts nor overwrites another user's file; choose a "
                                  "--default-root-dir of your own");
    }
    return 0;
}

static int refuse_link(const char *path, const char *what, ct_error *err)
{
    ct_error_set(err, CT_ECONFLICT, "fs-symlink", "%s %s is a symbolic link: ctrain does not write or read "
                 "run files through one", what, path);
    return ct_error_hint(err, "remove the link, or choose a --default-root-dir of your own");
}

int ct_fs_check_owned(const char *path, const char *what, ct_error *err)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), rc;

    if (fd < 0 && errno == ELOOP)
        return refuse_link(path, what, err);
    if (fd < 0)
        return ct_error_set(err, errno == ENOENT ? CT_ENOENT : CT_EIO, "fs-file", "%s %s: %s", what, path,
                            strerror(errno));
    rc = check_fd_owned(fd, path, what, err);
    close(fd);
    return rc;
}

static const char *file_kind(mode_t mode)
{
    return S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device" :
           S_ISDIR(mode) ? "a directory" : S_ISSOCK(mode) ? "a socket" : "of an unknown type";
}

int ct_fs_open_input(const char *path, const char *what, ct_error *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;

    if (fd < 0) {
        int e = errno;

        ct_error_set(err, e == ENOENT ? CT_ENOENT : CT_EIO, "fs-input", "%s %s: %s", what, path, strerror(e));
        errno = e;
        return -1;
    }
    if (fstat(fd, &st) != 0)
        st.st_mode = 0;
    if (!S_ISREG(st.st_mode)) {
        ct_error_set(err, CT_EFORMAT, "fs-input", "%s %s is %s, not a regular file", what, path,
                     file_kind(st.st_mode));
        ct_error_hint(err, "ctrain reads its inputs whole and would wait forever on a pipe or device: give a "
                           "regular file (copy the data into one)");
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* A secret is this user's and no one else's: checked on the descriptor read, not on the path. */
static int check_private(int fd, const char *path, const char *what, ct_error *err)
{
    struct stat st;

    if (fstat(fd, &st))
        return ct_error_set(err, CT_EIO, "fs-input", "%s %s: %s", what, path, strerror(errno));
    if (st.st_uid != geteuid()) {
        ct_error_set(err, CT_ECONFLICT, "fs-private", "%s %s belongs to another user (uid %lu)", what, path,
                     (unsigned long)st.st_uid);
        return ct_error_hint(err, "use a file of your own, readable only by you (chmod 600)");
    }
    if (st.st_mode & 077) {
        ct_error_set(err, CT_ECONFLICT, "fs-private", "%s %s can be read or written by group or others (mode %04o)",
                     what, path, (unsigned)(st.st_mode & 07777));
        return ct_error_hint(err, "chmod 600 %s, and make a new secret if others may have read it", path);
    }
    return 0;
}

static int read_whole(const char *path, const char *what, size_t max, int private, char **out, size_t *len,
                      ct_error *err)
{
    ct_error local;
    int fd, rc;
    struct stat st;
    size_t got = 0;
    ssize_t r = 1;
    char *buf = NULL;

    if (!err)
        err = &local;
    *out = NULL;
    if ((fd = ct_fs_open_input(path, what, err)) < 0)
        return err->code;
    if (private && (rc = check_private(fd, path, what, err)))
        goto fail;
    if (fstat(fd, &st) || (uint64_t)st.st_size > max) {
        rc = ct_error_set(err, CT_EFORMAT, "fs-input-size", "%s %s is %lld bytes, more than the %zu bytes ctrain "
                          "reads from one", what, path, (long long)st.st_size, max);
        ct_error_hint(err, "it is not a file ctrain wrote: remove it, or give the right file");
        goto fail;
    }
    if (!(buf = malloc((size_t)st.st_size + 1))) {
        rc = ct_error_set(err, CT_ENOMEM, "fs-input", "%s %s: out of memory", what, path);
        goto fail;
    }
    /* Up to one byte past its size: a file that grew meanwhile is refused, never read on. */
    while (got <= (size_t)st.st_size && (r = read(fd, buf + got, (size_t)st.st_size + 1 - got)) > 0)
        got += (size_t)r;
    if (r < 0 || got > (size_t)st.st_size) {
        rc = ct_error_set(err, r < 0 ? CT_EIO : CT_EFORMAT, "fs-input", "%s %s: %s", what, path,
                          r < 0 ? strerror(errno) : "it grew while being read");
        goto fail;
    }
    buf[got] = '\0';
    close(fd);
    *out = buf;
    if (len)
        *len = got;
    return 0;
fail:
    free(buf);
    close(fd);
    return rc;
}

int ct_fs_read_input(const char *path, const char *what, size_t max, char **out, size_t *len, ct_error *err)
{
    return read_whole(path, what, max, 0, out, len, err);
}

int ct_fs_read_private(const char *path, const char *what, size_t max, char **out, size_t *len, ct_error *err)
{
    return read_whole(path, what, max, 1, out, len, err);
}

int ct_fs_open_output(const char *path, int append, ct_error *err)
{
    /* No O_TRUNC at open: a file found to be someone else's must stay as it is. */
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0), 0666);

    if (fd < 0 && errno == ELOOP)
        return refuse_link(path, "output file", err), -1;
    if (fd < 0) {
        ct_error_set(err, CT_EIO, "fs-open", "%s: cannot open for writing: %s", path, strerror(errno));
        return -1;
    }
    if (check_fd_owned(fd, path, "output file", err)) {
        close(fd);
        return -1;
    }
    if (!append && ftruncate(fd, 0)) {
        ct_error_set(err, CT_EIO, "fs-open", "%s: cannot truncate: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* The exclusive temp beside path: a file (dir 0: open for reading and writing, the descriptor
 * returned) or a directory (dir 1: 0 returned). */
static int create_temp(const char *path, char *tmp, size_t size, int dir)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    size_t base = strlen(path) + strlen(CT_FS_TEMP_SUFFIX);

    if (base + CT_FS_TEMP_RANDOM >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* O_CREAT|O_EXCL (mkdir) with a random name, so an existing name (a planted symlink included)
     * is never opened; mode 0666 (0777) goes through the kernel's umask, so the file gets the mode
     * of any file the user creates without ctrain reading the umask (umask(0) to read it would
     * change it for every thread of the process meanwhile). */
    for (int tries = 0; tries < 100; tries++) {
        unsigned char r[CT_FS_TEMP_RANDOM];
        int fd;

        if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
            return -1;
        snprintf(tmp, size, "%s" CT_FS_TEMP_SUFFIX, path);
        for (int i = 0; i < CT_FS_TEMP_RANDOM; i++)
            tmp[base + (size_t)i] = chars[r[i] % (sizeof(chars) - 1)];
        tmp[base + CT_FS_TEMP_RANDOM] = '\0';
        if (dir)
            fd = mkdir(tmp, 0777);
        else
            fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);   /* read too: a mapping needs it */
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

int ct_fs_create_temp(const char *path, char *tmp, size_t size)
{
    return create_temp(path, tmp, size, 0);
}

int ct_fs_create_temp_dir(const char *path, char *tmp, size_t size)
{
    return create_temp(path, tmp, size, 1);
}

int ct_fs_write_atomic(const char *path, const void *data, size_t len, ct_error *err)
{
    char tmp[4200];
    int fd = ct_fs_create_temp(path, tmp, sizeof(tmp)), ok;

    if (fd < 0)
        return ct_error_set(err, CT_EIO, "fs-write", "%s: cannot create a temporary file beside it: %s", path,
                            strerror(errno));
    ok = ct_write_all(fd, data, len) == 0 && fsync(fd) == 0;
    ok = close(fd) == 0 && ok && ct_fs_replace(tmp, path) == 0;
    if (!ok) {
        int e = errno;

        unlink(tmp);
        return ct_error_set(err, CT_EIO, "fs-write", "%s: cannot write: %s", path, strerror(e));
    }
    /* The rename is durable only once the directory is: else a crash may bring the old file back. */
    if (ct_fsync_parent_dir(path))
        return ct_error_set(err, CT_EIO, "fs-write", "%s: written, but syncing its directory failed: %s", path,
                            strerror(errno));
    return 0;
}

/* dirfd's entry name: a file (or link) unlinked, a directory's files unlinked then the directory
 * removed (a sharded checkpoint holds files only: nothing deeper is followed). */
static void remove_at(int dirfd, const char *name)
{
    int fd;
    DIR *d;
    struct dirent *e;

    if (unlinkat(dirfd, name, 0) == 0 || (errno != EISDIR && errno != EPERM))
        return;
    if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return;
    if (!(d = fdopendir(fd))) {
        close(fd);
        return;
    }
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(fd, e->d_name, 0);
    closedir(d);
    unlinkat(dirfd, name, AT_REMOVEDIR);
}

void ct_fs_remove(const char *path)
{
    remove_at(AT_FDCWD, path);
}

int ct_fs_replace(const char *tmp, const char *path)
{
    if (rename(tmp, path) == 0)
        return 0;
    if (errno != EISDIR && errno != ENOTDIR && errno != ENOTEMPTY && errno != EEXIST)
        return -1;
    /* A directory on either side (a sharded checkpoint where a file was, or the other way round):
     * exchanged, which is atomic, then the older one (under the temporary name now) removed. */
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE))
        return -1;
    ct_fs_remove(tmp);
    return 0;
}

/* NAME is BASE.tmp. followed by exactly CT_FS_TEMP_RANDOM characters. */
static int is_temp_of(const char *name, const char *base)
{
    size_t bl = strlen(base), sl = strlen(CT_FS_TEMP_SUFFIX);

    return strlen(name) == bl + sl + CT_FS_TEMP_RANDOM && !strncmp(name, base, bl) &&
           !strncmp(name + bl, CT_FS_TEMP_SUFFIX, sl) && !strchr(name + bl + sl, '/');
}

void ct_fs_remove_stale_temps(const char *path)
{
    char *dcopy = strdup(path), *bcopy = strdup(path);
    const char *base;
    DIR *d = NULL;
    struct dirent *e;

    if (!dcopy || !bcopy)
        goto out;
    base = basename(bcopy);
    if (!(d = opendir(dirname(dcopy))))
        goto out;
    while ((e = readdir(d)) != NULL)
        if (is_temp_of(e->d_name, base))
            remove_at(dirfd(d), e->d_name);   /* the name itself: a link is removed, not followed */
out:
    if (d)
        closedir(d);
    free(dcopy);
    free(bcopy);
}
