/* SPDX-License-Identifier: MIT */
/*
 * tuna overhead [-r PAIRS] -- glm-inference ARGS... [::: CMD_B ARGS...]:
 * RUNS pairs (off, on, off, on, ...) of the same command; the median
 * per-pair ratio on/off is the cost of profiling, the changes between
 * consecutive off runs are the noise floor of the measurement. With
 * "CMD_A ... ::: CMD_B ..." the pairs are (A, B), both with profiling off:
 * e.g. a build without the profiler against this one.
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "tuna.h"

#define OVH_MAX_RUNS 100

/* The child's side of decode_tps: stderr into the pipe, stdout to
 * /dev/null, TX_PROFILE=trace or unset; runs argv. */
static void exec_measured(char **argv, const char *trace, int fds[2])
{
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

/* The decode tokens/s of the llama_perf "eval time" line in buf, or -1. */
static double eval_tps(char *buf)
{
    double tps = -1;
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "llama_perf_context_print:", 25) || !strstr(l, " eval time") ||
            strstr(l, "prompt eval"))
            continue;
        char *t = strstr(l, "runs");
        char *q = t ? strstr(t, "ms per token,") : NULL;
        if (q)
            tps = strtod(q + 13, NULL);
    }
    return tps;
}

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
    if (pid == 0)
        exec_measured(argv, trace, fds);
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
        tps = eval_tps(buf);
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

/* The measurement: the commands, the pairs' figures. */
struct overhead {
    int runs;
    char **cmd_a, **cmd_b; /* cmd_b: NULL, or B of "A ::: B" */
    const char *la, *lb;   /* the two sides' labels */
    double off[OVH_MAX_RUNS], on[OVH_MAX_RUNS], ratio[OVH_MAX_RUNS], aa[OVH_MAX_RUNS];
    double self[OVH_MAX_RUNS];
    int nself;
};

/* The options and commands into o; 0, or 2 with a message. */
static int overhead_args(int argc, char **argv, struct overhead *o)
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
            tuna_usage(stderr);
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
        tuna_usage(stderr);
        return 2;
    }
    o->runs = runs;
    o->cmd_a = cmd_a;
    o->cmd_b = cmd_b;
    o->la = cmd_b ? "A (off)" : "off";
    o->lb = cmd_b ? "B (off)" : "on";
    return 0;
}

/* The interleaved pairs (so drift hits both sides); 0, or 1 with a
 * message when a run gave no tokens/s. */
static int overhead_pairs(struct overhead *o)
{
    char trace[64];
    snprintf(trace, sizeof(trace), "/tmp/tuna-overhead-%d.json", (int)getpid());
    for (int k = 0; k < o->runs; k++) {
        o->off[k] = decode_tps(o->cmd_a, NULL);
        o->on[k] = decode_tps(o->cmd_b ? o->cmd_b : o->cmd_a, o->cmd_b ? NULL : trace);
        double sp = o->cmd_b || o->on[k] <= 0 ? -1 : trace_self_pct(trace);
        if (sp >= 0)
            o->self[o->nself++] = sp;
        unlink(trace);
        if (o->off[k] <= 0 || o->on[k] <= 0) {
            fprintf(stderr,
                    "tuna overhead: pair %d: no decode tokens/s from %s (the command "
                    "failed, or it prints no llama_perf eval time line)\n",
                    k + 1, o->off[k] <= 0 ? o->la : o->lb);
            return 1;
        }
        o->ratio[k] = o->on[k] / o->off[k];
        if (k)
            o->aa[k - 1] = fabs(o->off[k] / o->off[k - 1] - 1);
        fprintf(stderr, "pair %d: %s %.2f tok/s, %s %.2f tok/s, ratio %.3f", k + 1, o->la,
                o->off[k], o->lb, o->on[k], o->ratio[k]);
        if (sp >= 0)
            fprintf(stderr, ", profiler host time %.2f%%", sp);
        fprintf(stderr, "\n");
    }
    return 0;
}

/* The medians, the ratio, the noise floor, the profiler's own time. */
static void overhead_print(struct overhead *o)
{
    int runs = o->runs;
    const char *la = o->la, *lb = o->lb;
    char **cmd_b = o->cmd_b;
    double mo, lo_o, hi_o, mn, lo_n, hi_n, mr, lo_r, hi_r, ma = 0, lo_a = 0, hi_a = 0;
    stats(o->off, runs, &mo, &lo_o, &hi_o);
    stats(o->on, runs, &mn, &lo_n, &hi_n);
    stats(o->ratio, runs, &mr, &lo_r, &hi_r);
    if (runs > 1)
        stats(o->aa, runs - 1, &ma, &lo_a, &hi_a);
    printf("decode tokens/s, %d interleaved pairs (%s, %s, %s, %s, ...):\n", runs, la, lb, la, lb);
    printf("  %-8s median %8.2f  (min %.2f, max %.2f)\n", la, mo, lo_o, hi_o);
    printf("  %-8s median %8.2f  (min %.2f, max %.2f)\n", lb, mn, lo_n, hi_n);
    printf("  %s/%s per pair: median %.3f (min %.3f, max %.3f): %s costs %.1f%%\n",
           cmd_b ? "B" : "on", cmd_b ? "A" : "off", mr, lo_r, hi_r,
           cmd_b ? "B against A" : "profiling on", 100.0 * (1 - mr));
    if (runs > 1)
        printf("  noise floor, consecutive %s runs: median change %.1f%% (max %.1f%%)\n",
               cmd_b ? "A" : "off", 100.0 * ma, 100.0 * hi_a);
    if (o->nself) {
        double ms, lo_s, hi_s;
        stats(o->self, o->nself, &ms, &lo_s, &hi_s);
        printf("  profiler's own host time (the on runs' traces): median %.2f%% of the prefill + "
               "decode step time (min %.2f%%, max %.2f%%)\n",
               ms, lo_s, hi_s);
    }
}

int tuna_overhead(int argc, char **argv)
{
    struct overhead *o = calloc(1, sizeof(*o));
    if (!o) {
        fprintf(stderr, "tuna overhead: out of memory\n");
        return 1;
    }
    int rc = overhead_args(argc, argv, o);
    if (!rc)
        rc = overhead_pairs(o);
    if (!rc)
        overhead_print(o);
    free(o);
    return rc;
}
