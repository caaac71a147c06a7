/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: per-layer outputs of a pass, validation against the FP32
 * host reference (the article's "100 random inputs, cosine > 0.99" check
 * with per-layer statistics). The read-bandwidth probe is in bandwidth.c.
 *
 * Two references: one gets the package's weights expanded to FP32 straight
 * from the device's weights buffer (tx_smd_dequant on the mapped extents),
 * so device vs it measures the device execution path (precision plan,
 * conversions, the device's arithmetic); the other gets the original
 * checkpoint's weights (the source the package records, verified by its
 * content hash), so package reference vs it measures the export's
 * quantisation, and device vs it is the article's deployment check.
 */
#include "runtime/rt_internal.h"

#include <tx-internal/tx_arch.h>
#include <tx-internal/tx_model_internal.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <tx-internal/tx_checkpoint.h>

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
        return TX_ENOENT;
    }
    if (rt->streamed) {
        void *buf;
        if (rt_stream_read_tensor(m, (int)(rt - m->tensors), &buf)) {
            snprintf(err, errsz, "%s", tx_last_error());
            return TX_EIO;
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

/* ---- the original model ---------------------------------------------------- */

/* the original's tensor t, checked against the package's shape */
static const struct tx_tensor *orig_tensor(const struct tx_ckpt *c, const struct glm_tensor_info *t,
                                           char *err, size_t errsz, int *rc)
{
    const struct tx_ckpt_tensor *ct = tx_ckpt_find(c, t->name);
    if (!ct) {
        snprintf(err, errsz, "tensor '%s' not in the original %s", t->name, tx_ckpt_path(c));
        *rc = TX_ENOENT;
        return NULL;
    }
    uint64_t want = (uint64_t)t->shape[0] * (uint64_t)(t->ndim == 2 ? t->shape[1] : 1);
    if (ct->t->nelem != want) {
        snprintf(err, errsz, "tensor '%s' of the original %s has %llu elements, the package %llu",
                 t->name, tx_ckpt_path(c), (unsigned long long)ct->t->nelem,
                 (unsigned long long)want);
        *rc = TX_EINVAL;
        return NULL;
    }
    return ct->t;
}

static int orig_provider(void *ctx, const struct glm_tensor_info *t, float *dst, char *err,
                         size_t errsz)
{
    int rc;
    const struct tx_tensor *ot = orig_tensor(ctx, t, err, errsz, &rc);
    if (!ot)
        return rc;
    rc = tx_tensor_read_f32(ot, 0, ot->nelem, dst, err, errsz);
    tx_tensor_release(ot);
    return rc < 0 ? rc : 0;
}

/* the float64 reference's: an FP8 original's weights dequantised exactly */
static int orig_provider64(void *ctx, const struct glm_tensor_info *t, double *dst, char *err,
                           size_t errsz)
{
    int rc;
    const struct tx_tensor *ot = orig_tensor(ctx, t, err, errsz, &rc);
    if (!ot)
        return rc;
    rc = txm_tensor_read_f64(ot, 0, ot->nelem, dst, err, errsz);
    tx_tensor_release(ot);
    return rc < 0 ? rc : 0;
}

/* every tensor from the original except those of one layer type, which come
 * from the package: the quantisation error of that type alone */
struct mixed_ctx {
    glm_model_t *m;
    const struct tx_ckpt *c;
    int type; /* enum tx_smd_layer */
};

static int mixed_provider(void *ctx, const struct glm_tensor_info *t, float *dst, char *err,
                          size_t errsz)
{
    struct mixed_ctx *x = ctx;
    const struct tx_smd_tensor *st = tx_smd_find(x->m->smd, t->name);
    if (st && st->layer_type == x->type)
        return ref_provider(x->m, t, dst, err, errsz);
    return orig_provider((void *)x->c, t, dst, err, errsz);
}

static void note(struct glm_validate_report *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(struct glm_validate_report *r, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    free(r->original_note);
    r->original_note = strdup(buf);
}

/* The recorded source: metadata "source_path" and "source_hash". */
static void recorded_source(glm_model_t *m, char *path, size_t pathsz, char *hash, size_t hashsz)
{
    path[0] = hash[0] = 0;
    size_t len = 0;
    const char *txt = tx_smd_metadata_json(m->smd, &len);
    if (!txt)
        return;
    struct json_tokener *tk = json_tokener_new();
    if (!tk)
        return;
    struct json_object *o = json_tokener_parse_ex(tk, txt, (int)len);
    json_tokener_free(tk);
    if (!o)
        return;
    struct json_object *v;
    if (json_object_object_get_ex(o, "source_path", &v) && json_object_is_type(v, json_type_string))
        snprintf(path, pathsz, "%s", json_object_get_string(v));
    if (json_object_object_get_ex(o, "source_hash", &v) && json_object_is_type(v, json_type_string))
        snprintf(hash, hashsz, "%s", json_object_get_string(v));
    json_object_put(o);
}

/* Opens the original for the report: *out NULL (with a note) when it is not
 * to be used; an error only when the caller asked for it explicitly. */
static int open_original(glm_model_t *m, const struct glm_validate_options *o,
                         struct glm_validate_report *r, struct tx_ckpt **out)
{
    *out = NULL;
    char rec[4096], err[TX_ERR_MAX];
    recorded_source(m, rec, sizeof(rec), r->source_hash, sizeof(r->source_hash));
    if (o->use_original == GLM_VALIDATE_ORIGINAL_NONE) {
        note(r, "the original model was not requested");
        return TX_OK;
    }
    const char *path = o->original ? o->original : rec[0] ? rec : NULL;
    int strict = o->original || o->use_original == GLM_VALIDATE_ORIGINAL_REQUIRE;
    if (!path) {
        note(r, "the package records no source model (exported by an older glm-export); give "
                "the original with --original");
        return strict ? tx_error(TX_EINVAL, "glm_validate: %s", r->original_note) : TX_OK;
    }
    struct tx_ckpt *c = NULL;
    int orc = tx_ckpt_open(path, &c, err, sizeof(err));
    if (orc < 0) {
        if (!strict) {
            note(r,
                 "the package's source %s cannot be opened (%s); give the original with "
                 "--original",
                 path, err);
            return TX_OK;
        }
        return tx_error(orc, "glm_validate: original model: %s", err);
    }
    uint32_t h;
    if (tx_ckpt_source_hash(c, &h, err, sizeof(err)) < 0) {
        tx_ckpt_close(c);
        return tx_error(TX_EIO, "glm_validate: original model %s: %s", path, err);
    }
    char hs[32];
    snprintf(hs, sizeof(hs), "crc32c:%08x", h);
    if (r->source_hash[0] && strcmp(hs, r->source_hash)) {
        tx_ckpt_close(c);
        note(r,
             "%s is not the model this package was made from: its tensors hash to %s, the "
             "package records %s",
             path, hs, r->source_hash);
        return strict ? tx_error(TX_EINVAL, "glm_validate: %s", r->original_note) : TX_OK;
    }
    if (!r->source_hash[0])
        note(r, "the package records no source hash: %s is used unverified (hash %s)", path, hs);
    r->original_path = strdup(path);
    if (!r->original_path) {
        tx_ckpt_close(c);
        return tx_error(TX_ENOMEM, "glm_validate: out of memory");
    }
    *out = c;
    return TX_OK;
}

/* ---- accumulation ---------------------------------------------------------- */

struct side {
    float *layers, *logits;
    int32_t *rid, *sel, *nsel; /* nsel NULL for the device */
};

static int side_alloc(struct side *x, int L, int n, int D, int V, size_t nmoe, int KR, int KI,
                      int with_nsel)
{
    x->layers = malloc(sizeof(float) * (size_t)(L + 1) * n * D);
    x->logits = malloc(sizeof(float) * (size_t)n * V);
    x->rid = malloc(sizeof(int32_t) * nmoe * n * KR);
    x->sel = malloc(sizeof(int32_t) * (size_t)L * n * KI);
    x->nsel = with_nsel ? calloc((size_t)L * n, sizeof(int32_t)) : NULL;
    return x->layers && x->logits && x->rid && x->sel && (!with_nsel || x->nsel);
}

static void side_free(struct side *x)
{
    free(x->layers);
    free(x->logits);
    free(x->rid);
    free(x->sel);
    free(x->nsel);
}

/* a (the side measured) against b (the side trusted) */
static void acc_input(struct acc *ac, const glm_model_t *m, int n, const struct side *a,
                      const struct side *b)
{
    const struct glm_config *c = &m->cfg;
    int L = c->num_hidden_layers, D = c->hidden_size;
    int KR = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
    int KI = c->index_topk > 0 ? c->index_topk : 1;
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    for (int l = 0; l <= L; l++) {
        const float *d = a->layers + (size_t)l * n * D, *q = b->layers + (size_t)l * n * D;
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
            size_t o = (size_t)m->moe_index[l] * n * KR;
            for (int t = 0; t < n; t++) {
                x->r_n++;
                x->r_bad += !same_set(a->rid + o + (size_t)t * KR, b->rid + o + (size_t)t * KR, KR);
            }
        }
        if (l < L && arch->layer_selects(c, l) && n > KI) {
            for (int t = KI; t < n; t++) { /* queries that see more than K keys */
                size_t k = (size_t)l * n + t;
                x->d_n++;
                x->d_bad += b->nsel[k] != KI || (a->nsel && a->nsel[k] != KI) ||
                            !same_set(a->sel + k * KI, b->sel + k * KI, KI);
            }
        }
        double lc = cosine(d, q, (size_t)n * D);
        if (!isnan(x->cmin) && (isnan(lc) || lc < x->cmin))
            x->cmin = lc;
        x->csum += lc;
    }
}

static void acc_finish(const struct acc *ac, int nl, int n_inputs, struct glm_layer_stats *out)
{
    for (int l = 0; l < nl; l++) {
        const struct acc *x = &ac[l];
        struct glm_layer_stats *s = &out[l];
        s->mean = x->s / x->n;
        s->std = sqrt(fmax(0, x->s2 / x->n - s->mean * s->mean));
        s->max_abs = x->mx;
        s->ref_mean = x->rs / x->n;
        s->ref_std = sqrt(fmax(0, x->rs2 / x->n - s->ref_mean * s->ref_mean));
        s->ref_max_abs = x->rmx;
        s->cosine_min = x->cmin;
        s->cosine_mean = x->csum / n_inputs;
        s->max_abs_err = x->err;
        s->route_mismatch = x->r_n ? x->r_bad / x->r_n : -1;
        s->dsa_mismatch = x->d_n ? x->d_bad / x->d_n : -1;
    }
}

static int all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

/* lowest cosine of one position's logits; *pos receives that position */
static double worst_position(const float *a, const float *b, int n, int V, int *pos)
{
    double w = 2;
    *pos = 0;
    for (int p = 0; p < n; p++) {
        double c = cosine(a + (size_t)p * V, b + (size_t)p * V, (size_t)V);
        if (isnan(c) || c < w) {
            w = c;
            *pos = p;
            if (isnan(c))
                break;
        }
    }
    return w;
}

static int ref_run(struct glm_ref_session *rs, glm_model_t *m, const int32_t *ids, int n,
                   struct side *x)
{
    char err[TX_ERR_MAX];
    const struct glm_config *c = &m->cfg;
    glm_ref_session_reset(rs);
    struct ref_capture cap = {x->layers, n, c->hidden_size, m, x->rid, x->sel, x->nsel};
    memset(x->nsel, 0, sizeof(int32_t) * (size_t)c->num_hidden_layers * n);
    struct glm_ref_hooks hk = {
        .ctx = &cap, .layer_output = cap_layer, .router = cap_router, .indexer = cap_indexer};
    int rc = glm_ref_forward(rs, ids, n, x->logits, &hk, err, sizeof(err));
    if (rc)
        return tx_error(rc, "glm_validate: reference forward: %s", err);
    return TX_OK;
}

/* logits of one input on a reference over the provider (lazy: one layer's
 * weights in memory at a time) */
static int ref_logits_once(glm_model_t *m, glm_ref_tensor_fn get, void *ctx, const int32_t *ids,
                           int n, int threads, float *logits)
{
    char err[TX_ERR_MAX];
    struct glm_ref_options ro = {.lazy = 1, .n_threads = threads};
    struct glm_ref_model *ref = NULL;
    struct glm_ref_session *rs = NULL;
    int rc = TX_OK;
    if ((rc = glm_ref_model_create(&m->cfg, get, ctx, &ro, &ref, err, sizeof(err))) ||
        (rc = glm_ref_session_create(ref, n, &rs, err, sizeof(err))) ||
        (rc = glm_ref_forward(rs, ids, n, logits, NULL, err, sizeof(err))))
        rc = tx_error(rc, "glm_validate: reference: %s", err);
    glm_ref_session_destroy(rs);
    glm_ref_model_destroy(ref);
    return rc;
}

static double cos_or_nan(const float *a, const float *b, size_t n)
{
    if (!all_finite(a, n) || !all_finite(b, n))
        return NAN;
    return cosine(a, b, n);
}

static int blame_of(const double *alone)
{
    int b = -1;
    for (int t = 0; t < GLM_LAYER_TYPE_COUNT; t++)
        if (alone[t] >= -1 && (b < 0 || isnan(alone[t]) || alone[t] < alone[b])) {
            b = t;
            if (isnan(alone[t]))
                break;
        }
    return b;
}

/* Which layer type is responsible, on one input (see glm.h). */
static int attribute(glm_model_t *m, glm_session_t *ds, const struct tx_ckpt *orig,
                     const int32_t *ids, int n, int threads, const float *pkg_logits,
                     const float *orig_logits, struct glm_validate_report *r)
{
    const struct glm_config *c = &m->cfg;
    size_t NV = (size_t)n * c->vocab_size;
    int present[TX_SMD_LAYER_COUNT] = {0}, quantised[TX_SMD_LAYER_COUNT] = {0};
    for (size_t i = 0; i < tx_smd_tensor_count(m->smd); i++) {
        const struct tx_smd_tensor *t = tx_smd_tensor_at(m->smd, i);
        if (t->layer_type >= TX_SMD_LAYER_COUNT)
            continue;
        present[t->layer_type] = 1;
        quantised[t->layer_type] |= t->dtype != t->src_dtype && t->dtype != TX8_DTYPE_F32;
    }
    for (int t = 0; t < GLM_LAYER_TYPE_COUNT; t++)
        r->device_alone[t] = r->quant_alone[t] = -2;
    float *lg = malloc(sizeof(float) * NV);
    float *dl = malloc(sizeof(float) * (size_t)(c->num_hidden_layers + 1) * n * c->hidden_size);
    if (!lg || !dl) {
        free(lg);
        free(dl);
        return tx_error(TX_ENOMEM, "glm_validate: out of memory");
    }
    int rc = TX_OK;
    if (orig)
        for (int t = 0; t < GLM_LAYER_TYPE_COUNT && !rc; t++) {
            if (!present[t] || !quantised[t])
                continue;
            struct mixed_ctx mx = {m, orig, t};
            rc = ref_logits_once(m, mixed_provider, &mx, ids, n, threads, lg);
            if (!rc)
                r->quant_alone[t] = cos_or_nan(lg, orig_logits, NV);
        }
    /* the device side converts weights to FP32 copies (kept with the model
     * like any plan change's); if the device cannot (e.g. out of memory),
     * those types stay "not measured" and validation goes on */
    glm_precision_plan_t saved = r->plan;
    for (int t = 0; t < GLM_LAYER_TYPE_COUNT && !rc; t++) {
        if (!present[t] || saved.precision[t] == FP32)
            continue;
        glm_precision_plan_t p;
        glm_plan_uniform(&p, FP32);
        p.precision[t] = saved.precision[t];
        if (glm_plan_set(m->dev, &p) || forward_layers_session(ds, ids, n, dl, lg, NULL, NULL))
            break;
        r->device_alone[t] = cos_or_nan(lg, pkg_logits, NV);
    }
    int rc2 = glm_plan_set(m->dev, &saved);
    if (!rc)
        rc = rc2;
    r->device_blame = blame_of(r->device_alone);
    r->quant_blame = blame_of(r->quant_alone);
    free(lg);
    free(dl);
    return rc;
}

/* glm_validate's inputs: random ids from the seed, or (text != NULL)
 * consecutive windows of n_tokens of the text's ids */
static int validate(glm_model_t *m, const struct glm_validate_options *opt, const int32_t *text,
                    size_t n_text, struct glm_validate_report **out)
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
    if (o.use_original < GLM_VALIDATE_ORIGINAL_NONE ||
        o.use_original > GLM_VALIDATE_ORIGINAL_REQUIRE)
        return tx_error(TX_EINVAL, "glm_validate: use_original %d unknown", o.use_original);
    if (text) {
        size_t windows = n_text / (size_t)o.n_tokens;
        if (windows < (size_t)o.n_inputs)
            return tx_error(TX_EINVAL,
                            "glm_validate_tokens: %zu tokens hold %zu inputs of %d tokens; %d "
                            "were asked for",
                            n_text, windows, o.n_tokens, o.n_inputs);
        for (size_t i = 0; i < (size_t)o.n_inputs * (size_t)o.n_tokens; i++)
            if (text[i] < 0 || text[i] >= m->cfg.vocab_size)
                return tx_error(TX_EINVAL, "glm_validate_tokens: token %zu (%d) outside the "
                                           "vocabulary of %d",
                                i, text[i], m->cfg.vocab_size);
    }
    const struct glm_config *c = &m->cfg;
    int L = c->num_hidden_layers, D = c->hidden_size, V = c->vocab_size, n = o.n_tokens;
    size_t NV = (size_t)n * V;
    int threads = o.ref_threads > 1 ? o.ref_threads : 0;

    struct glm_ref_options ro = {.lazy = 0, .n_threads = threads};
    struct glm_ref_model *ref = NULL, *oref = NULL;
    struct glm_ref_session *rs = NULL, *ors = NULL;
    struct tx_ckpt *orig = NULL;
    glm_session_t *ds = NULL;
    struct glm_validate_report *r = calloc(1, sizeof(*r));
    struct side dv = {0}, pk = {0}, og = {0};
    int KR = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
    int KI = c->index_topk > 0 ? c->index_topk : 1;
    size_t nmoe = (size_t)(m->n_moe_layers ? m->n_moe_layers : 1);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *wids = malloc(sizeof(int32_t) * (size_t)n);
    struct acc *ac = calloc((size_t)L + 1, sizeof(*ac));
    struct acc *qac = calloc((size_t)L + 1, sizeof(*qac));
    int rc = TX_OK;
    if (!r || !ids || !wids || !ac || !qac || !side_alloc(&dv, L, n, D, V, nmoe, KR, KI, 0) ||
        !side_alloc(&pk, L, n, D, V, nmoe, KR, KI, 1)) {
        rc = tx_error(TX_ENOMEM, "glm_validate: out of memory");
        goto out;
    }
    r->device_blame = r->quant_blame = -1;
    for (int t = 0; t < GLM_LAYER_TYPE_COUNT; t++)
        r->device_alone[t] = r->quant_alone[t] = -2;
    r->cosine = calloc((size_t)o.n_inputs, sizeof(double));
    r->position_cosine = calloc((size_t)o.n_inputs, sizeof(double));
    r->device_cosine = calloc((size_t)o.n_inputs, sizeof(double));
    r->quant_cosine = calloc((size_t)o.n_inputs, sizeof(double));
    r->layers = calloc((size_t)L + 1, sizeof(*r->layers));
    if (!r->cosine || !r->layers || !r->position_cosine || !r->device_cosine || !r->quant_cosine) {
        rc = tx_error(TX_ENOMEM, "glm_validate: out of memory");
        goto out;
    }
    rc = open_original(m, &o, r, &orig);
    if (rc)
        goto out;
    r->original = orig != NULL;
    if (orig) {
        r->quant_layers = calloc((size_t)L + 1, sizeof(*r->quant_layers));
        if (!r->quant_layers || !side_alloc(&og, L, n, D, V, nmoe, KR, KI, 1)) {
            rc = tx_error(TX_ENOMEM, "glm_validate: out of memory");
            goto out;
        }
    }
    double t0 = rt_now_ms();
    if ((rc = glm_ref_model_create(c, ref_provider, m, &ro, &ref, err, sizeof(err)))) {
        rc = tx_error(rc, "glm_validate: reference: %s", err);
        goto out;
    }
    if (glm_ref_session_create(ref, n, &rs, err, sizeof(err))) {
        rc = tx_error(TX_ENOMEM, "glm_validate: reference session: %s", err);
        goto out;
    }
    if (orig) {
        /* an FP8 original: the float64 reference on its exactly dequantised
         * weights (in FP32 e4m3 x scale would round once more) */
        r->original_f64 = tx_ckpt_storage(orig)->quant_fp8;
        if (r->original_f64)
            note(r,
                 "%s%sthe original %s is FP8: its reference runs in float64 on the weights "
                 "dequantised exactly",
                 r->original_note ? r->original_note : "", r->original_note ? "; " : "",
                 r->original_path);
        if (r->original_f64
                ? glm_ref_model_create64(c, orig_provider64, orig, &ro, &oref, err, sizeof(err))
                : glm_ref_model_create(c, orig_provider, orig, &ro, &oref, err, sizeof(err))) {
            rc = tx_error(TX_EINVAL, "glm_validate: reference on the original %s: %s",
                          r->original_path, err);
            goto out;
        }
        if (glm_ref_session_create(oref, n, &ors, err, sizeof(err))) {
            rc = tx_error(TX_ENOMEM, "glm_validate: reference session: %s", err);
            goto out;
        }
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
    r->min_cosine = r->device_min_cosine = r->quant_min_cosine = 2.0;
    r->min_position_cosine = 2.0;
    for (int l = 0; l <= L; l++)
        ac[l].cmin = qac[l].cmin = 2.0;
    double max_ref = 0, max_err = 0;
    int have_worst = 0;
    for (int in = 0; in < o.n_inputs; in++) {
        if (text)
            memcpy(ids, text + (size_t)in * (size_t)n, sizeof(int32_t) * (size_t)n);
        else
            for (int i = 0; i < n; i++)
                ids[i] = (int32_t)(xs(&seed) % (uint64_t)V);
        double a = rt_now_ms();
        rc = forward_layers_session(ds, ids, n, dv.layers, dv.logits, dv.rid, dv.sel);
        tdev += rt_now_ms() - a;
        if (rc)
            goto out;
        a = rt_now_ms();
        rc = ref_run(rs, m, ids, n, &pk);
        if (!rc && orig)
            rc = ref_run(ors, m, ids, n, &og);
        if (rc)
            goto out;
        tref += rt_now_ms() - a;
        const float *target = orig ? og.logits : pk.logits;
        int finite = all_finite(dv.logits, NV) && all_finite(pk.logits, NV) &&
                     (!orig || all_finite(og.logits, NV));
        double dcs = finite ? cosine(dv.logits, pk.logits, NV) : NAN;
        double qcs = !orig ? 1.0 : finite ? cosine(pk.logits, og.logits, NV) : NAN;
        double cs = finite ? cosine(dv.logits, target, NV) : NAN;
        int pos = 0;
        double pcs = finite ? worst_position(dv.logits, target, n, V, &pos) : NAN;
        r->cosine[in] = cs;
        r->device_cosine[in] = dcs;
        r->quant_cosine[in] = qcs;
        r->position_cosine[in] = pcs;
        r->n_nonfinite += !finite;
        if (finite) {
            r->mean_cosine += cs;
            r->device_mean_cosine += dcs;
            r->quant_mean_cosine += qcs;
            if (dcs < r->device_min_cosine)
                r->device_min_cosine = dcs;
            if (qcs < r->quant_min_cosine)
                r->quant_min_cosine = qcs;
            if (pcs < r->min_position_cosine && !isnan(r->min_position_cosine)) {
                r->min_position_cosine = pcs;
                r->worst_position_input = in;
                r->worst_position = pos;
            }
        } else if (r->n_nonfinite == 1) {
            r->min_position_cosine = NAN;
            r->worst_position_input = in;
            r->worst_position = 0;
        }
        /* the worst input: the first non-finite one, else the lowest cosine */
        if (!have_worst || (!isnan(r->min_cosine) && (isnan(cs) || cs < r->min_cosine))) {
            r->min_cosine = cs;
            r->worst_input = in;
            memcpy(wids, ids, sizeof(int32_t) * (size_t)n);
            have_worst = 1;
        }
        for (size_t i = 0; finite && i < NV; i++) {
            double e = fabs((double)dv.logits[i] - target[i]);
            if (e > max_err)
                max_err = e;
            if (fabs(target[i]) > max_ref)
                max_ref = fabs(target[i]);
        }
        acc_input(ac, m, n, &dv, &pk);
        if (orig)
            acc_input(qac, m, n, &pk, &og);
        if (o.progress)
            o.progress(o.user, in + 1, o.n_inputs, cs);
    }
    int nf = o.n_inputs - r->n_nonfinite;
    r->mean_cosine = nf ? r->mean_cosine / nf : NAN;
    r->device_mean_cosine = nf ? r->device_mean_cosine / nf : NAN;
    r->quant_mean_cosine = nf ? r->quant_mean_cosine / nf : NAN;
    if (r->n_nonfinite) {
        r->min_cosine = r->device_min_cosine = NAN;
        if (orig)
            r->quant_min_cosine = NAN;
        else
            r->quant_min_cosine = 1;
    }
    if (!orig && !r->n_nonfinite)
        r->quant_min_cosine = 1;
    r->max_rel_err = max_ref > 0 ? max_err / max_ref : max_err;
    acc_finish(ac, L + 1, o.n_inputs, r->layers);
    if (orig)
        acc_finish(qac, L + 1, o.n_inputs, r->quant_layers);
    r->passed = !r->n_nonfinite && r->min_cosine >= o.threshold;
    r->device_ms = tdev;
    r->reference_ms = tref;
    /* which layer type is responsible, on the worst input */
    if (have_worst) {
        rc = ref_run(rs, m, wids, n, &pk);
        if (!rc && orig)
            rc = ref_run(ors, m, wids, n, &og);
        if (!rc) {
            /* the full references are no longer needed: free their memory */
            glm_ref_session_destroy(rs);
            glm_ref_model_destroy(ref);
            glm_ref_session_destroy(ors);
            glm_ref_model_destroy(oref);
            rs = ors = NULL;
            ref = oref = NULL;
            rc = attribute(m, ds, orig, wids, n, threads, pk.logits, orig ? og.logits : NULL, r);
        }
        if (rc)
            goto out;
    }
out:
    glm_session_free(ds);
    glm_ref_session_destroy(rs);
    glm_ref_model_destroy(ref);
    glm_ref_session_destroy(ors);
    glm_ref_model_destroy(oref);
    tx_ckpt_close(orig);
    side_free(&dv);
    side_free(&pk);
    side_free(&og);
    free(ids);
    free(wids);
    free(ac);
    free(qac);
    if (rc) {
        glm_validate_report_free(r);
        return rc;
    }
    *out = r;
    return TX_OK;
}

TX_API int glm_validate(glm_model_t *m, const struct glm_validate_options *opt,
                        struct glm_validate_report **out)
{
    return validate(m, opt, NULL, 0, out);
}

TX_API int glm_validate_tokens(glm_model_t *m, const struct glm_validate_options *opt,
                               const int32_t *tokens, size_t n_tokens,
                               struct glm_validate_report **out)
{
    if (!tokens)
        return tx_error(TX_EINVAL, "glm_validate_tokens: no tokens");
    return validate(m, opt, tokens, n_tokens, out);
}

TX_API void glm_validate_report_free(struct glm_validate_report *r)
{
    if (!r)
        return;
    free(r->cosine);
    free(r->layers);
    free(r->original_path);
    free(r->original_note);
    free(r->position_cosine);
    free(r->device_cosine);
    free(r->quant_cosine);
    free(r->quant_layers);
    free(r);
}
