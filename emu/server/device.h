/* SPDX-License-Identifier: MIT */
/*
 * tx8-emu: the device front end (command processor).
 *
 * Owns the control block in device memory, the queues, the mailbox, the
 * lease allocator and the executor thread that runs jobs on the compute
 * engine. The ivshmem transport (server.c) calls in when peers come and go
 * and when the device's doorbell vectors are rung.
 *
 * Everything hosts write into device memory is treated as hostile: fields
 * are read once, copied and validated; the device's own state is private and
 * only mirrored into the control block.
 */
#ifndef TX8_EMU_DEVICE_H
#define TX8_EMU_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include <tx8/tx8_hw.h>

#include "engine/power.h"

struct emu_dev;

/* Faults requested on the command line (apply to jobs of any queue). */
struct emu_faults {
    unsigned hang;       /* the next `hang` jobs hang until a reset */
    unsigned error;      /* the next `error` jobs fail with DEVICE_ERROR */
    unsigned slow_ms;    /* every job takes this much longer */
    int64_t crash_after; /* exit when taking job crash_after + 1; -1 = never */
};

struct emu_dev_config {
    void *mem;  /* device memory (BAR2), mapped */
    int mem_fd; /* its memfd (released leases are punched out) */
    uint64_t mem_size;
    unsigned cores; /* 0 = one per online CPU */
    int numa_node;  /* -1 = any */
    uint64_t expert_cache_bytes;
    struct emu_faults faults;
    struct tx8_power_model power; /* docs/hardware.md section 7 */
    int verbose;
};

/* Create the device: engine, control block (state READY), executor thread.
 * Returns 0 or a negative errno value. */
int dev_create(struct emu_dev **out, const struct emu_dev_config *cfg);

/* Stop the executor (aborting a running job), mark the device OFF, free. */
void dev_destroy(struct emu_dev *d);

/* A peer connected: give it a free queue. pid is the connecting process
 * (SO_PEERCRED; 0 unknown), published as tx8_queue.owner_pid. efd are its
 * interrupt eventfds (TX8_NUM_VECTORS, owned by the caller, which must call
 * dev_detach_peer before closing them). Returns the queue index or -EBUSY if
 * none is free. */
int dev_attach_peer(struct emu_dev *d, int32_t peer, int32_t pid, const int efd[TX8_NUM_VECTORS]);

/* The peer of queue q left: abort its jobs, then free its leases and queue
 * (at once, or when its running job has stopped). After return the device
 * never touches the peer's eventfds again. */
void dev_detach_peer(struct emu_dev *d, int q);

/* One of the device's vectors was rung. */
void dev_doorbell(struct emu_dev *d, unsigned vector);

/* 10 ms tick: clock and heartbeat. */
void dev_tick(struct emu_dev *d);

/* Compute cores of the engine. */
unsigned dev_cores(const struct emu_dev *d);

#endif /* TX8_EMU_DEVICE_H */
