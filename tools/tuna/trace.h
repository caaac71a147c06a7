/* SPDX-License-Identifier: MIT */
/*
 * tuna report: a trace as read (trace_read.c) and the figures drawn from it
 * (trace_figures.c), which the outputs print (report_text.c,
 * report_json.c; report_html.c takes them as a struct report).
 */
#ifndef TUNA_TRACE_H
#define TUNA_TRACE_H

#include <json-c/json.h>

#include "report.h"

struct trace {
    const char *path;
    json_object *root; /* the parsed file: owns every name below */
    struct cmd *cmds;
    struct span *spans, *jobs; /* host spans, device jobs */
    struct group *groups, *layers;
    struct sample *samples;
    struct xmodel *xm;
    int ncmd, nsp, njob, ngr, nly, nsm, nxm;
    int cores; /* of the first device */
    /* counters: the KV cache's peaks, the expert cache's sums */
    double kv_used, kv_alloc, ec_hits, ec_misses;
    int have_kv, have_ec;
    double self_us, pass_us; /* the profiler's own host time (-1: none), passes */

    /* the figures (trace_figures) */
    struct span *ph; /* phase spans: only prefill / decode step */
    int nph;
    struct run_times rt;
    double wall, total, energy; /* us of the run and of the commands, pJ */
    double peak_bw, peak_fl;    /* GB/s, GFLOP/s: given, else measured */
    const char *peak_src;
    double job_time, gaps, max_gap, span_us, core_time, util, core_util;
    int ngaps;
};

/* Reads path into t (zeroed first); 0, or 1 with a message (trace_free
 * then frees what was read). */
int trace_read(const char *path, struct trace *t);
void trace_free(struct trace *t);

/* The figures of t: phases, peaks (peak_bw, peak_fl: given, or 0 for the
 * best command's), groups, layers, roofline classes, utilisation. */
void trace_figures(struct trace *t, double peak_bw, double peak_fl);

/* The outputs. */
void report_text(const struct trace *t, int top);
void report_json(const struct trace *t);

/* A number (0 when absent) or a string (NULL) member of o. */
double jnum(json_object *o, const char *k);
const char *jstr(json_object *o, const char *k);

/* The trace's expert tables (otherData.experts, libtx/profile/experts.c):
 * *out (n of them, 0 without any); -1 with a message when malformed. */
int read_experts(const char *path, json_object *other, struct xmodel **out, int *n);
void free_experts(struct xmodel *xm, int n);
json_object *experts_json(const struct xmodel *xm, int nxm);
void experts_text(const struct xmodel *xm, int nxm);

#endif /* TUNA_TRACE_H */
