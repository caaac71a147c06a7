/* SPDX-License-Identifier: MIT */
/*
 * tuna report [--json] [--html OUT.html] [--top N] [--peak-gbps X]
 * [--peak-gflops Y] TRACE.json: top commands by time, share, GB/s,
 * GFLOP/s, roofline class, per-layer totals, device utilisation, host gaps.
 *
 * The peaks default to the best bandwidth and the best compute rate any
 * command of the trace reached (a measured ceiling of the device as it
 * ran); --peak-gbps / --peak-gflops give the device's figures (e.g.
 * tx-bench's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "tuna.h"

struct report_opts {
    int json, top;
    double peak_bw, peak_fl;
    const char *path, *html;
};

/* argv into o; 0, or 2 with a message */
static int report_args(int argc, char **argv, struct report_opts *o)
{
    *o = (struct report_opts){.top = 15};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            o->json = 1;
        else if (!strcmp(argv[i], "--html") && i + 1 < argc)
            o->html = argv[++i];
        else if (!strcmp(argv[i], "--top") && i + 1 < argc)
            o->top = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--peak-gbps") && i + 1 < argc)
            o->peak_bw = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--peak-gflops") && i + 1 < argc)
            o->peak_fl = strtod(argv[++i], NULL);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "tuna report: unknown option '%s'\n", argv[i]);
            tuna_usage(stderr);
            return 2;
        } else if (!o->path)
            o->path = argv[i];
        else {
            fprintf(stderr, "tuna report: more than one trace ('%s')\n", argv[i]);
            return 2;
        }
    }
    if (!o->path) {
        tuna_usage(stderr);
        return 2;
    }
    if (o->top <= 0 || o->peak_bw < 0 || o->peak_fl < 0) {
        fprintf(stderr, "tuna report: --top must be > 0 and the peaks >= 0\n");
        return 2;
    }
    return 0;
}

/* The HTML page of t (report_html.c); 0, or 1 with a message. */
static int report_html(const struct trace *t, const char *html)
{
    struct report r = {.cmds = t->cmds,
                       .ncmd = t->ncmd,
                       .spans = t->spans,
                       .nsp = t->nsp,
                       .groups = t->groups,
                       .layers = t->layers,
                       .ngr = t->ngr,
                       .nly = t->nly,
                       .samples = t->samples,
                       .nsm = t->nsm,
                       .xm = t->xm,
                       .nxm = t->nxm,
                       .peak_bw = t->peak_bw,
                       .peak_fl = t->peak_fl,
                       .cmd_us = t->total,
                       .job_us = t->job_time,
                       .energy_pj = t->energy,
                       .njob = t->njob,
                       .t = t->rt};
    return report_write_html(html, &r);
}

int tuna_report(int argc, char **argv)
{
    struct report_opts o;
    int rc = report_args(argc, argv, &o);
    if (rc)
        return rc;
    struct trace t;
    rc = trace_read(o.path, &t);
    if (!rc) {
        trace_figures(&t, o.peak_bw, o.peak_fl);
        if (o.json)
            report_json(&t);
        else
            report_text(&t, o.top);
        if (o.html)
            rc = report_html(&t, o.html);
    }
    trace_free(&t);
    return rc;
}
