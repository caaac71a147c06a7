/* SPDX-License-Identifier: MIT */
/* glm-export's options: the usage text and the command line into struct
 * export_cli, checked (docs/tools-export.md). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <tx/glm_config.h>

#include "common/cli.h"
#include "glm_export.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: glm-export --input IN --output OUT.smd [--quant none|fp16|bf16|int8|fp8]\n"
               "                  [--optimize sparse] [--precision TYPE=PREC,...]\n"
               "                  [--group-size N] [--sparsity F] [--tokenizer FILE]\n"
               "                  [--tokenizer-config FILE] [--name NAME] [--threads N] [--quiet]\n"
               "                  [--no-mtp]\n"
               "\n"
               "IN is a Hugging Face checkpoint directory or an .onnx model.\n"
               "Default plan (the golden configuration): embedding INT8, attention FP16,\n"
               "MLP/experts INT8, norms FP32, output FP32.\n"
               "  --quant none       everything FP32\n"
               "  --quant fp16|bf16  every weight matrix FP16/BF16 (norms FP32)\n"
               "  --quant int8       the golden configuration\n"
               "  --quant fp8        the projections FP8 E4M3 with a scale per 128x128 block\n"
               "                     (an FP8 checkpoint's bit for bit), embedding and output\n"
               "                     FP32, as the FP8 releases keep them\n"
               "  --precision        per layer type: embedding, attention, mlp, experts, norm,\n"
               "                     output = fp32|fp16|bf16|int8|fp8 (applied after --quant)\n"
               "  --group-size N     INT8 scales per group of N columns (multiple of 32;\n"
               "                     default 0 = one scale per output channel)\n"
               "  --optimize sparse  prune MLP/expert weights to the TX8 block-sparse format\n"
               "  --sparsity F       fraction of 32-column blocks pruned per row (default 0.5)\n"
               "  --no-mtp           leave the MTP (NextN) layer out (it is kept by default\n"
               "                     when the checkpoint has all of it: --spec-type mtp)\n"
               "  --verify PKG.smd   check every checksum of a package and exit; after an\n"
               "                     export (with --input/--output), check the new package\n"
               "PLAN words for --precision (also glm-inference --precision): golden, fp32,\n"
               "fp16, bf16, int8 and TYPE=PREC items (docs/precision.md).\n");
    fprintf(f, "\nArchitectures (config.json architectures[0], model_type):\n%s",
            glm_arch_supported());
}

/* One option (ch, its optarg) into c (*prec: --precision, *group:
 * --group-size); -1 to go on, else the exit status. */
static int export_option(struct export_cli *c, int ch, const char **prec, long *group)
{
    struct tx_export_opts *o = &c->o;
    switch (ch) {
    case 'i':
        c->in = optarg;
        break;
    case 'o':
        c->out = optarg;
        break;
    case 'Q':
        c->quant = optarg;
        break;
    case 'O':
        if (!strcmp(optarg, "sparse"))
            c->sparse = 1;
        else if (!strcmp(optarg, "none"))
            c->sparse = 0;
        else {
            fprintf(stderr, "glm-export: --optimize %s: expected sparse or none; try --help\n",
                    optarg);
            return 2;
        }
        break;
    case 'P':
        *prec = optarg;
        break;
    case 'g':
        if (txc_parse_long(optarg, 0, 1 << 20, group) < 0 || *group % 32) {
            fprintf(stderr,
                    "glm-export: --group-size: '%s' is not an integer in [0, 1048576] (0 or "
                    "a multiple of 32); try --help\n",
                    optarg);
            return 2;
        }
        break;
    case 'r':
        if (txc_opt_double("glm-export", "--sparsity", optarg, 0, 1, TXC_HI_OPEN, &o->sparsity) < 0)
            return 2;
        break;
    case 'T':
        o->tokenizer = optarg;
        break;
    case 'C':
        o->tokenizer_config = optarg;
        break;
    case 'n':
        o->model_name = optarg;
        break;
    case 't': {
        if (txc_opt_int("glm-export", "--threads", optarg, 1, 256, NULL, &o->threads) < 0)
            return 2;
        break;
    }
    case 'q':
        c->quiet = 1;
        o->progress = 0;
        break;
    case 'V':
        c->verify = optarg;
        break;
    case 'M':
        o->no_mtp = 1;
        break;
    default: /* --help, or an option getopt_long has reported */
        return txc_help_or_usage(ch, usage);
    }
    return -1;
}

/* The options together: the arguments left, what --verify and the export
 * need, the plan (--quant, then --precision, --group-size, --optimize).
 * -1: export; else the exit status. */
static int export_check(struct export_cli *c, int argc, char **argv, const char *prec, long group)
{
    struct tx_export_opts *o = &c->o;
    char err[TX_ERR_MAX];
    if (optind < argc)
        return txc_usage_error("glm-export", usage, "unexpected argument %s", argv[optind]);
    if (c->verify && !c->in && !c->out)
        return txc_verify_package("glm-export", c->verify);
    if (!c->in || !c->out)
        return txc_usage_error("glm-export", usage, "--input and --output are required");
    if (c->verify && strcmp(c->verify, c->out)) {
        fprintf(stderr,
                "glm-export: --verify %s with --output %s: give the same file, or "
                "--verify alone; try --help\n",
                c->verify, c->out);
        return 2;
    }
    if (c->quant && tx_plan_apply_quant(o->plan, c->quant, err, sizeof(err)) < 0) {
        fprintf(stderr, "glm-export: %s\n", err);
        return 2;
    }
    if (prec && tx_plan_apply_spec(o->plan, prec, err, sizeof(err)) < 0) {
        fprintf(stderr, "glm-export: %s\n", err);
        return 2;
    }
    for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++) {
        if (o->plan[l].precision == TX_SMD_PREC_INT8_MIXED && l != TX_SMD_LAYER_EMBEDDING)
            o->plan[l].group_size = (uint32_t)group;
        if (c->sparse && (l == TX_SMD_LAYER_MLP || l == TX_SMD_LAYER_EXPERT))
            o->plan[l].flags |= TX_SMD_PLANF_SPARSE;
    }
    return -1;
}

int export_parse(struct export_cli *c, int argc, char **argv)
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
                                         {"no-mtp", no_argument, NULL, 'M'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    memset(c, 0, sizeof(*c));
    tx_export_default_opts(&c->o);
    c->o.progress = 1;
    const char *prec = NULL;
    long group = 0;
    int ch;
    while ((ch = txc_getopt("glm-export", argc, argv, "i:o:Q:O:P:g:r:T:C:n:t:qhV:", opts)) != -1) {
        int rc = export_option(c, ch, &prec, &group);
        if (rc != -1)
            return rc;
    }
    return export_check(c, argc, argv, prec, group);
}
