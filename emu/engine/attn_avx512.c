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

#include "attn_tile.h"

#define AI ATTN_AI

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
            _mm512_mask_storeu_ps(
                dst + i, attn_m16(n - i),
                _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(attn_m16(n - i), s + i * 2)));
        return;
    case TX8_DTYPE_BF16:
        for (; i < n; i += 16) {
            __mmask16 m = attn_m16(n - i);
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

void eng_bf16_round_avx512(float *x, size_t n)
{
    const __m512i exp = _mm512_set1_epi32(0x7f800000), abs = _mm512_set1_epi32(0x7fffffff),
                  one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff),
                  hi = _mm512_set1_epi32((int)0xffff0000u),
                  sign = _mm512_set1_epi32((int)0x80000000u), quiet = _mm512_set1_epi32(0x00400000);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = attn_m16(n - i);
        __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i));
        /* as eng_bf16_bits: nearest even; NaN quiet; zero and denormals to signed zero */
        __m512i r = _mm512_add_epi32(
            u, _mm512_add_epi32(half, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), exp);
        __mmask16 tiny = _mm512_testn_epi32_mask(u, exp);
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, quiet));
        r = _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(u, sign));
        _mm512_mask_storeu_ps(x + i, m, _mm512_castsi512_ps(_mm512_and_si512(r, hi)));
    }
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
    attn_acc_load(acc, c, NP, JT, RV, init);
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
    attn_acc_store(acc, c, NP, JT, RV);
}

static void tiles(unsigned RV, float *c, size_t NP, const float *ap, size_t as, size_t ai,
                  const float *bp, size_t n, size_t m, int init)
{
    ATTN_TILES(tile, RV, c, NP, ap, as, ai, bp, n, m, init);
}

size_t eng_attn_tile_scratch(const struct tx8_cmd_attention *m)
{
    size_t qk = m->qk_dim, vd = m->v_dim, R = ATTN_TILE_ROWS;
    size_t f32 = (qk * R + vd * R + (size_t)FKC * R + (size_t)FKC * qk + (size_t)FKC * vd) * 4;
    size_t bf = eng_attn_tile_bf16_bytes(m);
    return (f32 > bf ? f32 : bf) + ATTN_TILE_STATE_BYTES + 128;
}

void eng_attn_tile_avx512(const struct attn_ctx *a, size_t t0, size_t nt, size_t h0, size_t h1,
                          size_t g, size_t j0, size_t j1, float *part, struct eng_worker *w)
{
    const struct tx8_cmd_attention *m = a->m;
    size_t qk = m->qk_dim, vd = m->v_dim, nh = h1 - h0, nr = nt * nh;
    if (!nr || nr > ATTN_TILE_ROWS)
        return;
    if (a->bf_dp) {
        eng_attn_tile_bf16(a, t0, nt, h0, h1, g, j0, j1, part, w);
        return;
    }
    /* BF16 products without vdpbf16ps: the rounded operands' products are
     * exact in f32, so the f32 tile on bf16(scale q), the K and V rows
     * rounded (a BF16 cache's already are) and bf16(p) computes them; the
     * softmax sum is of the f32 p, as in the BF16 tile */
    int bf = a->bf;
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
    struct attn_tile ts;
    attn_tile_init(&ts, a, t0, nt, h0, h1, vr + (size_t)FKC * vd);

    size_t qrow = (size_t)m->q_heads * m->ld_q_head;
    memset(qt, 0, qk * NP * 4);
    for (size_t r = 0; r < nr; r++) {
        size_t t = t0 + r / nh, h = h0 + r % nh;
        const float *qr = a->q + t * qrow + h * m->ld_q_head;
        for (size_t d = 0; d < qk; d++)
            qt[d * NP + r] = qr[d] * m->scale;
    }
    if (bf)
        eng_bf16_round_avx512(qt, qk * NP);
    memset(ot, 0, vd * NP * 4);

    size_t krow = (size_t)m->kv_heads * m->ld_k_head, vrow = (size_t)m->kv_heads * m->ld_v_head;
    int kdirect = !ts.sl && m->kv_dtype == TX8_DTYPE_F32 && !bf;
    int vdirect = !ts.sl && a->vdt == TX8_DTYPE_F32 && !bf;
    int kround = bf && m->kv_dtype != TX8_DTYPE_BF16, vround = bf && a->vdt != TX8_DTYPE_BF16;

    for (size_t c0 = j0; c0 < j1; c0 += FKC) {
        size_t cn = attn_tile_block(&ts, c0, c0 + FKC < j1 ? c0 + FKC : j1);
        if (!cn)
            continue;
        const float *kp = kr, *vp = vr;
        size_t kst = qk, vst = vd;
        if (kdirect) {
            kp = (const float *)(const void *)(a->k + (c0 * krow + g * m->ld_k_head) * 4);
            kst = krow;
        } else {
            for (size_t j = 0; j < cn; j++)
                row_f32(
                    kr + j * qk,
                    kv_at(m->kv_dtype, a->k, attn_tile_key(&ts, c0, j) * krow + g * m->ld_k_head),
                    m->kv_dtype, qk);
            if (kround)
                eng_bf16_round_avx512(kr, cn * qk);
        }
        if (a->shared) {
            vp = kp; /* V = the first v_dim dims of the K rows */
            vst = kst;
        } else if (vdirect) {
            vp = (const float *)(const void *)(a->v + (c0 * vrow + g * m->ld_v_head) * 4);
            vst = vrow;
        } else {
            for (size_t j = 0; j < cn; j++)
                row_f32(vr + j * vd,
                        kv_at(a->vdt, a->v, attn_tile_key(&ts, c0, j) * vrow + g * m->ld_v_head),
                        a->vdt, vd);
            if (vround)
                eng_bf16_round_avx512(vr, cn * vd);
        }
        /* S^T = K (scale Q)^T */
        tiles(RV, st, NP, kp, kst, 1, qt, qk, cn, 0);
        if (attn_tile_softmax(&ts, st, c0, cn))
            attn_tile_rescale(&ts, ot, vd);
        if (bf)
            eng_bf16_round_avx512(st, cn * NP);
        /* O^T += V^T P^T */
        tiles(RV, ot, NP, vp, 1, vst, st, cn, vd, 1);
    }
    attn_tile_finish(&ts, ot, vd, part);
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

/* ---- DSA_INDEX scores with 8-bit products (TX8_DSA_F_QUERY_Q8) ------------ */

/* the scratch bytes eng_dsa_tile_q8_avx512 takes from W_TMP2 */
static size_t dsa_q8_scratch(size_t dim)
{
    size_t R = ATTN_TILE_ROWS;
    return (dim / 4 * R + dim / TX8_KV_BLOCK * R + (size_t)FKC * R + R) * 4 + 128;
}

/* st [cn][NP] (the rows' dot products of keys c0..) to the scores of tokens
 * [t0, t0 + nt): per 16 keys (one per lane, the rows gathered) the sum over
 * the heads in order, from 0, of relu(s) * w -- per key the operations of a
 * scalar loop over the heads */
static void dsa_head_sums(const struct eng_dsa_tile *d, const float *st, const float *wv,
                          size_t NP, size_t t0, size_t nt, size_t c0, size_t cn)
{
    const __m512 zero = _mm512_setzero_ps();
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    size_t H = d->heads;
    for (size_t j0 = 0; j0 < cn; j0 += 16) {
        __mmask16 km = attn_m16(cn - j0);
        __m512i idx = _mm512_mullo_epi32(_mm512_add_epi32(_mm512_set1_epi32((int)j0), lane),
                                         _mm512_set1_epi32((int)NP));
        for (size_t tl = 0; tl < nt; tl++) {
            __m512 acc = zero;
            for (size_t h = 0; h < H; h++) {
                size_t r = tl * H + h;
                __m512 sv = _mm512_mask_i32gather_ps(zero, km, idx, st + r, 4);
                /* relu: vmaxps gives its second operand (+0) for NaN and -0 */
                acc = _mm512_add_ps(acc,
                                    _mm512_mul_ps(_mm512_max_ps(sv, zero), _mm512_set1_ps(wv[r])));
            }
            _mm512_mask_storeu_ps(d->scores + (t0 - d->t0 + tl) * d->nkeys + c0 + j0, km, acc);
        }
    }
}

/* one key row's dot products with the tile's RV row vectors: per 32-element
 * block, vpdpbusd of the queries + 128 (unsigned, transposed 4 bytes per
 * row: qt[dim / 4][NP]) with the key's bytes (signed, broadcast), less 128 x
 * the block's key sum (vpsadbw), times dq (qdt[block][NP]) x dk, fma'd */
ATTN_AI void dsa_q8_key(__m512 *out, const uint8_t *kr, const uint32_t *qt, const float *qdt,
                        size_t NP, size_t nb, const unsigned RV)
{
    __m512 acc[4];
#pragma GCC unroll 4
    for (unsigned rv = 0; rv < RV; rv++)
        acc[rv] = _mm512_setzero_ps();
    const __m256i x80 = _mm256_set1_epi8((char)0x80);
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = kr + b * 34;
        uint16_t hs;
        memcpy(&hs, blk, 2);
        __m256i kb = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));
        __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(kb, x80), _mm256_setzero_si256());
        __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
        int ksum = (int)(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 128 * 32;
        __m512i corr = _mm512_set1_epi32(128 * ksum);
        __m512i ia[4];
#pragma GCC unroll 4
        for (unsigned rv = 0; rv < RV; rv++)
            ia[rv] = _mm512_setzero_si512();
        const uint32_t *qb = qt + b * 8 * NP;
#pragma GCC unroll 8
        for (unsigned g = 0; g < 8; g++) {
            uint32_t kd;
            memcpy(&kd, blk + 2 + 4 * g, 4);
            __m512i kv = _mm512_set1_epi32((int)kd);
#pragma GCC unroll 4
            for (unsigned rv = 0; rv < RV; rv++)
                ia[rv] = _mm512_dpbusd_epi32(
                    ia[rv], _mm512_loadu_si512((const void *)(qb + g * NP + rv * 16)), kv);
        }
        __m512 dk = _mm512_set1_ps(_cvtsh_ss(hs));
#pragma GCC unroll 4
        for (unsigned rv = 0; rv < RV; rv++)
            acc[rv] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(ia[rv], corr)),
                                      _mm512_mul_ps(_mm512_loadu_ps(qdt + b * NP + rv * 16), dk),
                                      acc[rv]);
    }
#pragma GCC unroll 4
    for (unsigned rv = 0; rv < RV; rv++)
        out[rv] = acc[rv];
}

void eng_dsa_tile_q8_avx512(const struct eng_dsa_tile *d, size_t t0, size_t nt, size_t s0,
                            size_t s1, struct eng_worker *w)
{
    size_t H = d->heads, dim = d->dim, nr = nt * H, nb = dim / TX8_KV_BLOCK;
    if (!nr || nr > ATTN_TILE_ROWS || !d->kq || !d->q8)
        return;
    unsigned RV = (unsigned)((nr + 15) / 16);
    size_t NP = (size_t)RV * 16;
    uint8_t *raw = eng_wscratch(w, W_TMP2, dsa_q8_scratch(dim));
    if (!raw)
        return;
    uint32_t *qt = (uint32_t *)(void *)(raw + ((64 - ((uintptr_t)raw & 63)) & 63)); /* [dim/4][NP] */
    float *qdt = (float *)(void *)(qt + dim / 4 * NP);                             /* [nb][NP] */
    float *st = qdt + nb * NP;                                                     /* [FKC][NP] */
    float *wv = st + (size_t)FKC * NP;                                             /* [NP] */
    memset(qt, 0, dim / 4 * NP * 4);
    memset(qdt, 0, nb * NP * 4);
    for (size_t r = 0; r < NP; r++)
        wv[r] = 0;
    for (size_t r = 0; r < nr; r++) {
        size_t t = t0 + r / H, h = r % H;
        const int8_t *qr = d->q8 + (t * H + h) * dim;
        for (size_t g = 0; g < dim / 4; g++) {
            uint32_t v = 0;
            for (unsigned i = 0; i < 4; i++)
                v |= (uint32_t)(uint8_t)(qr[4 * g + i] + 128) << (8 * i);
            qt[g * NP + r] = v;
        }
        for (size_t b = 0; b < nb; b++)
            qdt[b * NP + r] = d->q8d[(t * H + h) * nb + b];
        wv[r] = d->w[t * H + h];
    }
    size_t rb = tx_dtype_row_bytes(TX8_DTYPE_Q8_0, d->ld_k);
    for (size_t c0 = s0; c0 < s1; c0 += FKC) {
        size_t cn = s1 - c0 < FKC ? s1 - c0 : FKC;
        for (size_t j = 0; j < cn; j++) {
            const uint8_t *kr = d->kq + (c0 + j) * rb;
            if (j + 2 < cn)
                _mm_prefetch((const char *)(kr + 2 * rb), _MM_HINT_T0);
            __m512 o[4];
            switch (RV) {
            case 1:
                dsa_q8_key(o, kr, qt, qdt, NP, nb, 1);
                break;
            case 2:
                dsa_q8_key(o, kr, qt, qdt, NP, nb, 2);
                break;
            case 3:
                dsa_q8_key(o, kr, qt, qdt, NP, nb, 3);
                break;
            default:
                dsa_q8_key(o, kr, qt, qdt, NP, nb, 4);
                break;
            }
            for (unsigned rv = 0; rv < RV; rv++)
                _mm512_storeu_ps(st + j * NP + rv * 16, o[rv]);
        }
        dsa_head_sums(d, st, wv, NP, t0, nt, c0, cn);
    }
}
