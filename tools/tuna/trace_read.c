/* SPDX-License-Identifier: MIT */
/*
 * tuna report: reading a trace (a Trace Event file libtx's profiler
 * wrote: docs/tuna.md) into struct trace -- the device commands, host
 * spans, jobs, counters and the expert tables.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

double jnum(json_object *o, const char *k)
{
    json_object *v;
    return o && json_object_object_get_ex(o, k, &v) ? json_object_get_double(v) : 0.0;
}

const char *jstr(json_object *o, const char *k)
{
    json_object *v;
    return o && json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

/* A counter event ("ph": "C"): the curves' samples, the KV cache's peaks,
 * the expert cache's sums. */
static void read_counter(struct trace *t, json_object *e, json_object *a, const char *name)
{
    double v = jnum(a, "value");
    int kind = !strcmp(name, "busy %")          ? SM_BUSY
               : !strcmp(name, "device memory") ? SM_MEM
               : !strcmp(name, "KV cache used") ? SM_KV
                                                : -1;
    if (kind >= 0) {
        t->samples[t->nsm].ts = jnum(e, "ts");
        t->samples[t->nsm].v = v;
        t->samples[t->nsm].kind = kind;
        t->nsm++;
    }
    if (kind == SM_KV) {
        t->kv_used = v > t->kv_used ? v : t->kv_used;
        t->have_kv = 1;
    } else if (!strcmp(name, "KV cache allocated")) {
        t->kv_alloc = v > t->kv_alloc ? v : t->kv_alloc;
        t->have_kv = 1;
    } else if (!strcmp(name, "expert cache hits")) {
        t->ec_hits += v;
        t->have_ec = 1;
    } else if (!strcmp(name, "expert cache misses")) {
        t->ec_misses += v;
        t->have_ec = 1;
    }
}

/* A device command (cat "cmd"). */
static void read_cmd(struct trace *t, json_object *e, json_object *a, const char *name)
{
    struct cmd *c = &t->cmds[t->ncmd++];
    c->name = name;
    c->op = jstr(a, "op") ? jstr(a, "op") : "?";
    c->ts = jnum(e, "ts");
    c->dur = jnum(e, "dur");
    c->bytes = jnum(a, "bytes_read") + jnum(a, "bytes_written");
    c->flops = 2.0 * jnum(a, "macs");
    c->energy = jnum(a, "energy_pj");
    c->cores = (int)jnum(a, "cores");
    c->job = (int)jnum(a, "job");
    /* FP8 weights (detail "... w=fp8 ..."): their own group, named
     * so in the table and the roofline */
    const char *det = jstr(a, "detail");
    if (det && strstr(det, " w=fp8 ")) {
        if (asprintf(&c->fp8_name, "%s [fp8]", name) > 0)
            c->name = c->fp8_name;
        else
            c->fp8_name = NULL;
    }
}

/* A span of a host step or a device job: *s, its count n. */
static void read_span(struct span *s, int *n, json_object *e, const char *name)
{
    s[*n].name = name;
    s[*n].ts = jnum(e, "ts");
    s[*n].dur = jnum(e, "dur");
    (*n)++;
}

static void read_event(struct trace *t, json_object *e)
{
    const char *ph = jstr(e, "ph"), *cat = jstr(e, "cat"), *name = jstr(e, "name");
    json_object *a = NULL;
    json_object_object_get_ex(e, "args", &a);
    if (ph && name && !strcmp(ph, "C")) {
        read_counter(t, e, a, name);
        return;
    }
    if (!ph || strcmp(ph, "X") || !cat || !name)
        return;
    if (!strcmp(cat, "cmd")) {
        read_cmd(t, e, a, name);
    } else if (!strcmp(cat, "host")) {
        if (!strcmp(name, "prefill") || !strcmp(name, "decode step"))
            t->pass_us += jnum(e, "dur");
        read_span(t->spans, &t->nsp, e, name);
    } else if (!strcmp(cat, "job")) {
        read_span(t->jobs, &t->njob, e, name);
    }
}

/* otherData: the first device's cores, the profiler's own host time, the
 * expert tables; 0, or 1 with a message. */
static int read_other(struct trace *t)
{
    json_object *other = NULL, *devs = NULL;
    if (json_object_object_get_ex(t->root, "otherData", &other) &&
        json_object_object_get_ex(other, "devices", &devs) &&
        json_object_is_type(devs, json_type_array) && json_object_array_length(devs) > 0)
        t->cores = (int)jnum(json_object_array_get_idx(devs, 0), "cores");
    if (t->cores < 1)
        t->cores = 1;
    json_object *sv;
    if (other && json_object_object_get_ex(other, "profiler_host_ns", &sv))
        t->self_us = json_object_get_double(sv) / 1000.0;
    return read_experts(t->path, other, &t->xm, &t->nxm) ? 1 : 0;
}

int trace_read(const char *path, struct trace *t)
{
    memset(t, 0, sizeof(*t));
    t->path = path;
    t->self_us = -1;
    t->cores = 1;
    t->root = json_object_from_file(path);
    json_object *evs = NULL;
    if (!t->root) {
        fprintf(stderr, "tuna report: %s: not readable JSON: %s\n", path,
                json_util_get_last_err() ? json_util_get_last_err() : "?");
        return 1;
    }
    if (!json_object_object_get_ex(t->root, "traceEvents", &evs) ||
        !json_object_is_type(evs, json_type_array)) {
        fprintf(stderr, "tuna report: %s: no traceEvents array (not a Trace Event file)\n", path);
        return 1;
    }
    size_t n = json_object_array_length(evs);
    t->cmds = calloc(n + 1, sizeof(*t->cmds));
    t->spans = calloc(n + 1, sizeof(*t->spans));
    t->jobs = calloc(n + 1, sizeof(*t->jobs));
    t->groups = calloc(n + 1, sizeof(*t->groups));
    t->layers = calloc(n + 1, sizeof(*t->layers));
    t->samples = calloc(n + 1, sizeof(*t->samples));
    if (!t->cmds || !t->spans || !t->jobs || !t->groups || !t->layers || !t->samples) {
        fprintf(stderr, "tuna report: out of memory\n");
        return 1;
    }
    if (read_other(t))
        return 1;
    for (size_t i = 0; i < n; i++)
        read_event(t, json_object_array_get_idx(evs, i));
    if (!t->ncmd) {
        fprintf(stderr, "tuna report: %s: no device commands (cat \"cmd\") in the trace\n", path);
        return 1;
    }
    return 0;
}

void trace_free(struct trace *t)
{
    free_experts(t->xm, t->nxm);
    for (int k = 0; k < t->nly; k++)
        free((char *)t->layers[k].name);
    free(t->samples);
    free(t->ph);
    for (int k = 0; k < t->ncmd; k++)
        free(t->cmds[k].fp8_name);
    free(t->cmds);
    free(t->spans);
    free(t->jobs);
    free(t->groups);
    free(t->layers);
    json_object_put(t->root);
}
