/* SPDX-License-Identifier: MIT */
/*
 * glm-perplexity's arithmetic (llama-perplexity's): log-softmax of a
 * logits row, the NLL of the next token, the running perplexity with its
 * uncertainty, and the KL-divergence statistics of one package's
 * probabilities against a base package's (docs/perplexity.md).
 */
#ifndef TX_COMMON_PPL_STATS_H
#define TX_COMMON_PPL_STATS_H

#include <stddef.h>
#include <stdint.h>

/* out[i] = logits[i] - logsumexp(logits) in double (out may be logits) */
void ppl_log_softmax(const float *logits, int n, double *out);

/* running sums of the scored tokens' NLL */
struct ppl_acc {
    double nll, nll2;
    uint64_t count;
};

void ppl_acc_add(struct ppl_acc *a, double nll);
/* exp(mean NLL) */
double ppl_acc_ppl(const struct ppl_acc *a);
/* llama-perplexity's +/-: ppl * sqrt(var(nll) / (count - 1)); 0 below 2 tokens */
double ppl_acc_ppl_err(const struct ppl_acc *a);

/* the cosine of two logit sequences (the --validate figure of an input:
 * over all of its positions' logits at once) */
struct cos_acc {
    double ab, aa, bb;
};

void cos_acc_add(struct cos_acc *c, const float *a, const float *b, int n);
double cos_acc_value(const struct cos_acc *c); /* 0 for a zero vector */

/* one scored position of a --kl-divergence run, from the base's and this
 * package's log-probabilities over the vocabulary and the next token */
struct kld_sample {
    double kld;   /* sum p_base (ln p_base - ln p) */
    double dp;    /* p(tok) - p_base(tok) */
    int same_top; /* argmax equal */
    double nll, nll_base;
};

void kld_sample_of(const double *lp_base, const double *lp, int n, int tok, struct kld_sample *s);

/* the collected samples of a run */
struct kld_stats {
    struct kld_sample *s;
    size_t n, cap;
};

int kld_stats_add(struct kld_stats *st, const struct kld_sample *s); /* 0 or -1 (no memory) */
void kld_stats_free(struct kld_stats *st);

struct kld_summary {
    double ppl, ppl_err, ppl_base, ppl_base_err;
    double ln_ratio, ln_ratio_err; /* mean ln(p_base(tok)/p(tok)) = ln(PPL/PPL_base) */
    double kld_mean, kld_err, kld_max, kld_p99, kld_p999, kld_median, kld_min;
    double dp_mean, dp_err, dp_rms, dp_rms_err;
    double same_top, same_top_err; /* fractions */
    size_t n;
};

/* sorts a copy of the KLDs for the percentiles; 0 or -1 (no memory or no samples) */
int kld_stats_summary(const struct kld_stats *st, struct kld_summary *out);

#endif
