/* SPDX-License-Identifier: MIT */
/*
 * tuna: record and report TX8 profiles (docs/tuna.md).
 *
 *   tuna record -o trace.json -- CMD [ARGS...]
 *       runs CMD with TX_PROFILE=trace.json (libtx writes the trace at exit)
 *   tuna report [--json] [--top N] [--peak-gbps X] [--peak-gflops Y] trace.json
 *       top commands by time, share, GB/s, GFLOP/s, roofline class, per-layer
 *       totals, device utilisation, host gaps
 *
 * The peaks default to the best bandwidth and the best compute rate any
 * command of the trace reached (a measured ceiling of the device as it ran);
 * --peak-gbps / --peak-gflops give the device's figures (e.g. tx-bench's).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: tuna record -o TRACE.json -- CMD [ARGS...]\n"
               "       tuna report [--json] [--top N] [--peak-gbps X] [--peak-gflops Y] "
               "TRACE.json\n");
}

/* ---- record ---------------------------------------------------------------- */

static int cmd_record(int argc, char **argv)
{
    const char *out = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else {
            fprintf(stderr, "tuna record: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!out || !*out || i >= argc) {
        fprintf(stderr, "tuna record: %s\n", !out ? "missing -o TRACE.json" : "missing command");
        usage(stderr);
        return 2;
    }
    char abs[PATH_MAX];
    if (out[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)) ||
            snprintf(abs, sizeof(abs), "%s/%s", cwd, out) >= (int)sizeof(abs)) {
            fprintf(stderr, "tuna record: path too long: %s\n", out);
            return 2;
        }
    } else if (snprintf(abs, sizeof(abs), "%s", out) >= (int)sizeof(abs)) {
        fprintf(stderr, "tuna record: path too long: %s\n", out);
        return 2;
    }
    unlink(abs); /* a stale trace must not pass for this run's */
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "tuna record: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        setenv("TX_PROFILE", abs, 1);
        execvp(argv[i], argv + i);
        fprintf(stderr, "tuna record: cannot run %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "tuna record: waitpid: %s\n", strerror(errno));
            return 1;
        }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    struct stat sb;
    if (stat(abs, &sb) != 0) {
        fprintf(stderr, "tuna record: %s wrote no trace (is it a libtx program?)\n", argv[i]);
        return code ? code : 1;
    }
    fprintf(stderr, "tuna record: %s (%lld bytes)%s\n", out, (long long)sb.st_size,
            code ? ", the command failed" : "");
    return code;
}

/* ---- report ---------------------------------------------------------------- */

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
};

struct span {
    const char *name;
    double ts, dur;
};

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
static const char *classify(double bytes, double flops, double time_us, double pbw,
                            double pfl)
{
    if (time_us <= 0 || (bytes <= 0 && flops <= 0))
        return "overhead-bound";
    double t_mem = pbw > 0 ? bytes / (pbw * 1e3) : 0;  /* us at peak bandwidth */
    double t_cmp = pfl > 0 ? flops / (pfl * 1e3) : 0;  /* us at peak compute */
    double t_roof = t_mem > t_cmp ? t_mem : t_cmp;
    if (t_roof < 0.05 * time_us)
        return "overhead-bound";
    return t_cmp > t_mem ? "compute-bound" : "memory-bound";
}

static int cmd_report(int argc, char **argv)
{
    int json = 0, top = 15;
    double peak_bw = 0, peak_fl = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--top") && i + 1 < argc)
            top = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--peak-gbps") && i + 1 < argc)
            peak_bw = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--peak-gflops") && i + 1 < argc)
            peak_fl = strtod(argv[++i], NULL);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "tuna report: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!path)
            path = argv[i];
        else {
            fprintf(stderr, "tuna report: more than one trace ('%s')\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    if (top <= 0 || peak_bw < 0 || peak_fl < 0) {
        fprintf(stderr, "tuna report: --top must be > 0 and the peaks >= 0\n");
        return 2;
    }
    json_object *root = json_object_from_file(path);
    json_object *evs = NULL;
    if (!root) {
        fprintf(stderr, "tuna report: %s: not readable JSON: %s\n", path,
                json_util_get_last_err() ? json_util_get_last_err() : "?");
        return 1;
    }
    if (!json_object_object_get_ex(root, "traceEvents", &evs) ||
        !json_object_is_type(evs, json_type_array)) {
        fprintf(stderr, "tuna report: %s: no traceEvents array (not a Trace Event file)\n", path);
        json_object_put(root);
        return 1;
    }
    size_t n = json_object_array_length(evs);
    struct cmd *cmds = calloc(n + 1, sizeof(*cmds));
    struct span *spans = calloc(n + 1, sizeof(*spans));
    struct span *jobs = calloc(n + 1, sizeof(*jobs));
    struct group *groups = calloc(n + 1, sizeof(*groups));
    struct group *layers = calloc(n + 1, sizeof(*layers));
    if (!cmds || !spans || !jobs || !groups || !layers) {
        fprintf(stderr, "tuna report: out of memory\n");
        return 1;
    }
    int ncmd = 0, nsp = 0, njob = 0, ngr = 0, nly = 0, cores = 1;
    json_object *other, *devs;
    if (json_object_object_get_ex(root, "otherData", &other) &&
        json_object_object_get_ex(other, "devices", &devs) &&
        json_object_is_type(devs, json_type_array) && json_object_array_length(devs) > 0)
        cores = (int)jnum(json_object_array_get_idx(devs, 0), "cores");
    if (cores < 1)
        cores = 1;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(evs, i);
        const char *ph = jstr(e, "ph"), *cat = jstr(e, "cat"), *name = jstr(e, "name");
        if (!ph || strcmp(ph, "X") || !cat || !name)
            continue;
        json_object *a = NULL;
        json_object_object_get_ex(e, "args", &a);
        if (!strcmp(cat, "cmd")) {
            struct cmd *c = &cmds[ncmd++];
            c->name = name;
            c->op = jstr(a, "op") ? jstr(a, "op") : "?";
            c->ts = jnum(e, "ts");
            c->dur = jnum(e, "dur");
            c->bytes = jnum(a, "bytes_read") + jnum(a, "bytes_written");
            c->flops = 2.0 * jnum(a, "macs");
            c->cores = (int)jnum(a, "cores");
            c->job = (int)jnum(a, "job");
        } else if (!strcmp(cat, "host")) {
            spans[nsp].name = name;
            spans[nsp].ts = jnum(e, "ts");
            spans[nsp].dur = jnum(e, "dur");
            nsp++;
        } else if (!strcmp(cat, "job")) {
            jobs[njob].name = name;
            jobs[njob].ts = jnum(e, "ts");
            jobs[njob].dur = jnum(e, "dur");
            njob++;
        }
    }
    if (!ncmd) {
        fprintf(stderr, "tuna report: %s: no device commands (cat \"cmd\") in the trace\n", path);
        json_object_put(root);
        return 1;
    }
    /* phase spans: only prefill / decode step */
    int nph = 0;
    struct span *ph = calloc((size_t)nsp + 1, sizeof(*ph));
    for (int i = 0; i < nsp && ph; i++)
        if (!strcmp(spans[i].name, "prefill") || !strcmp(spans[i].name, "decode step"))
            ph[nph++] = spans[i];
    /* measured peaks: the best command (at least 10 us, to skip noise) */
    double mbw = 0, mfl = 0, total = 0;
    for (int i = 0; i < ncmd; i++) {
        struct cmd *c = &cmds[i];
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
    const char *peak_src = peak_bw > 0 || peak_fl > 0 ? "given" : "measured (best command)";
    if (peak_bw <= 0)
        peak_bw = mbw;
    if (peak_fl <= 0)
        peak_fl = mfl;
    /* groups by (name, phase); layers by "layers.N" */
    for (int i = 0; i < ncmd; i++) {
        struct cmd *c = &cmds[i];
        int g;
        for (g = 0; g < ngr; g++)
            if (!strcmp(groups[g].name, c->name) && !strcmp(groups[g].phase, c->phase))
                break;
        if (g == ngr) {
            groups[g].name = c->name;
            groups[g].phase = c->phase;
            groups[g].op = c->op;
            ngr++;
        }
        groups[g].time += c->dur;
        groups[g].bytes += c->bytes;
        groups[g].flops += c->flops;
        groups[g].count++;
        const char *l = strstr(c->name, "layers.");
        if (l) {
            char key[32];
            int ln = atoi(l + 7);
            snprintf(key, sizeof(key), "layers.%d", ln);
            int k;
            for (k = 0; k < nly; k++)
                if (!strcmp(layers[k].name, key))
                    break;
            if (k == nly) {
                layers[k].name = strdup(key);
                nly++;
            }
            layers[k].time += c->dur;
            layers[k].count++;
        }
    }
    for (int g = 0; g < ngr; g++)
        groups[g].cls = classify(groups[g].bytes, groups[g].flops, groups[g].time, peak_bw,
                                 peak_fl);
    qsort(groups, (size_t)ngr, sizeof(*groups), cmp_group);
    qsort(layers, (size_t)nly, sizeof(*layers), cmp_group);
    /* utilisation and host gaps */
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
    for (int i = 0; i < ncmd; i++)
        core_time += cmds[i].dur * (cmds[i].cores > 0 ? cmds[i].cores : 1);
    double util = span_us > 0 ? 100.0 * job_time / span_us : 0;
    double core_util = span_us > 0 ? 100.0 * core_time / (span_us * cores) : 0;

    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "trace", json_object_new_string(path));
        json_object_object_add(o, "commands", json_object_new_int(ncmd));
        json_object_object_add(o, "jobs", json_object_new_int(njob));
        json_object_object_add(o, "command_time_us", json_object_new_double(total));
        json_object_object_add(o, "job_time_us", json_object_new_double(job_time));
        json_object_object_add(o, "peak_gbps", json_object_new_double(peak_bw));
        json_object_object_add(o, "peak_gflops", json_object_new_double(peak_fl));
        json_object_object_add(o, "peak_source", json_object_new_string(peak_src));
        json_object_object_add(o, "device_busy_pct", json_object_new_double(util));
        json_object_object_add(o, "core_utilisation_pct", json_object_new_double(core_util));
        json_object_object_add(o, "host_gap_us", json_object_new_double(gaps));
        json_object_object_add(o, "host_gaps", json_object_new_int(ngaps));
        json_object_object_add(o, "max_host_gap_us", json_object_new_double(max_gap));
        json_object *ga = json_object_new_array();
        for (int g = 0; g < ngr; g++) {
            json_object *x = json_object_new_object();
            json_object_object_add(x, "name", json_object_new_string(groups[g].name));
            json_object_object_add(x, "op", json_object_new_string(groups[g].op));
            json_object_object_add(x, "phase", json_object_new_string(groups[g].phase));
            json_object_object_add(x, "count", json_object_new_int64(groups[g].count));
            json_object_object_add(x, "time_us", json_object_new_double(groups[g].time));
            json_object_object_add(x, "share_pct",
                                   json_object_new_double(100.0 * groups[g].time / total));
            json_object_object_add(
                x, "gbps", json_object_new_double(groups[g].bytes / (groups[g].time * 1e3)));
            json_object_object_add(
                x, "gflops", json_object_new_double(groups[g].flops / (groups[g].time * 1e3)));
            json_object_object_add(x, "class", json_object_new_string(groups[g].cls));
            json_object_array_add(ga, x);
        }
        json_object_object_add(o, "groups", ga);
        json_object *la = json_object_new_array();
        for (int k = 0; k < nly; k++) {
            json_object *x = json_object_new_object();
            json_object_object_add(x, "layer", json_object_new_string(layers[k].name));
            json_object_object_add(x, "time_us", json_object_new_double(layers[k].time));
            json_object_object_add(x, "commands", json_object_new_int64(layers[k].count));
            json_object_array_add(la, x);
        }
        json_object_object_add(o, "layers", la);
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
        json_object_put(o);
    } else {
        printf("tuna report: %s\n", path);
        printf("%d commands in %d jobs: %.1f us of commands, %.1f us of jobs\n", ncmd, njob, total,
               job_time);
        printf("peaks (%s): %.2f GB/s, %.2f GFLOP/s\n\n", peak_src, peak_bw, peak_fl);
        printf("%-44s %-7s %6s %10s %6s %8s %9s  %s\n", "command", "phase", "count", "time us",
               "share", "GB/s", "GFLOP/s", "class");
        for (int g = 0; g < ngr && g < top; g++)
            printf("%-44.44s %-7s %6ld %10.1f %5.1f%% %8.2f %9.2f  %s\n", groups[g].name,
                   groups[g].phase, groups[g].count, groups[g].time,
                   100.0 * groups[g].time / total, groups[g].bytes / (groups[g].time * 1e3),
                   groups[g].flops / (groups[g].time * 1e3), groups[g].cls);
        if (nly) {
            printf("\n%-12s %10s %6s %8s\n", "layer", "time us", "share", "commands");
            for (int k = 0; k < nly; k++)
                printf("%-12s %10.1f %5.1f%% %8ld\n", layers[k].name, layers[k].time,
                       100.0 * layers[k].time / total, layers[k].count);
        }
        printf("\ndevice busy %.1f%% of %.1f us (cores %.1f%% of %d); host gaps: %d, %.1f us "
               "(longest %.1f us)\n",
               util, span_us, core_util, cores, ngaps, gaps, max_gap);
    }
    for (int k = 0; k < nly; k++)
        free((char *)layers[k].name);
    free(ph);
    free(cmds);
    free(spans);
    free(jobs);
    free(groups);
    free(layers);
    json_object_put(root);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "record"))
        return cmd_record(argc - 1, argv + 1);
    if (!strcmp(argv[1], "report"))
        return cmd_report(argc - 1, argv + 1);
    fprintf(stderr, "tuna: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
