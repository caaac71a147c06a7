// SPDX-License-Identifier: MIT
/*
 * glm-perplexity's arithmetic: the formulas llama-perplexity uses
 * (docs/perplexity.md), in double precision.
 */
#include "common/ppl_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ppl_log_softmax(const float *logits, int n, double *out)
{
    double mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (logits[i] > mx)
            mx = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += exp((double)logits[i] - mx);
    const double lse = mx + log(sum);
    for (int i = 0; i < n; i++)
        out[i] = (double)logits[i] - lse;
}

void ppl_acc_add(struct ppl_acc *a, double nll)
{
    a->nll += nll;
    a->nll2 += nll * nll;
    a->count++;
}

double ppl_acc_ppl(const struct ppl_acc *a)
{
    return a->count ? exp(a->nll / (double)a->count) : 0.0;
}

/* standard error of the mean of values with sum s, sum of squares s2 */
static double sem(double s, double s2, uint64_t n)
{
    if (n < 2)
        return 0.0;
    double mean = s / (double)n;
    double var = s2 / (double)n - mean * mean;
    return var > 0.0 ? sqrt(var / (double)(n - 1)) : 0.0;
}

double ppl_acc_ppl_err(const struct ppl_acc *a)
{
    return ppl_acc_ppl(a) * sem(a->nll, a->nll2, a->count);
}

void cos_acc_add(struct cos_acc *c, const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++) {
        c->ab += (double)a[i] * b[i];
        c->aa += (double)a[i] * a[i];
        c->bb += (double)b[i] * b[i];
    }
}

double cos_acc_value(const struct cos_acc *c)
{
    return c->aa > 0.0 && c->bb > 0.0 ? c->ab / sqrt(c->aa * c->bb) : 0.0;
}

void kld_sample_of(const double *lp_base, const double *lp, int n, int tok, struct kld_sample *s)
{
    double kld = 0.0;
    int top_b = 0, top = 0;
    for (int i = 0; i < n; i++) {
        double pb = exp(lp_base[i]);
        if (pb > 0.0)
            kld += pb * (lp_base[i] - lp[i]);
        if (lp_base[i] > lp_base[top_b])
            top_b = i;
        if (lp[i] > lp[top])
            top = i;
    }
    s->kld = kld;
    s->dp = exp(lp[tok]) - exp(lp_base[tok]);
    s->same_top = top == top_b;
    s->nll = -lp[tok];
    s->nll_base = -lp_base[tok];
}

int kld_stats_add(struct kld_stats *st, const struct kld_sample *s)
{
    if (st->n == st->cap) {
        size_t nc = st->cap ? st->cap * 2 : 1024;
        struct kld_sample *ns = realloc(st->s, nc * sizeof(*ns));
        if (!ns)
            return -1;
        st->s = ns;
        st->cap = nc;
    }
    st->s[st->n++] = *s;
    return 0;
}

void kld_stats_free(struct kld_stats *st)
{
    free(st->s);
    memset(st, 0, sizeof(*st));
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the value at fraction q of the sorted v (linear interpolation, as numpy) */
static double quantile(const double *v, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    if (i + 1 >= n)
        return v[n - 1];
    double f = pos - (double)i;
    return v[i] + (v[i + 1] - v[i]) * f;
}

int kld_stats_summary(const struct kld_stats *st, struct kld_summary *o)
{
    memset(o, 0, sizeof(*o));
    const size_t n = st->n;
    if (!n)
        return -1;
    double *k = malloc(n * sizeof(double));
    if (!k)
        return -1;
    struct ppl_acc q = {0}, b = {0};
    double kl = 0, kl2 = 0, lr = 0, lr2 = 0, dp = 0, dp2 = 0, dp4 = 0, same = 0;
    for (size_t i = 0; i < n; i++) {
        const struct kld_sample *s = &st->s[i];
        k[i] = s->kld;
        kl += s->kld;
        kl2 += s->kld * s->kld;
        ppl_acc_add(&q, s->nll);
        ppl_acc_add(&b, s->nll_base);
        double r = s->nll - s->nll_base;
        lr += r;
        lr2 += r * r;
        dp += s->dp;
        dp2 += s->dp * s->dp;
        dp4 += s->dp * s->dp * s->dp * s->dp;
        same += s->same_top;
    }
    const double dn = (double)n;
    o->n = n;
    o->ppl = ppl_acc_ppl(&q);
    o->ppl_err = ppl_acc_ppl_err(&q);
    o->ppl_base = ppl_acc_ppl(&b);
    o->ppl_base_err = ppl_acc_ppl_err(&b);
    o->ln_ratio = lr / dn;
    o->ln_ratio_err = sem(lr, lr2, n);
    o->kld_mean = kl / dn;
    o->kld_err = sem(kl, kl2, n);
    o->dp_mean = dp / dn;
    o->dp_err = sem(dp, dp2, n);
    /* RMS dp = sqrt(mean dp^2); its error from that of mean dp^2 */
    o->dp_rms = sqrt(dp2 / dn);
    o->dp_rms_err = o->dp_rms > 0.0 ? sem(dp2, dp4, n) / (2.0 * o->dp_rms) : 0.0;
    o->same_top = same / dn;
    o->same_top_err = n > 1 ? sqrt(o->same_top * (1.0 - o->same_top) / (dn - 1.0)) : 0.0;
    qsort(k, n, sizeof(double), dbl_cmp);
    o->kld_min = k[0];
    o->kld_max = k[n - 1];
    o->kld_median = quantile(k, n, 0.5);
    o->kld_p99 = quantile(k, n, 0.99);
    o->kld_p999 = quantile(k, n, 0.999);
    free(k);
    return 0;
}
