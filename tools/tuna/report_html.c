/* SPDX-License-Identifier: MIT */
/* tuna report --html: the timeline, the roofline and the counters as one
 * self-contained page (docs/tuna.md). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "tuna.h"

static unsigned op_color(const char *op)
{
    unsigned h = 2166136261u;
    for (; *op; op++)
        h = (h ^ (unsigned char)*op) * 16777619u;
    return h & 0x7f7f7f;
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

/* One self-contained page (inline SVG, no script, no network): the timeline
 * of host spans and device commands, the roofline with every group, the
 * busy % and device memory curves. Written to a temporary file, renamed. */
int write_html(const char *path, const struct cmd *cmds, int ncmd, const struct span *sp, int nsp,
               const struct group *gr, int ngr, const struct sample *sm, int nsm, double pbw,
               double pfl)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp)) {
        fprintf(stderr, "tuna report: --html: path too long\n");
        return 1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "tuna report: --html: cannot create %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    double t0 = cmds[0].ts, t1 = cmds[0].ts + cmds[0].dur;
    for (int i = 0; i < ncmd; i++) {
        if (cmds[i].ts < t0)
            t0 = cmds[i].ts;
        if (cmds[i].ts + cmds[i].dur > t1)
            t1 = cmds[i].ts + cmds[i].dur;
    }
    for (int i = 0; i < nsp; i++) {
        if (sp[i].ts < t0)
            t0 = sp[i].ts;
        if (sp[i].ts + sp[i].dur > t1)
            t1 = sp[i].ts + sp[i].dur;
    }
    double span = t1 > t0 ? t1 - t0 : 1, W = 1200;
#define TX(t) (10 + ((t)-t0) / span * W)
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tuna report</title>"
               "<style>body{font:13px sans-serif;background:#fff;color:#111}"
               "h2{font-size:15px}</style></head><body>\n<h1>tuna report</h1>\n");
    fprintf(f, "<p>%d commands over %.1f us; peaks %.2f GB/s, %.2f GFLOP/s</p>\n", ncmd, span, pbw,
            pfl);
    fprintf(f, "<h2>Timeline</h2>\n<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" "
               "width=\"1220\" height=\"120\">\n<rect x=\"0\" y=\"0\" width=\"1220\" "
               "height=\"120\" fill=\"#f4f4f4\"/>\n"
               "<text x=\"10\" y=\"14\">host</text><text x=\"10\" y=\"64\">device "
               "commands</text>\n");
    for (int i = 0; i < nsp; i++) {
        fprintf(f,
                "<rect x=\"%.2f\" y=\"18\" width=\"%.2f\" height=\"24\" fill=\"#4a7\">"
                "<title>",
                TX(sp[i].ts), sp[i].dur / span * W > 0.5 ? sp[i].dur / span * W : 0.5);
        html_escape(f, sp[i].name);
        fprintf(f, " %.1f us</title></rect>\n", sp[i].dur);
    }
    for (int i = 0; i < ncmd; i++) {
        fprintf(f,
                "<rect x=\"%.2f\" y=\"68\" width=\"%.2f\" height=\"40\" "
                "fill=\"#%06x\"><title>",
                TX(cmds[i].ts), cmds[i].dur / span * W > 0.5 ? cmds[i].dur / span * W : 0.5,
                op_color(cmds[i].op) | 0x303030);
        html_escape(f, cmds[i].name);
        fprintf(f, " %.1f us</title></rect>\n", cmds[i].dur);
    }
    fprintf(f, "</svg>\n");
    /* roofline: log10 AI in [-2, 3], log10 GFLOP/s in [-3, log10(peak) + 1] */
    double ymax = pfl > 0 ? log10(pfl) + 1 : 2, ymin = -3, RW = 500, RH = 300;
#define RX(ai) (40 + (log10(ai) + 2) / 5 * RW)
#define RY(g) (10 + (ymax - log10(g)) / (ymax - ymin) * RH)
    fprintf(f, "<h2>Roofline</h2>\n<svg id=\"roofline\" xmlns=\"http://www.w3.org/2000/svg\" "
               "width=\"560\" height=\"340\">\n<rect x=\"40\" y=\"10\" width=\"500\" "
               "height=\"300\" fill=\"#f4f4f4\"/>\n");
    if (pbw > 0 && pfl > 0) {
        double ridge = pfl / pbw;
        fprintf(f,
                "<polyline fill=\"none\" stroke=\"#c33\" points=\"%.1f,%.1f %.1f,%.1f "
                "%.1f,%.1f\"/>\n",
                RX(0.01), RY(0.01 * pbw), RX(ridge), RY(pfl), RX(1000.0), RY(pfl));
    }
    for (int g = 0; g < ngr; g++) {
        if (gr[g].bytes <= 0 || gr[g].flops <= 0 || gr[g].time <= 0)
            continue;
        double ai = gr[g].flops / gr[g].bytes, gf = gr[g].flops / (gr[g].time * 1e3);
        if (ai < 0.01 || ai > 1000 || gf < 1e-3)
            continue;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#%06x\"><title>", RX(ai), RY(gf),
                op_color(gr[g].op) | 0x303030);
        html_escape(f, gr[g].name);
        fprintf(f, " (%s) %.2f flop/B, %.2f GFLOP/s, %s</title></circle>\n", gr[g].phase, ai, gf,
                gr[g].cls);
    }
    fprintf(f, "<text x=\"240\" y=\"330\">FLOP/byte (log)</text></svg>\n");
    /* curves */
    double mmax = 1;
    for (int i = 0; i < nsm; i++)
        if (sm[i].kind != SM_BUSY && sm[i].v > mmax)
            mmax = sm[i].v;
    fprintf(f, "<h2>Utilisation and device memory</h2>\n<svg id=\"curves\" "
               "xmlns=\"http://www.w3.org/2000/svg\" width=\"1220\" height=\"220\">\n"
               "<rect x=\"0\" y=\"0\" width=\"1220\" height=\"220\" fill=\"#f4f4f4\"/>\n");
    static const char *const stroke[SM_NKINDS] = {"#c63", "#36c", "#393"};
    for (int m = 0; m < SM_NKINDS; m++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" points=\"", stroke[m]);
        for (int i = 0; i < nsm; i++)
            if (sm[i].kind == m)
                fprintf(f, "%.1f,%.1f ", TX(sm[i].ts),
                        210 - (m != SM_BUSY ? sm[i].v / mmax : sm[i].v / 100.0) * 200);
        fprintf(f, "\"/>\n");
    }
    fprintf(f,
            "<text x=\"10\" y=\"14\" fill=\"#c63\">busy %%</text><text x=\"80\" "
            "y=\"14\" fill=\"#36c\">device memory (max %.0f MiB)</text><text x=\"330\" "
            "y=\"14\" fill=\"#393\">KV cache used (same scale)</text></svg>\n"
            "</body></html>\n",
            mmax / 1048576.0);
#undef TX
#undef RX
#undef RY
    struct stat st;
    if (!lstat(path, &st) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        fclose(f);
        fprintf(stderr, "tuna report: --html: %s exists and is not a regular file\n", path);
        unlink(tmp);
        return 1;
    }
    if (ferror(f) | fclose(f) || rename(tmp, path) != 0) {
        fprintf(stderr, "tuna report: --html: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}
