/* SPDX-License-Identifier: MIT */
/*
 * tx-top: the full-screen view (ncursesw).
 *
 *   title line
 *   per device: header, UTIL and MEM bars, counters, history charts of
 *               utilisation and device memory
 *   per published model: header, per-expert load histogram
 *   process table (sortable, selectable, kill with confirmation)
 *   footer: keys, prompts and messages
 *
 * The layout shrinks with the terminal: charts and histograms get lower,
 * then go; a terminal below 40x8 gets a notice. Without colours (or with
 * NO_COLOR set) only bold/reverse attributes are used; without a UTF-8
 * locale the charts use ASCII.
 */
#include <curses.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txtop.h"

enum { COL_PID, COL_USER, COL_DEV, COL_BUSY, COL_VRAM, COL_HOST, COL_CMD, NCOLS };

static const char *const col_title[NCOLS] = {"PID",  "USER",     "DEV",    "BUSY%",
                                             "VRAM", "HOST MEM", "COMMAND"};

enum { PAIR_GOOD = 1, PAIR_WARN, PAIR_BAD, PAIR_CHART, PAIR_DIM };

struct ui {
    struct tt_state *s;
    int sort_col;
    bool desc;
    int sel;     /* index into order[] */
    int sel_pid; /* selection kept across refreshes by (pid, dev, peer) */
    int sel_dev;
    int sel_peer;
    int top;
    size_t *order;
    bool utf8;
    bool colors;
    bool hot_layer; /* histogram of the most imbalanced layer instead of all */
    bool no_labels; /* 'm': the processes' memory-by-label rows hidden */
    char msg[200];
    uint64_t msg_until;
    int confirm_pid;
    char confirm_cmd[48];
};

static void ui_on(struct ui *u, int pair, int attrs)
{
    if (u->colors && pair)
        attron(COLOR_PAIR(pair));
    if (attrs)
        attron(attrs);
}

static void ui_off(struct ui *u, int pair, int attrs)
{
    if (u->colors && pair)
        attroff(COLOR_PAIR(pair));
    if (attrs)
        attroff(attrs);
}

/* Bytes of s that fill at most cols columns (UTF-8: one column per
 * character; the glyphs tx-top draws are all one column wide). */
static int cols_to_bytes(const char *s, int cols)
{
    int b = 0, c = 0;

    while (s[b]) {
        if (((unsigned char)s[b] & 0xc0) != 0x80) {
            if (c == cols)
                break;
            c++;
        }
        b++;
    }
    return b;
}

/* Print at (y, x), clipped to the screen width (and to max columns). */
static void put(int y, int x, int max, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(int y, int x, int max, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    int room = COLS - x;

    if (y < 0 || y >= LINES || x >= COLS || room <= 0)
        return;
    if (max > 0 && max < room)
        room = max;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    mvaddnstr(y, x, buf, cols_to_bytes(buf, room));
}

static void set_msg(struct ui *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_msg(struct ui *u, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(u->msg, sizeof(u->msg), fmt, ap);
    va_end(ap);
    u->msg_until = tt_now_ns() + 4000000000ull;
}

static int level_pair(double pct, bool high_is_bad)
{
    if (!high_is_bad)
        return PAIR_GOOD;
    return pct >= 90 ? PAIR_BAD : pct >= 75 ? PAIR_WARN : PAIR_GOOD;
}

/* htop-style bar: LABEL[|||||      text] in w columns. */
static void bar(struct ui *u, int y, int x, int w, const char *label, double pct, const char *text,
                bool high_is_bad)
{
    int inner = w - (int)strlen(label) - 2, fill, tl = (int)strlen(text);

    if (y >= LINES - 1 || inner < 4)
        return;
    ui_on(u, 0, A_BOLD);
    put(y, x, w, "%s[", label);
    ui_off(u, 0, A_BOLD);
    x += (int)strlen(label) + 1;
    fill = isnan(pct) ? 0 : (int)lround(pct / 100.0 * inner);
    if (fill > inner)
        fill = inner;
    if (fill < 0)
        fill = 0;
    ui_on(u, level_pair(pct, high_is_bad), 0);
    for (int i = 0; i < fill && x + i < COLS; i++)
        mvaddch(y, x + i, '|');
    ui_off(u, level_pair(pct, high_is_bad), 0);
    if (tl > inner)
        tl = inner;
    put(y, x + inner - tl, tl, "%s", text);
    ui_on(u, 0, A_BOLD);
    put(y, x + inner, 1, "]");
    ui_off(u, 0, A_BOLD);
}

/* One cell of a chart: eighths 0..8 of the cell filled. */
static void chart_cell(struct ui *u, int y, int x, int eighths)
{
    static const char *const blocks[] = {" ",      "\u2581", "\u2582", "\u2583", "\u2584",
                                         "\u2585", "\u2586", "\u2587", "\u2588"};

    if (y >= LINES - 1 || x >= COLS || eighths <= 0)
        return;
    if (eighths > 8)
        eighths = 8;
    if (u->utf8)
        mvaddstr(y, x, blocks[eighths]);
    else
        mvaddch(y, x, eighths >= 6 ? '#' : eighths >= 3 ? ':' : '.');
}

/* Vertical bars, one per value, in a w x h box at (y, x); values in
 * [lo, hi]; negative values (unknown) are left empty. */
static void chart(struct ui *u, int y, int x, int w, int h, const double *v, int n, double lo,
                  double hi)
{
    ui_on(u, PAIR_CHART, 0);
    for (int i = 0; i < n && i < w; i++) {
        double f;
        int total;

        if (v[i] < 0 || hi <= lo)
            continue;
        f = (v[i] - lo) / (hi - lo);
        f = f < 0 ? 0 : f > 1 ? 1 : f;
        total = (int)lround(f * h * 8);
        if (total == 0 && v[i] > lo)
            total = 1; /* anything non-zero shows */
        for (int r = 0; r < h; r++)
            chart_cell(u, y + h - 1 - r, x + (w - n) + i, total - r * 8);
    }
    ui_off(u, PAIR_CHART, 0);
}

enum hist_kind { HIST_UTIL, HIST_MEM, HIST_POWER };

/* The last n points of a device's history (oldest first). */
static int history(const struct tt_dev *d, enum hist_kind kind, double *out, int n)
{
    int have = (int)d->hist_n < n ? (int)d->hist_n : n;

    for (int i = 0; i < have; i++) {
        size_t idx = (d->hist_pos + TT_HIST - (size_t)have + (size_t)i) % TT_HIST;

        out[i] = kind == HIST_MEM     ? d->hist_mem[idx]
                 : kind == HIST_POWER ? (double)d->hist_power[idx]
                                      : (double)d->hist_util[idx];
    }
    return have;
}

static const char *pct_str(double v, char *buf, size_t size)
{
    if (isnan(v))
        snprintf(buf, size, "N/A");
    else
        snprintf(buf, size, "%.1f%%", v);
    return buf;
}

/* Append to buf at *off, never past size (the text is cut). */
static void app(char *buf, size_t size, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void app(char *buf, size_t size, size_t *off, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*off + 1 >= size)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *off, size - *off, fmt, ap);
    va_end(ap);
    if (n > 0)
        *off = *off + (size_t)n < size ? *off + (size_t)n : size - 1;
}

/* "label value  " or "label N/A  " */
static void cnt(char *buf, size_t size, size_t *off, bool have, const char *label, uint64_t v)
{
    if (have)
        app(buf, size, off, "%s %llu  ", label, (unsigned long long)v);
    else
        app(buf, size, off, "%s N/A  ", label);
}

/* ------------------------------------------------------------------------ */
/* Device block                                                              */
/* ------------------------------------------------------------------------ */

static int draw_device(struct ui *u, int y, size_t i, int chart_h, bool counters)
{
    const struct tt_dev *d = &u->s->devs[i];
    char a[48], b[48], c[48], ver[16];
    int w = COLS - 2, x;

    /* header */
    ui_on(u, 0, A_BOLD);
    put(y, 0, 0, "[%zu] %s", i, d->name[0] ? d->name : "TX8");
    ui_off(u, 0, A_BOLD);
    x = (int)strlen(d->name[0] ? d->name : "TX8") + 5 + (i >= 10);
    if (!strcmp(d->backend, "emu"))
        put(y, x, 0, "emu %s", d->socket);
    else
        put(y, x, 0, "%s  PCI %s", d->node, d->pci[0] ? d->pci : "N/A");
    x += (int)(!strcmp(d->backend, "emu") ? strlen(d->socket) + 4
                                          : strlen(d->node) + 6 + (d->pci[0] ? strlen(d->pci) : 3));
    if (d->has_cores)
        snprintf(a, sizeof(a), "%u cores", d->cores);
    else
        snprintf(a, sizeof(a), "cores N/A");
    put(y, x, 0, "  %s  interface %s  %s", a,
        d->has_if ? tt_ifver(d->if_version, ver, sizeof(ver)) : "N/A", d->state[0] ? d->state : "");
    y++;
    if (!d->ok) {
        ui_on(u, PAIR_BAD, A_BOLD);
        put(y++, 2, 0, "unavailable: %s", d->error[0] ? d->error : "not sampled yet");
        ui_off(u, PAIR_BAD, A_BOLD);
    } else {
        int bw = (w - 2) / 2;
        double mp =
            d->has_mem && d->mem_total ? 100.0 * (double)d->mem_used / (double)d->mem_total : NAN;

        bar(u, y, 1, bw, "UTIL", d->util, pct_str(d->util, a, sizeof(a)), false);
        if (d->has_mem)
            snprintf(c, sizeof(c), "%s/%s", tt_bytes(d->mem_used, a, sizeof(a)),
                     tt_bytes(d->mem_total, b, sizeof(b)));
        else
            snprintf(c, sizeof(c), "N/A");
        bar(u, y, 1 + bw + 2, bw, "MEM", mp, c, true);
        y++;
    }
    if (counters) {
        char line[1024];
        size_t off = 0;

        line[0] = 0;
        if (d->ok) {
            if ((d->has & TT_HAS_JOBS) && !isnan(d->jobs_rate))
                app(line, sizeof(line), &off, "jobs %llu (%.1f/s)  ", (unsigned long long)d->jobs,
                    d->jobs_rate);
            else
                cnt(line, sizeof(line), &off, d->has & TT_HAS_JOBS, "jobs", d->jobs);
            cnt(line, sizeof(line), &off, d->has & TT_HAS_FAILED, "failed", d->jobs_failed);
            cnt(line, sizeof(line), &off, d->has & TT_HAS_RESETS, "resets", d->resets);
            cnt(line, sizeof(line), &off, d->has & TT_HAS_CACHE_MISSES, "cache miss",
                d->cache_misses);
            cnt(line, sizeof(line), &off, d->has & TT_HAS_PAGE_FAULTS, "page faults",
                d->page_faults);
            if (d->has_power) {
                app(line, sizeof(line), &off, "power %.2f W (1 s avg %.2f W", d->power_w,
                    d->power_avg_w);
                if (d->power_cap_w > 0)
                    app(line, sizeof(line), &off, ", cap %.2f W", d->power_cap_w);
                app(line, sizeof(line), &off, ")  energy %.3f J  ", d->energy_j);
            }
            if (d->ncores) {
                app(line, sizeof(line), &off, "cores");
                for (unsigned k = 0; k < d->ncores; k++) {
                    if (isnan(d->core_util[k]))
                        app(line, sizeof(line), &off, " N/A");
                    else
                        app(line, sizeof(line), &off, " %.0f%%", d->core_util[k]);
                }
            }
        }
        put(y++, 2, 0, "%s", line);
    }
    if (chart_h > 0 && d->ok) {
        int ncharts = d->has_power ? 3 : 2;
        int cw = (COLS - 1 - ncharts) / ncharts;
        double *vals = calloc((size_t)(cw > 0 ? cw : 1), sizeof(double));
        int n;
        double lo = 0, hi = 0;

        if (!vals)
            return y + chart_h + 1;
        ui_on(u, 0, A_DIM);
        put(y, 1, cw, "utilisation %%, last %.0fs (0-100)", cw * u->s->interval);
        ui_off(u, 0, A_DIM);
        n = history(d, HIST_UTIL, vals, cw);
        chart(u, y + 1, 1, cw, chart_h, vals, n, 0, 100);

        n = history(d, HIST_MEM, vals, cw);
        hi = -1;
        lo = -1;
        for (int k = 0; k < n; k++) {
            if (vals[k] < 0)
                continue;
            if (hi < 0 || vals[k] > hi)
                hi = vals[k];
            if (lo < 0 || vals[k] < lo)
                lo = vals[k];
        }
        /* zoom onto the range in use so that a sawtooth shows; 0..total
         * when memory does not move */
        if (hi < 0 || !d->has_mem || (hi - lo) < (double)d->mem_total / 200.0) {
            lo = 0;
            hi = d->has_mem && d->mem_total ? (double)d->mem_total : 1;
        } else {
            double pad = (hi - lo) * 0.1;

            lo = lo - pad < 0 ? 0 : lo - pad;
            hi += pad;
        }
        ui_on(u, 0, A_DIM);
        put(y, 2 + cw, cw, "device memory %s-%s", tt_bytes((uint64_t)lo, a, sizeof(a)),
            tt_bytes((uint64_t)hi, b, sizeof(b)));
        ui_off(u, 0, A_DIM);
        chart(u, y + 1, 2 + cw, cw, chart_h, vals, n, lo, hi);
        if (d->has_power) {
            /* 0 .. the cap, or the highest draw seen (+10%) */
            hi = d->power_cap_w;
            n = history(d, HIST_POWER, vals, cw);
            for (int k = 0; k < n && d->power_cap_w <= 0; k++)
                if (vals[k] * 1.1 > hi)
                    hi = vals[k] * 1.1;
            if (hi <= 0)
                hi = 1;
            ui_on(u, 0, A_DIM);
            put(y, 3 + 2 * cw, cw, "power W, last %.0fs (0-%.1f)", cw * u->s->interval, hi);
            ui_off(u, 0, A_DIM);
            chart(u, y + 1, 3 + 2 * cw, cw, chart_h, vals, n, 0, hi);
        }
        free(vals);
        y += chart_h + 1;
    }
    return y;
}

/* ------------------------------------------------------------------------ */
/* Model block                                                               */
/* ------------------------------------------------------------------------ */

static int draw_model(struct ui *u, int y, const struct tt_model *m, int hist_h)
{
    const uint64_t *src = u->hot_layer && m->st.max_layer >= 0 ? m->hot : m->agg;
    double age = m->updated_ns ? u->s->wall - (double)m->updated_ns / 1e9 : NAN;
    char dev[16], std[32], line[600];
    int w = COLS - 2;

    if (m->dev >= 0)
        snprintf(dev, sizeof(dev), "[%d]", m->dev);
    else
        snprintf(dev, sizeof(dev), "-");
    ui_on(u, 0, A_BOLD);
    put(y, 0, 0, "Model %s", m->model);
    ui_off(u, 0, A_BOLD);
    if (m->st.moe_layers)
        snprintf(std, sizeof(std), "%.1f%%", m->st.overall_std);
    else
        snprintf(std, sizeof(std), "N/A");
    snprintf(line, sizeof(line),
             "pid %d  %u layers x %u experts (%u with load)  expert util std %s  on %s %s", m->pid,
             m->layers, m->experts, m->st.moe_layers, std, dev, m->device);
    put(y, (int)strlen(m->model) + 7, 0, "%s", line);
    y++;
    if (m->has_cache) {
        uint64_t uses = m->cache.hits + m->cache.misses;
        char hr[16] = "N/A", pu[16] = "-";
        if (uses)
            snprintf(hr, sizeof(hr), "%.1f%%", 100.0 * (double)m->cache.hits / (double)uses);
        if (m->cache.prefetches)
            snprintf(pu, sizeof(pu), "%.0f%%",
                     100.0 * (double)m->cache.prefetch_useful / (double)m->cache.prefetches);
        put(y, 2, 0,
            "expert cache %llu/%llu experts  hit rate %s  misses %llu  prefetches %llu (%s "
            "used)  read %.1f MiB",
            (unsigned long long)m->cache.slots, (unsigned long long)m->cache.experts, hr,
            (unsigned long long)m->cache.misses, (unsigned long long)m->cache.prefetches, pu,
            (double)m->cache.bytes_read / 1048576.0);
        y++;
    }
    if (hist_h <= 0 || !src || m->experts == 0)
        return y;

    {
        uint32_t E = m->experts;
        uint32_t per = (E + (uint32_t)w - 1) / (uint32_t)w; /* experts per column */
        uint32_t ncol = (E + per - 1) / per;
        int cw = (int)((uint32_t)w / ncol) > 3 ? 3 : (int)((uint32_t)w / ncol);
        double *vals = calloc(ncol, sizeof(double));
        double mx = 0, total = 0, mxe = 0;

        if (cw < 1)
            cw = 1;
        if (!vals)
            return y + hist_h + 2;
        for (uint32_t e = 0; e < E; e++) {
            vals[e / per] += (double)src[e];
            total += (double)src[e];
            mxe = (double)src[e] > mxe ? (double)src[e] : mxe;
        }
        for (uint32_t k = 0; k < ncol; k++)
            mx = vals[k] > mx ? vals[k] : mx;
        char ago[32];

        if (isnan(age))
            snprintf(ago, sizeof(ago), "never");
        else if (age < 1)
            snprintf(ago, sizeof(ago), "<1s ago");
        else
            snprintf(ago, sizeof(ago), "%.0fs ago", age);
        ui_on(u, 0, A_DIM);
        if (u->hot_layer && m->st.max_layer >= 0)
            snprintf(line, sizeof(line),
                     "expert load, layer %d (most imbalanced, util std %.1f%%)  hottest %.1f%% of "
                     "calls  ['e': all layers]",
                     m->st.max_layer, m->st.max_layer_std, total > 0 ? 100.0 * mxe / total : 0.0);
        else
            snprintf(line, sizeof(line),
                     "expert load, all layers  hottest %.1f%% of calls, mean layer std %.1f%%, "
                     "updated %s  ['e': worst layer]",
                     total > 0 ? 100.0 * mxe / total : 0.0, m->st.mean_layer_std, ago);
        put(y++, 1, w, "%s", line);
        ui_off(u, 0, A_DIM);
        ui_on(u, PAIR_CHART, 0);
        for (uint32_t k = 0; k < ncol; k++) {
            int total8 = mx > 0 ? (int)lround(vals[k] / mx * hist_h * 8) : 0;

            if (total8 == 0 && vals[k] > 0)
                total8 = 1;
            for (int r = 0; r < hist_h; r++)
                for (int c = 0; c < cw - (cw > 1); c++)
                    chart_cell(u, y + hist_h - 1 - r, 1 + (int)k * cw + c, total8 - r * 8);
        }
        ui_off(u, PAIR_CHART, 0);
        y += hist_h;
        ui_on(u, 0, A_DIM);
        put(y, 1, 0, "e0");
        snprintf(line, sizeof(line), "e%u%s", E - 1, per > 1 ? "" : "");
        if ((int)(ncol * (uint32_t)cw) > (int)strlen(line) + 3)
            put(y, 1 + (int)(ncol * (uint32_t)cw) - (int)strlen(line) - (cw > 1), 0, "%s", line);
        if (per > 1)
            put(y, 6, 0, "(%u experts per column)", per);
        ui_off(u, 0, A_DIM);
        y++;
        free(vals);
    }
    return y;
}

/* ------------------------------------------------------------------------ */
/* Process table                                                             */
/* ------------------------------------------------------------------------ */

static struct ui *sort_ui;

static int cmp_num(double a, double b)
{
    /* unknown sorts below everything */
    if (isnan(a) && isnan(b))
        return 0;
    if (isnan(a))
        return -1;
    if (isnan(b))
        return 1;
    return (a > b) - (a < b);
}

static int cmp_rows(const void *pa, const void *pb)
{
    const struct tt_proc *a = &sort_ui->s->procs[*(const size_t *)pa];
    const struct tt_proc *b = &sort_ui->s->procs[*(const size_t *)pb];
    int r = 0;

    switch (sort_ui->sort_col) {
    case COL_PID:
        r = (a->pid > b->pid) - (a->pid < b->pid);
        break;
    case COL_USER:
        r = strcmp(a->user, b->user);
        break;
    case COL_DEV:
        r = (a->dev > b->dev) - (a->dev < b->dev);
        break;
    case COL_BUSY:
        r = cmp_num(a->util, b->util);
        break;
    case COL_VRAM:
        r = cmp_num(a->has_vram ? (double)a->vram : NAN, b->has_vram ? (double)b->vram : NAN);
        break;
    case COL_HOST:
        r = cmp_num(a->has_rss ? (double)a->rss : NAN, b->has_rss ? (double)b->rss : NAN);
        break;
    default:
        r = strcmp(a->command, b->command);
        break;
    }
    if (sort_ui->desc)
        r = -r;
    if (r == 0) /* stable order whatever the figures */
        r = (a->pid > b->pid) - (a->pid < b->pid);
    if (r == 0)
        r = (a->dev > b->dev) - (a->dev < b->dev);
    return r;
}

static void sort_rows(struct ui *u)
{
    free(u->order);
    u->order = calloc(u->s->nproc ? u->s->nproc : 1, sizeof(size_t));
    if (!u->order)
        return;
    for (size_t i = 0; i < u->s->nproc; i++)
        u->order[i] = i;
    sort_ui = u;
    if (u->s->nproc > 1)
        qsort(u->order, u->s->nproc, sizeof(size_t), cmp_rows);
    /* keep the selected process selected */
    u->sel = u->s->nproc ? (u->sel < (int)u->s->nproc ? u->sel : (int)u->s->nproc - 1) : 0;
    for (size_t i = 0; i < u->s->nproc; i++) {
        const struct tt_proc *p = &u->s->procs[u->order[i]];

        if (p->pid == u->sel_pid && p->dev == u->sel_dev &&
            (p->pid > 0 || p->peer == u->sel_peer)) {
            u->sel = (int)i;
            break;
        }
    }
}

static void remember_sel(struct ui *u)
{
    if (u->order && u->sel >= 0 && (size_t)u->sel < u->s->nproc) {
        const struct tt_proc *p = &u->s->procs[u->order[u->sel]];

        u->sel_pid = p->pid;
        u->sel_dev = p->dev;
        u->sel_peer = p->peer;
    }
}

/* ------------------------------------------------------------------------ */
/* A process's memory by label (sub-rows under its row)                      */
/* ------------------------------------------------------------------------ */

#define LABEL_LINES 4 /* sub-rows at most per process */

struct label_item {
    char prefix[64]; /* up to and with the first '_' (the model's name), "" none */
    char base[64];   /* the rest less a trailing number */
    long num;        /* the trailing number, -1 none */
    uint64_t bytes;
};

static int cmp_items(const void *pa, const void *pb)
{
    const struct label_item *a = pa, *b = pb;
    int r;

    /* models' labels first, then the others (e.g. libtx-cmd) */
    if (!a->prefix[0] != !b->prefix[0])
        return a->prefix[0] ? -1 : 1;
    r = strcmp(a->prefix, b->prefix);
    if (!r)
        r = strcmp(a->base, b->base);
    return r ? r : (a->num > b->num) - (a->num < b->num);
}

/*
 * The sub-rows of process p in a terminal w columns wide: "└ " then
 * "NAME SIZE" items, grouped by the label prefix up to the first '_' (a
 * model's buffers are "<model>_Weights", "<model>_KV_slot3", ...: the
 * model's name is shown once, "MODEL: "), sorted by name (numbers in
 * order), runs of numbered labels of equal size folded ("KV_slot0-7
 * 8x1.0MiB"), wrapped at w, at most LABEL_LINES lines (the rest: "+N
 * more"). Returns the number of lines written into out[].
 */
static int label_lines(const struct ui *u, const struct tt_proc *p, int w,
                       char out[LABEL_LINES][512])
{
    struct label_item *it;
    size_t n = p->nlabels, ni = 0;
    int indent = w >= 60 ? 8 : 2, nl = 0, col;
    char item[200], sz[32];
    size_t off;

    if (u->no_labels || !n || w < 20)
        return 0;
    it = calloc(n, sizeof(*it));
    if (!it)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = p->labels[i].name, *us = strchr(name, '_');
        const char *nm = us && us > name && us[1] ? us + 1 : name;
        size_t len = strlen(nm), d = len;

        if (nm != name)
            snprintf(it[i].prefix, sizeof(it[i].prefix), "%.*s", (int)(nm - name), name);
        while (d > 0 && nm[d - 1] >= '0' && nm[d - 1] <= '9')
            d--;
        if (d == 0 || d == len || len - d > 9) {
            snprintf(it[i].base, sizeof(it[i].base), "%s", nm);
            it[i].num = -1;
        } else {
            snprintf(it[i].base, sizeof(it[i].base), "%.*s", (int)d, nm);
            it[i].num = strtol(nm + d, NULL, 10);
        }
        it[i].bytes = p->labels[i].bytes;
    }
    qsort(it, n, sizeof(*it), cmp_items);

    off = (size_t)snprintf(out[0], sizeof(out[0]), "%*s%s", indent, "", u->utf8 ? "\u2514 " : "` ");
    col = indent + 2;
    while (ni < n) {
        size_t run = 1, ilen;
        bool group = ni == 0 || strcmp(it[ni].prefix, it[ni - 1].prefix);
        int room;

        while (it[ni].num >= 0 && ni + run < n && it[ni + run].num == it[ni].num + (long)run &&
               it[ni + run].bytes == it[ni].bytes && !strcmp(it[ni + run].base, it[ni].base) &&
               !strcmp(it[ni + run].prefix, it[ni].prefix))
            run++;
        tt_bytes(it[ni].bytes, sz, sizeof(sz));
        /* a new model's name leads its first item: "MODEL: NAME SIZE" */
        ilen = (size_t)snprintf(item, sizeof(item), "%.*s%s", group ? (int)strlen(it[ni].prefix) - 1 : 0,
                                it[ni].prefix, group && it[ni].prefix[0] ? ": " : "");
        if (run > 1)
            ilen += (size_t)snprintf(item + ilen, sizeof(item) - ilen, "%s%ld-%ld %zux%s",
                                     it[ni].base, it[ni].num, it[ni].num + (long)run - 1, run, sz);
        else if (it[ni].num >= 0)
            ilen += (size_t)snprintf(item + ilen, sizeof(item) - ilen, "%s%ld %s", it[ni].base,
                                     it[ni].num, sz);
        else
            ilen += (size_t)snprintf(item + ilen, sizeof(item) - ilen, "%s %s", it[ni].base, sz);
        if (ilen >= sizeof(item))
            ilen = sizeof(item) - 1;
        /* the last line keeps room for "+N more" when more follows */
        room = w - col - ((nl == LABEL_LINES - 1 && ni + run < n) ? 10 : 0);
        if ((int)ilen > room && col > indent + 4) {
            if (nl == LABEL_LINES - 1) {
                snprintf(out[nl] + off, sizeof(out[nl]) - off, "+%zu more", n - ni);
                break;
            }
            nl++;
            off = (size_t)snprintf(out[nl], sizeof(out[nl]), "%*s", indent + 2, "");
            col = indent + 2;
            continue;
        }
        off += (size_t)snprintf(out[nl] + off, sizeof(out[nl]) - off, "%s  ", item);
        if (off >= sizeof(out[nl]))
            off = sizeof(out[nl]) - 1;
        col += (int)ilen + 2;
        ni += run;
    }
    free(it);
    return nl + 1;
}

static int proc_lines(const struct ui *u, const struct tt_proc *p)
{
    char tmp[LABEL_LINES][512];

    return 1 + label_lines(u, p, COLS, tmp);
}

static void draw_procs(struct ui *u, int y, int rows)
{
    char a[32];

    if (y >= LINES - 1)
        return;
    /* header, aligned with the rows' "%7s %-9.9s %3d %6s %9s %9s %s" */
    ui_on(u, 0, A_REVERSE);
    mvhline(y, 0, ' ', COLS);
    for (int c = 0; c < NCOLS; c++) {
        const char *mark = u->desc ? (u->utf8 ? "\u25bc" : "v") : (u->utf8 ? "\u25b2" : "^");
        bool left = c == COL_USER || c == COL_CMD;
        int w = (int)strlen(col_title[c]);
        /* column start and width in the row format */
        static const int start[NCOLS] = {0, 8, 18, 22, 29, 39, 49};
        static const int width[NCOLS] = {7, 9, 3, 6, 9, 9, 0};
        int tx = left ? start[c] : start[c] + width[c] - w;

        put(y, tx, 0, "%s", col_title[c]);
        if (c == u->sort_col)
            put(y, tx + w, 1, "%s", mark);
    }
    ui_off(u, 0, A_REVERSE);
    y++;
    rows--;
    if (u->s->nproc == 0) {
        ui_on(u, 0, A_DIM);
        put(y, 2, 0, "(no process is using a monitored device)");
        ui_off(u, 0, A_DIM);
        return;
    }
    if (rows <= 0)
        return;
    /* scroll so that the selected row (its first line) is on screen, and
     * no room is left empty below the last process */
    if (u->sel < u->top)
        u->top = u->sel;
    for (;;) {
        int need = 1;

        for (int k = u->top; k < u->sel; k++)
            need += proc_lines(u, &u->s->procs[u->order[k]]);
        if (need <= rows || u->top >= u->sel)
            break;
        u->top++;
    }
    while (u->top > 0) {
        int need = 0;

        for (int k = u->top - 1; k < (int)u->s->nproc; k++)
            need += proc_lines(u, &u->s->procs[u->order[k]]);
        if (need > rows)
            break;
        u->top--;
    }
    if (u->top < 0)
        u->top = 0;
    for (int r = 0; rows > 0 && u->top + r < (int)u->s->nproc && y < LINES - 1; r++) {
        const struct tt_proc *p = &u->s->procs[u->order[u->top + r]];
        bool sel = u->top + r == u->sel;
        char line[1024], sub[LABEL_LINES][512];
        char pid[16], busy[16], vram[32], host[32];
        int nsub;

        if (p->pid > 0)
            snprintf(pid, sizeof(pid), "%d", p->pid);
        else
            snprintf(pid, sizeof(pid), "N/A");
        if (isnan(p->util))
            snprintf(busy, sizeof(busy), "N/A");
        else
            snprintf(busy, sizeof(busy), "%.1f", p->util);
        snprintf(vram, sizeof(vram), "%s", p->has_vram ? tt_bytes(p->vram, a, sizeof(a)) : "N/A");
        snprintf(host, sizeof(host), "%s", p->has_rss ? tt_bytes(p->rss, a, sizeof(a)) : "N/A");
        snprintf(line, sizeof(line), "%7s %-9.9s %3d %6s %9s %9s %s", pid,
                 p->user[0] ? p->user : "N/A", p->dev, busy, vram, host, p->command);
        if (sel)
            ui_on(u, 0, A_REVERSE);
        else if (p->unreadable)
            ui_on(u, 0, A_DIM);
        mvhline(y, 0, ' ', COLS);
        put(y, 0, 0, "%s", line);
        if (sel)
            ui_off(u, 0, A_REVERSE);
        else if (p->unreadable)
            ui_off(u, 0, A_DIM);
        y++;
        rows--;
        nsub = label_lines(u, p, COLS, sub);
        ui_on(u, 0, A_DIM);
        for (int k = 0; k < nsub && rows > 0 && y < LINES - 1; k++, y++, rows--)
            put(y, 0, 0, "%s", sub[k]);
        ui_off(u, 0, A_DIM);
    }
}

/* ------------------------------------------------------------------------ */
/* Frame                                                                     */
/* ------------------------------------------------------------------------ */

static void draw(struct ui *u)
{
    struct tt_state *s = u->s;
    int avail = LINES - 2, y = 1, chart_h = 0, hist_h = 0, base, nmin;
    bool counters = true;
    char hdr[256];

    erase();
    if (COLS < 40 || LINES < 8) {
        put(0, 0, 0, "tx-top: terminal too small (%dx%d, need 40x8)", COLS, LINES);
        refresh();
        return;
    }
    /* title */
    ui_on(u, 0, A_REVERSE);
    mvhline(0, 0, ' ', COLS);
    snprintf(hdr, sizeof(hdr), " tx-top  %zu device%s  %zu process%s  %zu model%s  every %.1fs",
             s->ndev, s->ndev == 1 ? "" : "s", s->nproc, s->nproc == 1 ? "" : "es", s->nmodels,
             s->nmodels == 1 ? "" : "s", s->interval);
    put(0, 0, 0, "%s", hdr);
    if (!s->root && s->unreadable)
        put(0, COLS - 28 > (int)strlen(hdr) ? COLS - 28 : (int)strlen(hdr) + 1, 0,
            "(not root: some N/A) ");
    ui_off(u, 0, A_REVERSE);

    /* layout */
    /* room for up to 4 processes, with their memory-by-label rows */
    nmin = 0;
    for (size_t k = 0; k < s->nproc && k < 4; k++)
        nmin += proc_lines(u, &s->procs[k]);
    if (!nmin)
        nmin = 1;
    base = (int)s->ndev * 3 + (int)s->nmodels + 1 + nmin;
    if (base > avail) {
        counters = false;
        base -= (int)s->ndev;
    }
    for (int h = 8; h >= 2; h--) {
        int hm = h > 6 ? 6 : h;

        if (base + (int)s->ndev * (h + 1) + (int)s->nmodels * (hm + 2) <= avail) {
            chart_h = h;
            hist_h = hm;
            break;
        }
    }
    if (!chart_h)
        for (int hm = 6; hm >= 2; hm--)
            if (base + (int)s->nmodels * (hm + 2) <= avail) {
                hist_h = hm;
                break;
            }

    for (size_t i = 0; i < s->ndev && y < LINES - 1; i++)
        y = draw_device(u, y, i, chart_h, counters);
    for (size_t i = 0; i < s->nmodels && y < LINES - 1; i++)
        y = draw_model(u, y, &s->models[i], hist_h);
    draw_procs(u, y, LINES - 1 - y);

    /* footer */
    ui_on(u, 0, A_REVERSE);
    mvhline(LINES - 1, 0, ' ', COLS);
    if (u->confirm_pid > 0) {
        ui_on(u, 0, A_BOLD);
        put(LINES - 1, 0, 0, " Send SIGTERM to PID %d (%s)? [y/N] ", u->confirm_pid,
            u->confirm_cmd);
        ui_off(u, 0, A_BOLD);
    } else if (u->msg[0] && tt_now_ns() < u->msg_until) {
        put(LINES - 1, 0, 0, " %s", u->msg);
    } else {
        put(LINES - 1, 0, 0, " q:quit  %s:select  k:kill  F6/<>:sort  r:reverse  e:expert view  m:memory",
            u->utf8 ? "\u2191\u2193" : "up/down");
    }
    ui_off(u, 0, A_REVERSE);
    refresh();
}

static void ask_kill(struct ui *u)
{
    const struct tt_proc *p;

    if (!u->order || u->sel < 0 || (size_t)u->sel >= u->s->nproc) {
        set_msg(u, "no process selected");
        return;
    }
    p = &u->s->procs[u->order[u->sel]];
    if (p->pid <= 0) {
        set_msg(u, "this row has no known PID");
        return;
    }
    u->confirm_pid = p->pid;
    snprintf(u->confirm_cmd, sizeof(u->confirm_cmd), "%.40s", p->command);
}

static void do_kill(struct ui *u)
{
    int pid = u->confirm_pid;

    u->confirm_pid = 0;
    if (kill(pid, SIGTERM) == 0)
        set_msg(u, "SIGTERM sent to PID %d", pid);
    else
        set_msg(u, "cannot signal PID %d: %s", pid, strerror(errno));
}

/* Returns true to quit. */
static bool handle_key(struct ui *u, int ch)
{
    int n = (int)u->s->nproc, page = LINES / 2 > 1 ? LINES / 2 : 1;

    if (u->confirm_pid > 0) {
        if (ch == 'y' || ch == 'Y')
            do_kill(u);
        else {
            u->confirm_pid = 0;
            set_msg(u, "not killed");
        }
        return false;
    }
    switch (ch) {
    case 'q':
    case 'Q':
    case KEY_F(10):
        return true;
    case KEY_UP:
        u->sel = u->sel > 0 ? u->sel - 1 : 0;
        break;
    case KEY_DOWN:
        u->sel = u->sel + 1 < n ? u->sel + 1 : (n ? n - 1 : 0);
        break;
    case KEY_PPAGE:
        u->sel = u->sel > page ? u->sel - page : 0;
        break;
    case KEY_NPAGE:
        u->sel = u->sel + page < n ? u->sel + page : (n ? n - 1 : 0);
        break;
    case KEY_HOME:
        u->sel = 0;
        break;
    case KEY_END:
        u->sel = n ? n - 1 : 0;
        break;
    case KEY_F(6):
    case '>':
    case '.':
        u->sort_col = (u->sort_col + 1) % NCOLS;
        u->desc = u->sort_col != COL_USER && u->sort_col != COL_CMD && u->sort_col != COL_PID &&
                  u->sort_col != COL_DEV;
        set_msg(u, "sorted by %s", col_title[u->sort_col]);
        break;
    case '<':
    case ',':
        u->sort_col = (u->sort_col + NCOLS - 1) % NCOLS;
        u->desc = u->sort_col != COL_USER && u->sort_col != COL_CMD && u->sort_col != COL_PID &&
                  u->sort_col != COL_DEV;
        set_msg(u, "sorted by %s", col_title[u->sort_col]);
        break;
    case 'r':
    case 'R':
        u->desc = !u->desc;
        break;
    case 'k':
    case 'K':
        ask_kill(u);
        return false;
    case 'e':
    case 'E':
        u->hot_layer = !u->hot_layer;
        break;
    case 'm':
    case 'M':
        u->no_labels = !u->no_labels;
        set_msg(u, "memory by label %s", u->no_labels ? "hidden" : "shown");
        break;
    default:
        return false;
    }
    remember_sel(u);
    sort_rows(u);
    remember_sel(u);
    return false;
}

int tt_screen(struct tt_state *s, unsigned long max_refreshes)
{
    struct ui u;
    unsigned long refreshes = 0;
    uint64_t interval = (uint64_t)(s->interval * 1e9), next;
    const char *nc = getenv("NO_COLOR");
    SCREEN *scr;

    memset(&u, 0, sizeof(u));
    u.s = s;
    u.sort_col = COL_BUSY;
    u.desc = true;
    u.sel_pid = -1;
    setlocale(LC_ALL, "");
    u.utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8");
    /* newterm, not initscr: an unknown terminal is an error message and a
     * status, not an exit from inside the library */
    scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        const char *term = getenv("TERM");

        fprintf(stderr,
                "tx-top: cannot use the terminal type '%s' (no terminfo entry?); use --json "
                "or -L\n",
                term ? term : "");
        return 1;
    }
    set_term(scr);
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    set_escdelay(25);
    if (has_colors() && !(nc && *nc)) {
        start_color();
        use_default_colors();
        init_pair(PAIR_GOOD, COLOR_GREEN, -1);
        init_pair(PAIR_WARN, COLOR_YELLOW, -1);
        init_pair(PAIR_BAD, COLOR_RED, -1);
        init_pair(PAIR_CHART, COLOR_CYAN, -1);
        init_pair(PAIR_DIM, COLOR_WHITE, -1);
        u.colors = true;
    }
    sort_rows(&u);
    draw(&u);
    next = tt_now_ns() + interval;
    while (!tt_stop) {
        uint64_t now = tt_now_ns();
        int ch;

        if (now >= next) {
            remember_sel(&u);
            tt_sample(s);
            sort_rows(&u);
            refreshes++;
            draw(&u);
            if (max_refreshes && refreshes >= max_refreshes)
                break;
            next += interval;
            if (next <= now)
                next = now + interval;
            continue;
        }
        timeout((int)((next - now + 999999) / 1000000));
        ch = getch();
        if (ch == ERR)
            continue;
        if (ch == KEY_RESIZE) {
            draw(&u);
            continue;
        }
        if (handle_key(&u, ch))
            break;
        draw(&u);
    }
    endwin();
    delscreen(scr);
    free(u.order);
    return 0;
}
