/* SPDX-License-Identifier: MIT */
/*
 * tuna report: what a trace holds, as trace_read.c reads it, for the HTML page
 * (report_html.c).
 */
#ifndef TUNA_REPORT_H
#define TUNA_REPORT_H

#include <stdint.h>

struct cmd {
    const char *name, *op, *phase;
    char *fp8_name; /* "<name> [fp8]" for a command on FP8 weights (owned) */
    double ts, dur; /* us */
    double bytes, flops;
    double energy; /* pJ (power model, interface 1.8; 0 before) */
    int cores, job;
};

struct group {
    const char *name, *phase, *op;
    double time, bytes, flops;
    double energy; /* pJ */
    long count;
    const char *cls;
    const char *roof; /* the roof its arithmetic intensity meets first */
};

struct span {
    const char *name;
    double ts, dur;
};

enum { SM_BUSY, SM_MEM, SM_KV, SM_NKINDS };

struct sample {
    double ts, v;
    int kind; /* SM_BUSY: busy %, SM_MEM: device memory, SM_KV: KV cache used */
};

/* One model's expert table (the trace's otherData.experts): per (MoE
 * layer, expert), at l * n_experts + e, the selections and, with the
 * runtime's expert cache (hit != NULL), its hits and misses. */
struct xmodel {
    const char *model;
    int n_layers, n_experts, top_k;
    int *layer; /* [n_layers] model layer of MoE layer l */
    double *sel, *hit, *miss;
};

/* The run's times (us of the trace): wall = first to last host span or
 * command; generation = first prompt pass to the last decode step. */
struct run_times {
    double t0, t1;
    double gen0, gen1;
    int have_gen;
};

/* Everything the page shows. */
struct report {
    const struct cmd *cmds;
    int ncmd;
    const struct span *spans;
    int nsp;
    const struct group *groups, *layers;
    int ngr, nly;
    const struct sample *samples;
    int nsm;
    const struct xmodel *xm;
    int nxm;
    double peak_bw, peak_fl; /* GB/s, GFLOP/s */
    double cmd_us, job_us, energy_pj;
    int njob;
    struct run_times t;
};

/* Whether a host span is part of generation (prompt or decode). */
int gen_span(const struct span *sp);

/* The run's times of cmds and spans. */
void run_times(const struct cmd *cmds, int ncmd, const struct span *sp, int nsp,
               struct run_times *t);

/* Writes the page (a temporary file renamed); 0, or 1 with a message. */
int report_write_html(const char *path, const struct report *r);

/* The page's script (report.js, embedded by report_js.c), NUL-terminated. */
extern const char tuna_report_js[];

#endif /* TUNA_REPORT_H */
