/* SPDX-License-Identifier: MIT */
/*
 * tuna report: the figures of a trace -- each command's phase, the peaks
 * (given, or the best command's: a measured ceiling of the device as it
 * ran), the groups by (name, phase) with their roofline class, the layers,
 * the device's utilisation and the host gaps between its jobs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

static int cmp_group(const void *a, const void *b)
{
    double x = ((const struct group *)a)->time, y = ((const struct group *)b)->time;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int cmp_ts(const void *a, const void *b)
{
    double x = ((const struct span *)a)->ts, y = ((const struct span *)b)->ts;
    return x < y ? -1 : x > y ? 1 : 0;
}

static const char *phase_of(const struct span *sp, int nsp, double mid)
{
    for (int i = 0; i < nsp; i++)
        if (mid >= sp[i].ts && mid <= sp[i].ts + sp[i].dur)
            return !strcmp(sp[i].name, "prefill") ? "prefill" : "decode";
    return "other";
}

/* Roofline class of a group against the peaks (GB/s = bytes/ns). */
static const char *classify(double bytes, double flops, double time_us, double pbw, double pfl)
{
    if (time_us <= 0 || (bytes <= 0 && flops <= 0))
        return "overhead-bound";
    double t_mem = pbw > 0 ? bytes / (pbw * 1e3) : 0; /* us at peak bandwidth */
    double t_cmp = pfl > 0 ? flops / (pfl * 1e3) : 0; /* us at peak compute */
    double t_roof = t_mem > t_cmp ? t_mem : t_cmp;
    if (t_roof < 0.05 * time_us)
        return "overhead-bound";
    return t_cmp > t_mem ? "compute-bound" : "memory-bound";
}

/* The roof a group's arithmetic intensity meets first, whatever its speed:
 * "compute" when it needs more time at peak compute than at peak bandwidth. */
static const char *roof_of(double bytes, double flops, double pbw, double pfl)
{
    double t_mem = pbw > 0 ? bytes / pbw : 0;
    double t_cmp = pfl > 0 ? flops / pfl : 0;
    return t_cmp > t_mem ? "compute" : "memory";
}

/* Each command's phase; the peaks: given, else the best command's (at
 * least 10 us, to skip noise). */
static void phases_and_peaks(struct trace *t, double peak_bw, double peak_fl)
{
    /* phase spans: only prefill / decode step */
    int nph = 0;
    struct span *ph = calloc((size_t)t->nsp + 1, sizeof(*ph));
    for (int i = 0; i < t->nsp && ph; i++)
        if (!strcmp(t->spans[i].name, "prefill") || !strcmp(t->spans[i].name, "decode step"))
            ph[nph++] = t->spans[i];
    t->ph = ph;
    t->nph = nph;
    double mbw = 0, mfl = 0, total = 0;
    for (int i = 0; i < t->ncmd; i++) {
        struct cmd *c = &t->cmds[i];
        c->phase = phase_of(ph, nph, c->ts + c->dur / 2);
        total += c->dur;
        if (c->dur >= 10) {
            double bw = c->bytes / (c->dur * 1e3), fl = c->flops / (c->dur * 1e3);
            if (bw > mbw)
                mbw = bw;
            if (fl > mfl)
                mfl = fl;
        }
    }
    t->total = total;
    t->peak_src = peak_bw > 0 || peak_fl > 0 ? "given" : "measured (best command)";
    t->peak_bw = peak_bw > 0 ? peak_bw : mbw;
    t->peak_fl = peak_fl > 0 ? peak_fl : mfl;
}

/* c into its layer's totals ("layers.N" in its name), if it has one */
static void add_to_layer(struct trace *t, const struct cmd *c)
{
    const char *l = strstr(c->name, "layers.");
    if (!l)
        return;
    char key[32];
    int ln = atoi(l + 7);
    snprintf(key, sizeof(key), "layers.%d", ln);
    int k;
    for (k = 0; k < t->nly; k++)
        if (!strcmp(t->layers[k].name, key))
            break;
    if (k == t->nly) {
        t->layers[k].name = strdup(key);
        t->nly++;
    }
    t->layers[k].time += c->dur;
    t->layers[k].energy += c->energy;
    t->layers[k].count++;
}

/* groups by (name, phase), layers by "layers.N", their classes, sorted */
static void groups_and_layers(struct trace *t)
{
    struct group *groups = t->groups;
    for (int i = 0; i < t->ncmd; i++) {
        struct cmd *c = &t->cmds[i];
        int g;
        for (g = 0; g < t->ngr; g++)
            if (!strcmp(groups[g].name, c->name) && !strcmp(groups[g].phase, c->phase))
                break;
        if (g == t->ngr) {
            groups[g].name = c->name;
            groups[g].phase = c->phase;
            groups[g].op = c->op;
            t->ngr++;
        }
        groups[g].time += c->dur;
        groups[g].bytes += c->bytes;
        groups[g].flops += c->flops;
        groups[g].energy += c->energy;
        groups[g].count++;
        add_to_layer(t, c);
    }
    double energy = 0; /* pJ of all commands */
    for (int i = 0; i < t->ncmd; i++)
        energy += t->cmds[i].energy;
    t->energy = energy;
    for (int g = 0; g < t->ngr; g++) {
        groups[g].cls =
            classify(groups[g].bytes, groups[g].flops, groups[g].time, t->peak_bw, t->peak_fl);
        groups[g].roof = roof_of(groups[g].bytes, groups[g].flops, t->peak_bw, t->peak_fl);
    }
    qsort(groups, (size_t)t->ngr, sizeof(*groups), cmp_group);
    qsort(t->layers, (size_t)t->nly, sizeof(*t->layers), cmp_group);
}

/* utilisation and host gaps */
static void utilisation(struct trace *t)
{
    struct span *jobs = t->jobs;
    int njob = t->njob;
    qsort(jobs, (size_t)njob, sizeof(*jobs), cmp_ts);
    double job_time = 0, gaps = 0, max_gap = 0, span_us = 0, core_time = 0;
    int ngaps = 0;
    for (int i = 0; i < njob; i++) {
        job_time += jobs[i].dur;
        if (i) {
            double gap = jobs[i].ts - (jobs[i - 1].ts + jobs[i - 1].dur);
            if (gap > 0) {
                gaps += gap;
                ngaps++;
                if (gap > max_gap)
                    max_gap = gap;
            }
        }
    }
    if (njob)
        span_us = jobs[njob - 1].ts + jobs[njob - 1].dur - jobs[0].ts;
    for (int i = 0; i < t->ncmd; i++)
        core_time += t->cmds[i].dur * (t->cmds[i].cores > 0 ? t->cmds[i].cores : 1);
    t->job_time = job_time;
    t->gaps = gaps;
    t->max_gap = max_gap;
    t->ngaps = ngaps;
    t->span_us = span_us;
    t->core_time = core_time;
    t->util = span_us > 0 ? 100.0 * job_time / span_us : 0;
    t->core_util = span_us > 0 ? 100.0 * core_time / (span_us * t->cores) : 0;
}

void trace_figures(struct trace *t, double peak_bw, double peak_fl)
{
    run_times(t->cmds, t->ncmd, t->spans, t->nsp, &t->rt);
    t->wall = t->rt.t1 - t->rt.t0;
    phases_and_peaks(t, peak_bw, peak_fl);
    groups_and_layers(t);
    utilisation(t);
}
