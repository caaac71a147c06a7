/* SPDX-License-Identifier: MIT */
/*
 * libtx internal: whole-file writes and reads on descriptors, and writing a
 * file all or nothing (see file.h).
 */
#include <tx-internal/tx_file.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tx-internal/tx_errors.h>

int tx_file_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno; /* errno domain (file.h) */
        }
        if (n == 0)
            return -EIO; /* errno domain (file.h) */
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int tx_file_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const char *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno; /* errno domain (file.h) */
        }
        if (n == 0)
            return -EIO; /* errno domain (file.h) */
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int tx_file_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    char *p = buf;
    while (len) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno; /* errno domain (file.h) */
        }
        if (n == 0)
            return -EIO; /* errno domain (file.h): unexpected end of file */
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int tx_file_open(const char *path, int flags, unsigned mode)
{
    int fd = open(path, flags, (mode_t)mode);
    return fd < 0 ? -errno : fd; /* errno domain (file.h) */
}

int tx_file_open_unnamed(const char *dir)
{
#ifdef O_TMPFILE
    return tx_file_open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
#else
    (void)dir;
    return -EOPNOTSUPP; /* errno domain (file.h) */
#endif
}

int tx_file_close(int fd)
{
    return close(fd) < 0 ? -errno : 0; /* errno domain (file.h) */
}

int tx_file_fsync(int fd)
{
    return fsync(fd) < 0 ? -errno : 0; /* errno domain (file.h) */
}

int tx_file_rename(const char *from, const char *to)
{
    return rename(from, to) < 0 ? -errno : 0; /* errno domain (file.h) */
}

int tx_file_link(int fd, const char *path)
{
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

char *tx_file_temp_name(const char *path)
{
    static atomic_uint counter;
    unsigned n = atomic_fetch_add(&counter, 1);
    size_t len = strlen(path) + 48;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s.tmp.%ld.%u", path, (long)getpid(), n);
    return p;
}

int tx_file_write_text(const char *path, const char *txt, const char *tail, char *err, size_t errsz)
{
    char *tmp = tx_file_temp_name(path);
    int fd = tmp ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    if (fd < 0) {
        int e = tmp ? errno : ENOMEM;
        free(tmp);
        return tx_errbuf(err, errsz, tx_errno_code(e), "%s: %s", path, strerror(e));
    }
    int rc = tx_file_write_all(fd, txt, strlen(txt));
    if (rc == 0 && tail)
        rc = tx_file_write_all(fd, tail, strlen(tail));
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    rc = tx_file_commit_temp(&tmp, path, rc, err, errsz);
    if (tmp)
        unlink(tmp);
    free(tmp);
    return rc;
}

int tx_file_check_target(const char *path, char *err, size_t errsz)
{
    struct stat st;

    if (lstat(path, &st) < 0 || S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))
        return 0;
    return tx_errbuf(err, errsz, TX_EINVAL,
                     "%s: exists and is not a regular file (a device, directory, FIFO or socket "
                     "is never replaced by an output file)",
                     path);
}

int tx_file_commit_temp(char **tmp, const char *path, int rc, char *err, size_t errsz)
{
    if (rc == 0) {
        int bad = tx_file_check_target(path, err, errsz);
        if (bad < 0)
            return bad;
    }
    if (rc == 0 && rename(*tmp, path) < 0)
        rc = -errno;
    if (rc < 0)
        return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: %s", path, strerror(-rc));
    free(*tmp);
    *tmp = NULL;
    return 0;
}
