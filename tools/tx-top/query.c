/* SPDX-License-Identifier: MIT */
/*
 * tx-top --query: nvidia-smi style CSV rows, one per device and refresh
 *
 *   tx-top --query=power.draw,energy,util,memory.used --format=csv,noheader -l 1
 *
 * Fields and units are listed in docs/tx-top.md; a figure the device does
 * not report is "N/A" (nvidia-smi's [N/A]).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "txtop.h"

enum q_field {
    QF_INDEX,
    QF_NAME,
    QF_TIMESTAMP,
    QF_POWER_DRAW,
    QF_POWER_AVG,
    QF_POWER_LIMIT,
    QF_ENERGY,
    QF_UTIL,
    QF_MEM_USED,
    QF_MEM_TOTAL,
    QF_MEM_FREE,
};

static const struct {
    const char *name, *alias, *unit;
    enum q_field f;
} fields[] = {
    {"index", NULL, NULL, QF_INDEX},
    {"name", NULL, NULL, QF_NAME},
    {"timestamp", NULL, NULL, QF_TIMESTAMP},
    {"power.draw", NULL, "W", QF_POWER_DRAW},
    {"power.draw.average", "power.average", "W", QF_POWER_AVG},
    {"power.limit", NULL, "W", QF_POWER_LIMIT},
    {"energy", "total_energy_consumption", "J", QF_ENERGY},
    {"util", "utilization.gpu", "%", QF_UTIL},
    {"memory.used", NULL, "MiB", QF_MEM_USED},
    {"memory.total", NULL, "MiB", QF_MEM_TOTAL},
    {"memory.free", NULL, "MiB", QF_MEM_FREE},
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

int tt_query_parse(const char *list, const char *format, struct tt_query *q, char *err,
                   size_t errlen)
{
    const char *p = list;

    memset(q, 0, sizeof(*q));
    q->header = true;
    q->units = true;
    while (p && *p) {
        size_t n = strcspn(p, ",");
        size_t k;

        for (k = 0; k < NFIELDS; k++)
            if ((strlen(fields[k].name) == n && !strncmp(fields[k].name, p, n)) ||
                (fields[k].alias && strlen(fields[k].alias) == n && !strncmp(fields[k].alias, p, n)))
                break;
        if (k == NFIELDS) {
            snprintf(err, errlen,
                     "--query: unknown field '%.*s' (fields: index, name, timestamp, power.draw, "
                     "power.draw.average, power.limit, energy, util, memory.used, memory.total, "
                     "memory.free)",
                     (int)n, p);
            return -1;
        }
        if (q->n >= TT_QUERY_MAX) {
            snprintf(err, errlen, "--query: more than %d fields", TT_QUERY_MAX);
            return -1;
        }
        q->field[q->n++] = (int)k;
        p += n;
        if (*p == ',' && !*++p) {
            snprintf(err, errlen, "--query: trailing comma");
            return -1;
        }
    }
    if (!q->n) {
        snprintf(err, errlen, "--query: no fields");
        return -1;
    }
    if (!format)
        format = "csv";
    for (p = format; *p;) {
        size_t n = strcspn(p, ",");

        if (n == 3 && !strncmp(p, "csv", 3))
            ;
        else if (n == 8 && !strncmp(p, "noheader", 8))
            q->header = false;
        else if (n == 7 && !strncmp(p, "nounits", 7))
            q->units = false;
        else {
            snprintf(err, errlen, "--format: unknown '%.*s' (csv, noheader, nounits)", (int)n, p);
            return -1;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

static void value(FILE *f, const struct tt_state *s, size_t i, int k, bool units)
{
    const struct tt_dev *d = &s->devs[i];
    const char *u = units && fields[k].unit ? fields[k].unit : NULL;
    double v = NAN;

    switch (fields[k].f) {
    case QF_INDEX:
        fprintf(f, "%zu", i);
        return;
    case QF_NAME:
        fprintf(f, "%s", d->name[0] ? d->name : "TX8");
        return;
    case QF_TIMESTAMP: {
        time_t t = (time_t)s->wall;
        struct tm tm;
        char buf[32];

        localtime_r(&t, &tm);
        strftime(buf, sizeof(buf), "%Y/%m/%d %H:%M:%S", &tm);
        fprintf(f, "%s.%03d", buf, (int)((s->wall - (double)t) * 1000));
        return;
    }
    case QF_POWER_DRAW:
        v = d->ok && d->has_power ? d->power_w : NAN;
        break;
    case QF_POWER_AVG:
        v = d->ok && d->has_power ? d->power_avg_w : NAN;
        break;
    case QF_POWER_LIMIT:
        v = d->ok && d->has_power && d->power_cap_w > 0 ? d->power_cap_w : NAN;
        break;
    case QF_ENERGY:
        v = d->ok && d->has_power ? d->energy_j : NAN;
        break;
    case QF_UTIL:
        v = d->ok ? d->util : NAN;
        break;
    case QF_MEM_USED:
        v = d->ok && d->has_mem ? (double)d->mem_used / 1048576.0 : NAN;
        break;
    case QF_MEM_TOTAL:
        v = d->ok && d->has_mem ? (double)d->mem_total / 1048576.0 : NAN;
        break;
    case QF_MEM_FREE:
        v = d->ok && d->has_mem && d->mem_total >= d->mem_used
                ? (double)(d->mem_total - d->mem_used) / 1048576.0
                : NAN;
        break;
    }
    if (isnan(v)) {
        fputs("N/A", f);
        return;
    }
    switch (fields[k].f) {
    case QF_ENERGY:
        fprintf(f, "%.3f", v);
        break;
    case QF_UTIL:
    case QF_MEM_USED:
    case QF_MEM_TOTAL:
    case QF_MEM_FREE:
        fprintf(f, "%.0f", v);
        break;
    default:
        fprintf(f, "%.2f", v);
        break;
    }
    if (u)
        fprintf(f, " %s", u);
}

int tt_query_print(const struct tt_state *s, const struct tt_query *q, bool header, FILE *f)
{
    if (header && q->header) {
        for (int j = 0; j < q->n; j++) {
            int k = q->field[j];

            fprintf(f, "%s%s", j ? ", " : "", fields[k].name);
            if (fields[k].unit)
                fprintf(f, " [%s]", fields[k].unit);
        }
        fputc('\n', f);
    }
    for (size_t i = 0; i < s->ndev; i++) {
        for (int j = 0; j < q->n; j++) {
            if (j)
                fputs(", ", f);
            value(f, s, i, q->field[j], q->units);
        }
        fputc('\n', f);
    }
    return fflush(f) == EOF ? -1 : 0;
}
