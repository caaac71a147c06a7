// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the live socket transport of tx8-emu
 * (emu/server/transport.c): the ivshmem server runs in this process on a
 * UNIX socket in a temporary directory, in front of a real device
 * (device.c, 16 MiB, one core), and the input drives up to FS_CLIENTS
 * clients through it. The server's loop is run (srv_handle of every
 * pending epoll event) after every step until nothing is pending.
 *
 * Input: a sequence of steps; byte 0 of a step = kind (byte % 8), byte 1
 * = client (byte % FS_CLIENTS), the rest depends on the kind:
 *   0 CONNECT     a new connection (if the client has none)
 *   1 SEND        1 + n bytes: n (% 64, 0 = one zero byte) bytes of input
 *                 written to the socket
 *   2 SEND_FD     the same with an eventfd passed (SCM_RIGHTS)
 *   3 SHUT_WR     half-close (the server sees EPOLLRDHUP)
 *   4 CLOSE       close the connection
 *   5 DOORBELL    1 + 8 bytes: vector, value written to the device's eventfd
 *   6 MAILBOX     52 bytes: cmd, 4 args, 16 label bytes written into the
 *                 client's queue, req_seq incremented, TX8_DEV_VEC_MBOX rung
 *                 (INJECT_FAULT CRASH and STOP become NOP: they end or
 *                 freeze the device)
 *   7 TICK        dev_tick (heartbeat)
 * At the end every client closes.
 *
 * Properties (a violation calls abort()):
 *  - a connection gets exactly the handshake of docs/tx8-emu.md: version
 *    0, a fresh peer id in [1, 65535], the device memory (a memfd of the
 *    device's size), the device's TX8_NUM_VECTORS vectors (peer 0), those
 *    of every other peer in id order, then its own; the ninth concurrent
 *    connection is closed at once;
 *  - every other peer is told of a join (TX8_NUM_VECTORS messages with an
 *    fd) and of a leave (the id without an fd); nothing else arrives;
 *  - after every step the server's peers are the client model's, each
 *    owning exactly one queue of the control block, the others free;
 *  - bytes, fds or half-closes a peer sends never crash the server; data
 *    keeps the peer connected, a half-close or close removes it;
 *  - a mailbox request is answered at once (ack_seq = req_seq, status 0 or
 *    a negative errno value, the host vector rung);
 *  - after the input, no peer, lease or queue is left and the process has
 *    exactly the sockets, eventfds and memfds it had before (nothing
 *    leaks, passed fds included).
 * FUZZ_SOCKET_VERBOSE=1 prints the server's log.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <tx8/tx8_hw.h>

#include "server/device.h"
#include "server/log.h"
#include "server/transport.h"

#define FS_CLIENTS 10
#define FS_MEM (16ull << 20)

struct fs_client {
    int sock;                     /* -1: none */
    int32_t id;                   /* 0: refused / not a peer */
    int dev_efd[TX8_NUM_VECTORS]; /* the device's vectors */
    int own_efd[TX8_NUM_VECTORS]; /* its own */
    uint32_t mbox_seq;
};

static struct emu_server fs_srv;
static char fs_dir[256], fs_path[300];
static struct fs_client fs_cl[FS_CLIENTS];
static int fs_fd_base = -1;

#define FS_FAIL(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "fuzz_socket: " __VA_ARGS__);                                              \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fs_cleanup(void)
{
    srv_close(&fs_srv); /* removes the socket */
    if (fs_dir[0])
        rmdir(fs_dir);
    fs_dir[0] = 0;
}

/* File descriptors of the kinds the transport and the clients open:
 * sockets, eventfds, memfds (not pipes: libFuzzer's symbolizer opens
 * those when it prints a new function). */
static int fs_count_fds(int print)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    if (!d)
        FS_FAIL("/proc/self/fd: %s", strerror(errno));
    while ((e = readdir(d))) {
        char p[300], t[300];
        snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(p, t, sizeof(t) - 1);
        if (k <= 0)
            continue;
        t[k] = 0;
        if (strncmp(t, "socket:", 7) && strcmp(t, "anon_inode:[eventfd]") && !strstr(t, "memfd:"))
            continue;
        n++;
        if (print)
            fprintf(stderr, "fd %s: %s\n", e->d_name, t);
    }
    closedir(d);
    return n;
}

/* Directories fzsock-PID-* of fuzzer processes that are gone (a crash or a
 * libFuzzer exit skips the atexit handler): their socket and the directory. */
static void fs_remove_stale(const char *tmp)
{
    DIR *d = opendir(tmp);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int pid;
        char rest[64];
        if (sscanf(e->d_name, "fzsock-%d-%63s", &pid, rest) != 2 || pid <= 0)
            continue;
        if (kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        char p[600];
        snprintf(p, sizeof(p), "%s/%s/tx8.sock", tmp, e->d_name);
        unlink(p);
        snprintf(p, sizeof(p), "%s/%s", tmp, e->d_name);
        rmdir(p);
    }
    if (d)
        closedir(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    emu_quiet = !getenv("FUZZ_SOCKET_VERBOSE");
    const char *t = getenv("TMPDIR");
    t = t && *t ? t : "/tmp";
    fs_remove_stale(t);
    snprintf(fs_dir, sizeof(fs_dir), "%s/fzsock-%d-XXXXXX", t, (int)getpid());
    if (!mkdtemp(fs_dir))
        FS_FAIL("mkdtemp %s: %s", fs_dir, strerror(errno));
    snprintf(fs_path, sizeof(fs_path), "%s/tx8.sock", fs_dir);
    srv_init(&fs_srv, fs_path, FS_MEM);
    if (srv_make_shm(&fs_srv, -1) < 0)
        FS_FAIL("device memory");
    struct emu_dev_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.mem = fs_srv.mem;
    cfg.mem_fd = fs_srv.shm_fd;
    cfg.mem_size = fs_srv.mem_size;
    cfg.cores = 1;
    cfg.numa_node = -1;
    cfg.faults.crash_after = -1;
    int rc = dev_create(&fs_srv.dev, &cfg);
    if (rc < 0)
        FS_FAIL("dev_create: %s", strerror(-rc));
    if (srv_listen(&fs_srv) < 0)
        FS_FAIL("srv_listen");
    atexit(fs_cleanup);
    for (int i = 0; i < FS_CLIENTS; i++)
        fs_cl[i].sock = -1;
    return 0;
}

/* The server's loop until nothing is pending. */
static void fs_pump(void)
{
    for (int rounds = 0; rounds < 1000; rounds++) {
        struct epoll_event evs[16];
        int n = epoll_wait(fs_srv.epfd, evs, 16, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            FS_FAIL("epoll_wait: %s", strerror(errno));
        if (n == 0)
            return;
        for (int i = 0; i < n; i++)
            if (srv_handle(&fs_srv, &evs[i]) != 0)
                FS_FAIL("srv_handle left an event of kind %d", (int)(evs[i].data.u64 >> 32));
    }
    FS_FAIL("the server never goes idle");
}

/* One ivshmem message: 1 = got (value, fd or -1), 0 = EOF, -1 = nothing. */
static int fs_recv(int sock, int64_t *val, int *fd)
{
    struct msghdr msg;
    struct iovec iov;
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } ctl;
    int64_t le;
    memset(&msg, 0, sizeof(msg));
    iov.iov_base = &le;
    iov.iov_len = sizeof(le);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    ssize_t r;
    do {
        r = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (r < 0 && errno == EINTR);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return -1;
    if (r < 0 && errno == ECONNRESET)
        return 0;
    if (r < 0)
        FS_FAIL("recvmsg: %s", strerror(errno));
    if (r == 0)
        return 0;
    if (r != (ssize_t)sizeof(le))
        FS_FAIL("a message of %zd bytes", r);
    *val = (int64_t)le64toh((uint64_t)le);
    *fd = -1;
    int nfd = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            FS_FAIL("unexpected control message");
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t j = 0; j < k; j++) {
            int f;
            memcpy(&f, CMSG_DATA(c) + j * sizeof(int), sizeof(int));
            if (nfd++ == 0)
                *fd = f;
            else
                close(f);
        }
    }
    if (nfd > 1 || (msg.msg_flags & MSG_CTRUNC))
        FS_FAIL("a message with %d fds", nfd);
    return 1;
}

static void fs_expect(int sock, int64_t val, int want_fd, int *fd_out, const char *what)
{
    int64_t v;
    int fd;
    int r = fs_recv(sock, &v, &fd);
    if (r != 1)
        FS_FAIL("%s: %s instead of a message", what, r == 0 ? "EOF" : "nothing");
    if (v != val)
        FS_FAIL("%s: value %lld, expected %lld", what, (long long)v, (long long)val);
    if (want_fd != (fd >= 0))
        FS_FAIL("%s: %s fd", what, fd >= 0 ? "an unexpected" : "no");
    if (fd_out)
        *fd_out = fd;
    else if (fd >= 0)
        close(fd);
}

static void fs_expect_none(int sock, const char *what)
{
    int64_t v;
    int fd;
    int r = fs_recv(sock, &v, &fd);
    if (r == 1)
        FS_FAIL("%s: unexpected message %lld", what, (long long)v);
    if (r == 0)
        FS_FAIL("%s: unexpected EOF", what);
}

static void fs_drop(struct fs_client *c)
{
    if (c->sock >= 0)
        close(c->sock);
    for (int v = 0; v < TX8_NUM_VECTORS; v++) {
        if (c->dev_efd[v] >= 0)
            close(c->dev_efd[v]);
        if (c->own_efd[v] >= 0)
            close(c->own_efd[v]);
    }
    memset(c, 0, sizeof(*c));
    c->sock = -1;
}

static int fs_peers(void)
{
    int n = 0;
    for (int i = 0; i < FS_CLIENTS; i++)
        n += fs_cl[i].sock >= 0 && fs_cl[i].id;
    return n;
}

static const struct tx8_queue *fs_queue(int qi)
{
    return (const struct tx8_queue *)((const uint8_t *)fs_srv.mem + TX8_QUEUE_OFFSET(qi));
}

/* The server's peers and the queues agree with the model. */
static void fs_check_state(void)
{
    if (srv_peer_count(&fs_srv) != fs_peers())
        FS_FAIL("the server has %d peers, the clients %d", srv_peer_count(&fs_srv), fs_peers());
    int owned = 0;
    for (int qi = 0; qi < TX8_MAX_QUEUES; qi++) {
        int32_t o = __atomic_load_n(&fs_queue(qi)->owner_peer, __ATOMIC_ACQUIRE);
        if (o < 0)
            continue;
        int found = 0;
        for (int i = 0; i < FS_CLIENTS; i++)
            found += fs_cl[i].sock >= 0 && fs_cl[i].id == o;
        if (found != 1)
            FS_FAIL("queue %d owned by peer %d, which %s", qi, o,
                    found ? "is connected twice" : "is not connected");
        owned++;
    }
    if (owned != fs_peers())
        FS_FAIL("%d queues owned for %d peers", owned, fs_peers());
}

static int fs_queue_of(int32_t id)
{
    for (int qi = 0; qi < TX8_MAX_QUEUES; qi++)
        if (fs_queue(qi)->owner_peer == id)
            return qi;
    return -1;
}

static void fs_connect(struct fs_client *c)
{
    if (c->sock >= 0)
        return;
    int full = fs_peers() == TX8_MAX_QUEUES;
    memset(c, 0, sizeof(*c));
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        c->dev_efd[v] = c->own_efd[v] = -1;
    c->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->sock < 0)
        FS_FAIL("socket: %s", strerror(errno));
    struct sockaddr_un a;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    strcpy(a.sun_path, fs_path);
    if (connect(c->sock, (struct sockaddr *)&a, sizeof(a)) < 0)
        FS_FAIL("connect: %s", strerror(errno));
    fs_pump();
    if (full) {
        int64_t v;
        int fd;
        if (fs_recv(c->sock, &v, &fd) != 0)
            FS_FAIL("a connection beyond %d peers is not closed at once", TX8_MAX_QUEUES);
        fs_drop(c);
        return;
    }
    int shm = -1;
    int64_t id;
    int fd;
    fs_expect(c->sock, IVSHMEM_PROTOCOL_VERSION, 0, NULL, "handshake: version");
    if (fs_recv(c->sock, &id, &fd) != 1 || fd >= 0)
        FS_FAIL("handshake: no peer id");
    if (id < 1 || id > MAX_PEER_ID)
        FS_FAIL("handshake: peer id %lld", (long long)id);
    for (int i = 0; i < FS_CLIENTS; i++)
        if (fs_cl[i].sock >= 0 && &fs_cl[i] != c && fs_cl[i].id == id)
            FS_FAIL("handshake: peer id %lld given twice", (long long)id);
    c->id = (int32_t)id;
    fs_expect(c->sock, -1, 1, &shm, "handshake: memory");
    struct stat st;
    if (fstat(shm, &st) < 0 || (uint64_t)st.st_size != FS_MEM)
        FS_FAIL("handshake: the memory fd is not the device's %llu bytes",
                (unsigned long long)FS_MEM);
    close(shm);
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        fs_expect(c->sock, TX8_DEVICE_PEER, 1, &c->dev_efd[v], "handshake: device vector");
    /* the other peers in id order */
    for (int32_t last = 0;;) {
        struct fs_client *next = NULL;
        for (int i = 0; i < FS_CLIENTS; i++) {
            struct fs_client *o = &fs_cl[i];
            if (o != c && o->sock >= 0 && o->id > last && (!next || o->id < next->id))
                next = o;
        }
        if (!next)
            break;
        for (int v = 0; v < TX8_NUM_VECTORS; v++)
            fs_expect(c->sock, next->id, 1, NULL, "handshake: another peer's vector");
        last = next->id;
    }
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        fs_expect(c->sock, c->id, 1, &c->own_efd[v], "handshake: own vector");
    fs_expect_none(c->sock, "after the handshake");
    /* the others hear of the newcomer */
    for (int i = 0; i < FS_CLIENTS; i++) {
        struct fs_client *o = &fs_cl[i];
        if (o == c || o->sock < 0 || !o->id)
            continue;
        for (int v = 0; v < TX8_NUM_VECTORS; v++)
            fs_expect(o->sock, c->id, 1, NULL, "join notice");
        fs_expect_none(o->sock, "after the join notice");
    }
}

/* c left (closed or half-closed): the server removed it, the others know. */
static void fs_left(struct fs_client *c)
{
    int32_t id = c->id;
    fs_pump();
    if (c->sock >= 0) {
        /* half-closed: the server closes its side */
        int64_t v;
        int fd;
        int r;
        while ((r = fs_recv(c->sock, &v, &fd)) == 1)
            if (fd >= 0)
                close(fd);
        if (r != 0)
            FS_FAIL("peer %d half-closed but the server kept its connection", id);
    }
    fs_drop(c);
    for (int i = 0; i < FS_CLIENTS; i++) {
        struct fs_client *o = &fs_cl[i];
        if (o->sock < 0 || !o->id)
            continue;
        fs_expect(o->sock, id, 0, NULL, "leave notice");
        fs_expect_none(o->sock, "after the leave notice");
    }
}

static void fs_send(struct fs_client *c, const uint8_t *p, size_t n, int with_fd)
{
    if (c->sock < 0 || !n)
        return;
    struct msghdr msg;
    struct iovec iov = {(void *)p, n};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    int efd = -1;
    if (with_fd) {
        efd = eventfd(0, EFD_CLOEXEC);
        if (efd < 0)
            FS_FAIL("eventfd: %s", strerror(errno));
        memset(&ctl, 0, sizeof(ctl));
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof(ctl.buf);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &efd, sizeof(int));
    }
    ssize_t r = sendmsg(c->sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (efd >= 0)
        close(efd);
    if (r < 0)
        FS_FAIL("send: %s", strerror(errno));
    fs_pump();
    fs_check_state();
    fs_expect_none(c->sock, "after sending data");
}

static void fs_mailbox(struct fs_client *c, const uint8_t *p)
{
    if (c->sock < 0)
        return;
    int qi = fs_queue_of(c->id);
    if (qi < 0)
        FS_FAIL("peer %d owns no queue", c->id);
    struct tx8_queue *q = (struct tx8_queue *)((uint8_t *)fs_srv.mem + TX8_QUEUE_OFFSET(qi));
    uint32_t cmd = p[0] % 8; /* the five commands, and unknown ones */
    uint64_t arg[4];
    memcpy(arg, p + 4, sizeof(arg));
    if (cmd == TX8_MBOX_INJECT_FAULT && (arg[0] == TX8_FAULT_CRASH || arg[0] == TX8_FAULT_STOP))
        cmd = TX8_MBOX_NOP;
    if (cmd == TX8_MBOX_INJECT_FAULT && arg[1] > 5)
        arg[1] %= 6; /* SLOW / BAD_CAPS durations: a few ms */
    if (cmd == TX8_MBOX_LEASE && p[1] & 1)
        arg[0] %= FS_MEM; /* often a size that fits */
    if (cmd == TX8_MBOX_RELEASE || cmd == TX8_MBOX_SET_LABEL) {
        /* often an existing lease of any peer */
        const struct tx8_ctrl *ctrl = fs_srv.mem;
        uint32_t nl = ctrl->num_leases;
        if (nl && p[1] & 2) {
            const struct tx8_lease *l =
                (const struct tx8_lease *)((const uint8_t *)fs_srv.mem + TX8_LEASE_TABLE_OFFSET);
            arg[0] = l[p[2] % (nl < TX8_MAX_LEASES ? nl : TX8_MAX_LEASES)].base;
        }
    }
    q->mbox_cmd = cmd;
    memcpy((void *)q->mbox_arg, arg, sizeof(arg));
    memset((void *)q->mbox_label, 0, sizeof(q->mbox_label));
    memcpy((void *)q->mbox_label, p + 36, 16);
    uint32_t seq = __atomic_load_n(&q->mbox_ack_seq, __ATOMIC_ACQUIRE) + 1;
    __atomic_store_n(&q->mbox_req_seq, seq, __ATOMIC_RELEASE);
    uint64_t one = 1;
    if (write(c->dev_efd[TX8_DEV_VEC_MBOX], &one, sizeof(one)) != (ssize_t)sizeof(one))
        FS_FAIL("doorbell: %s", strerror(errno));
    fs_pump();
    if (__atomic_load_n(&q->mbox_ack_seq, __ATOMIC_ACQUIRE) != seq)
        FS_FAIL("mailbox command %u of peer %d not answered", cmd, c->id);
    int32_t st = q->mbox_status;
    if (st > 0 || st < -4095)
        FS_FAIL("mailbox status %d", st);
    uint64_t irq;
    if (read(c->own_efd[TX8_HOST_VEC_MBOX], &irq, sizeof(irq)) != (ssize_t)sizeof(irq))
        FS_FAIL("the mailbox reply did not ring the host vector");
    fs_check_state();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fs_srv.dev)
        LLVMFuzzerInitialize(NULL, NULL);
    if (fs_fd_base < 0)
        fs_fd_base = fs_count_fds(0);
    size_t pos = 0;
    while (pos + 2 <= size) {
        unsigned kind = data[pos] % 8;
        struct fs_client *c = &fs_cl[data[pos + 1] % FS_CLIENTS];
        pos += 2;
        switch (kind) {
        case 0:
            fs_connect(c);
            break;
        case 1:
        case 2: {
            if (pos >= size)
                break;
            size_t n = data[pos++] % 64u;
            if (n > size - pos)
                n = size - pos;
            static const uint8_t one_byte;
            fs_send(c, n ? data + pos : &one_byte, n ? n : 1, kind == 2);
            pos += n;
            break;
        }
        case 3:
            if (c->sock >= 0) {
                shutdown(c->sock, SHUT_WR);
                if (c->id)
                    fs_left(c);
            }
            break;
        case 4:
            if (c->sock >= 0) {
                close(c->sock);
                c->sock = -1;
                fs_left(c);
            }
            break;
        case 5:
            if (pos + 9 > size)
                break;
            if (c->sock >= 0) {
                uint64_t val;
                memcpy(&val, data + pos + 1, 8);
                if (val == 0 || val == UINT64_MAX)
                    val = 1; /* eventfd takes 1 .. 2^64 - 2 */
                if (write(c->dev_efd[data[pos] % TX8_NUM_VECTORS], &val, 8) != 8 && errno != EAGAIN)
                    FS_FAIL("doorbell: %s", strerror(errno));
                fs_pump();
                fs_check_state();
            }
            pos += 9;
            break;
        case 6:
            if (pos + 52 > size) {
                pos = size;
                break;
            }
            fs_mailbox(c, data + pos);
            pos += 52;
            break;
        case 7:
            dev_tick(fs_srv.dev);
            fs_pump();
            break;
        }
        fs_check_state();
    }
    for (int i = 0; i < FS_CLIENTS; i++)
        if (fs_cl[i].sock >= 0) {
            close(fs_cl[i].sock);
            fs_cl[i].sock = -1;
            fs_left(&fs_cl[i]);
        }
    fs_pump();
    fs_check_state();
    const struct tx8_ctrl *ctrl = fs_srv.mem;
    if (srv_peer_count(&fs_srv) || ctrl->num_leases || ctrl->heap_used)
        FS_FAIL("after the input: %d peers, %u leases, %llu bytes leased", srv_peer_count(&fs_srv),
                ctrl->num_leases, (unsigned long long)ctrl->heap_used);
    int nfd = fs_count_fds(0);
    if (nfd != fs_fd_base) {
        fs_count_fds(1);
        FS_FAIL("%d sockets, eventfds and memfds after the input, %d before", nfd, fs_fd_base);
    }
    return 0;
}
