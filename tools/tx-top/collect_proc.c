/* SPDX-License-Identifier: MIT */
/* tx-top: the process table -- DRM fdinfo and emulator clients per process, and tt_sample. */
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
/* Process facts cache                                                       */
/* ------------------------------------------------------------------------ */

static void user_name(uid_t uid, char *buf, size_t size)
{
    static uid_t last_uid = (uid_t)-1;
    static char last[32];
    struct passwd *pw;

    if (uid == last_uid) {
        snprintf(buf, size, "%s", last);
        return;
    }
    pw = getpwuid(uid);
    if (pw)
        snprintf(last, sizeof(last), "%s", pw->pw_name);
    else
        snprintf(last, sizeof(last), "%u", (unsigned)uid);
    last_uid = uid;
    snprintf(buf, size, "%s", last);
}

/* User and command of pid (cached while its start time stays); rss read
 * every time. Returns 0, or -1 if the process is gone or unreadable. */
int tt_proc_facts(struct tt_state *s, int pid, char *user, size_t usize, char *cmd, size_t csize,
                  uint64_t *rss, bool *has_rss)
{
    struct tt_pcache *c = s->pcache;
    struct txm_proc_info pi;
    struct tt_pcache_entry *e = NULL;

    *has_rss = false;
    for (size_t i = 0; c && i < c->n; i++)
        if (c->e[i].pid == pid) {
            e = &c->e[i];
            break;
        }
    if (e) {
        uint64_t b;

        if (txm_proc_rss(s->proc_root, pid, &b) == 0) {
            *rss = b;
            *has_rss = true;
        }
        /* a reused PID is told apart by its start time */
        if (txm_proc_start_time(s->proc_root, pid) == e->start_time) {
            e->gen = c->gen;
            snprintf(user, usize, "%s", e->user);
            snprintf(cmd, csize, "%s", e->command);
            return 0;
        }
    }
    if (txm_proc_info(s->proc_root, pid, &pi) < 0)
        return -1;
    if (!e && c) {
        if (c->n == c->cap) {
            size_t ncap = c->cap ? c->cap * 2 : 32;
            struct tt_pcache_entry *ne = realloc(c->e, ncap * sizeof(*ne));

            if (ne) {
                c->e = ne;
                c->cap = ncap;
            }
        }
        if (c->n < c->cap)
            e = &c->e[c->n++];
    }
    if (e) {
        e->pid = pid;
        e->start_time = pi.start_time;
        e->gen = c->gen;
        if (pi.has_uid)
            user_name(pi.uid, e->user, sizeof(e->user));
        else
            e->user[0] = 0;
        snprintf(e->command, sizeof(e->command), "%s", pi.cmdline);
        snprintf(user, usize, "%s", e->user);
    } else {
        if (pi.has_uid)
            user_name(pi.uid, user, usize);
        else
            user[0] = 0;
    }
    snprintf(cmd, csize, "%s", pi.cmdline);
    *rss = pi.rss_bytes;
    *has_rss = pi.has_rss;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Process table                                                             */
/* ------------------------------------------------------------------------ */

static struct tt_proc *row_for(struct tt_proc **rows, size_t *n, size_t *cap, int pid, int dev,
                               int peer)
{
    struct tt_proc *p;

    for (size_t i = 0; i < *n; i++)
        if ((*rows)[i].pid == pid && (*rows)[i].dev == dev &&
            (pid >= 0 || (*rows)[i].peer == peer) && !(*rows)[i].unreadable)
            return &(*rows)[i];
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct tt_proc *nr = realloc(*rows, ncap * sizeof(*nr));

        if (!nr)
            return NULL;
        *rows = nr;
        *cap = ncap;
    }
    p = &(*rows)[(*n)++];
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    p->dev = dev;
    p->peer = peer;
    p->util = NAN;
    return p;
}

static void add_util(struct tt_proc *p, double u)
{
    if (isnan(u))
        return;
    p->util = isnan(p->util) ? u : p->util + u;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The executable of pid, " (deleted)" removed; "" if unreadable. */
static void exe_of(const char *proc_root, int pid, char *buf, size_t size)
{
    char link[64 + PATH_MAX];
    ssize_t n;

    if (pid > 0)
        snprintf(link, sizeof(link), "%s/%d/exe", proc_root, pid);
    else
        snprintf(link, sizeof(link), "/proc/self/exe");
    n = readlink(link, buf, size - 1);
    if (n <= 0) {
        buf[0] = 0;
        return;
    }
    buf[n] = 0;
    if (n > 10 && !strcmp(buf + n - 10, " (deleted)"))
        buf[n - 10] = 0;
}

/* Whether pid runs this very program (another tx-top: a monitor). */
static bool is_monitor(const struct tt_state *s, int pid)
{
    static char self[PATH_MAX];
    char exe[PATH_MAX];

    if (!self[0])
        exe_of(s->proc_root, 0, self, sizeof(self));
    exe_of(s->proc_root, pid, exe, sizeof(exe));
    return self[0] && exe[0] && !strcmp(self, exe);
}

/* A device-reported owner_pid that is not among the socket's client
 * processes found by the /proc scan: it can still be trusted when the
 * process exists and the scan could not have seen it, because the socket's
 * clients are unknown (sock_diag gave nothing: have_clients false) or the
 * process's file descriptors are not readable by this user. */
static bool pid_unverifiable(const struct tt_state *s, int pid, bool have_clients)
{
    char path[PATH_MAX];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%d", s->proc_root, pid);
    if (stat(path, &st) != 0)
        return false;
    if (!have_clients)
        return true;
    snprintf(path, sizeof(path), "%s/%d/fd", s->proc_root, pid);
    return access(path, R_OK | X_OK) != 0;
}

/* User, command and RSS of a row's process; false if it exited since the
 * scan (/proc/PID/status is world-readable: failing to read it means the
 * process is gone). */
static bool fill_facts(struct tt_state *s, struct tt_proc *p)
{
    if (p->pid <= 0)
        return true;
    return tt_proc_facts(s, p->pid, p->user, sizeof(p->user), p->command, sizeof(p->command),
                         &p->rss, &p->has_rss) == 0;
}

void tt_sample(struct tt_state *s)
{
    struct txm_meminfo mi;
    struct txm_scan scan;
    struct txm_scan_opts so;
    struct emu_rows erows = {0};
    uint64_t **peers;
    size_t *npeers;
    uint64_t *want = NULL;
    size_t nwant = 0;
    bool any_accel = false, have_mi = false;
    struct tt_proc *rows = NULL;
    size_t nrows = 0, rcap = 0;
    char *text;
    size_t len;

    s->now_ns = tt_now_ns();
    s->wall = tt_wall();
    s->samples++;
    if (s->pcache)
        s->pcache->gen++;
    txm_rates_begin(&s->rates);

    for (size_t i = 0; i < s->ndev; i++)
        any_accel |= !strcmp(s->devs[i].backend, "accel");
    if (any_accel && (text = tt_read_all(s->meminfo_path, &len))) {
        have_mi = txm_meminfo_parse(text, len, &mi) == 0;
        free(text);
    }

    /* devices; emu clients' socket inodes for the /proc scan */
    peers = calloc(s->ndev ? s->ndev : 1, sizeof(*peers));
    npeers = calloc(s->ndev ? s->ndev : 1, sizeof(*npeers));
    for (size_t i = 0; i < s->ndev; i++) {
        struct tt_dev *d = &s->devs[i];

        if (!strcmp(d->backend, "accel")) {
            tt_sample_accel(s, d, &mi, have_mi);
            continue;
        }
        tt_sample_emu(s, d, (int)i, &erows);
        if (d->emu && peers && npeers && txm_unix_peers(d->socket, &peers[i], &npeers[i]) == 0 &&
            npeers[i]) {
            uint64_t *nw = realloc(want, (nwant + npeers[i]) * sizeof(*nw));

            if (nw) {
                want = nw;
                memcpy(want + nwant, peers[i], npeers[i] * sizeof(*want));
                nwant += npeers[i];
            }
        }
    }
    if (nwant)
        qsort(want, nwant, sizeof(*want), cmp_u64);
    if (have_mi)
        txm_meminfo_free(&mi);

    /* one /proc pass for everything */
    memset(&so, 0, sizeof(so));
    so.proc_root = s->proc_root;
    so.accel_major = any_accel ? TXM_ACCEL_MAJOR : 0;
    so.engine = "compute";
    so.region = "vram";
    so.sock_inodes = want;
    so.n_sock_inodes = nwant;
    so.skip_pid = (int)getpid();
    if ((any_accel || nwant) && txm_proc_scan(&so, &scan) == 0) {
        s->unreadable = scan.unreadable;
    } else {
        memset(&scan, 0, sizeof(scan));
        s->unreadable = 0;
    }

    /* accel: DRM clients per process */
    if (scan.nfds) {
        struct txm_client *cl = NULL;
        size_t ncl = 0, k = 0;

        /* another DRM accel driver's nodes share major 261 */
        for (size_t j = 0; j < scan.nfds; j++)
            if (!strcmp(scan.fds[j].info.driver, "tx8"))
                scan.fds[k++] = scan.fds[j];
        scan.nfds = k;

        if (txm_clients_build(scan.fds, scan.nfds, &cl, &ncl) == 0) {
            txm_clients_rate(&s->rates, cl, ncl, s->now_ns);
            for (size_t k = 0; k < ncl; k++) {
                int dev = -1;
                struct tt_proc *p;

                for (size_t i = 0; i < s->ndev; i++)
                    if (!strcmp(s->devs[i].backend, "accel") && s->devs[i].minor == cl[k].minor)
                        dev = (int)i;
                if (dev < 0)
                    continue; /* another device, or not selected */
                /* another tx-top holds the node open for its queries only */
                if (cl[k].engine_ns == 0 && cl[k].total_bytes == 0 && is_monitor(s, cl[k].pid))
                    continue;
                p = row_for(&rows, &nrows, &rcap, cl[k].pid, dev, -1);
                if (!p)
                    continue;
                p->clients++;
                add_util(p, cl[k].util);
                if (cl[k].has & TXM_FD_TOTAL) {
                    p->vram += cl[k].total_bytes;
                    p->has_vram = true;
                } else if (cl[k].has & TXM_FD_RESIDENT) {
                    p->vram += cl[k].resident_bytes;
                    p->has_vram = true;
                }
            }
        }
        free(cl);
    }

    /* emu: queues to processes. Since interface 1.1 the emulator names the
     * process of each queue (owner_pid, from SO_PEERCRED): a row whose pid
     * is one of the socket's client processes (or whose process we cannot
     * look into, e.g. another user's) is that process's, exactly; a
     * silent queue of another tx-top is a monitor and not listed. Other
     * rows (a 1.0 device, or a pid that is not a client here: another PID
     * namespace) fall back to the socket's clients: as many silent queues
     * (no job ever, no memory) as there are monitors are theirs and not
     * listed; with one remaining client process every queue is its own;
     * with more, the PID of a queue cannot be known (docs/tx-top.md). */
    for (size_t i = 0; i < s->ndev; i++) {
        int pids[64], np = 0, self = (int)getpid(), monitors = 0;

        if (strcmp(s->devs[i].backend, "emu"))
            continue;
        for (size_t k = 0; k < scan.nsocks; k++) {
            bool mine = peers && npeers[i] &&
                        bsearch(&scan.socks[k].ino, peers[i], npeers[i], sizeof(uint64_t), cmp_u64);
            bool known = false;

            if (!mine || scan.socks[k].pid == self)
                continue;
            for (int j = 0; j < np; j++)
                known |= pids[j] == scan.socks[k].pid;
            if (known)
                continue;
            if (is_monitor(s, scan.socks[k].pid))
                monitors++;
            else if (np < 64)
                pids[np++] = scan.socks[k].pid;
        }
        for (size_t k = 0; k < erows.n; k++) {
            struct emu_row *r = &erows.r[k];
            bool client = false;

            if (r->dev != (int)i || r->pid <= 0)
                continue;
            for (int j = 0; j < np; j++)
                client |= pids[j] == r->pid;
            if (!client && is_monitor(s, r->pid)) {
                r->exact = true;
                if (r->silent) {
                    r->skip = true;
                    if (monitors > 0)
                        monitors--;
                }
                continue;
            }
            /* trusted unless the socket's clients are known, readable and
             * it is not one of them */
            r->exact = client || pid_unverifiable(s, r->pid, peers && npeers[i]);
        }
        for (size_t k = erows.n; k-- > 0 && monitors > 0;)
            if (erows.r[k].dev == (int)i && !erows.r[k].exact && erows.r[k].silent) {
                erows.r[k].skip = true;
                monitors--;
            }
        for (size_t k = 0; k < erows.n; k++) {
            struct emu_row *r = &erows.r[k];
            struct tt_proc *p;
            int pid;

            if (r->dev != (int)i || r->skip)
                continue;
            pid = r->exact ? r->pid : np == 1 ? pids[0] : -1;
            p = row_for(&rows, &nrows, &rcap, pid, r->dev, r->peer);
            if (!p)
                continue;
            p->clients++;
            add_util(p, r->util);
            p->vram += r->vram;
            p->has_vram = true;
            for (size_t j = 0; j < r->nlabels; j++)
                tt_labels_add(&p->labels, &p->nlabels, r->labels[j].name, r->labels[j].bytes);
            if (pid < 0) {
                size_t off;

                off = (size_t)snprintf(p->command, sizeof(p->command), "(tx8-emu peer %d", r->peer);
                if (np > 1) {
                    off += (size_t)snprintf(p->command + off, sizeof(p->command) - off,
                                            ": one of PIDs");
                    for (int j = 0; j < np && off < sizeof(p->command) - 16; j++)
                        off += (size_t)snprintf(p->command + off, sizeof(p->command) - off, " %d",
                                                pids[j]);
                }
                snprintf(p->command + off, sizeof(p->command) - off, ")");
            }
        }
    }
    for (size_t k = 0; k < erows.n; k++)
        free(erows.r[k].labels);
    free(erows.r);

    {
        size_t k = 0;

        for (size_t i = 0; i < nrows; i++) {
            if (fill_facts(s, &rows[i]))
                rows[k++] = rows[i];
            else
                free(rows[i].labels);
        }
        nrows = k;
    }

    /* accel: /proc/tx_meminfo has labels per device, not per process;
     * they are a process's when it is the only one holding memory there
     * (and every process could be read) */
    for (size_t i = 0; !s->unreadable && i < s->ndev; i++) {
        struct tt_dev *d = &s->devs[i];
        struct tt_proc *only = NULL;
        int holders = 0;

        if (strcmp(d->backend, "accel") || !d->ok || !d->nlabels)
            continue;
        for (size_t k = 0; k < nrows; k++)
            if (rows[k].dev == (int)i && rows[k].has_vram && rows[k].vram > 0) {
                only = &rows[k];
                holders++;
            }
        if (holders != 1 || only->nlabels)
            continue;
        for (size_t j = 0; j < d->nlabels; j++)
            tt_labels_add(&only->labels, &only->nlabels, d->labels[j].name, d->labels[j].bytes);
    }

    /* accel: what processes we cannot read hold on each device */
    if (s->unreadable) {
        for (size_t i = 0; i < s->ndev; i++) {
            struct tt_dev *d = &s->devs[i];
            uint64_t seen = 0;
            struct tt_proc *p;

            d->unattributed = 0;
            if (strcmp(d->backend, "accel") || !d->ok)
                continue;
            for (size_t k = 0; k < nrows; k++)
                if (rows[k].dev == (int)i && rows[k].has_vram)
                    seen += rows[k].vram;
            p = row_for(&rows, &nrows, &rcap, -1, (int)i, -2);
            if (!p)
                continue;
            p->unreadable = true;
            p->has_vram = d->has_mem;
            p->vram = d->has_mem && d->mem_used > seen ? d->mem_used - seen : 0;
            d->unattributed = p->vram;
            snprintf(p->command, sizeof(p->command), "(%u processes not readable by this user)",
                     s->unreadable);
        }
    }

    tt_procs_free(s->procs, s->nproc);
    s->procs = rows;
    s->nproc = nrows;

    for (size_t i = 0; peers && i < s->ndev; i++)
        free(peers[i]);
    free(peers);
    free(npeers);
    free(want);
    txm_scan_free(&scan);

    /* history */
    for (size_t i = 0; i < s->ndev; i++) {
        struct tt_dev *d = &s->devs[i];

        d->hist_util[d->hist_pos] = isnan(d->util) ? -1.0f : (float)d->util;
        d->hist_mem[d->hist_pos] = d->has_mem ? (double)d->mem_used : -1.0;
        d->hist_power[d->hist_pos] = d->has_power ? (float)d->power_w : -1.0f;
        d->hist_pos = (d->hist_pos + 1) % TT_HIST;
        if (d->hist_n < TT_HIST)
            d->hist_n++;
    }

    /* published models */
    for (size_t i = 0; i < s->nmodels; i++) {
        free(s->models[i].agg);
        free(s->models[i].hot);
        free(s->models[i].layer_std);
    }
    free(s->models);
    s->models = NULL;
    s->nmodels = 0;
    tx_telemetry_scan(tt_collect_model, s, &s->models_skipped);

    /* forget processes not listed for a while */
    if (s->pcache) {
        struct tt_pcache *c = s->pcache;
        size_t k = 0;

        for (size_t i = 0; i < c->n; i++)
            if (c->e[i].gen + 60 >= c->gen)
                c->e[k++] = c->e[i];
        c->n = k;
    }

    txm_rates_end(&s->rates);
}
