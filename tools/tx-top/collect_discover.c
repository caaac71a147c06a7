/* SPDX-License-Identifier: MIT */
/* tx-top: finding devices -- accel nodes in sysfs, emulator sockets, --device specs. */
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
        tt_scopy(d->pci, sizeof(d->pci), b ? b + 1 : real);
    }
    snprintf(path, sizeof(path), "%s/class/accel/%s/device/tx8/cores", s->sys_root, d->node);
    if (tt_read_u64(path, &v) == 0) {
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
        tt_scopy(nodes[n++], 32, e->d_name);
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
