/* SPDX-License-Identifier: MIT */
/*
 * glm-synth: write a synthetic GLM checkpoint in the real format.
 *
 *   glm-synth --arch ARCH --preset tiny|small|bench --output DIR
 *             [--seed N] [--format hf|onnx] [--tokenizer-dir DIR]
 *             [--onnx-data inline|external] [--shard-size SIZE]
 *             [--dense-ffn] [--fp8] [--threads N] [--quiet] [--config-set K=V,...]
 *
 * Usage and file formats: docs/tools-export.md.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tx/glm_config.h>
#include <tx-internal/tx_analyze.h>
#include <tx-internal/tx_synth.h>

#include "common/cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: glm-synth --arch ARCH --preset tiny|small|bench --output DIR\n"
               "                 [--seed N] [--format hf|onnx] [--tokenizer-dir DIR]\n"
               "                 [--onnx-data inline|external] [--shard-size SIZE]\n"
               "                 [--dense-ffn] [--fp8] [--mtp-layer] [--threads N] [--quiet]\n"
               "                 [--routing uniform|skewed] [--routing-skew S] [--routing-corr C]\n"
               "                 [--experts N]\n"
               "                 [--config-set KEY=VALUE[,KEY=VALUE...]]\n"
               "\n"
               "Writes a synthetic GLM checkpoint with the real config fields, tensor names and\n"
               "shapes (BF16 safetensors, or ONNX with --format onnx) and the Qwen3 tokenizer\n"
               "with GLM's special tokens ([gMASK], <sop>, <|user|>, ...) added.\n");
    /* the architectures: the registry's modules (docs/architectures.md) */
    for (int i = 0; i < glm_arch_count(); i++) {
        enum glm_arch a = glm_arch_nth(i);
        fprintf(f, "  --arch %-9s %s (%s)\n", glm_arch_short_name(a), glm_arch_class_name(a),
                glm_arch_models(a));
    }
    fprintf(f, "  --preset         tiny (unit tests), small (~80 MB, demo), bench (~1.8 GB)\n"
               "  --tokenizer-dir  directory with tokenizer.json (default: the Qwen3 tokenizer\n"
               "                   the project ships, $TX8_DATA_DIR/tokenizers/qwen3, else\n"
               "                   PREFIX/share/tx8/tokenizers/qwen3, else the source tree's\n"
               "                   data/tokenizers/qwen3)\n"
               "  --routing        uniform (random routers, default) or skewed: hot experts and\n"
               "                   layer-to-layer correlated choices, as in trained MoE models\n"
               "  --routing-skew   S >= 0: strength of the hot experts (default 1)\n"
               "  --routing-corr   C in [0, 1]: cross-layer correlation of the routers (default "
               "0.8)\n"
               "  --experts N      routed experts per MoE layer instead of the preset's\n"
               "  --mtp-layer      the whole MTP layer (attention + MoE), as the real\n"
               "                   checkpoints ship it (default: its 4 own tensors)\n"
               "  --fp8            an FP8 block-quantised checkpoint as the FP8 releases ship\n"
               "                   it: F8_E4M3 projections with F32 <name>_scale_inv per\n"
               "                   128x128 block, quantization_config quant_method fp8\n"
               "  --config-set     config.json fields over the preset's, before the tensors are\n"
               "                   made, e.g. hidden_size=2048,num_hidden_layers=12\n");
}

/* a registry name: short name (glm4, glm5), model_type or class name */
static int parse_arch(const char *s)
{
    enum glm_arch a = glm_arch_from_name(s);
    return a == GLM_ARCH_UNKNOWN ? -1 : (int)a;
}

static int has_tokenizer(const char *dir)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/tokenizer.json", dir);
    return access(p, R_OK) == 0;
}

/* The default tokenizer directory, the first of these that holds a
 * tokenizer.json:
 *   $TX8_DATA_DIR/tokenizers/qwen3              (explicit override)
 *   EXE/../share/tx8/tokenizers/qwen3           (installed: PREFIX/bin, PREFIX/share)
 *   TX8_DATADIR/tokenizers/qwen3                (PREFIX/share/tx8, set at build time)
 *   TX8_SRCDIR/data/tokenizers/qwen3            (the source tree it was built from)
 * Each tried path is kept in `tried` for the error message. */
static int find_tokenizer_dir(char *out, size_t n, char *tried, size_t tn)
{
    char cand[4][PATH_MAX];
    int nc = 0;
    const char *env = getenv("TX8_DATA_DIR");
    if (env && *env)
        snprintf(cand[nc++], PATH_MAX, "%s/tokenizers/qwen3", env);
    char exe[PATH_MAX - 64];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len > 0) {
        exe[len] = 0;
        char *s = strrchr(exe, '/');
        if (s) {
            *s = 0;
            snprintf(cand[nc++], PATH_MAX, "%s/../share/tx8/tokenizers/qwen3", exe);
        }
    }
    snprintf(cand[nc++], PATH_MAX, "%s/tokenizers/qwen3", TX8_DATADIR);
    snprintf(cand[nc++], PATH_MAX, "%s/data/tokenizers/qwen3", TX8_SRCDIR);
    size_t tl = 0;
    tried[0] = 0;
    for (int i = 0; i < nc; i++) {
        if (has_tokenizer(cand[i])) {
            snprintf(out, n, "%s", cand[i]);
            return 0;
        }
        if (tl < tn)
            tl += (size_t)snprintf(tried + tl, tn - tl, "%s%s", i ? ", " : "", cand[i]);
    }
    return -1;
}

/* Bytes and number of the weight files written (model*.safetensors,
 * model.onnx, model.onnx.data). */
static uint64_t dir_bytes(const char *dir, int *files)
{
    uint64_t total = 0;
    *files = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        int weights = !strncmp(e->d_name, "model", 5) &&
                      ((l > 12 && !strcmp(e->d_name + l - 12, ".safetensors")) ||
                       !strcmp(e->d_name, "model.onnx") || !strcmp(e->d_name, "model.onnx.data"));
        char p[PATH_MAX];
        struct stat st;
        if (weights && snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) < (int)sizeof(p) &&
            stat(p, &st) == 0) {
            total += (uint64_t)st.st_size;
            (*files)++;
        }
    }
    if (d)
        closedir(d);
    return total;
}

enum { O_CONFIG_SET = 256, O_MTP_LAYER }; /* long-only options */

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"arch", required_argument, NULL, 'a'},
                                         {"preset", required_argument, NULL, 'p'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"seed", required_argument, NULL, 's'},
                                         {"format", required_argument, NULL, 'f'},
                                         {"tokenizer-dir", required_argument, NULL, 'T'},
                                         {"onnx-data", required_argument, NULL, 'D'},
                                         {"shard-size", required_argument, NULL, 'S'},
                                         {"dense-ffn", no_argument, NULL, 'F'},
                                         {"fp8", no_argument, NULL, '8'},
                                         {"mtp-layer", no_argument, NULL, O_MTP_LAYER},
                                         {"routing", required_argument, NULL, 'R'},
                                         {"routing-skew", required_argument, NULL, 'K'},
                                         {"routing-corr", required_argument, NULL, 'C'},
                                         {"experts", required_argument, NULL, 'E'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"config-set", required_argument, NULL, O_CONFIG_SET},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct tx_synth_opts o = {.arch = GLM_ARCH_UNKNOWN,
                              .preset = -1,
                              .seed = 42,
                              .format = TX_SYNTH_HF,
                              .onnx_external = -1,
                              .routing_skew = 1.0f,
                              .routing_corr = 0.8f,
                              .progress = 1};
    const char *out = NULL, *tokdir = NULL;
    int c;
    while ((c = txc_getopt("glm-synth", argc, argv, "a:p:o:s:f:T:D:S:F8R:K:C:E:t:qh", opts)) != -1) {
        char *end;
        switch (c) {
        case 'a': {
            int a = parse_arch(optarg);
            if (a < 0) {
                fprintf(stderr, "glm-synth: --arch %s: expected one of", optarg);
                for (int i = 0; i < glm_arch_count(); i++)
                    fprintf(stderr, "%s %s", i ? "," : "", glm_arch_short_name(glm_arch_nth(i)));
                fputs("; try --help\n", stderr);
                return 2;
            }
            o.arch = (enum glm_arch)a;
            break;
        }
        case 'p': {
            int p = tx_synth_preset_parse(optarg);
            if (p < 0) {
                fprintf(stderr, "glm-synth: --preset %s: expected tiny, small or bench; try --help\n", optarg);
                return 2;
            }
            o.preset = (enum tx_synth_preset)p;
            break;
        }
        case 'o':
            out = optarg;
            break;
        case 's':
            errno = 0;
            o.seed = strtoull(optarg, &end, 0);
            if (errno || *end || !*optarg || *optarg == '-' || *optarg == '+' || *optarg == ' ') {
                fprintf(stderr,
                        "glm-synth: --seed: '%s' is not an integer in [0, %llu] (decimal, or "
                        "hex with 0x); try --help\n",
                        optarg, ULLONG_MAX);
                return 2;
            }
            break;
        case 'f':
            if (!strcmp(optarg, "hf") || !strcmp(optarg, "safetensors"))
                o.format = TX_SYNTH_HF;
            else if (!strcmp(optarg, "onnx"))
                o.format = TX_SYNTH_ONNX;
            else {
                fprintf(stderr, "glm-synth: --format %s: expected hf or onnx; try --help\n", optarg);
                return 2;
            }
            break;
        case 'T':
            tokdir = optarg;
            break;
        case 'D':
            if (!strcmp(optarg, "inline"))
                o.onnx_external = 0;
            else if (!strcmp(optarg, "external"))
                o.onnx_external = 1;
            else {
                fprintf(stderr, "glm-synth: --onnx-data %s: expected inline or external; try --help\n", optarg);
                return 2;
            }
            break;
        case 'S': {
            int64_t v = tx_parse_size(optarg);
            if (v <= 0) {
                fprintf(
                    stderr,
                    "glm-synth: --shard-size: '%s' is not a size > 0 (bytes, or with K, M, G)\n",
                    optarg);
                return 2;
            }
            o.shard_bytes = (uint64_t)v;
            break;
        }
        case 'F':
            o.dense_ffn = 1;
            break;
        case '8':
            o.fp8 = 1;
            break;
        case O_MTP_LAYER:
            o.mtp_layer = 1;
            break;
        case 'R':
            if (!strcmp(optarg, "uniform"))
                o.routing = TX_SYNTH_ROUTING_UNIFORM;
            else if (!strcmp(optarg, "skewed"))
                o.routing = TX_SYNTH_ROUTING_SKEWED;
            else
                return txc_usage_error("glm-synth", usage,
                                       "--routing %s: expected uniform or skewed", optarg);
            break;
        case 'K':
        case 'C': {
            char *e2;
            errno = 0;
            double v = strtod(optarg, &e2);
            double hi = c == 'K' ? 100.0 : 1.0;
            if (errno || e2 == optarg || *e2 || !(v >= 0.0 && v <= hi))
                return txc_usage_error("glm-synth", usage, "%s %s: expected a number in [0, %g]",
                                       c == 'K' ? "--routing-skew" : "--routing-corr", optarg, hi);
            if (c == 'K')
                o.routing_skew = (float)v;
            else
                o.routing_corr = (float)v;
            break;
        }
        case 'E':
            if (txc_opt_int("glm-synth", "--experts", optarg, 2, 4096, NULL, &o.n_experts) < 0)
                return 2;
            break;
        case 't': {
            if (txc_opt_int("glm-synth", "--threads", optarg, 1, 256, NULL, &o.threads) < 0)
                return 2;
            break;
        }
        case 'q':
            o.progress = 0;
            break;
        case O_CONFIG_SET:
            o.config_set = optarg;
            break;
        default: /* --help, or an option getopt_long has reported */
            return txc_help_or_usage(c, usage);
        }
    }
    if (optind < argc)
        return txc_usage_error("glm-synth", usage, "unexpected argument %s", argv[optind]);
    if (o.arch == GLM_ARCH_UNKNOWN || (int)o.preset < 0 || !out)
        return txc_usage_error("glm-synth", usage, "--arch, --preset and --output are required");
    char tbuf[PATH_MAX];
    if (tokdir) {
        if (!has_tokenizer(tokdir)) {
            fprintf(stderr, "glm-synth: %s: no tokenizer.json there\n", tokdir);
            return 1;
        }
    } else {
        char tried[4 * PATH_MAX];
        if (find_tokenizer_dir(tbuf, sizeof(tbuf), tried, sizeof(tried)) < 0) {
            fprintf(stderr, "glm-synth: no tokenizer.json found (tried %s); give --tokenizer-dir\n",
                    tried);
            return 1;
        }
        tokdir = tbuf;
    }
    o.tokenizer_dir = tokdir;
    char err[TX_ERR_MAX];
    int rc = tx_synth_write(out, &o, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "glm-synth: %s\n", err);
        return 1;
    }
    int files;
    uint64_t bytes = dir_bytes(out, &files);
    if (o.progress)
        fprintf(stderr,
                "glm-synth: wrote %s: %s %s, %s, %.1f MB of weights in %d file%s, seed %llu\n", out,
                glm_arch_class_name(o.arch), tx_synth_preset_name(o.preset),
                o.format == TX_SYNTH_ONNX ? "onnx" : "safetensors", bytes / 1e6, files,
                files == 1 ? "" : "s", (unsigned long long)o.seed);
    return 0;
}
