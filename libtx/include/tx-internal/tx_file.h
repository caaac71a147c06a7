/* SPDX-License-Identifier: MIT */
/*
 * libtx internal: writing and reading whole buffers on file descriptors,
 * and writing a file all or nothing (a temporary name next to it, renamed
 * over it once complete). Used by the model formats (libtx/model, where
 * tx_model_internal.h still names them txm_*) and the tools' helpers
 * (common/cli.c). Depends on nothing above libtx/common.
 *
 * Return values: the descriptor-level helpers (tx_file_write_all,
 * tx_file_pwrite_all, tx_file_pread_all) are thin system-call wrappers and
 * return 0 or -errno, so the caller can name the system's reason
 * (strerror(-rc)) in its message; every caller maps the value with
 * tx_errno_code() where it reports the failure, and nothing outside libtx
 * and the tools' library sees it. tx_file_commit_temp and
 * tx_file_write_text return TX_OK or a TX_E* code (tx/tx_error.h).
 */
#ifndef TX_COMMON_FILE_H
#define TX_COMMON_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Writes all of buf (retries short writes and EINTR); 0 or -errno. */
int tx_file_write_all(int fd, const void *buf, size_t len);
int tx_file_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* Reads exactly len bytes at off; -EIO at an unexpected end of file. */
int tx_file_pread_all(int fd, void *buf, size_t len, uint64_t off);

/* The system calls the writers need, in the same errno domain: open(2)'s
 * descriptor or -errno; close, fsync, rename: 0 or -errno (a descriptor
 * is gone after close either way). tx_file_open_unnamed: a file without a
 * name in directory dir (O_TMPFILE, for writing), -EOPNOTSUPP where the
 * system has none; tx_file_link gives such a file the name path. */
int tx_file_open(const char *path, int flags, unsigned mode);
int tx_file_open_unnamed(const char *dir);
int tx_file_close(int fd);
int tx_file_fsync(int fd);
int tx_file_rename(const char *from, const char *to);
int tx_file_link(int fd, const char *path);

/* A temporary name next to path ("path.tmp.PID.N"), malloc'd. */
char *tx_file_temp_name(const char *path);

/* An output path may be replaced only if it does not exist, is a regular
 * file or a symbolic link: 0, or TX_EINVAL naming path (e.g. `-o /dev/null`
 * run as root would otherwise turn /dev/null into a regular file). Writers
 * check it when they open and again in tx_file_commit_temp(). */
int tx_file_check_target(const char *path, char *err, size_t errsz);

/* The end of writing a file under a temporary name: with rc 0 renames *tmp
 * to path, then frees *tmp and sets it NULL; on failure (rc < 0 on entry: a
 * -errno from the helpers above, or the rename) fills err ("path: reason"),
 * returns the TX_E* code (tx_errno_code) and leaves *tmp for the caller to
 * unlink. */
int tx_file_commit_temp(char **tmp, const char *path, int rc, char *err, size_t errsz);

/* Writes txt and then tail (NULL: nothing) to path all or nothing. TX_OK or
 * a TX_E* code (a missing directory: TX_ENOENT); the message names path. */
int tx_file_write_text(const char *path, const char *txt, const char *tail, char *err,
                       size_t errsz);

#endif
