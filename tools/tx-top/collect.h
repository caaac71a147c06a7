/* SPDX-License-Identifier: MIT */
/*
 * tx-top internal: the parts of the collector (what tools/tx-top/txtop.h
 * declares as tt_discover, tt_attach, tt_sample, tt_free), one job per file:
 *   collect.c           time and unit helpers, small files, tt_free
 *   collect_discover.c  finding devices (accel sysfs, emulator sockets)
 *   collect_attach.c    attaching to emulated devices in the background
 *   collect_sample.c    sampling one device (accel, emu)
 *   collect_proc.c      the process-facts cache, the process table, tt_sample
 *   collect_models.c    models from the telemetry channel
 * Sources of every figure: docs/tx-top.md.
 */
#ifndef TX_TOP_COLLECT_H
#define TX_TOP_COLLECT_H

#include "txtop.h"

struct emu_row {
    int dev;
    int peer;
    int queue;
    double util;
    uint64_t vram;
    int pid;     /* the device's owner_pid (interface 1.1), 0 unknown */
    bool exact;  /* pid verified: the row is that process's */
    bool silent; /* never ran a job, holds no memory (a monitor, or idle) */
    bool skip;
    /* the peer's leases by label (on the first queue of a peer only, so
     * that a peer with several queues is counted once); malloc()ed */
    struct tt_label *labels;
    size_t nlabels;
};

struct emu_rows {
    struct emu_row *r;
    size_t n, cap;
};

struct tt_pcache_entry {
    int pid;
    uint64_t start_time;
    uint64_t gen;
    char user[32];
    char command[256];
};

struct tt_pcache {
    struct tt_pcache_entry *e;
    size_t n, cap;
    uint64_t gen;
};

/* collect.c */
char *tt_read_all(const char *path, size_t *len);
int tt_read_u64(const char *path, uint64_t *v);
void tt_scopy(char *dst, size_t size, const char *src);

/* collect_attach.c */
void tt_emu_attach(struct tt_dev *d, uint64_t now);
void tt_emu_detach(struct tt_dev *d, const char *why, uint64_t now);
void tt_job_release(struct attach_job *j);

/* collect_sample.c */
void tt_jobs_rate(struct tt_dev *d, uint64_t now);
void tt_sample_accel(struct tt_state *s, struct tt_dev *d, const struct txm_meminfo *mi,
                     bool have_mi);
void tt_sample_emu(struct tt_state *s, struct tt_dev *d, int di, struct emu_rows *rows);

/* collect_proc.c */
int tt_proc_facts(struct tt_state *s, int pid, char *user, size_t usize, char *cmd, size_t csize,
                  uint64_t *rss, bool *has_rss);

/* collect_models.c */
int tt_collect_model(const struct tx_telemetry_model *m, void *arg);

#endif
