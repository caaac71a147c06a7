/* SPDX-License-Identifier: MIT */
/* tx-top: sampling one device -- accel (sysfs, QUERY, tx_meminfo) and emu (libtx device layer). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uapi/drm/tx8_accel.h>

#include "txtop.h"
#include "collect.h"

/* ------------------------------------------------------------------------ */
/* Sampling                                                                  */
/* ------------------------------------------------------------------------ */

static const char *state_name(uint32_t st)
{
    switch (st) {
    case TX8_STATE_OFF:
        return "off";
    case TX8_STATE_READY:
        return "ready";
    case TX8_STATE_RESETTING:
        return "resetting";
    case TX8_STATE_ERROR:
        return "error";
    default:
        return "unknown";
    }
}

static void set_labels(struct tt_dev *d, const struct txm_label *l, size_t n)
{
    free(d->labels);
    d->labels = NULL;
    d->nlabels = 0;
    if (!n)
        return;
    d->labels = calloc(n, sizeof(*d->labels));
    if (!d->labels)
        return;
    for (size_t i = 0; i < n; i++) {
        snprintf(d->labels[i].name, sizeof(d->labels[i].name), "%s", l[i].name);
        d->labels[i].bytes = l[i].bytes;
    }
    d->nlabels = n;
}

void tt_jobs_rate(struct tt_dev *d, uint64_t now)
{
    if ((d->has & TT_HAS_JOBS) && d->prev_jobs_ns && now > d->prev_jobs_ns &&
        d->jobs >= d->prev_jobs)
        d->jobs_rate = (double)(d->jobs - d->prev_jobs) * 1e9 / (double)(now - d->prev_jobs_ns);
    else
        d->jobs_rate = NAN;
    if (d->has & TT_HAS_JOBS) {
        d->prev_jobs = d->jobs;
        d->prev_jobs_ns = now;
    } else {
        d->prev_jobs_ns = 0;
    }
}

/* Board power and energy of an accel device from tx8.ko's hwmon device
 * (kernel/tx8_hwmon.c: power1_input/average, power1_cap in uW,
 * energy1_input in uJ); has_power stays false without one. */
static void sample_hwmon(const struct tt_state *s, struct tt_dev *d)
{
    char dir[2048], path[2400], name[16];
    uint64_t in, avg, cap, uj;
    struct dirent *de;
    DIR *dd;

    d->has_power = false;
    snprintf(dir, sizeof(dir), "%s/class/accel/%s/device/hwmon", s->sys_root, d->node);
    dd = opendir(dir);
    if (!dd)
        return;
    while ((de = readdir(dd))) {
        FILE *f;
        size_t n;

        if (strncmp(de->d_name, "hwmon", 5))
            continue;
        snprintf(path, sizeof(path), "%s/%s/name", dir, de->d_name);
        f = fopen(path, "r");
        if (!f)
            continue;
        n = fread(name, 1, sizeof(name) - 1, f);
        fclose(f);
        name[n] = 0;
        if (strcmp(name, "tx8\n"))
            continue;
#define HW(file, v) (snprintf(path, sizeof(path), "%s/%s/" file, dir, de->d_name), tt_read_u64(path, v))
        if (HW("power1_input", &in) == 0 && HW("power1_average", &avg) == 0 &&
            HW("energy1_input", &uj) == 0) {
            d->has_power = true;
            d->power_w = (double)in / 1e6;
            d->power_avg_w = (double)avg / 1e6;
            d->power_cap_w = HW("power1_cap", &cap) == 0 ? (double)cap / 1e6 : 0;
            d->energy_j = (double)uj / 1e6;
        }
#undef HW
        break;
    }
    closedir(dd);
}


void tt_sample_accel(struct tt_state *s, struct tt_dev *d, const struct txm_meminfo *mi,
                     bool have_mi)
{
    static const struct {
        const char *attr;
        unsigned bit;
        size_t off;
    } attrs[] = {
        {"jobs", TT_HAS_JOBS, offsetof(struct tt_dev, jobs)},
        {"resets", TT_HAS_RESETS, offsetof(struct tt_dev, resets)},
        {"timeouts", TT_HAS_TIMEOUTS, offsetof(struct tt_dev, timeouts)},
        {"page_faults", TT_HAS_PAGE_FAULTS, offsetof(struct tt_dev, page_faults)},
        {"cache_misses", TT_HAS_CACHE_MISSES, offsetof(struct tt_dev, cache_misses)},
    };
    char base[PATH_MAX], path[PATH_MAX + 32], key[64];
    const struct txm_meminfo_dev *md = have_mi ? txm_meminfo_find(mi, d->minor) : NULL;
    uint64_t busy, total, used;
    struct stat st;

    snprintf(base, sizeof(base), "%s/class/accel/%s/device/tx8", s->sys_root, d->node);
    if (stat(base, &st) < 0) {
        d->ok = false;
        snprintf(d->error, sizeof(d->error), "%.80s: %s (device removed or driver unbound?)", base,
                 strerror(errno));
        d->util = NAN;
        d->has_mem = false;
        d->has = 0;
        d->ncores = 0;
        d->state[0] = 0;
        return;
    }
    d->ok = true;
    d->error[0] = 0;
    d->has = 0;
    d->state[0] = 0;
    sample_hwmon(s, d);
    snprintf(path, sizeof(path), "%s/busy_ns", base);
    snprintf(key, sizeof(key), "accel:%s:busy", d->node);
    d->util = tt_read_u64(path, &busy) == 0 ? txm_rate(&s->rates, key, busy, s->now_ns, 1) : NAN;
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        uint64_t v;

        snprintf(path, sizeof(path), "%s/%s", base, attrs[i].attr);
        if (tt_read_u64(path, &v) == 0) {
            *(uint64_t *)((char *)d + attrs[i].off) = v;
            d->has |= attrs[i].bit;
        }
    }
    d->has_mem = false;
    snprintf(path, sizeof(path), "%s/mem_total", base);
    if (tt_read_u64(path, &total) == 0) {
        snprintf(path, sizeof(path), "%s/mem_used", base);
        if (tt_read_u64(path, &used) == 0) {
            d->mem_total = total;
            d->mem_used = used;
            d->has_mem = true;
        }
    }
    if (!d->has_mem && md &&
        (md->has & (TXM_MI_TOTAL | TXM_MI_USED)) == (TXM_MI_TOTAL | TXM_MI_USED)) {
        d->mem_total = md->total;
        d->mem_used = md->used;
        d->has_mem = true;
    }
    if (md) {
        if (!(d->has & TT_HAS_PAGE_FAULTS) && (md->has & TXM_MI_FAULTS)) {
            d->page_faults = md->page_faults;
            d->has |= TT_HAS_PAGE_FAULTS;
        }
        if (!(d->has & TT_HAS_CACHE_MISSES) && (md->has & TXM_MI_MISS)) {
            d->cache_misses = md->cache_miss;
            d->has |= TT_HAS_CACHE_MISSES;
        }
        if (!(d->has & TT_HAS_RESETS) && (md->has & TXM_MI_RESETS)) {
            d->resets = md->resets;
            d->has |= TT_HAS_RESETS;
        }
        set_labels(d, md->labels, md->n_labels);
    } else {
        set_labels(d, NULL, 0);
    }

    /* per-core figures and state, when the node could be opened */
    d->ncores = 0;
    if (d->accel_fd >= 0) {
        struct drm_tx8_counters c;
        struct drm_tx8_query q;

        memset(&c, 0, sizeof(c));
        memset(&q, 0, sizeof(q));
        q.query = DRM_TX8_QUERY_COUNTERS;
        q.size = sizeof(c);
        q.data = (uint64_t)(uintptr_t)&c;
        if (ioctl(d->accel_fd, DRM_IOCTL_TX8_QUERY, &q) == 0) {
            unsigned n = c.num_cores < DRM_TX8_MAX_CORES ? c.num_cores : DRM_TX8_MAX_CORES;

            snprintf(d->state, sizeof(d->state), "%s", state_name(c.state));
            for (unsigned i = 0; i < n && i < TX8_MAX_CORES; i++) {
                snprintf(key, sizeof(key), "accel:%s:core%u", d->node, i);
                d->core_util[i] = txm_rate(&s->rates, key, c.core_busy_ns[i], s->now_ns, 1);
            }
            d->ncores = n < TX8_MAX_CORES ? n : TX8_MAX_CORES;
            d->jobs_failed = c.jobs_failed;
            d->addr_faults = c.faults;
            d->has |= TT_HAS_FAILED | TT_HAS_ADDR_FAULTS;
        } else if (errno == ENODEV) {
            close(d->accel_fd); /* unplugged: sysfs only from now on */
            d->accel_fd = -1;
        }
    }
    tt_jobs_rate(d, s->now_ns);
}

/* emu: per-queue rows are produced here; PIDs are matched later. */

static void emu_rows_add(struct emu_rows *rows, const struct emu_row *r)
{
    if (rows->n == rows->cap) {
        size_t ncap = rows->cap ? rows->cap * 2 : 16;
        struct emu_row *nr = realloc(rows->r, ncap * sizeof(*nr));

        if (!nr) {
            free(r->labels);
            return;
        }
        rows->r = nr;
        rows->cap = ncap;
    }
    rows->r[rows->n++] = *r;
}

void tt_sample_emu(struct tt_state *s, struct tt_dev *d, int di, struct emu_rows *rows)
{
    struct tx_device_counters c;
    struct tx_device_info info;
    struct tx_mem_region *reg = NULL;
    struct txm_label *labels = NULL;
    size_t nreg = 0, nlabels = 0;
    char key[400];

    d->util = NAN;
    d->ncores = 0;
    d->has = 0;
    d->has_mem = false;
    d->has_power = false;
    d->state[0] = 0;
    tt_emu_attach(d, s->now_ns);
    if (!d->emu) {
        d->ok = false;
        tt_jobs_rate(d, s->now_ns);
        return;
    }
    if (tx_device_counters(d->emu, &c) < 0 || tx_device_info(d->emu, &info) < 0) {
        char why[160];

        snprintf(why, sizeof(why), "%s", tx_last_error());
        tt_emu_detach(d, why, s->now_ns);
        tt_jobs_rate(d, s->now_ns);
        return;
    }
    /* A device that died (or was replaced by a restart) leaves its memory
     * mapped here with frozen figures: its heartbeat stops. */
    if (c.heartbeat != d->heartbeat) {
        d->heartbeat = c.heartbeat;
        d->heartbeat_ns = s->now_ns;
    } else if (s->now_ns - d->heartbeat_ns > 2000000000ull) {
        tt_emu_detach(d, "the device stopped responding (heartbeat stalled)", s->now_ns);
        tt_jobs_rate(d, s->now_ns);
        return;
    }
    d->ok = true;
    d->error[0] = 0;
    snprintf(d->state, sizeof(d->state), "%s", state_name(c.state));
    snprintf(key, sizeof(key), "emu:%s:%" PRIx64 ":busy", d->socket, d->boot_id);
    d->util = txm_rate(&s->rates, key, c.dev.busy_ns, s->now_ns, 1);
    d->ncores = d->cores < TX8_MAX_CORES ? d->cores : TX8_MAX_CORES;
    for (unsigned i = 0; i < d->ncores; i++) {
        snprintf(key, sizeof(key), "emu:%s:%" PRIx64 ":core%u", d->socket, d->boot_id, i);
        d->core_util[i] = txm_rate(&s->rates, key, c.dev.core_busy_ns[i], s->now_ns, 1);
    }
    d->mem_total = info.heap_size;
    d->mem_used = info.mem_used;
    d->has_mem = true;
    d->jobs = c.dev.jobs_completed + c.dev.jobs_failed;
    d->jobs_failed = c.dev.jobs_failed;
    d->resets = c.dev.resets;
    d->addr_faults = c.dev.faults;
    d->cache_misses = c.dev.expert_cache_misses;
    d->has = TT_HAS_JOBS | TT_HAS_FAILED | TT_HAS_RESETS | TT_HAS_ADDR_FAULTS | TT_HAS_CACHE_MISSES;
    tt_jobs_rate(d, s->now_ns);
    if (TX8_IF_MINOR(info.if_version) >= 8) { /* the power model, docs/hardware.md 7 */
        d->has_power = true;
        d->power_w = (double)c.dev.power_mw / 1e3;
        d->power_avg_w = (double)c.dev.power_avg_mw / 1e3;
        d->power_cap_w = (double)c.dev.power_cap_mw / 1e3;
        d->energy_j = (double)c.dev.energy_uj / 1e6;
    }

    /* labels and memory per peer, from the lease table */
    if (tx_device_memory_view(d->emu, NULL, 0, &nreg) == 0 && nreg) {
        size_t n = nreg;

        reg = calloc(n, sizeof(*reg));
        if (reg && tx_device_memory_view(d->emu, reg, n, &nreg) == 0) {
            if (nreg > n)
                nreg = n;
            labels = calloc(nreg, sizeof(*labels));
        } else {
            nreg = 0;
        }
    } else {
        nreg = 0;
    }
    for (size_t i = 0; labels && i < nreg; i++) {
        const char *name = reg[i].label[0] ? reg[i].label : "Unlabeled";
        size_t j;

        for (j = 0; j < nlabels; j++)
            if (!strcmp(labels[j].name, name))
                break;
        if (j == nlabels)
            snprintf(labels[nlabels++].name, sizeof(labels[0].name), "%s", name);
        labels[j].bytes += reg[i].size;
    }
    set_labels(d, labels, nlabels);

    /* one row per queue of another peer */
    for (unsigned qi = 0; qi < c.num_queues && qi < TX8_MAX_QUEUES; qi++) {
        const struct tx_queue_stats *q = &c.queues[qi];
        struct emu_row r;
        bool have_lease = false;

        if ((int)qi == c.own_queue || q->owner < 0 || q->owner == d->own_peer ||
            q->state == TX8_QUEUE_FREE)
            continue;
        memset(&r, 0, sizeof(r));
        r.dev = di;
        r.peer = q->owner;
        r.queue = (int)qi;
        r.pid = q->owner_pid;
        snprintf(key, sizeof(key), "emu:%s:%" PRIx64 ":q%u:p%d", d->socket, d->boot_id, qi,
                 q->owner);
        r.util = txm_rate(&s->rates, key, q->busy_ns, s->now_ns, 1);
        for (size_t i = 0; i < nreg; i++)
            if (reg[i].owner == q->owner) {
                r.vram += reg[i].size;
                have_lease = true;
            }
        if (!have_lease)
            r.vram = q->bytes_allocated;
        /* the peer's memory by label, once per peer */
        {
            bool first = true;

            for (size_t k = 0; k < rows->n; k++)
                if (rows->r[k].dev == di && rows->r[k].peer == q->owner)
                    first = false;
            for (size_t i = 0; first && i < nreg; i++) {
                if (reg[i].owner == q->owner)
                    tt_labels_add(&r.labels, &r.nlabels,
                                  reg[i].label[0] ? reg[i].label : "Unlabeled", reg[i].size);
            }
        }
        r.silent = !q->jobs_completed && !q->jobs_failed && !q->busy_ns && !r.vram;
        emu_rows_add(rows, &r);
    }
    free(reg);
    free(labels);
}
