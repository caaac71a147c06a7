/* SPDX-License-Identifier: MIT */
/*
 * tx-top: a top-like monitor of TX8 devices (docs/tx-top.md).
 *
 *   tx-top [-d TENTHS] [-d SPEC]... [-i 0,1] [-n N]    full-screen view
 *   tx-top -L                                           list devices
 *   tx-top --json [-l] [-n N]                           JSON snapshot(s)
 *   tx-top --query=FIELDS [--format=csv,...] [-l [SEC]]   nvidia-smi style CSV
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cli.h"
#include "txtop.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tx-top [options]\n"
               "\n"
               "Monitor TX8 devices: utilisation, device memory, the processes using them\n"
               "and the expert load of the models they run.\n"
               "\n"
               "  -d, --delay TENTHS    refresh every TENTHS tenths of a second (default 10)\n"
               "  -d, --device SPEC     monitor SPEC only (repeatable): emu:/path.sock,\n"
               "                        /dev/accel/accelN or accelN; -d takes a number as the\n"
               "                        delay and anything else as a device\n"
               "  -i, --id LIST         only devices LIST (indices of -L, e.g. 0,1)\n"
               "  -n, --iterations N    stop after N refreshes\n"
               "  -L, --list            list the devices, one line each, and exit\n"
               "  -J, --json            print one JSON snapshot (figures over one delay) and exit\n"
               "  -l, --loop [SEC]      with --json: one JSON object per line per refresh;\n"
               "                        with --query: rows every SEC seconds (default: the delay)\n"
               "      --query=FIELDS    nvidia-smi style CSV rows, one per device: index, name,\n"
               "                        timestamp, power.draw, power.draw.average, power.limit,\n"
               "                        energy, util, memory.used, memory.total, memory.free\n"
               "      --format=FMT      csv[,noheader][,nounits] (default csv)\n"
               "  -h, --help            this help\n"
               "  -V, --version         version\n"
               "\n"
               "Devices are found in /sys/class/accel (driver tx8), $TX_DEVICE and\n"
               "/run/tx8/*.sock. Keys: q quit, arrows select, k kill (SIGTERM, asks first),\n"
               "F6 or < > sort column, r reverse, e expert histogram of all layers / the worst.\n"
               "Exit status: 0 ok, 1 no usable device or a failure, 2 bad usage.\n");
}

static void on_signal(int sig)
{
    (void)sig;
    tt_stop = 1;
}

/* Sleep until the deadline (CLOCK_MONOTONIC ns) or a stop signal. */
static void sleep_until(uint64_t deadline)
{
    while (!tt_stop) {
        uint64_t now = tt_now_ns();
        struct timespec ts;

        if (now >= deadline)
            return;
        ts.tv_sec = (time_t)((deadline - now) / 1000000000ull);
        ts.tv_nsec = (long)((deadline - now) % 1000000000ull);
        nanosleep(&ts, NULL);
    }
}

static int parse_list(const char *arg, struct tt_options *o)
{
    const char *p = arg;

    while (*p) {
        char *end;
        long v;

        errno = 0;
        v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v >= TT_MAX_DEVICES || (*end && *end != ','))
            return -1;
        if (o->nselect >= TT_MAX_DEVICES)
            return -1;
        o->select[o->nselect++] = (int)v;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p)
            return -1;
    }
    return o->nselect ? 0 : -1;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

static int any_ok(const struct tt_state *s)
{
    for (size_t i = 0; i < s->ndev; i++)
        if (s->devs[i].ok)
            return 1;
    return 0;
}

static int print_json(const struct tt_state *s, bool one_line)
{
    char *js = tt_json(s, one_line);

    if (!js) {
        fprintf(stderr, "tx-top: out of memory\n");
        return -1;
    }
    if (puts(js) == EOF || fflush(stdout) == EOF) {
        free(js);
        return -1; /* the reader went away */
    }
    free(js);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"delay", required_argument, NULL, 'D'}, {"device", required_argument, NULL, 'S'},
        {"id", required_argument, NULL, 'i'},    {"iterations", required_argument, NULL, 'n'},
        {"list", no_argument, NULL, 'L'},        {"json", no_argument, NULL, 'J'},
        {"loop", no_argument, NULL, 'l'},        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},     {"query", required_argument, NULL, 'Q'},
        {"format", required_argument, NULL, 'F'},  {NULL, 0, NULL, 0},
    };
    struct tt_options o;
    struct tt_state s;
    struct sigaction sa;
    unsigned long iterations = 0;
    long tenths = 10;
    bool list = false, json = false, loop = false;
    const char *query = NULL, *format = NULL;
    struct tt_query q;
    char err[512];
    int c, status = 0;

    memset(&o, 0, sizeof(o));
    memset(&s, 0, sizeof(s));
    while ((c = getopt_long(argc, argv, "d:i:n:LJlhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
        case 'D':
            if (all_digits(optarg)) {
                tenths = strtol(optarg, NULL, 10);
                if (tenths < 1 || tenths > 36000) {
                    fprintf(stderr,
                            "tx-top: -d %s: the delay must be 1..36000 tenths of a "
                            "second\n",
                            optarg);
                    return 2;
                }
                break;
            }
            if (c == 'D') {
                fprintf(stderr, "tx-top: --delay %s: not a number of tenths of a second\n", optarg);
                return 2;
            }
            /* not a number: a device */
            __attribute__((fallthrough));
        case 'S':
            if (o.nspecs >= TT_MAX_SPECS) {
                fprintf(stderr, "tx-top: at most %d devices with -d\n", TT_MAX_SPECS);
                return 2;
            }
            o.specs[o.nspecs++] = optarg;
            break;
        case 'i':
            if (parse_list(optarg, &o) < 0) {
                fprintf(stderr, "tx-top: -i %s: expected device indices like 0 or 0,1\n", optarg);
                return 2;
            }
            break;
        case 'n': {
            char *end;

            errno = 0;
            iterations = strtoul(optarg, &end, 10);
            if (errno || *end || !all_digits(optarg) || iterations == 0) {
                fprintf(stderr, "tx-top: -n %s: expected a positive number of refreshes\n", optarg);
                return 2;
            }
            break;
        }
        case 'L':
            list = true;
            break;
        case 'J':
            json = true;
            break;
        case 'l':
            loop = true;
            /* nvidia-smi's "-l SEC": a number after -l is its period */
            if (optind < argc && all_digits(argv[optind])) {
                long sec = strtol(argv[optind++], NULL, 10);

                if (sec < 1 || sec > 3600) {
                    fprintf(stderr, "tx-top: -l %ld: the period must be 1..3600 seconds\n", sec);
                    return 2;
                }
                tenths = sec * 10;
            }
            break;
        case 'Q':
            query = optarg;
            break;
        case 'F':
            format = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            txc_print_version("tx-top");
            return 0;
        default:
            fprintf(stderr, "Try 'tx-top --help'.\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tx-top: unexpected argument '%s'\nTry 'tx-top --help'.\n", argv[optind]);
        return 2;
    }
    if (format && !query) {
        fprintf(stderr, "tx-top: --format needs --query\n");
        return 2;
    }
    if (query && (json || list)) {
        fprintf(stderr, "tx-top: --query excludes --json and -L\n");
        return 2;
    }
    if (query && tt_query_parse(query, format, &q, err, sizeof(err))) {
        fprintf(stderr, "tx-top: %s\n", err);
        return 2;
    }
    if (loop && !json && !query) {
        fprintf(stderr, "tx-top: -l needs --json or --query\n");
        return 2;
    }
    if (list && json) {
        fprintf(stderr, "tx-top: -L and --json exclude each other\n");
        return 2;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    s.interval = (double)tenths / 10.0;
    if (tt_discover(&s, &o, err, sizeof(err)) < 0) {
        fprintf(stderr, "tx-top: %s\n", err);
        tt_free(&s);
        return 1;
    }
    /* one-shot outputs wait for the answers (a handshake times out after
     * 5 s); the screen comes up at once and shows "attaching" meanwhile */
    tt_attach(&s, list || json || query ? 6000 : 200);

    if (list) {
        tt_sample(&s);
        tt_list(&s);
        status = any_ok(&s) ? 0 : 1;
    } else if (json || query) {
        uint64_t interval = (uint64_t)tenths * 100000000ull, next;
        unsigned long n = 0;

        tt_sample(&s); /* baseline of the rates */
        next = tt_now_ns() + interval;
        for (;;) {
            sleep_until(next);
            if (tt_stop)
                break;
            next += interval;
            tt_sample(&s);
            if (query ? tt_query_print(&s, &q, n == 0, stdout) < 0 : print_json(&s, loop) < 0) {
                status = loop ? 0 : 1;
                break;
            }
            n++;
            if (!any_ok(&s))
                status = 1;
            if (!loop || (iterations && n >= iterations))
                break;
        }
    } else {
        if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
            fprintf(stderr, "tx-top: not a terminal (use --json or -L)\n");
            tt_free(&s);
            return 1;
        }
        tt_sample(&s);
        status = tt_screen(&s, iterations);
    }
    tt_free(&s);
    return status;
}
