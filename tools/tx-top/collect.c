/* SPDX-License-Identifier: MIT */
/*
 * tx-top: finding devices and sampling them.
 *
 *   accel devices  sysfs (/sys/class/accel/accelN/device/tx8/), the
 *                  driver's QUERY ioctl when the node can be opened,
 *                  /proc/tx_meminfo, and per process the DRM fdinfo of
 *                  every /dev/accel fd (major 261) in /proc.
 *   emu devices    libtx's device layer (read-only calls: info, counters,
 *                  memory view), per queue; queues are matched with
 *                  processes through the clients of the emulator's socket.
 *   models         libtx's telemetry channel (/dev/shm/tx8-telemetry-*).
 */
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

volatile int tt_stop;

static int tt_collect_model(const struct tx_telemetry_model *m, void *arg);

uint64_t tt_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double tt_wall(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const char *tt_bytes(uint64_t b, char *buf, size_t size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    unsigned u = 0;

    while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 "B", b);
    else
        snprintf(buf, size, "%.1f%s", v, units[u]);
    return buf;
}

const char *tt_ifver(uint32_t v, char *buf, size_t size)
{
    snprintf(buf, size, "%u.%u", (unsigned)TX8_IF_MAJOR(v), (unsigned)TX8_IF_MINOR(v));
    return buf;
}

/* Copy a string, cut to fit. */
static void scopy(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);

    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* ------------------------------------------------------------------------ */
/* Small files                                                               */
/* ------------------------------------------------------------------------ */

/* One decimal value (sysfs one-value attribute). 0 or -1. */
static int read_u64(const char *path, uint64_t *v)
{
    char buf[64], *end;
    unsigned long long x;

    if (txm_read_small(path, buf, sizeof(buf)) <= 0)
        return -1;
    if (buf[0] < '0' || buf[0] > '9')
        return -1;
    errno = 0;
    x = strtoull(buf, &end, 10);
    if (errno || (*end && *end != '\n'))
        return -1;
    *v = x;
    return 0;
}

/* A whole file of unknown size (e.g. /proc/tx_meminfo), malloc()ed. */
static char *read_all(const char *path, size_t *len)
{
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap);
    int fd;

    if (!buf)
        return NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        free(buf);
        return NULL;
    }
    for (;;) {
        ssize_t r;

        if (n + 1 >= cap) {
            char *nb;

            if (cap >= (16u << 20))
                break; /* a sane /proc file is far smaller */
            nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* ------------------------------------------------------------------------ */
/* Process facts cache                                                       */
/* ------------------------------------------------------------------------ */

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
static int proc_facts(struct tt_state *s, int pid, char *user, size_t usize, char *cmd,
                      size_t csize, uint64_t *rss, bool *has_rss)
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
/* Discovery                                                                 */
/* ------------------------------------------------------------------------ */

static struct tt_dev *add_dev(struct tt_state *s)
{
    struct tt_dev *d = realloc(s->devs, (s->ndev + 1) * sizeof(*d));

    if (!d)
        return NULL;
    s->devs = d;
    d = &s->devs[s->ndev++];
    memset(d, 0, sizeof(*d));
    d->minor = -1;
    d->accel_fd = -1;
    d->own_peer = -1;
    d->util = NAN;
    d->jobs_rate = NAN;
    return d;
}

/* Whether /sys/class/accel/<node> is driven by tx8. */
static int accel_is_tx8(const struct tt_state *s, const char *node)
{
    char link[PATH_MAX], target[PATH_MAX];
    const char *base;
    ssize_t n;

    snprintf(link, sizeof(link), "%s/class/accel/%s/device/driver", s->sys_root, node);
    n = readlink(link, target, sizeof(target) - 1);
    if (n < 0)
        return 0;
    target[n] = 0;
    base = strrchr(target, '/');
    base = base ? base + 1 : target;
    return strcmp(base, "tx8") == 0;
}

/* Static facts of an accel device: PCI address, cores, and what QUERY
 * tells when the node can be opened. */
static void accel_static(struct tt_state *s, struct tt_dev *d)
{
    char path[PATH_MAX], real[PATH_MAX];
    struct drm_tx8_device_info di;
    struct drm_tx8_query q;
    uint64_t v;
    const char *b;
    int fd;

    snprintf(path, sizeof(path), "%s/class/accel/%s/device", s->sys_root, d->node);
    if (realpath(path, real)) {
        b = strrchr(real, '/');
        scopy(d->pci, sizeof(d->pci), b ? b + 1 : real);
    }
    snprintf(path, sizeof(path), "%s/class/accel/%s/device/tx8/cores", s->sys_root, d->node);
    if (read_u64(path, &v) == 0) {
        d->cores = (uint32_t)v;
        d->has_cores = true;
    }
    snprintf(d->name, sizeof(d->name), "TX8");
    snprintf(path, sizeof(path), "/dev/accel/%s", d->node);
    fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return; /* no permission: name and version N/A */
    memset(&di, 0, sizeof(di));
    memset(&q, 0, sizeof(q));
    q.query = DRM_TX8_QUERY_DEVICE;
    q.size = sizeof(di);
    q.data = (uint64_t)(uintptr_t)&di;
    if (ioctl(fd, DRM_IOCTL_TX8_QUERY, &q) < 0) {
        close(fd);
        return;
    }
    di.name[sizeof(di.name) - 1] = 0;
    if (di.name[0])
        snprintf(d->name, sizeof(d->name), "%s", di.name);
    d->if_version = di.if_version;
    d->has_if = true;
    d->cores = di.num_cores;
    d->has_cores = true;
    d->accel_fd = fd; /* kept for QUERY_COUNTERS (per-core figures, state) */
}

static int add_accel(struct tt_state *s, const char *node, char *err, size_t errsize)
{
    struct tt_dev *d;
    int minor;

    if (sscanf(node, "accel%d", &minor) != 1 || minor < 0) {
        snprintf(err, errsize, "'%s' is not an accel node name", node);
        return -1;
    }
    d = add_dev(s);
    if (!d) {
        snprintf(err, errsize, "out of memory");
        return -1;
    }
    snprintf(d->backend, sizeof(d->backend), "accel");
    snprintf(d->node, sizeof(d->node), "accel%d", minor);
    snprintf(d->spec, sizeof(d->spec), "/dev/accel/%s", d->node);
    d->minor = minor;
    accel_static(s, d);
    return 0;
}

static int add_emu(struct tt_state *s, const char *path, char *err, size_t errsize)
{
    struct tt_dev *d;

    if (strlen(path) >= sizeof(d->socket) || !*path) {
        snprintf(err, errsize, "bad emulator socket path '%s'", path);
        return -1;
    }
    for (size_t i = 0; i < s->ndev; i++)
        if (!strcmp(s->devs[i].backend, "emu") && !strcmp(s->devs[i].socket, path))
            return 0;
    d = add_dev(s);
    if (!d) {
        snprintf(err, errsize, "out of memory");
        return -1;
    }
    snprintf(d->backend, sizeof(d->backend), "emu");
    snprintf(d->socket, sizeof(d->socket), "%s", path);
    snprintf(d->spec, sizeof(d->spec), "emu:%s", path);
    snprintf(d->name, sizeof(d->name), "TX8 (tx8-emu)");
    return 0;
}

static int cmp_node(const void *a, const void *b)
{
    int x = atoi((const char *)a + 5), y = atoi((const char *)b + 5);

    return (x > y) - (x < y);
}

static int discover_accel(struct tt_state *s, char *err, size_t errsize)
{
    char path[PATH_MAX], (*nodes)[32] = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    DIR *d;

    snprintf(path, sizeof(path), "%s/class/accel", s->sys_root);
    d = opendir(path);
    if (!d)
        return 0;
    while ((e = readdir(d))) {
        int minor;
        char rest;

        if (sscanf(e->d_name, "accel%d%c", &minor, &rest) != 1 || !accel_is_tx8(s, e->d_name))
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            char(*nn)[32] = realloc(nodes, ncap * sizeof(*nn));

            if (!nn)
                break;
            nodes = nn;
            cap = ncap;
        }
        scopy(nodes[n++], 32, e->d_name);
    }
    closedir(d);
    if (n)
        qsort(nodes, n, sizeof(*nodes), cmp_node);
    for (size_t i = 0; i < n; i++)
        if (add_accel(s, nodes[i], err, errsize) < 0) {
            free(nodes);
            return -1;
        }
    free(nodes);
    return 0;
}

static int discover_emu(struct tt_state *s, char *err, size_t errsize)
{
    struct tx_device_desc list[64];
    size_t n = 0;

    if (tx_device_enumerate(list, 64, &n) < 0)
        return 0;
    for (size_t i = 0; i < n && i < 64; i++)
        if (!strcmp(list[i].backend, "emu") && !strncmp(list[i].spec, "emu:", 4) &&
            add_emu(s, list[i].spec + 4, err, errsize) < 0)
            return -1;
    return 0;
}

static int add_spec(struct tt_state *s, const char *spec, char *err, size_t errsize)
{
    struct stat st;

    if (!strncmp(spec, "emu:", 4))
        return add_emu(s, spec + 4, err, errsize);
    if (!strncmp(spec, "accel:", 6))
        spec += 6;
    if (!strncmp(spec, "/dev/accel/", 11))
        return add_accel(s, spec + 11, err, errsize);
    if (!strncmp(spec, "accel", 5) && !strchr(spec, '/'))
        return add_accel(s, spec, err, errsize);
    if (spec[0] == '/' && stat(spec, &st) == 0 && S_ISSOCK(st.st_mode))
        return add_emu(s, spec, err, errsize);
    snprintf(err, errsize,
             "unknown device '%s' (use emu:/path.sock, /dev/accel/accelN or a refresh delay "
             "in tenths of a second)",
             spec);
    return -1;
}

int tt_discover(struct tt_state *s, const struct tt_options *o, char *err, size_t errsize)
{
    if (!s->proc_root)
        s->proc_root = "/proc";
    if (!s->sys_root)
        s->sys_root = "/sys";
    if (!s->meminfo_path)
        s->meminfo_path = "/proc/tx_meminfo";
    s->root = geteuid() == 0;
    txm_rates_init(&s->rates);
    s->pcache = calloc(1, sizeof(*s->pcache));
    if (!s->pcache) {
        snprintf(err, errsize, "out of memory");
        return -1;
    }
    if (o->nspecs) {
        for (int i = 0; i < o->nspecs; i++)
            if (add_spec(s, o->specs[i], err, errsize) < 0)
                return -1;
    } else {
        if (discover_accel(s, err, errsize) < 0 || discover_emu(s, err, errsize) < 0)
            return -1;
    }
    if (s->ndev == 0) {
        snprintf(err, errsize,
                 "no TX8 device found (no tx8 accel node, no emulator socket in "
                 "/run/tx8 or $TX_DEVICE; use -d emu:/path.sock)");
        return -1;
    }
    if (o->nselect) {
        struct tt_dev *sel = calloc((size_t)o->nselect, sizeof(*sel));
        size_t k = 0;

        if (!sel) {
            snprintf(err, errsize, "out of memory");
            return -1;
        }
        for (int i = 0; i < o->nselect; i++) {
            int idx = o->select[i];
            bool dup = false;

            if (idx < 0 || (size_t)idx >= s->ndev) {
                snprintf(err, errsize, "-i %d: no such device (%zu found, 0..%zu)", idx, s->ndev,
                         s->ndev - 1);
                free(sel);
                return -1;
            }
            for (int j = 0; j < i; j++)
                dup |= o->select[j] == idx;
            if (!dup)
                sel[k++] = s->devs[idx];
        }
        /* close what is not selected */
        for (size_t i = 0; i < s->ndev; i++) {
            bool keep = false;

            for (int j = 0; j < o->nselect; j++)
                keep |= (size_t)o->select[j] == i;
            if (!keep && s->devs[i].accel_fd >= 0)
                close(s->devs[i].accel_fd);
        }
        free(s->devs);
        s->devs = sel;
        s->ndev = k;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* emu attachment                                                            */
/* ------------------------------------------------------------------------ */

static void emu_detach(struct tt_dev *d, const char *why, uint64_t now)
{
    if (d->emu)
        tx_device_close(d->emu);
    d->emu = NULL;
    d->own_peer = -1;
    d->ok = false;
    snprintf(d->error, sizeof(d->error), "%s", why);
    d->retry_ns = now + 2000000000ull;
}

/*
 * Attaching (the ivshmem handshake) runs in a thread of its own: a wedged
 * emulator that never answers must not freeze the screen. The job is
 * shared by the thread and the device; whoever lets go last frees it (and
 * closes a handle nobody took).
 */
struct attach_job {
    int refs;
    bool finished;
    char spec[300];
    int rc;
    tx_device_t *dev;
    struct tx_device_info info;
    char err[160];
};

static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

static void job_release(struct attach_job *j)
{
    bool last;

    pthread_mutex_lock(&attach_lock);
    last = --j->refs == 0;
    pthread_mutex_unlock(&attach_lock);
    if (last) {
        if (j->dev)
            tx_device_close(j->dev);
        free(j);
    }
}

static void *attach_main(void *arg)
{
    struct attach_job *j = arg;
    tx_device_t *dev = NULL;
    int rc = tx_device_open(j->spec, &dev);

    if (rc == 0) {
        rc = tx_device_info(dev, &j->info);
        if (rc < 0) {
            snprintf(j->err, sizeof(j->err), "%s", tx_last_error());
            tx_device_close(dev);
            dev = NULL;
        }
    } else {
        snprintf(j->err, sizeof(j->err), "%s", tx_last_error());
    }
    j->rc = rc;
    j->dev = dev;
    pthread_mutex_lock(&attach_lock);
    j->finished = true;
    pthread_mutex_unlock(&attach_lock);
    job_release(j);
    return NULL;
}

/* Start an attach (if due) or collect its result; never blocks. */
static void emu_attach(struct tt_dev *d, uint64_t now)
{
    struct attach_job *j = d->attach;
    pthread_attr_t attr;
    pthread_t t;
    bool finished;

    if (d->emu)
        return;
    if (j) {
        pthread_mutex_lock(&attach_lock);
        finished = j->finished;
        pthread_mutex_unlock(&attach_lock);
        if (!finished)
            return;
        d->attach = NULL;
        if (j->rc < 0 || !j->dev) {
            emu_detach(d, j->err[0] ? j->err : "cannot attach", now);
            job_release(j);
            return;
        }
        d->emu = j->dev;
        j->dev = NULL;
        j->info.name[sizeof(j->info.name) - 1] = 0;
        if (j->info.name[0])
            snprintf(d->name, sizeof(d->name), "%s", j->info.name);
        d->if_version = j->info.if_version;
        d->has_if = true;
        d->cores = j->info.num_cores;
        d->has_cores = true;
        d->boot_id = j->info.boot_id;
        d->own_peer = j->info.client_id;
        d->heartbeat = 0;
        d->heartbeat_ns = now;
        d->error[0] = 0;
        job_release(j);
        return;
    }
    if (now < d->retry_ns)
        return;
    j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->refs = 2;
    scopy(j->spec, sizeof(j->spec), d->spec);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, attach_main, j) != 0) {
        pthread_attr_destroy(&attr);
        free(j);
        emu_detach(d, "cannot start a thread", now);
        return;
    }
    pthread_attr_destroy(&attr);
    d->attach = j;
    snprintf(d->error, sizeof(d->error), "attaching to the emulator...");
}

void tt_attach(struct tt_state *s, unsigned wait_ms)
{
    uint64_t now = tt_now_ns(), until = now + (uint64_t)wait_ms * 1000000ull;

    for (size_t i = 0; i < s->ndev; i++)
        if (!strcmp(s->devs[i].backend, "emu"))
            emu_attach(&s->devs[i], now);
    for (;;) {
        bool pending = false;

        now = tt_now_ns();
        for (size_t i = 0; i < s->ndev; i++)
            if (s->devs[i].attach) {
                emu_attach(&s->devs[i], now);
                pending |= s->devs[i].attach != NULL;
            }
        if (!pending || now >= until || tt_stop)
            return;
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}

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

static void jobs_rate(struct tt_dev *d, uint64_t now)
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

static void sample_accel(struct tt_state *s, struct tt_dev *d, const struct txm_meminfo *mi,
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
    snprintf(path, sizeof(path), "%s/busy_ns", base);
    snprintf(key, sizeof(key), "accel:%s:busy", d->node);
    d->util = read_u64(path, &busy) == 0 ? txm_rate(&s->rates, key, busy, s->now_ns, 1) : NAN;
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        uint64_t v;

        snprintf(path, sizeof(path), "%s/%s", base, attrs[i].attr);
        if (read_u64(path, &v) == 0) {
            *(uint64_t *)((char *)d + attrs[i].off) = v;
            d->has |= attrs[i].bit;
        }
    }
    d->has_mem = false;
    snprintf(path, sizeof(path), "%s/mem_total", base);
    if (read_u64(path, &total) == 0) {
        snprintf(path, sizeof(path), "%s/mem_used", base);
        if (read_u64(path, &used) == 0) {
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
    jobs_rate(d, s->now_ns);
}

/* emu: per-queue rows are produced here; PIDs are matched later. */
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
};

struct emu_rows {
    struct emu_row *r;
    size_t n, cap;
};

static void emu_rows_add(struct emu_rows *rows, const struct emu_row *r)
{
    if (rows->n == rows->cap) {
        size_t ncap = rows->cap ? rows->cap * 2 : 16;
        struct emu_row *nr = realloc(rows->r, ncap * sizeof(*nr));

        if (!nr)
            return;
        rows->r = nr;
        rows->cap = ncap;
    }
    rows->r[rows->n++] = *r;
}

static void sample_emu(struct tt_state *s, struct tt_dev *d, int di, struct emu_rows *rows)
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
    d->state[0] = 0;
    emu_attach(d, s->now_ns);
    if (!d->emu) {
        d->ok = false;
        jobs_rate(d, s->now_ns);
        return;
    }
    if (tx_device_counters(d->emu, &c) < 0 || tx_device_info(d->emu, &info) < 0) {
        char why[160];

        snprintf(why, sizeof(why), "%s", tx_last_error());
        emu_detach(d, why, s->now_ns);
        jobs_rate(d, s->now_ns);
        return;
    }
    /* A device that died (or was replaced by a restart) leaves its memory
     * mapped here with frozen figures: its heartbeat stops. */
    if (c.heartbeat != d->heartbeat) {
        d->heartbeat = c.heartbeat;
        d->heartbeat_ns = s->now_ns;
    } else if (s->now_ns - d->heartbeat_ns > 2000000000ull) {
        emu_detach(d, "the device stopped responding (heartbeat stalled)", s->now_ns);
        jobs_rate(d, s->now_ns);
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
    jobs_rate(d, s->now_ns);

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
        r.silent = !q->jobs_completed && !q->jobs_failed && !q->busy_ns && !r.vram;
        emu_rows_add(rows, &r);
    }
    free(reg);
    free(labels);
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
    return proc_facts(s, p->pid, p->user, sizeof(p->user), p->command, sizeof(p->command), &p->rss,
                      &p->has_rss) == 0;
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
    if (any_accel && (text = read_all(s->meminfo_path, &len))) {
        have_mi = txm_meminfo_parse(text, len, &mi) == 0;
        free(text);
    }

    /* devices; emu clients' socket inodes for the /proc scan */
    peers = calloc(s->ndev ? s->ndev : 1, sizeof(*peers));
    npeers = calloc(s->ndev ? s->ndev : 1, sizeof(*npeers));
    for (size_t i = 0; i < s->ndev; i++) {
        struct tt_dev *d = &s->devs[i];

        if (!strcmp(d->backend, "accel")) {
            sample_accel(s, d, &mi, have_mi);
            continue;
        }
        sample_emu(s, d, (int)i, &erows);
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
    free(erows.r);

    {
        size_t k = 0;

        for (size_t i = 0; i < nrows; i++)
            if (fill_facts(s, &rows[i]))
                rows[k++] = rows[i];
        nrows = k;
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

    free(s->procs);
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

static int dev_matches(const struct tt_dev *d, const char *name)
{
    if (!*name)
        return 0;
    if (!strcmp(name, d->spec))
        return 1;
    if (!strcmp(d->backend, "emu"))
        return !strcmp(name, d->socket) ||
               (!strncmp(name, "emu:", 4) && !strcmp(name + 4, d->socket));
    if (!strncmp(name, "accel:", 6))
        name += 6;
    if (!strncmp(name, "/dev/accel/", 11))
        name += 11;
    return !strcmp(name, d->node);
}

static int tt_collect_model(const struct tx_telemetry_model *m, void *arg)
{
    struct tt_state *s = arg;
    struct tt_model *mm, *nm;
    uint64_t rss;
    bool has_rss;
    char user[32];

    nm = realloc(s->models, (s->nmodels + 1) * sizeof(*nm));
    if (!nm)
        return 1;
    s->models = nm;
    mm = &s->models[s->nmodels];
    memset(mm, 0, sizeof(*mm));
    mm->pid = m->pid;
    snprintf(mm->model, sizeof(mm->model), "%s", m->model);
    snprintf(mm->device, sizeof(mm->device), "%s", m->device);
    mm->layers = m->layers;
    mm->experts = m->experts;
    mm->updated_ns = m->updated_ns;
    mm->updates = m->updates;
    mm->dev = -1;
    for (size_t i = 0; i < s->ndev; i++)
        if (dev_matches(&s->devs[i], m->device)) {
            mm->dev = (int)i;
            break;
        }
    if (tx_telemetry_model_stats(m, &mm->st) < 0)
        return 0;
    mm->agg = calloc(m->experts, sizeof(uint64_t));
    mm->hot = calloc(m->experts, sizeof(uint64_t));
    mm->layer_std = calloc(m->layers, sizeof(double));
    if (!mm->agg || !mm->hot || !mm->layer_std) {
        free(mm->agg);
        free(mm->hot);
        free(mm->layer_std);
        return 1;
    }
    for (uint32_t l = 0; l < m->layers; l++) {
        const uint64_t *c = m->counts + (size_t)l * m->experts;

        mm->layer_std[l] = m->layer_valid[l] ? tx_telemetry_util_std(c, m->experts) : NAN;
        if (!m->layer_valid[l])
            continue;
        for (uint32_t e = 0; e < m->experts; e++)
            mm->agg[e] += c[e];
        if ((int32_t)l == mm->st.max_layer)
            memcpy(mm->hot, c, m->experts * sizeof(uint64_t));
    }
    if (proc_facts(s, m->pid, user, sizeof(user), mm->command, sizeof(mm->command), &rss,
                   &has_rss) < 0)
        mm->command[0] = 0;
    s->nmodels++;
    return 0;
}

void tt_free(struct tt_state *s)
{
    for (size_t i = 0; i < s->ndev; i++) {
        if (s->devs[i].attach)
            job_release(s->devs[i].attach);
        if (s->devs[i].emu)
            tx_device_close(s->devs[i].emu);
        if (s->devs[i].accel_fd >= 0)
            close(s->devs[i].accel_fd);
        free(s->devs[i].labels);
    }
    free(s->devs);
    free(s->procs);
    for (size_t i = 0; i < s->nmodels; i++) {
        free(s->models[i].agg);
        free(s->models[i].hot);
        free(s->models[i].layer_std);
    }
    free(s->models);
    txm_rates_free(&s->rates);
    if (s->pcache)
        free(s->pcache->e);
    free(s->pcache);
    memset(s, 0, sizeof(*s));
}
