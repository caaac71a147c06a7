/* SPDX-License-Identifier: MIT */
/*
 * tx8-emu: the ivshmem transport (transport.h). An ivshmem server exactly
 * as QEMU's ivshmem-doorbell device expects it (docs/specs/ivshmem-spec.rst
 * in QEMU), which is at the same time ivshmem peer 0: the device. Hosts
 * (QEMU guests running tx8.ko, or libtx's emu backend) are peers 1, 2, ...
 * See docs/tx8-emu.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <numa.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <tx8/tx8_hw.h>

#include "device.h"
#include "log.h"
#include "transport.h"

/* ------------------------------------------------------------------------ */
/* ivshmem messages                                                          */
/* ------------------------------------------------------------------------ */

/* One message: a little-endian int64, optionally with one fd. */
static int send_msg(int sock, int64_t value, int fd)
{
    struct msghdr msg;
    struct iovec iov;
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    int64_t le = (int64_t)htole64((uint64_t)value);
    ssize_t r;

    memset(&msg, 0, sizeof(msg));
    iov.iov_base = &le;
    iov.iov_len = sizeof(le);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
        struct cmsghdr *c;

        memset(&ctl, 0, sizeof(ctl));
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof(ctl.buf);
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    do {
        r = sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (r < 0 && errno == EINTR);
    return r == (ssize_t)sizeof(le) ? 0 : -1;
}

static struct emu_peer *peer_by_sock_index(struct emu_server *s, uint32_t i)
{
    return i < TX8_MAX_QUEUES && s->peers[i].id ? &s->peers[i] : NULL;
}

static bool id_in_use(const struct emu_server *s, int32_t id)
{
    for (int i = 0; i < TX8_MAX_QUEUES; i++)
        if (s->peers[i].id == id)
            return true;
    return false;
}

static int32_t alloc_id(struct emu_server *s)
{
    for (int tries = 0; tries < MAX_PEER_ID; tries++) {
        int32_t id = s->next_id;

        s->next_id = s->next_id >= MAX_PEER_ID ? 1 : s->next_id + 1;
        if (!id_in_use(s, id))
            return id;
    }
    return -1;
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

static void peer_remove(struct emu_server *s, struct emu_peer *p, const char *why)
{
    int32_t id = p->id;

    emu_log("peer %d left (%s)", id, why);
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, p->sock, NULL);
    dev_detach_peer(s->dev, p->queue);
    close(p->sock);
    close_fds(p->efd, TX8_NUM_VECTORS);
    memset(p, 0, sizeof(*p));
    /* Tell the others: the peer id without an fd. */
    for (int i = 0; i < TX8_MAX_QUEUES; i++)
        if (s->peers[i].id && send_msg(s->peers[i].sock, id, -1) < 0)
            emu_debug("peer %d: could not send the leave of peer %d", s->peers[i].id, id);
}

/* Send the handshake to a new peer. */
static int handshake(struct emu_server *s, struct emu_peer *p)
{
    if (send_msg(p->sock, IVSHMEM_PROTOCOL_VERSION, -1) || send_msg(p->sock, p->id, -1) ||
        send_msg(p->sock, -1, s->shm_fd))
        return -1;
    /* Existing peers, the device (peer 0) first, then in id order. */
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        if (send_msg(p->sock, TX8_DEVICE_PEER, s->dev_efd[v]))
            return -1;
    for (int32_t last = 0;;) {
        struct emu_peer *next = NULL;

        for (int i = 0; i < TX8_MAX_QUEUES; i++) {
            struct emu_peer *o = &s->peers[i];

            if (o->id && o != p && o->id > last && (!next || o->id < next->id))
                next = o;
        }
        if (!next)
            break;
        for (int v = 0; v < TX8_NUM_VECTORS; v++)
            if (send_msg(p->sock, next->id, next->efd[v]))
                return -1;
        last = next->id;
    }
    /* Its own vectors. */
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        if (send_msg(p->sock, p->id, p->efd[v]))
            return -1;
    return 0;
}

static void accept_peer(struct emu_server *s)
{
    struct timeval tv = {2, 0};
    struct epoll_event ev;
    struct emu_peer *p = NULL;
    int sock, slot = -1;

    sock = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (sock < 0) {
        if (errno != EAGAIN && errno != EINTR)
            emu_log("accept: %s", strerror(errno));
        return;
    }
    /* A peer that does not read must not stall the device. */
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));

    for (int i = 0; i < TX8_MAX_QUEUES; i++)
        if (!s->peers[i].id) {
            slot = i;
            break;
        }
    if (slot < 0) {
        emu_log("refusing a peer: all %d queues are in use", TX8_MAX_QUEUES);
        close(sock);
        return;
    }
    p = &s->peers[slot];
    memset(p, 0, sizeof(*p));
    p->sock = sock;
    {
        /* the connecting process, for monitors (tx8_queue.owner_pid) */
        struct ucred cred;
        socklen_t len = sizeof(cred);

        if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred) &&
            cred.pid > 0)
            p->pid = cred.pid;
    }
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        p->efd[v] = -1;
    for (int v = 0; v < TX8_NUM_VECTORS; v++) {
        p->efd[v] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (p->efd[v] < 0) {
            emu_log("eventfd: %s; refusing a peer", strerror(errno));
            goto fail;
        }
    }
    p->id = alloc_id(s);
    if (p->id < 0) {
        emu_log("refusing a peer: no free peer id");
        goto fail;
    }
    /* The queue is assigned before the peer learns its id. */
    p->queue = dev_attach_peer(s->dev, p->id, p->pid, p->efd);
    if (p->queue < 0) {
        emu_log("refusing peer %d: all %d queues are in use (a leaving peer's job may still be "
                "stopping)",
                p->id, TX8_MAX_QUEUES);
        goto fail;
    }
    if (handshake(s, p) < 0) {
        emu_log("peer %d: handshake failed: %s", p->id, strerror(errno));
        dev_detach_peer(s->dev, p->queue);
        goto fail;
    }
    /* Tell the others about the newcomer. */
    for (int i = 0; i < TX8_MAX_QUEUES; i++) {
        struct emu_peer *o = &s->peers[i];

        if (!o->id || o == p)
            continue;
        for (int v = 0; v < TX8_NUM_VECTORS; v++)
            if (send_msg(o->sock, p->id, p->efd[v])) {
                emu_debug("peer %d: could not send the join of peer %d", o->id, p->id);
                break;
            }
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = EP_TAG(EP_PEER, slot);
    epoll_ctl(s->epfd, EPOLL_CTL_ADD, sock, &ev);
    emu_log("peer %d joined (queue %d, pid %d)", p->id, p->queue, p->pid);
    return;

fail:
    close(sock);
    close_fds(p->efd, TX8_NUM_VECTORS);
    memset(p, 0, sizeof(*p));
}

static void peer_event(struct emu_server *s, uint32_t idx, uint32_t events)
{
    struct emu_peer *p = peer_by_sock_index(s, idx);
    char buf[256];
    ssize_t r;

    if (!p)
        return;
    if (events & EPOLLIN) {
        /* Peers have nothing to say in this protocol: discard. */
        r = recv(p->sock, buf, sizeof(buf), MSG_DONTWAIT);
        if (r > 0)
            return;
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        peer_remove(s, p, r == 0 ? "disconnected" : strerror(errno));
        return;
    }
    if (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))
        peer_remove(s, p, "hung up");
}

/* ------------------------------------------------------------------------ */
/* Set-up                                                                    */
/* ------------------------------------------------------------------------ */

int srv_make_shm(struct emu_server *s, int numa_node)
{
    s->shm_fd = memfd_create("tx8-device-memory", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (s->shm_fd < 0) {
        emu_log("memfd_create: %s", strerror(errno));
        return -1;
    }
    if (ftruncate(s->shm_fd, (off_t)s->mem_size) < 0) {
        emu_log("cannot size device memory to %llu bytes: %s", (unsigned long long)s->mem_size,
                strerror(errno));
        return -1;
    }
    /* Peers get this fd: they must not be able to shrink it under us. */
    if (fcntl(s->shm_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        emu_log("warning: cannot seal device memory: %s", strerror(errno));
    s->mem = mmap(NULL, s->mem_size, PROT_READ | PROT_WRITE, MAP_SHARED, s->shm_fd, 0);
    if (s->mem == MAP_FAILED) {
        s->mem = NULL;
        emu_log("mmap of device memory: %s", strerror(errno));
        return -1;
    }
    if (numa_node >= 0) {
        /* Before any page is touched: bind the pages to the node. */
        numa_tonode_memory(s->mem, s->mem_size, numa_node);
    }
    return 0;
}

/* mkdir -p of the directory part of path (e.g. /run/tx8). */
static int make_parent_dirs(const char *path)
{
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    size_t n = strlen(path);

    if (n >= sizeof(dir))
        return 0; /* reported as too long by the caller */
    memcpy(dir, path, n + 1);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return 0;
}

static int make_socket(struct emu_server *s)
{
    struct sockaddr_un addr, tmp;
    struct stat st;
    bool use_tmp;
    int fd;

    if (strlen(s->path) >= sizeof(addr.sun_path)) {
        emu_log("socket path too long (max %zu bytes): %s", sizeof(addr.sun_path) - 1, s->path);
        return -1;
    }
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, s->path);

    if (make_parent_dirs(s->path) < 0) {
        emu_log("cannot create the directory of %s: %s", s->path, strerror(errno));
        return -1;
    }
    if (lstat(s->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            emu_log("%s exists and is not a socket; not touching it", s->path);
            return -1;
        }
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
            close(fd);
            emu_log("%s is in use by a running server", s->path);
            return -1;
        }
        close(fd);
        emu_log("replacing stale socket %s", s->path);
        unlink(s->path);
    }

    /* Bind under a temporary name and rename when listening, so that the
     * socket appears only when it accepts connections. */
    memset(&tmp, 0, sizeof(tmp));
    tmp.sun_family = AF_UNIX;
    use_tmp = snprintf(tmp.sun_path, sizeof(tmp.sun_path), "%s.%d.tmp", s->path, (int)getpid()) <
              (int)sizeof(tmp.sun_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        emu_log("socket: %s", strerror(errno));
        return -1;
    }
    if (use_tmp)
        unlink(tmp.sun_path);
    if (bind(fd, (struct sockaddr *)(use_tmp ? &tmp : &addr), sizeof(addr)) < 0) {
        emu_log("cannot bind %s: %s", s->path, strerror(errno));
        close(fd);
        return -1;
    }
    if (listen(fd, 16) < 0 || (use_tmp && rename(tmp.sun_path, s->path) < 0)) {
        emu_log("cannot listen on %s: %s", s->path, strerror(errno));
        if (use_tmp)
            unlink(tmp.sun_path);
        else
            unlink(s->path);
        close(fd);
        return -1;
    }
    if (stat(s->path, &st) == 0)
        s->sock_ino = st.st_ino;
    s->listen_fd = fd;
    return 0;
}

static void remove_socket(struct emu_server *s)
{
    struct stat st;

    /* Only if it is still ours (a new server may have replaced it). */
    if (s->listen_fd >= 0 && stat(s->path, &st) == 0 && st.st_ino == s->sock_ino)
        unlink(s->path);
}

void srv_ep_add(struct emu_server *s, int fd, uint64_t tag)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void srv_init(struct emu_server *s, const char *path, uint64_t mem_size)
{
    memset(s, 0, sizeof(*s));
    s->path = path;
    s->mem_size = mem_size;
    s->listen_fd = s->shm_fd = s->epfd = -1;
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        s->dev_efd[v] = -1;
    s->next_id = 1;
}

int srv_listen(struct emu_server *s)
{
    for (int v = 0; v < TX8_NUM_VECTORS; v++) {
        s->dev_efd[v] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (s->dev_efd[v] < 0) {
            emu_log("eventfd: %s", strerror(errno));
            return -1;
        }
    }
    if (make_socket(s) < 0)
        return -1;
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd < 0) {
        emu_log("epoll: %s", strerror(errno));
        return -1;
    }
    srv_ep_add(s, s->listen_fd, EP_TAG(EP_LISTEN, 0));
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        srv_ep_add(s, s->dev_efd[v], EP_TAG(EP_DOORBELL, v));
    return 0;
}

int srv_handle(struct emu_server *s, const struct epoll_event *ev)
{
    uint32_t kind = (uint32_t)(ev->data.u64 >> 32);
    uint32_t idx = (uint32_t)ev->data.u64;
    uint64_t val;

    switch (kind) {
    case EP_LISTEN:
        accept_peer(s);
        return 0;
    case EP_DOORBELL:
        if (idx < TX8_NUM_VECTORS &&
            read(s->dev_efd[idx], &val, sizeof(val)) == (ssize_t)sizeof(val))
            dev_doorbell(s->dev, idx);
        return 0;
    case EP_PEER:
        peer_event(s, idx, ev->events);
        return 0;
    default:
        return (int)kind;
    }
}

int srv_peer_count(const struct emu_server *s)
{
    int n = 0;

    for (int i = 0; i < TX8_MAX_QUEUES; i++)
        n += s->peers[i].id != 0;
    return n;
}

void srv_close(struct emu_server *s)
{
    /* Peers see their socket close; the device stops. */
    for (int i = 0; i < TX8_MAX_QUEUES; i++) {
        struct emu_peer *p = &s->peers[i];

        if (!p->id)
            continue;
        dev_detach_peer(s->dev, p->queue);
        close(p->sock);
        close_fds(p->efd, TX8_NUM_VECTORS);
        memset(p, 0, sizeof(*p));
    }
    remove_socket(s);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->listen_fd = -1;
    if (s->dev)
        dev_destroy(s->dev);
    s->dev = NULL;
    close_fds(s->dev_efd, TX8_NUM_VECTORS);
    if (s->epfd >= 0)
        close(s->epfd);
    s->epfd = -1;
    if (s->mem)
        munmap(s->mem, s->mem_size);
    s->mem = NULL;
    if (s->shm_fd >= 0)
        close(s->shm_fd);
    s->shm_fd = -1;
}
