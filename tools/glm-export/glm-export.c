/* SPDX-License-Identifier: MIT */
/*
 * glm-export: convert a GLM model (Hugging Face checkpoint directory or
 * ONNX) into an .smd deployment package for the TX8.
 *
 *   glm-export --input IN --output OUT.smd [--quant none|fp16|bf16|int8]
 *              [--optimize sparse] [--precision TYPE=PREC,...]
 *              [--group-size N] [--sparsity F] [--tokenizer FILE]
 *              [--tokenizer-config FILE] [--name NAME] [--threads N] [--quiet]
 *
 * Usage: docs/tools-export.md; package format: docs/smd-format.md.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm_config.h>
#include <tx/tx_export.h>

#include "common/cli.h"

static volatile int cancelled;

static void on_signal(int sig)
{
    (void)sig;
    cancelled = 1;
}

struct ignored {
    int quiet;
    unsigned mtp, unknown;
};

/* MTP tensors are summarised, unknown ones named (the first few): an
 * unknown name usually means an export renamed the parameters. */
static void on_ignored(void *ctx, const char *name, int is_mtp)
{
    struct ignored *ig = ctx;
    if (is_mtp) {
        ig->mtp++;
        return;
    }
    if (!ig->quiet && ig->unknown < 10)
        fprintf(stderr, "glm-export: ignoring %s: a non-parameter buffer\n", name);
    ig->unknown++;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: glm-export --input IN --output OUT.smd [--quant none|fp16|bf16|int8]\n"
               "                  [--optimize sparse] [--precision TYPE=PREC,...]\n"
               "                  [--group-size N] [--sparsity F] [--tokenizer FILE]\n"
               "                  [--tokenizer-config FILE] [--name NAME] [--threads N] [--quiet]\n"
               "\n"
               "IN is a Hugging Face checkpoint directory or an .onnx model.\n"
               "Default plan (the golden configuration): embedding INT8, attention FP16,\n"
               "MLP/experts INT8, norms FP32, output FP32.\n"
               "  --quant none       everything FP32\n"
               "  --quant fp16|bf16  every weight matrix FP16/BF16 (norms FP32)\n"
               "  --quant int8       the golden configuration\n"
               "  --precision        per layer type: embedding, attention, mlp, experts, norm,\n"
               "                     output = fp32|fp16|bf16|int8 (applied after --quant)\n"
               "  --group-size N     INT8 scales per group of N columns (multiple of 32;\n"
               "                     default 0 = one scale per output channel)\n"
               "  --optimize sparse  prune MLP/expert weights to the TX8 block-sparse format\n"
               "  --sparsity F       fraction of 32-column blocks pruned per row (default 0.5)\n"
               "  --verify PKG.smd   check every checksum of a package and exit; after an\n"
               "                     export (with --input/--output), check the new package\n"
               "PLAN words for --precision (also glm-inference --precision): golden, fp32,\n"
               "fp16, bf16, int8 and TYPE=PREC items (docs/precision.md).\n");
    fprintf(f, "\nArchitectures (config.json architectures[0], model_type):\n%s",
            glm_arch_supported());
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"input", required_argument, NULL, 'i'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"quant", required_argument, NULL, 'Q'},
                                         {"optimize", required_argument, NULL, 'O'},
                                         {"precision", required_argument, NULL, 'P'},
                                         {"group-size", required_argument, NULL, 'g'},
                                         {"sparsity", required_argument, NULL, 'r'},
                                         {"tokenizer", required_argument, NULL, 'T'},
                                         {"tokenizer-config", required_argument, NULL, 'C'},
                                         {"name", required_argument, NULL, 'n'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"verify", required_argument, NULL, 'V'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct tx_export_opts o;
    tx_export_default_opts(&o);
    o.progress = 1;
    const char *in = NULL, *out = NULL, *quant = NULL, *prec = NULL;
    int sparse = 0, quiet = 0;
    const char *verify = NULL;
    long group = 0;
    char err[TX_ERR_MAX];
    int c;
    while ((c = txc_getopt("glm-export", argc, argv, "i:o:Q:O:P:g:r:T:C:n:t:qhV:", opts)) != -1) {
        switch (c) {
        case 'i':
            in = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 'Q':
            quant = optarg;
            break;
        case 'O':
            if (!strcmp(optarg, "sparse"))
                sparse = 1;
            else if (!strcmp(optarg, "none"))
                sparse = 0;
            else {
                fprintf(stderr, "glm-export: --optimize %s: expected sparse or none\n", optarg);
                return 2;
            }
            break;
        case 'P':
            prec = optarg;
            break;
        case 'g':
            if (txc_parse_long(optarg, 0, 1 << 20, &group) < 0 || group % 32) {
                fprintf(stderr,
                        "glm-export: --group-size: '%s' is not an integer in [0, 1048576] (0 or "
                        "a multiple of 32)\n",
                        optarg);
                return 2;
            }
            break;
        case 'r':
            if (txc_opt_double("glm-export", "--sparsity", optarg, 0, 1, TXC_HI_OPEN, &o.sparsity) <
                0)
                return 2;
            break;
        case 'T':
            o.tokenizer = optarg;
            break;
        case 'C':
            o.tokenizer_config = optarg;
            break;
        case 'n':
            o.model_name = optarg;
            break;
        case 't': {
            if (txc_opt_int("glm-export", "--threads", optarg, 1, 256, NULL, &o.threads) < 0)
                return 2;
            break;
        }
        case 'q':
            quiet = 1;
            o.progress = 0;
            break;
        case 'V':
            verify = optarg;
            break;
        default: /* --help, or an option getopt_long has reported */
            return txc_help_or_usage(c, usage);
        }
    }
    if (optind < argc)
        return txc_usage_error("glm-export", usage, "unexpected argument %s", argv[optind]);
    if (verify && !in && !out)
        return txc_verify_package("glm-export", verify);
    if (!in || !out)
        return txc_usage_error("glm-export", usage, "--input and --output are required");
    if (verify && strcmp(verify, out)) {
        fprintf(stderr,
                "glm-export: --verify %s with --output %s: give the same file, or "
                "--verify alone\n",
                verify, out);
        return 2;
    }
    if (quant && tx_plan_apply_quant(o.plan, quant, err, sizeof(err)) < 0) {
        fprintf(stderr, "glm-export: %s\n", err);
        return 2;
    }
    if (prec && tx_plan_apply_spec(o.plan, prec, err, sizeof(err)) < 0) {
        fprintf(stderr, "glm-export: %s\n", err);
        return 2;
    }
    for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++) {
        if (o.plan[l].precision == TX_SMD_PREC_INT8_MIXED && l != TX_SMD_LAYER_EMBEDDING)
            o.plan[l].group_size = (uint32_t)group;
        if (sparse && (l == TX_SMD_LAYER_MLP || l == TX_SMD_LAYER_EXPERT))
            o.plan[l].flags |= TX_SMD_PLANF_SPARSE;
    }
    o.quant = quant ? quant : "int8 (golden, default)";
    struct ignored ig = {.quiet = quiet};
    o.on_ignored = on_ignored;
    o.ctx = &ig;
    o.cancel = &cancelled;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    char planbuf[256];
    if (!quiet)
        fprintf(stderr, "glm-export: %s -> %s\nglm-export: plan %s%s\n", in, out,
                tx_plan_format(o.plan, planbuf, sizeof(planbuf)),
                sparse ? ", FFN/experts block-sparse" : "");
    struct tx_export_stats st;
    int rc = tx_export(in, out, &o, &st, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "glm-export: %s\n", err);
        return rc == TX_ECANCELED ? 130 : 1;
    }
    if (!quiet) {
        fprintf(stderr,
                "glm-export: wrote %s: %llu tensors, %.2f M parameters, %.1f MB (input %.1f MB) "
                "in %.2f s\n",
                out, (unsigned long long)st.tensors, st.params / 1e6, st.output_bytes / 1e6,
                st.input_bytes / 1e6, st.seconds);
        if (ig.mtp)
            fprintf(stderr, "glm-export: %u tensors of the MTP layer ignored\n", ig.mtp);
        if (ig.unknown > 10)
            fprintf(stderr, "glm-export: %u unknown tensors ignored in all\n", ig.unknown);
        fprintf(stderr, "glm-export: relative RMS error of the stored weights:");
        for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++)
            if (st.elems[l])
                fprintf(stderr, " %s %.2e", tx_smd_layer_name(l),
                        st.sq_ref[l] > 0 ? sqrt(st.sq_err[l] / st.sq_ref[l]) : 0.0);
        fputc('\n', stderr);
        if (sparse)
            fprintf(stderr,
                    "glm-export: sparse: %llu matrices, pruned %.1f%% of their weights; MACs per "
                    "token -%.1f%% in FFN/experts, -%.1f%% over all weight matrices\n",
                    (unsigned long long)st.sparse_tensors, 100 * st.pruned_fraction,
                    100 * st.ffn_mac_reduction, 100 * st.model_mac_reduction);
    }
    if (verify)
        return txc_verify_package("glm-export", out);
    return 0;
}
