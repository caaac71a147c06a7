// SPDX-License-Identifier: MIT
/*
 * Host reference forward (FP32, or float64 when built as
 * glm_reference64.c: ref_real.h): weights, sessions (KV caches in
 * ref_real), and the forward pass: embedding, the architecture's decoder
 * layer (txref_arch_layer, reference/ref_blocks.c), final norm, lm_head. The formulas,
 * with the transformers code each mirrors: docs/architectures.md and
 * docs/glm-architectures.md.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx-internal/glm_reference.h>

#include <tx-internal/tx_arch.h>
#include "common/attn_mask.h"
#include "reference/ref_blocks.h"

struct preload_ctx {
    struct glm_ref_model *m;
    char *err;
    size_t errsz;
};

static int preload_cb(void *ctx, const struct glm_tensor_info *t)
{
    struct preload_ctx *pc = ctx;
    struct glm_ref_model *m = pc->m;
    ref_real *buf = malloc(sizeof(ref_real) * (size_t)txref_numel(t));
    if (!buf)
        return tx_errbuf(pc->err, pc->errsz, TX_ENOMEM,
                         "reference: out of memory loading %s (%lld floats)", t->name,
                         (long long)txref_numel(t));
    int rc = txref_fetch(m, t, buf, pc->err, pc->errsz);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    if (t->layer < 0)
        m->model_w[t->role - GLM_T_EMBED] = buf;
    else if (t->expert >= 0)
        m->expert_w[((int64_t)t->layer * m->cfg.n_routed_experts + t->expert) * 3 +
                    (t->role - GLM_T_EXP_GATE)] = buf;
    else
        m->layer_w[(int64_t)t->layer * GLM_T_ROLE_COUNT + t->role] = buf;
    return 0;
}

/* The FP32 build's public functions hand a float64 model or session
 * (its first member `f64` set) to the float64 build's twins. */
#ifdef TXREF_F64
#define F64_DISPATCH(obj, call)
#else
#define F64_DISPATCH(obj, call)                                                                    \
    do {                                                                                           \
        if ((obj) && (obj)->f64)                                                                   \
            return call;                                                                           \
    } while (0)
#define AS64_MODEL(m) ((struct glm_ref64_model *)(void *)(m))
#define AS64_SESSION(s) ((struct glm_ref64_session *)(void *)(s))
#endif

void glm_ref_model_destroy(struct glm_ref_model *m)
{
    F64_DISPATCH(m, txref64_model_destroy(AS64_MODEL(m)));
    if (!m)
        return;
    txref_pool_destroy(m->pool);
    for (int i = 0; i < 3; i++)
        free(m->model_w[i]);
    if (m->layer_w) {
        for (int64_t i = 0; i < (int64_t)m->cfg.num_hidden_layers * GLM_T_ROLE_COUNT; i++)
            free(m->layer_w[i]);
        free(m->layer_w);
    }
    if (m->expert_w) {
        for (int64_t i = 0; i < (int64_t)m->cfg.num_hidden_layers * m->cfg.n_routed_experts * 3;
             i++)
            free(m->expert_w[i]);
        free(m->expert_w);
    }
    for (int i = 0; i < GLM_T_ROLE_COUNT; i++)
        free(m->slot[i].buf);
    free(m->inv_freq);
    free(m);
}

const struct glm_config *glm_ref_model_config(const struct glm_ref_model *m)
{
    F64_DISPATCH(m, txref64_model_config((const struct glm_ref64_model *)(const void *)m));
    return m ? &m->cfg : NULL;
}

int glm_ref_model_create(const struct glm_config *cfg, glm_ref_tensor_fn get, void *get_ctx,
                         const struct glm_ref_options *opt, struct glm_ref_model **out, char *err,
                         size_t errsz)
{
    if (!out)
        return tx_errbuf(err, errsz, TX_EINVAL, "glm_ref_model_create: NULL out");
    *out = NULL;
    if (!cfg || !get)
        return tx_errbuf(err, errsz, TX_EINVAL, "glm_ref_model_create: NULL config or provider");
    int rc = glm_config_validate(cfg, err, errsz);
    if (rc < 0)
        return rc;
    struct glm_ref_model *m = calloc(1, sizeof(*m));
    if (!m)
        return tx_errbuf(err, errsz, TX_ENOMEM, "reference: out of memory");
#ifdef TXREF_F64
    m->f64 = 1;
#endif
    m->cfg = *cfg;
    if (opt)
        m->opt = *opt;
    m->get = get;
    m->get_ctx = get_ctx;
    m->inv_freq = malloc(sizeof(ref_real) * (size_t)(cfg->rotary_dim / 2 + 1));
    if (!m->inv_freq) {
        glm_ref_model_destroy(m);
        return tx_errbuf(err, errsz, TX_ENOMEM, "reference: out of memory");
    }
    {
        /* transformers' inv_freq is float32, in both builds */
        const int nf = cfg->rotary_dim / 2;
        float *f32 = malloc(sizeof(float) * (size_t)(nf + 1));
        if (!f32) {
            glm_ref_model_destroy(m);
            return tx_errbuf(err, errsz, TX_ENOMEM, "reference: out of memory");
        }
        glm_config_rope_inv_freq(cfg, f32, nf);
        for (int i = 0; i < nf; i++)
            m->inv_freq[i] = f32[i];
        free(f32);
    }
    rc = txref_pool_create(&m->pool, m->opt.n_threads);
    if (rc < 0) {
        glm_ref_model_destroy(m);
        return tx_errbuf(err, errsz, rc, "reference: cannot create worker threads");
    }
    if (!m->opt.lazy) {
        m->layer_w = calloc((size_t)cfg->num_hidden_layers * GLM_T_ROLE_COUNT, sizeof(ref_real *));
        m->expert_w = calloc((size_t)cfg->num_hidden_layers * (size_t)cfg->n_routed_experts * 3 + 1,
                             sizeof(ref_real *));
        if (!m->layer_w || !m->expert_w) {
            glm_ref_model_destroy(m);
            return tx_errbuf(err, errsz, TX_ENOMEM, "reference: out of memory");
        }
        struct preload_ctx pc = {m, err, errsz};
        rc = glm_config_tensor_list(cfg, preload_cb, &pc);
        if (rc < 0) {
            glm_ref_model_destroy(m);
            return rc;
        }
    }
    *out = m;
    return 0;
}

void glm_ref_session_destroy(struct glm_ref_session *s)
{
    F64_DISPATCH(s, txref64_session_destroy(AS64_SESSION(s)));
    if (!s)
        return;
    for (int l = 0; l < s->m->cfg.num_hidden_layers; l++) {
        if (s->k_cache)
            free(s->k_cache[l]);
        if (s->v_cache)
            free(s->v_cache[l]);
        if (s->ik_cache)
            free(s->ik_cache[l]);
    }
    free(s->k_cache);
    free(s->v_cache);
    free(s->ik_cache);
    free(s->am_row);
    free(s->am_ranges);
    free(s);
}

static void attn_mask_clear(struct glm_ref_session *s)
{
    free(s->am_row);
    free(s->am_ranges);
    s->am_row = s->am_ranges = NULL;
    s->am_base = s->am_n = 0;
}

int glm_ref_session_set_attn_mask(struct glm_ref_session *s, const struct glm_attn_mask *m,
                                  char *err, size_t errsz)
{
    F64_DISPATCH(s, txref64_session_set_attn_mask(AS64_SESSION(s), m, err, errsz));
    if (!s)
        return tx_errbuf(err, errsz, TX_EINVAL, "glm_ref_session_set_attn_mask: NULL session");
    if (!m) {
        attn_mask_clear(s);
        return 0;
    }
    int rc = tx_attn_mask_check(m, s->max_tokens - s->pos, "glm_ref_session_set_attn_mask", err,
                                errsz);
    if (rc)
        return rc;
    int32_t *row, *rng;
    rc = tx_attn_mask_copy(m, &row, &rng);
    if (rc)
        return tx_errbuf(err, errsz, rc, "%s", tx_last_error());
    attn_mask_clear(s);
    s->am_row = row;
    s->am_ranges = rng;
    s->am_base = s->pos;
    s->am_n = m->n_tokens;
    return 0;
}

int glm_ref_session_create(struct glm_ref_model *m, int max_tokens, struct glm_ref_session **out,
                           char *err, size_t errsz)
{
    if (!out)
        return tx_errbuf(err, errsz, TX_EINVAL, "glm_ref_session_create: NULL out");
    *out = NULL;
    F64_DISPATCH(m, txref64_session_create(AS64_MODEL(m), max_tokens,
                                           (struct glm_ref64_session **)(void *)out, err, errsz));
    if (!m)
        return tx_errbuf(err, errsz, TX_EINVAL, "glm_ref_session_create: NULL model");
    if (max_tokens <= 0)
        return tx_errbuf(err, errsz, TX_EINVAL, "reference: max_tokens must be > 0 (got %d)",
                         max_tokens);
    const struct glm_config *c = &m->cfg;
    struct glm_ref_session *s = calloc(1, sizeof(*s));
    if (!s)
        return tx_errbuf(err, errsz, TX_ENOMEM, "reference: out of memory");
    s->f64 = m->f64;
    s->m = m;
    s->max_tokens = max_tokens;
    const int L = c->num_hidden_layers;
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    if (!arch) {
        free(s);
        return tx_errbuf(err, errsz, TX_EINVAL, "reference: unknown architecture %d", (int)c->arch);
    }
    /* the cache geometry: the architecture's (the same K/V width in every layer) */
    struct tx_arch_kv kv;
    arch->kv_geometry(c, 0, &kv);
    s->kdim = (int64_t)kv.ref_k;
    s->vdim = (int64_t)kv.ref_v;
    s->k_cache = calloc((size_t)L, sizeof(ref_real *));
    s->v_cache = calloc((size_t)L, sizeof(ref_real *));
    s->ik_cache = calloc((size_t)L, sizeof(ref_real *));
    int ok = s->k_cache && s->v_cache && s->ik_cache;
    for (int l = 0; ok && l < L; l++) {
        s->k_cache[l] = malloc(sizeof(ref_real) * (size_t)max_tokens * (size_t)s->kdim);
        s->v_cache[l] = malloc(sizeof(ref_real) * (size_t)max_tokens * (size_t)s->vdim);
        ok = s->k_cache[l] && s->v_cache[l];
        arch->kv_geometry(c, l, &kv);
        if (ok && kv.ik) {
            s->ik_cache[l] = malloc(sizeof(ref_real) * (size_t)max_tokens * (size_t)kv.ik);
            ok = s->ik_cache[l] != NULL;
        }
    }
    if (!ok) {
        glm_ref_session_destroy(s);
        return tx_errbuf(err, errsz, TX_ENOMEM, "reference: out of memory for a %d-token KV cache",
                         max_tokens);
    }
    *out = s;
    return 0;
}

void glm_ref_session_reset(struct glm_ref_session *s)
{
    F64_DISPATCH(s, txref64_session_reset(AS64_SESSION(s)));
    if (s) {
        s->pos = 0;
        attn_mask_clear(s);
    }
}

int glm_ref_session_pos(const struct glm_ref_session *s)
{
    F64_DISPATCH(s, txref64_session_pos((const struct glm_ref64_session *)(const void *)s));
    return s ? s->pos : 0;
}

static void stats_of(const ref_real *h, int64_t count, struct glm_ref_stats *st)
{
    double s = 0, s2 = 0, mx = 0;
    for (int64_t i = 0; i < count; i++) {
        double v = h[i];
        s += v;
        s2 += v * v;
        if (fabs(v) > mx)
            mx = fabs(v);
    }
    st->mean = count ? s / count : 0.0;
    double var = count ? s2 / count - st->mean * st->mean : 0.0;
    st->std = var > 0 ? sqrt(var) : 0.0;
    st->max_abs = mx;
}

/* a hook's view of the residual stream h [n x H] */
static int layer_hook(struct ref_fwd *f, int l, const ref_real *h, int n, int H)
{
    struct glm_ref_stats st;
    stats_of(h, (int64_t)n * H, &st);
    float *tmp;
    const float *hv = txref_hook_view(h, (int64_t)n * H, &tmp);
    if (!hv)
        return tx_errbuf(f->err, f->errsz, TX_ENOMEM, "reference: out of memory");
    f->hooks->layer_output(f->hooks->ctx, l, hv, n, H, &st);
    free(tmp);
    return 0;
}

int glm_ref_forward(struct glm_ref_session *s, const int32_t *tokens, int n, float *logits,
                    const struct glm_ref_hooks *hooks, char *err, size_t errsz)
{
    F64_DISPATCH(s, txref64_forward(AS64_SESSION(s), tokens, n, logits, hooks, err, errsz));
    if (!s || (!tokens && n > 0))
        return tx_errbuf(err, errsz, TX_EINVAL, "glm_ref_forward: NULL argument");
    if (n <= 0)
        return tx_errbuf(err, errsz, TX_EINVAL, "glm_ref_forward: n must be > 0 (got %d)", n);
    struct glm_ref_model *m = s->m;
    const struct glm_config *c = &m->cfg;
    if (n > s->max_tokens - s->pos)
        return tx_errbuf(err, errsz, TX_ENOSPC,
                         "reference: %d tokens at position %d exceed the session's %d positions", n,
                         s->pos, s->max_tokens);
    for (int t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "reference: token %d (index %d) outside [0, %d)", tokens[t], t,
                             c->vocab_size);
    }
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    if (!arch)
        return tx_errbuf(err, errsz, TX_EINVAL, "reference: unknown architecture %d", (int)c->arch);
    const int H = c->hidden_size, L = c->num_hidden_layers;
    struct ref_fwd fs = {
        .s = s, .m = m, .c = c, .hooks = hooks, .n = n, .pos0 = s->pos, .err = err, .errsz = errsz};
    struct ref_fwd *f = &fs;
    int ret = 0;
    ref_real *h = NULL, *xn = NULL, *lg64 = NULL;
    ALLOC(h, (int64_t)n * H);
    ALLOC(xn, (int64_t)n * H);
    const int sel_k = arch->select_k(c);
    if (sel_k > 0) {
        /* the key selection of the most recent selecting layer */
        f->sel_stride = sel_k < s->max_tokens ? sel_k : s->max_tokens;
        ALLOC(f->sel, (int64_t)n * f->sel_stride);
        ALLOC(f->n_sel, n);
    }
    const ref_real *emb;
    TRY(txref_w(m, GLM_T_EMBED, -1, -1, &emb, err, errsz));
    for (int t = 0; t < n; t++)
        memcpy(h + (int64_t)t * H, emb + (int64_t)tokens[t] * H, sizeof(ref_real) * (size_t)H);
    const ref_real eps = (ref_real)c->rms_norm_eps;
    for (int l = 0; l < L; l++) {
        /* the architecture's decoder layer */
        TRY(txref_arch_layer(f, l, h));
        if (hooks && hooks->layer_output)
            TRY(layer_hook(f, l, h, n, H));
    }
    const ref_real *wn, *wlm;
    TRY(txref_w(m, GLM_T_FINAL_NORM, -1, -1, &wn, err, errsz));
    for (int t = 0; t < n; t++)
        glm_ref_rmsnorm(h + (int64_t)t * H, wn, H, eps, xn + (int64_t)t * H);
    if (hooks && hooks->layer_output)
        TRY(layer_hook(f, L, xn, n, H));
    if (logits) {
        TRY(txref_w(m, GLM_T_LM_HEAD, -1, -1, &wlm, err, errsz));
#ifdef TXREF_F64
        /* computed in float64, rounded once to the caller's float */
        const int64_t nv = (int64_t)n * c->vocab_size;
        ALLOC(lg64, nv);
        txref_linear(m->pool, xn, n, H, wlm, NULL, c->vocab_size, lg64);
        for (int64_t i = 0; i < nv; i++)
            logits[i] = (float)lg64[i];
#else
        txref_linear(m->pool, xn, n, H, wlm, NULL, c->vocab_size, logits);
#endif
    }
    s->pos += n;
out:
    free(h);
    free(xn);
    free(lg64);
    free(f->sel);
    free(f->n_sel);
    return ret;
}

#ifndef TXREF_F64
int glm_ref_model_create64(const struct glm_config *cfg, glm_ref_tensor64_fn get, void *get_ctx,
                           const struct glm_ref_options *opt, struct glm_ref_model **out, char *err,
                           size_t errsz)
{
    return txref64_model_create(cfg, get, get_ctx, opt, (struct glm_ref64_model **)(void *)out, err,
                                errsz);
}
#endif
