/* SPDX-License-Identifier: MIT */
/*
 * tx8-emu: the TX8 device model.
 *
 * An ivshmem server exactly as QEMU's ivshmem-doorbell device expects it
 * (docs/specs/ivshmem-spec.rst in QEMU), which is at the same time ivshmem
 * peer 0: the device. Hosts (QEMU guests running tx8.ko, or libtx's emu
 * backend) are peers 1, 2, ...  See docs/tx8-emu.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <numa.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <tx8/tx8_hw.h>

#include "device.h"
#include "engine/tx8_engine.h"
#include "log.h"

#define IVSHMEM_PROTOCOL_VERSION 0
#define MAX_PEER_ID 65535

struct peer {
    int32_t id;  /* 0 = slot unused */
    int32_t pid; /* SO_PEERCRED of the connection, 0 unknown */
    int sock;
    int efd[TX8_NUM_VECTORS];
    int queue;
};

struct server {
    const char *path;
    int listen_fd;
    ino_t sock_ino;
    int epfd;
    int shm_fd;
    void *mem;
    uint64_t mem_size;
    int dev_efd[TX8_NUM_VECTORS]; /* peer 0's vectors */
    struct peer peers[TX8_MAX_QUEUES];
    int32_t next_id;
    struct emu_dev *dev;
};

enum { EP_LISTEN = 1, EP_SIGNAL, EP_TIMER, EP_DOORBELL, EP_PEER };
#define EP_TAG(kind, idx) (((uint64_t)(kind) << 32) | (uint32_t)(idx))

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tx8-emu --socket PATH --memory SIZE [options]\n"
            "\n"
            "The TX8 device model: an ivshmem server for QEMU's ivshmem-doorbell\n"
            "device (vectors=%d) and libtx's emu backend.\n"
            "\n"
            "  -s, --socket PATH        UNIX socket to listen on\n"
            "  -m, --memory SIZE        device memory, a power of two >= 16M (e.g. 256M, 4G)\n"
            "  -c, --cores N            compute cores (worker threads; default: all CPUs)\n"
            "  -n, --numa-node N        place device memory and workers on NUMA node N\n"
            "  -e, --expert-cache SIZE  accepted, ignored: the expert cache counters count the\n"
            "                           host's expert cache (interface 1.6)\n"
            "  -i, --inject FAULT[:ARG] hang | error | slow:MS | crash-after:N (repeatable)\n"
            "  -v, --verbose            log every peer, mailbox request and failed job\n"
            "  -h, --help\n",
            TX8_NUM_VECTORS);
}

/* "256M", "4G", "65536", "1k": binary suffixes K, M, G, T. */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    if (!s || !*s || *s == '-')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    switch (*end) {
    case 0:
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    default:
        return -1;
    }
    if (*end) {
        end++;
        if (*end == 'i' && end[1] == 'B')
            end += 2;
        else if (*end == 'B')
            end++;
    }
    if (*end)
        return -1;
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    unsigned long v;

    if (!s || !*s || *s == '-')
        return -1;
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || *end || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_inject(const char *s, struct emu_faults *f)
{
    const char *arg = strchr(s, ':');
    size_t n = arg ? (size_t)(arg - s) : strlen(s);
    unsigned long v = 0;

    if (arg)
        arg++;
    if (n == 4 && !strncmp(s, "hang", 4) && !arg) {
        f->hang++;
        return 0;
    }
    if (n == 5 && !strncmp(s, "error", 5) && !arg) {
        f->error++;
        return 0;
    }
    if (n == 4 && !strncmp(s, "slow", 4) && arg && !parse_uint(arg, 600000, &v) && v > 0) {
        f->slow_ms = (unsigned)v;
        return 0;
    }
    if (n == 11 && !strncmp(s, "crash-after", 11) && arg && !parse_uint(arg, 1ul << 40, &v)) {
        f->crash_after = (int64_t)v;
        return 0;
    }
    return -1;
}

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

static struct peer *peer_by_sock_index(struct server *s, uint32_t i)
{
    return i < TX8_MAX_QUEUES && s->peers[i].id ? &s->peers[i] : NULL;
}

static bool id_in_use(const struct server *s, int32_t id)
{
    for (int i = 0; i < TX8_MAX_QUEUES; i++)
        if (s->peers[i].id == id)
            return true;
    return false;
}

static int32_t alloc_id(struct server *s)
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

static void peer_remove(struct server *s, struct peer *p, const char *why)
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
static int handshake(struct server *s, struct peer *p)
{
    if (send_msg(p->sock, IVSHMEM_PROTOCOL_VERSION, -1) || send_msg(p->sock, p->id, -1) ||
        send_msg(p->sock, -1, s->shm_fd))
        return -1;
    /* Existing peers, the device (peer 0) first, then in id order. */
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        if (send_msg(p->sock, TX8_DEVICE_PEER, s->dev_efd[v]))
            return -1;
    for (int32_t last = 0;;) {
        struct peer *next = NULL;

        for (int i = 0; i < TX8_MAX_QUEUES; i++) {
            struct peer *o = &s->peers[i];

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

static void accept_peer(struct server *s)
{
    struct timeval tv = {2, 0};
    struct epoll_event ev;
    struct peer *p = NULL;
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
        struct peer *o = &s->peers[i];

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

static void peer_event(struct server *s, uint32_t idx, uint32_t events)
{
    struct peer *p = peer_by_sock_index(s, idx);
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

static int make_shm(struct server *s, int numa_node)
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

static int make_socket(struct server *s)
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

static void remove_socket(struct server *s)
{
    struct stat st;

    /* Only if it is still ours (a new server may have replaced it). */
    if (s->listen_fd >= 0 && stat(s->path, &st) == 0 && st.st_ino == s->sock_ino)
        unlink(s->path);
}

static void ep_add(struct server *s, int fd, uint64_t tag)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"memory", required_argument, NULL, 'm'},
        {"cores", required_argument, NULL, 'c'},
        {"numa-node", required_argument, NULL, 'n'},
        {"inject", required_argument, NULL, 'i'},
        {"expert-cache", required_argument, NULL, 'e'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct emu_dev_config cfg;
    struct server s;
    const char *mem_arg = NULL;
    sigset_t sigs;
    int sfd = -1, tfd = -1, opt, status = 1;
    unsigned long ul;
    bool running = true;

    memset(&cfg, 0, sizeof(cfg));
    memset(&s, 0, sizeof(s));
    cfg.numa_node = -1;
    cfg.faults.crash_after = -1;
    s.listen_fd = s.shm_fd = s.epfd = -1;
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        s.dev_efd[v] = -1;
    s.next_id = 1;

    while ((opt = getopt_long(argc, argv, "s:m:c:n:i:e:vh", opts, NULL)) != -1) {
        switch (opt) {
        case 's':
            s.path = optarg;
            break;
        case 'm':
            mem_arg = optarg;
            break;
        case 'c':
            if (parse_uint(optarg, TX8_MAX_CORES, &ul) || ul == 0) {
                fprintf(stderr, "tx8-emu: --cores must be 1..%d, not '%s'\n", TX8_MAX_CORES,
                        optarg);
                return 2;
            }
            cfg.cores = (unsigned)ul;
            break;
        case 'n':
            if (parse_uint(optarg, INT_MAX, &ul)) {
                fprintf(stderr, "tx8-emu: bad --numa-node '%s'\n", optarg);
                return 2;
            }
            cfg.numa_node = (int)ul;
            break;
        case 'i':
            if (parse_inject(optarg, &cfg.faults)) {
                fprintf(stderr,
                        "tx8-emu: bad --inject '%s' (hang, error, slow:MS with MS 1..600000, "
                        "crash-after:N)\n",
                        optarg);
                return 2;
            }
            break;
        case 'e':
            if (parse_size(optarg, &cfg.expert_cache_bytes)) {
                fprintf(stderr, "tx8-emu: bad --expert-cache size '%s'\n", optarg);
                return 2;
            }
            break;
        case 'v':
            emu_verbose = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tx8-emu: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (!s.path || !*s.path || !mem_arg) {
        fprintf(stderr, "tx8-emu: --socket and --memory are required\n");
        usage(stderr);
        return 2;
    }
    if (parse_size(mem_arg, &s.mem_size) || s.mem_size < TX8_MIN_MEMORY ||
        s.mem_size > TX8_MAX_MEMORY || (s.mem_size & (s.mem_size - 1))) {
        fprintf(stderr,
                "tx8-emu: bad --memory '%s': must be a power of two from 16M to 64G "
                "(e.g. 256M, 4G)\n",
                mem_arg);
        return 2;
    }
    if (cfg.numa_node >= 0 &&
        (numa_available() < 0 || cfg.numa_node > numa_max_node() ||
         !numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)cfg.numa_node))) {
        fprintf(stderr, "tx8-emu: NUMA node %d does not exist on this machine\n", cfg.numa_node);
        return 2;
    }

    /* Signals are read from a signalfd; block them before any thread. */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    if (make_shm(&s, cfg.numa_node) < 0)
        goto out;
    cfg.mem = s.mem;
    cfg.mem_fd = s.shm_fd;
    cfg.mem_size = s.mem_size;
    cfg.verbose = emu_verbose;
    {
        int rc = dev_create(&s.dev, &cfg);

        if (rc < 0) {
            const char *isa = getenv("TX8_ENGINE_ISA");
            unsigned v;

            if (isa && *isa && tx8_engine_isa_parse(isa, &v))
                emu_log("cannot start the device: TX8_ENGINE_ISA=%s is not one of auto, "
                        "portable, avx2, avx512, amx",
                        isa);
            else if (isa && *isa && rc == -ENOTSUP && tx8_engine_isa_why(v))
                emu_log("cannot start the device: TX8_ENGINE_ISA=%s: %s", isa,
                        tx8_engine_isa_why(v));
            else
                emu_log("cannot start the device: %s", strerror(-rc));
            goto out;
        }
    }
    for (int v = 0; v < TX8_NUM_VECTORS; v++) {
        s.dev_efd[v] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (s.dev_efd[v] < 0) {
            emu_log("eventfd: %s", strerror(errno));
            goto out;
        }
    }
    if (make_socket(&s) < 0)
        goto out;

    s.epfd = epoll_create1(EPOLL_CLOEXEC);
    sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (s.epfd < 0 || sfd < 0 || tfd < 0) {
        emu_log("epoll/signalfd/timerfd: %s", strerror(errno));
        goto out;
    }
    {
        struct itimerspec its = {{0, 10000000}, {0, 10000000}};

        timerfd_settime(tfd, 0, &its, NULL);
    }
    ep_add(&s, s.listen_fd, EP_TAG(EP_LISTEN, 0));
    ep_add(&s, sfd, EP_TAG(EP_SIGNAL, 0));
    ep_add(&s, tfd, EP_TAG(EP_TIMER, 0));
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        ep_add(&s, s.dev_efd[v], EP_TAG(EP_DOORBELL, v));

    emu_log("listening on %s: %llu MiB device memory, %u cores, numa node %d, %d vectors", s.path,
            (unsigned long long)(s.mem_size >> 20), dev_cores(s.dev), cfg.numa_node,
            TX8_NUM_VECTORS);

    while (running) {
        struct epoll_event evs[16];
        int n = epoll_wait(s.epfd, evs, 16, -1);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            emu_log("epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            uint32_t kind = (uint32_t)(evs[i].data.u64 >> 32);
            uint32_t idx = (uint32_t)evs[i].data.u64;
            uint64_t val;

            switch (kind) {
            case EP_LISTEN:
                accept_peer(&s);
                break;
            case EP_SIGNAL: {
                struct signalfd_siginfo si;

                if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                    emu_log("signal %u: shutting down", si.ssi_signo);
                    running = false;
                }
                break;
            }
            case EP_TIMER:
                if (read(tfd, &val, sizeof(val)) == (ssize_t)sizeof(val))
                    dev_tick(s.dev);
                break;
            case EP_DOORBELL:
                if (read(s.dev_efd[idx], &val, sizeof(val)) == (ssize_t)sizeof(val))
                    dev_doorbell(s.dev, idx);
                break;
            case EP_PEER:
                peer_event(&s, idx, evs[i].events);
                break;
            }
        }
    }
    status = 0;

out:
    /* Peers see their socket close; the device stops. */
    for (int i = 0; i < TX8_MAX_QUEUES; i++) {
        struct peer *p = &s.peers[i];

        if (!p->id)
            continue;
        dev_detach_peer(s.dev, p->queue);
        close(p->sock);
        close_fds(p->efd, TX8_NUM_VECTORS);
    }
    remove_socket(&s);
    if (s.listen_fd >= 0)
        close(s.listen_fd);
    dev_destroy(s.dev);
    close_fds(s.dev_efd, TX8_NUM_VECTORS);
    if (sfd >= 0)
        close(sfd);
    if (tfd >= 0)
        close(tfd);
    if (s.epfd >= 0)
        close(s.epfd);
    if (s.mem)
        munmap(s.mem, s.mem_size);
    if (s.shm_fd >= 0)
        close(s.shm_fd);
    if (status == 0)
        emu_log("stopped");
    return status;
}
