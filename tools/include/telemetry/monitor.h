/* SPDX-License-Identifier: MIT */
/*
 * The tools' library (libtx-tools.a, tools/lib/monitor_*.c): the read side
 * of device monitoring (used by tx-top and its tests; not part of libtx).
 * Parsers of the kernel driver's text files, the per-client utilisation
 * arithmetic of Documentation/gpu/drm-usage-stats.rst, and the
 * /proc and UNIX-socket scans. Every parser takes text and never trusts it:
 * malformed input is skipped, never fatal. docs/tx-top.md documents where
 * every figure comes from.
 */
#ifndef TX_TELEMETRY_MONITOR_H
#define TX_TELEMETRY_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TXM_ACCEL_MAJOR 261 /* DRM accel char devices (/dev/accel/accelN) */

/* ------------------------------------------------------------------------ */
/* Values with units                                                         */
/* ------------------------------------------------------------------------ */

/* "<uint>" or "<uint> B|KiB|MiB|GiB" (drm-usage-stats memory keys) into
 * bytes. Returns 0, or -1 for anything else (or an overflow). */
int txm_parse_size(const char *s, uint64_t *bytes);

/* "<uint> ns" (or a bare "<uint>") into ns. 0 or -1. */
int txm_parse_ns(const char *s, uint64_t *ns);

/* ------------------------------------------------------------------------ */
/* DRM fdinfo (/proc/PID/fdinfo/FD)                                          */
/* ------------------------------------------------------------------------ */

#define TXM_FD_CLIENT_ID (1u << 0)
#define TXM_FD_PDEV (1u << 1)
#define TXM_FD_ENGINE (1u << 2)
#define TXM_FD_TOTAL (1u << 3)
#define TXM_FD_RESIDENT (1u << 4)
#define TXM_FD_CAPACITY (1u << 5)

struct txm_fdinfo {
    char driver[32];         /* drm-driver */
    char pdev[32];           /* drm-pdev, e.g. "0000:00:04.0" */
    char client_name[64];    /* drm-client-name, "" if absent */
    unsigned has;            /* TXM_FD_* */
    uint64_t client_id;      /* drm-client-id */
    uint64_t engine_ns;      /* drm-engine-<engine> */
    uint64_t capacity;       /* drm-engine-capacity-<engine>, 1 if absent */
    uint64_t total_bytes;    /* drm-total-<region> (or the older drm-memory-<region>) */
    uint64_t resident_bytes; /* drm-resident-<region> */
};

/*
 * Parse the text of one fdinfo file for engine `engine` (tx8: "compute")
 * and memory region `region` (tx8: "vram"). Returns 0 if it is a DRM file
 * (a drm-driver key is present), -1 otherwise. Keys with malformed values
 * are ignored (their TXM_FD_* bit stays clear).
 */
int txm_fdinfo_parse(const char *text, size_t len, const char *engine, const char *region,
                     struct txm_fdinfo *out);

/* ------------------------------------------------------------------------ */
/* /proc/tx_meminfo                                                          */
/* ------------------------------------------------------------------------ */

struct txm_label {
    char name[64];
    uint64_t bytes;
};

#define TXM_MI_TOTAL (1u << 0)
#define TXM_MI_USED (1u << 1)
#define TXM_MI_FREE (1u << 2)
#define TXM_MI_FAULTS (1u << 3)
#define TXM_MI_MISS (1u << 4)
#define TXM_MI_RESETS (1u << 5)
#define TXM_MI_BUFFERS (1u << 6)

struct txm_meminfo_dev {
    int index;                  /* N of the accelN_ prefix */
    unsigned has;               /* TXM_MI_* */
    uint64_t total, used, free; /* bytes */
    uint64_t page_faults, cache_miss, resets, buffers;
    struct txm_label *labels; /* per-label lines of this device, in file order */
    size_t n_labels;
};

struct txm_meminfo {
    unsigned has; /* TXM_MI_* of the totals (DeviceTotal, ...) */
    uint64_t total, used, free, page_faults, cache_miss, resets;
    struct txm_meminfo_dev *devs;
    size_t n_devs;
    struct txm_label *labels; /* per label over all devices */
    size_t n_labels;
    unsigned bad_lines; /* lines that are not `Key: value [kB]` */
};

/* 0, or -1 when out of memory (m is then empty). kB values become bytes. */
int txm_meminfo_parse(const char *text, size_t len, struct txm_meminfo *m);
void txm_meminfo_free(struct txm_meminfo *m);
const struct txm_meminfo_dev *txm_meminfo_find(const struct txm_meminfo *m, int index);

/* ------------------------------------------------------------------------ */
/* Rates: busy-time counters into utilisation                                */
/* ------------------------------------------------------------------------ */

/*
 * A set of monotonic busy-time counters, each named by a key, sampled once
 * per refresh. txm_rate() returns the counter's busy share of the wall time
 * since its previous sample, in percent of `capacity` engines (clamped to
 * 0..100), or NAN at its first sample. A counter that goes backwards gives 0
 * and keeps the larger previous value as the baseline until the counter
 * catches up (drm-usage-stats.rst); if it is still below after
 * TXM_REBASE_SAMPLES samples it was reset, and its current value becomes
 * the baseline.
 */
#define TXM_REBASE_SAMPLES 3

struct txm_rate_entry;
struct txm_rates {
    struct txm_rate_entry *e;
    size_t n, cap;
    uint64_t gen; /* current sampling generation */
};

void txm_rates_init(struct txm_rates *r);
void txm_rates_free(struct txm_rates *r);
/* Start a new sampling round (call once per refresh, before txm_rate). */
void txm_rates_begin(struct txm_rates *r);
/* Forget counters not sampled in this round (call after the round). */
void txm_rates_end(struct txm_rates *r);
double txm_rate(struct txm_rates *r, const char *key, uint64_t value, uint64_t now_ns,
                uint64_t capacity);

/* ------------------------------------------------------------------------ */
/* DRM clients: fds deduplicated                                             */
/* ------------------------------------------------------------------------ */

struct txm_fd_sample {
    int pid;
    int fd;
    int minor; /* accel minor (N of /dev/accel/accelN) */
    struct txm_fdinfo info;
};

struct txm_client {
    char pdev[32];
    int minor;
    uint64_t client_id;
    bool has_client_id;
    int pid;      /* the lowest PID holding it (the client is counted there only) */
    int npids;    /* processes holding it */
    int nfds;     /* file descriptors referring to it */
    unsigned has; /* TXM_FD_* */
    uint64_t engine_ns, capacity, total_bytes, resident_bytes;
    double util; /* percent, NAN when unknown */
};

/*
 * Group fd samples by client: (drm-pdev, drm-client-id), or (minor,
 * drm-client-id) without drm-pdev. An fd without drm-client-id cannot be
 * matched with others and is its own client. *out is malloc()ed (in order
 * of first appearance). Returns 0 or -1 (out of memory).
 */
int txm_clients_build(const struct txm_fd_sample *s, size_t n, struct txm_client **out,
                      size_t *nout);

/* Utilisation of every client from its engine counter (key includes the
 * client's identity). */
void txm_clients_rate(struct txm_rates *r, struct txm_client *c, size_t n, uint64_t now_ns);

/* ------------------------------------------------------------------------ */
/* /proc scans                                                               */
/* ------------------------------------------------------------------------ */

struct txm_scan_opts {
    const char *proc_root;       /* "/proc" */
    unsigned accel_major;        /* TXM_ACCEL_MAJOR; 0 = do not look for accel fds */
    const char *engine, *region; /* fdinfo keys: "compute", "vram" */
    const uint64_t *sock_inodes; /* sorted: socket inodes whose holders are wanted */
    size_t n_sock_inodes;
    int skip_pid; /* a PID to ignore (the monitor itself), 0 = none */
};

struct txm_sock_owner {
    uint64_t ino;
    int pid;
};

struct txm_scan {
    struct txm_fd_sample *fds; /* accel fds with DRM fdinfo */
    size_t nfds;
    struct txm_sock_owner *socks; /* holders of the wanted sockets */
    size_t nsocks;
    unsigned procs;      /* processes looked at */
    unsigned unreadable; /* processes whose fds could not be read (permission) */
};

/* One pass over proc_root/[0-9]*: /fd links, fdinfo of accel fds. 0 or -1
 * (proc_root cannot be read, or out of memory). */
int txm_proc_scan(const struct txm_scan_opts *o, struct txm_scan *out);
void txm_scan_free(struct txm_scan *s);

struct txm_proc_info {
    int pid;
    uid_t uid;
    bool has_uid;
    char comm[64];
    char cmdline[256]; /* arguments joined by spaces; [comm] when empty */
    uint64_t start_time;
    uint64_t rss_bytes; /* VmRSS */
    bool has_rss;
};

/* Up to size - 1 bytes of a small (/proc, sysfs) file into buf, NUL
 * terminated. The byte count, or -1 if it cannot be opened. */
ssize_t txm_read_small(const char *path, char *buf, size_t size);

/* Read /proc/PID/{status,cmdline,stat}. 0, or -1 if the process is gone. */
int txm_proc_info(const char *proc_root, int pid, struct txm_proc_info *pi);
/* Start time (field 22 of /proc/PID/stat, clock ticks after boot), 0 if
 * the process is gone: tells a reused PID apart. */
uint64_t txm_proc_start_time(const char *proc_root, int pid);
/* VmRSS only (cheap refresh). 0 or -1. */
int txm_proc_rss(const char *proc_root, int pid, uint64_t *bytes);

/*
 * The peers of the connections accepted on the listening UNIX socket
 * bound at sock_path: inodes of the client sockets (sock_diag netlink,
 * works without privileges). *peers malloc()ed and sorted. 0 or -1 (with
 * errno).
 */
int txm_unix_peers(const char *sock_path, uint64_t **peers, size_t *n);

#endif
