/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: per-layer outputs of a pass, validation against the FP32
 * host reference (the article's "100 random inputs, cosine > 0.99" check
 * with per-layer statistics), and a streaming-read bandwidth measurement.
 *
 * The reference gets the package's weights expanded to FP32 straight from
 * the device's weights buffer (tx_smd_dequant on the mapped extents), so it
 * computes in FP32 from exactly the stored parameters; the comparison
 * measures the device execution path (precision plan, conversions, the
 * device's arithmetic), not the export's quantisation.
 */
#include "runtime/rt_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYER_ROWS 64

static int forward_layers_session(glm_session_t *s, const int32_t *ids, int n, float *layers,
                                  float *logits, int32_t *rid, int32_t *sel)
{
    glm_model_t *m = s->m;
    if (n <= 0 || n > MAX_LAYER_ROWS || n > s->n_ctx)
        return tx_error(TX_EINVAL, "per-layer pass: 1..%d tokens", MAX_LAYER_ROWS);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return tx_error(TX_EINVAL, "token %d outside the vocabulary", ids[i]);
    const struct glm_config *c = &m->cfg;
    size_t dn = (size_t)(c->num_hidden_layers + 1) * (size_t)n * (size_t)c->hidden_size;
    float *dump = layers;
    float *tmp = NULL;
    if (!dump) {
        tmp = malloc(dn * sizeof(float));
        if (!tmp)
            return tx_error(TX_ENOMEM, "out of memory");
        dump = tmp;
    }
    pthread_mutex_lock(&m->lock);
    s->pos = 0;
    struct rt_seg seg = {s, 0, n, 0};
    struct rt_fwd f;
    memset(&f, 0, sizeof(f));
    f.n_seg = 1;
    f.seg = &seg;
    f.T = n;
    f.ids = ids;
    f.lrow0 = 0;
    f.lrows = logits ? n : 0;
    f.logits = logits;
    f.dump = dump;
    f.dump_rid = rid;
    f.dump_sel = sel;
    int rc = rt_forward(m, &f);
    if (!rc)
        s->pos = n;
    pthread_mutex_unlock(&m->lock);
    free(tmp);
    return rc;
}

TX_API int glm_forward_layers(glm_model_t *m, const int32_t *ids, int n, float *layers,
                              float *logits)
{
    if (!m || !ids)
        return tx_error(TX_EINVAL, "glm_forward_layers: NULL argument");
    if (n <= 0 || n > MAX_LAYER_ROWS)
        return tx_error(TX_EINVAL, "glm_forward_layers: n must be in 1..%d", MAX_LAYER_ROWS);
    struct glm_session_options o = {.n_ctx = n, .n_batch = n};
    glm_session_t *s;
    int rc = glm_session_create(m, &o, &s);
    if (rc)
        return rc;
    rc = forward_layers_session(s, ids, n, layers, logits, NULL, NULL);
    glm_session_free(s);
    return rc;
}

/* ---- reference weights from the device buffer ---------------------------- */

static const struct rt_tensor *find_tensor(const glm_model_t *m, const char *name)
{
    const struct tx_smd_tensor *st = tx_smd_find(m->smd, name);
    if (!st)
        return NULL;
    int lo = 0, hi = m->n_tensors - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const struct tx_smd_tensor *x = m->tensors[mid].smd;
        if (x == st)
            return &m->tensors[mid];
        if (x->data_offset < st->data_offset)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].smd == st)
            return &m->tensors[i];
    return NULL;
}

static int ref_provider(void *ctx, const struct glm_tensor_info *t, float *dst, char *err,
                        size_t errsz)
{
    glm_model_t *m = ctx;
    const struct rt_tensor *rt = find_tensor(m, t->name);
    if (!rt) {
        snprintf(err, errsz, "tensor '%s' not in the package", t->name);
        return -2; /* -ENOENT */
    }
    if (rt->streamed) {
        void *buf;
        if (rt_stream_read_tensor(m, (int)(rt - m->tensors), &buf)) {
            snprintf(err, errsz, "%s", tx_last_error());
            return -5; /* -EIO */
        }
        int rc = tx_smd_dequant(rt->smd, buf, dst, err, errsz);
        free(buf);
        return rc;
    }
    return tx_smd_dequant(rt->smd, (const uint8_t *)m->w_map + rt->off, dst, err, errsz);
}

/* ---- validation ----------------------------------------------------------- */

struct ref_capture {
    float *layers; /* [(L + 1) x n x D] */
    int n, D;
    const glm_model_t *m;
    int32_t *rid;  /* [n_moe x n x k] */
    int32_t *sel;  /* [L x n x index_topk] */
    int32_t *nsel; /* [L x n] */
};

static void cap_router(void *ctx, int layer, int n_tokens, int k, const int32_t *experts,
                       const float *weights)
{
    (void)weights;
    struct ref_capture *c = ctx;
    int mi = layer >= 0 && layer < c->m->cfg.num_hidden_layers ? c->m->moe_index[layer] : -1;
    if (mi < 0 || n_tokens != c->n || k != c->m->cfg.num_experts_per_tok)
        return;
    memcpy(c->rid + (size_t)mi * n_tokens * k, experts, sizeof(int32_t) * (size_t)n_tokens * k);
}

static void cap_indexer(void *ctx, int layer, int n_tokens, int pos0, const int32_t *sel,
                        const int32_t *n_sel, int stride)
{
    struct ref_capture *c = ctx;
    int K = c->m->cfg.index_topk;
    if (pos0 != 0 || n_tokens != c->n || layer < 0 || layer >= c->m->cfg.num_hidden_layers)
        return;
    for (int t = 0; t < n_tokens; t++) {
        int ns = n_sel[t] < K ? n_sel[t] : K;
        c->nsel[(size_t)layer * n_tokens + t] = ns;
        memcpy(c->sel + ((size_t)layer * n_tokens + t) * K, sel + (size_t)t * stride,
               sizeof(int32_t) * (size_t)ns);
    }
}

static int i32cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* 1 if the two id lists of length k hold the same set */
static int same_set(const int32_t *a, const int32_t *b, int k)
{
    int32_t x[4096], y[4096];
    if (k > 4096)
        k = 4096;
    memcpy(x, a, sizeof(int32_t) * (size_t)k);
    memcpy(y, b, sizeof(int32_t) * (size_t)k);
    qsort(x, (size_t)k, sizeof(int32_t), i32cmp);
    qsort(y, (size_t)k, sizeof(int32_t), i32cmp);
    return !memcmp(x, y, sizeof(int32_t) * (size_t)k);
}

static void cap_layer(void *ctx, int layer, const float *h, int n_tokens, int hidden,
                      const struct glm_ref_stats *st)
{
    (void)st;
    struct ref_capture *c = ctx;
    if (n_tokens != c->n || hidden != c->D)
        return;
    memcpy(c->layers + (size_t)layer * n_tokens * hidden, h,
           sizeof(float) * (size_t)n_tokens * (size_t)hidden);
}

static double cosine(const float *a, const float *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    if (aa == 0 && bb == 0)
        return 1.0;
    if (aa == 0 || bb == 0)
        return 0.0;
    return ab / sqrt(aa * bb);
}

struct acc {
    double r_bad, r_n, d_bad, d_n;
    double s, s2, mx;
    double rs, rs2, rmx;
    double cmin, csum;
    double err;
    double n;
};

static uint64_t xs(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

TX_API int glm_validate(glm_model_t *m, const struct glm_validate_options *opt,
                        struct glm_validate_report **out)
{
    char err[TX_ERR_MAX];
    if (!m || !out)
        return tx_error(TX_EINVAL, "glm_validate: NULL argument");
    *out = NULL;
    struct glm_validate_options o;
    memset(&o, 0, sizeof(o));
    if (opt)
        o = *opt;
    if (o.n_inputs <= 0)
        o.n_inputs = 100;
    if (o.n_tokens <= 0)
        o.n_tokens = 8;
    if (o.threshold <= 0)
        o.threshold = 0.99;
    if (o.n_tokens > MAX_LAYER_ROWS)
        return tx_error(TX_EINVAL, "glm_validate: at most %d tokens per input", MAX_LAYER_ROWS);
    const struct glm_config *c = &m->cfg;
    int L = c->num_hidden_layers, D = c->hidden_size, V = c->vocab_size, n = o.n_tokens;

    struct glm_ref_options ro = {.lazy = 0, .n_threads = o.ref_threads > 1 ? o.ref_threads : 0};
    struct glm_ref_model *ref = NULL;
    struct glm_ref_session *rs = NULL;
    glm_session_t *ds = NULL;
    struct glm_validate_report *r = calloc(1, sizeof(*r));
    float *dl = malloc(sizeof(float) * (size_t)(L + 1) * n * D);
    float *rl = malloc(sizeof(float) * (size_t)(L + 1) * n * D);
    float *dlog = malloc(sizeof(float) * (size_t)n * V);
    float *rlog = malloc(sizeof(float) * (size_t)n * V);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    int KR = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
    int KI = c->index_topk > 0 ? c->index_topk : 1;
    size_t nmoe = (size_t)(m->n_moe_layers ? m->n_moe_layers : 1);
    int32_t *drid = malloc(sizeof(int32_t) * nmoe * n * KR);
    int32_t *rrid = malloc(sizeof(int32_t) * nmoe * n * KR);
    int32_t *dsel = malloc(sizeof(int32_t) * (size_t)L * n * KI);
    int32_t *rsel = malloc(sizeof(int32_t) * (size_t)L * n * KI);
    int32_t *rnsel = calloc((size_t)L * n, sizeof(int32_t));
    struct acc *ac = calloc((size_t)L + 1, sizeof(*ac));
    int rc = TX_OK;
    if (!r || !dl || !rl || !dlog || !rlog || !ids || !ac || !drid || !rrid || !dsel || !rsel ||
        !rnsel) {
        rc = tx_error(TX_ENOMEM, "glm_validate: out of memory");
        goto out;
    }
    r->cosine = calloc((size_t)o.n_inputs, sizeof(double));
    r->layers = calloc((size_t)L + 1, sizeof(*r->layers));
    if (!r->cosine || !r->layers) {
        rc = tx_error(TX_ENOMEM, "glm_validate: out of memory");
        goto out;
    }
    double t0 = rt_now_ms();
    if (glm_ref_model_create(c, ref_provider, m, &ro, &ref, err, sizeof(err))) {
        rc = tx_error(TX_EINVAL, "glm_validate: reference: %s", err);
        goto out;
    }
    if (glm_ref_session_create(ref, n, &rs, err, sizeof(err))) {
        rc = tx_error(TX_ENOMEM, "glm_validate: reference session: %s", err);
        goto out;
    }
    double tref = rt_now_ms() - t0, tdev = 0;
    struct glm_session_options so = {.n_ctx = n, .n_batch = n};
    rc = glm_session_create(m, &so, &ds);
    if (rc)
        goto out;
    rt_plan_of(m->dev, &r->plan, NULL);

    uint64_t seed = o.seed ? o.seed : 0x9e3779b97f4a7c15ull;
    r->n_inputs = o.n_inputs;
    r->n_tokens = n;
    r->n_layers = L + 1;
    r->threshold = o.threshold;
    r->min_cosine = 2.0;
    for (int l = 0; l <= L; l++)
        ac[l].cmin = 2.0;
    double max_ref = 0, max_err = 0;
    for (int in = 0; in < o.n_inputs; in++) {
        for (int i = 0; i < n; i++)
            ids[i] = (int32_t)(xs(&seed) % (uint64_t)V);
        double a = rt_now_ms();
        rc = forward_layers_session(ds, ids, n, dl, dlog, drid, dsel);
        tdev += rt_now_ms() - a;
        if (rc)
            goto out;
        a = rt_now_ms();
        glm_ref_session_reset(rs);
        struct ref_capture cap = {rl, n, D, m, rrid, rsel, rnsel};
        memset(rnsel, 0, sizeof(int32_t) * (size_t)L * n);
        struct glm_ref_hooks hk = {
            .ctx = &cap, .layer_output = cap_layer, .router = cap_router, .indexer = cap_indexer};
        if (glm_ref_forward(rs, ids, n, rlog, &hk, err, sizeof(err))) {
            rc = tx_error(TX_EINVAL, "glm_validate: reference forward: %s", err);
            goto out;
        }
        tref += rt_now_ms() - a;
        double cs = cosine(dlog, rlog, (size_t)n * V);
        r->cosine[in] = cs;
        r->mean_cosine += cs;
        if (cs < r->min_cosine) {
            r->min_cosine = cs;
            r->worst_input = in;
        }
        for (size_t i = 0; i < (size_t)n * V; i++) {
            double e = fabs((double)dlog[i] - rlog[i]);
            if (e > max_err)
                max_err = e;
            if (fabs(rlog[i]) > max_ref)
                max_ref = fabs(rlog[i]);
        }
        for (int l = 0; l <= L; l++) {
            const float *d = dl + (size_t)l * n * D, *q = rl + (size_t)l * n * D;
            struct acc *x = &ac[l];
            for (size_t i = 0; i < (size_t)n * D; i++) {
                double dv = d[i], rv = q[i];
                x->s += dv;
                x->s2 += dv * dv;
                x->rs += rv;
                x->rs2 += rv * rv;
                if (fabs(dv) > x->mx)
                    x->mx = fabs(dv);
                if (fabs(rv) > x->rmx)
                    x->rmx = fabs(rv);
                if (fabs(dv - rv) > x->err)
                    x->err = fabs(dv - rv);
            }
            x->n += (double)n * D;
            if (l < L && m->moe_index[l] >= 0) {
                size_t b = (size_t)m->moe_index[l] * n * KR;
                for (int t = 0; t < n; t++) {
                    x->r_n++;
                    x->r_bad += !same_set(drid + b + (size_t)t * KR, rrid + b + (size_t)t * KR, KR);
                }
            }
            if (l < L && c->arch == GLM_ARCH_GLM_MOE_DSA &&
                c->indexer_types[l] == GLM_INDEXER_FULL && n > KI) {
                for (int t = KI; t < n; t++) { /* queries that see more than K keys */
                    x->d_n++;
                    x->d_bad += rnsel[(size_t)l * n + t] != KI ||
                                !same_set(dsel + ((size_t)l * n + t) * KI,
                                          rsel + ((size_t)l * n + t) * KI, KI);
                }
            }
            double lc = cosine(d, q, (size_t)n * D);
            if (lc < x->cmin)
                x->cmin = lc;
            x->csum += lc;
        }
        if (o.progress)
            o.progress(o.user, in + 1, o.n_inputs, cs);
    }
    r->mean_cosine /= o.n_inputs;
    r->max_rel_err = max_ref > 0 ? max_err / max_ref : max_err;
    for (int l = 0; l <= L; l++) {
        struct acc *x = &ac[l];
        struct glm_layer_stats *s = &r->layers[l];
        s->mean = x->s / x->n;
        s->std = sqrt(fmax(0, x->s2 / x->n - s->mean * s->mean));
        s->max_abs = x->mx;
        s->ref_mean = x->rs / x->n;
        s->ref_std = sqrt(fmax(0, x->rs2 / x->n - s->ref_mean * s->ref_mean));
        s->ref_max_abs = x->rmx;
        s->cosine_min = x->cmin;
        s->cosine_mean = x->csum / o.n_inputs;
        s->max_abs_err = x->err;
        s->route_mismatch = x->r_n ? x->r_bad / x->r_n : -1;
        s->dsa_mismatch = x->d_n ? x->d_bad / x->d_n : -1;
    }
    r->passed = r->min_cosine >= o.threshold;
    r->device_ms = tdev;
    r->reference_ms = tref;
out:
    glm_session_free(ds);
    glm_ref_session_destroy(rs);
    glm_ref_model_destroy(ref);
    free(dl);
    free(rl);
    free(dlog);
    free(rlog);
    free(ids);
    free(ac);
    free(drid);
    free(rrid);
    free(dsel);
    free(rsel);
    free(rnsel);
    if (rc) {
        glm_validate_report_free(r);
        return rc;
    }
    *out = r;
    return TX_OK;
}

TX_API void glm_validate_report_free(struct glm_validate_report *r)
{
    if (!r)
        return;
    free(r->cosine);
    free(r->layers);
    free(r);
}
