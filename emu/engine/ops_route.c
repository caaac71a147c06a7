/* SPDX-License-Identifier: MIT */
/*
 * MOE_ROUTE (sigmoid router with correction bias, load penalty, group
 * limit, top-k, normalisation, scaling; or the softmax router) and SAMPLE (argmax or temperature /
 * top-k / top-p sampling with a counter-based generator).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ---- MOE_ROUTE ---------------------------------------------------------- */

/*
 * The softmax router's scores (TX8_ROUTE_F_SOFTMAX): p = exp(l - max) / sum
 * with the exponentials in f32 and their sum in double. NaN logits count as
 * -inf (probability 0); if some logits are +inf they alone share the
 * probability; a row with no logit above -inf gives every expert 0.
 */
static void eng_softmax_row(const float *lg, size_t E, float *p)
{
    float mx = -INFINITY;
    for (size_t e = 0; e < E; e++)
        if (!isnan(lg[e]) && lg[e] > mx)
            mx = lg[e];
    if (mx == -INFINITY) {
        for (size_t e = 0; e < E; e++)
            p[e] = 0.0f;
        return;
    }
    double sum = 0;
    for (size_t e = 0; e < E; e++) {
        float v;
        if (isnan(lg[e]) || lg[e] == -INFINITY)
            v = 0.0f;
        else if (mx == INFINITY)
            v = lg[e] == INFINITY ? 1.0f : 0.0f;
        else
            v = expf(lg[e] - mx);
        p[e] = v;
        sum += v;
    }
    for (size_t e = 0; e < E; e++) /* sum >= 1: the maximum gives exp(0) */
        p[e] = (float)(p[e] / sum);
}

struct route_ctx {
    struct tx8_engine *e;
    const struct tx8_cmd_moe_route *m;
    const float *logits, *bias, *load;
    int32_t *ids;
    float *wout;
};

static void route_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct route_ctx *r = p;
    const struct tx8_cmd_moe_route *m = r->m;
    size_t E = m->experts, K = m->top_k;
    size_t ng = m->n_group > 1 ? m->n_group : 1, gsz = E / ng;
    float *s = eng_wscratch(w, W_TMP, (E * 2 + ng) * 4 + ng + 64);
    struct eng_cand *cand = eng_wscratch(w, W_TMP2, E * sizeof(struct eng_cand));
    if (!s || !cand)
        return;
    float *choice = s + E, *gsc = choice + E;
    uint8_t *keep = (uint8_t *)(gsc + ng);
    for (size_t t = b; t < end; t++) {
        const float *lg = r->logits + t * E;
        if (m->hdr.flags & TX8_ROUTE_F_SOFTMAX)
            eng_softmax_row(lg, E, s);
        else
            for (size_t e = 0; e < E; e++)
                s[e] = 1.0f / (1.0f + expf(-lg[e]));
        for (size_t e = 0; e < E; e++) {
            float ch = s[e];
            if (r->bias)
                ch += r->bias[e];
            if (r->load)
                ch -= m->lambda * r->load[e];
            choice[e] = isnan(ch) ? -INFINITY : ch;
        }
        if (ng > 1) {
            /* group scores: sum of the two best choices of each group */
            for (size_t g = 0; g < ng; g++) {
                float b1 = -INFINITY, b2 = -INFINITY;
                for (size_t e = g * gsz; e < (g + 1) * gsz; e++) {
                    if (choice[e] > b1) {
                        b2 = b1;
                        b1 = choice[e];
                    } else if (choice[e] > b2) {
                        b2 = choice[e];
                    }
                }
                gsc[g] = gsz >= 2 ? b1 + b2 : b1;
            }
            /* only the topk_group best groups (ties: lower index) stay */
            size_t kept = eng_topk(NULL, gsc, ng, m->topk_group, cand);
            memset(keep, 0, ng);
            for (size_t j = 0; j < kept; j++)
                keep[cand[j].i] = 1;
            for (size_t g = 0; g < ng; g++)
                if (!keep[g])
                    for (size_t e = g * gsz; e < (g + 1) * gsz; e++)
                        choice[e] = -INFINITY;
        }
        /* top-k by choice; ineligible experts sit at -inf and rank by index
         * after every eligible one, and top_k <= eligible count */
        size_t got = eng_topk(NULL, choice, E, K, cand);
        int32_t *ids = r->ids + t * K;
        float *wo = r->wout + t * K;
        double sum = 0;
        for (size_t j = 0; j < got; j++) {
            ids[j] = cand[j].i;
            wo[j] = s[cand[j].i];
            sum += wo[j];
        }
        for (size_t j = 0; j < got; j++) {
            float v = wo[j];
            if (m->hdr.flags & TX8_ROUTE_F_NORM_TOPK)
                v = (float)(v / (sum + 1e-20));
            wo[j] = v * m->scaling;
        }
    }
}

int eng_exec_moe_route(struct eng_cmd *c)
{
    const struct tx8_cmd_moe_route *m = c->cmd;
    struct tx8_engine *e = c->e;
    if (!m->tokens)
        return 0;
    struct route_ctx r = {e,
                          m,
                          eng_ptr(e, m->logits),
                          m->bias ? eng_ptr(e, m->bias) : NULL,
                          NULL,
                          eng_ptr(e, m->out_ids),
                          eng_ptr(e, m->out_w)};
    uint64_t *counts = m->counts ? eng_ptr(e, m->counts) : NULL;
    if (counts && (m->hdr.flags & TX8_ROUTE_F_LOAD_PENALTY)) {
        float *load = eng_jscratch(e, J_MISC, (size_t)m->experts * 4);
        if (!load)
            return TX8_STATUS_DEVICE_ERROR;
        uint64_t total = 0;
        for (size_t i = 0; i < m->experts; i++)
            total += counts[i];
        double denom = total > 1 ? (double)total : 1.0;
        for (size_t i = 0; i < m->experts; i++)
            load[i] = (float)((double)counts[i] / denom);
        r.load = load;
    }
    size_t chunk = 16384 / m->experts;
    eng_parallel(e, m->tokens, chunk ? chunk : 1, route_fn, &r);
    if (eng_aborted(e) || atomic_load(&e->failed))
        return 0; /* the runner reports it */
    if (counts && (m->hdr.flags & TX8_ROUTE_F_COUNT)) {
        size_t n = (size_t)m->tokens * m->top_k;
        for (size_t i = 0; i < n; i++) {
            int32_t id = r.ids[i]; /* device memory: re-check the bound */
            if (id >= 0 && (uint32_t)id < m->experts)
                counts[id]++;
        }
    }
    return 0;
}

/* ---- SAMPLE ------------------------------------------------------------- */

struct sample_ctx {
    struct tx8_engine *e;
    const struct tx8_cmd_sample *m;
    const float *logits;
    int32_t *out;
    float *probs;
    const int32_t *history;
    const uint32_t *allow; /* 1.9: the allowed-token masks, or NULL */
};

void eng_sample_cmd(const struct eng_cmd *c, struct tx8_cmd_sample *out)
{
    eng_cmd_read(c, out, sizeof(*out));
}

static int i32_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* llama.cpp's penalties on the row copy z (ids of the history < V). */
static void apply_penalties(const struct tx8_cmd_sample *m, const int32_t *hist, float *z, size_t V,
                            int32_t *tmp)
{
    size_t n = 0;
    for (uint32_t i = 0; i < m->n_history; i++)
        if (hist[i] >= 0 && (size_t)hist[i] < V)
            tmp[n++] = hist[i];
    if (!n)
        return;
    qsort(tmp, n, sizeof(*tmp), i32_cmp);
    float rp = m->repeat_penalty;
    int rep = rp != 0.0f && rp != 1.0f;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && tmp[j] == tmp[i])
            j++;
        float *l = &z[tmp[i]];
        if (!isnan(*l) && isfinite(*l)) {
            if (rep)
                *l = *l > 0 ? *l / rp : *l * rp;
            *l -= (float)(j - i) * m->frequency_penalty + m->presence_penalty;
        }
        i = j;
    }
}

static int cand_cmp(const void *a, const void *b)
{
    const struct eng_cand *x = a, *y = b;
    if (x->s > y->s)
        return -1;
    if (x->s < y->s)
        return 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int idx_cmp(const void *a, const void *b)
{
    const struct eng_cand *x = a, *y = b;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Argmax: the lowest id among the largest non-NaN logits; 0 if all are NaN.
 * *n_max: how many logits equal the largest one. */
static size_t argmax_row(const float *lg, size_t V, float *bv_out, size_t *n_max)
{
    size_t best = 0, cnt = 0;
    float bv = -INFINITY;
    int found = 0;
    for (size_t i = 0; i < V; i++) {
        if (isnan(lg[i]))
            continue;
        if (!found || lg[i] > bv) {
            bv = lg[i];
            best = i;
            found = 1;
            cnt = 1;
        } else if (lg[i] == bv) {
            cnt++;
        }
    }
    *bv_out = found ? bv : NAN;
    *n_max = cnt;
    return best;
}

static void sample_row(struct sample_ctx *c, size_t row, struct eng_worker *w)
{
    const struct tx8_cmd_sample *m = c->m;
    const float *lg = c->logits + row * m->ld_logits;
    size_t V = m->vocab;
    struct eng_cand *cd = eng_wscratch(w, W_TMP, V * sizeof(struct eng_cand));
    float *z = eng_wscratch(w, W_TMP2, V * 4);
    if (!cd || !z)
        return;
    /* penalties first, on a copy of the row; then the mask (1.9): a
     * masked-out id is NaN, never chosen */
    if ((c->history && m->n_history) || c->allow) {
        float *pz = eng_wscratch(w, W_C, V * 4);
        if (!pz)
            return;
        memcpy(pz, lg, V * 4);
        if (c->history && m->n_history) {
            int32_t *tmp = eng_wscratch(w, W_TMP3, (size_t)m->n_history * 4);
            if (!tmp)
                return;
            apply_penalties(m, c->history + row * m->n_history, pz, V, tmp);
        }
        if (c->allow) {
            const uint32_t *a = c->allow + row * m->ld_allow;
            for (size_t i = 0; i < V; i++)
                if (!(a[i / 32] >> (i % 32) & 1u))
                    pz[i] = NAN;
        }
        lg = pz;
    }
    const struct eng_kernels *kn = c->e->k;
    float bv;
    size_t n_max;
    size_t best =
        kn->argmax_f32 ? kn->argmax_f32(lg, V, &bv, &n_max) : argmax_row(lg, V, &bv, &n_max);

    /* greedy; also when no logit is finite enough to sample from (all NaN or
     * all -inf) */
    if (!(m->temperature > 0.0f) || isnan(bv) || bv == -INFINITY) {
        c->out[row] = (int32_t)best;
        if (c->probs) {
            double p = 0;
            if (bv == INFINITY) {
                p = 1.0 / (double)n_max; /* the +inf logits share the mass */
            } else if (!isnan(bv) && bv != -INFINITY) {
                double sum = 0;
                for (size_t i = 0; i < V; i++)
                    if (!isnan(lg[i]))
                        sum += exp((double)lg[i] - bv);
                p = sum > 0 ? 1.0 / sum : 0.0;
            }
            c->probs[row] = (float)p;
        }
        return;
    }

    size_t K = m->top_k && m->top_k < V ? m->top_k : V;
    /*
     * z = (logit - max) in double, divided by the temperature unless the
     * temperature comes last (TX8_SAMPLE_F_TEMP_LAST: the filters see the
     * probabilities at temperature 1). 1 / temperature cannot overflow in
     * double (the smallest f32 temperature gives ~7e44) and the largest z
     * is exactly 0, so a tiny temperature keeps the maximum (and exact ties
     * with it) and sends everything else to -inf: greedy. NaN logits are
     * -inf (never drawn). If some logits are +inf they alone share the
     * probability (the limit of the softmax), ties broken by id as usual.
     */
    int temp_last = (m->hdr.flags & TX8_SAMPLE_F_TEMP_LAST) != 0;
    double inv_t = 1.0 / (double)m->temperature;
    double sel_t = temp_last ? 1.0 : inv_t;
    if (kn->sample_z_f32 && bv != INFINITY) {
        kn->sample_z_f32(z, lg, V, bv, sel_t);
    } else {
        for (size_t i = 0; i < V; i++) {
            float l = lg[i];
            if (isnan(l) || l == -INFINITY)
                z[i] = -INFINITY;
            else if (bv == INFINITY)
                z[i] = l == INFINITY ? 0.0f : -INFINITY;
            else
                z[i] = (float)(((double)l - (double)bv) * sel_t);
        }
    }
    size_t n;
    int sorted = 0;
    if (K < V) {
        n = eng_topk(kn, z, V, K, cd); /* best first */
        sorted = 1;
    } else {
        n = V;
        for (size_t i = 0; i < V; i++) {
            cd[i].s = z[i];
            cd[i].i = (int32_t)i;
        }
    }
    float zmax = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (cd[i].s > zmax)
            zmax = cd[i].s;
    if (zmax == -INFINITY) { /* not reached: the maximum is finite or +inf */
        c->out[row] = (int32_t)best;
        if (c->probs)
            c->probs[row] = 0;
        return;
    }
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        cd[i].s = (float)exp((double)cd[i].s - zmax);
        total += cd[i].s;
    }
    /* nucleus: the smallest best-first prefix with probability >= top_p */
    if (m->top_p < 1.0f) {
        if (!sorted)
            qsort(cd, n, sizeof(*cd), cand_cmp);
        double cum = 0, lim = (double)m->top_p * total;
        size_t keep = n;
        for (size_t i = 0; i < n; i++) {
            cum += cd[i].s;
            if (cum >= lim) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        total = cum < lim ? total : cum;
        sorted = 1;
    }
    /* min-p: keep p >= min_p * p_max (p_max is exp(0) = 1 here) */
    if (m->min_p > 0.0f) {
        size_t k = 0;
        double t2 = 0;
        for (size_t i = 0; i < n; i++)
            if (cd[i].s >= m->min_p) {
                cd[k++] = cd[i];
                t2 += cd[i].s;
            }
        n = k; /* the maximum (1 >= min_p) always stays */
        total = t2;
    }
    /* the temperature last: the kept tokens' probabilities at it */
    if (temp_last && inv_t != 1.0) {
        total = 0;
        for (size_t i = 0; i < n; i++) {
            float l = lg[cd[i].i];
            double zz = bv == INFINITY ? 0.0 : ((double)l - (double)bv) * inv_t;
            cd[i].s = (float)exp(zz);
            total += cd[i].s;
        }
    }
    /* draw: walk the kept tokens in increasing id order */
    if (sorted)
        qsort(cd, n, sizeof(*cd), idx_cmp);
    double u = eng_rand_uniform(m->seed, m->counter + row) * total;
    double cum = 0;
    size_t pick = n - 1;
    while (pick > 0 && !(cd[pick].s > 0)) /* rounding fallback: never a zero */
        pick--;
    for (size_t i = 0; i < n; i++) {
        cum += cd[i].s;
        if (cum > u) {
            pick = i;
            break;
        }
    }
    c->out[row] = cd[pick].i;
    if (c->probs)
        c->probs[row] = (float)(cd[pick].s / total);
}

static void sample_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    for (size_t r = b; r < end; r++)
        sample_row(p, r, w);
}

/*
 * Greedy rows (temperature <= 0) without penalties, one at a time, split
 * over the vocabulary: the argmax per chunk (combined in chunk order, so
 * the lowest id among the largest logits wins, as in argmax_row), and, when
 * the probability is asked for, the softmax's denominator sum exp(l - max)
 * per chunk (the exp kernel in f32, ~1 ulp, summed in double; the chunks'
 * sums added in chunk order: the same result on any number of cores). No
 * softmax is computed when probs is 0.
 */
#define GREEDY_CHUNK 8192

struct greedy_part {
    float bv;
    int found;
    size_t best, cnt;
    double sum;
};

struct greedy_ctx {
    struct tx8_engine *e;
    const float *lg;
    size_t V;
    float bv;
    struct greedy_part *part;
};

static void greedy_max_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct greedy_ctx *g = p;
    (void)w;
    for (size_t ch = b; ch < end; ch++) {
        size_t i0 = ch * GREEDY_CHUNK, n = g->V - i0 < GREEDY_CHUNK ? g->V - i0 : GREEDY_CHUNK;
        struct greedy_part *r = &g->part[ch];
        const struct eng_kernels *kn = g->e->k;
        r->best = i0 + (kn->argmax_f32 ? kn->argmax_f32(g->lg + i0, n, &r->bv, &r->cnt)
                                       : argmax_row(g->lg + i0, n, &r->bv, &r->cnt));
        r->found = !isnan(r->bv);
    }
}

static void greedy_sum_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct greedy_ctx *g = p;
    float *z = eng_wscratch(w, W_TMP2, GREEDY_CHUNK * 4);
    if (!z)
        return;
    for (size_t ch = b; ch < end; ch++) {
        size_t i0 = ch * GREEDY_CHUNK, n = g->V - i0 < GREEDY_CHUNK ? g->V - i0 : GREEDY_CHUNK;
        for (size_t i = 0; i < n; i++) {
            float l = g->lg[i0 + i];
            z[i] = isnan(l) ? -INFINITY : l;
        }
        g->e->k->exp_sum(z, n, g->bv);
        double sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += z[i];
        g->part[ch].sum = sum;
    }
}

static int sample_greedy(struct tx8_engine *e, const struct tx8_cmd_sample *m, const float *lg0,
                         int32_t *out, float *probs)
{
    size_t V = m->vocab, nch = (V + GREEDY_CHUNK - 1) / GREEDY_CHUNK;
    struct greedy_part *part = eng_jscratch(e, J_MISC, nch * sizeof(*part));
    if (!part)
        return TX8_STATUS_DEVICE_ERROR;
    for (size_t row = 0; row < m->rows; row++) {
        struct greedy_ctx g = {e, lg0 + row * m->ld_logits, V, 0, part};
        eng_parallel(e, nch, 1, greedy_max_fn, &g);
        if (atomic_load(&e->failed) || eng_aborted(e))
            return 0; /* the job runner reports it */
        float bv = NAN;
        size_t best = 0, n_max = 0;
        for (size_t ch = 0; ch < nch; ch++) {
            const struct greedy_part *r = &part[ch];
            if (!r->found)
                continue;
            if (isnan(bv) || r->bv > bv) {
                bv = r->bv;
                best = r->best;
                n_max = r->cnt;
            } else if (r->bv == bv) {
                n_max += r->cnt;
            }
        }
        out[row] = (int32_t)best;
        if (!probs)
            continue;
        double p = 0;
        if (bv == INFINITY) {
            p = 1.0 / (double)n_max; /* the +inf logits share the mass */
        } else if (!isnan(bv) && bv != -INFINITY) {
            g.bv = bv;
            eng_parallel(e, nch, 1, greedy_sum_fn, &g);
            double sum = 0;
            for (size_t ch = 0; ch < nch; ch++)
                sum += part[ch].sum;
            p = sum > 0 ? 1.0 / sum : 0.0;
        }
        probs[row] = (float)p;
    }
    return 0;
}

int eng_exec_sample(struct eng_cmd *c)
{
    struct tx8_cmd_sample mm;
    const struct tx8_cmd_sample *m = &mm;
    eng_sample_cmd(c, &mm);
    struct tx8_engine *e = c->e;
    if (!m->rows)
        return 0;
    if (!(m->temperature > 0.0f) && !m->n_history && !m->allow)
        return sample_greedy(e, m, eng_ptr(e, m->logits), eng_ptr(e, m->out),
                             m->probs ? eng_ptr(e, m->probs) : NULL);
    struct sample_ctx s = {e,
                           m,
                           eng_ptr(e, m->logits),
                           eng_ptr(e, m->out),
                           m->probs ? eng_ptr(e, m->probs) : NULL,
                           m->n_history ? eng_ptr(e, m->history) : NULL,
                           m->allow ? eng_ptr(e, m->allow) : NULL};
    eng_parallel(e, m->rows, 1, sample_fn, &s);
    return 0;
}
