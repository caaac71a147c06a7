/* SPDX-License-Identifier: MIT */
/*
 * ATTENTION (GQA, causal, KV cache of F32/F16/BF16 or the 1.6 block types
 * Q8_0 / Q4_0, a shared K/V cache for absorbed MLA, optional per-query key
 * selection, key-range split for decode) and DSA_INDEX (the lightning
 * indexer's scores and top-k, over an f32 or Q8_0 key cache).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_internal.h"

#define KEY_CHUNK 128

/* ---- ATTENTION ---------------------------------------------------------- */

/* a cache row to f32: the AVX-512 converter where the engine has it (the
 * block types' scalar decode is the slow part of the per-token path) */
static inline void kv_row(const struct eng_kernels *k, float *dst, const void *src, unsigned dt,
                          size_t n)
{
    if (k->isa == TX8_ISA_AVX512)
        eng_kv_row_f32_avx512(dst, src, dt, n);
    else
        eng_kv_to_f32(k, dst, src, dt, n);
}

/* x[0..n) rounded to BF16 (TX8_ATTN_F_BF16's operands) */
static void bf16_round_n(const struct eng_kernels *k, float *x, size_t n)
{
    if (k->isa == TX8_ISA_AVX512) {
        eng_bf16_round_avx512(x, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = eng_bf16_round(x[i]);
}

/* the causal keys query t of the command sees */
static inline size_t causal_keys(const struct tx8_cmd_attention *m, size_t t)
{
    uint64_t limit = (uint64_t)m->q_pos0 + t + 1;
    return (size_t)(limit < m->kv_len ? limit : m->kv_len);
}

/* the most rows of one score tile: the small-batch kernel's where the ISA
 * has one (its RM x T accumulators fit the registers; a row's sums are
 * those of the 4 x 4 tile when the dot length is a multiple of 8), else
 * the 4 x 4 tile's */
static size_t score_rows_max(const struct eng_kernels *k)
{
    return k->mm_small_f32 && k->small_tokens >= 2 ? k->small_tokens : k->gemm_tokens;
}

/* out[row][j] += x[row] . key j for the tl->T rows of tl and keys [0, n)
 * at wbase (stride tl->w_stride); out's row stride is tl->out_stride */
static void score_keys(const struct eng_kernels *k, struct mm_tile *tl, const uint8_t *wbase,
                       size_t n, float *out)
{
    int sm = k->mm_small_f32 && k->small_tokens >= 2 && tl->T > 1;
    unsigned rs = tl->T == 1 ? k->gemv_rows : sm ? k->small_rows[tl->T] : 4;
    for (size_t j = 0; j < n; j += rs) {
        tl->R = n - j < rs ? (unsigned)(n - j) : rs;
        tl->w = wbase + j * tl->w_stride;
        tl->out = out + j;
        if (sm)
            k->mm_small_f32(tl);
        else
            k->mm_tile_f32(tl);
    }
}

/*
 * One work item: tokens [t0, t0 + nt), kv head g, q heads [h0, h1) of its
 * group, keys [j0, j1) of the key list (every causal key of the tile's
 * last token, or with a selection (nt == 1) the token's own list). The
 * rows are (token, head) pairs, token-major; a row's keys past its own
 * causal limit are masked. Keys are taken KEY_CHUNK at a time with an
 * online softmax (running max and sum per row), so scratch does not grow
 * with the KV length:
 *   S[row][key] = q[row] . k[key] is a small matrix product computed by
 *   the matmul tile kernels straight from the cache (F32/F16/BF16), or
 *   from the chunk's key rows converted to f32 once (a selection, a block
 *   type), so each key row is loaded once per tile for several rows
 *   (heads of a group, or tokens of one head: MHA, MLA's expanded form);
 *   O[row] += P[row][key] V[key] by the pv kernel, with the chunk's V
 *   rows converted to f32 once for all the rows that share them (GQA,
 *   MLA's one latent head); when V is the K rows' prefix (absorbed MLA) the
 *   converted K rows serve as V.
 * part == NULL: the normalised output is written; else (o, max, sum) of
 * the nt == 1 rows go to part for the merge.
 */
static void attn_item(struct attn_ctx *a, size_t t0, size_t nt, size_t g, size_t h0, size_t h1,
                      size_t j0, size_t j1, float *part, struct eng_worker *w)
{
    const struct tx8_cmd_attention *m = a->m;
    const struct eng_kernels *k = a->e->k;
    size_t nh = h1 - h0, nr = nt * nh, qk = m->qk_dim, vd = m->v_dim;
    /* with BF16 products the rounded query rows bf16(scale q) follow the scores */
    float *sc = eng_wscratch(w, W_TMP, (nr * KEY_CHUNK + (a->bf ? nr * qk : 0)) * 4 + 64);
    float *o = eng_wscratch(w, W_TMP2, nr * (vd + 2) * 4 + 64);
    size_t dmax = qk > vd ? qk : vd;
    float *rows = eng_wscratch(w, W_TMP3, KEY_CHUNK * dmax * 4 + 64);
    int32_t *keys = eng_wscratch(w, W_C, KEY_CHUNK * 4);
    if (!sc || !o || !rows || !keys)
        return;
    float *mx = o + nr * vd, *l = mx + nr;
    memset(o, 0, nr * vd * 4);
    for (size_t i = 0; i < nr; i++) {
        mx[i] = -INFINITY;
        l[i] = 0;
    }
    size_t qrow = (size_t)m->q_heads * m->ld_q_head;
    size_t krow = (size_t)m->kv_heads * m->ld_k_head, vrow = (size_t)m->kv_heads * m->ld_v_head;
    const float *q = a->q + t0 * qrow + h0 * m->ld_q_head;
    /* the rows as groups of one stride: the heads of each token, or the
     * tokens of the one head, or the rounded copy's rows */
    size_t ng = nt, gr = nh, gstride = qrow, ldq = m->ld_q_head;
    if (nh == 1) {
        ng = 1;
        gr = nt;
        ldq = qrow;
    }
    float scale = m->scale;
    if (a->bf) { /* TX8_ATTN_F_BF16: the products of BF16-rounded operands */
        float *qr = sc + nr * KEY_CHUNK;
        for (size_t ti = 0; ti < nt; ti++)
            for (size_t i = 0; i < nh; i++)
                for (size_t d = 0; d < qk; d++)
                    qr[(ti * nh + i) * qk + d] = q[ti * qrow + i * m->ld_q_head + d] * m->scale;
        bf16_round_n(k, qr, nr * qk);
        q = qr;
        ng = 1;
        gr = nr;
        ldq = qk;
        scale = 1.0f;
    }
    const int32_t *sl = a->sel ? a->sel + t0 * m->sel_k : NULL;
    /* the command's key bitmap (no selection): masked keys get no weight */
    const uint64_t *bm = !sl && a->umask ? a->bm + t0 * a->bm_words : NULL;
    size_t tt_max = score_rows_max(k);
    /* convert the chunk's K rows to f32 (gather): selections, block types,
     * a shared K/V (the converted rows are the V rows too), and BF16
     * products of a cache other than BF16 (the rows are rounded) */
    int gather = sl || a->block || (a->shared && m->kv_dtype != TX8_DTYPE_F32) ||
                 (a->bf && m->kv_dtype != TX8_DTYPE_BF16);
    int kround = a->bf && m->kv_dtype != TX8_DTYPE_BF16;
    size_t es = tx_dtype_size(m->kv_dtype);

    for (size_t c0 = j0; c0 < j1; c0 += KEY_CHUNK) {
        size_t cn = 0;
        for (size_t j = c0; j < j1 && j < c0 + KEY_CHUNK; j++) {
            if (sl) {
                if (sl[j] >= 0)
                    keys[cn++] = sl[j];
            } else {
                keys[cn++] = (int32_t)j;
            }
        }
        if (!cn)
            continue;
        struct mm_tile tl;
        memset(&tl, 0, sizeof(tl));
        if (gather) {
            for (size_t j = 0; j < cn; j++)
                kv_row(k, rows + j * qk,
                       kv_at(m->kv_dtype, a->k, (size_t)keys[j] * krow + g * m->ld_k_head),
                       m->kv_dtype, qk);
            if (kround)
                bf16_round_n(k, rows, cn * qk);
            tl.w = (const uint8_t *)rows;
            tl.w_stride = qk * 4;
            tl.dtype = TX8_DTYPE_F32;
        } else {
            tl.w = a->k + ((size_t)keys[0] * krow + g * m->ld_k_head) * es;
            tl.w_stride = krow * es;
            tl.dtype = m->kv_dtype;
        }
        tl.group = qk;
        tl.x_stride = ldq;
        tl.k0 = 0;
        tl.k1 = qk;
        tl.out_stride = KEY_CHUNK;
        memset(sc, 0, nr * KEY_CHUNK * 4);
        const uint8_t *wbase = tl.w;
        for (size_t gi = 0; gi < ng; gi++) {
            /* rows of the chunk's keys that some row of the group sees */
            size_t r0 = gi * gr;
            for (size_t i = 0; i < gr; i += tt_max) {
                tl.T = gr - i < tt_max ? (unsigned)(gr - i) : (unsigned)tt_max;
                size_t vis = cn;
                if (!sl) { /* the tile's last row sees the most keys */
                    size_t lm = causal_keys(m, t0 + (r0 + i + tl.T - 1) / nh);
                    vis = lm <= c0 ? 0 : lm - c0 < cn ? lm - c0 : cn;
                }
                tl.x = q + gi * gstride + i * ldq;
                score_keys(k, &tl, wbase, vis, sc + (r0 + i) * KEY_CHUNK);
            }
        }
        /* online softmax update; a row's keys past its causal limit masked */
        for (size_t i = 0; i < nr; i++) {
            float *s = sc + i * KEY_CHUNK;
            size_t vis = cn;
            if (!sl) { /* keys past the row's causal limit are masked */
                size_t lm = causal_keys(m, t0 + i / nh);
                vis = lm <= c0 ? 0 : lm - c0 < cn ? lm - c0 : cn;
            }
            float cmax = mx[i];
            const uint64_t *bmr = bm ? bm + (i / nh) * a->bm_words : NULL;
            for (size_t j = 0; j < vis; j++) {
                s[j] *= scale;
                if (bmr && !((bmr[(c0 + j) / 64] >> ((c0 + j) % 64)) & 1))
                    s[j] = -INFINITY;
                if (s[j] > cmax)
                    cmax = s[j];
            }
            if (vis == 0 || cmax == -INFINITY || isnan(cmax)) {
                for (size_t j = 0; j < cn; j++)
                    s[j] = 0;
                continue;
            }
            float corr = mx[i] == -INFINITY ? 0.0f : expf(mx[i] - cmax);
            float sum = k->exp_sum(s, vis, cmax);
            for (size_t j = vis; j < cn; j++)
                s[j] = 0;
            l[i] = l[i] * corr + sum;
            if (corr != 1.0f)
                k->scale_f32(o + i * vd, corr, vd);
            mx[i] = cmax;
            if (a->bf) /* the sum is of the f32 p, P V of bf16(p) */
                bf16_round_n(k, s, cn);
        }
        /* values: f32 rows (converted once), then O += P V */
        const float *vf;
        size_t ldv;
        if (a->shared && gather) {
            vf = rows; /* V = the first v_dim dims of the converted K rows */
            ldv = qk;
        } else if (!sl && a->vdt == TX8_DTYPE_F32 && !a->bf) {
            vf = (const float *)(const void *)(a->v +
                                               ((size_t)keys[0] * vrow + g * m->ld_v_head) * 4);
            ldv = vrow;
        } else {
            for (size_t j = 0; j < cn; j++)
                kv_row(k, rows + j * vd,
                       kv_at(a->vdt, a->v, (size_t)keys[j] * vrow + g * m->ld_v_head), a->vdt, vd);
            if (a->bf && a->vdt != TX8_DTYPE_BF16)
                bf16_round_n(k, rows, cn * vd);
            vf = rows;
            ldv = vd;
        }
        k->pv_f32(o, vd, sc, KEY_CHUNK, nr, vf, ldv, cn, vd);
    }
    if (part) {
        memcpy(part, o, nr * (vd + 2) * 4);
        return;
    }
    size_t orow = (size_t)m->q_heads * m->ld_o_head;
    for (size_t ti = 0; ti < nt; ti++)
        for (size_t i = 0; i < nh; i++) {
            size_t r = ti * nh + i;
            float *dst = a->out + (t0 + ti) * orow + (h0 + i) * m->ld_o_head;
            float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
            for (size_t d = 0; d < vd; d++)
                dst[d] = o[r * vd + d] * inv;
        }
}

/* the key list length of query t */
static size_t attn_total(const struct attn_ctx *a, size_t t)
{
    return a->sel && !a->bm ? a->m->sel_k : causal_keys(a->m, t);
}

static void attn_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct attn_ctx *a = p;
    size_t kvh = a->m->kv_heads;
    for (size_t it = b; it < end; it++) {
        if (eng_aborted(a->e))
            return;
        if (a->fast && a->nks == 1) {
            /* item = (query tile, kv head, head sub-group), the tiles
             * with the most keys (the last, causally) first */
            size_t s = it % a->nsplit, rest = it / a->nsplit;
            size_t g = rest % kvh, tile = a->ntiles - 1 - rest / kvh;
            size_t t0 = tile * a->tq, nt = a->m->tokens - t0 < a->tq ? a->m->tokens - t0 : a->tq;
            size_t h0 = g * a->grp + s * a->hsub, h1 = h0 + a->hsub;
            if (h1 > (g + 1) * a->grp)
                h1 = (g + 1) * a->grp;
            if (h0 < h1)
                eng_attn_tile_avx512(a, t0, nt, h0, h1, g, 0, attn_total(a, t0 + nt - 1), NULL, w);
            continue;
        }
        if (a->nks > 1) {
            /* item = (token, kv head, key range): every head of the group */
            size_t ks = it % a->nks, rest = it / a->nks;
            size_t g = rest % kvh, t = rest / kvh;
            size_t total = attn_total(a, t), per = (total + a->nks - 1) / a->nks;
            size_t j0 = ks * per, j1 = j0 + per < total ? j0 + per : total;
            float *part = a->part + (rest * a->nks + ks) * a->grp * (a->m->v_dim + 2);
            if (j0 >= j1) { /* an empty range: no mass */
                for (size_t i = 0; i < a->grp; i++) {
                    part[a->grp * a->m->v_dim + i] = -INFINITY;
                    part[a->grp * a->m->v_dim + a->grp + i] = 0;
                }
                continue;
            }
            if (a->fast)
                eng_attn_tile_avx512(a, t, 1, g * a->grp, (g + 1) * a->grp, g, j0, j1, part, w);
            else if (a->dec)
                eng_attn_decode_avx512(a, t, g * a->grp, (g + 1) * a->grp, g, j0, j1, part, w);
            else
                attn_item(a, t, 1, g, g * a->grp, (g + 1) * a->grp, j0, j1, part, w);
            continue;
        }
        /* item = (query tile, kv head, head sub-group), the tiles with the
         * most keys first */
        size_t s = it % a->nsplit, rest = it / a->nsplit;
        size_t g = rest % kvh, tile = a->ntiles - 1 - rest / kvh;
        size_t t0 = tile * a->tq, nt = a->m->tokens - t0 < a->tq ? a->m->tokens - t0 : a->tq;
        size_t h0 = g * a->grp + s * a->hsub;
        size_t h1 = h0 + a->hsub;
        if (h1 > (g + 1) * a->grp)
            h1 = (g + 1) * a->grp;
        if (h0 < h1 && a->dec && nt == 1)
            eng_attn_decode_avx512(a, t0, h0, h1, g, 0, attn_total(a, t0), NULL, w);
        else if (h0 < h1)
            attn_item(a, t0, nt, g, h0, h1, 0, attn_total(a, t0 + nt - 1), NULL, w);
    }
}

/* the key ranges' partial (o, max, sum) of each (token, kv head) merged
 * into the output */
static void attn_merge_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct attn_ctx *a = p;
    const struct tx8_cmd_attention *m = a->m;
    (void)w;
    size_t vd = m->v_dim, G = a->grp, kvh = m->kv_heads;
    size_t orow = (size_t)m->q_heads * m->ld_o_head;
    for (size_t it = b; it < end; it++) { /* it = (token, kv head, head in group) */
        size_t i = it % G, rest = it / G;
        size_t g = rest % kvh, t = rest / kvh;
        float gm = -INFINITY;
        for (size_t ks = 0; ks < a->nks; ks++) {
            const float *pp = a->part + (rest * a->nks + ks) * G * (vd + 2);
            float mk = pp[G * vd + i];
            if (mk > gm)
                gm = mk;
        }
        float *dst = a->out + t * orow + (g * G + i) * m->ld_o_head;
        for (size_t d = 0; d < vd; d++)
            dst[d] = 0;
        float lsum = 0;
        if (gm != -INFINITY && !isnan(gm)) {
            for (size_t ks = 0; ks < a->nks; ks++) {
                const float *pp = a->part + (rest * a->nks + ks) * G * (vd + 2);
                float mk = pp[G * vd + i], lk = pp[G * vd + G + i];
                if (mk == -INFINITY || lk <= 0)
                    continue;
                float f = expf(mk - gm);
                lsum += lk * f;
                const float *ok = pp + i * vd;
                for (size_t d = 0; d < vd; d++)
                    dst[d] += ok[d] * f;
            }
        }
        float inv = lsum > 0 ? 1.0f / lsum : 0.0f;
        for (size_t d = 0; d < vd; d++)
            dst[d] *= inv;
    }
}

/* TX8_ATTN_TILE=0: the generic per-token path on every ISA (A/B checks) */
static int attn_tile_off(const struct tx8_engine *e)
{
    return e->set.attn_tile == 0;
}

static int attn_decode_off(const struct tx8_engine *e)
{
    return e->set.attn_decode == 0;
}

/* the types the decode kernel reads straight from the cache */
static int attn_decode_type(unsigned dt)
{
    return dt == TX8_DTYPE_F32 || dt == TX8_DTYPE_F16 || dt == TX8_DTYPE_BF16 ||
           tx_dtype_is_block(dt);
}

/*
 * A selection that keeps at least half of the causal keys (DSA while the
 * context is not much longer than index_topk) as a bitmap of the selected
 * keys per token, for the tile path's masked causal tiles: computing the
 * few unselected keys costs less than one token per tile. Not when the
 * bitmap would exceed 16 MiB or a token lists a key twice (the key list is
 * then not a set).
 */
static void attn_sel_bitmap(struct attn_ctx *a, size_t *max_total)
{
    const struct tx8_cmd_attention *m = a->m;
    uint64_t sel = 0, dense = 0;
    size_t maxl = 0;
    for (size_t t = 0; t < m->tokens; t++) {
        size_t limit = causal_keys(m, t);
        dense += limit;
        if (limit > maxl)
            maxl = limit;
        for (size_t j = 0; j < m->sel_k; j++)
            sel += a->sel[t * m->sel_k + j] >= 0;
    }
    size_t words = (maxl + 63) / 64;
    if (!words || sel * 2 < dense || (uint64_t)m->tokens * words * 8 > ((uint64_t)16 << 20))
        return;
    uint64_t *bm = eng_jscratch(a->e, J_IDX1, m->tokens * words * 8);
    if (!bm)
        return;
    memset(bm, 0, m->tokens * words * 8);
    for (size_t t = 0; t < m->tokens; t++) {
        uint64_t *b = bm + t * words;
        for (size_t j = 0; j < m->sel_k; j++) {
            int32_t s = a->sel[t * m->sel_k + j];
            if (s < 0)
                continue;
            uint64_t bit = (uint64_t)1 << (s % 64);
            if (b[s / 64] & bit)
                return; /* a key listed twice */
            b[s / 64] |= bit;
        }
    }
    a->bm = bm;
    a->bm_words = words;
    *max_total = maxl;
}

/*
 * Each token's selected keys in ascending order, -1 pads last (DSA_INDEX
 * writes them by score): the gathers then walk the cache forwards, which
 * the hardware prefetcher follows (GLM-5.1 decode at depth 2048 reads 2048
 * latent rows per layer, mostly not in cache). A token's list with a key
 * twice keeps its order. The sums run in key order, on every path.
 */
static void sort_selection(struct tx8_engine *e, const struct tx8_cmd_attention *m, int32_t *sel)
{
    size_t words = ((size_t)m->kv_len + 63) / 64;
    uint64_t *bm = eng_jscratch(e, J_IDX2, words * 8 + 8);
    if (!bm)
        return;
    for (size_t t = 0; t < m->tokens; t++) {
        int32_t *row = sel + t * m->sel_k;
        memset(bm, 0, words * 8);
        size_t n = 0;
        int dup = 0;
        for (size_t j = 0; j < m->sel_k; j++) {
            int32_t s = row[j];
            if (s < 0)
                continue;
            uint64_t bit = (uint64_t)1 << (s % 64);
            if (bm[s / 64] & bit) {
                dup = 1;
                break;
            }
            bm[s / 64] |= bit;
            n++;
        }
        if (dup)
            continue;
        size_t o = 0;
        for (size_t w = 0; w < words && o < n; w++)
            for (uint64_t b = bm[w]; b; b &= b - 1)
                row[o++] = (int32_t)(w * 64 + (size_t)__builtin_ctzll(b));
        for (; o < m->sel_k; o++)
            row[o] = -1;
    }
}

/* keys per range at least (a split below this costs more than it saves) */
#define SPLIT_MIN_KEYS 256
/* MACs below which the tile path does not split a tile's heads */
#define ATTN_SPLIT_MIN_MACS (1u << 20)
/* rows (tokens x heads) of one query tile of the per-token path */
#define ATTN_ROWS_GENERIC 16

/* bit s of token t's row of a 1.10 key bitmap */
static inline int mask_bit(const uint64_t *mask, size_t ld, size_t t, size_t s)
{
    return (int)((mask[t * ld + s / 64] >> (s % 64)) & 1);
}

/*
 * The command's key bitmap without a selection: a copy clipped to each
 * token's causal keys (the tile path's bitmap masks only by its bits),
 * applied on every path. The pairs are the causal ones: the tile path
 * computes the masked keys of its causal tiles too.
 */
static int attn_mask_bitmap(struct attn_ctx *a, const uint64_t *mask, size_t *max_total)
{
    const struct tx8_cmd_attention *m = a->m;
    size_t maxl = causal_keys(m, m->tokens - 1), words = (maxl + 63) / 64;
    uint64_t *bm = eng_jscratch(a->e, J_IDX1, m->tokens * words * 8 + 8);
    if (!bm)
        return TX8_STATUS_DEVICE_ERROR;
    for (size_t t = 0; t < m->tokens; t++) {
        size_t limit = causal_keys(m, t);
        uint64_t *b = bm + t * words;
        memcpy(b, mask + t * m->ld_mask, words * 8);
        for (size_t w = limit / 64; w < words; w++)
            b[w] &= w == limit / 64 ? (((uint64_t)1 << (limit % 64)) - 1) : 0;
    }
    a->bm = bm;
    a->bm_words = words;
    a->umask = 1;
    *max_total = maxl;
    return 0;
}

int eng_exec_attention(struct eng_cmd *c)
{
    struct tx8_cmd_attention mm;
    const struct tx8_cmd_attention *m = &mm;
    eng_cmd_read(c, &mm, sizeof(mm));
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
    a.grp = m->q_heads / m->kv_heads;
    a.block = tx_dtype_is_block(m->kv_dtype);
    a.vdt = (m->hdr.flags & TX8_ATTN_F_V_DTYPE) ? m->v_dtype : m->kv_dtype;
    a.shared = m->k == m->v && a.vdt == m->kv_dtype && m->ld_k_head == m->ld_v_head &&
               m->v_dim <= m->qk_dim;
    a.bf = !!(m->hdr.flags & TX8_ATTN_F_BF16);

    uint64_t pairs = 0; /* (query, key) pairs, for the MAC count */
    size_t max_total = 0;
    /* the tile path; BF16 products by vdpbf16ps where the CPU has it and
     * the engine prefers it (e->attn_bf16_dp), else by the f32 tile on the
     * rounded operands, as the per-token path computes them */
    int can_fast = e->k->isa == TX8_ISA_AVX512 && !attn_tile_off(e);
    a.bf_dp = a.bf && e->attn_bf16_dp;
    if (m->sel) {
        size_t n = (size_t)m->tokens * m->sel_k;
        int32_t *sel = eng_jscratch(e, J_IDS, n * 4);
        if (!sel)
            return TX8_STATUS_DEVICE_ERROR;
        memcpy(sel, eng_ptr(e, m->sel), n * 4);
        const uint64_t *mask = m->mask ? eng_ptr(e, m->mask) : NULL;
        for (size_t t = 0; t < m->tokens; t++) {
            size_t limit = causal_keys(m, t);
            for (size_t j = 0; j < m->sel_k; j++) {
                int32_t s = sel[t * m->sel_k + j];
                if (s < 0)
                    continue;
                if ((uint64_t)s >= limit)
                    return TX8_STATUS_INVALID_CMD;
                if (mask && !mask_bit(mask, m->ld_mask, t, (size_t)s)) {
                    sel[t * m->sel_k + j] = -1; /* the key bitmap hides it */
                    continue;
                }
                pairs++;
            }
        }
        sort_selection(e, m, sel);
        a.sel = sel;
        max_total = m->sel_k;
        if (can_fast)
            attn_sel_bitmap(&a, &max_total);
    } else {
        for (size_t t = 0; t < m->tokens; t++) {
            size_t n = causal_keys(m, t);
            pairs += n;
            if (n > max_total)
                max_total = n;
        }
        if (m->mask && max_total) {
            int st = attn_mask_bitmap(&a, eng_ptr(e, m->mask), &max_total);
            if (st)
                return st;
        }
    }

    size_t items = (size_t)m->tokens * m->kv_heads;
    size_t want = (size_t)e->cores * 2;
    a.nsplit = 1;
    a.nks = 1;
    if (items < want && max_total >= 2 * SPLIT_MIN_KEYS) {
        /* few (token, kv head) pairs over many keys (decode): split the
         * keys, so each key row is read and converted once */
        a.nks = (want + items - 1) / items;
        if (a.nks > max_total / SPLIT_MIN_KEYS)
            a.nks = max_total / SPLIT_MIN_KEYS;
        a.part = eng_jscratch(e, J_OUT, items * a.nks * a.grp * (m->v_dim + 2) * 4);
        if (!a.part)
            return TX8_STATUS_DEVICE_ERROR;
    } else if (items < want) {
        a.nsplit = (want + items - 1) / items;
        if (a.nsplit > a.grp)
            a.nsplit = a.grp;
    }
    a.hsub = (a.grp + a.nsplit - 1) / a.nsplit;
    /* the tile path wants rows: a tile of fewer than 8 (GQA decode: one
     * token's group of 4) wastes most of each 16-row vector, and the
     * per-token path's tiles read F16/BF16 keys straight from the cache */
    a.fast = can_fast && (size_t)m->tokens * a.grp >= 8;
    /* the decode kernel (attn_decode_avx512.c): its cache types and head
     * dims; BF16 products over a BF16 cache (it rounds only the query and
     * p, the cache's elements are BF16 already) */
    int dec_ok = e->k->isa == TX8_ISA_AVX512 && attn_decode_type(m->kv_dtype) &&
                 attn_decode_type(a.vdt) && m->qk_dim % 16 == 0 && m->v_dim % 16 == 0 &&
                 (!a.bf || (m->kv_dtype == TX8_DTYPE_BF16 && a.vdt == TX8_DTYPE_BF16)) &&
                 !attn_decode_off(e);
    if (dec_ok && m->tokens == 1 && (!m->sel || a.bm)) {
        /* one token (decode), any group (MLA's 16 heads over the latent
         * too: faster than the query tile there), no selection or one
         * kept as a bitmap */
        a.dec = 1;
        a.fast = 0;
    } else {
        /* one token's rows off the tile path (GQA decode) */
        a.dec = dec_ok && !a.fast && !m->sel && !a.shared;
        if (!a.fast && !a.umask) /* a selection's bitmap: the list serves */
            a.bm = NULL;
    }
    if (a.fast && a.nks > 1 && a.grp > ATTN_TILE_ROWS) {
        a.fast = 0; /* a split item holds the whole group */
        if (!a.umask)
            a.bm = NULL;
    }
    if (a.fast && a.nks == 1) {
        /* query tiles of up to ATTN_TILE_ROWS rows (tokens x heads; one
         * token with a selection: its own key list), enough of them for
         * the cores, heads split where one token is all there is */
        a.nsplit = (a.grp + ATTN_TILE_ROWS - 1) / ATTN_TILE_ROWS;
        a.hsub = (a.grp + a.nsplit - 1) / a.nsplit;
        a.tq = m->sel && !a.bm ? 1 : ATTN_TILE_ROWS / a.hsub;
        if (a.tq < 1)
            a.tq = 1;
        while (a.tq > 1 && ((m->tokens + a.tq - 1) / a.tq) * m->kv_heads * a.nsplit < want)
            a.tq /= 2;
        a.ntiles = (m->tokens + a.tq - 1) / a.tq;
        /* a small command (decode at a short context) stays one item per
         * tile: splitting the heads of a few keys costs more than it saves,
         * and a helper that joins late holds it up; each row's arithmetic
         * is the same however the heads are split */
        uint64_t work = pairs * m->q_heads * ((uint64_t)m->qk_dim + m->v_dim);
        if (a.ntiles * m->kv_heads * a.nsplit < want && a.grp > 1 && work >= ATTN_SPLIT_MIN_MACS) {
            size_t ns = (want + a.ntiles * m->kv_heads - 1) / (a.ntiles * m->kv_heads);
            if (ns > a.grp)
                ns = a.grp;
            if (ns > a.nsplit) {
                a.nsplit = ns;
                a.hsub = (a.grp + a.nsplit - 1) / a.nsplit;
            }
        }
        eng_parallel(e, a.ntiles * m->kv_heads * a.nsplit, 1, attn_fn, &a);
    } else if (a.nks > 1) {
        eng_parallel(e, items * a.nks, 1, attn_fn, &a);
        eng_parallel(e, items * a.grp, 1, attn_merge_fn, &a);
    } else {
        /* query tiles of up to ATTN_ROWS_GENERIC rows: the tokens of a
         * head (MHA, MLA's expanded form) or of a small group share each
         * key chunk; one token at a time with a selection (its own keys) */
        a.tq = m->sel ? 1 : ATTN_ROWS_GENERIC / a.hsub;
        if (a.tq < 1)
            a.tq = 1;
        while (a.tq > 1 && ((m->tokens + a.tq - 1) / a.tq) * m->kv_heads * a.nsplit < want)
            a.tq /= 2;
        a.ntiles = (m->tokens + a.tq - 1) / a.tq;
        eng_parallel(e, a.ntiles * m->kv_heads * a.nsplit, 1, attn_fn, &a);
    }

    c->macs = pairs * m->q_heads * ((uint64_t)m->qk_dim + m->v_dim);
    c->mac_dtype = a.bf ? TX8_DTYPE_BF16 : a.block ? TX8_DTYPE_F32 : m->kv_dtype;
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

size_t eng_topk(const struct eng_kernels *kn, const float *scores, size_t n, size_t k,
                struct eng_cand *heap)
{
    if (!k)
        return 0;
    size_t m = n < k ? n : k;
    for (size_t i = 0; i < m; i++) {
        heap[i].s = isnan(scores[i]) ? -INFINITY : scores[i];
        heap[i].i = (int32_t)i;
    }
    if (m == k)
        for (size_t j = k / 2; j-- > 0;)
            sift_down(heap, k, j);
    /* the heap is full: a later score enters only if it is better than the
     * root, and since it comes after every kept index that means strictly
     * higher (NaN, as -inf, never), so a first_gt_f32 kernel may skip the
     * others */
    for (size_t i = m; i < n; i++) {
        if (kn && kn->first_gt_f32) {
            i += kn->first_gt_f32(scores + i, n - i, heap[0].s);
            if (i >= n)
                break;
        }
        struct eng_cand cd = {isnan(scores[i]) ? -INFINITY : scores[i], (int32_t)i};
        if (better(cd, heap[0])) {
            heap[0] = cd;
            sift_down(heap, k, 0);
        }
    }
    sort_cands(heap, m);
    return m;
}

/*
 * The indexer's top-k by a stable LSD radix sort (four 8-bit passes) of the
 * scores mapped to unsigned keys in descending score order (NaN as -inf,
 * -0 as +0), the index order kept within equal keys: the same result and
 * order as eng_topk's "higher score, then lower index", in O(n) instead of
 * a heap of k (top_k is 2048 here, n rarely much larger). buf: 2n words.
 */
static inline uint32_t dsa_rank_key(float f)
{
    if (isnan(f))
        f = -INFINITY;
    if (f == 0)
        f = 0.0f;
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending with the score */
    return ~u;
}

static size_t dsa_topk(const float *sc, size_t n, size_t k, struct eng_cand *out, uint64_t *buf)
{
    uint64_t *a = buf, *b = buf + n;
    for (size_t i = 0; i < n; i++)
        a[i] = ((uint64_t)dsa_rank_key(sc[i]) << 32) | (uint32_t)i;
    for (unsigned pass = 0; pass < 4; pass++) {
        unsigned sh = 32 + 8 * pass;
        size_t cnt[256] = {0};
        for (size_t i = 0; i < n; i++)
            cnt[(a[i] >> sh) & 255]++;
        if (cnt[(a[0] >> sh) & 255] == n)
            continue; /* one byte value: nothing to move */
        size_t pos = 0;
        for (unsigned v = 0; v < 256; v++) {
            size_t c = cnt[v];
            cnt[v] = pos;
            pos += c;
        }
        for (size_t i = 0; i < n; i++)
            b[cnt[(a[i] >> sh) & 255]++] = a[i];
        uint64_t *t = a;
        a = b;
        b = t;
    }
    size_t m = n < k ? n : k;
    for (size_t j = 0; j < m; j++) {
        int32_t i = (int32_t)(uint32_t)a[j];
        float v = sc[i];
        out[j].s = isnan(v) ? -INFINITY : v;
        out[j].i = i;
    }
    return m;
}

/* top-k with the worker's radix scratch (W_C) */
static size_t dsa_topk_w(const float *sc, size_t n, size_t k, struct eng_cand *out,
                         struct eng_worker *wk)
{
    uint64_t *buf = n ? eng_wscratch(wk, W_C, n * 16 + 64) : NULL;
    if (!buf)
        return n ? eng_topk(NULL, sc, n, k, out) : 0;
    return dsa_topk(sc, n, k, out, buf);
}

/* TX8_DSA_TILE=0: DSA_INDEX's per-token scoring on every ISA (A/B checks) */
static int dsa_tile_off(const struct tx8_engine *e)
{
    return e->set.dsa_tile == 0;
}

struct dsa_ctx {
    struct tx8_engine *e;
    const struct tx8_cmd_dsa_index *m;
    const float *q, *k, *w;
    const uint8_t *kq; /* TX8_DSA_F_KEY_Q8_0: the Q8_0 key cache, else NULL */
    int8_t *q8;        /* TX8_DSA_F_QUERY_Q8: the quantised queries, else NULL */
    float *q8d;        /* and their block scales */
    int32_t *sel;
    const uint64_t *mask; /* 1.10: the key bitmap, or NULL */
    float *scores; /* [tb][nkeys] */
    size_t nkeys, t0, nchunks;
    /* the AVX-512 tile scoring: tokens per tile, key ranges, its args */
    size_t ttb, nranges, blk_nt;
    int fast;
    struct eng_dsa_tile tile;
};

#define DSA_KCHUNK 256
#define DSA_RANGE 512 /* keys per tile-scoring item */

/* TX8_DSA_F_QUERY_Q8: each 32-element block of a query row to 8 bits
 * (tx8_hw.h): dq = amax / 127, qi = rne(q x 127 / amax) in [-127, 127];
 * amax 0 or a NaN element gives 0 */
static void dsa_quant_fn(void *p, size_t b, size_t end, struct eng_worker *wk)
{
    (void)wk;
    struct dsa_ctx *d = p;
    const struct tx8_cmd_dsa_index *m = d->m;
    size_t nb = m->dim / TX8_KV_BLOCK;
    for (size_t row = b; row < end; row++) { /* (token, head) */
        const float *q = d->q + row * m->ld_q_head;
        int8_t *o = d->q8 + row * m->dim;
        for (size_t blk = 0; blk < nb; blk++) {
            const float *x = q + blk * TX8_KV_BLOCK;
            float amax = 0;
            int nan = 0;
            for (unsigned i = 0; i < TX8_KV_BLOCK; i++) {
                float a = fabsf(x[i]);
                nan |= isnan(a);
                amax = a > amax ? a : amax;
            }
            if (nan || !(amax > 0)) {
                memset(o + blk * TX8_KV_BLOCK, 0, TX8_KV_BLOCK);
                d->q8d[row * nb + blk] = 0;
                continue;
            }
            float id = 127.0f / amax;
            for (unsigned i = 0; i < TX8_KV_BLOCK; i++) {
                float v = nearbyintf(x[i] * id);
                v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
                o[blk * TX8_KV_BLOCK + i] = (int8_t)v;
            }
            d->q8d[row * nb + blk] = amax / 127.0f;
        }
    }
}

/* TX8_DSA_F_QUERY_Q8, the per-token path: q . k[s] of tx8_hw.h's definition
 * (integer block sums, fma over the blocks) */
static float dsa_q8_dot(const int8_t *q, const float *qd, const uint8_t *kr, size_t nb)
{
    float dot = 0;
    for (size_t blk = 0; blk < nb; blk++, kr += 34) {
        uint16_t hs;
        memcpy(&hs, kr, 2);
        const int8_t *kb = (const int8_t *)(const void *)(kr + 2);
        int32_t n = 0;
        for (unsigned i = 0; i < TX8_KV_BLOCK; i++)
            n += (int32_t)q[blk * TX8_KV_BLOCK + i] * kb[i];
        dot = fmaf((float)n, qd[blk] * tx_f16_to_f32(hs), dot);
    }
    return dot;
}

static void dsa_score_q8(const struct dsa_ctx *d, size_t t, size_t s0, size_t s1, float *out)
{
    const struct tx8_cmd_dsa_index *m = d->m;
    size_t H = m->heads, nb = m->dim / TX8_KV_BLOCK;
    size_t rb = tx_dtype_row_bytes(TX8_DTYPE_Q8_0, m->ld_k);
    const float *wt = d->w + t * H;
    for (size_t s = s0; s < s1; s++) {
        float acc = 0;
        for (size_t h = 0; h < H; h++) {
            float dot = dsa_q8_dot(d->q8 + (t * H + h) * m->dim, d->q8d + (t * H + h) * nb,
                                   d->kq + s * rb, nb);
            acc += (dot > 0 ? dot : 0.0f) * wt[h];
        }
        out[s] = acc;
    }
}

static void dsa_tile_fn(void *p, size_t b, size_t end, struct eng_worker *wk)
{
    struct dsa_ctx *d = p;
    const struct tx8_cmd_dsa_index *m = d->m;
    for (size_t it = b; it < end; it++) {
        if (eng_aborted(d->e))
            return;
        size_t blk = it / d->nranges, rg = it % d->nranges;
        size_t t0 = d->t0 + blk * d->ttb, tend = t0 + d->ttb;
        if (tend > d->t0 + d->blk_nt)
            tend = d->t0 + d->blk_nt;
        if (t0 >= tend)
            continue;
        uint64_t limit = (uint64_t)m->q_pos0 + tend; /* the tile's last token sees most */
        if (limit > m->kv_len)
            limit = m->kv_len;
        size_t s0 = rg * DSA_RANGE, s1 = s0 + DSA_RANGE < limit ? s0 + DSA_RANGE : (size_t)limit;
        if (s0 < s1 && d->q8)
            eng_dsa_tile_q8_avx512(&d->tile, t0, tend - t0, s0, s1, wk);
        else if (s0 < s1)
            eng_dsa_tile_avx512(&d->tile, t0, tend - t0, s0, s1, wk);
    }
}

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
        if (d->q8) {
            dsa_score_q8(d, t, s0, s1, out);
            continue;
        }
        size_t n = s1 - s0;
        /* dots[h][s] = q[h] . k[s] for the chunk: a small matrix product */
        float *dots = eng_wscratch(wk, W_TMP2, m->heads * (size_t)DSA_KCHUNK * 4);
        if (!dots)
            return;
        memset(dots, 0, m->heads * (size_t)DSA_KCHUNK * 4);
        /* (no f32 keys with a Q8_0 key cache: d->k is NULL, no offset on it) */
        const float *kbase = d->kq ? NULL : d->k + s0 * (size_t)m->ld_k;
        size_t kld = m->ld_k;
        if (d->kq) { /* the chunk's Q8_0 key rows to f32 once */
            float *kf = eng_wscratch(wk, W_TMP3, (size_t)DSA_KCHUNK * m->dim * 4 + 64);
            if (!kf)
                return;
            for (size_t j = 0; j < n; j++)
                eng_kv_to_f32(k, kf + j * m->dim,
                              d->kq + tx_dtype_row_bytes(TX8_DTYPE_Q8_0, (s0 + j) * m->ld_k),
                              TX8_DTYPE_Q8_0, m->dim);
            kbase = kf;
            kld = m->dim;
        }
        struct mm_tile tile;
        memset(&tile, 0, sizeof(tile));
        tile.w_stride = kld * 4;
        tile.dtype = TX8_DTYPE_F32;
        tile.group = m->dim;
        tile.x_stride = m->ld_q_head;
        tile.k1 = m->dim;
        tile.out_stride = DSA_KCHUNK;
        size_t tt = score_rows_max(k);
        for (size_t h = 0; h < m->heads; h += tt) {
            tile.T = m->heads - h < tt ? (unsigned)(m->heads - h) : (unsigned)tt;
            tile.x = q + h * m->ld_q_head;
            score_keys(k, &tile, (const uint8_t *)kbase, n, dots + h * DSA_KCHUNK);
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
        size_t got = dsa_topk_w(d->scores + tl * d->nkeys, (size_t)limit, m->top_k, heap, wk);
        int32_t *o = d->sel + t * (size_t)m->top_k;
        for (size_t j = 0; j < m->top_k; j++)
            o[j] = j < got ? heap[j].i : -1;
    }
}

/*
 * Parallel top-k for few tokens over many keys (decode): the keys of each
 * token are split into nparts ranges whose top-k run in parallel
 * (cands[token][part][top_k], best first, -1 index when short), then each
 * token merges its parts' candidates. Concatenated in key order, equal
 * scores keep the lower key first, so the result equals one top-k.
 */
struct dsa_part_ctx {
    struct dsa_ctx *d;
    size_t nparts;
    struct eng_cand *cands;
};

static void dsa_part_fn(void *p, size_t b, size_t end, struct eng_worker *wk)
{
    struct dsa_part_ctx *pc = p;
    struct dsa_ctx *d = pc->d;
    const struct tx8_cmd_dsa_index *m = d->m;
    struct eng_cand *heap = eng_wscratch(wk, W_TMP, (size_t)m->top_k * sizeof(struct eng_cand));
    if (!heap)
        return;
    for (size_t it = b; it < end; it++) {
        size_t part = it % pc->nparts, tl = it / pc->nparts, t = d->t0 + tl;
        uint64_t limit = (uint64_t)m->q_pos0 + t + 1;
        if (limit > m->kv_len)
            limit = m->kv_len;
        size_t per = ((size_t)limit + pc->nparts - 1) / pc->nparts;
        size_t k0 = part * per, k1 = k0 + per < (size_t)limit ? k0 + per : (size_t)limit;
        struct eng_cand *out = pc->cands + (tl * pc->nparts + part) * m->top_k;
        size_t got =
            k1 > k0 ? dsa_topk_w(d->scores + tl * d->nkeys + k0, k1 - k0, m->top_k, heap, wk) : 0;
        for (size_t j = 0; j < m->top_k; j++) {
            out[j].s = j < got ? heap[j].s : -INFINITY;
            out[j].i = j < got ? heap[j].i + (int32_t)k0 : -1;
        }
    }
}

static void dsa_merge_fn(void *p, size_t b, size_t end, struct eng_worker *wk)
{
    struct dsa_part_ctx *pc = p;
    struct dsa_ctx *d = pc->d;
    const struct tx8_cmd_dsa_index *m = d->m;
    size_t n = pc->nparts * m->top_k;
    struct eng_cand *heap = eng_wscratch(wk, W_TMP, (size_t)m->top_k * sizeof(struct eng_cand));
    float *sc = eng_wscratch(wk, W_TMP2, n * 4 + 64);
    int32_t *key = eng_wscratch(wk, W_TMP3, n * 4 + 64);
    if (!heap || !sc || !key)
        return;
    for (size_t tl = b; tl < end; tl++) {
        const struct eng_cand *cd = pc->cands + tl * n;
        size_t nv = 0;
        for (size_t j = 0; j < n; j++) /* the real candidates, in key order */
            if (cd[j].i >= 0) {
                sc[nv] = cd[j].s;
                key[nv++] = cd[j].i;
            }
        size_t got = dsa_topk_w(sc, nv, m->top_k, heap, wk);
        int32_t *o = d->sel + (d->t0 + tl) * (size_t)m->top_k;
        for (size_t j = 0; j < m->top_k; j++)
            o[j] = j < got ? key[heap[j].i] : -1;
    }
}

/* 1.10: the scores of the keys the command's bitmap hides to -inf, for the
 * block's tokens (before the top-k) */
static void dsa_mask_fn(void *p, size_t b, size_t end, struct eng_worker *wk)
{
    (void)wk;
    struct dsa_ctx *d = p;
    const struct tx8_cmd_dsa_index *m = d->m;
    for (size_t tl = b; tl < end; tl++) {
        float *sc = d->scores + tl * d->nkeys;
        for (size_t s = 0; s < d->nkeys; s++)
            if (!mask_bit(d->mask, m->ld_mask, d->t0 + tl, s))
                sc[s] = -INFINITY;
    }
}

int eng_exec_dsa_index(struct eng_cmd *c)
{
    struct tx8_cmd_dsa_index mm;
    const struct tx8_cmd_dsa_index *m = &mm;
    eng_cmd_read(c, &mm, sizeof(mm));
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
    if (m->hdr.flags & TX8_DSA_F_KEY_Q8_0)
        d.kq = eng_ptr(e, m->k);
    else
        d.k = eng_ptr(e, m->k);
    d.w = eng_ptr(e, m->w);
    d.mask = m->mask ? eng_ptr(e, m->mask) : NULL;
    d.nkeys = (size_t)keys;
    d.nchunks = (d.nkeys + DSA_KCHUNK - 1) / DSA_KCHUNK;
    if ((m->hdr.flags & TX8_DSA_F_QUERY_Q8) && m->heads) {
        size_t rows = (size_t)m->tokens * m->heads;
        d.q8 = eng_jscratch(e, J_IDX1, rows * m->dim + 64);
        d.q8d = eng_jscratch(e, J_IDX2, rows * (m->dim / TX8_KV_BLOCK) * 4 + 64);
        if (!d.q8 || !d.q8d)
            return TX8_STATUS_DEVICE_ERROR;
        eng_parallel(e, rows, 16, dsa_quant_fn, &d);
    }
    d.fast =
        e->k->isa == TX8_ISA_AVX512 && m->heads && m->heads <= ATTN_TILE_ROWS && !dsa_tile_off(e);
    if (d.fast) {
        d.ttb = ATTN_TILE_ROWS / m->heads;
        d.nranges = (d.nkeys + DSA_RANGE - 1) / DSA_RANGE;
        d.tile.q = d.q;
        d.tile.w = d.w;
        d.tile.k = d.k;
        d.tile.kq = d.kq;
        d.tile.q8 = d.q8;
        d.tile.q8d = d.q8d;
        d.tile.heads = m->heads;
        d.tile.dim = m->dim;
        d.tile.ld_q_head = m->ld_q_head;
        d.tile.ld_k = m->ld_k;
        d.tile.nkeys = d.nkeys;
    }
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
        if (m->heads && d.fast) {
            d.blk_nt = nt;
            d.tile.scores = d.scores;
            d.tile.t0 = t0;
            eng_parallel(e, ((nt + d.ttb - 1) / d.ttb) * d.nranges, 1, dsa_tile_fn, &d);
        } else if (m->heads)
            eng_parallel(e, nt * d.nchunks, 1, dsa_score_fn, &d);
        else
            memset(d.scores, 0, nt * d.nkeys * 4);
        if (d.mask)
            eng_parallel(e, nt, 1, dsa_mask_fn, &d);
        size_t nparts = 1;
        if (nt < (size_t)e->cores && d.nkeys >= (size_t)4 * m->top_k)
            nparts = (size_t)e->cores * 2 / nt;
        struct eng_cand *cands =
            nparts > 1 ? eng_jscratch(e, J_IDX0, nt * nparts * m->top_k * sizeof(struct eng_cand))
                       : NULL;
        if (cands) {
            struct dsa_part_ctx pc = {&d, nparts, cands};
            eng_parallel(e, nt * nparts, 1, dsa_part_fn, &pc);
            eng_parallel(e, nt, 1, dsa_merge_fn, &pc);
        } else {
            eng_parallel(e, nt, 1, dsa_select_fn, &d);
        }
        if (eng_aborted(e))
            return TX8_STATUS_ABORTED;
    }
    for (size_t t = 0; t < m->tokens; t++) {
        uint64_t limit = (uint64_t)m->q_pos0 + t + 1;
        pairs += limit < m->kv_len ? limit : m->kv_len;
        /* a hidden key (-inf, ranked after every visible one) is not selected */
        for (size_t j = 0; d.mask && j < m->top_k; j++) {
            int32_t *o = d.sel + t * (size_t)m->top_k + j;
            if (*o >= 0 && !mask_bit(d.mask, m->ld_mask, t, (size_t)*o))
                *o = -1;
        }
    }
    c->macs = pairs * m->heads * m->dim;
    c->mac_dtype = d.q8 ? TX8_DTYPE_I8 : TX8_DTYPE_F32;
    return 0;
}
