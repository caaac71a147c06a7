/* SPDX-License-Identifier: MIT */
/*
 * tuna's parts (docs/tuna.md): tuna.c the commands' dispatch, record.c
 * (tuna record), report.c and report_html.c (tuna report), overhead.c
 * (tuna overhead).
 */
#ifndef TUNA_H
#define TUNA_H

#include <stdio.h>

#include <json-c/json.h>

void tuna_usage(FILE *f);
int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_overhead(int argc, char **argv);

/* ---- the trace, as tuna report reads it ----------------------------------- */

struct cmd {
    const char *name, *op, *phase;
    double ts, dur; /* us */
    double bytes, flops;
    int cores, job;
};

struct group {
    const char *name, *phase, *op;
    double time, bytes, flops;
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

/* --html: one self-contained page (report_html.c); 0, or 1 (said why) */
int write_html(const char *path, const struct cmd *cmds, int ncmd, const struct span *sp, int nsp,
               const struct group *gr, int ngr, const struct sample *sm, int nsm, double pbw,
               double pfl);

#endif
