// SPDX-License-Identifier: MIT
/*
 * Shared blocks of the host reference (FP32, or float64: ref_real.h):
 * weight access, the attention core, GQA attention, MLA attention with the
 * DSA indexer, dense MLP, MoE, and the pre-norm decoder layer around the
 * attention an architecture module names (txref_arch_layer, libtx/arch/).
 * The formulas, with the transformers code each mirrors, are in
 * docs/architectures.md and docs/glm-architectures.md; comments here name
 * the step.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx-internal/tx_arch.h>
#include "reference/ref_blocks.h"

#define MLA_NORM_EPS 1e-6f     /* q_a_layernorm / kv_a_layernorm: DeepseekV3RMSNorm default */
#define INDEXER_NORM_EPS 1e-6f /* indexer.k_norm: nn.LayerNorm(head_dim, eps=1e-6) */

int64_t txref_numel(const struct glm_tensor_info *t)
{
    return t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
}

int txref_fetch(struct glm_ref_model *m, const struct glm_tensor_info *t, ref_real *dst, char *err,
                size_t errsz)
{
    char inner[256];
    inner[0] = 0;
    int rc = m->get(m->get_ctx, t, dst, inner, sizeof(inner));
    if (rc < 0)
        return tx_errbuf(err, errsz, rc, "reference: tensor %s: %s", t->name,
                         inner[0] ? inner : "weight provider failed");
    if (rc > 0)
        return tx_errbuf(err, errsz, TX_EIO, "reference: tensor %s: provider returned %d", t->name,
                         rc);
    return 0;
}

/* The weights of (role, layer, expert): *out = NULL when this config has no
 * such tensor (e.g. absent biases). */
int txref_w(struct glm_ref_model *m, enum glm_tensor_role role, int layer, int expert,
            const ref_real **out, char *err, size_t errsz)
{
    struct glm_tensor_info t;
    *out = NULL;
    if (role == GLM_T_LM_HEAD && m->cfg.tie_word_embeddings)
        role = GLM_T_EMBED;
    if (glm_config_tensor_info(&m->cfg, role, layer, expert, &t) != 0)
        return 0;
    if (!m->opt.lazy) {
        if (role == GLM_T_EMBED || role == GLM_T_FINAL_NORM || role == GLM_T_LM_HEAD)
            *out = m->model_w[role - GLM_T_EMBED];
        else if (role >= GLM_T_EXP_GATE && role <= GLM_T_EXP_DOWN)
            *out = m->expert_w[((int64_t)layer * m->cfg.n_routed_experts + expert) * 3 +
                               (role - GLM_T_EXP_GATE)];
        else
            *out = m->layer_w[(int64_t)layer * GLM_T_ROLE_COUNT + role];
        return 0;
    }
    struct lazy_slot *s = &m->slot[role];
    if (!(s->valid && s->layer == layer && s->expert == expert)) {
        int64_t n = txref_numel(&t);
        if (n > s->cap) {
            ref_real *nb = realloc(s->buf, sizeof(ref_real) * (size_t)n);
            if (!nb)
                return tx_errbuf(err, errsz, TX_ENOMEM, "reference: out of memory for %s", t.name);
            s->buf = nb;
            s->cap = n;
        }
        s->valid = 0;
        int rc = txref_fetch(m, &t, s->buf, err, errsz);
        if (rc < 0)
            return rc;
        s->valid = 1;
        s->layer = layer;
        s->expert = expert;
    }
    *out = s->buf;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* attention core: softmax(q . K^T * scale) V over a key list */

int txref_key_visible(const struct glm_ref_session *s, int p, int j)
{
    int i = p - s->am_base;
    if (s->am_n <= 0 || i < 0 || i >= s->am_n || j < s->am_base || j == p)
        return j <= p;
    int r = j - s->am_base;
    for (int32_t k = s->am_row[i]; k < s->am_row[i + 1]; k++)
        if (r >= s->am_ranges[2 * k] && r < s->am_ranges[2 * k + 1])
            return j <= p;
    return 0;
}

struct attn_job {
    const struct glm_ref_session *s; /* its custom attention mask */
    const ref_real *q; /* [n x nh x q_stride] */
    int64_t q_stride;
    const ref_real *k; /* cache [T x kdim] */
    const ref_real *v; /* cache [T x vdim] */
    int64_t kdim, vdim;
    int nh, n_rep;     /* query heads, heads per kv head */
    int qk_dim, v_dim; /* per head */
    ref_real scale;
    int pos0;
    const int32_t *sel; /* NULL: all keys 0..pos; else [n x sel_stride] */
    const int32_t *n_sel;
    int sel_stride;
    ref_real *out; /* [n x nh x v_dim] */
    int max_keys;
};

static void attn_range(void *ctx, int64_t b, int64_t e)
{
    const struct attn_job *j = ctx;
    ref_real *sc = malloc(sizeof(ref_real) * (size_t)j->max_keys);
    double *acc = malloc(sizeof(double) * (size_t)j->v_dim);
    if (!sc || !acc) {
        /* cannot happen in practice; leave NaN so the caller's check fails */
        for (int64_t it = b; it < e; it++) {
            int t = (int)(it / j->nh), h = (int)(it % j->nh);
            for (int d = 0; d < j->v_dim; d++)
                j->out[((int64_t)t * j->nh + h) * j->v_dim + d] = NAN;
        }
        free(sc);
        free(acc);
        return;
    }
    for (int64_t it = b; it < e; it++) {
        const int t = (int)(it / j->nh), h = (int)(it % j->nh);
        const int kvh = h / j->n_rep;
        const ref_real *q = j->q + ((int64_t)t * j->nh + h) * j->q_stride;
        const int p = j->pos0 + t;
        const int nk = j->sel ? j->n_sel[t] : p + 1;
        ref_real mx = -INFINITY;
        for (int i = 0; i < nk; i++) {
            const int key = j->sel ? j->sel[(int64_t)t * j->sel_stride + i] : i;
            const ref_real *k = j->k + (int64_t)key * j->kdim + (int64_t)kvh * j->qk_dim;
            if (!txref_key_visible(j->s, p, key)) { /* the custom attention mask */
                sc[i] = -INFINITY;
                continue;
            }
            sc[i] = txref_dot(q, k, j->qk_dim) * j->scale;
            if (sc[i] > mx)
                mx = sc[i];
        }
        double sum = 0.0;
        for (int d = 0; d < j->v_dim; d++)
            acc[d] = 0.0;
        for (int i = 0; i < nk; i++) {
            const int key = j->sel ? j->sel[(int64_t)t * j->sel_stride + i] : i;
            if (sc[i] == -INFINITY)
                continue; /* masked: no weight */
            const double w = exp((double)sc[i] - (double)mx);
            sum += w;
            const ref_real *v = j->v + (int64_t)key * j->vdim + (int64_t)kvh * j->v_dim;
            for (int d = 0; d < j->v_dim; d++)
                acc[d] += w * v[d];
        }
        ref_real *o = j->out + ((int64_t)t * j->nh + h) * j->v_dim;
        for (int d = 0; d < j->v_dim; d++)
            o[d] = (ref_real)(acc[d] / sum);
    }
    free(sc);
    free(acc);
}

/* Glm4MoeAttention: GQA with q/k/v biases, optional per-head q/k RMSNorm,
 * partial NeoX RoPE, causal softmax, o_proj (no bias). */
int txref_gqa_attention(struct ref_fwd *f, int l, const ref_real *x, ref_real *y)
{
    const struct glm_config *c = f->c;
    struct glm_ref_model *m = f->m;
    struct glm_ref_session *s = f->s;
    const int n = f->n, H = c->hidden_size, nh = c->num_attention_heads,
              nkv = c->num_key_value_heads, hd = c->head_dim;
    int ret = 0;
    ref_real *q = NULL, *k = NULL, *v = NULL, *att = NULL;
    const ref_real *wq, *bq, *wk, *bk, *wv, *bv, *qn, *kn, *wo;
    TRY(txref_w(m, GLM_T_Q_PROJ, l, -1, &wq, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_Q_BIAS, l, -1, &bq, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_K_PROJ, l, -1, &wk, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_K_BIAS, l, -1, &bk, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_V_PROJ, l, -1, &wv, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_V_BIAS, l, -1, &bv, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_Q_NORM, l, -1, &qn, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_K_NORM, l, -1, &kn, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_O_PROJ, l, -1, &wo, f->err, f->errsz));
    ALLOC(q, (int64_t)n * nh * hd);
    ALLOC(k, (int64_t)n * nkv * hd);
    ALLOC(v, (int64_t)n * nkv * hd);
    ALLOC(att, (int64_t)n * nh * hd);
    txref_linear(m->pool, x, n, H, wq, bq, (int64_t)nh * hd, q);
    txref_linear(m->pool, x, n, H, wk, bk, (int64_t)nkv * hd, k);
    txref_linear(m->pool, x, n, H, wv, bv, (int64_t)nkv * hd, v);
    const ref_real eps = (ref_real)c->rms_norm_eps;
    const ref_real af = (ref_real)tx_cfg_rope_attn_factor(c); /* YaRN; 1 otherwise */
    for (int t = 0; t < n; t++) {
        const int64_t pos = f->pos0 + t;
        for (int h = 0; h < nh; h++) {
            ref_real *qh = q + ((int64_t)t * nh + h) * hd;
            if (c->use_qk_norm)
                glm_ref_rmsnorm(qh, qn, hd, eps, qh);
            txref_rope_scaled(qh, c->rotary_dim, 0, m->inv_freq, pos, af);
        }
        for (int h = 0; h < nkv; h++) {
            ref_real *kh = k + ((int64_t)t * nkv + h) * hd;
            if (c->use_qk_norm)
                glm_ref_rmsnorm(kh, kn, hd, eps, kh);
            txref_rope_scaled(kh, c->rotary_dim, 0, m->inv_freq, pos, af);
        }
        memcpy(s->k_cache[l] + pos * s->kdim, k + (int64_t)t * s->kdim, sizeof(ref_real) * s->kdim);
        memcpy(s->v_cache[l] + pos * s->vdim, v + (int64_t)t * s->vdim, sizeof(ref_real) * s->vdim);
    }
    struct attn_job j = {
        .s = s,
        .q = q,
        .q_stride = hd,
        .k = s->k_cache[l],
        .v = s->v_cache[l],
        .kdim = s->kdim,
        .vdim = s->vdim,
        .nh = nh,
        .n_rep = nh / nkv,
        .qk_dim = hd,
        .v_dim = hd,
        .scale = (ref_real)glm_config_attn_scale(c),
        .pos0 = f->pos0,
        .out = att,
        .max_keys = f->pos0 + n,
    };
    txref_parallel_for(m->pool, (int64_t)n * nh, attn_range, &j);
    txref_linear(m->pool, att, n, (int64_t)nh * hd, wo, NULL, H, y);
out:
    free(q);
    free(k);
    free(v);
    free(att);
    return ret;
}

/* one key candidate of the indexer */
struct cand {
    ref_real score;
    int32_t pos;
};

static int cand_cmp_score(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    int by_score = (x->score < y->score) - (x->score > y->score); /* higher first */
    return by_score ? by_score : (x->pos > y->pos) - (x->pos < y->pos);
}

static int i32_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* GlmMoeDsaIndexer: per query, the top index_topk causal keys by
 * sum_h w_h * relu(q_h . k * d^-0.5), w = weights_proj(x) * n_heads^-0.5. */
static int run_indexer(struct ref_fwd *f, int l, const ref_real *x, const ref_real *q_lat)
{
    const struct glm_config *c = f->c;
    struct glm_ref_model *m = f->m;
    struct glm_ref_session *s = f->s;
    const int n = f->n, H = c->hidden_size, inh = c->index_n_heads, ihd = c->index_head_dim,
              rope = c->qk_rope_head_dim, K = c->index_topk;
    int ret = 0;
    ref_real *iq = NULL, *ik = NULL, *iw = NULL;
    struct cand *cd = NULL;
    const ref_real *wqb, *wk, *knw, *knb, *wp;
    TRY(txref_w(m, GLM_T_IDX_WQ_B, l, -1, &wqb, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_IDX_WK, l, -1, &wk, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_IDX_K_NORM, l, -1, &knw, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_IDX_K_NORM_BIAS, l, -1, &knb, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_IDX_WEIGHTS_PROJ, l, -1, &wp, f->err, f->errsz));
    ALLOC(iq, (int64_t)n * inh * ihd);
    ALLOC(ik, (int64_t)n * ihd);
    ALLOC(iw, (int64_t)n * inh);
    ALLOC(cd, f->pos0 + n);
    txref_linear(m->pool, q_lat, n, c->q_lora_rank, wqb, NULL, (int64_t)inh * ihd, iq);
    txref_linear(m->pool, x, n, H, wk, NULL, ihd, ik);
    txref_linear(m->pool, x, n, H, wp, NULL, inh, iw);
    const ref_real wscale = (ref_real)(1.0 / sqrt((double)inh));
    const ref_real sscale = (ref_real)(1.0 / sqrt((double)ihd));
    for (int t = 0; t < n; t++) {
        const int64_t pos = f->pos0 + t;
        /* rope slice first in the indexer: [rope | nope] */
        for (int h = 0; h < inh; h++)
            glm_ref_rope(iq + ((int64_t)t * inh + h) * ihd, rope, c->indexer_rope_interleave,
                         m->inv_freq, pos);
        ref_real *kt = ik + (int64_t)t * ihd;
        glm_ref_layernorm(kt, knw, knb, ihd, INDEXER_NORM_EPS, kt);
        glm_ref_rope(kt, rope, c->indexer_rope_interleave, m->inv_freq, pos);
        memcpy(s->ik_cache[l] + pos * ihd, kt, sizeof(ref_real) * (size_t)ihd);
        for (int h = 0; h < inh; h++)
            iw[(int64_t)t * inh + h] *= wscale;
    }
    for (int t = 0; t < n; t++) {
        const int p = f->pos0 + t;
        int32_t *sel = f->sel + (int64_t)t * f->sel_stride;
        /* the keys the custom attention mask shows (every causal key
         * without one): the candidates */
        int nv = 0;
        for (int j = 0; j <= p; j++)
            nv += txref_key_visible(s, p, j);
        if (nv <= K) {
            /* every visible key fits: the indexer selects all of them */
            for (int j = 0, o = 0; j <= p; j++)
                if (txref_key_visible(s, p, j))
                    sel[o++] = j;
            f->n_sel[t] = nv;
            continue;
        }
        int nc = 0;
        for (int j = 0; j <= p; j++) {
            if (!txref_key_visible(s, p, j))
                continue;
            const ref_real *kj = s->ik_cache[l] + (int64_t)j * ihd;
            double score = 0.0;
            for (int h = 0; h < inh; h++) {
                ref_real d = txref_dot(iq + ((int64_t)t * inh + h) * ihd, kj, ihd) * sscale;
                if (d > 0.0f) /* ReLU */
                    score += (double)iw[(int64_t)t * inh + h] * d;
            }
            cd[nc].score = (ref_real)score;
            cd[nc++].pos = j;
        }
        qsort(cd, (size_t)nc, sizeof(*cd), cand_cmp_score);
        for (int i = 0; i < K; i++)
            sel[i] = cd[i].pos;
        qsort(sel, (size_t)K, sizeof(*sel), i32_cmp);
        f->n_sel[t] = K;
    }
    f->have_sel = 1;
out:
    free(iq);
    free(ik);
    free(iw);
    free(cd);
    return ret;
}

/* The DSA key selection of layer l (GlmMoeDsaAttention.forward): full
 * layers run the indexer, shared layers reuse the last one's selection. */
int txref_dsa_select(struct ref_fwd *f, int l, const ref_real *x, const ref_real *q_lat)
{
    const struct glm_config *c = f->c;
    struct glm_ref_model *m = f->m;
    if (m->opt.disable_indexer)
        return 0;
    if (c->indexer_types[l] == GLM_INDEXER_FULL) {
        int rc = run_indexer(f, l, x, q_lat);
        if (rc < 0)
            return rc;
    }
    if (!f->have_sel)
        return tx_errbuf(
            f->err, f->errsz, TX_EINVAL,
            "reference: layer %d is a shared indexer layer with no full layer before it", l);
    if (f->hooks && f->hooks->indexer)
        f->hooks->indexer(f->hooks->ctx, l, f->n, f->pos0, f->sel, f->n_sel, f->sel_stride);
    return 1;
}

/* MLA (DeepseekV3Attention, GlmMoeDsaAttention.forward): low-rank q and kv,
 * one shared rope key, RoPE (interleaved or NeoX as the config says) on the
 * rope slice, softmax scale attn_scale; `select` (NULL: every causal key)
 * may restrict the keys of each query. */
int txref_mla_attention(struct ref_fwd *f, int l, const ref_real *x, ref_real *y,
                        txref_select_fn select)
{
    const struct glm_config *c = f->c;
    struct glm_ref_model *m = f->m;
    struct glm_ref_session *s = f->s;
    const int n = f->n, H = c->hidden_size, nh = c->num_attention_heads;
    const int qr = c->q_lora_rank, kvr = c->kv_lora_rank, nope = c->qk_nope_head_dim,
              rope = c->qk_rope_head_dim, qkh = c->qk_head_dim, vd = c->v_head_dim;
    int ret = 0;
    ref_real *qa = NULL, *q = NULL, *kva = NULL, *lat = NULL, *kvb = NULL, *att = NULL;
    const ref_real *wqa, *bqa, *qan, *wqb, *wkva, *bkva, *kvan, *wkvb, *wo, *bo;
    TRY(txref_w(m, GLM_T_Q_A_PROJ, l, -1, &wqa, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_Q_A_BIAS, l, -1, &bqa, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_Q_A_NORM, l, -1, &qan, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_Q_B_PROJ, l, -1, &wqb, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_KV_A_PROJ, l, -1, &wkva, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_KV_A_BIAS, l, -1, &bkva, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_KV_A_NORM, l, -1, &kvan, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_KV_B_PROJ, l, -1, &wkvb, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_O_PROJ, l, -1, &wo, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_O_BIAS, l, -1, &bo, f->err, f->errsz));
    ALLOC(qa, (int64_t)n * qr);
    ALLOC(q, (int64_t)n * nh * qkh);
    ALLOC(kva, (int64_t)n * (kvr + rope));
    ALLOC(lat, (int64_t)n * kvr);
    ALLOC(kvb, (int64_t)n * nh * (nope + vd));
    ALLOC(att, (int64_t)n * nh * vd);

    /* q path: q_a_proj -> q_a_layernorm (the q latent) -> q_b_proj */
    txref_linear(m->pool, x, n, H, wqa, bqa, qr, qa);
    for (int t = 0; t < n; t++)
        glm_ref_rmsnorm(qa + (int64_t)t * qr, qan, qr, MLA_NORM_EPS, qa + (int64_t)t * qr);
    txref_linear(m->pool, qa, n, qr, wqb, NULL, (int64_t)nh * qkh, q);
    /* kv path: kv_a_proj_with_mqa -> [latent | k_rope]; latent RMSNorm -> kv_b_proj */
    txref_linear(m->pool, x, n, H, wkva, bkva, kvr + rope, kva);
    for (int t = 0; t < n; t++)
        glm_ref_rmsnorm(kva + (int64_t)t * (kvr + rope), kvan, kvr, MLA_NORM_EPS,
                        lat + (int64_t)t * kvr);
    txref_linear(m->pool, lat, n, kvr, wkvb, NULL, (int64_t)nh * (nope + vd), kvb);
    /* YaRN's attention_factor multiplies cos and sin (1 without scaling) */
    const ref_real af = (ref_real)tx_cfg_rope_attn_factor(c);
    for (int t = 0; t < n; t++) {
        const int64_t pos = f->pos0 + t;
        for (int h = 0; h < nh; h++)
            txref_rope_scaled(q + ((int64_t)t * nh + h) * qkh + nope, rope, c->rope_interleave,
                              m->inv_freq, pos, af);
        ref_real *kr = kva + (int64_t)t * (kvr + rope) + kvr;
        txref_rope_scaled(kr, rope, c->rope_interleave, m->inv_freq, pos, af);
        /* expanded cache: K_h = [k_nope_h | k_rope], V_h */
        ref_real *kc = s->k_cache[l] + pos * s->kdim;
        ref_real *vc = s->v_cache[l] + pos * s->vdim;
        for (int h = 0; h < nh; h++) {
            const ref_real *src = kvb + ((int64_t)t * nh + h) * (nope + vd);
            memcpy(kc + (int64_t)h * qkh, src, sizeof(ref_real) * (size_t)nope);
            memcpy(kc + (int64_t)h * qkh + nope, kr, sizeof(ref_real) * (size_t)rope);
            memcpy(vc + (int64_t)h * vd, src + nope, sizeof(ref_real) * (size_t)vd);
        }
    }
    /* the key selection (DSA), if the architecture has one */
    int use_sel = 0;
    if (select) {
        use_sel = select(f, l, x, qa);
        if (use_sel < 0) {
            ret = use_sel;
            goto out;
        }
    }
    struct attn_job j = {
        .s = s,
        .q = q,
        .q_stride = qkh,
        .k = s->k_cache[l],
        .v = s->v_cache[l],
        .kdim = s->kdim,
        .vdim = s->vdim,
        .nh = nh,
        .n_rep = 1,
        .qk_dim = qkh,
        .v_dim = vd,
        .scale = (ref_real)glm_config_attn_scale(c),
        .pos0 = f->pos0,
        .sel = use_sel ? f->sel : NULL,
        .n_sel = use_sel ? f->n_sel : NULL,
        .sel_stride = f->sel_stride,
        .out = att,
        .max_keys = f->pos0 + n,
    };
    txref_parallel_for(m->pool, (int64_t)n * nh, attn_range, &j);
    txref_linear(m->pool, att, n, (int64_t)nh * vd, wo, bo, H, y);
out:
    free(qa);
    free(q);
    free(kva);
    free(lat);
    free(kvb);
    free(att);
    return ret;
}

/* down(silu(gate(x)) * up(x)) for n rows of x */
static int swiglu(struct ref_fwd *f, const ref_real *x, int n, const ref_real *wg,
                  const ref_real *wu, const ref_real *wd, int inter, ref_real *y)
{
    const int H = f->c->hidden_size;
    int ret = 0;
    ref_real *g = NULL, *u = NULL;
    ALLOC(g, (int64_t)n * inter);
    ALLOC(u, (int64_t)n * inter);
    txref_linear(f->m->pool, x, n, H, wg, NULL, inter, g);
    txref_linear(f->m->pool, x, n, H, wu, NULL, inter, u);
    for (int64_t i = 0; i < (int64_t)n * inter; i++)
        g[i] = g[i] / (1.0f + REF_EXP(-g[i])) * u[i];
    txref_linear(f->m->pool, g, n, inter, wd, NULL, H, y);
out:
    free(g);
    free(u);
    return ret;
}

static int ffn_dense(struct ref_fwd *f, int l, const ref_real *x, ref_real *y)
{
    const ref_real *wg, *wu, *wd;
    int rc;
    if ((rc = txref_w(f->m, GLM_T_MLP_GATE, l, -1, &wg, f->err, f->errsz)) < 0 ||
        (rc = txref_w(f->m, GLM_T_MLP_UP, l, -1, &wu, f->err, f->errsz)) < 0 ||
        (rc = txref_w(f->m, GLM_T_MLP_DOWN, l, -1, &wd, f->err, f->errsz)) < 0)
        return rc;
    return swiglu(f, x, f->n, wg, wu, wd, f->c->intermediate_size, y);
}

/* MoE: the module's router (sigmoid with correction bias and group-limited
 * top-k: DeepseekV3TopkRouter; softmax top-k: Qwen3MoeSparseMoeBlock), routed
 * experts accumulated in expert order, plus the shared experts. */
static int ffn_moe(struct ref_fwd *f, int l, const ref_real *x, ref_real *y)
{
    const struct glm_config *c = f->c;
    struct glm_ref_model *m = f->m;
    const int n = f->n, H = c->hidden_size, E = c->n_routed_experts, K = c->num_experts_per_tok,
              Im = c->moe_intermediate_size;
    int ret = 0;
    ref_real *logits = NULL, *gw = NULL, *xs = NULL, *ys = NULL, *sh = NULL;
    int32_t *ids = NULL, *rows = NULL;
    const ref_real *wr, *br;
    TRY(txref_w(m, GLM_T_ROUTER, l, -1, &wr, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_ROUTER_BIAS, l, -1, &br, f->err, f->errsz));
    ALLOC(logits, (int64_t)n * E);
    ALLOC(ids, (int64_t)n * K);
    ALLOC(gw, (int64_t)n * K);
    ALLOC(rows, n);
    ALLOC(xs, (int64_t)n * H);
    ALLOC(ys, (int64_t)n * H);
    txref_linear(m->pool, x, n, H, wr, NULL, E, logits);
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    const int softmax = arch && arch->router == TX_ROUTER_SOFTMAX;
    for (int t = 0; t < n; t++) {
        const ref_real *lt = logits + (int64_t)t * E;
        int rr = softmax ? txref_route_softmax(lt, E, K, c->norm_topk_prob, ids + (int64_t)t * K,
                                               gw + (int64_t)t * K)
                         : glm_ref_route(c, lt, br, ids + (int64_t)t * K, gw + (int64_t)t * K);
        if (rr < 0) {
            ret = tx_errbuf(f->err, f->errsz, TX_EINVAL, "reference: layer %d: routing failed", l);
            goto out;
        }
    }
    if (f->hooks && f->hooks->router) {
        float *gwf;
        const float *gv = txref_hook_view(gw, (int64_t)n * K, &gwf);
        if (!gv) {
            ret = tx_errbuf(f->err, f->errsz, TX_ENOMEM, "reference: out of memory");
            goto out;
        }
        f->hooks->router(f->hooks->ctx, l, n, K, ids, gv);
        free(gwf);
    }
    memset(y, 0, sizeof(ref_real) * (size_t)n * H);
    for (int e = 0; e < E; e++) {
        int cnt = 0;
        for (int t = 0; t < n; t++) {
            for (int k = 0; k < K; k++) {
                if (ids[(int64_t)t * K + k] == e) {
                    rows[cnt] = t * K + k;
                    memcpy(xs + (int64_t)cnt * H, x + (int64_t)t * H, sizeof(ref_real) * (size_t)H);
                    cnt++;
                }
            }
        }
        if (!cnt)
            continue;
        const ref_real *wg, *wu, *wd;
        TRY(txref_w(m, GLM_T_EXP_GATE, l, e, &wg, f->err, f->errsz));
        TRY(txref_w(m, GLM_T_EXP_UP, l, e, &wu, f->err, f->errsz));
        TRY(txref_w(m, GLM_T_EXP_DOWN, l, e, &wd, f->err, f->errsz));
        TRY(swiglu(f, xs, cnt, wg, wu, wd, Im, ys));
        for (int r = 0; r < cnt; r++) {
            const int t = rows[r] / K;
            const ref_real w = gw[rows[r]];
            ref_real *yt = y + (int64_t)t * H;
            const ref_real *yr = ys + (int64_t)r * H;
            for (int d = 0; d < H; d++)
                yt[d] += yr[d] * w;
        }
    }
    if (c->n_shared_experts > 0) {
        const ref_real *wg, *wu, *wd;
        TRY(txref_w(m, GLM_T_SHEXP_GATE, l, -1, &wg, f->err, f->errsz));
        TRY(txref_w(m, GLM_T_SHEXP_UP, l, -1, &wu, f->err, f->errsz));
        TRY(txref_w(m, GLM_T_SHEXP_DOWN, l, -1, &wd, f->err, f->errsz));
        ALLOC(sh, (int64_t)n * H);
        TRY(swiglu(f, x, n, wg, wu, wd, Im * c->n_shared_experts, sh));
        for (int64_t i = 0; i < (int64_t)n * H; i++)
            y[i] += sh[i];
    }
out:
    free(logits);
    free(ids);
    free(gw);
    free(rows);
    free(xs);
    free(ys);
    free(sh);
    return ret;
}

/* ------------------------------------------------------------------------ */
/* decoder layer */

/* Pre-norm residual layer (Glm4MoeDecoderLayer, GlmMoeDsaDecoderLayer):
 * h += attn(RMSNorm(h)); h += MLP or MoE(RMSNorm(h)) */
int txref_decoder_layer(struct ref_fwd *f, int l, ref_real *h,
                        int (*attn)(struct ref_fwd *f, int l, const ref_real *x, ref_real *y))
{
    const struct glm_config *c = f->c;
    struct glm_ref_model *m = f->m;
    const int n = f->n, H = c->hidden_size;
    const ref_real eps = (ref_real)c->rms_norm_eps;
    int ret = 0;
    ref_real *xn = NULL, *tmp = NULL;
    ALLOC(xn, (int64_t)n * H);
    ALLOC(tmp, (int64_t)n * H);
    const ref_real *w1, *w2;
    TRY(txref_w(m, GLM_T_INPUT_NORM, l, -1, &w1, f->err, f->errsz));
    TRY(txref_w(m, GLM_T_POST_ATTN_NORM, l, -1, &w2, f->err, f->errsz));
    for (int t = 0; t < n; t++)
        glm_ref_rmsnorm(h + (int64_t)t * H, w1, H, eps, xn + (int64_t)t * H);
    TRY(attn(f, l, xn, tmp));
    for (int64_t i = 0; i < (int64_t)n * H; i++)
        h[i] += tmp[i];
    for (int t = 0; t < n; t++)
        glm_ref_rmsnorm(h + (int64_t)t * H, w2, H, eps, xn + (int64_t)t * H);
    if (c->mlp_layer_types[l] == GLM_MLP_SPARSE)
        TRY(ffn_moe(f, l, xn, tmp));
    else
        TRY(ffn_dense(f, l, xn, tmp));
    for (int64_t i = 0; i < (int64_t)n * H; i++)
        h[i] += tmp[i];
out:
    free(xn);
    free(tmp);
    return ret;
}

static int attention_mla_all_keys(struct ref_fwd *f, int l, const ref_real *x, ref_real *y)
{
    return txref_mla_attention(f, l, x, y, NULL);
}

static int attention_mla_dsa(struct ref_fwd *f, int l, const ref_real *x, ref_real *y)
{
    return txref_mla_attention(f, l, x, y, txref_dsa_select);
}

int txref_arch_layer(struct ref_fwd *f, int l, ref_real *h)
{
    const struct tx_arch_ops *arch = tx_arch_get(f->c->arch);
    if (!arch)
        return tx_errbuf(f->err, f->errsz, TX_EINVAL, "reference: unknown architecture %d",
                         (int)f->c->arch);
    switch (arch->ref_attention) {
    case TX_REF_ATTN_GQA:
        return txref_decoder_layer(f, l, h, txref_gqa_attention);
    case TX_REF_ATTN_MLA:
        return txref_decoder_layer(f, l, h, attention_mla_all_keys);
    case TX_REF_ATTN_MLA_DSA:
        return txref_decoder_layer(f, l, h, attention_mla_dsa);
    }
    return tx_errbuf(f->err, f->errsz, TX_EINVAL, "reference: architecture %s has no attention %d",
                     arch->model_type, arch->ref_attention);
}
