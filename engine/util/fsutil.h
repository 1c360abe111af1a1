/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — output files in directories other users may share (internal to libctrain).
 *
 * A run's directory (--default-root-dir) may sit in a shared file system. Nothing ctrain writes
 * there follows a symlink someone planted, lands in a file someone else owns, or collides with
 * another writer's temp file:
 *   - the directory must be ours and not writable by others unless sticky (as /tmp is);
 *   - files are opened with O_NOFOLLOW and must be regular files we own;
 *   - temp files get exclusive random names (O_CREAT|O_EXCL) and are renamed over the target;
 *   - stale temps of a killed writer are found by comparing names, never by a glob of the path.
 */
#ifndef CTRAIN_UTIL_FSUTIL_H
#define CTRAIN_UTIL_FSUTIL_H

#include <stddef.h>

#include "ctrain/error.h"

/* Suffix of the temp files beside a target: TARGET.tmp.XXXXXX (six random characters). */
#define CT_FS_TEMP_SUFFIX ".tmp."
#define CT_FS_TEMP_RANDOM 6

/* dir (named by flag, e.g. "--default-root-dir") is owned by this user and not writable by
 * others without the sticky bit. CT_ECONFLICT with a hint otherwise; CT_EIO when it cannot be
 * examined. */
int ct_fs_check_dir(const char *dir, const char *flag, ct_error *err);
/* mkdir -p: every missing directory of dir (mode 0777 less the umask). 0, or -1 with errno set and
 * failed (when not NULL) holding the directory that could not be made. */
int ct_fs_mkdirs(const char *dir, char *failed, size_t size);

/* path is a regular file owned by this user (not reached through a symlink). what names it in
 * the message. CT_ECONFLICT otherwise, CT_ENOENT when it does not exist. */
int ct_fs_check_owned(const char *path, const char *what, ct_error *err);

/* Open path for writing (append: at its end, else truncated), created 0666 & ~umask when absent;
 * never through a symlink, never a file another user owns. A descriptor, or -1 with err set. */
int ct_fs_open_output(const char *path, int append, ct_error *err);

/* Open path to read it whole (a checkpoint, config.json, a token shard, an IDX file, a prompt
 * file): without blocking (open of a FIFO without a writer waits forever, signals included) and
 * only when it is a regular file (read from a FIFO or a device may never end). what names it in
 * the message ("checkpoint", "token shard"). A descriptor in blocking mode, or -1 with err set:
 * CT_ENOENT when path does not exist, CT_EFORMAT when it is not a regular file, CT_EIO otherwise. */
int ct_fs_open_input(const char *path, const char *what, ct_error *err);

/* Read path whole (a hang record, a live record, a node summary, a config): what ct_fs_open_input
 * opens, and at most max bytes of it: a larger file is refused naming its size and the cap
 * (CT_EFORMAT). *out (malloc'd, NUL-terminated after its *len bytes; len may be NULL) on 0. */
int ct_fs_read_input(const char *path, const char *what, size_t max, char **out, size_t *len, ct_error *err);
/* The same for a secret (--store-secret-file): also owned by this user and neither readable nor
 * writable by group or others (CT_ECONFLICT naming the mode, with a chmod hint), checked on the
 * descriptor it reads. */
int ct_fs_read_private(const char *path, const char *what, size_t max, char **out, size_t *len, ct_error *err);

/* Make dir (one level; its parent exists), or take the one there, for files ctrain writes in it
 * (DIR/hang): it must be a directory itself (not a symlink to one), owned by this user and not
 * writable by others unless sticky. what names it in the message. CT_ECONFLICT with a hint when
 * another user made it or planted a link, CT_EIO when it cannot be made. */
int ct_fs_make_dir(const char *dir, const char *what, ct_error *err);

/* Create the exclusive temp file beside path: tmp (size bytes) receives its name. A descriptor open
 * for reading and writing (mode 0666 & ~umask, close-on-exec), or -1 with errno set. */
int ct_fs_create_temp(const char *path, char *tmp, size_t size);
/* The same, a directory (mode 0777 & ~umask; a sharded checkpoint's save): 0, or -1 with errno. */
int ct_fs_create_temp_dir(const char *path, char *tmp, size_t size);

/* Write len bytes to path atomically: exclusive temp beside it, fsync, rename over path. */
int ct_fs_write_atomic(const char *path, const void *data, size_t len, ct_error *err);

/* Remove the temp files (and temp directories: a sharded checkpoint's save) a killed writer left
 * beside path (PATH.tmp.XXXXXX), matching the names literally: '[', '*' or '?' in path are ordinary
 * characters. */
void ct_fs_remove_stale_temps(const char *path);

/* Rename tmp over path atomically: path absent, a file, or a directory of files (a sharded
 * checkpoint), either side a directory: exchanged (renameat2 RENAME_EXCHANGE), then the older one
 * removed. 0, or -1 with errno set. */
int ct_fs_replace(const char *tmp, const char *path);
/* Remove path: a file or link, or a directory of files (a sharded checkpoint; nothing deeper). */
void ct_fs_remove(const char *path);

#endif
