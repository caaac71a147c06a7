/* SPDX-License-Identifier: MIT */
/*
 * tuna report --html: one self-contained page (inline SVG and an inline
 * script, no network, no server; docs/tuna.md): the header times, the
 * timeline (time axis, load / generation phases, zoom, pan, focus, hover
 * details), the roofline, the sortable command table, per-layer time, the
 * expert heatmaps, utilisation and device memory over the run.
 *
 * Everything is drawn here for the whole run, so the page reads without
 * script; the script (report.js) re-sorts the table and redraws the
 * timeline for another view, starting from the view in the URL fragment
 * (#sort=energy&focus=generation, #view=120-340 in ms).
 */
#include "report.h"
#include "svg_axis.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gen_span(const struct span *sp)
{
    return !strcmp(sp->name, "prefill") || !strcmp(sp->name, "decode step");
}

/* Widens [t0, t1] of t to [ts, end] (any: t holds a range already). */
static void widen(struct run_times *t, int *any, double ts, double end)
{
    if (!*any || ts < t->t0)
        t->t0 = ts;
    if (!*any || end > t->t1)
        t->t1 = end;
    *any = 1;
}

void run_times(const struct cmd *cmds, int ncmd, const struct span *sp, int nsp,
               struct run_times *t)
{
    memset(t, 0, sizeof(*t));
    int any = 0;
    for (int i = 0; i < ncmd; i++)
        widen(t, &any, cmds[i].ts, cmds[i].ts + cmds[i].dur);
    for (int i = 0; i < nsp; i++) {
        widen(t, &any, sp[i].ts, sp[i].ts + sp[i].dur);
        if (gen_span(&sp[i])) {
            if (!t->have_gen || sp[i].ts < t->gen0)
                t->gen0 = sp[i].ts;
            if (!t->have_gen || sp[i].ts + sp[i].dur > t->gen1)
                t->gen1 = sp[i].ts + sp[i].dur;
            t->have_gen = 1;
        }
    }
}

static unsigned op_color(const char *op)
{
    unsigned h = 2166136261u;
    for (; *op; op++)
        h = (h ^ (unsigned char)*op) * 16777619u;
    return (h & 0x7f7f7f) | 0x303030;
}

static void html_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

static double pctl(double *v, int n, double q)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    int k = (int)ceil(q * n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* Width of the timeline's drawing area (px). */
#define TL_W 1200.0

/* The timeline over the whole run; every slice carries its time
 * (data-t, data-d: us of the trace) for the script's redraws. */
static void html_timeline(FILE *f, const struct report *r)
{
    const struct run_times *t = &r->t;
    double a = t->t0, span = t->t1 > t->t0 ? t->t1 - t->t0 : 1;
#define TX(x) (10 + ((x)-a) / span * TL_W)
#define TW(d) ((d) / span * TL_W > 0.5 ? (d) / span * TL_W : 0.5)
    fprintf(f, "<div id=\"timeline-controls\"><button data-view=\"all\">whole run</button> "
               "<button data-view=\"generation\">generation</button> <button "
               "data-zoom=\"0.5\">zoom in</button> <button data-zoom=\"2\">zoom out</button> "
               "<button data-pan=\"-0.5\">&larr; pan</button> <button data-pan=\"0.5\">pan "
               "&rarr;</button> <span id=\"timeline-range\">view: the whole run</span> "
               "<br><span class=\"hint\">(wheel: zoom at the pointer; drag: pan; the view is kept "
               "in the address, e.g. <code>#focus=generation</code> or "
               "<code>#view=120-340</code> ms)</span></div>\n");
    fprintf(f,
            "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
            "height=\"150\" data-t0=\"%.3f\" data-t1=\"%.3f\" data-gen0=\"%.3f\" "
            "data-gen1=\"%.3f\" data-w=\"%.0f\">\n<rect x=\"0\" y=\"0\" width=\"%.0f\" "
            "height=\"150\" fill=\"#f4f4f4\"/>\n<g class=\"slices\">\n",
            TL_W + 20, t->t0, t->t1, t->have_gen ? t->gen0 : t->t0, t->have_gen ? t->gen1 : t->t1,
            TL_W, TL_W + 20);
    /* phases: model load (before the first prompt) and generation */
    if (t->have_gen) {
        if (t->gen0 > t->t0)
            fprintf(f,
                    "<rect class=\"phase-load\" data-t=\"%.3f\" data-d=\"%.3f\" x=\"%.1f\" "
                    "y=\"106\" width=\"%.1f\" height=\"8\" fill=\"#e8b47c\"><title>load "
                    "phase: %.1f ms</title></rect>\n",
                    t->t0, t->gen0 - t->t0, TX(t->t0), TW(t->gen0 - t->t0),
                    (t->gen0 - t->t0) / 1e3);
        fprintf(f,
                "<rect class=\"phase-generation\" data-t=\"%.3f\" data-d=\"%.3f\" "
                "x=\"%.1f\" y=\"106\" width=\"%.1f\" height=\"8\" fill=\"#7ca4e8\"><title>"
                "generation phase (prompt and decode): %.1f ms</title></rect>\n",
                t->gen0, t->gen1 - t->gen0, TX(t->gen0), TW(t->gen1 - t->gen0),
                (t->gen1 - t->gen0) / 1e3);
    }
    for (int i = 0; i < r->nsp; i++) {
        const struct span *s = &r->spans[i];
        fprintf(f,
                "<rect class=\"span\" data-t=\"%.3f\" data-d=\"%.3f\" x=\"%.2f\" y=\"18\" "
                "width=\"%.2f\" height=\"24\" fill=\"#4a7\" stroke=\"#fff\" "
                "stroke-width=\"0.5\"><title>",
                s->ts, s->dur, TX(s->ts), TW(s->dur));
        html_escape(f, s->name);
        fprintf(f, " (host): %.1f us</title></rect>\n", s->dur);
    }
    for (int i = 0; i < r->ncmd; i++) {
        const struct cmd *c = &r->cmds[i];
        fprintf(f,
                "<rect class=\"cmd\" data-t=\"%.3f\" data-d=\"%.3f\" x=\"%.2f\" y=\"68\" "
                "width=\"%.2f\" height=\"24\" fill=\"#%06x\"><title>",
                c->ts, c->dur, TX(c->ts), TW(c->dur), op_color(c->op));
        html_escape(f, c->name);
        fprintf(f, " (%s, %s): %.1f us, %.0f bytes, %.0f MACs, %.2f uJ, job %d</title></rect>\n",
                c->op, c->phase, c->dur, c->bytes, c->flops / 2, c->energy / 1e6, c->job);
    }
    fprintf(f,
            "</g>\n<text x=\"12\" y=\"14\">host</text><text x=\"12\" y=\"64\">device "
            "commands</text><text class=\"label-load\" x=\"%.1f\" y=\"104\" "
            "font-size=\"10\" fill=\"#964\">load</text><text class=\"label-generation\" "
            "x=\"%.1f\" y=\"104\" font-size=\"10\" fill=\"#469\">generation</text>\n",
            TX(t->t0) + 2, TX(t->have_gen ? t->gen0 : t->t0) + 2);
    svg_time_axis(f, 10, TL_W, 120, a, span, t->t0);
    fprintf(f,
            "<text x=\"%.0f\" y=\"146\" font-size=\"10\" text-anchor=\"end\">time since "
            "the first event</text></svg>\n<div id=\"timeline-detail\">hover a slice for its "
            "details</div>\n",
            TL_W + 10);
#undef TX
#undef TW
}

/* The roofline: log-log axes with decade ticks, the device's ceilings and
 * a legend per command type. */
static void html_roofline(FILE *f, const struct group *gr, int ngr, double pbw, double pfl)
{
    double xlo = -2, xhi = 3, ymax = pfl > 0 ? ceil(log10(pfl)) + 1 : 2, ymin = ymax - 6;
    double L = 70, T = 10, RW = 560, RH = 320;
#define RX(ai) (L + (log10(ai) - xlo) / (xhi - xlo) * RW)
#define RY(g) (T + (ymax - log10(g)) / (ymax - ymin) * RH)
    fprintf(f,
            "<svg id=\"roofline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" "
            "height=\"380\">\n<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" "
            "fill=\"#f4f4f4\" stroke=\"#333\"/>\n",
            L, T, RW, RH);
    svg_log_ticks(f, false, xlo, xhi, T + RH, L, L + RW, "");
    svg_log_ticks(f, true, ymin, ymax, L, T + RH, T, "");
    fprintf(f,
            "<text class=\"x-label\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">arithmetic "
            "intensity (FLOP/byte, log)</text>\n<text class=\"y-label\" x=\"14\" y=\"%.0f\" "
            "transform=\"rotate(-90 14 %.0f)\" text-anchor=\"middle\">GFLOP/s (log)</text>\n",
            L + RW / 2, T + RH + 34, T + RH / 2, T + RH / 2);
    if (pbw > 0 && pfl > 0) {
        double ridge = pfl / pbw, x0 = pow(10, xlo);
        if (log10(x0 * pbw) < ymin)
            x0 = pow(10, ymin) / pbw;
        fprintf(f,
                "<polyline class=\"ceiling\" fill=\"none\" stroke=\"#c33\" stroke-width=\"2\" "
                "points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>\n",
                RX(x0), RY(x0 * pbw), RX(ridge), RY(pfl), RX(pow(10, xhi)), RY(pfl));
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" fill=\"#c33\" font-size=\"11\">compute ceiling "
                "%.2f GFLOP/s</text>\n<text x=\"%.1f\" y=\"%.1f\" fill=\"#c33\" "
                "font-size=\"11\" transform=\"rotate(-%.1f %.1f %.1f)\">memory ceiling %.2f "
                "GB/s</text>\n",
                RX(ridge) + 4, RY(pfl) - 4, pfl, RX(x0) + 6, RY(x0 * pbw) - 6,
                atan2(RY(x0 * pbw) - RY(pfl), RX(ridge) - RX(x0)) * 180 / M_PI, RX(x0) + 6,
                RY(x0 * pbw) - 6, pbw);
    }
    for (int g = 0; g < ngr; g++) {
        if (gr[g].bytes <= 0 || gr[g].flops <= 0 || gr[g].time <= 0)
            continue;
        double ai = gr[g].flops / gr[g].bytes, gf = gr[g].flops / (gr[g].time * 1e3);
        if (log10(ai) < xlo || log10(ai) > xhi || log10(gf) < ymin || log10(gf) > ymax)
            continue;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#%06x\"><title>", RX(ai), RY(gf),
                op_color(gr[g].op));
        html_escape(f, gr[g].name);
        fprintf(f, " (%s) %.2f flop/B, %.2f GFLOP/s, %s</title></circle>\n", gr[g].phase, ai, gf,
                gr[g].cls);
    }
    /* legend: one entry per command type */
    int row = 0;
    fprintf(f, "<g class=\"legend\"><text x=\"650\" y=\"20\" font-weight=\"bold\">command "
               "type</text>\n");
    for (int g = 0; g < ngr; g++) {
        int seen = 0;
        for (int k = 0; k < g && !seen; k++)
            seen = !strcmp(gr[k].op, gr[g].op);
        if (seen || row >= 20)
            continue;
        fprintf(f,
                "<circle cx=\"656\" cy=\"%d\" r=\"4\" fill=\"#%06x\"/><text x=\"666\" "
                "y=\"%d\" font-size=\"11\">",
                36 + 16 * row, op_color(gr[g].op), 40 + 16 * row);
        html_escape(f, gr[g].op);
        fprintf(f, "</text>\n");
        row++;
    }
    fprintf(f, "</g></svg>\n");
#undef RX
#undef RY
}

/* The table of command groups, in order of total time; every cell has its
 * value (data-v) for the script's sort by any column. */
static void html_table(FILE *f, const struct cmd *cmds, int ncmd, const struct group *gr, int ngr)
{
    double *d = malloc(sizeof(double) * (size_t)(ncmd ? ncmd : 1));
    if (!d) {
        fprintf(f, "<p>(out of memory for the command table)</p>\n");
        return;
    }
    static const char *const col[][2] = {
        {"name", "command"}, {"phase", "phase"},    {"count", "count"},      {"total", "total ms"},
        {"mean", "mean us"}, {"p99", "p99 us"},     {"bytes", "bytes"},      {"macs", "MACs"},
        {"gbps", "GB/s"},    {"gflops", "GFLOP/s"}, {"energy", "energy uJ"}, {"bound", "bound"}};
    fprintf(f, "<table id=\"commands\" border=\"1\" cellspacing=\"0\" cellpadding=\"3\">\n"
               "<thead><tr>");
    for (size_t c = 0; c < sizeof(col) / sizeof(col[0]); c++)
        fprintf(f, "<th data-key=\"%s\"%s>%s</th>", col[c][0],
                !strcmp(col[c][0], "total") ? " class=\"sorted-desc\" aria-sort=\"descending\""
                                            : "",
                col[c][1]);
    fprintf(f, "</tr></thead>\n<tbody>\n");
    for (int g = 0; g < ngr; g++) {
        int n = 0;
        for (int i = 0; i < ncmd; i++)
            if (!strcmp(cmds[i].name, gr[g].name) && !strcmp(cmds[i].phase, gr[g].phase))
                d[n++] = cmds[i].dur;
        double p99 = pctl(d, n, 0.99), t = gr[g].time;
        double gbps = t > 0 ? gr[g].bytes / (t * 1e3) : 0,
               gfl = t > 0 ? gr[g].flops / (t * 1e3) : 0;
        fprintf(f, "<tr><td>");
        html_escape(f, gr[g].name);
        fprintf(f,
                "</td><td>%s</td><td data-v=\"%ld\">%ld</td><td data-v=\"%.3f\">%.3f</td>"
                "<td data-v=\"%.3f\">%.1f</td><td data-v=\"%.3f\">%.1f</td>"
                "<td data-v=\"%.0f\">%.0f</td><td data-v=\"%.0f\">%.0f</td>"
                "<td data-v=\"%.6g\">%.2f</td><td data-v=\"%.6g\">%.2f</td>"
                "<td data-v=\"%.6g\">%.2f</td><td>%s</td></tr>\n",
                gr[g].phase, gr[g].count, gr[g].count, t, t / 1e3,
                gr[g].count ? t / gr[g].count : 0, gr[g].count ? t / gr[g].count : 0, p99, p99,
                gr[g].bytes, gr[g].bytes, gr[g].flops / 2, gr[g].flops / 2, gbps, gbps, gfl, gfl,
                gr[g].energy / 1e6, gr[g].energy / 1e6, gr[g].cls);
    }
    fprintf(f, "</tbody></table>\n");
    free(d);
}

/* One heatmap: rows the MoE layers, columns the experts; cell (l, e) is
 * coloured by val(l, e) in [0, 1] (NAN: unused, grey). */
static void html_heatmap(FILE *f, const char *id, const struct xmodel *x, int which)
{
    int ne = x->n_experts, nl = x->n_layers;
    double cw = ne > 0 ? 1100.0 / ne : 10, ch = 18;
    cw = cw > 24 ? 24 : cw < 3 ? 3 : cw;
    double L = 80, T = 22, W = cw * ne, H = ch * nl;
    fprintf(f,
            "<svg id=\"%s\" class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"%.0f\" height=\"%.0f\" data-layers=\"%d\" data-experts=\"%d\">\n"
            "<text x=\"4\" y=\"14\" font-size=\"11\" font-weight=\"bold\">%s</text>\n",
            id, L + W + 20 > 480 ? L + W + 20 : 480, T + H + 48, nl, ne,
            which == 0 ? "selections per MoE layer and expert" : "expert cache hit rate");
    double *rowmax = calloc((size_t)(nl ? nl : 1), sizeof(double));
    for (int l = 0; l < nl && rowmax; l++)
        for (int e = 0; e < ne; e++)
            if (x->sel[(size_t)l * ne + e] > rowmax[l])
                rowmax[l] = x->sel[(size_t)l * ne + e];
    for (int l = 0; l < nl; l++) {
        double sum = 0;
        for (int e = 0; e < ne; e++)
            sum += x->sel[(size_t)l * ne + e];
        fprintf(f,
                "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">layers.%d"
                "</text>\n",
                L - 4, T + ch * l + ch * 0.7, x->layer[l]);
        for (int e = 0; e < ne; e++) {
            size_t k = (size_t)l * ne + e;
            double s = x->sel[k], h = x->hit ? x->hit[k] : 0, m = x->miss ? x->miss[k] : 0;
            unsigned rgb;
            if (which == 0) { /* selections: white to dark blue, share of the layer's max */
                double v = rowmax && rowmax[l] > 0 ? s / rowmax[l] : 0;
                rgb = (unsigned)(255 - 215 * v) << 16 | (unsigned)(255 - 175 * v) << 8 |
                      (unsigned)(255 - 75 * v);
            } else if (h + m <= 0) {
                rgb = 0xdddddd; /* never used: grey */
            } else {            /* hit rate: red (all misses) to green (all hits) */
                double v = h / (h + m);
                rgb = (unsigned)(220 - 170 * v) << 16 | (unsigned)(60 + 120 * v) << 8 | 60u;
            }
            fprintf(f,
                    "<rect class=\"cell\" data-layer=\"%d\" data-expert=\"%d\" "
                    "data-sel=\"%.0f\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                    "height=\"%.1f\" fill=\"#%06x\" stroke=\"#fff\" stroke-width=\"0.5\">"
                    "<title>layers.%d expert %d: %.0f selections (%.1f%% of the layer's)",
                    x->layer[l], e, s, L + cw * e, T + ch * l, cw, ch, rgb, x->layer[l], e, s,
                    sum > 0 ? 100.0 * s / sum : 0.0);
            if (x->hit)
                fprintf(f, "; expert cache: %.0f hits, %.0f misses", h, m);
            fprintf(f, "</title></rect>\n");
        }
    }
    int step = ne <= 16 ? 1 : ne <= 64 ? 8 : 32;
    for (int e = 0; e < ne; e += step)
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%d"
                "</text>\n",
                L + cw * e + cw / 2, T + H + 12, e);
    fprintf(f,
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"11\">expert"
            "</text>\n<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"end\">MoE "
            "layer</text>\n",
            L + W / 2, T + H + 26, L - 4, T + H + 26);
    fprintf(f, "<text x=\"4\" y=\"%.0f\" font-size=\"11\">%s</text></svg>\n", T + H + 42,
            which == 0 ? "white = never chosen, dark blue = the layer's most chosen expert"
                       : "green = all uses hits, red = all misses, grey = never used");
    free(rowmax);
}

/* The expert heatmaps of each MoE model of the trace. */
static void html_experts(FILE *f, const struct xmodel *xm, int nxm)
{
    for (int i = 0; i < nxm; i++) {
        const struct xmodel *x = &xm[i];
        double tot = 0, h = 0, m = 0;
        for (size_t k = 0; k < (size_t)x->n_layers * x->n_experts; k++) {
            tot += x->sel[k];
            h += x->hit ? x->hit[k] : 0;
            m += x->miss ? x->miss[k] : 0;
        }
        char sfx[16] = "", id[48];
        if (i) /* the first model's ids plain, the others' numbered */
            snprintf(sfx, sizeof(sfx), "-%d", i + 1);
        fprintf(f, "<h2>Experts: ");
        html_escape(f, x->model);
        fprintf(f,
                "</h2>\n<p id=\"experts-summary%s\">%d MoE layers x %d experts, top-%d: "
                "%.0f selections (rows routed to an expert, from the device's MOE_ROUTE "
                "counters).",
                sfx, x->n_layers, x->n_experts, x->top_k, tot);
        if (x->hit)
            fprintf(f,
                    " Runtime expert cache: %.0f hits, %.0f misses (hit rate %.1f%%); a "
                    "use is an expert a pass routes rows to.",
                    h, m, h + m > 0 ? 100.0 * h / (h + m) : 0.0);
        else
            fprintf(f, " The model ran without the runtime's expert cache (no hit/miss map).");
        fprintf(f, "</p>\n");
        snprintf(id, sizeof(id), "expert-heatmap%s", sfx);
        html_heatmap(f, id, x, 0);
        snprintf(id, sizeof(id), "expert-cache-heatmap%s", sfx);
        if (x->hit)
            html_heatmap(f, id, x, 1);
    }
}

/* A curve panel: kind's samples over the run, own y scale with ticks. */
static void html_curve(FILE *f, const struct report *r, int kind, const char *id, const char *label,
                       const char *stroke)
{
    double lo = 0, hi = kind == SM_BUSY ? 100 : 0;
    int n = 0;
    for (int i = 0; i < r->nsm; i++)
        if (r->samples[i].kind == kind) {
            n++;
            if (r->samples[i].v > hi)
                hi = r->samples[i].v;
        }
    if (!n)
        return;
    double unit = kind == SM_BUSY ? 1 : hi >= 1048576.0 ? 1048576.0 : 1024.0;
    const char *uname = kind == SM_BUSY ? "%" : unit > 1024 ? " MiB" : " KiB";
    if (hi <= lo)
        hi = lo + 1;
    double span = r->t.t1 > r->t.t0 ? r->t.t1 - r->t.t0 : 1, H = 120, T = 10;
    fprintf(f,
            "<svg id=\"%s\" class=\"curve\" xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"1300\" height=\"%.0f\" data-axis-y=\"%.0f\">\n<clipPath id=\"%s-clip\">"
            "<rect x=\"70\" y=\"0\" width=\"1200\" height=\"%.0f\"/></clipPath>\n<rect "
            "x=\"70\" y=\"%.0f\" width=\"1200\" height=\"%.0f\" fill=\"#f4f4f4\"/>\n",
            id, T + H + 36, T + H + 4, id, T + H + 4, T, H);
    for (int k = 0; k <= 4; k++) {
        double v = lo + (hi - lo) * k / 4, y = T + H - H * k / 4;
        fprintf(f,
                "<line x1=\"66\" y1=\"%.1f\" x2=\"70\" y2=\"%.1f\" stroke=\"#333\"/><text "
                "x=\"64\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.4g%s</text>\n",
                y, y, y + 3, v / unit, uname);
    }
    /* the samples' times (data-ts) for the script, which keeps the curves
     * in the timeline's view */
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" clip-path=\"url(#%s-clip)\" data-ts=\"",
            stroke, id);
    for (int i = 0; i < r->nsm; i++)
        if (r->samples[i].kind == kind)
            fprintf(f, "%.3f ", r->samples[i].ts);
    fprintf(f, "\" points=\"");
    for (int i = 0; i < r->nsm; i++)
        if (r->samples[i].kind == kind)
            fprintf(f, "%.1f,%.1f ", 70 + (r->samples[i].ts - r->t.t0) / span * 1200,
                    T + H - (r->samples[i].v - lo) / (hi - lo) * H);
    fprintf(f, "\"/>\n<text x=\"76\" y=\"%.0f\" font-size=\"11\" fill=\"%s\">%s</text>\n", T + 12,
            stroke, label);
    svg_time_axis(f, 70, 1200, T + H + 4, r->t.t0, span, r->t.t0);
    fprintf(f, "</svg>\n");
}

static void html_header(FILE *f, const struct report *r)
{
    const struct run_times *t = &r->t;
    double wall = t->t1 - t->t0;
    fprintf(f,
            "<p id=\"header-times\" data-wall-us=\"%.1f\" data-command-us=\"%.1f\" "
            "data-job-us=\"%.1f\"><b>wall time %.1f ms</b> (first to last event of the "
            "trace: model load, prompt and generation, as the host saw them); <b>device "
            "time %.1f ms</b> of commands in %d jobs (%.1f ms of jobs), the figures of "
            "<code>tuna report</code>'s text (%.1f us of commands, %.1f us of jobs). The "
            "difference, %.1f ms, is host time: loading and converting weights, "
            "tokenisation, building passes and the gaps between jobs.",
            wall, r->cmd_us, r->job_us, wall / 1e3, r->cmd_us / 1e3, r->njob, r->job_us / 1e3,
            r->cmd_us, r->job_us, (wall - r->job_us) / 1e3);
    if (t->have_gen)
        fprintf(f,
                " Generation (prompt and decode) took %.1f ms of it; the load before it "
                "%.1f ms.",
                (t->gen1 - t->gen0) / 1e3, (t->gen0 - t->t0) / 1e3);
    if (r->energy_pj > 0)
        fprintf(f, " Energy of the commands: %.3f mJ (the device's power model).",
                r->energy_pj / 1e9);
    fprintf(f, " %d commands; peaks %.2f GB/s, %.2f GFLOP/s.</p>\n", r->ncmd, r->peak_bw,
            r->peak_fl);
}

static void html_page(FILE *f, const struct report *r)
{
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tuna report</title>"
               "<style>body{font:13px sans-serif;background:#fff;color:#111}"
               "h2{font-size:15px}table{border-collapse:collapse;font-size:12px}"
               "td{text-align:right}td:first-child,td:nth-child(2){text-align:left}"
               "th[data-key]{cursor:pointer;background:#eee}th.sorted-desc::after{content:' "
               "\\25BC'}th.sorted-asc::after{content:' \\25B2'}#timeline{cursor:grab}"
               "#timeline-detail{font:12px monospace;min-height:16px;margin:2px 0 8px}"
               ".hint{color:#666;font-size:11px}</style></head><body>\n"
               "<section id=\"view-header\"><h1>tuna report</h1>\n");
    html_header(f, r);
    fprintf(f, "</section>\n<section id=\"view-timeline\"><h2>Timeline</h2>\n");
    html_timeline(f, r);
    fprintf(f, "</section>\n<section id=\"view-roofline\"><h2>Roofline</h2>\n");
    html_roofline(f, r->groups, r->ngr, r->peak_bw, r->peak_fl);
    fprintf(f, "</section>\n<section id=\"view-commands\"><h2>Commands</h2>\n<p>Click a column "
               "to sort by it (again: the other way); the order is kept in the address "
               "(<code>#sort=energy</code>, <code>&amp;dir=asc</code>).</p>\n");
    html_table(f, r->cmds, r->ncmd, r->groups, r->ngr);
    fprintf(f, "</section>\n");
    if (r->nly) {
        double lmax = 0;
        for (int k = 0; k < r->nly; k++)
            lmax = r->layers[k].time > lmax ? r->layers[k].time : lmax;
        fprintf(f, "<section id=\"view-layers\"><h2>Per layer</h2>\n<table id=\"layers\" "
                   "border=\"1\" cellspacing=\"0\" cellpadding=\"3\"><tr><th>layer</th><th>time "
                   "ms</th><th>share</th><th>commands</th><th>energy uJ</th><th></th></tr>\n");
        for (int k = 0; k < r->nly; k++)
            fprintf(f,
                    "<tr><td>%s</td><td>%.3f</td><td>%.1f%%</td><td>%ld</td><td>%.2f</td>"
                    "<td style=\"text-align:left\"><svg width=\"300\" height=\"10\"><rect "
                    "width=\"%.1f\" height=\"10\" fill=\"#36c\"/></svg></td></tr>\n",
                    r->layers[k].name, r->layers[k].time / 1e3,
                    r->cmd_us > 0 ? 100.0 * r->layers[k].time / r->cmd_us : 0, r->layers[k].count,
                    r->layers[k].energy / 1e6, lmax > 0 ? 300 * r->layers[k].time / lmax : 0);
        fprintf(f, "</table>\n</section>\n");
    }
    if (r->nxm) {
        fprintf(f, "<section id=\"view-experts\">\n");
        html_experts(f, r->xm, r->nxm);
        fprintf(f, "</section>\n");
    }
    fprintf(f, "<section id=\"view-curves\"><h2>Utilisation and device memory</h2>\n<p>Device "
               "memory in use after each job and the KV cache the sessions fill (each on its "
               "own scale): the runtime allocates its buffers once at load, so device memory "
               "is flat through generation; the KV cache grows by one position per decode "
               "step and falls when a session ends, the sawtooth of a healthy run of several "
               "requests. The curves follow the timeline's view.</p>\n<div id=\"curves\">\n");
    html_curve(f, r, SM_BUSY, "curve-busy", "busy %", "#c63");
    html_curve(f, r, SM_MEM, "curve-memory", "device memory", "#36c");
    html_curve(f, r, SM_KV, "curve-kv", "KV cache used", "#393");
    fprintf(f, "</div></section>\n<script>\n%s</script>\n</body></html>\n", tuna_report_js);
}

int report_write_html(const char *path, const struct report *r)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp)) {
        fprintf(stderr, "tuna report: --html: path too long\n");
        return 1;
    }
    struct stat st;
    if (!lstat(path, &st) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        fprintf(stderr, "tuna report: --html: %s exists and is not a regular file\n", path);
        return 1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "tuna report: --html: cannot create %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    html_page(f, r);
    if (ferror(f) | fclose(f) || rename(tmp, path) != 0) {
        fprintf(stderr, "tuna report: --html: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}
