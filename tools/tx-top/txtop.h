/* SPDX-License-Identifier: MIT */
/*
 * tx-top: the TX8 device monitor. Shared state of the collector
 * (collect.c), the JSON writer (json.c) and the screen (screen.c).
 * docs/tx-top.md documents every figure and where it comes from.
 */
#ifndef TXTOP_H
#define TXTOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tx/tx_device.h>
#include <tx/tx_telemetry.h>

#include "telemetry/monitor.h"

#define TT_HIST 1024 /* history points kept per device */
#define TT_MAX_DEVICES 64
#define TT_MAX_SPECS 16

struct tt_label {
    char name[64];
    uint64_t bytes;
};

/* One row of the process table: a process (or an emulator peer whose
 * process is unknown) on one device. */
struct tt_proc {
    int pid;       /* -1: unknown */
    int dev;       /* index into tt_state.devs */
    int peer;      /* emu: ivshmem peer id; accel: -1 */
    char user[32]; /* "" unknown */
    char command[256];
    double util; /* busy percent, NAN unknown */
    bool has_vram;
    uint64_t vram; /* bytes */
    bool has_rss;
    uint64_t rss;    /* bytes */
    int clients;     /* DRM clients (accel) or queues (emu) counted */
    bool unreadable; /* the "processes not readable" row */
    /* the process's device memory by buffer label (emu: its leases; accel:
     * the device's labels when it is the only process holding memory);
     * malloc()ed, in allocation order */
    struct tt_label *labels;
    size_t nlabels;
};

struct tt_dev {
    /* identity (static) */
    char backend[8];  /* "accel" or "emu" */
    char spec[300];   /* what -d accepts */
    char node[32];    /* accel: "accel0" */
    int minor;        /* accel: N of accelN */
    char pci[32];     /* accel: PCI address */
    char socket[256]; /* emu: socket path */
    char name[64];
    bool has_if;
    uint32_t if_version;
    bool has_cores;
    uint32_t cores;

    /* accel: an open file for the QUERY ioctl (-1: none, figures from sysfs) */
    int accel_fd;

    /* emu attachment */
    tx_device_t *emu;
    struct attach_job *attach; /* an attach running in its own thread */
    uint64_t boot_id;
    int32_t own_peer;
    uint64_t retry_ns;  /* next attach attempt */
    uint64_t heartbeat; /* last heartbeat seen, and when it changed */
    uint64_t heartbeat_ns;

    /* latest sample */
    bool ok;
    char error[160];
    char state[16];
    double util;     /* percent, NAN unknown */
    unsigned ncores; /* entries of core_util */
    double core_util[TX8_MAX_CORES];
    bool has_mem;
    uint64_t mem_total, mem_used; /* bytes */
    unsigned has;                 /* TT_HAS_* */
    uint64_t jobs, jobs_failed, resets, timeouts, page_faults, cache_misses, addr_faults;
    double jobs_rate; /* jobs per second, NAN unknown */
    struct tt_label *labels;
    size_t nlabels;
    uint64_t unattributed; /* accel: memory of clients not readable */

    /* board power and energy (interface >= 1.8: the device's power model) */
    bool has_power;
    double power_w, power_avg_w, power_cap_w; /* cap 0: none */
    double energy_j;

    /* history, one point per refresh */
    float hist_util[TT_HIST]; /* percent, <0 unknown */
    float hist_power[TT_HIST]; /* W, <0 unknown */
    double hist_mem[TT_HIST]; /* bytes used, <0 unknown */
    size_t hist_n;            /* points stored (<= TT_HIST) */
    size_t hist_pos;          /* next write position */
    uint64_t prev_jobs;
    uint64_t prev_jobs_ns;
};

#define TT_HAS_JOBS (1u << 0)
#define TT_HAS_FAILED (1u << 1)
#define TT_HAS_RESETS (1u << 2)
#define TT_HAS_TIMEOUTS (1u << 3)
#define TT_HAS_PAGE_FAULTS (1u << 4)
#define TT_HAS_CACHE_MISSES (1u << 5)
#define TT_HAS_ADDR_FAULTS (1u << 6)

struct tt_model {
    int pid;
    char model[TX_TELEMETRY_MODEL_LEN];
    char device[TX_TELEMETRY_DEVICE_LEN];
    int dev; /* matching monitored device, -1 none */
    uint32_t layers, experts;
    uint64_t updated_ns, updates;
    struct tx_telemetry_stats st;
    uint64_t *agg;     /* [experts] selections summed over the layers */
    uint64_t *hot;     /* [experts] the most imbalanced layer's counts */
    double *layer_std; /* [layers] percent, NAN for layers without data */
    char command[256];
    int has_cache; /* expert cache counters (libtx telemetry) */
    struct tx_telemetry_cache cache;
};

struct tt_pcache; /* per-PID facts that do not change (user, command) */

struct tt_state {
    struct tt_dev *devs;
    size_t ndev;
    struct tt_proc *procs;
    size_t nproc;
    unsigned unreadable; /* processes whose fds could not be read */
    struct tt_model *models;
    size_t nmodels;
    unsigned models_skipped;
    struct txm_rates rates;
    struct tt_pcache *pcache;
    uint64_t now_ns;  /* CLOCK_MONOTONIC of the latest sample */
    double wall;      /* CLOCK_REALTIME seconds of the latest sample */
    double interval;  /* seconds between refreshes */
    uint64_t samples; /* samples taken */
    bool root;        /* effective UID 0 */
    const char *proc_root;
    const char *sys_root;
    const char *meminfo_path;
};

/* query.c: --query=FIELDS --format=csv[,noheader][,nounits] */
#define TT_QUERY_MAX 16
struct tt_query {
    int field[TT_QUERY_MAX];
    int n;
    bool header, units;
};
int tt_query_parse(const char *list, const char *format, struct tt_query *q, char *err,
                   size_t errlen);
/* One row per device (after a header when `header` and the format has one);
 * -1 when the output failed (the reader went away). */
int tt_query_print(const struct tt_state *s, const struct tt_query *q, bool header, FILE *f);

/* collect.c */
struct tt_options {
    const char *specs[TT_MAX_SPECS]; /* -d SPEC (explicit devices) */
    int nspecs;
    int select[TT_MAX_DEVICES]; /* -i indices */
    int nselect;
};

/* Find the devices (explicit specs or discovery) and apply -i. Returns 0,
 * or -1 with a message in err. Static facts are read here (once). */
int tt_discover(struct tt_state *s, const struct tt_options *o, char *err, size_t errsize);
/* Attach to the emu devices: the handshakes run in threads; wait at most
 * wait_ms for them (0: return at once, sampling collects them later). */
void tt_attach(struct tt_state *s, unsigned wait_ms);
/* Take one sample of everything (devices, processes, models). */
void tt_sample(struct tt_state *s);
void tt_free(struct tt_state *s);
/* Free a process table (its rows' labels too). */
void tt_procs_free(struct tt_proc *p, size_t n);
/* Add bytes to label `name` of the array *l (*n entries; a new entry at
 * the end if absent; out of memory: left out). */
void tt_labels_add(struct tt_label **l, size_t *n, const char *name, uint64_t bytes);

uint64_t tt_now_ns(void);
double tt_wall(void);

/* Human-readable bytes ("123.4MiB") into buf. */
const char *tt_bytes(uint64_t b, char *buf, size_t size);
/* "1.0" from an interface version word. */
const char *tt_ifver(uint32_t v, char *buf, size_t size);

/* json.c: one snapshot as a JSON object string (malloc()ed), pretty or
 * one line. NULL if out of memory. */
char *tt_json(const struct tt_state *s, bool one_line);
/* -L: one line per device. */
void tt_list(const struct tt_state *s);

/* screen.c: the full-screen view; returns the exit status. max_refreshes
 * 0 = until 'q'. */
int tt_screen(struct tt_state *s, unsigned long max_refreshes);

/* Set by SIGINT/SIGTERM/SIGHUP. */
extern volatile int tt_stop;

#endif
