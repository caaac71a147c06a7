/* SPDX-License-Identifier: MIT */
/*
 * glm-export: convert a GLM model (Hugging Face checkpoint directory or
 * ONNX) into an .smd deployment package for the TX8.
 *
 *   glm-export --input IN --output OUT.smd [--quant none|fp16|bf16|int8|fp8]
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
#include <tx-internal/tx_export.h>

#include "common/cli.h"
#include "glm_export.h"

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

/* what was written, the ignored tensors, the stored weights' error */
static void print_stats(const struct export_cli *cl, const struct tx_export_stats *s,
                        const struct ignored *ig)
{
    fprintf(stderr,
            "glm-export: wrote %s: %llu tensors, %.2f M parameters, %.1f MB (input %.1f MB) "
            "in %.2f s\n",
            cl->out, (unsigned long long)s->tensors, s->params / 1e6, s->output_bytes / 1e6,
            s->input_bytes / 1e6, s->seconds);
    if (s->mtp_tensors)
        fprintf(stderr, "glm-export: the MTP layer kept: %llu tensors (model.layers.N with N = "
                        "num_hidden_layers; --no-mtp leaves it out)\n",
                (unsigned long long)s->mtp_tensors);
    if (ig->mtp)
        fprintf(stderr, "glm-export: %u tensors of the MTP layer ignored\n", ig->mtp);
    if (ig->unknown > 10)
        fprintf(stderr, "glm-export: %u unknown tensors ignored in all\n", ig->unknown);
    fprintf(stderr, "glm-export: relative RMS error of the stored weights:");
    for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++)
        if (s->elems[l])
            fprintf(stderr, " %s %.2e", tx_smd_layer_name(l),
                    s->sq_ref[l] > 0 ? sqrt(s->sq_err[l] / s->sq_ref[l]) : 0.0);
    fputc('\n', stderr);
    if (cl->sparse)
        fprintf(stderr,
                "glm-export: sparse: %llu matrices, pruned %.1f%% of their weights; MACs per "
                "token -%.1f%% in FFN/experts, -%.1f%% over all weight matrices\n",
                (unsigned long long)s->sparse_tensors, 100 * s->pruned_fraction,
                100 * s->ffn_mac_reduction, 100 * s->model_mac_reduction);
}

int main(int argc, char **argv)
{
    struct export_cli c;
    int rc = export_parse(&c, argc, argv);
    if (rc >= 0)
        return rc;
    char err[TX_ERR_MAX];
    c.o.quant = c.quant ? c.quant : "int8 (golden, default)";
    struct ignored ig = {.quiet = c.quiet};
    c.o.on_ignored = on_ignored;
    c.o.ctx = &ig;
    c.o.cancel = &cancelled;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    char planbuf[256];
    if (!c.quiet)
        fprintf(stderr, "glm-export: %s -> %s\nglm-export: plan %s%s\n", c.in, c.out,
                tx_plan_format(c.o.plan, planbuf, sizeof(planbuf)),
                c.sparse ? ", FFN/experts block-sparse" : "");
    struct tx_export_stats st;
    rc = tx_export(c.in, c.out, &c.o, &st, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "glm-export: %s\n", err);
        return rc == TX_ECANCELED ? 130 : 1;
    }
    if (!c.quiet)
        print_stats(&c, &st, &ig);
    if (c.verify)
        return txc_verify_package("glm-export", c.out);
    return 0;
}
