/* SPDX-License-Identifier: MIT */
/*
 * glm-analyze: architecture-aware analysis of a GLM model.
 *
 *   glm-analyze --model IN --output arch_report.json [--seq N] [--ctx N]
 *               [--device-memory SIZE] [--quiet]
 *
 * IN: a Hugging Face checkpoint directory, an .onnx model, an .smd package
 * or a config.json. The report is JSON with numbers; a short summary goes
 * to stderr. Usage: docs/tools-export.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tx/tx_analyze.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: glm-analyze --model IN --output arch_report.json [--seq N] [--ctx N]\n"
               "                   [--device-memory SIZE] [--quiet]\n"
               "\n"
               "IN: Hugging Face checkpoint directory, .onnx model, .smd package or config.json.\n"
               "  --output FILE         the JSON report ('-' for stdout)\n"
               "  --seq N               prefill length and decode context (default 512)\n"
               "  --ctx N               KV-cache length for the memory figures (default 4096)\n"
               "  --device-memory SIZE  device memory to fit, e.g. 8G (default 8G)\n");
}

static int write_all(const char *path, const char *txt)
{
    if (!strcmp(path, "-")) {
        fputs(txt, stdout);
        return fflush(stdout) == 0 ? 0 : -1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    int ok = fputs(txt, f) >= 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int parse_pos(const char *s, int *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || *end || x < 1 || x > (1 << 24))
        return -1;
    *v = (int)x;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"model", required_argument, NULL, 'm'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"seq", required_argument, NULL, 's'},
                                         {"ctx", required_argument, NULL, 'c'},
                                         {"device-memory", required_argument, NULL, 'M'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *model = NULL, *out = NULL;
    int seq = 512, ctx = 4096, quiet = 0, c;
    int64_t mem = 8ll << 30;
    while ((c = getopt_long(argc, argv, "m:o:s:c:M:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            model = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 's':
            if (parse_pos(optarg, &seq) < 0) {
                fprintf(stderr, "glm-analyze: --seq %s: expected a positive integer\n", optarg);
                return 2;
            }
            break;
        case 'c':
            if (parse_pos(optarg, &ctx) < 0) {
                fprintf(stderr, "glm-analyze: --ctx %s: expected a positive integer\n", optarg);
                return 2;
            }
            break;
        case 'M':
            mem = tx_parse_size(optarg);
            if (mem <= 0) {
                fprintf(stderr, "glm-analyze: --device-memory %s: expected a size like 8G\n",
                        optarg);
                return 2;
            }
            break;
        case 'q':
            quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc || !model || !out) {
        if (optind < argc)
            fprintf(stderr, "glm-analyze: unexpected argument %s\n", argv[optind]);
        else
            fprintf(stderr, "glm-analyze: --model and --output are required\n");
        usage(stderr);
        return 2;
    }
    char err[TX_ERR_MAX];
    struct glm_config cfg;
    const char *fmt;
    if (tx_analyze_load_config(model, &cfg, &fmt, err, sizeof(err)) < 0) {
        fprintf(stderr, "glm-analyze: %s\n", err);
        return 1;
    }
    struct tx_analysis a;
    if (tx_analyze_config(&cfg, seq, ctx, (uint64_t)mem, &a, err, sizeof(err)) < 0) {
        fprintf(stderr, "glm-analyze: %s\n", err);
        return 1;
    }
    char *json = tx_analysis_json(&a, &cfg, model, fmt);
    char *sum = tx_analysis_summary(&a, &cfg);
    int rc = 0;
    if (!json || !sum) {
        fprintf(stderr, "glm-analyze: out of memory\n");
        rc = 1;
    } else if (write_all(out, json) < 0) {
        fprintf(stderr, "glm-analyze: %s: cannot write the report\n", out);
        rc = 1;
    } else if (!quiet) {
        fputs(sum, stderr);
        if (strcmp(out, "-"))
            fprintf(stderr, "glm-analyze: report written to %s\n", out);
    }
    free(json);
    free(sum);
    tx_analysis_free(&a);
    return rc;
}
