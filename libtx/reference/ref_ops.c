// SPDX-License-Identifier: MIT
/*
 * Building blocks of the FP32 reference forward: thread pool, linear layer,
 * norms, RoPE, MoE routing, synthetic weights. Plain C, no intrinsics.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tx-internal/glm_reference.h>

#include "ref_internal.h"

/* ------------------------------------------------------------------------ */
/* thread pool */

static void *worker_main(void *arg);

struct worker_arg {
    struct txref_pool *p;
    int index; /* 1..n_workers; the caller is 0 */
};

static struct worker_arg *worker_args_of(struct txref_pool *p)
{
    return (struct worker_arg *)(p->threads + p->n_workers);
}

int txref_pool_create(struct txref_pool **out, int n_threads)
{
    *out = NULL;
    if (n_threads <= 1)
        return 0;
    if (n_threads > 256)
        n_threads = 256;
    struct txref_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return TX_ENOMEM;
    p->n_workers = n_threads - 1;
    /* thread ids followed by their arguments, one allocation */
    p->threads = calloc(1, (size_t)p->n_workers * (sizeof(pthread_t) + sizeof(struct worker_arg)) +
                               sizeof(struct worker_arg));
    if (!p->threads) {
        free(p);
        return TX_ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    struct worker_arg *args = worker_args_of(p);
    int started = 0;
    for (int i = 0; i < p->n_workers; i++) {
        args[i].p = p;
        args[i].index = i + 1;
        if (pthread_create(&p->threads[i], NULL, worker_main, &args[i]) != 0)
            break;
        started++;
    }
    if (started < p->n_workers) {
        p->n_workers = started; /* run with what we have */
        if (started == 0) {
            txref_pool_destroy(p);
            return 0;
        }
    }
    *out = p;
    return 0;
}

void txref_pool_destroy(struct txref_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_workers; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

static void range_of(int64_t total, int parts, int index, int64_t *b, int64_t *e)
{
    *b = total * index / parts;
    *e = total * (index + 1) / parts;
}

static void *worker_main(void *arg)
{
    struct worker_arg *wa = arg;
    struct txref_pool *p = wa->p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->generation == seen && !p->quit)
            pthread_cond_wait(&p->start, &p->mu);
        if (p->quit)
            break;
        seen = p->generation;
        txref_range_fn fn = p->fn;
        void *ctx = p->ctx;
        int64_t b, e;
        range_of(p->total, p->n_workers + 1, wa->index, &b, &e);
        pthread_mutex_unlock(&p->mu);
        if (b < e)
            fn(ctx, b, e);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void txref_parallel_for(struct txref_pool *p, int64_t total, txref_range_fn fn, void *ctx)
{
    if (total <= 0)
        return;
    if (!p || total == 1) {
        fn(ctx, 0, total);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->total = total;
    p->pending = p->n_workers;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    int64_t b, e;
    range_of(total, p->n_workers + 1, 0, &b, &e);
    if (b < e)
        fn(ctx, b, e);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* ------------------------------------------------------------------------ */
/* linear algebra */

/* Eight independent partial sums (deterministic order, vectorisable). */
ref_real txref_dot(const ref_real *a, const ref_real *b, int64_t n)
{
    ref_real s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; k++)
            s[k] += a[i + k] * b[i + k];
    }
    for (; i < n; i++)
        s[i & 7] += a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

struct linear_job {
    const ref_real *x, *w, *b;
    int64_t n, in, out;
    ref_real *y;
};

static void linear_range(void *ctx, int64_t ob, int64_t oe)
{
    const struct linear_job *j = ctx;
    for (int64_t o = ob; o < oe; o++) {
        const ref_real *wr = j->w + o * j->in;
        const ref_real bias = j->b ? j->b[o] : 0.0f;
        for (int64_t t = 0; t < j->n; t++)
            j->y[t * j->out + o] = txref_dot(j->x + t * j->in, wr, j->in) + bias;
    }
}

void txref_linear(struct txref_pool *p, const ref_real *x, int64_t n, int64_t in, const ref_real *w,
                  const ref_real *b, int64_t out, ref_real *y)
{
    struct linear_job j = {x, w, b, n, in, out, y};
    /* parallel over output rows: each weight row is read once per call and
     * every y element is computed by exactly one thread in a fixed order */
    if (out * n * in < 65536)
        linear_range(&j, 0, out);
    else
        txref_parallel_for(p, out, linear_range, &j);
}

/* ------------------------------------------------------------------------ */
/* norms, RoPE */

void glm_ref_rmsnorm(const ref_real *x, const ref_real *w, int n, float eps, ref_real *out)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * (double)x[i];
    const ref_real r = (ref_real)(1.0 / sqrt(ss / n + (double)eps));
    for (int i = 0; i < n; i++)
        out[i] = w[i] * (x[i] * r);
}

void glm_ref_layernorm(const ref_real *x, const ref_real *w, const ref_real *b, int n, float eps,
                       ref_real *out)
{
    double mean = 0.0;
    for (int i = 0; i < n; i++)
        mean += x[i];
    mean /= n;
    double var = 0.0;
    for (int i = 0; i < n; i++) {
        double d = x[i] - mean;
        var += d * d;
    }
    var /= n;
    const double r = 1.0 / sqrt(var + (double)eps);
    for (int i = 0; i < n; i++)
        out[i] = (ref_real)((x[i] - mean) * r) * w[i] + b[i];
}

void glm_ref_rope(ref_real *x, int dim, int interleaved, const ref_real *inv_freq, int64_t pos)
{
    txref_rope_scaled(x, dim, interleaved, inv_freq, pos, 1.0f);
}

void txref_rope_scaled(ref_real *x, int dim, int interleaved, const ref_real *inv_freq, int64_t pos,
                       ref_real attn_factor)
{
    const int half = dim / 2;
    for (int i = 0; i < half; i++) {
        /* transformers: freqs = inv_freq (fp32) * position (fp32), in fp32;
         * cos = emb.cos() * attention_scaling (fp32; * 1.0f is exact) */
        const ref_real ang = (ref_real)pos * inv_freq[i];
        const ref_real c = (ref_real)cos((double)ang) * attn_factor;
        const ref_real s = (ref_real)sin((double)ang) * attn_factor;
        const int ia = interleaved ? 2 * i : i;
        const int ib = interleaved ? 2 * i + 1 : i + half;
        const ref_real a = x[ia], b = x[ib];
        x[ia] = a * c - b * s;
        x[ib] = b * c + a * s;
    }
}

/* ------------------------------------------------------------------------ */
/* MoE routing (noaux_tc): see docs/glm-architectures.md */

/* strictly "better": higher value, ties to the lower index */
static int better(ref_real va, int ia, ref_real vb, int ib)
{
    return va > vb || (va == vb && ia < ib);
}

int glm_ref_route(const struct glm_config *cfg, const ref_real *logits, const ref_real *bias,
                  int32_t *experts, ref_real *weights)
{
    const int E = cfg->n_routed_experts, K = cfg->num_experts_per_tok;
    const int G = cfg->n_group, TG = cfg->topk_group;
    if (E <= 0 || K <= 0 || K > E || G <= 0 || E % G || TG <= 0 || TG > G || E / G < 2)
        return TX_EINVAL;
    const int gs = E / G;
    ref_real *s = malloc(sizeof(ref_real) * (size_t)E * 2 + sizeof(ref_real) * (size_t)G +
                         sizeof(int) * (size_t)G);
    if (!s)
        return TX_ENOMEM;
    ref_real *choice = s + E, *gscore = choice + E;
    int *gsel = (int *)(gscore + G);
    for (int e = 0; e < E; e++) {
        s[e] = 1.0f / (1.0f + REF_EXP(-logits[e])); /* sigmoid */
        choice[e] = s[e] + (bias ? bias[e] : 0.0f);
    }
    /* group score: sum of the two best biased scores of the group */
    for (int g = 0; g < G; g++) {
        int b1 = -1, b2 = -1;
        for (int e = g * gs; e < (g + 1) * gs; e++) {
            if (b1 < 0 || better(choice[e], e, choice[b1], b1)) {
                b2 = b1;
                b1 = e;
            } else if (b2 < 0 || better(choice[e], e, choice[b2], b2)) {
                b2 = e;
            }
        }
        gscore[g] = choice[b1] + choice[b2];
        gsel[g] = 0;
    }
    for (int k = 0; k < TG; k++) {
        int best = -1;
        for (int g = 0; g < G; g++) {
            if (!gsel[g] && (best < 0 || better(gscore[g], g, gscore[best], best)))
                best = g;
        }
        gsel[best] = 1;
    }
    /* top-K experts of the kept groups by biased score, descending */
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            if (!gsel[e / gs])
                continue;
            int taken = 0;
            for (int j = 0; j < k; j++)
                taken |= experts[j] == e;
            if (taken)
                continue;
            if (best < 0 || better(choice[e], e, choice[best], best))
                best = e;
        }
        experts[k] = best;
    }
    /* gate weights from the unbiased scores */
    ref_real sum = 0.0f;
    for (int k = 0; k < K; k++) {
        weights[k] = s[experts[k]];
        sum += weights[k];
    }
    const ref_real scale = (ref_real)cfg->routed_scaling_factor;
    for (int k = 0; k < K; k++) {
        if (cfg->norm_topk_prob)
            weights[k] /= (sum + 1e-20f);
        weights[k] *= scale;
    }
    free(s);
    return 0;
}

/*
 * Softmax router (Qwen3MoeSparseMoeBlock): p = softmax(logits) in f32, the
 * top_k experts by p (ties: lower index), weights p or p / sum of the k.
 * Non-finite logits follow the device (docs/hardware.md 4.4): NaN counts
 * as -inf, +inf logits alone share the probability, a row without a logit
 * above -inf gives all 0 (and ids 0..top_k-1).
 */
int txref_route_softmax(const ref_real *logits, int experts, int top_k, int norm_topk_prob,
                        int32_t *ids, ref_real *weights)
{
    if (!logits || !ids || !weights || experts <= 0 || top_k <= 0 || top_k > experts)
        return TX_EINVAL;
    ref_real *p = malloc(sizeof(ref_real) * (size_t)experts);
    if (!p)
        return TX_ENOMEM;
    ref_real mx = -INFINITY;
    for (int e = 0; e < experts; e++) {
        if (isnan(logits[e]))
            continue;
        if (logits[e] > mx)
            mx = logits[e];
    }
    double sum = 0.0;
    for (int e = 0; e < experts; e++) {
        const ref_real l = logits[e];
        double v;
        if (isnan(l) || l == -INFINITY || mx == -INFINITY)
            v = 0.0;
        else if (mx == INFINITY)
            v = l == INFINITY ? 1.0 : 0.0;
        else
            v = exp((double)l - (double)mx);
        p[e] = (ref_real)v;
        sum += v;
    }
    for (int e = 0; e < experts; e++)
        p[e] = sum > 0.0 ? (ref_real)((double)p[e] / sum) : 0.0f;
    /* selection by repeated arg-max: exact and order-independent */
    for (int k = 0; k < top_k; k++) {
        int best = -1;
        for (int e = 0; e < experts; e++) {
            int taken = 0;
            for (int j = 0; j < k && !taken; j++)
                taken = ids[j] == e;
            if (!taken && (best < 0 || better(p[e], e, p[best], best)))
                best = e;
        }
        ids[k] = best;
        weights[k] = p[best];
    }
    double ksum = 0.0;
    for (int k = 0; k < top_k; k++)
        ksum += weights[k];
    if (norm_topk_prob && ksum > 0.0)
        for (int k = 0; k < top_k; k++)
            weights[k] = (ref_real)((double)weights[k] / ksum);
    free(p);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* hooks see floats */

const float *txref_hook_view(const ref_real *x, int64_t n, float **tmp)
{
#ifdef TXREF_F64
    *tmp = malloc(sizeof(float) * (size_t)n + 1);
    if (*tmp)
        for (int64_t i = 0; i < n; i++)
            (*tmp)[i] = (float)x[i];
    return *tmp;
#else
    (void)n;
    *tmp = NULL;
    return x;
#endif
}

/* the synthetic weights are the FP32 build's alone */
#ifndef TXREF_F64

/* ------------------------------------------------------------------------ */
/* synthetic weights */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

void glm_ref_synth_weight(const struct glm_tensor_info *t, uint64_t seed, float *dst)
{
    int64_t n = t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
    uint64_t st = seed ^ fnv1a(t->name);
    float offset = 0.0f, amp;
    switch (t->role) {
    case GLM_T_FINAL_NORM:
    case GLM_T_INPUT_NORM:
    case GLM_T_POST_ATTN_NORM:
    case GLM_T_Q_NORM:
    case GLM_T_K_NORM:
    case GLM_T_Q_A_NORM:
    case GLM_T_KV_A_NORM:
    case GLM_T_IDX_K_NORM:
        offset = 1.0f;
        amp = 0.1f;
        break;
    case GLM_T_Q_BIAS:
    case GLM_T_K_BIAS:
    case GLM_T_V_BIAS:
    case GLM_T_O_BIAS:
    case GLM_T_Q_A_BIAS:
    case GLM_T_KV_A_BIAS:
    case GLM_T_IDX_K_NORM_BIAS:
    case GLM_T_ROUTER_BIAS:
        amp = 0.1f;
        break;
    case GLM_T_EMBED:
        amp = 1.0f;
        break;
    default: /* Linear [out, in] */
        amp = (float)sqrt(3.0 / (double)(t->ndim == 2 ? t->shape[1] : 1));
        break;
    }
    for (int64_t i = 0; i < n; i++) {
        /* 24 random bits -> [-1, 1) */
        float u = (float)(splitmix64(&st) >> 40) * (2.0f / 16777216.0f) - 1.0f;
        dst[i] = offset + amp * u;
    }
}

#endif /* !TXREF_F64 */
