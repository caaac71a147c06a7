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
 * Each mode has its file: record.c, report.c (reading the trace:
 * trace_read.c, its figures: trace_figures.c, the outputs: report_text.c,
 * report_json.c, report_html.c, the expert tables: experts.c), overhead.c.
 */
#include <string.h>

#include "common/cli.h"
#include "tuna.h"

void tuna_usage(FILE *f)
{
    fprintf(f,
            "usage: tuna record -o TRACE.json -- CMD [ARGS...]\n"
            "       tuna report [--json] [--html OUT.html] [--top N] [--peak-gbps X] "
            "[--peak-gflops Y] TRACE.json\n"
            "       tuna overhead [-r PAIRS] -- glm-inference [ARGS...] [::: CMD_B [ARGS...]]\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        tuna_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        txc_print_version("tuna");
        return 0;
    }
    if (!strcmp(argv[1], "record"))
        return tuna_record(argc - 1, argv + 1);
    if (!strcmp(argv[1], "report"))
        return tuna_report(argc - 1, argv + 1);
    if (!strcmp(argv[1], "overhead"))
        return tuna_overhead(argc - 1, argv + 1);
    fprintf(stderr, "tuna: unknown command '%s'\n", argv[1]);
    tuna_usage(stderr);
    return 2;
}
