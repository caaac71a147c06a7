/* SPDX-License-Identifier: MIT */
/*
 * glm-analyze: architecture-aware analysis of a GLM model.
 *
 *   glm-analyze --model IN --output arch_report.json [--seq N] [--ctx N]
 *               [--device-memory SIZE] [--devices N [--ep-groups G]] [--quiet]
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
#include <tx-internal/tx_analyze.h>

#include "common/analyze_ep.h"
#include "common/cli.h"

#include <json-c/json.h>

/* Adds the JSON object text `obj` as `key` of the report *json and the
 * lines `lines` to the summary *sum (both malloc'd, consumed); *json or
 * *sum is NULL when out of memory. */
static void add_section(char **json, char **sum, const char *key, char *obj, char *lines)
{
    struct json_object *r = json_tokener_parse(*json), *o = obj ? json_tokener_parse(obj) : NULL;
    char *nj = NULL, *ns = NULL;
    if (r && o) {
        json_object_object_add(r, key, o);
        o = NULL;
        const char *t = json_object_to_json_string_ext(
            r, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (t && (nj = malloc(strlen(t) + 2)))
            strcat(strcpy(nj, t), "\n");
    }
    if (lines && (ns = malloc(strlen(*sum) + strlen(lines) + 1)))
        strcat(strcpy(ns, *sum), lines);
    json_object_put(r);
    json_object_put(o);
    free(obj);
    free(lines);
    free(*json);
    free(*sum);
    *json = nj;
    *sum = ns;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: glm-analyze --model IN --output arch_report.json [--seq N] [--ctx N]\n"
               "                   [--device-memory SIZE] [--devices N [--ep-groups G]] [--quiet]\n"
               "\n"
               "IN: Hugging Face checkpoint directory, .onnx model, .smd package or config.json.\n"
               "  --output FILE         the JSON report ('-' for stdout)\n"
               "  --seq N               prefill length and decode context (default 512)\n"
               "  --ctx N               KV-cache length for the memory figures (default 4096)\n"
               "  --device-memory SIZE  device memory to fit, e.g. 8G (default 8G)\n"
               "  --devices N           recommend a placement on N devices (expert parallelism:\n"
               "                        memory per device, dispatch bytes per token;\n"
               "                        docs/multi-device.md)\n"
               "  --ep-groups G         expert_parallel groups per MoE layer (default: every\n"
               "                        expert its own group)\n");
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
                                         {"devices", required_argument, NULL, 'D'},
                                         {"ep-groups", required_argument, NULL, 'G'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *model = NULL, *out = NULL;
    long long seq = 512, ctx = 4096, ndev = 0, groups = 0;
    int quiet = 0, c;
    int64_t mem = 8ll << 30;
    while ((c = txc_getopt("glm-analyze", argc, argv, "m:o:s:c:M:qhD:G:", opts)) != -1) {
        switch (c) {
        case 'D':
            if (txc_opt_long("glm-analyze", "--devices", optarg, 1, TX_EP_PLAN_MAX, NULL, &ndev) <
                0)
                return 2;
            break;
        case 'G':
            if (txc_opt_long("glm-analyze", "--ep-groups", optarg, 1, 1 << 20, NULL, &groups) < 0)
                return 2;
            break;
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
                        "K, M, G); try --help\n",
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
    struct tx_ckpt_storage stored;
    int is_ckpt = tx_analyze_load_config_storage(model, &cfg, &fmt, &stored, err, sizeof(err));
    if (is_ckpt < 0) {
        fprintf(stderr, "glm-analyze: %s\n", err);
        return 1;
    }
    struct tx_analysis a;
    if (tx_analyze_config(&cfg, (int)seq, (int)ctx, (uint64_t)mem, &a, err, sizeof(err)) < 0) {
        fprintf(stderr, "glm-analyze: %s\n", err);
        return 1;
    }
    if (groups && !ndev)
        return txc_usage_error("glm-analyze", usage, "--ep-groups needs --devices");
    char *json = tx_analysis_json(&a, &cfg, model, fmt);
    char *sum = tx_analysis_summary(&a, &cfg);
    if (ndev && json && sum) {
        struct tx_ep_plan ep;
        if (tx_analyze_ep(&a, &cfg, (int)ndev, (int)groups, &ep, err, sizeof(err)) < 0) {
            fprintf(stderr, "glm-analyze: %s\n", err);
            free(json);
            free(sum);
            tx_analysis_free(&a);
            return 1;
        }
        add_section(&json, &sum, "expert_parallel_placement", tx_ep_plan_json(&ep),
                    tx_ep_plan_summary(&ep));
    }
    if (is_ckpt && json && sum) /* how the checkpoint is stored (FP8, BF16...) */
        add_section(&json, &sum, "stored", tx_storage_json(&stored), tx_storage_summary(&stored));
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
