/* SPDX-License-Identifier: MIT */
/*
 * libtx telemetry: the layout of a /dev/shm/tx8-telemetry-<pid> object
 * (documented in docs/tx-top.md, "Telemetry channel").
 *
 *   offset 0            struct txt_shm_hdr (512 bytes)
 *   hdr.layer_offset    uint64_t layer_updated_ns[layers] (0: never updated)
 *   hdr.counts_offset   uint64_t counts[layers][experts]
 *
 * Host byte order (the object never leaves the machine). The publisher
 * changes the object only between two increments of hdr.seq (odd while it
 * writes); a reader copies it and accepts the copy if seq was even and
 * unchanged.
 */
#ifndef TX_TELEMETRY_SHM_H
#define TX_TELEMETRY_SHM_H

#include <stdint.h>

#include <tx/tx_telemetry.h>

#define TXT_MAGIC 0x4d545854u /* "TXTM" in memory */
#define TXT_HDR_SIZE 512u
#define TXT_PREFIX "tx8-telemetry-"
#define TXT_F_CACHE 1u /* cache holds expert cache counters */

struct txt_shm_hdr {
    uint32_t magic;         /* TXT_MAGIC */
    uint32_t version;       /* TX_TELEMETRY_VERSION */
    uint32_t header_size;   /* TXT_HDR_SIZE */
    uint32_t seq;           /* sequence lock: odd while the publisher writes */
    uint64_t total_size;    /* bytes of the whole object */
    int32_t pid;            /* publisher */
    uint32_t layers;        /* 1..TX_TELEMETRY_MAX_LAYERS */
    uint32_t experts;       /* 1..TX_TELEMETRY_MAX_EXPERTS */
    uint32_t flags;         /* TXT_F_* */
    uint64_t start_time;    /* publisher's start time (/proc/PID/stat field 22), 0 unknown */
    uint64_t created_ns;    /* CLOCK_REALTIME */
    uint64_t updated_ns;    /* CLOCK_REALTIME of the last update, 0 none */
    uint64_t updates;       /* update calls */
    uint64_t layer_offset;  /* = TXT_HDR_SIZE */
    uint64_t counts_offset; /* = TXT_HDR_SIZE + 8 * layers */
    char model[TX_TELEMETRY_MODEL_LEN];   /* NUL terminated */
    char device[TX_TELEMETRY_DEVICE_LEN]; /* NUL terminated */
    struct tx_telemetry_cache cache;      /* with TXT_F_CACHE (formerly rsvd) */
    uint8_t rsvd[TXT_HDR_SIZE - 464];     /* zero */
};

_Static_assert(sizeof(struct txt_shm_hdr) == TXT_HDR_SIZE, "telemetry header size");

/* Start time of a process (field 22 of /proc/PID/stat, clock ticks after
 * boot); 0 if it cannot be read. */
uint64_t txt_proc_start_time(int pid);

#endif
