/* SPDX-License-Identifier: MIT */
/*
 * glm-perplexity: the perplexity of a .smd package over a text, and the KL
 * divergence of its token distributions against a base package's, with
 * llama-perplexity's semantics and output lines (docs/perplexity.md).
 *
 *   glm-perplexity -m PKG.smd -f FILE [-c N] [--chunks N] [--precision PLAN]
 *                  [--cache-type-k T] [--cache-type-v T] [--device SPEC]
 *                  [--kl-divergence-base FILE [--kl-divergence]]
 *
 * The text is tokenized whole and cut into non-overlapping chunks of N
 * tokens; each chunk runs in a fresh context and its second half is scored
 * (the positions N/2 .. N-2 predict the next token), as llama-perplexity
 * does. --kl-divergence-base FILE alone saves the scored positions' FP32
 * logits; with --kl-divergence the run compares its own with them.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm.h>
#include <tx/glm_config.h>
#include <tx/tx_error.h>

#include "common/cli.h"
#include "common/device_list.h"
#include "kld_base.h"
#include "common/ppl_stats.h"

static const char *prog = "glm-perplexity";

static void usage(FILE *f)
{
    fprintf(f, "usage: glm-perplexity -m PKG.smd -f FILE [options]\n"
               "\n"
               "The perplexity of the package over the text, as llama-perplexity computes it:\n"
               "non-overlapping chunks of -c tokens, each in a fresh context, scored on their\n"
               "second half. Prints the running perplexity per chunk and\n"
               "'Final estimate: PPL = X +/- Y'.\n"
               "\n"
               "  -m, --checkpoint PKG     the .smd package (glm-export)\n"
               "  -f, --file FILE          the text (UTF-8)\n"
               "  -c, --ctx-size N         tokens per chunk (default 512)\n"
               "      --chunks N           score at most N chunks (default: all of the text)\n"
               "  -b, --batch-size N       most tokens per device pass (default 512)\n"
               "      --precision PLAN     precision plan (default golden; docs/libtx-glm.md)\n"
               "      --cache-type-k T     (--ctk) KV cache K type: f32, f16, bf16, q8_0, q4_0\n"
               "      --cache-type-v T     (--ctv) V type (GQA)\n"
               "      --device SPEC        device, or SPEC,SPEC,... for one model on several\n"
               "                           (default $TX_DEVICE)\n"
               "      --kl-divergence-base FILE\n"
               "                           without --kl-divergence: save the scored positions'\n"
               "                           logits (FP32) to FILE; with it: read them from FILE\n"
               "      --kl-divergence      compare with the base file: KL divergence, same top\n"
               "                           token, delta p ('Mean    KLD: X ± Y',\n"
               "                           'Same top p: X ± Y %%')\n");
}

enum { O_CHUNKS = 256, O_PRECISION, O_CTK, O_CTV, O_DEVICE, O_KLD_BASE, O_KLD };

struct opts {
    const char *pkg, *file, *precision, *device, *kld_base;
    int n_ctx, n_chunks, n_batch, kld;
    int cache_k, cache_v;
};

static int parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {{"checkpoint", required_argument, NULL, 'm'},
                                       {"model", required_argument, NULL, 'm'},
                                       {"file", required_argument, NULL, 'f'},
                                       {"ctx-size", required_argument, NULL, 'c'},
                                       {"batch-size", required_argument, NULL, 'b'},
                                       {"chunks", required_argument, NULL, O_CHUNKS},
                                       {"precision", required_argument, NULL, O_PRECISION},
                                       {"cache-type-k", required_argument, NULL, O_CTK},
                                       {"ctk", required_argument, NULL, O_CTK},
                                       {"cache-type-v", required_argument, NULL, O_CTV},
                                       {"ctv", required_argument, NULL, O_CTV},
                                       {"device", required_argument, NULL, O_DEVICE},
                                       {"kl-divergence-base", required_argument, NULL, O_KLD_BASE},
                                       {"kl-divergence", no_argument, NULL, O_KLD},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof(*o));
    o->n_ctx = 512;
    o->n_batch = 512;
    int ch;
    while ((ch = getopt_long(argc, argv, "m:f:c:b:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'm':
            o->pkg = optarg;
            break;
        case 'f':
            o->file = optarg;
            break;
        case 'c':
            if (txc_opt_int(prog, "-c", optarg, 4, 1 << 20, NULL, &o->n_ctx) < 0)
                return 2;
            break;
        case 'b':
            if (txc_opt_int(prog, "-b", optarg, 1, 1 << 20, NULL, &o->n_batch) < 0)
                return 2;
            break;
        case O_CHUNKS:
            if (txc_opt_int(prog, "--chunks", optarg, 1, 1 << 30, NULL, &o->n_chunks) < 0)
                return 2;
            break;
        case O_PRECISION:
            o->precision = optarg;
            break;
        case O_CTK:
        case O_CTV: {
            int t = glm_cache_type_parse(optarg);
            if (t < 0) {
                fprintf(stderr,
                        "%s: --cache-type-%c %s: expected f32, f16, bf16, q8_0 (int8) or q4_0 "
                        "(int4)\n",
                        prog, ch == O_CTK ? 'k' : 'v', optarg);
                return 2;
            }
            *(ch == O_CTK ? &o->cache_k : &o->cache_v) = t;
            break;
        }
        case O_DEVICE:
            o->device = optarg;
            break;
        case O_KLD_BASE:
            o->kld_base = optarg;
            break;
        case O_KLD:
            o->kld = 1;
            break;
        default:
            return txc_help_or_usage(ch, usage) == 0 ? -1 : 2;
        }
    }
    if (optind < argc)
        return txc_usage_error(prog, usage, "unexpected argument '%s'", argv[optind]);
    if (!o->pkg || !o->file)
        return txc_usage_error(prog, usage, "-m PKG.smd and -f FILE are required");
    if (o->kld && !o->kld_base)
        return txc_usage_error(prog, usage, "--kl-divergence needs --kl-divergence-base FILE");
    return 0;
}

/* the scored positions of a chunk of n: n/2 .. n-2 (llama-perplexity's first = n_ctx/2) */
static int first_scored(int n_ctx)
{
    return n_ctx / 2;
}

static void print_summary(const struct kld_summary *s)
{
    printf("\n====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", s->ppl, s->ppl_err);
    printf("Mean PPL(base)                : %10.6f ± %10.6f\n", s->ppl_base, s->ppl_base_err);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", s->ln_ratio, s->ln_ratio_err);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", exp(s->ln_ratio),
           exp(s->ln_ratio) * s->ln_ratio_err);
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f ± %10.6f\n", s->kld_mean, s->kld_err);
    printf("Maximum KLD: %10.6f\n", s->kld_max);
    printf("99.9%%   KLD: %10.6f\n", s->kld_p999);
    printf("99.0%%   KLD: %10.6f\n", s->kld_p99);
    printf("Median  KLD: %10.6f\n", s->kld_median);
    printf("Minimum KLD: %10.6f\n", s->kld_min);
    printf("\n====== Token probability statistics ======\n");
    printf("Mean    Δp: %8.3f ± %5.3f %%\n", 100.0 * s->dp_mean, 100.0 * s->dp_err);
    printf("RMS Δp    : %8.3f ± %5.3f %%\n", 100.0 * s->dp_rms, 100.0 * s->dp_rms_err);
    printf("Same top p: %8.3f ± %5.3f %%\n", 100.0 * s->same_top, 100.0 * s->same_top_err);
}

struct run {
    const struct opts *o;
    glm_session_t *s;
    const int32_t *tok;
    int n_ctx, n_chunk, vocab;
    float *logits, *base_row;
    double *lp, *lp_base;
    struct kld_base base;
    int saving, comparing;
};

/* every chunk: evaluate, score, save or compare; 0 or 1 */
static int run_chunks(struct run *r)
{
    char msg[512];
    struct ppl_acc acc = {0};
    struct kld_stats ks = {0};
    const int first = first_scored(r->n_ctx);
    double cos_sum = 0, cos_min = 0;
    int cos_min_chunk = 0, rc = 1;
    if (r->comparing)
        printf("%5s %10s %10s %10s %10s %10s\n", "chunk", "PPL", "ln(Q/base)", "KLD", "same top",
               "cosine");
    for (int ci = 0; ci < r->n_chunk; ci++) {
        const int32_t *t = r->tok + (size_t)ci * r->n_ctx;
        if (glm_session_reset(r->s) ||
            glm_eval(r->s, t, r->n_ctx, GLM_EVAL_ALL_LOGITS, r->logits)) {
            fprintf(stderr, "%s: chunk %d: %s\n", prog, ci + 1, tx_last_error());
            goto out;
        }
        double c_lr = 0, c_kl = 0, c_same = 0;
        int c_n = 0;
        struct cos_acc c_cos = {0};
        for (int j = first; j < r->n_ctx - 1; j++) {
            const float *row = r->logits + (size_t)j * r->vocab;
            const int next = t[j + 1];
            ppl_log_softmax(row, r->vocab, r->lp);
            if (!isfinite(r->lp[next])) {
                fprintf(stderr, "%s: chunk %d position %d: non-finite logits\n", prog, ci + 1, j);
                goto out;
            }
            ppl_acc_add(&acc, -r->lp[next]);
            if (r->saving && kld_base_write_row(&r->base, row, msg, sizeof(msg))) {
                fprintf(stderr, "%s: %s\n", prog, msg);
                goto out;
            }
            if (r->comparing) {
                struct kld_sample ks1;
                if (kld_base_read_row(&r->base, r->base_row, msg, sizeof(msg))) {
                    fprintf(stderr, "%s: %s: %s\n", prog, r->o->kld_base, msg);
                    goto out;
                }
                ppl_log_softmax(r->base_row, r->vocab, r->lp_base);
                kld_sample_of(r->lp_base, r->lp, r->vocab, next, &ks1);
                if (kld_stats_add(&ks, &ks1)) {
                    fprintf(stderr, "%s: out of memory\n", prog);
                    goto out;
                }
                cos_acc_add(&c_cos, row, r->base_row, r->vocab);
                c_lr += ks1.nll - ks1.nll_base;
                c_kl += ks1.kld;
                c_same += ks1.same_top;
                c_n++;
            }
        }
        if (r->comparing) {
            double cs = cos_acc_value(&c_cos);
            printf("%5d %10.4f %10.5f %10.6f %9.3f%% %10.6f\n", ci + 1, ppl_acc_ppl(&acc),
                   c_lr / c_n, c_kl / c_n, 100.0 * c_same / c_n, cs);
            cos_sum += cs;
            if (ci == 0 || cs < cos_min) {
                cos_min = cs;
                cos_min_chunk = ci + 1;
            }
        } else
            printf("[%d]%.4f,", ci + 1, ppl_acc_ppl(&acc));
        fflush(stdout);
    }
    if (!r->comparing)
        printf("\n");
    printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl_acc_ppl(&acc), ppl_acc_ppl_err(&acc));
    if (r->comparing) {
        struct kld_summary sum;
        if (kld_stats_summary(&ks, &sum)) {
            fprintf(stderr, "%s: out of memory\n", prog);
            goto out;
        }
        print_summary(&sum);
        /* glm-inference --validate's figure, with the chunks as the inputs */
        printf("\n====== Logit cosine per chunk (its scored positions' logits) ======\n");
        printf("Min cosine : %10.6f (chunk %d)\nMean cosine: %10.6f over %d chunks\n", cos_min,
               cos_min_chunk, cos_sum / r->n_chunk, r->n_chunk);
    }
    rc = 0;
out:
    kld_stats_free(&ks);
    return rc;
}

int main(int argc, char **argv)
{
    struct opts o;
    int prc = parse_opts(argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc;
    int rc = 1;
    char msg[512];
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    glm_model_t *m = NULL;
    struct run r = {.o = &o};
    tx_device_t *devs[GLM_EP_MAX_DEVICES] = {NULL};
    int n_devs = 0;

    if (txc_read_path(o.file, &text, NULL)) {
        fprintf(stderr, "%s: %s\n", prog, tx_last_error());
        return 1;
    }
    glm_precision_plan_t plan;
    glm_plan_golden(&plan);
    if (o.precision && glm_plan_parse(o.precision, &plan)) {
        fprintf(stderr, "%s: --precision: %s\n", prog, tx_last_error());
        free(text);
        return 2;
    }
    if (mdev_open(prog, o.device, devs, GLM_EP_MAX_DEVICES, &n_devs)) {
        free(text);
        return 1;
    }
    for (int i = 0; i < n_devs; i++)
        if (glm_plan_set(devs[i], &plan)) {
            fprintf(stderr, "%s: precision: %s\n", prog, tx_last_error());
            goto out;
        }
    struct glm_load_options lopt = {.name = "glm-perplexity"};
    uint64_t reserve = n_devs > 1 ? mdev_kv_reserve(o.pkg, 1, o.n_ctx, o.cache_k, o.cache_v) : 0;
    if (mdev_load(devs, n_devs, o.pkg, &lopt, 0, reserve, &m)) {
        fprintf(stderr, "%s: load %s: %s\n", prog, o.pkg, tx_last_error());
        goto out;
    }
    if ((o.cache_k || o.cache_v) &&
        glm_model_set_cache_types(m, (glm_cache_type_t)o.cache_k, (glm_cache_type_t)o.cache_v)) {
        fprintf(stderr, "%s: --cache-type-k/-v: %s\n", prog, tx_last_error());
        goto out;
    }
    const struct glm_config *c = glm_model_config(m);
    r.vocab = c->vocab_size;
    if (glm_tokenize(m, text, &ids, &n_ids)) {
        fprintf(stderr, "%s: tokenize %s: %s\n", prog, o.file, tx_last_error());
        goto out;
    }
    r.n_ctx = o.n_ctx;
    r.tok = ids;
    if (n_ids < (size_t)r.n_ctx) {
        fprintf(stderr,
                "%s: %s: %zu tokens, fewer than one chunk of -c %d (give a smaller -c or a "
                "longer text)\n",
                prog, o.file, n_ids, r.n_ctx);
        goto out;
    }
    r.n_chunk = (int)(n_ids / (size_t)r.n_ctx);
    if (o.n_chunks && o.n_chunks < r.n_chunk)
        r.n_chunk = o.n_chunks;
    r.comparing = o.kld;
    r.saving = o.kld_base && !o.kld;
    if (r.comparing) {
        if (kld_base_open(&r.base, o.kld_base, (uint32_t)r.vocab, ids, n_ids, (uint32_t)r.n_ctx,
                          msg, sizeof(msg))) {
            fprintf(stderr, "%s: %s\n", prog, msg);
            goto out;
        }
        if ((int)r.base.first != first_scored(r.n_ctx)) {
            fprintf(stderr, "%s: %s: scored from position %u, this run from %d\n", prog, o.kld_base,
                    r.base.first, first_scored(r.n_ctx));
            goto out;
        }
        if (o.n_chunks && (uint32_t)o.n_chunks > r.base.n_chunk) {
            fprintf(stderr, "%s: %s: the base has %u chunks, --chunks asks for %d\n", prog,
                    o.kld_base, r.base.n_chunk, o.n_chunks);
            goto out;
        }
        r.n_chunk = (int)r.base.n_chunk;
        if (o.n_chunks)
            r.n_chunk = o.n_chunks;
    }
    struct glm_session_options so = {.n_ctx = r.n_ctx + 1, .n_batch = o.n_batch};
    if (glm_session_create(m, &so, &r.s)) {
        fprintf(stderr, "%s: session: %s\n", prog, tx_last_error());
        goto out;
    }
    r.logits = malloc(sizeof(float) * (size_t)r.n_ctx * (size_t)r.vocab);
    r.base_row = malloc(sizeof(float) * (size_t)r.vocab);
    r.lp = malloc(sizeof(double) * (size_t)r.vocab);
    r.lp_base = malloc(sizeof(double) * (size_t)r.vocab);
    if (!r.logits || !r.base_row || !r.lp || !r.lp_base) {
        fprintf(stderr, "%s: out of memory for the logits of -c %d\n", prog, r.n_ctx);
        goto out;
    }
    char pb[200];
    fprintf(stderr,
            "%s: %s: %zu tokens; %d chunks of %d, scored on positions %d..%d; plan %s, KV cache "
            "K %s, V %s\n",
            prog, o.file, n_ids, r.n_chunk, r.n_ctx, first_scored(r.n_ctx), r.n_ctx - 2,
            glm_plan_format(&plan, pb, sizeof(pb)),
            glm_cache_type_name((glm_cache_type_t)o.cache_k),
            glm_cache_type_name((glm_cache_type_t)o.cache_v));
    if (r.saving && kld_base_create(&r.base, o.kld_base, (uint32_t)r.vocab, (uint32_t)r.n_ctx,
                                    (uint32_t)r.n_chunk, (uint32_t)first_scored(r.n_ctx), ids, msg,
                                    sizeof(msg))) {
        fprintf(stderr, "%s: %s\n", prog, msg);
        goto out;
    }
    rc = run_chunks(&r);
    if (r.saving) {
        if (kld_base_finish(&r.base, rc == 0, msg, sizeof(msg))) {
            fprintf(stderr, "%s: %s\n", prog, msg);
            rc = 1;
        } else if (rc == 0) {
            fprintf(stderr, "%s: saved the logits of %d chunks to %s\n", prog, r.n_chunk,
                    o.kld_base);
        }
    }
out:
    if (r.saving)
        kld_base_finish(&r.base, 0, msg, sizeof(msg));
    else
        kld_base_close(&r.base);
    free(r.logits);
    free(r.base_row);
    free(r.lp);
    free(r.lp_base);
    if (r.s)
        glm_session_free(r.s);
    if (m)
        glm_model_free(m);
    mdev_close(devs, n_devs);
    free(ids);
    free(text);
    return rc;
}
