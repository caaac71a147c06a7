/* SPDX-License-Identifier: MIT */
/*
 * ATTENTION (GQA, causal, KV cache of F32/F16/BF16, optional per-query key
 * selection) and DSA_INDEX (the lightning indexer's scores and top-k).
 */
#include <math.h>
#include <string.h>

#include "engine_internal.h"

#define KEY_CHUNK 128

/* ---- ATTENTION ---------------------------------------------------------- */

struct attn_ctx {
    struct tx8_engine *e;
    const struct tx8_cmd_attention *m;
    const float *q;
    const uint8_t *k, *v;
    float *out;
    const int32_t *sel; /* private, validated copy or NULL */
    size_t grp;         /* q heads per kv head */
    size_t nsplit;      /* sub-groups of q heads per work item */
    size_t hsub;        /* q heads per sub-group */
    size_t es;
};

/*
 * One work item: token t, kv head g, q heads [h0, h1) of its group. Keys
 * are taken KEY_CHUNK at a time with an online softmax (running max and sum
 * per head), so scratch does not grow with the KV length:
 *   S[head][key] = q[head] . k[key] is a small matrix product computed by
 *   the matmul tile kernels straight from the cache (any kv_dtype), so each
 *   key row is loaded once per tile for several heads;
 *   O[head] += P[head][key] V[key] by the pv kernel, with the chunk's V
 *   rows converted to f32 once for all the heads that share them (GQA).
 */
static void attn_item(struct attn_ctx *a, size_t t, size_t g, size_t h0, size_t h1,
                      struct eng_worker *w)
{
    const struct tx8_cmd_attention *m = a->m;
    const struct eng_kernels *k = a->e->k;
    size_t nh = h1 - h0, qk = m->qk_dim, vd = m->v_dim;
    float *sc = eng_wscratch(w, W_TMP, nh * KEY_CHUNK * 4 + 64);
    float *o = eng_wscratch(w, W_TMP2, nh * (vd + 2) * 4 + 64);
    size_t dmax = qk > vd ? qk : vd;
    float *rows = eng_wscratch(w, W_TMP3, KEY_CHUNK * dmax * 4 + 64);
    int32_t *keys = eng_wscratch(w, W_C, KEY_CHUNK * 4);
    if (!sc || !o || !rows || !keys)
        return;
    float *mx = o + nh * vd, *l = mx + nh;
    memset(o, 0, nh * vd * 4);
    for (size_t i = 0; i < nh; i++) {
        mx[i] = -INFINITY;
        l[i] = 0;
    }
    size_t qrow = (size_t)m->q_heads * m->ld_q_head;
    size_t krow = (size_t)m->kv_heads * m->ld_k_head, vrow = (size_t)m->kv_heads * m->ld_v_head;
    const float *q = a->q + t * qrow + h0 * m->ld_q_head;
    uint64_t limit = (uint64_t)m->q_pos0 + t + 1;
    if (limit > m->kv_len)
        limit = m->kv_len;
    size_t total = a->sel ? m->sel_k : (size_t)limit;
    const int32_t *sl = a->sel ? a->sel + t * m->sel_k : NULL;
    size_t tt_max = k->gemm_tokens;

    for (size_t c0 = 0; c0 < total; c0 += KEY_CHUNK) {
        size_t cn = 0;
        for (size_t j = c0; j < total && j < c0 + KEY_CHUNK; j++) {
            if (sl) {
                if (sl[j] >= 0)
                    keys[cn++] = sl[j];
            } else {
                keys[cn++] = (int32_t)j;
            }
        }
        if (!cn)
            continue;
        /* scores: K rows straight from the cache when contiguous, else
         * gathered (and converted) into scratch */
        struct mm_tile tl;
        memset(&tl, 0, sizeof(tl));
        if (sl) {
            for (size_t j = 0; j < cn; j++)
                k->to_f32(rows + j * qk, a->k + ((size_t)keys[j] * krow + g * m->ld_k_head) * a->es,
                          m->kv_dtype, qk);
            tl.w = (const uint8_t *)rows;
            tl.w_stride = qk * 4;
            tl.dtype = TX8_DTYPE_F32;
        } else {
            tl.w = a->k + ((size_t)keys[0] * krow + g * m->ld_k_head) * a->es;
            tl.w_stride = krow * a->es;
            tl.dtype = m->kv_dtype;
        }
        tl.group = qk;
        tl.x_stride = m->ld_q_head;
        tl.k0 = 0;
        tl.k1 = qk;
        tl.out_stride = KEY_CHUNK;
        memset(sc, 0, nh * KEY_CHUNK * 4);
        const uint8_t *wbase = tl.w;
        for (size_t i = 0; i < nh; i += tt_max) {
            tl.T = nh - i < tt_max ? (unsigned)(nh - i) : (unsigned)tt_max;
            tl.x = q + i * m->ld_q_head;
            unsigned rs = tl.T == 1 ? k->gemv_rows : 4;
            for (size_t j = 0; j < cn; j += rs) {
                tl.R = cn - j < rs ? (unsigned)(cn - j) : rs;
                tl.w = wbase + j * tl.w_stride;
                tl.out = sc + i * KEY_CHUNK + j;
                k->mm_tile_f32(&tl);
            }
        }
        /* online softmax update */
        for (size_t i = 0; i < nh; i++) {
            float *s = sc + i * KEY_CHUNK;
            float cmax = mx[i];
            for (size_t j = 0; j < cn; j++) {
                s[j] *= m->scale;
                if (s[j] > cmax)
                    cmax = s[j];
            }
            if (cmax == -INFINITY || isnan(cmax)) {
                for (size_t j = 0; j < cn; j++)
                    s[j] = 0;
                continue;
            }
            float corr = mx[i] == -INFINITY ? 0.0f : expf(mx[i] - cmax);
            float sum = k->exp_sum(s, cn, cmax);
            l[i] = l[i] * corr + sum;
            if (corr != 1.0f)
                k->scale_f32(o + i * vd, corr, vd);
            mx[i] = cmax;
        }
        /* values: f32 rows (converted once), then O += P V */
        const float *vf;
        size_t ldv;
        if (!sl && m->kv_dtype == TX8_DTYPE_F32) {
            vf = (const float *)(const void *)(a->v +
                                               ((size_t)keys[0] * vrow + g * m->ld_v_head) * a->es);
            ldv = vrow;
        } else {
            for (size_t j = 0; j < cn; j++)
                k->to_f32(rows + j * vd, a->v + ((size_t)keys[j] * vrow + g * m->ld_v_head) * a->es,
                          m->kv_dtype, vd);
            vf = rows;
            ldv = vd;
        }
        k->pv_f32(o, vd, sc, KEY_CHUNK, nh, vf, ldv, cn, vd);
    }
    size_t orow = (size_t)m->q_heads * m->ld_o_head;
    for (size_t i = 0; i < nh; i++) {
        float *dst = a->out + t * orow + (h0 + i) * m->ld_o_head;
        float inv = l[i] > 0 ? 1.0f / l[i] : 0.0f;
        for (size_t d = 0; d < vd; d++)
            dst[d] = o[i * vd + d] * inv;
    }
}

static void attn_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct attn_ctx *a = p;
    size_t kvh = a->m->kv_heads;
    for (size_t it = b; it < end; it++) {
        if (eng_aborted(a->e))
            return;
        size_t s = it % a->nsplit, rest = it / a->nsplit;
        size_t g = rest % kvh, t = rest / kvh;
        size_t h0 = g * a->grp + s * a->hsub;
        size_t h1 = h0 + a->hsub;
        if (h1 > (g + 1) * a->grp)
            h1 = (g + 1) * a->grp;
        if (h0 < h1)
            attn_item(a, t, g, h0, h1, w);
    }
}

int eng_exec_attention(struct eng_cmd *c)
{
    const struct tx8_cmd_attention *m = c->cmd;
    struct tx8_engine *e = c->e;
    if (!m->tokens || !m->q_heads)
        return 0;
    struct attn_ctx a;
    memset(&a, 0, sizeof(a));
    a.e = e;
    a.m = m;
    a.q = eng_ptr(e, m->q);
    a.k = eng_ptr(e, m->k);
    a.v = eng_ptr(e, m->v);
    a.out = eng_ptr(e, m->out);
    a.es = tx_dtype_size(m->kv_dtype);
    a.grp = m->q_heads / m->kv_heads;

    uint64_t pairs = 0; /* (query, key) pairs, for the MAC count */
    if (m->sel) {
        size_t n = (size_t)m->tokens * m->sel_k;
        int32_t *sel = eng_jscratch(e, J_IDS, n * 4);
        if (!sel)
            return TX8_STATUS_DEVICE_ERROR;
        memcpy(sel, eng_ptr(e, m->sel), n * 4);
        for (size_t t = 0; t < m->tokens; t++) {
            uint64_t limit = (uint64_t)m->q_pos0 + t + 1;
            if (limit > m->kv_len)
                limit = m->kv_len;
            for (size_t j = 0; j < m->sel_k; j++) {
                int32_t s = sel[t * m->sel_k + j];
                if (s < 0)
                    continue;
                if ((uint64_t)s >= limit)
                    return TX8_STATUS_INVALID_CMD;
                pairs++;
            }
        }
        a.sel = sel;
    } else {
        for (size_t t = 0; t < m->tokens; t++) {
            uint64_t limit = (uint64_t)m->q_pos0 + t + 1;
            pairs += limit < m->kv_len ? limit : m->kv_len;
        }
    }

    size_t items = (size_t)m->tokens * m->kv_heads;
    size_t want = (size_t)e->cores * 2;
    a.nsplit = 1;
    if (items < want) {
        a.nsplit = (want + items - 1) / items;
        if (a.nsplit > a.grp)
            a.nsplit = a.grp;
    }
    a.hsub = (a.grp + a.nsplit - 1) / a.nsplit;
    eng_parallel(e, items * a.nsplit, 1, attn_fn, &a);

    c->macs = pairs * m->q_heads * ((uint64_t)m->qk_dim + m->v_dim);
    c->mac_dtype = m->kv_dtype;
    return 0;
}

/* ---- DSA_INDEX ---------------------------------------------------------- */

/* a ranks before b: higher score, then lower index */
static inline int better(struct eng_cand a, struct eng_cand b)
{
    return a.s > b.s || (a.s == b.s && a.i < b.i);
}

/* min-heap on "better": the root is the worst kept candidate */
static void sift_down(struct eng_cand *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && better(h[m], h[l]))
            m = l;
        if (r < n && better(h[m], h[r]))
            m = r;
        if (m == i)
            return;
        struct eng_cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void sort_cands(struct eng_cand *c, size_t n)
{
    /* heap sort into best-first order (n <= TX8_ENGINE_MAX_TOPK) */
    for (size_t i = n / 2; i-- > 0;)
        sift_down(c, n, i);
    for (size_t end = n; end > 1; end--) {
        struct eng_cand t = c[0];
        c[0] = c[end - 1];
        c[end - 1] = t;
        sift_down(c, end - 1, 0);
    }
    /* the root is the worst, so extraction leaves best-first order */
}

size_t eng_topk(const float *scores, size_t n, size_t k, struct eng_cand *heap)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        struct eng_cand cd = {scores[i], (int32_t)i};
        if (isnan(cd.s))
            cd.s = -INFINITY;
        if (m < k) {
            heap[m++] = cd;
            if (m == k)
                for (size_t j = k / 2; j-- > 0;)
                    sift_down(heap, k, j);
        } else if (better(cd, heap[0])) {
            heap[0] = cd;
            sift_down(heap, k, 0);
        }
    }
    sort_cands(heap, m);
    return m;
}

struct dsa_ctx {
    struct tx8_engine *e;
    const struct tx8_cmd_dsa_index *m;
    const float *q, *k, *w;
    int32_t *sel;
    float *scores; /* [tb][nkeys] */
    size_t nkeys, t0, nchunks;
};

#define DSA_KCHUNK 256

static void dsa_score_fn(void *p, size_t b, size_t end, struct eng_worker *wk)
{
    struct dsa_ctx *d = p;
    const struct tx8_cmd_dsa_index *m = d->m;
    const struct eng_kernels *k = d->e->k;
    for (size_t it = b; it < end; it++) {
        size_t tl = it / d->nchunks, ch = it % d->nchunks;
        size_t t = d->t0 + tl;
        uint64_t limit = (uint64_t)m->q_pos0 + t + 1;
        if (limit > m->kv_len)
            limit = m->kv_len;
        size_t s0 = ch * DSA_KCHUNK, s1 = s0 + DSA_KCHUNK;
        if (s1 > limit)
            s1 = (size_t)limit;
        const float *q = d->q + t * (size_t)m->heads * m->ld_q_head;
        const float *wt = d->w + t * (size_t)m->heads;
        float *out = d->scores + tl * d->nkeys;
        if (s1 <= s0)
            continue;
        size_t n = s1 - s0;
        /* dots[h][s] = q[h] . k[s] for the chunk: a small matrix product */
        float *dots = eng_wscratch(wk, W_TMP2, m->heads * (size_t)DSA_KCHUNK * 4);
        if (!dots)
            return;
        memset(dots, 0, m->heads * (size_t)DSA_KCHUNK * 4);
        struct mm_tile tile;
        memset(&tile, 0, sizeof(tile));
        tile.w_stride = (size_t)m->ld_k * 4;
        tile.dtype = TX8_DTYPE_F32;
        tile.group = m->dim;
        tile.x_stride = m->ld_q_head;
        tile.k1 = m->dim;
        tile.out_stride = DSA_KCHUNK;
        for (size_t h = 0; h < m->heads; h += k->gemm_tokens) {
            tile.T = m->heads - h < k->gemm_tokens ? (unsigned)(m->heads - h) : k->gemm_tokens;
            tile.x = q + h * m->ld_q_head;
            unsigned rs = tile.T == 1 ? k->gemv_rows : 4;
            for (size_t j = 0; j < n; j += rs) {
                tile.R = n - j < rs ? (unsigned)(n - j) : rs;
                tile.w = (const uint8_t *)(d->k + (s0 + j) * (size_t)m->ld_k);
                tile.out = dots + h * DSA_KCHUNK + j;
                k->mm_tile_f32(&tile);
            }
        }
        for (size_t j = 0; j < n; j++)
            out[s0 + j] = 0;
        for (size_t h = 0; h < m->heads; h++) {
            const float *dh = dots + h * DSA_KCHUNK;
            float wh = wt[h];
            for (size_t j = 0; j < n; j++)
                if (dh[j] > 0)
                    out[s0 + j] += wh * dh[j];
        }
    }
}

static void dsa_select_fn(void *p, size_t b, size_t end, struct eng_worker *wk)
{
    struct dsa_ctx *d = p;
    const struct tx8_cmd_dsa_index *m = d->m;
    struct eng_cand *heap = eng_wscratch(wk, W_TMP, (size_t)m->top_k * sizeof(struct eng_cand));
    if (!heap)
        return;
    for (size_t tl = b; tl < end; tl++) {
        size_t t = d->t0 + tl;
        uint64_t limit = (uint64_t)m->q_pos0 + t + 1;
        if (limit > m->kv_len)
            limit = m->kv_len;
        size_t got = eng_topk(d->scores + tl * d->nkeys, (size_t)limit, m->top_k, heap);
        int32_t *o = d->sel + t * (size_t)m->top_k;
        for (size_t j = 0; j < m->top_k; j++)
            o[j] = j < got ? heap[j].i : -1;
    }
}

int eng_exec_dsa_index(struct eng_cmd *c)
{
    const struct tx8_cmd_dsa_index *m = c->cmd;
    struct tx8_engine *e = c->e;
    if (!m->tokens)
        return 0;
    struct dsa_ctx d;
    memset(&d, 0, sizeof(d));
    d.e = e;
    d.m = m;
    d.sel = eng_ptr(e, m->sel);
    uint64_t keys = (uint64_t)m->q_pos0 + m->tokens;
    if (keys > m->kv_len)
        keys = m->kv_len;
    if (!keys) { /* nothing visible */
        for (size_t i = 0; i < (size_t)m->tokens * m->top_k; i++)
            d.sel[i] = -1;
        return 0;
    }
    d.q = eng_ptr(e, m->q);
    d.k = eng_ptr(e, m->k);
    d.w = eng_ptr(e, m->w);
    d.nkeys = (size_t)keys;
    d.nchunks = (d.nkeys + DSA_KCHUNK - 1) / DSA_KCHUNK;
    /* tokens per block: scores of a block take at most ~64 MiB */
    size_t tb = ((size_t)64 << 20) / (d.nkeys * 4);
    if (tb < 1)
        tb = 1;
    if (tb > m->tokens)
        tb = m->tokens;
    d.scores = eng_jscratch(e, J_GATHER, tb * d.nkeys * 4);
    if (!d.scores)
        return TX8_STATUS_DEVICE_ERROR;
    uint64_t pairs = 0;
    for (size_t t0 = 0; t0 < m->tokens; t0 += tb) {
        size_t nt = m->tokens - t0 < tb ? m->tokens - t0 : tb;
        d.t0 = t0;
        if (m->heads)
            eng_parallel(e, nt * d.nchunks, 1, dsa_score_fn, &d);
        else
            memset(d.scores, 0, nt * d.nkeys * 4);
        eng_parallel(e, nt, 1, dsa_select_fn, &d);
        if (eng_aborted(e))
            return TX8_STATUS_ABORTED;
    }
    for (size_t t = 0; t < m->tokens; t++) {
        uint64_t limit = (uint64_t)m->q_pos0 + t + 1;
        pairs += limit < m->kv_len ? limit : m->kv_len;
    }
    c->macs = pairs * m->heads * m->dim;
    c->mac_dtype = TX8_DTYPE_F32;
    return 0;
}
