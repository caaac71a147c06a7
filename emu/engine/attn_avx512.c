/* SPDX-License-Identifier: MIT */
/*
 * ATTENTION's AVX-512 query tile (flash-attention style): the tile's rows
 * (tokens x q heads of one kv head) are held transposed, 16 rows per
 * vector, so that every key block is loaded and converted to f32 once for
 * all of them and each key element is one broadcast against up to four
 * row vectors:
 *   S^T[key][row] = sum_d K[key][d] * (scale * Q^T[d][row])
 *   online softmax down the key axis (running max and sum per row lane)
 *   O^T[d][row] += sum_key V[key][d] * P^T[key][row]
 * O^T is transposed back once per tile. Compiled with SIMD_AVX512; reached
 * only from ops_attn.c when the engine's kernels are the AVX-512 set.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn_internal.h"
#include "simd_avx512.h"

#define AI __attribute__((always_inline)) static inline
#define FKC 48 /* keys per block (a multiple of every tile height: 6, 8, 12, 16) */

AI __mmask16 m16(size_t n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* one cache row of n elements (block types: n a multiple of 32) to f32,
 * bit-exact with eng_kv_to_f32 */
static void row_f32(float *dst, const uint8_t *s, unsigned dt, size_t n)
{
    size_t i = 0;
    switch (dt) {
    case TX8_DTYPE_F16:
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(
                                          (const __m256i *)(const void *)(s + i * 2))));
        if (i < n)
            _mm512_mask_storeu_ps(dst + i, m16(n - i),
                                  _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m16(n - i), s + i * 2)));
        return;
    case TX8_DTYPE_BF16:
        for (; i < n; i += 16) {
            __mmask16 m = m16(n - i);
            __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s + i * 2));
            _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
        }
        return;
    case TX8_DTYPE_Q8_0:
        for (size_t b = 0; b < n / TX8_KV_BLOCK; b++, s += 34) {
            uint16_t h;
            memcpy(&h, s, 2);
            __m512 d = _mm512_set1_ps(_cvtsh_ss(h));
            __m512i q0 =
                _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(s + 2)));
            __m512i q1 =
                _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(s + 18)));
            _mm512_storeu_ps(dst + b * 32, _mm512_mul_ps(_mm512_cvtepi32_ps(q0), d));
            _mm512_storeu_ps(dst + b * 32 + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(q1), d));
        }
        return;
    case TX8_DTYPE_Q4_0:
        for (size_t b = 0; b < n / TX8_KV_BLOCK; b++, s += 18) {
            uint16_t h;
            memcpy(&h, s, 2);
            __m512 d = _mm512_set1_ps(_cvtsh_ss(h));
            /* byte i = lo | hi << 4 holds elements 2i and 2i + 1: widen to
             * 16 bits, put hi in the upper byte, read the bytes in order */
            __m256i w =
                _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(s + 2)));
            __m256i lo = _mm256_and_si256(w, _mm256_set1_epi16(15));
            __m256i hi = _mm256_srli_epi16(w, 4);
            __m256i c = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 8));
            __m512i e0 = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(c)),
                                          _mm512_set1_epi32(8));
            __m512i e1 = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(c, 1)),
                                          _mm512_set1_epi32(8));
            _mm512_storeu_ps(dst + b * 32, _mm512_mul_ps(_mm512_cvtepi32_ps(e0), d));
            _mm512_storeu_ps(dst + b * 32 + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(e1), d));
        }
        return;
    default:
        memcpy(dst, s, n * 4);
        return;
    }
}

void eng_kv_row_f32_avx512(float *dst, const void *src, unsigned dt, size_t n)
{
    row_f32(dst, src, dt, n);
}

/*
 * A register tile of JT key rows (or value dims) x RV row vectors:
 * acc[jj][rv] += sum_i a[jj](i) * b[i][rv], where a[jj](i) = ap[jj * as + i * ai]
 * is broadcast and b[i] = bp + i * NP (16 * RV floats). With init, acc
 * starts from c (c[jj * NP + rv * 16]), else from 0; written to c.
 *   S^T: a = K rows (as = row stride, ai = 1), b = Q^T, i over qk dims
 *   PV:  a = V[key][d0 + jj] (as = 1, ai = row stride), b = P^T, i over keys
 */
AI void tile(float *c, size_t NP, const unsigned JT, const unsigned RV, const float *ap, size_t as,
             size_t ai, const float *bp, size_t n, int init)
{
    __m512 acc[16][4];
#pragma GCC unroll 16
    for (unsigned jj = 0; jj < JT; jj++)
#pragma GCC unroll 4
        for (unsigned rv = 0; rv < RV; rv++)
            acc[jj][rv] = init ? _mm512_loadu_ps(c + jj * NP + rv * 16) : _mm512_setzero_ps();
    for (size_t i = 0; i < n; i++) {
        __m512 bv[4];
#pragma GCC unroll 4
        for (unsigned rv = 0; rv < RV; rv++)
            bv[rv] = _mm512_loadu_ps(bp + i * NP + rv * 16);
        const float *a = ap + i * ai;
#pragma GCC unroll 16
        for (unsigned jj = 0; jj < JT; jj++) {
            __m512 x = _mm512_set1_ps(a[jj * as]);
#pragma GCC unroll 4
            for (unsigned rv = 0; rv < RV; rv++)
                acc[jj][rv] = _mm512_fmadd_ps(x, bv[rv], acc[jj][rv]);
        }
    }
#pragma GCC unroll 16
    for (unsigned jj = 0; jj < JT; jj++)
#pragma GCC unroll 4
        for (unsigned rv = 0; rv < RV; rv++)
            _mm512_storeu_ps(c + jj * NP + rv * 16, acc[jj][rv]);
}

/* c[j * NP ..] for j < m: JT-row tiles, then single rows (RV constant) */
#define TILES(RV, JT)                                                                              \
    static void tiles_##RV(float *c, size_t NP, const float *ap, size_t as, size_t ai,             \
                           const float *bp, size_t n, size_t m, int init)                          \
    {                                                                                              \
        size_t j = 0;                                                                              \
        for (; j + JT <= m; j += JT)                                                               \
            tile(c + j * NP, NP, JT, RV, ap + j * as, as, ai, bp, n, init);                        \
        for (; j < m; j++)                                                                         \
            tile(c + j * NP, NP, 1, RV, ap + j * as, as, ai, bp, n, init);                         \
    }
TILES(1, 16)
TILES(2, 12)
TILES(3, 8)
TILES(4, 6)

static void tiles(unsigned RV, float *c, size_t NP, const float *ap, size_t as, size_t ai,
                  const float *bp, size_t n, size_t m, int init)
{
    switch (RV) {
    case 1:
        tiles_1(c, NP, ap, as, ai, bp, n, m, init);
        break;
    case 2:
        tiles_2(c, NP, ap, as, ai, bp, n, m, init);
        break;
    case 3:
        tiles_3(c, NP, ap, as, ai, bp, n, m, init);
        break;
    default:
        tiles_4(c, NP, ap, as, ai, bp, n, m, init);
        break;
    }
}

size_t eng_attn_tile_scratch(const struct tx8_cmd_attention *m)
{
    size_t qk = m->qk_dim, vd = m->v_dim, R = ATTN_TILE_ROWS;
    return (qk * R + vd * R + (size_t)FKC * R + (size_t)FKC * qk + (size_t)FKC * vd + 4 * R + FKC) *
               4 +
           R * 4 * sizeof(__mmask16) + 128;
}

static inline const uint8_t *kv_at(unsigned dt, const uint8_t *base, size_t e)
{
    return base + tx_dtype_row_bytes(dt, e);
}

void eng_attn_tile_avx512(const struct attn_ctx *a, size_t t0, size_t nt, size_t h0, size_t h1,
                          size_t g, size_t j0, size_t j1, float *part, struct eng_worker *w)
{
    const struct tx8_cmd_attention *m = a->m;
    size_t qk = m->qk_dim, vd = m->v_dim, nh = h1 - h0, nr = nt * nh;
    if (!nr || nr > ATTN_TILE_ROWS)
        return;
    unsigned RV = (unsigned)((nr + 15) / 16);
    size_t NP = (size_t)RV * 16;
    uint8_t *raw = eng_wscratch(w, W_TMP, eng_attn_tile_scratch(m));
    if (!raw)
        return;
    float *qt = (float *)(void *)(raw + ((64 - ((uintptr_t)raw & 63)) & 63)); /* [qk][NP] */
    float *ot = qt + qk * NP;                                                 /* [vd][NP] */
    float *st = ot + vd * NP;                                                 /* [FKC][NP] */
    float *kr = st + (size_t)FKC * NP;                                        /* [FKC][qk] */
    float *vr = kr + (size_t)FKC * qk;                                        /* [FKC][vd] */
    float *mx = vr + (size_t)FKC * vd, *ls = mx + NP, *cr = ls + NP;
    int32_t *lim = (int32_t *)(void *)(cr + NP);
    int32_t *keys = lim + NP;

    size_t qrow = (size_t)m->q_heads * m->ld_q_head;
    memset(qt, 0, qk * NP * 4);
    for (size_t r = 0; r < nr; r++) {
        size_t t = t0 + r / nh, h = h0 + r % nh;
        const float *qr = a->q + t * qrow + h * m->ld_q_head;
        for (size_t d = 0; d < qk; d++)
            qt[d * NP + r] = qr[d] * m->scale;
    }
    for (size_t r = 0; r < NP; r++) {
        int32_t lv = 0;
        if (r < nr) {
            uint64_t l = (uint64_t)m->q_pos0 + t0 + r / nh + 1;
            lv = a->sel && !a->bm ? INT32_MAX : (int32_t)(l < m->kv_len ? l : m->kv_len);
        }
        lim[r] = lv;
        mx[r] = -INFINITY;
        ls[r] = 0;
    }
    memset(ot, 0, vd * NP * 4);

    const int32_t *sl = a->sel && !a->bm ? a->sel + t0 * m->sel_k : NULL;
    /* a selection bitmap: the lanes of each token's rows per row vector */
    const uint64_t *bm = a->bm ? a->bm + t0 * a->bm_words : NULL;
    __mmask16 *lanem = (__mmask16 *)(void *)(keys + FKC); /* [nt][RV] */
    if (bm)
        for (size_t tr = 0; tr < nt; tr++)
            for (unsigned rv = 0; rv < RV; rv++) {
                unsigned mk = 0;
                for (unsigned i = 0; i < 16; i++) {
                    size_t r = rv * 16 + i;
                    if (r < nr && r / nh == tr)
                        mk |= 1u << i;
                }
                lanem[tr * RV + rv] = (__mmask16)mk;
            }
    size_t krow = (size_t)m->kv_heads * m->ld_k_head, vrow = (size_t)m->kv_heads * m->ld_v_head;
    int kdirect = !sl && m->kv_dtype == TX8_DTYPE_F32;
    int vdirect = !sl && a->vdt == TX8_DTYPE_F32;
    const __m512 ninf = _mm512_set1_ps(-INFINITY), one = _mm512_set1_ps(1.0f);

    for (size_t c0 = j0; c0 < j1; c0 += FKC) {
        size_t ce = c0 + FKC < j1 ? c0 + FKC : j1, cn = 0;
        if (sl) {
            for (size_t j = c0; j < ce; j++)
                if (sl[j] >= 0)
                    keys[cn++] = sl[j];
        } else {
            cn = ce - c0;
        }
        if (!cn)
            continue;
        const float *kp = kr, *vp = vr;
        size_t kst = qk, vst = vd;
        if (kdirect) {
            kp = (const float *)(const void *)(a->k + (c0 * krow + g * m->ld_k_head) * 4);
            kst = krow;
        } else {
            for (size_t j = 0; j < cn; j++) {
                size_t key = sl ? (size_t)keys[j] : c0 + j;
                row_f32(kr + j * qk, kv_at(m->kv_dtype, a->k, key * krow + g * m->ld_k_head),
                        m->kv_dtype, qk);
            }
        }
        if (a->shared) {
            vp = kp; /* V = the first v_dim dims of the K rows */
            vst = kst;
        } else if (vdirect) {
            vp = (const float *)(const void *)(a->v + (c0 * vrow + g * m->ld_v_head) * 4);
            vst = vrow;
        } else {
            for (size_t j = 0; j < cn; j++) {
                size_t key = sl ? (size_t)keys[j] : c0 + j;
                row_f32(vr + j * vd, kv_at(a->vdt, a->v, key * vrow + g * m->ld_v_head), a->vdt,
                        vd);
            }
        }
        /* S^T = K (scale Q)^T */
        tiles(RV, st, NP, kp, kst, 1, qt, qk, cn, 0);
        /* online softmax down the keys, 16 rows per vector */
        __mmask16 anycorr = 0;
        for (unsigned rv = 0; rv < RV; rv++) {
            __m512 mo = _mm512_loadu_ps(mx + rv * 16), cm = mo;
            __m512i lv = _mm512_loadu_si512(lim + rv * 16);
            for (size_t j = 0; j < cn; j++) {
                float *sp = st + j * NP + rv * 16;
                __m512 s = _mm512_loadu_ps(sp);
                if (bm) { /* selected: the key's bit in each row's token */
                    size_t key = c0 + j;
                    __mmask16 vis = 0;
                    for (size_t tr = 0; tr < nt; tr++)
                        if ((bm[tr * a->bm_words + key / 64] >> (key % 64)) & 1)
                            vis |= lanem[tr * RV + rv];
                    s = _mm512_mask_mov_ps(ninf, vis, s);
                    _mm512_storeu_ps(sp, s);
                } else if (!sl) { /* causal: key c0 + j visible to rows with lim > it */
                    __mmask16 vis = _mm512_cmpgt_epi32_mask(lv, _mm512_set1_epi32((int)(c0 + j)));
                    s = _mm512_mask_mov_ps(ninf, vis, s);
                    _mm512_storeu_ps(sp, s);
                }
                cm = _mm512_max_ps(cm, s);
            }
            __mmask16 ok = _mm512_cmp_ps_mask(cm, ninf, _CMP_NEQ_OQ);
            __m512 corr = _mm512_mask_mov_ps(one, ok, eng_exp512(_mm512_sub_ps(mo, cm)));
            __m512 sum = _mm512_setzero_ps();
            for (size_t j = 0; j < cn; j++) {
                float *sp = st + j * NP + rv * 16;
                __m512 p = _mm512_maskz_mov_ps(ok, eng_exp512(_mm512_sub_ps(_mm512_loadu_ps(sp), cm)));
                _mm512_storeu_ps(sp, p);
                sum = _mm512_add_ps(sum, p);
            }
            _mm512_storeu_ps(ls + rv * 16,
                             _mm512_fmadd_ps(_mm512_loadu_ps(ls + rv * 16), corr, sum));
            _mm512_storeu_ps(mx + rv * 16, _mm512_mask_mov_ps(mo, ok, cm));
            _mm512_storeu_ps(cr + rv * 16, corr);
            anycorr |= _mm512_cmp_ps_mask(corr, one, _CMP_NEQ_UQ);
        }
        if (anycorr)
            for (size_t d = 0; d < vd; d++)
                for (unsigned rv = 0; rv < RV; rv++) {
                    float *op = ot + d * NP + rv * 16;
                    _mm512_storeu_ps(
                        op, _mm512_mul_ps(_mm512_loadu_ps(op), _mm512_loadu_ps(cr + rv * 16)));
                }
        /* O^T += V^T P^T */
        tiles(RV, ot, NP, vp, 1, vst, st, cn, vd, 1);
    }

    if (part) { /* rows = the group's heads: (o, max, sum) for the merge */
        for (size_t r = 0; r < nr; r++) {
            for (size_t d = 0; d < vd; d++)
                part[r * vd + d] = ot[d * NP + r];
            part[nr * vd + r] = mx[r];
            part[nr * vd + nr + r] = ls[r];
        }
        return;
    }
    size_t orow = (size_t)m->q_heads * m->ld_o_head;
    for (size_t r = 0; r < nr; r++) {
        size_t t = t0 + r / nh, h = h0 + r % nh;
        float *dst = a->out + t * orow + h * m->ld_o_head;
        float inv = ls[r] > 0 ? 1.0f / ls[r] : 0.0f;
        for (size_t d = 0; d < vd; d++)
            dst[d] = ot[d * NP + r] * inv;
    }
}

/* ---- DSA_INDEX scores ------------------------------------------------------ */

size_t eng_dsa_tile_scratch(size_t dim)
{
    size_t R = ATTN_TILE_ROWS;
    return (dim * R + (size_t)FKC * R + (size_t)FKC * dim + 2 * R) * 4 + 128;
}

/*
 * The indexer's scores of tokens [t0, t0 + nt) (nt * heads <= ATTN_TILE_ROWS)
 * for keys [s0, s1): scores[tl][s] = sum over h (in order) of
 * w[t][h] * relu(q[t][h] . k[s]), the same sum as the per-token path, with
 * the dot products as S^T tiles (keys broadcast against the transposed
 * query rows) over each key block converted once for the tile.
 */
void eng_dsa_tile_avx512(const struct eng_dsa_tile *d, size_t t0, size_t nt, size_t s0, size_t s1,
                         struct eng_worker *w)
{
    size_t H = d->heads, dim = d->dim, nr = nt * H;
    if (!nr || nr > ATTN_TILE_ROWS)
        return;
    unsigned RV = (unsigned)((nr + 15) / 16);
    size_t NP = (size_t)RV * 16;
    uint8_t *raw = eng_wscratch(w, W_TMP2, eng_dsa_tile_scratch(dim));
    if (!raw)
        return;
    float *qt = (float *)(void *)(raw + ((64 - ((uintptr_t)raw & 63)) & 63)); /* [dim][NP] */
    float *st = qt + dim * NP;                                                /* [FKC][NP] */
    float *kf = st + (size_t)FKC * NP;                                        /* [FKC][dim] */
    float *wv = kf + (size_t)FKC * dim;                                       /* [NP] */
    float *tmp = wv + NP;                                                     /* [NP] */
    memset(qt, 0, dim * NP * 4);
    for (size_t r = 0; r < NP; r++)
        wv[r] = 0;
    for (size_t r = 0; r < nr; r++) {
        size_t t = t0 + r / H, h = r % H;
        const float *qr = d->q + t * H * d->ld_q_head + h * d->ld_q_head;
        for (size_t i = 0; i < dim; i++)
            qt[i * NP + r] = qr[i];
        wv[r] = d->w[t * H + h];
    }
    const __m512 zero = _mm512_setzero_ps();
    for (size_t c0 = s0; c0 < s1; c0 += FKC) {
        size_t cn = s1 - c0 < FKC ? s1 - c0 : FKC;
        const float *kp;
        if (d->kq) {
            for (size_t j = 0; j < cn; j++)
                row_f32(kf + j * dim,
                        d->kq + tx_dtype_row_bytes(TX8_DTYPE_Q8_0, (c0 + j) * d->ld_k),
                        TX8_DTYPE_Q8_0, dim);
            kp = kf;
            tiles(RV, st, NP, kp, dim, 1, qt, dim, cn, 0);
        } else {
            kp = d->k + c0 * d->ld_k;
            tiles(RV, st, NP, kp, d->ld_k, 1, qt, dim, cn, 0);
        }
        for (size_t j = 0; j < cn; j++) {
            for (unsigned rv = 0; rv < RV; rv++) {
                __m512 s = _mm512_loadu_ps(st + j * NP + rv * 16);
                /* relu(s) * w: max(s, 0) keeps 0 for NaN, as "s > 0" does */
                _mm512_storeu_ps(tmp + rv * 16, _mm512_mul_ps(_mm512_max_ps(s, zero),
                                                              _mm512_loadu_ps(wv + rv * 16)));
            }
            for (size_t tl = 0; tl < nt; tl++) {
                float acc = 0;
                for (size_t h = 0; h < H; h++)
                    acc += tmp[tl * H + h];
                d->scores[(t0 - d->t0 + tl) * d->nkeys + c0 + j] = acc;
            }
        }
    }
}
