/* SPDX-License-Identifier: MIT */
/*
 * tuna report: the trace's device commands grouped by name and phase,
 * their share, GB/s, GFLOP/s and roofline class, per-layer totals, device
 * utilisation and host gaps, as text or JSON (docs/tuna.md).
 */
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

static double jnum(json_object *o, const char *k)
{
    json_object *v;
    return o && json_object_object_get_ex(o, k, &v) ? json_object_get_double(v) : 0.0;
}

static const char *jstr(json_object *o, const char *k)
{
    json_object *v;
    return o && json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

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

struct report_opts {
    int json, top;
    double peak_bw, peak_fl; /* given; 0: measured */
    const char *path, *html;
};

/* what the trace holds, and what is computed from it */
struct report {
    json_object *root;
    struct cmd *cmds;
    struct span *spans, *jobs, *ph; /* host spans, device jobs, prefill / decode spans */
    struct group *groups, *layers;
    struct sample *samples;
    int ncmd, nsp, njob, ngr, nly, nsm, nph, cores;
    /* counters: the KV cache's peaks, the expert cache's sums */
    double kv_used, kv_alloc, ec_hits, ec_misses;
    int have_kv, have_ec;
    double self_us, pass_us;
    double total, peak_bw, peak_fl;
    const char *peak_src;
    double job_time, gaps, max_gap, span_us, util, core_util;
    int ngaps;
};

/* -1: go on; else the exit status */
static int report_options(int argc, char **argv, struct report_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->top = 15;
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
    return -1;
}

/* a counter event ("ph": "C") */
static void add_counter(struct report *r, json_object *e, const char *name, json_object *a)
{
    double v = jnum(a, "value");
    int kind = !strcmp(name, "busy %")          ? SM_BUSY
               : !strcmp(name, "device memory") ? SM_MEM
               : !strcmp(name, "KV cache used") ? SM_KV
                                                : -1;
    if (kind >= 0) {
        r->samples[r->nsm].ts = jnum(e, "ts");
        r->samples[r->nsm].v = v;
        r->samples[r->nsm].kind = kind;
        r->nsm++;
    }
    if (kind == SM_KV) {
        r->kv_used = v > r->kv_used ? v : r->kv_used;
        r->have_kv = 1;
    } else if (!strcmp(name, "KV cache allocated")) {
        r->kv_alloc = v > r->kv_alloc ? v : r->kv_alloc;
        r->have_kv = 1;
    } else if (!strcmp(name, "expert cache hits")) {
        r->ec_hits += v;
        r->have_ec = 1;
    } else if (!strcmp(name, "expert cache misses")) {
        r->ec_misses += v;
        r->have_ec = 1;
    }
}

/* a complete event ("ph": "X"): a device command, a host span or a job */
static void add_span(struct report *r, json_object *e, const char *cat, const char *name,
                     json_object *a)
{
    if (!strcmp(cat, "cmd")) {
        struct cmd *c = &r->cmds[r->ncmd++];
        c->name = name;
        c->op = jstr(a, "op") ? jstr(a, "op") : "?";
        c->ts = jnum(e, "ts");
        c->dur = jnum(e, "dur");
        c->bytes = jnum(a, "bytes_read") + jnum(a, "bytes_written");
        c->flops = 2.0 * jnum(a, "macs");
        c->cores = (int)jnum(a, "cores");
        c->job = (int)jnum(a, "job");
    } else if (!strcmp(cat, "host")) {
        if (!strcmp(name, "prefill") || !strcmp(name, "decode step"))
            r->pass_us += jnum(e, "dur");
        r->spans[r->nsp].name = name;
        r->spans[r->nsp].ts = jnum(e, "ts");
        r->spans[r->nsp].dur = jnum(e, "dur");
        r->nsp++;
    } else if (!strcmp(cat, "job")) {
        r->jobs[r->njob].name = name;
        r->jobs[r->njob].ts = jnum(e, "ts");
        r->jobs[r->njob].dur = jnum(e, "dur");
        r->njob++;
    }
}

/* The trace's events into r. 0, or 1 (said why). */
static int report_load(const char *path, struct report *r)
{
    memset(r, 0, sizeof(*r));
    r->cores = 1;
    r->self_us = -1;
    r->root = json_object_from_file(path);
    json_object *evs = NULL;
    if (!r->root) {
        fprintf(stderr, "tuna report: %s: not readable JSON: %s\n", path,
                json_util_get_last_err() ? json_util_get_last_err() : "?");
        return 1;
    }
    if (!json_object_object_get_ex(r->root, "traceEvents", &evs) ||
        !json_object_is_type(evs, json_type_array)) {
        fprintf(stderr, "tuna report: %s: no traceEvents array (not a Trace Event file)\n", path);
        return 1;
    }
    size_t n = json_object_array_length(evs);
    r->cmds = calloc(n + 1, sizeof(*r->cmds));
    r->spans = calloc(n + 1, sizeof(*r->spans));
    r->jobs = calloc(n + 1, sizeof(*r->jobs));
    r->groups = calloc(n + 1, sizeof(*r->groups));
    r->layers = calloc(n + 1, sizeof(*r->layers));
    r->samples = calloc(n + 1, sizeof(*r->samples));
    if (!r->cmds || !r->spans || !r->jobs || !r->groups || !r->layers || !r->samples) {
        fprintf(stderr, "tuna report: out of memory\n");
        return 1;
    }
    json_object *other = NULL, *devs = NULL;
    if (json_object_object_get_ex(r->root, "otherData", &other) &&
        json_object_object_get_ex(other, "devices", &devs) &&
        json_object_is_type(devs, json_type_array) && json_object_array_length(devs) > 0)
        r->cores = (int)jnum(json_object_array_get_idx(devs, 0), "cores");
    if (r->cores < 1)
        r->cores = 1;
    json_object *sv;
    if (other && json_object_object_get_ex(other, "profiler_host_ns", &sv))
        r->self_us = json_object_get_double(sv) / 1000.0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(evs, i);
        const char *ph = jstr(e, "ph"), *cat = jstr(e, "cat"), *name = jstr(e, "name");
        json_object *a = NULL;
        json_object_object_get_ex(e, "args", &a);
        if (ph && name && !strcmp(ph, "C"))
            add_counter(r, e, name, a);
        else if (ph && !strcmp(ph, "X") && cat && name)
            add_span(r, e, cat, name, a);
    }
    if (!r->ncmd) {
        fprintf(stderr, "tuna report: %s: no device commands (cat \"cmd\") in the trace\n", path);
        return 1;
    }
    return 0;
}

/* each command's phase; the peaks: given, else the best command's (at
 * least 10 us, to skip noise) */
static void report_peaks(struct report *r, const struct report_opts *o)
{
    /* phase spans: only prefill / decode step */
    r->ph = calloc((size_t)r->nsp + 1, sizeof(*r->ph));
    for (int i = 0; i < r->nsp && r->ph; i++)
        if (!strcmp(r->spans[i].name, "prefill") || !strcmp(r->spans[i].name, "decode step"))
            r->ph[r->nph++] = r->spans[i];
    double mbw = 0, mfl = 0;
    for (int i = 0; i < r->ncmd; i++) {
        struct cmd *c = &r->cmds[i];
        c->phase = phase_of(r->ph, r->nph, c->ts + c->dur / 2);
        r->total += c->dur;
        if (c->dur >= 10) {
            double bw = c->bytes / (c->dur * 1e3), fl = c->flops / (c->dur * 1e3);
            if (bw > mbw)
                mbw = bw;
            if (fl > mfl)
                mfl = fl;
        }
    }
    r->peak_src = o->peak_bw > 0 || o->peak_fl > 0 ? "given" : "measured (best command)";
    r->peak_bw = o->peak_bw > 0 ? o->peak_bw : mbw;
    r->peak_fl = o->peak_fl > 0 ? o->peak_fl : mfl;
}

/* groups by (name, phase), sorted by time, with their roofline class;
 * layers by "layers.N" */
static void report_groups(struct report *r)
{
    for (int i = 0; i < r->ncmd; i++) {
        struct cmd *c = &r->cmds[i];
        int g;
        for (g = 0; g < r->ngr; g++)
            if (!strcmp(r->groups[g].name, c->name) && !strcmp(r->groups[g].phase, c->phase))
                break;
        if (g == r->ngr) {
            r->groups[g].name = c->name;
            r->groups[g].phase = c->phase;
            r->groups[g].op = c->op;
            r->ngr++;
        }
        r->groups[g].time += c->dur;
        r->groups[g].bytes += c->bytes;
        r->groups[g].flops += c->flops;
        r->groups[g].count++;
        const char *l = strstr(c->name, "layers.");
        if (l) {
            char key[32];
            int ln = atoi(l + 7);
            snprintf(key, sizeof(key), "layers.%d", ln);
            int k;
            for (k = 0; k < r->nly; k++)
                if (!strcmp(r->layers[k].name, key))
                    break;
            if (k == r->nly) {
                r->layers[k].name = strdup(key);
                r->nly++;
            }
            r->layers[k].time += c->dur;
            r->layers[k].count++;
        }
    }
    for (int g = 0; g < r->ngr; g++) {
        struct group *x = &r->groups[g];
        x->cls = classify(x->bytes, x->flops, x->time, r->peak_bw, r->peak_fl);
        x->roof = roof_of(x->bytes, x->flops, r->peak_bw, r->peak_fl);
    }
    qsort(r->groups, (size_t)r->ngr, sizeof(*r->groups), cmp_group);
    qsort(r->layers, (size_t)r->nly, sizeof(*r->layers), cmp_group);
}

/* device busy %, core utilisation and the host gaps between jobs */
static void report_utilisation(struct report *r)
{
    qsort(r->jobs, (size_t)r->njob, sizeof(*r->jobs), cmp_ts);
    double core_time = 0;
    for (int i = 0; i < r->njob; i++) {
        r->job_time += r->jobs[i].dur;
        if (i) {
            double gap = r->jobs[i].ts - (r->jobs[i - 1].ts + r->jobs[i - 1].dur);
            if (gap > 0) {
                r->gaps += gap;
                r->ngaps++;
                if (gap > r->max_gap)
                    r->max_gap = gap;
            }
        }
    }
    if (r->njob)
        r->span_us = r->jobs[r->njob - 1].ts + r->jobs[r->njob - 1].dur - r->jobs[0].ts;
    for (int i = 0; i < r->ncmd; i++)
        core_time += r->cmds[i].dur * (r->cmds[i].cores > 0 ? r->cmds[i].cores : 1);
    r->util = r->span_us > 0 ? 100.0 * r->job_time / r->span_us : 0;
    r->core_util = r->span_us > 0 ? 100.0 * core_time / (r->span_us * r->cores) : 0;
}

static void print_json(const struct report *r, const char *path)
{
    const struct group *groups = r->groups, *layers = r->layers;
    double total = r->total, self_us = r->self_us, pass_us = r->pass_us;
    double ec_hits = r->ec_hits, ec_misses = r->ec_misses;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "trace", json_object_new_string(path));
    json_object_object_add(o, "commands", json_object_new_int(r->ncmd));
    json_object_object_add(o, "jobs", json_object_new_int(r->njob));
    json_object_object_add(o, "command_time_us", json_object_new_double(total));
    json_object_object_add(o, "job_time_us", json_object_new_double(r->job_time));
    json_object_object_add(o, "peak_gbps", json_object_new_double(r->peak_bw));
    json_object_object_add(o, "peak_gflops", json_object_new_double(r->peak_fl));
    json_object_object_add(o, "peak_source", json_object_new_string(r->peak_src));
    json_object_object_add(o, "device_busy_pct", json_object_new_double(r->util));
    json_object_object_add(o, "core_utilisation_pct", json_object_new_double(r->core_util));
    json_object_object_add(o, "host_gap_us", json_object_new_double(r->gaps));
    json_object_object_add(o, "host_gaps", json_object_new_int(r->ngaps));
    json_object_object_add(o, "max_host_gap_us", json_object_new_double(r->max_gap));
    if (self_us >= 0) {
        json_object_object_add(o, "profiler_host_us", json_object_new_double(self_us));
        json_object_object_add(o, "profiler_host_pct",
                               pass_us > 0 ? json_object_new_double(100.0 * self_us / pass_us)
                                           : NULL);
    }
    if (r->have_kv) {
        json_object_object_add(o, "kv_cache_peak_used_bytes", json_object_new_double(r->kv_used));
        json_object_object_add(o, "kv_cache_peak_allocated_bytes",
                               json_object_new_double(r->kv_alloc));
    }
    if (r->have_ec) {
        json_object_object_add(o, "expert_cache_hits", json_object_new_double(ec_hits));
        json_object_object_add(o, "expert_cache_misses", json_object_new_double(ec_misses));
        json_object_object_add(o, "expert_cache_hit_pct",
                               ec_hits + ec_misses > 0
                                   ? json_object_new_double(100.0 * ec_hits / (ec_hits + ec_misses))
                                   : NULL);
    }
    json_object *ga = json_object_new_array();
    for (int g = 0; g < r->ngr; g++) {
        json_object *x = json_object_new_object();
        json_object_object_add(x, "name", json_object_new_string(groups[g].name));
        json_object_object_add(x, "op", json_object_new_string(groups[g].op));
        json_object_object_add(x, "phase", json_object_new_string(groups[g].phase));
        json_object_object_add(x, "count", json_object_new_int64(groups[g].count));
        json_object_object_add(x, "time_us", json_object_new_double(groups[g].time));
        json_object_object_add(x, "share_pct",
                               json_object_new_double(100.0 * groups[g].time / total));
        json_object_object_add(x, "gbps",
                               json_object_new_double(groups[g].bytes / (groups[g].time * 1e3)));
        json_object_object_add(x, "gflops",
                               json_object_new_double(groups[g].flops / (groups[g].time * 1e3)));
        json_object_object_add(x, "class", json_object_new_string(groups[g].cls));
        json_object_object_add(x, "roof", json_object_new_string(groups[g].roof));
        json_object_array_add(ga, x);
    }
    json_object_object_add(o, "groups", ga);
    json_object *la = json_object_new_array();
    for (int k = 0; k < r->nly; k++) {
        json_object *x = json_object_new_object();
        json_object_object_add(x, "layer", json_object_new_string(layers[k].name));
        json_object_object_add(x, "time_us", json_object_new_double(layers[k].time));
        json_object_object_add(x, "commands", json_object_new_int64(layers[k].count));
        json_object_array_add(la, x);
    }
    json_object_object_add(o, "layers", la);
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
}

static void print_text(const struct report *r, const char *path, int top)
{
    const struct group *groups = r->groups, *layers = r->layers;
    double total = r->total;
    printf("tuna report: %s\n", path);
    printf("%d commands in %d jobs: %.1f us of commands, %.1f us of jobs\n", r->ncmd, r->njob,
           total, r->job_time);
    printf("peaks (%s): %.2f GB/s, %.2f GFLOP/s\n\n", r->peak_src, r->peak_bw, r->peak_fl);
    printf("%-44s %-7s %6s %10s %6s %8s %9s  %s\n", "command", "phase", "count", "time us", "share",
           "GB/s", "GFLOP/s", "class");
    for (int g = 0; g < r->ngr && g < top; g++)
        printf("%-44.44s %-7s %6ld %10.1f %5.1f%% %8.2f %9.2f  %s\n", groups[g].name,
               groups[g].phase, groups[g].count, groups[g].time, 100.0 * groups[g].time / total,
               groups[g].bytes / (groups[g].time * 1e3), groups[g].flops / (groups[g].time * 1e3),
               groups[g].cls);
    if (r->nly) {
        printf("\n%-12s %10s %6s %8s\n", "layer", "time us", "share", "commands");
        for (int k = 0; k < r->nly; k++)
            printf("%-12s %10.1f %5.1f%% %8ld\n", layers[k].name, layers[k].time,
                   100.0 * layers[k].time / total, layers[k].count);
    }
    printf("\ndevice busy %.1f%% of %.1f us (cores %.1f%% of %d); host gaps: %d, %.1f us "
           "(longest %.1f us)\n",
           r->util, r->span_us, r->core_util, r->cores, r->ngaps, r->gaps, r->max_gap);
    if (r->self_us >= 0 && r->pass_us > 0)
        printf("profiler's own host time: %.1f us, %.2f%% of the prefill + decode step time\n",
               r->self_us, 100.0 * r->self_us / r->pass_us);
    if (r->have_kv)
        printf("KV cache: peak %.2f MiB used of %.2f MiB allocated\n", r->kv_used / 1048576.0,
               r->kv_alloc / 1048576.0);
    if (r->have_ec) {
        printf("expert cache: %.0f hits, %.0f misses", r->ec_hits, r->ec_misses);
        if (r->ec_hits + r->ec_misses > 0)
            printf(" (hit rate %.1f%%)", 100.0 * r->ec_hits / (r->ec_hits + r->ec_misses));
        printf("\n");
    }
}

static void report_free(struct report *r)
{
    for (int k = 0; k < r->nly; k++)
        free((char *)r->layers[k].name);
    free(r->samples);
    free(r->ph);
    free(r->cmds);
    free(r->spans);
    free(r->jobs);
    free(r->groups);
    free(r->layers);
    json_object_put(r->root);
}

int cmd_report(int argc, char **argv)
{
    struct report_opts o;
    int rc = report_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct report r;
    rc = report_load(o.path, &r);
    if (!rc) {
        report_peaks(&r, &o);
        report_groups(&r);
        report_utilisation(&r);
        if (o.json)
            print_json(&r, o.path);
        else
            print_text(&r, o.path, o.top);
        if (o.html)
            rc = write_html(o.html, r.cmds, r.ncmd, r.spans, r.nsp, r.groups, r.ngr, r.samples,
                            r.nsm, r.peak_bw, r.peak_fl);
    }
    report_free(&r);
    return rc;
}
