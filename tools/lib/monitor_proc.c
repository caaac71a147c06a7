/* SPDX-License-Identifier: MIT */
/*
 * libtx telemetry: /proc scans (accel file descriptors and their fdinfo,
 * holders of UNIX sockets, per-process facts) and the sock_diag query that
 * finds the clients of a UNIX socket.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "telemetry/monitor.h"

/* Read a small file into buf (NUL terminated). Bytes read, or -1. */
ssize_t txm_read_small(const char *path, char *buf, size_t size)
{
    ssize_t n, total = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    if (fd < 0)
        return -1;
    while ((size_t)total < size - 1) {
        n = read(fd, buf + total, size - 1 - (size_t)total);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        total += n;
    }
    close(fd);
    buf[total] = 0;
    return total;
}

static int is_pid_name(const char *s)
{
    if (*s < '1' || *s > '9')
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static int push_fd(struct txm_scan *s, size_t *cap, const struct txm_fd_sample *f)
{
    if (s->nfds == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct txm_fd_sample *n = realloc(s->fds, ncap * sizeof(*n));

        if (!n)
            return -1;
        s->fds = n;
        *cap = ncap;
    }
    s->fds[s->nfds++] = *f;
    return 0;
}

static int push_sock(struct txm_scan *s, size_t *cap, uint64_t ino, int pid)
{
    if (s->nsocks == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct txm_sock_owner *n = realloc(s->socks, ncap * sizeof(*n));

        if (!n)
            return -1;
        s->socks = n;
        *cap = ncap;
    }
    s->socks[s->nsocks].ino = ino;
    s->socks[s->nsocks].pid = pid;
    s->nsocks++;
    return 0;
}

int txm_proc_scan(const struct txm_scan_opts *o, struct txm_scan *out)
{
    size_t fd_cap = 0, sock_cap = 0;
    const char *root = o->proc_root ? o->proc_root : "/proc";
    struct dirent *pe;
    DIR *pd;

    memset(out, 0, sizeof(*out));
    pd = opendir(root);
    if (!pd)
        return -1;
    while ((pe = readdir(pd))) {
        char dpath[1024];
        struct dirent *fe;
        DIR *fdd;
        int pid;

        if (!is_pid_name(pe->d_name))
            continue;
        pid = atoi(pe->d_name);
        if (pid == o->skip_pid)
            continue;
        out->procs++;
        snprintf(dpath, sizeof(dpath), "%s/%d/fd", root, pid);
        fdd = opendir(dpath);
        if (!fdd) {
            if (errno == EACCES || errno == EPERM)
                out->unreadable++;
            continue; /* or gone meanwhile */
        }
        while ((fe = readdir(fdd))) {
            char lpath[1400], target[PATH_MAX];
            ssize_t n;

            if (fe->d_name[0] < '0' || fe->d_name[0] > '9')
                continue;
            snprintf(lpath, sizeof(lpath), "%s/%s", dpath, fe->d_name);
            n = readlink(lpath, target, sizeof(target) - 1);
            if (n <= 0)
                continue;
            target[n] = 0;
            if (o->n_sock_inodes && !strncmp(target, "socket:[", 8)) {
                uint64_t ino = strtoull(target + 8, NULL, 10);

                if (bsearch(&ino, o->sock_inodes, o->n_sock_inodes, sizeof(uint64_t), cmp_u64) &&
                    push_sock(out, &sock_cap, ino, pid) < 0)
                    goto oom;
                continue;
            }
            /* device nodes only: one stat for candidates, none for files,
             * sockets, pipes and anonymous inodes */
            if (o->accel_major && !strncmp(target, "/dev/", 5)) {
                struct stat st;
                struct txm_fd_sample f;
                char ipath[1400], text[4096];
                ssize_t tl;

                if (stat(lpath, &st) < 0 || !S_ISCHR(st.st_mode) ||
                    major(st.st_rdev) != o->accel_major)
                    continue;
                snprintf(ipath, sizeof(ipath), "%s/%d/fdinfo/%s", root, pid, fe->d_name);
                tl = txm_read_small(ipath, text, sizeof(text));
                if (tl < 0)
                    continue;
                memset(&f, 0, sizeof(f));
                f.pid = pid;
                f.fd = atoi(fe->d_name);
                f.minor = (int)minor(st.st_rdev);
                if (txm_fdinfo_parse(text, (size_t)tl, o->engine ? o->engine : "compute",
                                     o->region ? o->region : "vram", &f.info) < 0)
                    continue;
                if (push_fd(out, &fd_cap, &f) < 0)
                    goto oom;
            }
        }
        closedir(fdd);
    }
    closedir(pd);
    return 0;
oom:
    closedir(pd);
    txm_scan_free(out);
    return -1;
}

void txm_scan_free(struct txm_scan *s)
{
    if (!s)
        return;
    free(s->fds);
    free(s->socks);
    memset(s, 0, sizeof(*s));
}

int txm_proc_rss(const char *proc_root, int pid, uint64_t *bytes)
{
    char path[PATH_MAX], buf[4096];
    const char *p;
    unsigned long long kb;

    snprintf(path, sizeof(path), "%s/%d/status", proc_root ? proc_root : "/proc", pid);
    if (txm_read_small(path, buf, sizeof(buf)) < 0)
        return -1;
    p = strstr(buf, "\nVmRSS:");
    if (!p || sscanf(p + 7, "%llu", &kb) != 1)
        return -1;
    *bytes = (uint64_t)kb << 10;
    return 0;
}

static uint64_t stat_start_time(const char *buf)
{
    const char *p = strrchr(buf, ')');
    unsigned long long st;

    if (!p)
        return 0;
    p++;
    /* field 3 (state) follows the ')' of comm; starttime is field 22 */
    for (int field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    if (p && sscanf(p + 1, "%llu", &st) == 1)
        return st;
    return 0;
}

uint64_t txm_proc_start_time(const char *proc_root, int pid)
{
    char path[PATH_MAX], buf[1024];

    snprintf(path, sizeof(path), "%s/%d/stat", proc_root ? proc_root : "/proc", pid);
    if (txm_read_small(path, buf, sizeof(buf)) <= 0)
        return 0;
    return stat_start_time(buf);
}

int txm_proc_info(const char *proc_root, int pid, struct txm_proc_info *pi)
{
    const char *root = proc_root ? proc_root : "/proc";
    char path[PATH_MAX], buf[4096];
    const char *p;
    ssize_t n;

    memset(pi, 0, sizeof(*pi));
    pi->pid = pid;
    snprintf(path, sizeof(path), "%s/%d/status", root, pid);
    if (txm_read_small(path, buf, sizeof(buf)) < 0)
        return -1;
    if (!strncmp(buf, "Name:\t", 6)) {
        size_t l = strcspn(buf + 6, "\n");

        if (l >= sizeof(pi->comm))
            l = sizeof(pi->comm) - 1;
        memcpy(pi->comm, buf + 6, l);
        pi->comm[l] = 0;
    }
    p = strstr(buf, "\nUid:");
    if (p) {
        unsigned long uid;

        if (sscanf(p + 5, "%lu", &uid) == 1) {
            pi->uid = (uid_t)uid;
            pi->has_uid = true;
        }
    }
    p = strstr(buf, "\nVmRSS:");
    if (p) {
        unsigned long long kb;

        if (sscanf(p + 7, "%llu", &kb) == 1) {
            pi->rss_bytes = (uint64_t)kb << 10;
            pi->has_rss = true;
        }
    }
    snprintf(path, sizeof(path), "%s/%d/cmdline", root, pid);
    n = txm_read_small(path, pi->cmdline, sizeof(pi->cmdline));
    if (n > 0) {
        /* arguments are NUL separated (and the last NUL terminated) */
        for (ssize_t i = 0; i < n; i++)
            if (pi->cmdline[i] == 0 || pi->cmdline[i] == '\n' || pi->cmdline[i] == '\t')
                pi->cmdline[i] = ' ';
        while (n > 0 && pi->cmdline[n - 1] == ' ')
            pi->cmdline[--n] = 0;
    }
    if (n <= 0)
        snprintf(pi->cmdline, sizeof(pi->cmdline), "[%s]", pi->comm);
    pi->start_time = txm_proc_start_time(root, pid);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* sock_diag: the clients of a listening UNIX socket                         */
/* ------------------------------------------------------------------------ */

int txm_unix_peers(const char *sock_path, uint64_t **peers, size_t *n)
{
    struct {
        struct nlmsghdr nlh;
        struct unix_diag_req req;
    } msg;
    struct sockaddr_nl nladdr = {.nl_family = AF_NETLINK};
    uint64_t *list = NULL;
    size_t count = 0, cap = 0;
    long buf[8192 / sizeof(long)];
    struct stat st;
    uint32_t kdev;
    int fd, done = 0, err = 0;

    *peers = NULL;
    *n = 0;
    if (stat(sock_path, &st) < 0)
        return -1;
    if (!S_ISSOCK(st.st_mode)) {
        errno = ENOTSOCK;
        return -1;
    }
    /* the kernel reports the bound file's s_dev in its own encoding */
    kdev = (uint32_t)((major(st.st_dev) << 20) | minor(st.st_dev));

    fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -1;
    memset(&msg, 0, sizeof(msg));
    msg.nlh.nlmsg_len = sizeof(msg);
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    msg.nlh.nlmsg_seq = 1;
    msg.req.sdiag_family = AF_UNIX;
    msg.req.udiag_states = ~0u;
    msg.req.udiag_show = UDIAG_SHOW_VFS | UDIAG_SHOW_PEER;
    if (sendto(fd, &msg, sizeof(msg), 0, (struct sockaddr *)&nladdr, sizeof(nladdr)) < 0) {
        err = errno;
        goto out;
    }
    while (!done) {
        ssize_t len = recv(fd, buf, sizeof(buf), 0);
        struct nlmsghdr *h;

        if (len < 0) {
            if (errno == EINTR)
                continue;
            err = errno;
            goto out;
        }
        if (len == 0)
            break;
        for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
            struct unix_diag_msg *m;
            struct rtattr *a;
            int alen, vfs_match = 0;
            uint32_t peer = 0;

            if (h->nlmsg_type == NLMSG_DONE) {
                done = 1;
                break;
            }
            if (h->nlmsg_type == NLMSG_ERROR) {
                struct nlmsgerr *e = NLMSG_DATA(h);

                err = e->error ? -e->error : EIO;
                goto out;
            }
            if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
                continue;
            m = NLMSG_DATA(h);
            /* connections only: the listening socket has no peer */
            if (m->udiag_state == 10 /* TCP_LISTEN */)
                continue;
            a = (struct rtattr *)(m + 1);
            alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
            for (; RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
                if (a->rta_type == UNIX_DIAG_VFS &&
                    RTA_PAYLOAD(a) >= (int)sizeof(struct unix_diag_vfs)) {
                    struct unix_diag_vfs v;

                    memcpy(&v, RTA_DATA(a), sizeof(v));
                    vfs_match = v.udiag_vfs_ino == (uint32_t)st.st_ino && v.udiag_vfs_dev == kdev;
                } else if (a->rta_type == UNIX_DIAG_PEER &&
                           RTA_PAYLOAD(a) >= (int)sizeof(uint32_t)) {
                    memcpy(&peer, RTA_DATA(a), sizeof(peer));
                }
            }
            if (!vfs_match || !peer)
                continue;
            if (count == cap) {
                size_t ncap = cap ? cap * 2 : 16;
                uint64_t *nl = realloc(list, ncap * sizeof(*nl));

                if (!nl) {
                    err = ENOMEM;
                    goto out;
                }
                list = nl;
                cap = ncap;
            }
            list[count++] = peer;
        }
    }
out:
    close(fd);
    if (err) {
        free(list);
        errno = err;
        return -1;
    }
    if (count)
        qsort(list, count, sizeof(*list), cmp_u64);
    *peers = list;
    *n = count;
    return 0;
}
