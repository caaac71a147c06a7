/* SPDX-License-Identifier: MIT */
/*
 * libtx backend "emu": a tx8-emu device reached over its UNIX socket.
 *
 * The backend is an ivshmem peer exactly like QEMU's ivshmem-doorbell
 * device: it receives the protocol version, its peer id, the device memory
 * (memfd) and the eventfds; it maps the whole device memory (BAR2) and plays
 * the driver's part of the TX8 ring protocol (include/tx8/tx8_hw.h) on the
 * queue the device assigned to it: buffer objects are device leases made
 * through the mailbox, jobs are descriptors in its submission ring, their
 * BO lists become the descriptor's ranges, and completions are read from its
 * completion ring when its interrupt eventfd fires.
 *
 * The device is lost when its socket closes (tx8-emu exited or crashed):
 * from then on calls fail with TX_EDEVICE_LOST; the mapping stays valid.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <tx-internal/tx_errors.h>
#include "device/backend.h"

#define RESULTS 4096u                  /* kept job results (power of two) */
#define MBOX_TIMEOUT_NS 10000000000ull /* a mailbox answer takes longer: lost */
#define HANDSHAKE_TIMEOUT_MS 5000
#define POLL_CAP_MS 10
/* How long tx_wait watches the completion ring before it sleeps on the
 * interrupt: a short job completes within this, and sleeping (then being
 * woken through the eventfd) would add a thread wake-up to its round trip. */
#define WAIT_SPIN_NS 20000ull

struct tx_backend {
    char path[TX_SPEC_MAX];
    int sock;
    int32_t id;
    int dev_efd[TX8_NUM_VECTORS]; /* the device's vectors (peer 0) */
    int own_efd[TX8_NUM_VECTORS]; /* our interrupts */
    uint8_t *mem;
    uint64_t mem_size;
    struct tx8_ctrl *ctrl;
    int qi;
    struct tx8_queue *q;

    pthread_mutex_t lock;      /* rings, results, lost */
    pthread_mutex_t mbox_lock; /* one mailbox request at a time */
    bool lost;
    char lost_why[160];

    uint32_t sq_tail;  /* next SQ slot we fill */
    uint32_t cq_head;  /* next CQ record we read */
    uint64_t last_job; /* newest seqno submitted */
    uint64_t done_job; /* every job <= this has finished */
    uint32_t mbox_seq;
    struct tx_job_result *res; /* [RESULTS], by seqno % RESULTS */
    uint64_t *res_energy_pj;   /* [RESULTS]: the records' second halves (1.9) */
};

/* ------------------------------------------------------------------------ */
/* Socket and eventfds                                                       */
/* ------------------------------------------------------------------------ */

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/*
 * Receive one ivshmem message: value and optional fd (-1). Returns 1, 0 at
 * EOF, -1 on error (errno; EAGAIN when nothing is there).
 */
static int recv_msg(int sock, int64_t *value, int *fd, int flags)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } ctl;
    struct msghdr msg;
    struct iovec iov;
    struct cmsghdr *c;
    int64_t le = 0;
    ssize_t r;

    *fd = -1;
    memset(&msg, 0, sizeof(msg));
    iov.iov_base = &le;
    iov.iov_len = sizeof(le);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    do {
        r = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
    } while (r < 0 && errno == EINTR);
    if (r <= 0)
        return (int)r;
    for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int fds[4];

            memcpy(fds, CMSG_DATA(c), (size_t)n * sizeof(int));
            for (int i = 0; i < n; i++) {
                if (*fd < 0)
                    *fd = fds[i];
                else
                    close(fds[i]); /* one fd per message; ignore extras */
            }
        }
    }
    if (r != (ssize_t)sizeof(le)) {
        /* A partial message: read the rest (the server sends 8 bytes at once). */
        size_t got = (size_t)r;

        while (got < sizeof(le)) {
            r = recv(sock, (char *)&le + got, sizeof(le) - got, 0);
            if (r <= 0) {
                close_fd(fd);
                return r == 0 ? 0 : -1;
            }
            got += (size_t)r;
        }
    }
    *value = (int64_t)le64toh((uint64_t)le);
    return 1;
}

static void mark_lost(struct tx_backend *be, const char *why)
{
    if (!be->lost) {
        be->lost = true;
        snprintf(be->lost_why, sizeof(be->lost_why), "%s", why);
        tx_debug("emu %s: device lost: %s", be->path, why);
    }
}

/* Read what the server sent since (peers joining and leaving); notice when
 * it goes away. be->lock held. */
static void check_socket(struct tx_backend *be)
{
    for (;;) {
        int64_t v;
        int fd, r;

        if (be->lost)
            return;
        r = recv_msg(be->sock, &v, &fd, MSG_DONTWAIT);
        if (r == 1) {
            if (fd >= 0)
                close(fd); /* another peer's vectors: not used */
            else if (v == TX8_DEVICE_PEER)
                mark_lost(be, "the device (peer 0) left");
            continue;
        }
        if (r == 0) {
            mark_lost(be, "tx8-emu closed the connection (it exited or crashed)");
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            char why[128];

            snprintf(why, sizeof(why), "connection to tx8-emu failed: %s", strerror(errno));
            mark_lost(be, why);
        }
        return;
    }
}

static void ring_device(struct tx_backend *be, unsigned vector)
{
    uint64_t one = 1;
    ssize_t r = write(be->dev_efd[vector], &one, sizeof(one));

    (void)r;
}

static void drain_efd(int fd)
{
    uint64_t v;

    while (read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
        ;
}

/* Sleep until an interrupt of `vector`, a server message, or timeout.
 * be->lock NOT held. */
static void wait_irq(struct tx_backend *be, unsigned vector, uint64_t deadline)
{
    struct pollfd p[2];
    uint64_t now = tx_now_ns();
    int ms = POLL_CAP_MS;

    if (deadline <= now)
        return;
    if (deadline - now < (uint64_t)POLL_CAP_MS * 1000000ull)
        ms = (int)((deadline - now + 999999ull) / 1000000ull);
    p[0].fd = be->own_efd[vector];
    p[0].events = POLLIN;
    p[1].fd = be->sock;
    p[1].events = POLLIN;
    if (poll(p, 2, ms) > 0 && (p[0].revents & POLLIN))
        drain_efd(be->own_efd[vector]);
}

static int lost_error(struct tx_backend *be, const char *what)
{
    /* one final line naming the device (the spec a user gives --device) */
    tx_debug("emu %s: %s: device lost", be->path, what);
    return tx_error_final(TX_EDEVICE_LOST, "device emu:%s: %s: device lost", be->path,
                          be->lost_why);
}

/* ------------------------------------------------------------------------ */
/* Completions                                                               */
/* ------------------------------------------------------------------------ */

static struct tx8_completion *cq_entry(struct tx_backend *be, uint32_t i)
{
    return (struct tx8_completion *)(be->mem + TX8_CQ_OFFSET(be->qi)) + (i % TX8_CQ_ENTRIES);
}

/* The second half of record i (interface >= 1.9). */
static const struct tx8_completion_ext *cqx_entry(struct tx_backend *be, uint32_t i)
{
    return (const struct tx8_completion_ext *)(be->mem + TX8_CQX_OFFSET(be->qi)) +
           (i % TX8_CQ_ENTRIES);
}

static bool has_cqx(const struct tx_backend *be)
{
    return TX8_IF_MINOR(__atomic_load_n(&be->ctrl->if_version, __ATOMIC_RELAXED)) >= 9;
}

/* Job s ended without a completion record of its own. be->lock held. */
static void set_unrecorded(struct tx_backend *be, uint64_t s, uint32_t status)
{
    struct tx_job_result *r = &be->res[s % RESULTS];

    memset(r, 0, sizeof(*r));
    r->job = s;
    r->status = status;
    r->fault_cmd = UINT32_MAX;
    be->res_energy_pj[s % RESULTS] = 0;
}

/* Read new completion records. be->lock held. */
static void drain_cq(struct tx_backend *be)
{
    uint32_t tail;

    if (be->lost)
        return;
    tail = __atomic_load_n(&be->q->cq_tail, __ATOMIC_ACQUIRE);
    if ((uint32_t)(tail - be->cq_head) > TX8_CQ_ENTRIES) {
        /* a tx8-emu that died mid-write leaves such a ring: when its
         * connection closes (within a moment), that is the reason to give */
        struct pollfd p = {.fd = be->sock, .events = POLLIN | POLLRDHUP};

        if (poll(&p, 1, 200) > 0)
            check_socket(be);
        mark_lost(be, "the device's completion ring is inconsistent");
        return;
    }
    while (be->cq_head != tail) {
        struct tx8_completion c;
        uint64_t energy_pj = has_cqx(be) ? cqx_entry(be, be->cq_head)->energy_pj : 0;

        memcpy(&c, cq_entry(be, be->cq_head), sizeof(c));
        be->cq_head++;
        /* Jobs finish in order: anything else is not ours or stale. */
        if (c.seqno > be->done_job && c.seqno <= be->last_job) {
            struct tx_job_result *r = &be->res[c.seqno % RESULTS];

            /* Jobs skipped (cannot happen with an in-order device) stay
             * unknown: mark them as device errors rather than pending. */
            for (uint64_t s = be->done_job + 1; s < c.seqno; s++)
                set_unrecorded(be, s, TX_JOB_DEVICE_ERROR);
            memset(r, 0, sizeof(*r));
            r->job = c.seqno;
            r->status = c.status;
            r->fault_cmd = c.fault_cmd;
            r->fault_addr = c.fault_addr;
            r->user_data = c.user_data;
            r->start_ns = c.start_ns;
            r->end_ns = c.end_ns;
            r->busy_ns = c.busy_ns;
            r->macs = c.macs;
            be->res_energy_pj[c.seqno % RESULTS] = energy_pj;
            be->done_job = c.seqno;
        }
    }
    __atomic_store_n(&be->q->cq_head, be->cq_head, __ATOMIC_RELEASE);
    __atomic_fetch_and(&be->q->irq_cause, ~(uint32_t)TX8_IRQ_COMPLETION, __ATOMIC_ACQ_REL);
}

/* Every unfinished job ends with `status`. be->lock held. */
static void fail_pending(struct tx_backend *be, uint32_t status)
{
    for (uint64_t s = be->done_job + 1; s <= be->last_job; s++)
        set_unrecorded(be, s, status);
    be->done_job = be->last_job;
}

/* ------------------------------------------------------------------------ */
/* Mailbox                                                                   */
/* ------------------------------------------------------------------------ */

static int mbox_errno_code(int st)
{
    switch (-st) {
    case ENOMEM:
        return TX_ENOSPC;
    case ENOSPC:
        return TX_ENOSPC;
    default:
        return tx_errno_code(st);
    }
}

/*
 * One mailbox request. Returns the device's status (0 or -errno) in *st and
 * TX_OK, or TX_EDEVICE_LOST / TX_ETIMEDOUT. hold_lock: be->lock is held by
 * the caller (reset) and stays held while waiting.
 */
static int mbox_call(struct tx_backend *be, const char *what, uint32_t cmd, uint64_t a0,
                     uint64_t a1, uint64_t a2, const char *label, int32_t *st, uint64_t ret[2],
                     bool hold_lock)
{
    uint64_t deadline = tx_now_ns() + MBOX_TIMEOUT_NS;
    uint32_t seq;
    int rc = TX_OK;

    pthread_mutex_lock(&be->mbox_lock);
    if (!hold_lock)
        pthread_mutex_lock(&be->lock);
    check_socket(be);
    if (be->lost) {
        rc = lost_error(be, what);
        if (!hold_lock)
            pthread_mutex_unlock(&be->lock);
        pthread_mutex_unlock(&be->mbox_lock);
        return rc;
    }
    __atomic_store_n(&be->q->mbox_cmd, cmd, __ATOMIC_RELAXED);
    __atomic_store_n(&be->q->mbox_arg[0], a0, __ATOMIC_RELAXED);
    __atomic_store_n(&be->q->mbox_arg[1], a1, __ATOMIC_RELAXED);
    __atomic_store_n(&be->q->mbox_arg[2], a2, __ATOMIC_RELAXED);
    __atomic_store_n(&be->q->mbox_arg[3], (uint64_t)0, __ATOMIC_RELAXED);
    memset((void *)be->q->mbox_label, 0, TX8_LABEL_LEN);
    if (label)
        strncpy((char *)be->q->mbox_label, label, TX8_LABEL_LEN - 1);
    seq = ++be->mbox_seq;
    __atomic_store_n(&be->q->mbox_req_seq, seq, __ATOMIC_RELEASE);
    ring_device(be, TX8_DEV_VEC_MBOX);
    if (!hold_lock)
        pthread_mutex_unlock(&be->lock);

    for (;;) {
        if (__atomic_load_n(&be->q->mbox_ack_seq, __ATOMIC_ACQUIRE) == seq)
            break;
        if (!hold_lock)
            pthread_mutex_lock(&be->lock);
        check_socket(be);
        if (be->lost)
            rc = lost_error(be, what);
        if (!hold_lock)
            pthread_mutex_unlock(&be->lock);
        if (rc < 0)
            break;
        if (tx_now_ns() >= deadline) {
            rc = tx_error(TX_ETIMEDOUT, "%s: %s: the device does not answer its mailbox", what,
                          be->path);
            break;
        }
        wait_irq(be, TX8_HOST_VEC_MBOX, deadline);
    }
    if (rc == TX_OK) {
        *st = __atomic_load_n(&be->q->mbox_status, __ATOMIC_RELAXED);
        ret[0] = __atomic_load_n(&be->q->mbox_ret[0], __ATOMIC_RELAXED);
        ret[1] = __atomic_load_n(&be->q->mbox_ret[1], __ATOMIC_RELAXED);
        __atomic_fetch_and(&be->q->irq_cause, ~(uint32_t)TX8_IRQ_MBOX, __ATOMIC_ACQ_REL);
    }
    pthread_mutex_unlock(&be->mbox_lock);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Open and close                                                            */
/* ------------------------------------------------------------------------ */

static void emu_close(struct tx_backend *be)
{
    if (!be)
        return;
    if (be->mem)
        munmap(be->mem, be->mem_size);
    close_fd(&be->sock);
    for (int v = 0; v < TX8_NUM_VECTORS; v++) {
        close_fd(&be->dev_efd[v]);
        close_fd(&be->own_efd[v]);
    }
    pthread_mutex_destroy(&be->lock);
    pthread_mutex_destroy(&be->mbox_lock);
    free(be->res);
    free(be->res_energy_pj);
    free(be);
}

static int handshake(struct tx_backend *be, int *shm_fd)
{
    uint64_t deadline = tx_now_ns() + (uint64_t)HANDSHAKE_TIMEOUT_MS * 1000000ull;
    int step = 0, ndev = 0, nown = 0;

    *shm_fd = -1;
    while (nown < TX8_NUM_VECTORS) {
        struct pollfd p = {be->sock, POLLIN, 0};
        uint64_t now = tx_now_ns();
        int64_t v;
        int fd, r;

        if (now >= deadline)
            return tx_error(TX_EPROTO, "emu %s: no complete ivshmem handshake within %d ms",
                            be->path, HANDSHAKE_TIMEOUT_MS);
        if (poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1) <= 0)
            continue;
        r = recv_msg(be->sock, &v, &fd, 0);
        if (r == 0)
            return tx_error(step == 0 ? TX_EBUSY : TX_EPROTO,
                            "emu %s: tx8-emu closed the connection%s", be->path,
                            step == 0 ? " without a handshake (all its queues are in use?)"
                                      : " during the handshake");
        if (r < 0)
            return tx_error(TX_EIO, "emu %s: reading the handshake: %s", be->path, strerror(errno));
        switch (step) {
        case 0: /* protocol version */
            if (v != 0 || fd >= 0) {
                close_fd(&fd);
                return tx_error(TX_EPROTO,
                                "emu %s: ivshmem protocol version %" PRId64 ", expected 0",
                                be->path, v);
            }
            step++;
            break;
        case 1: /* our id */
            if (v <= 0 || v > 65535 || fd >= 0) {
                close_fd(&fd);
                return tx_error(TX_EPROTO, "emu %s: bad peer id message %" PRId64, be->path, v);
            }
            be->id = (int32_t)v;
            step++;
            break;
        case 2: /* shared memory */
            if (v != -1 || fd < 0) {
                close_fd(&fd);
                return tx_error(TX_EPROTO, "emu %s: expected the shared memory, got %" PRId64,
                                be->path, v);
            }
            *shm_fd = fd;
            step++;
            break;
        default: /* peers' vectors, then ours */
            if (fd < 0)
                break; /* a peer left meanwhile */
            if (v == TX8_DEVICE_PEER && ndev < TX8_NUM_VECTORS)
                be->dev_efd[ndev++] = fd;
            else if (v == be->id)
                be->own_efd[nown++] = fd;
            else
                close(fd);
            break;
        }
    }
    if (ndev < TX8_NUM_VECTORS)
        return tx_error(TX_EPROTO, "emu %s: the server did not send the device's (peer 0) vectors",
                        be->path);
    return TX_OK;
}

static int emu_open(const char *path, struct tx_backend **out)
{
    struct sockaddr_un addr;
    struct tx_backend *be;
    struct stat st;
    int shm_fd = -1, rc;

    if (strlen(path) >= sizeof(addr.sun_path))
        return tx_error(TX_EINVAL, "emu %s: socket path too long", path);
    be = calloc(1, sizeof(*be));
    if (!be)
        return tx_error(TX_ENOMEM, "emu %s: out of memory", path);
    be->sock = -1;
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        be->dev_efd[v] = be->own_efd[v] = -1;
    pthread_mutex_init(&be->lock, NULL);
    pthread_mutex_init(&be->mbox_lock, NULL);
    snprintf(be->path, sizeof(be->path), "%s", path);
    be->res = calloc(RESULTS, sizeof(*be->res));
    be->res_energy_pj = calloc(RESULTS, sizeof(*be->res_energy_pj));
    if (!be->res || !be->res_energy_pj) {
        rc = tx_error(TX_ENOMEM, "emu %s: out of memory", path);
        goto fail;
    }

    be->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (be->sock < 0) {
        rc = tx_error(TX_EIO, "emu %s: socket: %s", path, strerror(errno));
        goto fail;
    }
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, path);
    if (connect(be->sock, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        rc = tx_error(TX_ENODEV, "emu %s: cannot connect to tx8-emu: %s", path, strerror(errno));
        goto fail;
    }
    rc = handshake(be, &shm_fd);
    if (rc < 0)
        goto fail;
    if (fstat(shm_fd, &st) < 0 || st.st_size < (off_t)TX8_MIN_MEMORY ||
        (uint64_t)st.st_size > TX8_MAX_MEMORY) {
        rc = tx_error(TX_EPROTO, "emu %s: the device memory has a bad size", path);
        goto fail;
    }
    be->mem_size = (uint64_t)st.st_size;
    be->mem = mmap(NULL, be->mem_size, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
    close_fd(&shm_fd);
    if (be->mem == MAP_FAILED) {
        be->mem = NULL;
        rc = tx_error(TX_EIO, "emu %s: cannot map the device memory: %s", path, strerror(errno));
        goto fail;
    }
    be->ctrl = (struct tx8_ctrl *)be->mem;
    if (__atomic_load_n(&be->ctrl->signature, __ATOMIC_ACQUIRE) != TX8_SIGNATURE ||
        TX8_IF_MAJOR(be->ctrl->if_version) != TX8_IF_VERSION_MAJOR ||
        be->ctrl->caps.mem_size != be->mem_size || be->ctrl->ctrl_size != TX8_CTRL_SIZE) {
        rc = tx_error(TX_EPROTO,
                      "emu %s: not a TX8 device of interface version %d.x (signature 0x%08x, "
                      "version 0x%x)",
                      path, TX8_IF_VERSION_MAJOR, be->ctrl->signature, be->ctrl->if_version);
        goto fail;
    }
    be->qi = -1;
    for (int i = 0; i < TX8_MAX_QUEUES; i++) {
        struct tx8_queue *q = (struct tx8_queue *)(be->mem + TX8_QUEUE_OFFSET(i));

        if (__atomic_load_n(&q->owner_peer, __ATOMIC_ACQUIRE) == be->id &&
            __atomic_load_n(&q->state, __ATOMIC_ACQUIRE) == TX8_QUEUE_ACTIVE) {
            be->qi = i;
            be->q = q;
            break;
        }
    }
    if (be->qi < 0) {
        rc = tx_error(TX_EPROTO, "emu %s: the device assigned no queue to peer %d", path, be->id);
        goto fail;
    }
    be->sq_tail = __atomic_load_n(&be->q->sq_head, __ATOMIC_ACQUIRE);
    __atomic_store_n(&be->q->sq_tail, be->sq_tail, __ATOMIC_RELEASE);
    be->cq_head = __atomic_load_n(&be->q->cq_tail, __ATOMIC_ACQUIRE);
    __atomic_store_n(&be->q->cq_head, be->cq_head, __ATOMIC_RELEASE);
    be->mbox_seq = __atomic_load_n(&be->q->mbox_ack_seq, __ATOMIC_ACQUIRE);
    fcntl(be->sock, F_SETFL, fcntl(be->sock, F_GETFL) | O_NONBLOCK);
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        fcntl(be->own_efd[v], F_SETFL, fcntl(be->own_efd[v], F_GETFL) | O_NONBLOCK);
    tx_debug("emu %s: peer %d, queue %d, %" PRIu64 " MiB", path, be->id, be->qi,
             be->mem_size >> 20);
    *out = be;
    return TX_OK;

fail:
    close_fd(&shm_fd);
    emu_close(be);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Device information                                                        */
/* ------------------------------------------------------------------------ */

static int emu_info(struct tx_backend *be, struct tx_device_info *info)
{
    struct tx8_caps caps;

    memcpy(&caps, (const void *)&be->ctrl->caps, sizeof(caps));
    memset(info, 0, sizeof(*info));
    memcpy(info->name, caps.name,
           sizeof(caps.name) < sizeof(info->name) ? sizeof(caps.name) : sizeof(info->name));
    info->name[sizeof(caps.name) - 1] = 0;
    snprintf(info->backend, sizeof(info->backend), "emu");
    snprintf(info->path, sizeof(info->path), "%s", be->path);
    info->if_version = be->ctrl->if_version;
    info->num_cores = caps.num_cores;
    info->mem_size = be->mem_size;
    info->mem_used = __atomic_load_n(&be->ctrl->heap_used, __ATOMIC_RELAXED);
    info->heap_offset = caps.heap_offset;
    info->heap_size = caps.heap_size;
    info->dtypes = caps.dtypes;
    info->caps = caps.flags;
    info->max_ranges = caps.max_ranges > TX8_JOB_MAX_RANGES ? TX8_JOB_MAX_RANGES : caps.max_ranges;
    info->max_cmd_size = caps.max_cmd_size;
    info->max_topk = caps.max_topk;
    info->sparse_block = caps.sparse_block;
    info->sq_entries = caps.sq_entries;
    info->numa_node = caps.numa_node;
    info->core_clock_hz = caps.core_clock_hz;
    info->boot_id = be->ctrl->boot_id;
    info->client_id = be->id;
    if (info->heap_offset < TX8_CTRL_SIZE || info->heap_size > be->mem_size - TX8_CTRL_SIZE)
        return tx_error(TX_EPROTO, "emu %s: inconsistent capabilities", be->path);
    return TX_OK;
}

static void queue_stats(const struct tx8_queue *q, uint32_t if_version, struct tx_queue_stats *s)
{
    memset(s, 0, sizeof(*s));
    s->owner = __atomic_load_n(&q->owner_peer, __ATOMIC_RELAXED);
    /* interface 1.1 added owner_pid in what was reserved (zero) before */
    if (TX8_IF_MINOR(if_version) >= 1 && s->owner >= 0) {
        int32_t pid = __atomic_load_n(&q->owner_pid, __ATOMIC_RELAXED);

        s->owner_pid = pid > 0 ? pid : 0;
    }
    s->state = __atomic_load_n(&q->state, __ATOMIC_RELAXED);
    s->jobs_completed = __atomic_load_n(&q->jobs_completed, __ATOMIC_RELAXED);
    s->jobs_failed = __atomic_load_n(&q->jobs_failed, __ATOMIC_RELAXED);
    s->busy_ns = __atomic_load_n(&q->busy_ns, __ATOMIC_RELAXED);
    s->bytes_allocated = __atomic_load_n(&q->bytes_leased, __ATOMIC_RELAXED);
    s->completed_seqno = __atomic_load_n(&q->completed_seqno, __ATOMIC_RELAXED);
}

static int emu_counters(struct tx_backend *be, struct tx_device_counters *c)
{
    const __u64 *src = (const __u64 *)&be->ctrl->counters;
    __u64 *dst = (__u64 *)&c->dev;

    for (size_t i = 0; i < sizeof(c->dev) / sizeof(__u64); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    c->clock_ns = __atomic_load_n(&be->ctrl->clock_ns, __ATOMIC_RELAXED);
    c->heartbeat = __atomic_load_n(&be->ctrl->heartbeat, __ATOMIC_RELAXED);
    c->state = __atomic_load_n(&be->ctrl->state, __ATOMIC_RELAXED);
    c->num_queues = TX8_MAX_QUEUES;
    c->own_queue = be->qi;
    uint32_t ifv = __atomic_load_n(&be->ctrl->if_version, __ATOMIC_RELAXED);
    for (int i = 0; i < TX8_MAX_QUEUES; i++)
        queue_stats((const struct tx8_queue *)(be->mem + TX8_QUEUE_OFFSET(i)), ifv, &c->queues[i]);
    c->client = c->queues[be->qi];
    return TX_OK;
}

static int emu_memory_view(struct tx_backend *be, struct tx_mem_region *r, size_t max,
                           size_t *count)
{
    const struct tx8_lease *t = (const struct tx8_lease *)(be->mem + TX8_LEASE_TABLE_OFFSET);
    uint32_t n = __atomic_load_n(&be->ctrl->num_leases, __ATOMIC_ACQUIRE);
    size_t k = 0;

    if (n > TX8_MAX_LEASES)
        n = TX8_MAX_LEASES;
    for (uint32_t i = 0; i < n; i++) {
        struct tx8_lease l;

        memcpy(&l, &t[i], sizeof(l));
        if (l.base == 0 || l.size == 0)
            continue;
        if (k < max) {
            memset(&r[k], 0, sizeof(r[k]));
            r[k].addr = l.base;
            r[k].size = l.size;
            r[k].owner = l.owner_peer;
            r[k].flags = l.owner_peer == be->id ? TX_MEM_OWN : 0;
            memcpy(r[k].label, l.label, TX8_LABEL_LEN);
            r[k].label[TX8_LABEL_LEN - 1] = 0;
        }
        k++;
    }
    *count = k;
    return TX_OK;
}

/* ------------------------------------------------------------------------ */
/* Buffer objects                                                            */
/* ------------------------------------------------------------------------ */

static int emu_bo_alloc(struct tx_backend *be, struct tx_backend_bo *bo, uint32_t flags,
                        const char *label)
{
    uint64_t ret[2];
    int32_t st;
    int rc;

    (void)flags;
    rc = mbox_call(be, "tx_bo_alloc", TX8_MBOX_LEASE, bo->size, 0, 0, label, &st, ret, false);
    if (rc < 0)
        return rc;
    if (st < 0) {
        if (st == -ENOSPC)
            return tx_error(TX_ENOSPC,
                            "tx_bo_alloc: emu %s: the device's allocation table is full (%d "
                            "allocations)",
                            be->path, TX8_MAX_LEASES);
        return tx_error(mbox_errno_code(st),
                        "tx_bo_alloc: emu %s: the device cannot allocate %" PRIu64
                        " bytes (%s; %" PRIu64 " of %" PRIu64 " bytes in use)",
                        be->path, bo->size, strerror(-st),
                        (uint64_t)__atomic_load_n(&be->ctrl->heap_used, __ATOMIC_RELAXED),
                        (uint64_t)be->ctrl->caps.heap_size);
    }
    if (ret[0] < TX8_CTRL_SIZE || ret[0] > be->mem_size || bo->size > be->mem_size - ret[0])
        return tx_error(TX_EPROTO, "tx_bo_alloc: emu %s: the device leased a bad range", be->path);
    bo->addr = ret[0];
    bo->handle = ret[0];
    return TX_OK;
}

static int emu_bo_free(struct tx_backend *be, struct tx_backend_bo *bo)
{
    uint64_t ret[2];
    int32_t st;
    int rc;

    rc = mbox_call(be, "tx_bo_free", TX8_MBOX_RELEASE, bo->handle, 0, 0, NULL, &st, ret, false);
    if (rc < 0)
        return rc;
    if (st < 0)
        return tx_error(tx_errno_code(st), "tx_bo_free: emu %s: the device refused: %s", be->path,
                        strerror(-st));
    return TX_OK;
}

static int emu_bo_map(struct tx_backend *be, struct tx_backend_bo *bo, void **ptr)
{
    if (bo->addr > be->mem_size || bo->size > be->mem_size - bo->addr)
        return tx_error(TX_EINVAL, "tx_bo_map: emu %s: BO outside device memory", be->path);
    *ptr = be->mem + bo->addr;
    return TX_OK;
}

static int emu_bo_set_label(struct tx_backend *be, struct tx_backend_bo *bo, const char *label)
{
    uint64_t ret[2];
    int32_t st;
    int rc;

    rc = mbox_call(be, "tx_bo_set_label", TX8_MBOX_SET_LABEL, bo->handle, 0, 0, label, &st, ret,
                   false);
    if (rc < 0)
        return rc;
    if (st < 0)
        return tx_error(tx_errno_code(st), "tx_bo_set_label: emu %s: the device refused: %s",
                        be->path, strerror(-st));
    return TX_OK;
}

/* ------------------------------------------------------------------------ */
/* Jobs                                                                      */
/* ------------------------------------------------------------------------ */

static int emu_submit(struct tx_backend *be, const struct tx_backend_job *job, uint64_t deadline,
                      uint64_t *out)
{
    struct tx8_job_desc *d;
    uint64_t seq;

    if (job->num_bos == 0 || job->num_bos > TX8_JOB_MAX_RANGES)
        return tx_error(TX_EINVAL, "tx_submit: emu %s: %u buffer objects (1..%d)", be->path,
                        job->num_bos, TX8_JOB_MAX_RANGES);
    pthread_mutex_lock(&be->lock);
    for (;;) {
        uint32_t head;

        check_socket(be);
        drain_cq(be);
        if (be->lost) {
            int rc = lost_error(be, "tx_submit");

            pthread_mutex_unlock(&be->lock);
            return rc;
        }
        head = __atomic_load_n(&be->q->sq_head, __ATOMIC_ACQUIRE);
        if ((uint32_t)(be->sq_tail - head) < TX8_SQ_ENTRIES)
            break;
        if ((uint32_t)(be->sq_tail - head) > TX8_SQ_ENTRIES) {
            mark_lost(be, "the device's submission ring is inconsistent");
            continue;
        }
        if (tx_now_ns() >= deadline) {
            pthread_mutex_unlock(&be->lock);
            return TX_EBUSY;
        }
        pthread_mutex_unlock(&be->lock);
        wait_irq(be, TX8_HOST_VEC_COMPLETION, deadline);
        pthread_mutex_lock(&be->lock);
    }

    seq = be->last_job + 1;
    d = (struct tx8_job_desc *)(be->mem + TX8_SQ_OFFSET(be->qi) +
                                (uint64_t)(be->sq_tail % TX8_SQ_ENTRIES) * TX8_SQ_ENTRY_SIZE);
    memset(d, 0, offsetof(struct tx8_job_desc, ranges));
    d->seqno = seq;
    d->cmd_addr = job->cmd_bo->addr + job->cmd_offset;
    d->cmd_size = job->cmd_size;
    d->num_ranges = job->num_bos;
    d->flags = (job->flags & TX_SUBMIT_NO_IRQ) ? TX8_JOB_F_NO_IRQ : 0;
    if (job->flags & TX_SUBMIT_BATCH_INVARIANT)
        d->flags |= TX8_JOB_F_BATCH_INVARIANT;
    d->user_data = job->user_data;
    if (job->prof_size) {
        d->flags |= TX8_JOB_F_PROFILE;
        d->prof_addr = job->prof_addr;
        d->prof_size = job->prof_size;
    }
    for (uint32_t i = 0; i < job->num_bos; i++) {
        struct tx8_range r;

        r.addr = job->bos[i].bo->addr;
        r.size = job->bos[i].bo->size;
        r.access = job->bos[i].access;
        r.rsvd = 0;
        memcpy(&d->ranges[i], &r, sizeof(r));
    }
    be->last_job = seq;
    memset(&be->res[seq % RESULTS], 0, sizeof(be->res[0]));
    be->res_energy_pj[seq % RESULTS] = 0;
    be->sq_tail++;
    __atomic_store_n(&be->q->sq_tail, be->sq_tail, __ATOMIC_RELEASE);
    ring_device(be, TX8_DEV_VEC_SUBMIT);
    pthread_mutex_unlock(&be->lock);
    *out = seq;
    return TX_OK;
}

/* Watch the completion ring for up to WAIT_SPIN_NS (or the deadline):
 * whether a completion arrived. be->lock NOT held. */
static bool spin_cq(struct tx_backend *be, uint32_t head, uint64_t deadline)
{
    uint64_t end = tx_now_ns() + WAIT_SPIN_NS;

    if (end > deadline)
        end = deadline;
    for (unsigned i = 0;; i++) {
        if (__atomic_load_n(&be->q->cq_tail, __ATOMIC_ACQUIRE) != head)
            return true;
        if ((i & 15) == 15 && tx_now_ns() >= end)
            return false;
        /* on a busy host, let a runnable thread (the one we wait for) go */
        if (i >= 64)
            sched_yield();
#if defined(__x86_64__) || defined(__i386__)
        else
            __builtin_ia32_pause();
#endif
    }
}

static int emu_wait(struct tx_backend *be, uint64_t job, uint64_t deadline,
                    struct tx_job_result *res)
{
    bool spun = false;
    int rc;

    pthread_mutex_lock(&be->lock);
    for (;;) {
        drain_cq(be);
        if (job == 0 || job > be->last_job) {
            rc = tx_error(TX_ENOENT, "tx_wait: emu %s: job %" PRIu64 " was never submitted",
                          be->path, job);
            break;
        }
        if (job <= be->done_job) {
            if (be->done_job - job >= RESULTS || be->res[job % RESULTS].job != job) {
                rc = tx_error(TX_ENOENT,
                              "tx_wait: emu %s: the result of job %" PRIu64
                              " is no longer kept (only the last %u are)",
                              be->path, job, RESULTS);
            } else {
                *res = be->res[job % RESULTS];
                rc = TX_OK;
            }
            break;
        }
        check_socket(be);
        if (be->lost) {
            rc = lost_error(be, "tx_wait");
            break;
        }
        if (tx_now_ns() >= deadline) {
            rc = TX_ETIMEDOUT;
            break;
        }
        uint32_t head = be->cq_head;

        pthread_mutex_unlock(&be->lock);
        if (spun || !spin_cq(be, head, deadline))
            wait_irq(be, TX8_HOST_VEC_COMPLETION, deadline);
        spun = true;
        pthread_mutex_lock(&be->lock);
    }
    pthread_mutex_unlock(&be->lock);
    return rc;
}

static int emu_reset(struct tx_backend *be)
{
    uint64_t ret[2];
    int32_t st;
    int rc;

    pthread_mutex_lock(&be->lock);
    drain_cq(be);
    rc = mbox_call(be, "tx_device_reset", TX8_MBOX_RESET_QUEUE, 0, 0, 0, NULL, &st, ret, true);
    if (rc == TX_OK && st < 0)
        rc = tx_error(tx_errno_code(st), "tx_device_reset: emu %s: the device refused: %s",
                      be->path, strerror(-st));
    if (rc == TX_OK) {
        /* The device emptied both rings and aborted what was in them. */
        be->sq_tail = 0;
        be->cq_head = 0;
        fail_pending(be, TX_JOB_ABORTED);
        __atomic_fetch_and(&be->q->irq_cause,
                           ~(uint32_t)(TX8_IRQ_RESET_DONE | TX8_IRQ_COMPLETION | TX8_IRQ_ERROR),
                           __ATOMIC_ACQ_REL);
        tx_debug("emu %s: queue reset, %" PRIu64 " job(s) aborted", be->path, ret[0]);
    }
    pthread_mutex_unlock(&be->lock);
    return rc;
}

static int emu_inject_fault(struct tx_backend *be, uint32_t kind, uint32_t param, uint32_t count)
{
    uint64_t ret[2];
    int32_t st;
    int rc;

    rc = mbox_call(be, "tx_device_inject_fault", TX8_MBOX_INJECT_FAULT, kind, param, count, NULL,
                   &st, ret, false);
    if (kind == TX8_FAULT_CRASH && rc == TX_EDEVICE_LOST)
        return TX_OK; /* that was the point */
    if (rc < 0)
        return rc;
    if (st < 0)
        return tx_error(tx_errno_code(st), "tx_device_inject_fault: emu %s: the device refused: %s",
                        be->path, strerror(-st));
    return TX_OK;
}

/* The descriptor's prof_* fields reach the device as they are. */
static int emu_can_profile(struct tx_backend *be)
{
    (void)be;
    return 1;
}

static int emu_job_energy(struct tx_backend *be, uint64_t job, uint64_t *energy_pj)
{
    struct tx_job_result r;
    int rc;

    if (!has_cqx(be))
        return tx_error(TX_ENOTSUP, "tx_job_energy: emu %s: the device's interface is below 1.9",
                        be->path);
    rc = emu_wait(be, job, 0, &r);
    if (rc == TX_OK) {
        pthread_mutex_lock(&be->lock);
        /* a result 4096 jobs newer may have taken the slot meanwhile */
        if (be->res[job % RESULTS].job == job)
            *energy_pj = be->res_energy_pj[job % RESULTS];
        else
            rc = tx_error(TX_ENOENT, "tx_job_energy: emu %s: job %" PRIu64 " is no longer kept",
                          be->path, job);
        pthread_mutex_unlock(&be->lock);
    }
    return rc;
}

const struct tx_backend_ops tx_backend_emu_ops = {
    .name = "emu",
    .open = emu_open,
    .close = emu_close,
    .info = emu_info,
    .bo_alloc = emu_bo_alloc,
    .bo_free = emu_bo_free,
    .bo_map = emu_bo_map,
    .bo_set_label = emu_bo_set_label,
    .submit = emu_submit,
    .wait = emu_wait,
    .job_energy = emu_job_energy,
    .counters = emu_counters,
    .memory_view = emu_memory_view,
    .reset = emu_reset,
    .inject_fault = emu_inject_fault,
    .can_profile = emu_can_profile,
    .can_batch_invariant = emu_can_profile, /* the descriptor's flags reach the device as they are */
};
