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
#include "collect.h"

volatile int tt_stop;

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
void tt_scopy(char *dst, size_t size, const char *src)
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
int tt_read_u64(const char *path, uint64_t *v)
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
char *tt_read_all(const char *path, size_t *len)
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

void tt_procs_free(struct tt_proc *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++)
        free(p[i].labels);
    free(p);
}

void tt_labels_add(struct tt_label **l, size_t *n, const char *name, uint64_t bytes)
{
    struct tt_label *nl;

    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*l)[i].name, name)) {
            (*l)[i].bytes += bytes;
            return;
        }
    nl = realloc(*l, (*n + 1) * sizeof(*nl));
    if (!nl)
        return;
    *l = nl;
    snprintf(nl[*n].name, sizeof(nl[0].name), "%s", name);
    nl[*n].bytes = bytes;
    (*n)++;
}

void tt_free(struct tt_state *s)
{
    for (size_t i = 0; i < s->ndev; i++) {
        if (s->devs[i].attach)
            tt_job_release(s->devs[i].attach);
        if (s->devs[i].emu)
            tx_device_close(s->devs[i].emu);
        if (s->devs[i].accel_fd >= 0)
            close(s->devs[i].accel_fd);
        free(s->devs[i].labels);
    }
    free(s->devs);
    tt_procs_free(s->procs, s->nproc);
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
