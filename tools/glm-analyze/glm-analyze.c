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
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm_config.h>
#include <tx/tx_analyze.h>

#include "common/cli.h"

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
    fprintf(f, "\nArchitectures (config.json architectures[0], model_type):\n%s",
            glm_arch_supported());
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
    long long seq = 512, ctx = 4096;
    int quiet = 0, c;
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
            if (txc_opt_long("glm-analyze", "--seq", optarg, 1, 1 << 24, NULL, &seq) < 0)
                return 2;
            break;
        case 'c':
            if (txc_opt_long("glm-analyze", "--ctx", optarg, 1, 1 << 24, NULL, &ctx) < 0)
                return 2;
            break;
        case 'M':
            mem = tx_parse_size(optarg);
            if (mem <= 0) {
                fprintf(stderr,
                        "glm-analyze: --device-memory: '%s' is not a size > 0 (bytes, or with "
                        "K, M, G)\n",
                        optarg);
                return 2;
            }
            break;
        case 'q':
            quiet = 1;
            break;
        default: /* --help, or an option getopt_long has reported */
            return txc_help_or_usage(c, usage);
        }
    }
    if (optind < argc)
        return txc_usage_error("glm-analyze", usage, "unexpected argument %s", argv[optind]);
    if (!model || !out)
        return txc_usage_error("glm-analyze", usage, "--model and --output are required");
    char err[TX_ERR_MAX];
    struct glm_config cfg;
    const char *fmt;
    if (tx_analyze_load_config(model, &cfg, &fmt, err, sizeof(err)) < 0) {
        fprintf(stderr, "glm-analyze: %s\n", err);
        return 1;
    }
    struct tx_analysis a;
    if (tx_analyze_config(&cfg, (int)seq, (int)ctx, (uint64_t)mem, &a, err, sizeof(err)) < 0) {
        fprintf(stderr, "glm-analyze: %s\n", err);
        return 1;
    }
    char *json = tx_analysis_json(&a, &cfg, model, fmt);
    char *sum = tx_analysis_summary(&a, &cfg);
    int rc = 0;
    if (!json || !sum) {
        fprintf(stderr, "glm-analyze: out of memory\n");
        rc = 1;
    } else if (txc_write_text(out, json) < 0) {
        fprintf(stderr, "glm-analyze: cannot write the report: %s\n", tx_last_error());
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
