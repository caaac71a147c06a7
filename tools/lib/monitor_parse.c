/* SPDX-License-Identifier: MIT */
/*
 * libtx telemetry: parsers of DRM fdinfo (drm-usage-stats.rst) and of the
 * kernel driver's /proc/tx_meminfo.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "telemetry/monitor.h"

/* Unsigned decimal at *s (no sign, at least one digit); advances *s. */
static int parse_uint(const char **s, uint64_t *v)
{
    const char *p = *s;
    uint64_t x = 0;

    if (!isdigit((unsigned char)*p))
        return -1;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');

        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *s = p;
    *v = x;
    return 0;
}

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static int only_ws(const char *p)
{
    p = skip_ws(p);
    return *p == 0 || *p == '\n' || *p == '\r';
}

int txm_parse_size(const char *s, uint64_t *bytes)
{
    static const struct {
        const char *unit;
        unsigned shift;
    } units[] = {{"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}};
    const char *p = skip_ws(s);
    uint64_t v;

    if (parse_uint(&p, &v) < 0)
        return -1;
    p = skip_ws(p);
    if (only_ws(p)) {
        *bytes = v;
        return 0;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        size_t l = strlen(units[i].unit);

        if (strncmp(p, units[i].unit, l) == 0 && only_ws(p + l)) {
            if (units[i].shift && v > (UINT64_MAX >> units[i].shift))
                return -1;
            *bytes = v << units[i].shift;
            return 0;
        }
    }
    return -1;
}

int txm_parse_ns(const char *s, uint64_t *ns)
{
    const char *p = skip_ws(s);
    uint64_t v;

    if (parse_uint(&p, &v) < 0)
        return -1;
    p = skip_ws(p);
    if (strncmp(p, "ns", 2) == 0)
        p += 2;
    if (!only_ws(p))
        return -1;
    *ns = v;
    return 0;
}

/* A string value: no whitespace inside (drm-usage-stats: <str>). */
static int copy_str(char *dst, size_t size, const char *v)
{
    size_t n = 0;

    v = skip_ws(v);
    while (v[n] && !isspace((unsigned char)v[n]))
        n++;
    if (n == 0 || n >= size || !only_ws(v + n))
        return -1;
    memcpy(dst, v, n);
    dst[n] = 0;
    return 0;
}

int txm_fdinfo_parse(const char *text, size_t len, const char *engine, const char *region,
                     struct txm_fdinfo *out)
{
    char line[512], k_engine[80], k_cap[96], k_total[80], k_mem[80], k_res[80];
    int is_drm = 0;
    size_t pos = 0;

    memset(out, 0, sizeof(*out));
    out->capacity = 1;
    snprintf(k_engine, sizeof(k_engine), "drm-engine-%s", engine);
    snprintf(k_cap, sizeof(k_cap), "drm-engine-capacity-%s", engine);
    snprintf(k_total, sizeof(k_total), "drm-total-%s", region);
    snprintf(k_mem, sizeof(k_mem), "drm-memory-%s", region);
    snprintf(k_res, sizeof(k_res), "drm-resident-%s", region);

    while (pos < len) {
        size_t end = pos, n;
        char *colon;
        const char *v;
        uint64_t x;
        int have_total = (out->has & TXM_FD_TOTAL) != 0;

        while (end < len && text[end] != '\n')
            end++;
        n = end - pos;
        if (n >= sizeof(line))
            n = sizeof(line) - 1; /* over-long line: its value is cut, checks reject it */
        memcpy(line, text + pos, n);
        line[n] = 0;
        pos = end + 1;
        if (strlen(line) != n)
            continue; /* embedded NUL */
        colon = strchr(line, ':');
        if (!colon || strncmp(line, "drm-", 4) != 0)
            continue;
        *colon = 0;
        v = colon + 1;
        if (strpbrk(line, " \t"))
            continue; /* keys contain no whitespace */
        if (!strcmp(line, "drm-driver")) {
            if (copy_str(out->driver, sizeof(out->driver), v) == 0)
                is_drm = 1;
        } else if (!strcmp(line, "drm-pdev")) {
            if (copy_str(out->pdev, sizeof(out->pdev), v) == 0)
                out->has |= TXM_FD_PDEV;
        } else if (!strcmp(line, "drm-client-name")) {
            copy_str(out->client_name, sizeof(out->client_name), v);
        } else if (!strcmp(line, "drm-client-id")) {
            const char *p = skip_ws(v);

            if (parse_uint(&p, &x) == 0 && only_ws(p)) {
                out->client_id = x;
                out->has |= TXM_FD_CLIENT_ID;
            }
        } else if (!strcmp(line, k_engine)) {
            if (txm_parse_ns(v, &x) == 0) {
                out->engine_ns = x;
                out->has |= TXM_FD_ENGINE;
            }
        } else if (!strcmp(line, k_cap)) {
            const char *p = skip_ws(v);

            /* zero capacity is not allowed: ignored */
            if (parse_uint(&p, &x) == 0 && only_ws(p) && x > 0) {
                out->capacity = x;
                out->has |= TXM_FD_CAPACITY;
            }
        } else if (!strcmp(line, k_total) || (!strcmp(line, k_mem) && !have_total)) {
            /* drm-total-<region> wins over the older drm-memory-<region> */
            if (txm_parse_size(v, &x) == 0) {
                out->total_bytes = x;
                out->has |= TXM_FD_TOTAL;
            }
        } else if (!strcmp(line, k_res)) {
            if (txm_parse_size(v, &x) == 0) {
                out->resident_bytes = x;
                out->has |= TXM_FD_RESIDENT;
            }
        }
    }
    return is_drm ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* /proc/tx_meminfo                                                          */
/* ------------------------------------------------------------------------ */

static int add_label(struct txm_label **arr, size_t *n, const char *name, uint64_t bytes)
{
    struct txm_label *a;

    /* the same label twice (a driver listing it per buffer): summed */
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*arr)[i].name, name)) {
            (*arr)[i].bytes += bytes;
            return 0;
        }
    a = realloc(*arr, (*n + 1) * sizeof(**arr));
    if (!a)
        return -1;
    *arr = a;
    memset(&a[*n], 0, sizeof(a[*n]));
    snprintf(a[*n].name, sizeof(a[*n].name), "%s", name);
    a[*n].bytes = bytes;
    (*n)++;
    return 0;
}

/*
 * One line: `Key:<spaces>value[ kB]`. The key may contain anything (labels
 * may contain ':' or spaces); it ends at the last ':' before the value.
 * Returns 0 with key (NUL terminated in line), value and kb set, else -1.
 */
static int split_line(char *line, char **key, uint64_t *value, int *kb)
{
    size_t n = strlen(line);
    char *p;
    const char *q;

    while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
        line[--n] = 0;
    *kb = 0;
    if (n > 3 && !strcmp(line + n - 3, " kB")) {
        *kb = 1;
        n -= 3;
        line[n] = 0;
    }
    p = line + n;
    while (p > line && isdigit((unsigned char)p[-1]))
        p--;
    if (p == line + n)
        return -1; /* no digits */
    q = p;
    if (parse_uint(&q, value) < 0)
        return -1;
    while (p > line && (p[-1] == ' ' || p[-1] == '\t'))
        p--;
    if (p == line || p[-1] != ':' || p - 1 == line)
        return -1;
    p[-1] = 0;
    *key = line;
    return 0;
}

/* "accelN_" prefix: N, and *rest after it; -1 if none. */
static int dev_prefix(const char *key, const char **rest)
{
    const char *p = key;
    uint64_t v;

    if (strncmp(p, "accel", 5))
        return -1;
    p += 5;
    if (parse_uint(&p, &v) < 0 || *p != '_' || v > 1000000)
        return -1;
    *rest = p + 1;
    return **rest ? (int)v : -1;
}

struct fixed_key {
    const char *name;
    unsigned bit;
    int kb;
};

static const struct fixed_key total_keys[] = {
    {"DeviceTotal", TXM_MI_TOTAL, 1}, {"DeviceUsed", TXM_MI_USED, 1},
    {"DeviceFree", TXM_MI_FREE, 1},   {"PageFaults", TXM_MI_FAULTS, 0},
    {"CacheMiss", TXM_MI_MISS, 0},    {"Resets", TXM_MI_RESETS, 0},
};
static const struct fixed_key dev_keys[] = {
    {"Total", TXM_MI_TOTAL, 1},       {"Used", TXM_MI_USED, 1},      {"Free", TXM_MI_FREE, 1},
    {"PageFaults", TXM_MI_FAULTS, 0}, {"CacheMiss", TXM_MI_MISS, 0}, {"Resets", TXM_MI_RESETS, 0},
    {"Buffers", TXM_MI_BUFFERS, 0},
};

static uint64_t *field(unsigned bit, uint64_t *total, uint64_t *used, uint64_t *free_,
                       uint64_t *faults, uint64_t *miss, uint64_t *resets, uint64_t *buffers)
{
    switch (bit) {
    case TXM_MI_TOTAL:
        return total;
    case TXM_MI_USED:
        return used;
    case TXM_MI_FREE:
        return free_;
    case TXM_MI_FAULTS:
        return faults;
    case TXM_MI_MISS:
        return miss;
    case TXM_MI_RESETS:
        return resets;
    default:
        return buffers;
    }
}

static struct txm_meminfo_dev *get_dev(struct txm_meminfo *m, int index)
{
    struct txm_meminfo_dev *d;

    for (size_t i = 0; i < m->n_devs; i++)
        if (m->devs[i].index == index)
            return &m->devs[i];
    d = realloc(m->devs, (m->n_devs + 1) * sizeof(*d));
    if (!d)
        return NULL;
    m->devs = d;
    d = &m->devs[m->n_devs++];
    memset(d, 0, sizeof(*d));
    d->index = index;
    return d;
}

int txm_meminfo_parse(const char *text, size_t len, struct txm_meminfo *m)
{
    size_t pos = 0;

    memset(m, 0, sizeof(*m));
    while (pos < len) {
        size_t end = pos, n;
        char line[256], *key;
        const char *rest;
        uint64_t v;
        int kb, idx, fixed = 0;

        while (end < len && text[end] != '\n')
            end++;
        n = end - pos;
        if (n >= sizeof(line)) {
            m->bad_lines++;
            pos = end + 1;
            continue;
        }
        memcpy(line, text + pos, n);
        line[n] = 0;
        pos = end + 1;
        if (strlen(line) != n) {
            m->bad_lines++;
            continue;
        }
        if (only_ws(line))
            continue;
        if (split_line(line, &key, &v, &kb) < 0 || (kb && v > (UINT64_MAX >> 10))) {
            m->bad_lines++;
            continue;
        }
        idx = dev_prefix(key, &rest);
        if (idx >= 0) {
            struct txm_meminfo_dev *d = get_dev(m, idx);

            if (!d)
                goto oom;
            for (size_t i = 0; i < sizeof(dev_keys) / sizeof(dev_keys[0]); i++) {
                const struct fixed_key *fk = &dev_keys[i];

                if (!strcmp(rest, fk->name) && kb == fk->kb && !(d->has & fk->bit)) {
                    *field(fk->bit, &d->total, &d->used, &d->free, &d->page_faults, &d->cache_miss,
                           &d->resets, &d->buffers) = kb ? v << 10 : v;
                    d->has |= fk->bit;
                    fixed = 1;
                    break;
                }
            }
            if (!fixed && kb && add_label(&d->labels, &d->n_labels, rest, v << 10) < 0)
                goto oom;
            continue;
        }
        for (size_t i = 0; i < sizeof(total_keys) / sizeof(total_keys[0]); i++) {
            const struct fixed_key *fk = &total_keys[i];

            if (!strcmp(key, fk->name) && kb == fk->kb && !(m->has & fk->bit)) {
                *field(fk->bit, &m->total, &m->used, &m->free, &m->page_faults, &m->cache_miss,
                       &m->resets, &v) = kb ? v << 10 : v;
                m->has |= fk->bit;
                fixed = 1;
                break;
            }
        }
        if (!fixed && kb && add_label(&m->labels, &m->n_labels, key, v << 10) < 0)
            goto oom;
    }
    return 0;
oom:
    txm_meminfo_free(m);
    return -1;
}

void txm_meminfo_free(struct txm_meminfo *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_devs; i++)
        free(m->devs[i].labels);
    free(m->devs);
    free(m->labels);
    memset(m, 0, sizeof(*m));
}

const struct txm_meminfo_dev *txm_meminfo_find(const struct txm_meminfo *m, int index)
{
    for (size_t i = 0; m && i < m->n_devs; i++)
        if (m->devs[i].index == index)
            return &m->devs[i];
    return NULL;
}
