/* SPDX-License-Identifier: MIT */
/*
 * tuna: record and report TX8 profiles (docs/tuna.md).
 *
 *   tuna record -o trace.json -- CMD [ARGS...]
 *       runs CMD with TX_PROFILE=trace.json (libtx writes the trace at exit)
 *   tuna report [--json] [--top N] [--peak-gbps X] [--peak-gflops Y] trace.json
 *       top commands by time, share, GB/s, GFLOP/s, roofline class, per-layer
 *       totals, device utilisation, host gaps (and --html OUT.html)
 *   tuna overhead [-r PAIRS] -- glm-inference ARGS...
 *       decode tokens/s with profiling off and on, interleaved; median ratio
 *
 * The peaks default to the best bandwidth and the best compute rate any
 * command of the trace reached (a measured ceiling of the device as it ran);
 * --peak-gbps / --peak-gflops give the device's figures (e.g. tx-bench's).
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

#include "common/cli.h"
#include "report.h"

#include <json-c/json.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tuna record -o TRACE.json -- CMD [ARGS...]\n"
            "       tuna report [--json] [--html OUT.html] [--top N] [--peak-gbps X] "
            "[--peak-gflops Y] TRACE.json\n"
            "       tuna overhead [-r PAIRS] -- glm-inference [ARGS...] [::: CMD_B [ARGS...]]\n");
}

/* ---- overhead ---------------------------------------------------------------- */

/* Runs argv (TX_PROFILE=trace or unset); the decode tokens/s of its
 * llama_perf "eval time" line, or -1. */
static double decode_tps(char **argv, const char *trace)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        int nul = open("/dev/null", O_WRONLY);
        if (nul >= 0)
            dup2(nul, 1);
        if (trace)
            setenv("TX_PROFILE", trace, 1);
        else
            unsetenv("TX_PROFILE");
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            char *n = realloc(buf, cap);
            if (!n)
                break;
            buf = n;
        }
        ssize_t r = read(fds[0], buf + len, cap - len - 1);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    double tps = -1;
    if (buf) {
        buf[len] = 0;
        for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
            if (strncmp(l, "llama_perf_context_print:", 25) || !strstr(l, " eval time") ||
                strstr(l, "prompt eval"))
                continue;
            char *t = strstr(l, "runs");
            char *q = t ? strstr(t, "ms per token,") : NULL;
            if (q)
                tps = strtod(q + 13, NULL);
        }
    }
    free(buf);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? tps : -1;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median, min and max of v[0..n) (sorts v). */
static void stats(double *v, int n, double *med, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    *lo = v[0];
    *hi = v[n - 1];
}

#define OVH_MAX_RUNS 100

/* The profiler's own host time in a trace (otherData.profiler_host_ns) as a
 * percentage of its prefill + decode step spans; -1 when it has none. */
static double trace_self_pct(const char *path)
{
    json_object *root = json_object_from_file(path), *other, *v, *evs;
    double pct = -1, self = -1, passes = 0;
    if (root && json_object_object_get_ex(root, "otherData", &other) &&
        json_object_object_get_ex(other, "profiler_host_ns", &v))
        self = json_object_get_double(v) / 1000.0;
    if (self >= 0 && json_object_object_get_ex(root, "traceEvents", &evs) &&
        json_object_is_type(evs, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(evs); i++) {
            json_object *e = json_object_array_get_idx(evs, i), *x;
            const char *ph =
                json_object_object_get_ex(e, "ph", &x) ? json_object_get_string(x) : "";
            const char *nm =
                json_object_object_get_ex(e, "name", &x) ? json_object_get_string(x) : "";
            if (!strcmp(ph, "X") && (!strcmp(nm, "prefill") || !strcmp(nm, "decode step")) &&
                json_object_object_get_ex(e, "dur", &x))
                passes += json_object_get_double(x);
        }
        if (passes > 0)
            pct = 100.0 * self / passes;
    }
    json_object_put(root);
    return pct;
}

/* tuna overhead: RUNS pairs (off, on, off, on, ...) of the same command;
 * the median per-pair ratio on/off is the cost of profiling, the changes
 * between consecutive off runs are the noise floor of the measurement.
 * With "CMD_A ... ::: CMD_B ..." the pairs are (A, B), both with profiling
 * off: e.g. a build without the profiler against this one. */
static int cmd_overhead(int argc, char **argv)
{
    int runs = 5, i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            char *end;
            long r = strtol(argv[++i], &end, 10);
            runs = *end || r < 1 || r > OVH_MAX_RUNS ? -1 : (int)r;
        } else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else {
            fprintf(stderr, "tuna overhead: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    char **cmd_a = argv + i, **cmd_b = NULL;
    for (int k = i; k < argc; k++)
        if (!strcmp(argv[k], ":::")) {
            argv[k] = NULL; /* argv[argc] is NULL: both commands end */
            cmd_b = argv + k + 1;
            break;
        }
    if (i >= argc || runs < 1 || !cmd_a[0] || (cmd_b && !cmd_b[0])) {
        fprintf(stderr, "tuna overhead: %s\n",
                runs < 1 ? "-r must be a number from 1 to 100"
                : cmd_b  ? "':::' needs a command on each side"
                         : "missing command");
        usage(stderr);
        return 2;
    }
    const char *la = cmd_b ? "A (off)" : "off", *lb = cmd_b ? "B (off)" : "on";
    char trace[64];
    snprintf(trace, sizeof(trace), "/tmp/tuna-overhead-%d.json", (int)getpid());
    double off[OVH_MAX_RUNS], on[OVH_MAX_RUNS], ratio[OVH_MAX_RUNS], aa[OVH_MAX_RUNS];
    double self[OVH_MAX_RUNS];
    int nself = 0;
    for (int k = 0; k < runs; k++) { /* interleaved, so drift hits both */
        off[k] = decode_tps(cmd_a, NULL);
        on[k] = decode_tps(cmd_b ? cmd_b : cmd_a, cmd_b ? NULL : trace);
        double sp = cmd_b || on[k] <= 0 ? -1 : trace_self_pct(trace);
        if (sp >= 0)
            self[nself++] = sp;
        unlink(trace);
        if (off[k] <= 0 || on[k] <= 0) {
            fprintf(stderr,
                    "tuna overhead: pair %d: no decode tokens/s from %s (the command "
                    "failed, or it prints no llama_perf eval time line)\n",
                    k + 1, off[k] <= 0 ? la : lb);
            return 1;
        }
        ratio[k] = on[k] / off[k];
        if (k)
            aa[k - 1] = fabs(off[k] / off[k - 1] - 1);
        fprintf(stderr, "pair %d: %s %.2f tok/s, %s %.2f tok/s, ratio %.3f", k + 1, la, off[k], lb,
                on[k], ratio[k]);
        if (sp >= 0)
            fprintf(stderr, ", profiler host time %.2f%%", sp);
        fprintf(stderr, "\n");
    }
    double mo, lo_o, hi_o, mn, lo_n, hi_n, mr, lo_r, hi_r, ma = 0, lo_a = 0, hi_a = 0;
    stats(off, runs, &mo, &lo_o, &hi_o);
    stats(on, runs, &mn, &lo_n, &hi_n);
    stats(ratio, runs, &mr, &lo_r, &hi_r);
    if (runs > 1)
        stats(aa, runs - 1, &ma, &lo_a, &hi_a);
    printf("decode tokens/s, %d interleaved pairs (%s, %s, %s, %s, ...):\n", runs, la, lb, la, lb);
    printf("  %-8s median %8.2f  (min %.2f, max %.2f)\n", la, mo, lo_o, hi_o);
    printf("  %-8s median %8.2f  (min %.2f, max %.2f)\n", lb, mn, lo_n, hi_n);
    printf("  %s/%s per pair: median %.3f (min %.3f, max %.3f): %s costs %.1f%%\n",
           cmd_b ? "B" : "on", cmd_b ? "A" : "off", mr, lo_r, hi_r,
           cmd_b ? "B against A" : "profiling on", 100.0 * (1 - mr));
    if (runs > 1)
        printf("  noise floor, consecutive %s runs: median change %.1f%% (max %.1f%%)\n",
               cmd_b ? "A" : "off", 100.0 * ma, 100.0 * hi_a);
    if (nself) {
        double ms, lo_s, hi_s;
        stats(self, nself, &ms, &lo_s, &hi_s);
        printf("  profiler's own host time (the on runs' traces): median %.2f%% of the prefill + "
               "decode step time (min %.2f%%, max %.2f%%)\n",
               ms, lo_s, hi_s);
    }
    return 0;
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

/* The roof a group's arithmetic intensity meets first, whatever its speed:
 * "compute" when it needs more time at peak compute than at peak bandwidth. */
static const char *roof_of(double bytes, double flops, double pbw, double pfl)
{
    double t_mem = pbw > 0 ? bytes / pbw : 0;
    double t_cmp = pfl > 0 ? flops / pfl : 0;
    return t_cmp > t_mem ? "compute" : "memory";
}

/* The trace's expert tables (otherData.experts, libtx/profile/experts.c):
 * *out (n of them, 0 without any); -1 with a message when malformed. */
static int read_experts(const char *path, json_object *other, struct xmodel **out, int *n)
{
    json_object *xa;
    *out = NULL;
    *n = 0;
    if (!other || !json_object_object_get_ex(other, "experts", &xa))
        return 0;
    if (!json_object_is_type(xa, json_type_array))
        goto bad;
    size_t nx = json_object_array_length(xa);
    struct xmodel *xm = calloc(nx + 1, sizeof(*xm));
    if (!xm)
        goto bad;
    *out = xm;
    for (size_t i = 0; i < nx; i++) {
        json_object *o = json_object_array_get_idx(xa, i), *ls, *m[3];
        struct xmodel *x = &xm[(*n)++];
        x->model = jstr(o, "model") ? jstr(o, "model") : "model";
        x->n_experts = (int)jnum(o, "experts");
        x->top_k = (int)jnum(o, "top_k");
        if (!json_object_object_get_ex(o, "layers", &ls) ||
            !json_object_is_type(ls, json_type_array) || x->n_experts <= 0 ||
            x->n_experts > 65536 || json_object_array_length(ls) > 4096)
            goto bad;
        x->n_layers = (int)json_object_array_length(ls);
        size_t cells = (size_t)x->n_layers * (size_t)x->n_experts;
        x->layer = calloc((size_t)x->n_layers + 1, sizeof(int));
        if (!x->layer)
            goto bad;
        for (int l = 0; l < x->n_layers; l++)
            x->layer[l] = json_object_get_int(json_object_array_get_idx(ls, (size_t)l));
        static const char *const key[3] = {"selections", "cache_hits", "cache_misses"};
        double **dst[3] = {&x->sel, &x->hit, &x->miss};
        for (int k = 0; k < 3; k++) {
            if (!json_object_object_get_ex(o, key[k], &m[k])) {
                if (k == 0)
                    goto bad;
                continue;
            }
            if (!json_object_is_type(m[k], json_type_array) ||
                json_object_array_length(m[k]) != (size_t)x->n_layers)
                goto bad;
            double *v = calloc(cells + 1, sizeof(double));
            if (!v)
                goto bad;
            *dst[k] = v;
            for (int l = 0; l < x->n_layers; l++) {
                json_object *row = json_object_array_get_idx(m[k], (size_t)l);
                if (!json_object_is_type(row, json_type_array) ||
                    json_object_array_length(row) != (size_t)x->n_experts)
                    goto bad;
                for (int e = 0; e < x->n_experts; e++) {
                    double d = json_object_get_double(json_object_array_get_idx(row, (size_t)e));
                    if (!(d >= 0))
                        goto bad;
                    v[(size_t)l * x->n_experts + e] = d;
                }
            }
        }
        if (!x->hit != !x->miss)
            goto bad;
    }
    return 0;
bad:
    fprintf(stderr, "tuna report: %s: otherData.experts is malformed (expected per model "
                    "\"experts\" > 0, \"layers\" and a layers x experts \"selections\" matrix of "
                    "counts >= 0, optionally \"cache_hits\" and \"cache_misses\" alike)\n",
            path);
    return -1;
}

static void free_experts(struct xmodel *xm, int n)
{
    for (int i = 0; xm && i < n; i++) {
        free(xm[i].layer);
        free(xm[i].sel);
        free(xm[i].hit);
        free(xm[i].miss);
    }
    free(xm);
}

/* Per MoE layer of x: selections, the hottest expert and its share, the
 * cache's hits and misses. */
struct xlayer {
    double sel, hot_sel, hits, misses;
    int hot;
};

static void expert_layer(const struct xmodel *x, int l, struct xlayer *o)
{
    memset(o, 0, sizeof(*o));
    for (int e = 0; e < x->n_experts; e++) {
        size_t k = (size_t)l * x->n_experts + e;
        o->sel += x->sel[k];
        if (x->sel[k] > o->hot_sel) {
            o->hot_sel = x->sel[k];
            o->hot = e;
        }
        o->hits += x->hit ? x->hit[k] : 0;
        o->misses += x->miss ? x->miss[k] : 0;
    }
}

static json_object *experts_json(const struct xmodel *xm, int nxm)
{
    json_object *a = json_object_new_array();
    for (int i = 0; i < nxm; i++) {
        const struct xmodel *x = &xm[i];
        json_object *o = json_object_new_object(), *ls = json_object_new_array();
        json_object_object_add(o, "model", json_object_new_string(x->model));
        json_object_object_add(o, "experts", json_object_new_int(x->n_experts));
        json_object_object_add(o, "top_k", json_object_new_int(x->top_k));
        for (int l = 0; l < x->n_layers; l++) {
            struct xlayer s;
            expert_layer(x, l, &s);
            json_object *r = json_object_new_object();
            json_object_object_add(r, "layer", json_object_new_int(x->layer[l]));
            json_object_object_add(r, "selections", json_object_new_double(s.sel));
            json_object_object_add(r, "hottest_expert", json_object_new_int(s.hot));
            json_object_object_add(r, "hottest_share_pct",
                                   json_object_new_double(s.sel > 0 ? 100 * s.hot_sel / s.sel : 0));
            if (x->hit) {
                json_object_object_add(r, "cache_hits", json_object_new_double(s.hits));
                json_object_object_add(r, "cache_misses", json_object_new_double(s.misses));
            }
            json_object_array_add(ls, r);
        }
        json_object_object_add(o, "layers", ls);
        json_object_array_add(a, o);
    }
    return a;
}

static void experts_text(const struct xmodel *xm, int nxm)
{
    for (int i = 0; i < nxm; i++) {
        const struct xmodel *x = &xm[i];
        printf("\nexperts of %s: %d MoE layers x %d experts, top-%d (the HTML page's heatmap)\n",
               x->model, x->n_layers, x->n_experts, x->top_k);
        printf("%-12s %10s %8s %7s", "layer", "selections", "hottest", "share");
        if (x->hit)
            printf(" %10s %10s %9s", "cache hits", "misses", "hit rate");
        printf("\n");
        for (int l = 0; l < x->n_layers; l++) {
            struct xlayer s;
            expert_layer(x, l, &s);
            char name[32];
            snprintf(name, sizeof(name), "layers.%d", x->layer[l]);
            printf("%-12s %10.0f %8d %6.1f%%", name, s.sel, s.hot,
                   s.sel > 0 ? 100 * s.hot_sel / s.sel : 0.0);
            if (x->hit)
                printf(" %10.0f %10.0f %8.1f%%", s.hits, s.misses,
                       s.hits + s.misses > 0 ? 100 * s.hits / (s.hits + s.misses) : 0.0);
            printf("\n");
        }
    }
}

static int cmd_report(int argc, char **argv)
{
    int json = 0, top = 15;
    double peak_bw = 0, peak_fl = 0;
    const char *path = NULL, *html = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--html") && i + 1 < argc)
            html = argv[++i];
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
    struct sample *samples = calloc(n + 1, sizeof(*samples));
    int nsm = 0;
    if (!cmds || !spans || !jobs || !groups || !layers || !samples) {
        fprintf(stderr, "tuna report: out of memory\n");
        return 1;
    }
    int ncmd = 0, nsp = 0, njob = 0, ngr = 0, nly = 0, cores = 1;
    /* counters: the KV cache's peaks, the expert cache's sums */
    double kv_used = 0, kv_alloc = 0, ec_hits = 0, ec_misses = 0;
    int have_kv = 0, have_ec = 0;
    double self_us = -1, pass_us = 0;
    json_object *other = NULL, *devs = NULL;
    if (json_object_object_get_ex(root, "otherData", &other) &&
        json_object_object_get_ex(other, "devices", &devs) &&
        json_object_is_type(devs, json_type_array) && json_object_array_length(devs) > 0)
        cores = (int)jnum(json_object_array_get_idx(devs, 0), "cores");
    if (cores < 1)
        cores = 1;
    json_object *sv;
    if (other && json_object_object_get_ex(other, "profiler_host_ns", &sv))
        self_us = json_object_get_double(sv) / 1000.0;
    struct xmodel *xm = NULL;
    struct span *ph = NULL;
    int nxm = 0, rc = 1;
    if (read_experts(path, other, &xm, &nxm))
        goto out;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(evs, i);
        const char *ph = jstr(e, "ph"), *cat = jstr(e, "cat"), *name = jstr(e, "name");
        json_object *a = NULL;
        json_object_object_get_ex(e, "args", &a);
        if (ph && name && !strcmp(ph, "C")) {
            double v = jnum(a, "value");
            int kind = !strcmp(name, "busy %")          ? SM_BUSY
                       : !strcmp(name, "device memory") ? SM_MEM
                       : !strcmp(name, "KV cache used") ? SM_KV
                                                        : -1;
            if (kind >= 0) {
                samples[nsm].ts = jnum(e, "ts");
                samples[nsm].v = v;
                samples[nsm].kind = kind;
                nsm++;
            }
            if (kind == SM_KV) {
                kv_used = v > kv_used ? v : kv_used;
                have_kv = 1;
            } else if (!strcmp(name, "KV cache allocated")) {
                kv_alloc = v > kv_alloc ? v : kv_alloc;
                have_kv = 1;
            } else if (!strcmp(name, "expert cache hits")) {
                ec_hits += v;
                have_ec = 1;
            } else if (!strcmp(name, "expert cache misses")) {
                ec_misses += v;
                have_ec = 1;
            }
            continue;
        }
        if (!ph || strcmp(ph, "X") || !cat || !name)
            continue;
        if (!strcmp(cat, "cmd")) {
            struct cmd *c = &cmds[ncmd++];
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
        } else if (!strcmp(cat, "host")) {
            if (!strcmp(name, "prefill") || !strcmp(name, "decode step"))
                pass_us += jnum(e, "dur");
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
        goto out;
    }
    struct run_times rt;
    run_times(cmds, ncmd, spans, nsp, &rt);
    double wall = rt.t1 - rt.t0;
    /* phase spans: only prefill / decode step */
    int nph = 0;
    ph = calloc((size_t)nsp + 1, sizeof(*ph));
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
        groups[g].energy += c->energy;
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
            layers[k].energy += c->energy;
            layers[k].count++;
        }
    }
    double energy = 0; /* pJ of all commands */
    for (int i = 0; i < ncmd; i++)
        energy += cmds[i].energy;
    for (int g = 0; g < ngr; g++) {
        groups[g].cls = classify(groups[g].bytes, groups[g].flops, groups[g].time, peak_bw,
                                 peak_fl);
        groups[g].roof = roof_of(groups[g].bytes, groups[g].flops, peak_bw, peak_fl);
    }
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
        json_object_object_add(o, "wall_time_us", json_object_new_double(wall));
        json_object_object_add(o, "host_time_us", json_object_new_double(wall - job_time));
        if (rt.have_gen) {
            json_object_object_add(o, "load_time_us", json_object_new_double(rt.gen0 - rt.t0));
            json_object_object_add(o, "generation_time_us",
                                   json_object_new_double(rt.gen1 - rt.gen0));
        }
        json_object_object_add(o, "command_energy_uj", json_object_new_double(energy / 1e6));
        json_object_object_add(o, "peak_gbps", json_object_new_double(peak_bw));
        json_object_object_add(o, "peak_gflops", json_object_new_double(peak_fl));
        json_object_object_add(o, "peak_source", json_object_new_string(peak_src));
        json_object_object_add(o, "device_busy_pct", json_object_new_double(util));
        json_object_object_add(o, "core_utilisation_pct", json_object_new_double(core_util));
        json_object_object_add(o, "host_gap_us", json_object_new_double(gaps));
        json_object_object_add(o, "host_gaps", json_object_new_int(ngaps));
        json_object_object_add(o, "max_host_gap_us", json_object_new_double(max_gap));
        if (self_us >= 0) {
            json_object_object_add(o, "profiler_host_us", json_object_new_double(self_us));
            json_object_object_add(o, "profiler_host_pct",
                                   pass_us > 0 ? json_object_new_double(100.0 * self_us / pass_us)
                                               : NULL);
        }
        if (have_kv) {
            json_object_object_add(o, "kv_cache_peak_used_bytes", json_object_new_double(kv_used));
            json_object_object_add(o, "kv_cache_peak_allocated_bytes",
                                   json_object_new_double(kv_alloc));
        }
        if (have_ec) {
            json_object_object_add(o, "expert_cache_hits", json_object_new_double(ec_hits));
            json_object_object_add(o, "expert_cache_misses", json_object_new_double(ec_misses));
            json_object_object_add(
                o, "expert_cache_hit_pct",
                ec_hits + ec_misses > 0
                    ? json_object_new_double(100.0 * ec_hits / (ec_hits + ec_misses))
                    : NULL);
        }
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
            json_object_object_add(x, "energy_uj", json_object_new_double(groups[g].energy / 1e6));
            json_object_object_add(x, "class", json_object_new_string(groups[g].cls));
            json_object_object_add(x, "roof", json_object_new_string(groups[g].roof));
            json_object_array_add(ga, x);
        }
        json_object_object_add(o, "groups", ga);
        json_object *la = json_object_new_array();
        for (int k = 0; k < nly; k++) {
            json_object *x = json_object_new_object();
            json_object_object_add(x, "layer", json_object_new_string(layers[k].name));
            json_object_object_add(x, "time_us", json_object_new_double(layers[k].time));
            json_object_object_add(x, "commands", json_object_new_int64(layers[k].count));
            json_object_object_add(x, "energy_uj", json_object_new_double(layers[k].energy / 1e6));
            json_object_array_add(la, x);
        }
        json_object_object_add(o, "layers", la);
        if (nxm)
            json_object_object_add(o, "experts", experts_json(xm, nxm));
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
        json_object_put(o);
    } else {
        printf("tuna report: %s\n", path);
        printf("%d commands in %d jobs: %.1f us of commands, %.1f us of jobs\n", ncmd, njob, total,
               job_time);
        printf("wall time %.1f ms (first to last event of the trace), of which %.1f ms jobs "
               "on the device and %.1f ms host time (loading weights, tokenisation, building "
               "passes, gaps between jobs)",
               wall / 1e3, job_time / 1e3, (wall - job_time) / 1e3);
        if (rt.have_gen)
            printf("; load %.1f ms, generation %.1f ms", (rt.gen0 - rt.t0) / 1e3,
                   (rt.gen1 - rt.gen0) / 1e3);
        printf("\n");
        printf("peaks (%s): %.2f GB/s, %.2f GFLOP/s\n\n", peak_src, peak_bw, peak_fl);
        printf("%-44s %-7s %6s %10s %6s %8s %9s %10s  %s\n", "command", "phase", "count",
               "time us", "share", "GB/s", "GFLOP/s", "energy uJ", "class");
        for (int g = 0; g < ngr && g < top; g++)
            printf("%-44.44s %-7s %6ld %10.1f %5.1f%% %8.2f %9.2f %10.2f  %s\n", groups[g].name,
                   groups[g].phase, groups[g].count, groups[g].time,
                   100.0 * groups[g].time / total, groups[g].bytes / (groups[g].time * 1e3),
                   groups[g].flops / (groups[g].time * 1e3), groups[g].energy / 1e6,
                   groups[g].cls);
        if (nly) {
            printf("\n%-12s %10s %6s %8s %10s\n", "layer", "time us", "share", "commands",
                   "energy uJ");
            for (int k = 0; k < nly; k++)
                printf("%-12s %10.1f %5.1f%% %8ld %10.2f\n", layers[k].name, layers[k].time,
                       100.0 * layers[k].time / total, layers[k].count, layers[k].energy / 1e6);
        }
        if (energy > 0)
            printf("\nenergy of the commands: %.3f mJ (the device's power model, docs/hardware.md "
                   "section 7)\n",
                   energy / 1e9);
        printf("\ndevice busy %.1f%% of %.1f us (cores %.1f%% of %d); host gaps: %d, %.1f us "
               "(longest %.1f us)\n",
               util, span_us, core_util, cores, ngaps, gaps, max_gap);
        if (self_us >= 0 && pass_us > 0)
            printf("profiler's own host time: %.1f us, %.2f%% of the prefill + decode step time\n",
                   self_us, 100.0 * self_us / pass_us);
        if (have_kv)
            printf("KV cache: peak %.2f MiB used of %.2f MiB allocated\n", kv_used / 1048576.0,
                   kv_alloc / 1048576.0);
        if (have_ec) {
            printf("expert cache: %.0f hits, %.0f misses", ec_hits, ec_misses);
            if (ec_hits + ec_misses > 0)
                printf(" (hit rate %.1f%%)", 100.0 * ec_hits / (ec_hits + ec_misses));
            printf("\n");
        }
        experts_text(xm, nxm);
    }
    rc = 0;
    if (html) {
        struct report r = {.cmds = cmds,
                           .ncmd = ncmd,
                           .spans = spans,
                           .nsp = nsp,
                           .groups = groups,
                           .layers = layers,
                           .ngr = ngr,
                           .nly = nly,
                           .samples = samples,
                           .nsm = nsm,
                           .xm = xm,
                           .nxm = nxm,
                           .peak_bw = peak_bw,
                           .peak_fl = peak_fl,
                           .cmd_us = total,
                           .job_us = job_time,
                           .energy_pj = energy,
                           .njob = njob,
                           .t = rt};
        rc = report_write_html(html, &r);
    }
out:
    free_experts(xm, nxm);
    for (int k = 0; k < nly; k++)
        free((char *)layers[k].name);
    free(samples);
    free(ph);
    for (int k = 0; k < ncmd; k++)
        free(cmds[k].fp8_name);
    free(cmds);
    free(spans);
    free(jobs);
    free(groups);
    free(layers);
    json_object_put(root);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        txc_print_version("tuna");
        return 0;
    }
    if (!strcmp(argv[1], "record"))
        return cmd_record(argc - 1, argv + 1);
    if (!strcmp(argv[1], "report"))
        return cmd_report(argc - 1, argv + 1);
    if (!strcmp(argv[1], "overhead"))
        return cmd_overhead(argc - 1, argv + 1);
    fprintf(stderr, "tuna: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
