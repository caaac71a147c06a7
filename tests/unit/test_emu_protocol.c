/* SPDX-License-Identifier: MIT */
/*
 * tx8-emu as an ivshmem server: this program plays QEMU's side of the
 * protocol (what hw/misc/ivshmem.c of QEMU 7.2 does with the socket), byte
 * for byte, plus the TX8 ring and mailbox protocol of include/tx8/tx8_hw.h
 * on top of the shared memory, and hostile peers.
 *
 * Every test gets an emulator of its own (one TCase per test, started by an
 * unchecked fixture in the runner, so a failing test never leaves one
 * running).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tx/tx.h>

#include "tx_test_emu.h"

#define MEM_SIZE (64ull << 20)
#define MAXP 12

static struct tx_test_emu g_emu;

/* ------------------------------------------------------------------------ */
/* QEMU's side of the ivshmem protocol                                       */
/* ------------------------------------------------------------------------ */

struct msg {
    int64_t v;
    int fd;
    unsigned char raw[8];
};

/* One message: 1, 0 at EOF, -1 on timeout or error. */
static int raw_recv(int sock, struct msg *m, int timeout_ms)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } ctl;
    struct pollfd p = {sock, POLLIN, 0};
    struct msghdr mh;
    struct iovec iov;
    struct cmsghdr *c;
    ssize_t r;

    m->fd = -1;
    if (poll(&p, 1, timeout_ms) <= 0)
        return -1;
    memset(&mh, 0, sizeof(mh));
    iov.iov_base = m->raw;
    iov.iov_len = sizeof(m->raw);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof(ctl.buf);
    r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    if (r == 0)
        return 0;
    ck_assert_msg(r == 8, "a message of %zd bytes (expected 8)", r);
    for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        ck_assert_int_eq(c->cmsg_type, SCM_RIGHTS);
        ck_assert_msg(c->cmsg_len == CMSG_LEN(sizeof(int)), "more than one fd in a message");
        memcpy(&m->fd, CMSG_DATA(c), sizeof(int));
    }
    /* little-endian int64, decoded by hand */
    m->v = 0;
    for (int i = 7; i >= 0; i--)
        m->v = (int64_t)(((uint64_t)m->v << 8) | m->raw[i]);
    return 1;
}

static bool is_eventfd(int fd)
{
    char link[64], target[128];
    ssize_t n;

    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, target, sizeof(target) - 1);
    if (n < 0)
        return false;
    target[n] = 0;
    return strstr(target, "eventfd") != NULL;
}

struct peer {
    int sock;
    int32_t id;
    int dev_efd[TX8_NUM_VECTORS];
    int own_efd[TX8_NUM_VECTORS];
    uint8_t *mem;
    uint64_t size;
    int qi;
    struct tx8_queue *q;
    uint32_t mbox_seq;
    uint32_t sq_tail, cq_head;
    int32_t others[MAXP]; /* other peers announced in the handshake (with 4 fds each) */
    int nothers;
};

static int connect_sock(const char *path)
{
    struct sockaddr_un a;
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(s, 0);
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    ck_assert(strlen(path) < sizeof(a.sun_path));
    memcpy(a.sun_path, path, strlen(path) + 1);
    ck_assert_msg(connect(s, (struct sockaddr *)&a, sizeof(a)) == 0, "connect %s: %s", path,
                  strerror(errno));
    return s;
}

static struct tx8_queue *queue_at(uint8_t *mem, int i)
{
    return (struct tx8_queue *)(mem + TX8_QUEUE_OFFSET(i));
}

/*
 * The whole handshake as QEMU reads it, checked message by message:
 * version 0; own id; -1 + shm fd; for every other peer (device first) its
 * id 4 times with an eventfd; own id 4 times with an eventfd.
 */
static void peer_open(struct peer *p, const char *path)
{
    struct msg m;
    struct stat st;
    int shm = -1, nown = 0, cnt[MAXP] = {0};

    memset(p, 0, sizeof(*p));
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        p->dev_efd[v] = p->own_efd[v] = -1;
    p->sock = connect_sock(path);

    ck_assert_int_eq(raw_recv(p->sock, &m, 5000), 1);
    ck_assert_msg(m.v == 0 && m.fd == -1, "version message %" PRId64 " fd %d", m.v, m.fd);
    for (int i = 0; i < 8; i++)
        ck_assert_uint_eq(m.raw[i], 0);
    ck_assert_int_eq(raw_recv(p->sock, &m, 5000), 1);
    ck_assert_msg(m.v >= 1 && m.v <= 65535 && m.fd == -1, "id message %" PRId64, m.v);
    p->id = (int32_t)m.v;
    ck_assert_int_eq(raw_recv(p->sock, &m, 5000), 1);
    ck_assert_msg(m.v == -1 && m.fd >= 0, "shm message %" PRId64 " fd %d", m.v, m.fd);
    for (int i = 0; i < 8; i++)
        ck_assert_uint_eq(m.raw[i], 0xff);
    shm = m.fd;

    /* Peers: the device (0) first with 4 eventfds, then others, then us. */
    for (int first = 1; nown < TX8_NUM_VECTORS; first = 0) {
        ck_assert_int_eq(raw_recv(p->sock, &m, 5000), 1);
        ck_assert_msg(m.fd >= 0, "peer message %" PRId64 " without fd in the handshake", m.v);
        ck_assert(is_eventfd(m.fd));
        if (first)
            ck_assert_msg(m.v == 0, "the device (peer 0) must come first, got %" PRId64, m.v);
        if (m.v == 0) {
            ck_assert_int_lt(cnt[0], TX8_NUM_VECTORS);
            p->dev_efd[cnt[0]++] = m.fd;
        } else if (m.v == p->id) {
            ck_assert_int_eq(cnt[0], TX8_NUM_VECTORS);
            p->own_efd[nown++] = m.fd;
        } else {
            int k;

            for (k = 0; k < p->nothers; k++)
                if (p->others[k] == m.v)
                    break;
            if (k == p->nothers) {
                ck_assert_int_lt(p->nothers, MAXP);
                if (p->nothers)
                    ck_assert_msg(cnt[p->nothers] == TX8_NUM_VECTORS,
                                  "peer %d announced with %d fds", p->others[p->nothers - 1],
                                  cnt[p->nothers]);
                p->others[p->nothers++] = (int32_t)m.v;
                ck_assert_msg(p->nothers < 2 || m.v > p->others[p->nothers - 2],
                              "peers not in id order");
            }
            cnt[k + 1]++;
            close(m.fd);
        }
    }
    for (int k = 0; k < p->nothers; k++)
        ck_assert_int_eq(cnt[k + 1], TX8_NUM_VECTORS);
    /* nothing more */
    ck_assert_int_eq(raw_recv(p->sock, &m, 50), -1);

    ck_assert_int_eq(fstat(shm, &st), 0);
    p->size = (uint64_t)st.st_size;
    ck_assert_uint_ge(p->size, TX8_MIN_MEMORY);
    ck_assert_uint_eq(p->size & (p->size - 1), 0);
    {
        int seals = fcntl(shm, F_GET_SEALS);

        ck_assert_msg(seals >= 0 && (seals & F_SEAL_SHRINK) && (seals & F_SEAL_GROW),
                      "device memory not sealed against resizing (0x%x)", seals);
        ck_assert_int_ne(ftruncate(shm, 4096), 0);
    }
    p->mem = mmap(NULL, p->size, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);
    ck_assert(p->mem != MAP_FAILED);
    close(shm);

    /* The queue was assigned before the handshake. */
    p->qi = -1;
    for (int i = 0; i < TX8_MAX_QUEUES; i++)
        if (queue_at(p->mem, i)->owner_peer == p->id) {
            ck_assert_int_eq(p->qi, -1);
            p->qi = i;
        }
    ck_assert_msg(p->qi >= 0, "no queue for peer %d", p->id);
    p->q = queue_at(p->mem, p->qi);
    ck_assert_uint_eq(p->q->state, TX8_QUEUE_ACTIVE);
    ck_assert_uint_eq(p->q->sq_offset, TX8_SQ_OFFSET(p->qi));
    ck_assert_uint_eq(p->q->cq_offset, TX8_CQ_OFFSET(p->qi));
    ck_assert_uint_eq(p->q->sq_head, 0);
    ck_assert_uint_eq(p->q->cq_tail, 0);
    /* interface 1.1: the device names the connecting process */
    ck_assert_int_eq(p->q->owner_pid, getpid());
    p->mbox_seq = p->q->mbox_ack_seq;
}

static void peer_close(struct peer *p)
{
    if (p->mem)
        munmap(p->mem, p->size);
    for (int v = 0; v < TX8_NUM_VECTORS; v++) {
        if (p->dev_efd[v] >= 0)
            close(p->dev_efd[v]);
        if (p->own_efd[v] >= 0)
            close(p->own_efd[v]);
    }
    if (p->sock >= 0)
        close(p->sock);
    memset(p, 0, sizeof(*p));
    p->sock = -1;
}

/* Ring a vector of the device (what a guest's doorbell write does). */
static void ring(struct peer *p, unsigned v)
{
    uint64_t one = 1;

    ck_assert_int_eq(write(p->dev_efd[v], &one, 8), 8);
}

/* Wait for one of our vectors; true if it fired (and consume it). */
static bool irq(struct peer *p, unsigned v, int timeout_ms)
{
    struct pollfd pf = {p->own_efd[v], POLLIN, 0};
    uint64_t val;

    if (poll(&pf, 1, timeout_ms) <= 0)
        return false;
    ck_assert_int_eq(read(p->own_efd[v], &val, 8), 8);
    return true;
}

/* A mailbox request; returns mbox_status, ret[] the results. */
static int32_t mbox(struct peer *p, uint32_t cmd, uint64_t a0, uint64_t a1, uint64_t a2,
                    const char *label, uint64_t ret[2])
{
    uint32_t seq;

    p->q->mbox_cmd = cmd;
    p->q->mbox_arg[0] = a0;
    p->q->mbox_arg[1] = a1;
    p->q->mbox_arg[2] = a2;
    memset(p->q->mbox_label, 0, TX8_LABEL_LEN);
    if (label)
        memcpy(p->q->mbox_label, label, strnlen(label, TX8_LABEL_LEN));
    seq = ++p->mbox_seq;
    __atomic_store_n(&p->q->mbox_req_seq, seq, __ATOMIC_RELEASE);
    ring(p, TX8_DEV_VEC_MBOX);
    ck_assert_msg(irq(p, TX8_HOST_VEC_MBOX, 5000), "no mailbox interrupt");
    ck_assert_uint_eq(__atomic_load_n(&p->q->mbox_ack_seq, __ATOMIC_ACQUIRE), seq);
    ck_assert(p->q->irq_cause & TX8_IRQ_MBOX);
    __atomic_fetch_and(&p->q->irq_cause, ~(uint32_t)TX8_IRQ_MBOX, __ATOMIC_ACQ_REL);
    if (ret) {
        ret[0] = p->q->mbox_ret[0];
        ret[1] = p->q->mbox_ret[1];
    }
    return p->q->mbox_status;
}

static uint64_t lease(struct peer *p, uint64_t size, const char *label)
{
    uint64_t ret[2];

    ck_assert_int_eq(mbox(p, TX8_MBOX_LEASE, size, 0, 0, label, ret), 0);
    ck_assert_uint_ge(ret[0], TX8_CTRL_SIZE);
    ck_assert_uint_eq(ret[0] % TX8_PAGE_SIZE, 0);
    return ret[0];
}

static const struct tx8_lease *lease_table(struct peer *p)
{
    return (const struct tx8_lease *)(p->mem + TX8_LEASE_TABLE_OFFSET);
}

static int find_lease(struct peer *p, uint64_t base)
{
    const struct tx8_ctrl *c = (const struct tx8_ctrl *)p->mem;

    for (uint32_t i = 0; i < c->num_leases; i++)
        if (lease_table(p)[i].base == base)
            return (int)i;
    return -1;
}

/* Put a FILL job into the ring. Returns the seqno. */
static uint64_t submit_fill(struct peer *p, uint64_t seqno, uint64_t cmd_at, uint64_t cmd_lease,
                            uint64_t cmd_size, uint64_t dst, uint64_t bytes, uint32_t value,
                            uint32_t flags)
{
    struct tx8_cmd_fill f;
    struct tx8_job_desc *d;

    memset(&f, 0, sizeof(f));
    f.hdr.opcode = TX8_OP_FILL;
    f.hdr.size = sizeof(f);
    f.dst = dst;
    f.bytes = bytes;
    f.value = value;
    memcpy(p->mem + cmd_at, &f, sizeof(f));
    d = (struct tx8_job_desc *)(p->mem + TX8_SQ_OFFSET(p->qi) +
                                (p->sq_tail % TX8_SQ_ENTRIES) * TX8_SQ_ENTRY_SIZE);
    memset(d, 0, sizeof(*d));
    d->seqno = seqno;
    d->cmd_addr = cmd_at;
    d->cmd_size = sizeof(f);
    d->num_ranges = 1;
    d->flags = flags;
    d->user_data = seqno * 10;
    d->ranges[0].addr = cmd_lease;
    d->ranges[0].size = cmd_size;
    d->ranges[0].access = TX8_ACCESS_READ | TX8_ACCESS_WRITE;
    p->sq_tail++;
    __atomic_store_n(&p->q->sq_tail, p->sq_tail, __ATOMIC_RELEASE);
    ring(p, TX8_DEV_VEC_SUBMIT);
    return seqno;
}

/* Wait for the next completion record (polling, up to 5 s). */
static struct tx8_completion next_cpl(struct peer *p)
{
    struct tx8_completion c;

    for (int t = 0; t < 5000; t++) {
        if (__atomic_load_n(&p->q->cq_tail, __ATOMIC_ACQUIRE) != p->cq_head)
            break;
        tx_test_emu_sleep_ms(1);
    }
    ck_assert_msg(p->q->cq_tail != p->cq_head, "no completion record");
    memcpy(&c, p->mem + TX8_CQ_OFFSET(p->qi) + (p->cq_head % TX8_CQ_ENTRIES) * sizeof(c),
           sizeof(c));
    p->cq_head++;
    __atomic_store_n(&p->q->cq_head, p->cq_head, __ATOMIC_RELEASE);
    return c;
}

/* Wait until queue qi is free again (the device processes leaves
 * asynchronously). */
static void wait_queue_free(uint8_t *mem, int qi)
{
    for (int t = 0; t < 3000 && queue_at(mem, qi)->state != TX8_QUEUE_FREE; t++)
        tx_test_emu_sleep_ms(1);
    ck_assert_msg(queue_at(mem, qi)->state == TX8_QUEUE_FREE, "queue %d not freed", qi);
    ck_assert_int_eq(queue_at(mem, qi)->owner_peer, -1);
    ck_assert_int_eq(queue_at(mem, qi)->owner_pid, 0);
}

/* ------------------------------------------------------------------------ */
/* Handshake, peers, queues                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_handshake)
{
    struct peer p;
    const struct tx8_ctrl *c;

    peer_open(&p, g_emu.sock);
    ck_assert_int_eq(p.nothers, 0);
    c = (const struct tx8_ctrl *)p.mem;
    ck_assert_uint_eq(p.size, MEM_SIZE);
    ck_assert_uint_eq(c->signature, TX8_SIGNATURE);
    ck_assert_uint_eq(c->if_version, TX8_IF_VERSION);
    ck_assert_uint_eq(c->ctrl_size, TX8_CTRL_SIZE);
    ck_assert_uint_eq(c->state, TX8_STATE_READY);
    ck_assert_uint_ne(c->boot_id, 0);
    ck_assert_uint_eq(c->caps.mem_size, MEM_SIZE);
    ck_assert_uint_eq(c->caps.heap_offset, TX8_CTRL_SIZE);
    ck_assert_uint_eq(c->caps.heap_size, MEM_SIZE - TX8_CTRL_SIZE);
    ck_assert_uint_eq(c->caps.max_queues, TX8_MAX_QUEUES);
    ck_assert_uint_eq(c->caps.sq_entries, TX8_SQ_ENTRIES);
    ck_assert_uint_eq(c->caps.cq_entries, TX8_CQ_ENTRIES);
    ck_assert_uint_eq(c->caps.max_ranges, TX8_JOB_MAX_RANGES);
    ck_assert_uint_eq(c->caps.num_cores, 2);
    ck_assert_str_eq(c->caps.name, "TX8 (tx8-emu)");
    ck_assert(c->caps.flags & TX8_CAP_RESET);
    ck_assert(c->caps.flags & TX8_CAP_FAULT_INJECT);
    {
        uint64_t hb = c->heartbeat, clk = c->clock_ns;

        tx_test_emu_sleep_ms(50);
        ck_assert_uint_ge(c->heartbeat, hb + 2);
        ck_assert_uint_gt(c->clock_ns, clk);
    }
    for (int i = 0; i < TX8_MAX_QUEUES; i++)
        if (i != p.qi) {
            ck_assert_uint_eq(queue_at(p.mem, i)->state, TX8_QUEUE_FREE);
            ck_assert_int_eq(queue_at(p.mem, i)->owner_peer, -1);
            ck_assert_int_eq(queue_at(p.mem, i)->owner_pid, 0);
        }
    peer_close(&p);
}
END_TEST

/* owner_pid (interface 1.1) is the process that connected, not merely the
 * process that looks: a child process connects, the parent sees the child's
 * pid on the child's queue and its own on its own. */
START_TEST(test_owner_pid)
{
    struct peer a;
    int ready[2], hold[2], qi = -1;
    pid_t child;
    char c = 0;

    peer_open(&a, g_emu.sock);
    ck_assert_int_eq(a.q->owner_pid, getpid());
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(hold), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        struct sockaddr_un sa;
        int s = socket(AF_UNIX, SOCK_STREAM, 0);

        close(ready[0]);
        close(hold[1]);
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        if (strlen(g_emu.sock) >= sizeof(sa.sun_path))
            _exit(1);
        memcpy(sa.sun_path, g_emu.sock, strlen(g_emu.sock) + 1);
        if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0)
            _exit(1);
        if (write(ready[1], "c", 1) != 1)
            _exit(1);
        /* hold the connection until the parent closes the pipe */
        while (read(hold[0], &c, 1) > 0)
            ;
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    close(ready[0]);
    /* the emulator accepts asynchronously */
    for (int t = 0; t < 3000 && qi < 0; t++) {
        for (int i = 0; i < TX8_MAX_QUEUES; i++)
            if (i != a.qi && queue_at(a.mem, i)->state == TX8_QUEUE_ACTIVE &&
                queue_at(a.mem, i)->owner_pid == child)
                qi = i;
        if (qi < 0)
            tx_test_emu_sleep_ms(1);
    }
    ck_assert_msg(qi >= 0, "no queue with owner_pid %d (the child)", (int)child);
    ck_assert_int_gt(queue_at(a.mem, qi)->owner_peer, 0);
    ck_assert_int_ne(queue_at(a.mem, qi)->owner_peer, a.id);
    ck_assert_int_eq(a.q->owner_pid, getpid());
    close(hold[1]);
    ck_assert_int_eq(waitpid(child, NULL, 0), child);
    wait_queue_free(a.mem, qi);
    peer_close(&a);
}
END_TEST

START_TEST(test_join_leave)
{
    struct peer a, b, c;
    struct msg m;
    int32_t bid;
    int bq;

    peer_open(&a, g_emu.sock);
    peer_open(&b, g_emu.sock);
    ck_assert_int_ne(a.id, b.id);
    ck_assert_int_ne(a.qi, b.qi);
    /* B was told about A in its handshake */
    ck_assert_int_eq(b.nothers, 1);
    ck_assert_int_eq(b.others[0], a.id);
    /* A is told about B: B's id four times, each with an eventfd */
    for (int v = 0; v < TX8_NUM_VECTORS; v++) {
        ck_assert_int_eq(raw_recv(a.sock, &m, 2000), 1);
        ck_assert_int_eq(m.v, b.id);
        ck_assert_int_ge(m.fd, 0);
        ck_assert(is_eventfd(m.fd));
        close(m.fd);
    }
    ck_assert_int_eq(raw_recv(a.sock, &m, 50), -1);

    /* B leaves: A gets B's id without an fd; B's queue is freed. */
    bq = b.qi;
    bid = b.id;
    peer_close(&b);
    ck_assert_int_eq(raw_recv(a.sock, &m, 2000), 1);
    ck_assert_int_eq(m.v, bid);
    ck_assert_int_eq(m.fd, -1);
    wait_queue_free(a.mem, bq);

    /* C joins: a fresh id, and a queue in a clean state */
    peer_open(&c, g_emu.sock);
    ck_assert_int_ne(c.id, a.id);
    ck_assert_int_eq(c.nothers, 1);
    for (int v = 0; v < TX8_NUM_VECTORS; v++) {
        ck_assert_int_eq(raw_recv(a.sock, &m, 2000), 1);
        ck_assert_int_eq(m.v, c.id);
        close(m.fd);
    }
    peer_close(&c);
    peer_close(&a);
}
END_TEST

START_TEST(test_leave_message)
{
    struct peer a, b;
    struct msg m;
    int32_t bid;

    peer_open(&a, g_emu.sock);
    peer_open(&b, g_emu.sock);
    bid = b.id;
    for (int v = 0; v < TX8_NUM_VECTORS; v++) {
        ck_assert_int_eq(raw_recv(a.sock, &m, 2000), 1);
        close(m.fd);
    }
    peer_close(&b);
    ck_assert_int_eq(raw_recv(a.sock, &m, 2000), 1);
    ck_assert_int_eq(m.v, bid);
    ck_assert_int_eq(m.fd, -1);
    peer_close(&a);
}
END_TEST

START_TEST(test_queues_full)
{
    struct peer p[TX8_MAX_QUEUES], extra;
    struct msg m;
    int s, freed;

    for (int i = 0; i < TX8_MAX_QUEUES; i++) {
        peer_open(&p[i], g_emu.sock);
        ck_assert_int_eq(p[i].nothers, i);
        for (int j = 0; j < i; j++)
            ck_assert_int_ne(p[i].qi, p[j].qi);
    }
    /* A ninth peer is refused: closed before any message. */
    s = connect_sock(g_emu.sock);
    ck_assert_int_eq(raw_recv(s, &m, 5000), 0);
    close(s);
    /* The device still has eight healthy queues. */
    for (int i = 0; i < TX8_MAX_QUEUES; i++)
        ck_assert_int_eq(queue_at(p[0].mem, i)->owner_peer, p[i].id);
    /* One leaves, a new peer gets its queue. */
    freed = p[3].qi;
    peer_close(&p[3]);
    wait_queue_free(p[0].mem, freed);
    peer_open(&extra, g_emu.sock);
    ck_assert_int_eq(extra.qi, freed);
    ck_assert_int_eq(extra.nothers, TX8_MAX_QUEUES - 1);
    peer_close(&extra);
    for (int i = 0; i < TX8_MAX_QUEUES; i++)
        if (i != 3)
            peer_close(&p[i]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Doorbell, jobs, interrupts                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_doorbell_job)
{
    struct peer p;
    struct tx8_completion c;
    const struct tx8_ctrl *ctrl;
    uint64_t base;
    uint32_t *w;

    peer_open(&p, g_emu.sock);
    ctrl = (const struct tx8_ctrl *)p.mem;
    base = lease(&p, 64 << 10, "job");
    w = (uint32_t *)(p.mem + base + 4096);
    /* the device hands out zeroed memory */
    for (int i = 0; i < 1024; i++)
        ck_assert_uint_eq(w[i], 0);

    submit_fill(&p, 1, base, base, 64 << 10, base + 4096, 4096, 0xabcd1234u, 0);
    ck_assert_msg(irq(&p, TX8_HOST_VEC_COMPLETION, 5000), "no completion interrupt");
    ck_assert(p.q->irq_cause & TX8_IRQ_COMPLETION);
    c = next_cpl(&p);
    ck_assert_uint_eq(c.seqno, 1);
    ck_assert_uint_eq(c.status, TX8_STATUS_OK);
    ck_assert_uint_eq(c.user_data, 10);
    ck_assert_uint_le(c.start_ns, c.end_ns);
    ck_assert_uint_eq(p.q->completed_seqno, 1);
    ck_assert_uint_eq(p.q->sq_head, 1);
    ck_assert_uint_eq(w[1023], 0xabcd1234u);
    /* since 1.9 the record's second half (same slot, TX8_CQX_OFFSET) carries
     * the job's energy: the FILL's bytes cost something */
    {
        const struct tx8_completion_ext *x =
            (const void *)(p.mem + TX8_CQX_OFFSET(p.qi));

        ck_assert_uint_gt(x[0].energy_pj, 0);
        ck_assert_uint_eq(x[0].rsvd[0], 0);
    }
    ck_assert_uint_ge(ctrl->counters.jobs_completed, 1);
    ck_assert_uint_ge(p.q->jobs_completed, 1);

    /* NO_IRQ: the record is written, no interrupt */
    submit_fill(&p, 2, base, base, 64 << 10, base + 4096, 4096, 7, TX8_JOB_F_NO_IRQ);
    c = next_cpl(&p);
    ck_assert_uint_eq(c.seqno, 2);
    ck_assert(!irq(&p, TX8_HOST_VEC_COMPLETION, 100));

    /* A job whose range is not the peer's lease is refused. */
    {
        struct peer q;
        uint64_t other;

        peer_open(&q, g_emu.sock);
        other = lease(&q, 4096, "not-yours");
        ((uint32_t *)(p.mem + other))[0] = 0x55;
        submit_fill(&p, 3, base, base, 64 << 10, base + 4096, 16, 1, 0);
        c = next_cpl(&p);
        ck_assert_uint_eq(c.status, TX8_STATUS_OK);
        {
            struct tx8_job_desc *d;
            struct tx8_cmd_fill f;

            memset(&f, 0, sizeof(f));
            f.hdr.opcode = TX8_OP_FILL;
            f.hdr.size = sizeof(f);
            f.dst = other;
            f.bytes = 4;
            memcpy(p.mem + base, &f, sizeof(f));
            d = (struct tx8_job_desc *)(p.mem + TX8_SQ_OFFSET(p.qi) +
                                        (p.sq_tail % TX8_SQ_ENTRIES) * TX8_SQ_ENTRY_SIZE);
            memset(d, 0, sizeof(*d));
            d->seqno = 4;
            d->cmd_addr = base;
            d->cmd_size = sizeof(f);
            d->num_ranges = 2;
            d->ranges[0] = (struct tx8_range){base, 4096, TX8_ACCESS_READ, 0};
            d->ranges[1] = (struct tx8_range){other, 4096, TX8_ACCESS_WRITE, 0};
            p.sq_tail++;
            __atomic_store_n(&p.q->sq_tail, p.sq_tail, __ATOMIC_RELEASE);
            ring(&p, TX8_DEV_VEC_SUBMIT);
        }
        c = next_cpl(&p);
        ck_assert_uint_eq(c.seqno, 4);
        ck_assert_uint_eq(c.status, TX8_STATUS_INVALID_JOB);
        ck_assert_uint_eq(c.fault_addr, other);
        ck_assert_uint_eq(((uint32_t *)(p.mem + other))[0], 0x55);
        peer_close(&q);
    }

    /* Sequence numbers must increase. */
    submit_fill(&p, 4, base, base, 64 << 10, base + 4096, 16, 1, 0);
    c = next_cpl(&p);
    ck_assert_uint_eq(c.status, TX8_STATUS_INVALID_JOB);
    submit_fill(&p, 9, base, base, 64 << 10, base + 4096, 16, 1, 0);
    c = next_cpl(&p);
    ck_assert_uint_eq(c.status, TX8_STATUS_OK);
    peer_close(&p);
}
END_TEST

START_TEST(test_ring_full_and_cq_backpressure)
{
    struct peer p;
    uint64_t base;
    int n = 0;

    peer_open(&p, g_emu.sock);
    base = lease(&p, 64 << 10, "ring");
    /* Fill the SQ completely, twice over, without reading completions:
     * the device waits for room in the CQ, never overwrites records. */
    for (uint64_t s = 1; s <= 3 * TX8_CQ_ENTRIES / 2; s++) {
        while ((uint32_t)(p.sq_tail - __atomic_load_n(&p.q->sq_head, __ATOMIC_ACQUIRE)) >=
               TX8_SQ_ENTRIES) {
            if (p.q->cq_tail - p.cq_head >= TX8_CQ_ENTRIES)
                break;
            tx_test_emu_sleep_ms(1);
        }
        if ((uint32_t)(p.sq_tail - p.q->sq_head) >= TX8_SQ_ENTRIES)
            break;
        submit_fill(&p, s, base, base, 64 << 10, base + 4096 + (s % 8) * 64, 64, (uint32_t)s,
                    TX8_JOB_F_NO_IRQ);
        n++;
    }
    /* the CQ is full and the device stopped taking jobs */
    for (int t = 0; t < 2000 && p.q->cq_tail - p.cq_head < TX8_CQ_ENTRIES; t++)
        tx_test_emu_sleep_ms(1);
    ck_assert_uint_eq(p.q->cq_tail - p.cq_head, TX8_CQ_ENTRIES);
    tx_test_emu_sleep_ms(30);
    ck_assert_uint_eq(p.q->cq_tail - p.cq_head, TX8_CQ_ENTRIES);
    /* reading the records lets the rest finish, in order */
    for (int i = 1; i <= n; i++) {
        struct tx8_completion c = next_cpl(&p);

        ck_assert_uint_eq(c.seqno, (uint64_t)i);
        ck_assert_uint_eq(c.status, TX8_STATUS_OK);
    }
    peer_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Mailbox                                                                   */
/* ------------------------------------------------------------------------ */

START_TEST(test_mailbox_leases)
{
    struct peer a, b, c;
    const struct tx8_ctrl *ctrl;
    uint64_t l1, l2, l3, ret[2];
    int i;

    peer_open(&a, g_emu.sock);
    peer_open(&b, g_emu.sock);
    ctrl = (const struct tx8_ctrl *)a.mem;
    ck_assert_uint_eq(ctrl->heap_used, 0);
    l1 = lease(&a, 10000, "GLM-5.1_Weights");
    ck_assert_int_eq(mbox(&a, TX8_MBOX_LEASE, 1 << 20, 1 << 20, 0, "GLM-5.1_KVCache", ret), 0);
    l2 = ret[0];
    ck_assert_uint_eq(l2 % (1 << 20), 0);
    ck_assert_uint_eq(ret[1], 1 << 20);
    l3 = lease(&b, 4096, "B");
    ck_assert_uint_eq(ctrl->num_leases, 3);
    ck_assert_uint_eq(ctrl->heap_used, 12288 + (1 << 20) + 4096);
    for (uint32_t k = 1; k < ctrl->num_leases; k++)
        ck_assert_uint_gt(lease_table(&a)[k].base, lease_table(&a)[k - 1].base);
    i = find_lease(&a, l1);
    ck_assert_int_ge(i, 0);
    ck_assert_uint_eq(lease_table(&a)[i].size, 12288);
    ck_assert_int_eq(lease_table(&a)[i].owner_peer, a.id);
    ck_assert_str_eq(lease_table(&a)[i].label, "GLM-5.1_Weights");
    ck_assert_uint_eq(a.q->bytes_leased, 12288 + (1 << 20));

    /* labels */
    ck_assert_int_eq(mbox(&a, TX8_MBOX_SET_LABEL, l1, 0, 0, "GLM-5.1_Experts", NULL), 0);
    ck_assert_str_eq(lease_table(&a)[find_lease(&a, l1)].label, "GLM-5.1_Experts");
    /* only the owner may relabel or release */
    ck_assert_int_eq(mbox(&b, TX8_MBOX_SET_LABEL, l1, 0, 0, "stolen", NULL), -EPERM);
    ck_assert_int_eq(mbox(&b, TX8_MBOX_RELEASE, l1, 0, 0, NULL, NULL), -EPERM);
    ck_assert_str_eq(lease_table(&a)[find_lease(&a, l1)].label, "GLM-5.1_Experts");
    ck_assert_int_eq(mbox(&a, TX8_MBOX_RELEASE, l1 + 4096, 0, 0, NULL, NULL), -ENOENT);
    ck_assert_int_eq(mbox(&a, TX8_MBOX_RELEASE, l1, 0, 0, NULL, NULL), 0);
    ck_assert_int_eq(find_lease(&a, l1), -1);
    ck_assert_int_eq(mbox(&a, TX8_MBOX_RELEASE, l1, 0, 0, NULL, NULL), -ENOENT);

    /* A leaves: everything it leased is released; B's lease stays. */
    peer_close(&a);
    for (int t = 0; t < 2000 && find_lease(&b, l2) >= 0; t++)
        tx_test_emu_sleep_ms(1);
    ck_assert_int_eq(find_lease(&b, l2), -1);
    ck_assert_int_ge(find_lease(&b, l3), 0);
    ck_assert_uint_eq(((const struct tx8_ctrl *)b.mem)->heap_used, 4096);

    /* released memory comes back zeroed */
    memset(b.mem + l3, 0x77, 4096);
    ck_assert_int_eq(mbox(&b, TX8_MBOX_RELEASE, l3, 0, 0, NULL, NULL), 0);
    peer_open(&c, g_emu.sock);
    {
        /* everything is free again: this lease covers what A and B had */
        uint64_t l4 = lease(&c, 2 << 20, "C");

        ck_assert_uint_le(l4, l3);
        ck_assert_uint_ge(l4 + (2 << 20), l3 + 4096);
        for (uint64_t k = 0; k < (2 << 20); k++)
            if (c.mem[l4 + k])
                ck_abort_msg("byte 0x%" PRIx64 " of a new lease is not zero", l4 + k);
    }
    peer_close(&c);
    peer_close(&b);
}
END_TEST

START_TEST(test_mailbox_bad_requests)
{
    struct peer p;
    uint64_t ret[2], base;
    char label[TX8_LABEL_LEN + 8];

    peer_open(&p, g_emu.sock);
    ck_assert_int_eq(mbox(&p, 99, 0, 0, 0, NULL, NULL), -EINVAL);
    ck_assert_int_eq(mbox(&p, 0xffffffffu, 1, 2, 3, NULL, NULL), -EINVAL);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_NOP, 0, 0, 0, NULL, NULL), 0);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_LEASE, 0, 0, 0, NULL, ret), -EINVAL);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_LEASE, MEM_SIZE, 0, 0, NULL, ret), -ENOMEM);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_LEASE, UINT64_MAX, 0, 0, NULL, ret), -ENOMEM);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_LEASE, 4096, 3, 0, NULL, ret), -EINVAL);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_LEASE, 4096, 1ull << 63, 0, NULL, ret), -EINVAL);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_RELEASE, 0, 0, 0, NULL, NULL), -ENOENT);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_RELEASE, UINT64_MAX, 0, 0, NULL, NULL), -ENOENT);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_SET_LABEL, 12345, 0, 0, "x", NULL), -ENOENT);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_INJECT_FAULT, 77, 0, 0, NULL, NULL), -EINVAL);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_INJECT_FAULT, TX8_FAULT_SLOW, 0, 0, NULL, NULL), -EINVAL);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_INJECT_FAULT, TX8_FAULT_SLOW, 1ull << 40, 0, NULL, NULL),
                     -EINVAL);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_INJECT_FAULT, TX8_FAULT_HANG, 0, 1ull << 40, NULL, NULL),
                     -EINVAL);
    /* a label without NUL, and with control characters */
    memset(label, 'A', sizeof(label));
    label[3] = '\n';
    memcpy(p.q->mbox_label, label, TX8_LABEL_LEN);
    p.q->mbox_cmd = TX8_MBOX_LEASE;
    p.q->mbox_arg[0] = 4096;
    p.q->mbox_arg[1] = 0;
    __atomic_store_n(&p.q->mbox_req_seq, ++p.mbox_seq, __ATOMIC_RELEASE);
    ring(&p, TX8_DEV_VEC_MBOX);
    ck_assert(irq(&p, TX8_HOST_VEC_MBOX, 5000));
    ck_assert_int_eq(p.q->mbox_status, 0);
    base = p.q->mbox_ret[0];
    {
        const struct tx8_lease *l = &lease_table(&p)[find_lease(&p, base)];

        ck_assert_uint_eq(strnlen(l->label, TX8_LABEL_LEN), TX8_LABEL_LEN - 1);
        ck_assert_int_eq(l->label[3], '?');
    }
    /* a request repeated without a new sequence number is not redone */
    ring(&p, TX8_DEV_VEC_MBOX);
    ck_assert(!irq(&p, TX8_HOST_VEC_MBOX, 100));
    ck_assert_uint_eq(((const struct tx8_ctrl *)p.mem)->num_leases, 1);
    /* fill the lease table: -ENOSPC, not a crash */
    {
        int n = 0;
        int32_t st;

        while ((st = mbox(&p, TX8_MBOX_LEASE, 4096, 0, 0, "many", ret)) == 0)
            n++;
        ck_assert_int_eq(st, -ENOSPC);
        ck_assert_int_eq(n + 1, TX8_MAX_LEASES);
    }
    peer_close(&p);
}
END_TEST

/* Interface 1.8: SET_POWER_CAP sets the device-wide board power limit
 * (the hwmon power1_cap of tx8.ko); out of range is -EINVAL. */
START_TEST(test_mailbox_power_cap)
{
    struct peer p;
    const struct tx8_ctrl *c;

    peer_open(&p, g_emu.sock);
    c = (const struct tx8_ctrl *)p.mem;
    ck_assert_uint_eq(c->counters.power_cap_mw, 0);
    ck_assert_uint_eq(c->counters.clock_permille, 1000);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_SET_POWER_CAP, 25000, 0, 0, NULL, NULL), 0);
    ck_assert_uint_eq(__atomic_load_n(&c->counters.power_cap_mw, __ATOMIC_ACQUIRE), 25000);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_SET_POWER_CAP, 1000000001ull, 0, 0, NULL, NULL), -EINVAL);
    ck_assert_uint_eq(c->counters.power_cap_mw, 25000);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_SET_POWER_CAP, 0, 0, 0, NULL, NULL), 0);
    ck_assert_uint_eq(c->counters.power_cap_mw, 0);
    /* the energy counters never go backwards, also across a device restart
     * (TX8_FAULT_RESTART: a new boot_id) and a queue reset */
    {
        uint64_t e0 = __atomic_load_n(&c->counters.energy_uj, __ATOMIC_ACQUIRE);
        uint64_t a0 = __atomic_load_n(&c->counters.energy_active_uj, __ATOMIC_ACQUIRE);
        uint64_t boot = c->boot_id;

        ck_assert_int_eq(mbox(&p, TX8_MBOX_INJECT_FAULT, TX8_FAULT_RESTART, 0, 0, NULL, NULL), 0);
        ck_assert_uint_ne(c->boot_id, boot);
        ck_assert_int_eq(mbox(&p, TX8_MBOX_RESET_QUEUE, 0, 0, 0, NULL, NULL), 0);
        usleep(50 * 1000);
        /* 50 ms at the default 1.5 W static power: 75 mJ, less a 10 ms tick or two */
        ck_assert_uint_ge(__atomic_load_n(&c->counters.energy_uj, __ATOMIC_ACQUIRE), e0 + 30000);
        ck_assert_uint_ge(__atomic_load_n(&c->counters.energy_active_uj, __ATOMIC_ACQUIRE), a0);
    }
    peer_close(&p);
}
END_TEST

START_TEST(test_reset_queue)
{
    struct peer p;
    const struct tx8_ctrl *ctrl;
    uint64_t base, ret[2], resets;
    struct tx8_completion c;

    peer_open(&p, g_emu.sock);
    ctrl = (const struct tx8_ctrl *)p.mem;
    base = lease(&p, 64 << 10, "reset");
    resets = ctrl->counters.resets;
    ck_assert_int_eq(mbox(&p, TX8_MBOX_INJECT_FAULT, TX8_FAULT_HANG, 0, 1, NULL, NULL), 0);
    submit_fill(&p, 5, base, base, 64 << 10, base + 4096, 64, 1, 0);
    submit_fill(&p, 6, base, base, 64 << 10, base + 4096, 64, 2, 0);
    submit_fill(&p, 7, base, base, 64 << 10, base + 4096, 64, 3, 0);
    tx_test_emu_sleep_ms(50);
    ck_assert_uint_eq(p.q->cq_tail, 0); /* hung */
    ck_assert_int_eq(mbox(&p, TX8_MBOX_RESET_QUEUE, 0, 0, 0, NULL, ret), 0);
    ck_assert_uint_eq(ret[0], 3);
    ck_assert_uint_eq(ret[1], 7);
    ck_assert_uint_eq(p.q->sq_head, 0);
    ck_assert_uint_eq(p.q->sq_tail, 0);
    ck_assert_uint_eq(p.q->cq_head, 0);
    ck_assert_uint_eq(p.q->cq_tail, 0);
    ck_assert_uint_eq(p.q->state, TX8_QUEUE_ACTIVE);
    ck_assert_uint_eq(p.q->completed_seqno, 7);
    ck_assert(p.q->irq_cause & TX8_IRQ_RESET_DONE);
    ck_assert_uint_eq(ctrl->counters.resets, resets + 1);
    ck_assert_uint_ge(p.q->jobs_failed, 3);
    ck_assert_uint_eq(((uint32_t *)(p.mem + base + 4096))[0], 0);
    /* the queue works again, sequence numbers may start over */
    p.sq_tail = 0;
    p.cq_head = 0;
    submit_fill(&p, 1, base, base, 64 << 10, base + 4096, 64, 4, 0);
    c = next_cpl(&p);
    ck_assert_uint_eq(c.seqno, 1);
    ck_assert_uint_eq(c.status, TX8_STATUS_OK);
    ck_assert_uint_eq(((uint32_t *)(p.mem + base + 4096))[0], 4);

    /* reset while a (slow) job runs in the engine: it is aborted */
    ck_assert_int_eq(mbox(&p, TX8_MBOX_INJECT_FAULT, TX8_FAULT_SLOW, 5000, 1, NULL, NULL), 0);
    submit_fill(&p, 2, base, base, 64 << 10, base + 4096, 64, 5, 0);
    tx_test_emu_sleep_ms(30);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_RESET_QUEUE, 0, 0, 0, NULL, ret), 0);
    ck_assert_uint_eq(ret[0], 1);
    ck_assert_uint_eq(((uint32_t *)(p.mem + base + 4096))[0], 4);
    peer_close(&p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Hostile peers                                                             */
/* ------------------------------------------------------------------------ */

START_TEST(test_bad_ring_indices)
{
    struct peer p;
    uint64_t ret[2];

    peer_open(&p, g_emu.sock);
    lease(&p, 4096, "x");
    /* sq_tail far ahead of sq_head: the queue stops, with an error event */
    __atomic_store_n(&p.q->sq_tail, 1000u, __ATOMIC_RELEASE);
    ring(&p, TX8_DEV_VEC_SUBMIT);
    ck_assert_msg(irq(&p, TX8_HOST_VEC_EVENT, 5000), "no error event");
    ck_assert_uint_eq(p.q->state, TX8_QUEUE_STOPPED);
    ck_assert(p.q->irq_cause & TX8_IRQ_ERROR);
    /* the mailbox still works, and a reset recovers the queue */
    ck_assert_int_eq(mbox(&p, TX8_MBOX_RESET_QUEUE, 0, 0, 0, NULL, ret), 0);
    ck_assert_uint_eq(p.q->state, TX8_QUEUE_ACTIVE);
    ck_assert_uint_eq(p.q->sq_tail, 0);
    peer_close(&p);
}
END_TEST

static uint64_t rnd_state;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

START_TEST(test_fuzz_control_block)
{
    struct peer p, q;
    struct tx8_completion c;
    uint64_t base;

    rnd_state = 0x9e3779b97f4a7c15ull;
    peer_open(&p, g_emu.sock);
    base = lease(&p, 1 << 20, "fuzz");
    for (int it = 0; it < 400; it++) {
        uint64_t r = rnd();
        uint64_t off, len = 1 + rnd() % 64;

        switch (r % 6) {
        case 0: /* own queue block */
            off = TX8_QUEUE_OFFSET(p.qi) + rnd() % sizeof(struct tx8_queue);
            break;
        case 1: /* own submission ring: garbage descriptors */
            off = TX8_SQ_OFFSET(p.qi) + rnd() % (TX8_SQ_ENTRIES * TX8_SQ_ENTRY_SIZE);
            len = 1 + rnd() % 512;
            break;
        case 2: /* the lease table and the header */
            off = (r & 8) ? TX8_LEASE_TABLE_OFFSET + rnd() % 0x10000 : rnd() % 0x1000;
            break;
        case 3: /* a plausible descriptor with random fields */
            off = TX8_SQ_OFFSET(p.qi) + (rnd() % TX8_SQ_ENTRIES) * TX8_SQ_ENTRY_SIZE;
            {
                struct tx8_job_desc d;

                memset(&d, 0, sizeof(d));
                d.seqno = rnd() % 100;
                d.cmd_addr = (r & 16) ? base : rnd() % (MEM_SIZE * 2);
                d.cmd_size = (uint32_t)(rnd() % 256) & ~7u;
                d.num_ranges = (uint32_t)(rnd() % 4);
                d.ranges[0] = (struct tx8_range){base, 1 << 20, (uint32_t)(rnd() % 4), 0};
                d.ranges[1] = (struct tx8_range){rnd() % MEM_SIZE, rnd() % MEM_SIZE,
                                                 (uint32_t)(rnd() % 4), 0};
                memcpy(p.mem + off, &d, 512);
                /* random commands in the lease */
                for (int k = 0; k < 32; k++)
                    ((uint64_t *)(p.mem + base))[k] =
                        (k % 4 == 0) ? (rnd() % 17) | (64ull << 32) : rnd() % (MEM_SIZE + 4096);
            }
            len = 0;
            break;
        case 4: /* ring indices */
            off = TX8_QUEUE_OFFSET(p.qi) + 8 + 4 * (rnd() % 4);
            len = 4;
            break;
        default: /* someone else's (free) queue block */
            off = TX8_QUEUE_OFFSET((p.qi + 1) % TX8_MAX_QUEUES) + rnd() % 0x100;
            break;
        }
        for (uint64_t k = 0; k < len && off + k < TX8_CTRL_SIZE; k++)
            p.mem[off + k] = (uint8_t)rnd();
        ring(&p, (unsigned)(rnd() % TX8_NUM_VECTORS));
        if (it % 50 == 0)
            tx_test_emu_sleep_ms(2);
    }
    tx_test_emu_sleep_ms(100);
    ck_assert(tx_test_emu_alive(&g_emu));
    peer_close(&p);

    /* A well-behaved peer is served normally afterwards. */
    peer_open(&q, g_emu.sock);
    base = lease(&q, 64 << 10, "after");
    submit_fill(&q, 1, base, base, 64 << 10, base + 4096, 64, 0x42, 0);
    c = next_cpl(&q);
    ck_assert_uint_eq(c.status, TX8_STATUS_OK);
    ck_assert_uint_eq(((uint32_t *)(q.mem + base + 4096))[0], 0x42);
    peer_close(&q);
    ck_assert(tx_test_emu_alive(&g_emu));
}
END_TEST

START_TEST(test_garbage_on_socket)
{
    struct peer p, q;
    char junk[300];

    peer_open(&p, g_emu.sock);
    memset(junk, 0xa5, sizeof(junk));
    /* peers have nothing to say; the device ignores it */
    ck_assert_int_eq(send(p.sock, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
    tx_test_emu_sleep_ms(20);
    ck_assert_int_eq(mbox(&p, TX8_MBOX_NOP, 0, 0, 0, NULL, NULL), 0);
    /* half-closing and vanishing mid-handshake */
    {
        int s = connect_sock(g_emu.sock);

        shutdown(s, SHUT_WR);
        close(s);
    }
    peer_open(&q, g_emu.sock);
    peer_close(&q);
    peer_close(&p);
    ck_assert(tx_test_emu_alive(&g_emu));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The emulator goes away                                                    */
/* ------------------------------------------------------------------------ */

START_TEST(test_dies_mid_job)
{
    struct peer p;
    struct msg m;
    uint64_t base;
    tx_device_t *dev;
    tx_bo_t *bo;
    tx_cmdbuf_t *cb;
    tx_job_t job;
    struct tx_job_result r;

    /* a raw peer and a libtx client, a job running */
    peer_open(&p, g_emu.sock);
    base = lease(&p, 64 << 10, "mid-job");
    ck_assert_int_eq(mbox(&p, TX8_MBOX_INJECT_FAULT, TX8_FAULT_SLOW, 10000, 1, NULL, NULL), 0);
    submit_fill(&p, 1, base, base, 64 << 10, base + 4096, 64, 1, 0);

    ck_assert_int_eq(tx_device_open(g_emu.spec, &dev), 0);
    for (int v = 0; v < TX8_NUM_VECTORS; v++) { /* the libtx peer joined */
        ck_assert_int_eq(raw_recv(p.sock, &m, 2000), 1);
        close(m.fd);
    }
    ck_assert_int_eq(tx_bo_alloc(dev, 4096, 0, NULL, &bo), 0);
    ck_assert_int_eq(tx_cmdbuf_create(dev, &cb), 0);
    ck_assert_int_eq(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 1), 0);
    ck_assert_int_eq(tx_device_inject_fault(dev, TX_FAULT_SLOW, 10000, 1), 0);
    ck_assert_int_eq(tx_submit(dev, cb, &job), 0);
    tx_test_emu_sleep_ms(50);

    ck_assert_int_eq(tx_test_emu_kill(&g_emu, SIGKILL), 0);
    /* QEMU's side sees the connection end */
    ck_assert_int_eq(raw_recv(p.sock, &m, 3000), 0);
    /* libtx reports a clean error, does not hang */
    ck_assert_int_eq(tx_wait(dev, job, 5000ll * 1000000, &r), TX_EDEVICE_LOST);
    ck_assert_msg(strstr(tx_last_error(), "closed the connection"), "%s", tx_last_error());
    ck_assert_int_eq(tx_device_close(dev), 0);
    /* the memory stays mapped for the peer */
    ((volatile uint8_t *)p.mem)[base] = 1;
    peer_close(&p);
}
END_TEST

START_TEST(test_sigterm)
{
    struct tx_test_emu e;
    struct peer p, q;
    struct msg m;
    struct stat st;
    const struct tx8_ctrl *ctrl;

    /* an emulator of this test process, to see its exit status */
    ck_assert_int_eq(tx_test_emu_start(&e, "16M", "--cores", "1", NULL), 0);
    peer_open(&p, e.sock);
    peer_open(&q, e.sock);
    ctrl = (const struct tx8_ctrl *)p.mem;
    kill(e.pid, SIGTERM);
    ck_assert(tx_test_emu_wait_exit(&e, 3000));
    ck_assert(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0);
    /* peers' connections closed, the socket removed, the device marked off */
    do {
        ck_assert_int_ne(raw_recv(p.sock, &m, 2000), -1);
        if (m.fd >= 0)
            close(m.fd);
    } while (m.fd >= 0);
    ck_assert_int_eq(stat(e.sock, &st), -1);
    ck_assert_uint_eq(ctrl->state, TX8_STATE_OFF);
    peer_close(&q);
    peer_close(&p);
    ck_assert_int_eq(tx_test_emu_stop(&e), 0);
}
END_TEST

START_TEST(test_crash_after)
{
    struct tx_test_emu e;
    tx_device_t *dev;
    tx_bo_t *bo;
    tx_cmdbuf_t *cb;
    tx_job_t job;
    struct tx_job_result r;

    ck_assert_int_eq(
        tx_test_emu_start(&e, "16M", "--cores", "1", "--inject", "crash-after:2", NULL), 0);
    ck_assert_int_eq(tx_device_open(e.spec, &dev), 0);
    ck_assert_int_eq(tx_bo_alloc(dev, 4096, 0, NULL, &bo), 0);
    ck_assert_int_eq(tx_cmdbuf_create(dev, &cb), 0);
    ck_assert_int_eq(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 1), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(tx_submit(dev, cb, &job), 0);
        ck_assert_int_eq(tx_wait(dev, job, -1, &r), 0);
    }
    ck_assert_int_eq(tx_submit(dev, cb, &job), 0);
    ck_assert_int_eq(tx_wait(dev, job, -1, &r), TX_EDEVICE_LOST);
    ck_assert_int_eq(tx_device_close(dev), 0);
    ck_assert(tx_test_emu_wait_exit(&e, 3000));
    ck_assert(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 3);
    ck_assert_int_eq(tx_test_emu_stop(&e), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

/* Run tx8-emu with args to completion (at most 5 s); returns the exit status
 * and its stderr in out. */
static int run_emu(char *out, size_t outsz, const char *const *args)
{
    const char *argv[16];
    char bin[256], logpath[] = "/tmp/tx8-test-cli-XXXXXX";
    int argc = 0, fd, st = -1;
    pid_t pid;
    ssize_t n;

    argv[argc++] = tx_test_bin("tx8-emu", bin, sizeof(bin));
    while (*args && argc < 15)
        argv[argc++] = *args++;
    argv[argc] = NULL;
    fd = mkstemp(logpath);
    ck_assert_int_ge(fd, 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fd, 2);
        dup2(fd, 1);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    for (int t = 0; t < 5000; t++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            break;
        tx_test_emu_sleep_ms(1);
        if (t == 4999) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            ck_abort_msg("tx8-emu did not exit");
        }
    }
    n = pread(fd, out, outsz - 1, 0);
    out[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(logpath);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

START_TEST(test_cli_errors)
{
    char out[4096], sock[160];
    struct tx_test_emu other;
    struct stat st;
    int fd;

    snprintf(sock, sizeof(sock), "%s.cli", g_emu.sock);
    {
        const char *a[] = {"--socket", sock, "--memory", "100M", NULL};
        ck_assert_int_ne(run_emu(out, sizeof(out), a), 0);
        ck_assert_msg(strstr(out, "power of two"), "%s", out);
    }
    {
        const char *a[] = {"--socket", sock, "--memory", "8M", NULL};
        ck_assert_int_ne(run_emu(out, sizeof(out), a), 0);
        ck_assert_msg(strstr(out, "8M"), "%s", out);
    }
    {
        const char *a[] = {"--socket", sock, "--memory", "lots", NULL};
        ck_assert_int_ne(run_emu(out, sizeof(out), a), 0);
    }
    {
        const char *a[] = {"--socket", sock, "--memory", "128G", NULL};
        ck_assert_int_ne(run_emu(out, sizeof(out), a), 0);
    }
    {
        const char *a[] = {"--memory", "64M", NULL};
        ck_assert_int_ne(run_emu(out, sizeof(out), a), 0);
        ck_assert_msg(strstr(out, "--socket"), "%s", out);
    }
    {
        const char *a[] = {"--socket", sock, "--memory", "64M", "--inject", "explode", NULL};
        ck_assert_int_ne(run_emu(out, sizeof(out), a), 0);
        ck_assert_msg(strstr(out, "explode"), "%s", out);
    }
    {
        const char *a[] = {"--socket", sock, "--memory", "64M", "--cores", "0", NULL};
        ck_assert_int_ne(run_emu(out, sizeof(out), a), 0);
    }
    {
        const char *a[] = {"--socket", sock, "--memory", "64M", "--numa-node", "999", NULL};
        ck_assert_int_ne(run_emu(out, sizeof(out), a), 0);
        ck_assert_msg(strstr(out, "NUMA"), "%s", out);
    }
    /* the socket of a running server */
    {
        const char *a[] = {"--socket", g_emu.sock, "--memory", "16M", NULL};
        ck_assert_int_ne(run_emu(out, sizeof(out), a), 0);
        ck_assert_msg(strstr(out, "in use"), "%s", out);
        ck_assert(tx_test_emu_alive(&g_emu));
        ck_assert_int_eq(stat(g_emu.sock, &st), 0);
    }
    /* a path that is not a socket is left alone */
    fd = open(sock, O_CREAT | O_WRONLY, 0644);
    ck_assert_int_ge(fd, 0);
    close(fd);
    {
        const char *a[] = {"--socket", sock, "--memory", "16M", NULL};
        ck_assert_int_ne(run_emu(out, sizeof(out), a), 0);
        ck_assert_msg(strstr(out, "not a socket"), "%s", out);
        ck_assert_int_eq(stat(sock, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
    }
    unlink(sock);
    /* a stale socket (its server was killed) is replaced */
    ck_assert_int_eq(tx_test_emu_start(&other, "16M", "--cores", "1", NULL), 0);
    tx_test_emu_kill(&other, SIGKILL); /* leaves its socket behind */
    ck_assert_int_eq(stat(other.sock, &st), 0);
    {
        struct tx_test_emu again = other; /* same directory and socket */
        tx_device_t *dev = NULL;
        char bin[256];
        pid_t pid;

        tx_test_bin("tx8-emu", bin, sizeof(bin));
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            int lf = open(other.log, O_WRONLY | O_APPEND);

            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (lf >= 0)
                dup2(lf, 2);
            execl(bin, bin, "--socket", other.sock, "--memory", "16M", "--cores", "1",
                  (char *)NULL);
            _exit(127);
        }
        again.pid = pid;
        again.reaped = false;
        again.owner = getpid();
        /* the stale socket refuses connections until the new server has
         * replaced it */
        for (int t = 0; t < 3000 && tx_device_open(again.spec, &dev) != TX_OK; t++)
            tx_test_emu_sleep_ms(1);
        ck_assert_msg(dev != NULL, "the new server did not take over the stale socket: %s",
                      tx_last_error());
        ck_assert_int_eq(tx_device_close(dev), 0);
        ck_assert_int_eq(tx_test_emu_stop(&again), 0);
        other.dir[0] = 0; /* removed with `again` */
        ck_assert_int_eq(tx_test_emu_stop(&other), 0);
    }
    {
        const char *a[] = {"--help", NULL};
        ck_assert_int_eq(run_emu(out, sizeof(out), a), 0);
        ck_assert_msg(strstr(out, "--socket"), "%s", out);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */

static void fixture_start(void)
{
    if (tx_test_emu_start(&g_emu, "64M", "--cores", "2", NULL) != 0)
        ck_abort_msg("cannot start tx8-emu");
}

static void fixture_stop(void)
{
    tx_test_emu_stop(&g_emu);
}

static void add(Suite *s, const char *name, const TTest *t)
{
    TCase *tc = tcase_create(name);

    tcase_add_unchecked_fixture(tc, fixture_start, fixture_stop);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t);
    suite_add_tcase(s, tc);
}

int main(void)
{
    Suite *s = suite_create("emu_protocol");
    SRunner *sr;
    int failed;

    add(s, "handshake", test_handshake);
    add(s, "owner_pid", test_owner_pid);
    add(s, "join_leave", test_join_leave);
    add(s, "leave_message", test_leave_message);
    add(s, "queues_full", test_queues_full);
    add(s, "doorbell_job", test_doorbell_job);
    add(s, "ring_full", test_ring_full_and_cq_backpressure);
    add(s, "mailbox_leases", test_mailbox_leases);
    add(s, "mailbox_bad", test_mailbox_bad_requests);
    add(s, "mailbox_power_cap", test_mailbox_power_cap);
    add(s, "reset_queue", test_reset_queue);
    add(s, "bad_ring_indices", test_bad_ring_indices);
    add(s, "fuzz", test_fuzz_control_block);
    add(s, "garbage_socket", test_garbage_on_socket);
    add(s, "dies_mid_job", test_dies_mid_job);
    add(s, "sigterm", test_sigterm);
    add(s, "crash_after", test_crash_after);
    add(s, "cli", test_cli_errors);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (tx_test_emu_problems)
        fprintf(stderr, "test_emu_protocol: %d emulator problem(s), see above\n",
                tx_test_emu_problems);
    return failed || tx_test_emu_problems ? EXIT_FAILURE : EXIT_SUCCESS;
}
