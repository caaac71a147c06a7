/* SPDX-License-Identifier: MIT */
/*
 * tx8-emu: the ivshmem transport (transport.c). The server listens on a
 * UNIX socket, hands each connecting peer (a host) the device memory and
 * the doorbell eventfds (the ivshmem handshake), tells the others when
 * peers come and go, and passes doorbells on to the device (device.h).
 * main.c owns the command line, the signals and the 10 ms timer; the fuzz
 * target tests/fuzz/fuzz_socket.c runs the same server in process.
 */
#ifndef TX8_EMU_TRANSPORT_H
#define TX8_EMU_TRANSPORT_H

#include <stdint.h>
#include <sys/epoll.h>
#include <sys/types.h>

#include <tx8/tx8_hw.h>

#define IVSHMEM_PROTOCOL_VERSION 0
#define MAX_PEER_ID 65535

struct emu_peer {
    int32_t id;  /* 0 = slot unused */
    int32_t pid; /* SO_PEERCRED of the connection, 0 unknown */
    int sock;
    int efd[TX8_NUM_VECTORS];
    int queue;
};

struct emu_server {
    const char *path;
    int listen_fd;
    ino_t sock_ino;
    int epfd;
    int shm_fd;
    void *mem;
    uint64_t mem_size;
    int dev_efd[TX8_NUM_VECTORS]; /* peer 0's vectors */
    struct emu_peer peers[TX8_MAX_QUEUES];
    int32_t next_id;
    struct emu_dev *dev;
};

/* epoll tags: kind << 32 | index */
enum { EP_LISTEN = 1, EP_SIGNAL, EP_TIMER, EP_DOORBELL, EP_PEER };
#define EP_TAG(kind, idx) (((uint64_t)(kind) << 32) | (uint32_t)(idx))

/* Empty server (no fds) listening on path, with mem_size bytes of memory. */
void srv_init(struct emu_server *s, const char *path, uint64_t mem_size);

/* The device memory: a sealed memfd of mem_size bytes, mapped (bound to
 * numa_node if >= 0). 0 or -1 (logged). */
int srv_make_shm(struct emu_server *s, int numa_node);

/* After dev_create: the device's vectors, the listening socket (replacing
 * a stale one; never another file), the epoll set with the socket and
 * the vectors. 0 or -1 (logged). */
int srv_listen(struct emu_server *s);

/* Adds fd to the epoll set with tag (main.c: signals, timer). */
void srv_ep_add(struct emu_server *s, int fd, uint64_t tag);

/* Handles one epoll event of kind EP_LISTEN, EP_DOORBELL or EP_PEER and
 * returns 0; other kinds are left to the caller (returns the kind). */
int srv_handle(struct emu_server *s, const struct epoll_event *ev);

/* Peers currently connected. */
int srv_peer_count(const struct emu_server *s);

/* Detaches and closes every peer, removes the socket (if still ours),
 * destroys the device, closes and unmaps everything. */
void srv_close(struct emu_server *s);

#endif /* TX8_EMU_TRANSPORT_H */
