/* SPDX-License-Identifier: MIT */
/*
 * ATTENTION's query tile with BF16 dot products (TX8_ATTN_F_BF16): the
 * f32 tile of attn_avx512.c with its two products done by vdpbf16ps, which
 * multiplies pairs of BF16 exactly and adds them to f32 lanes (32 MACs per
 * instruction instead of 16):
 *   S^T[key][row] += K[key][2i, 2i+1] . Qs^T[i][row]   (Qs = bf16(scale q),
 *       the query pairs interleaved per row lane, the key pair broadcast)
 *   O^T[d][row] += V[2i, 2i+1][d] . P^T[i][row]        (key pairs: the V
 *       rows of two keys interleaved, P = bf16(p) pairs per row lane)
 * The softmax (attn_tile.h) is the f32 tile's: its sums are of the f32 p.
 * K and V elements are rounded to BF16 once per key block (a BF16 cache is
 * read as it is). Reached only when the engine has TX8_FEAT_AVX512BF16
 * (CPUID): this file is built without -mavx512bf16, its functions carry
 * the family themselves.
 */
#include "attn_tile.h"

#define BF16_FN __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq,f16c")))

static size_t al64(size_t b)
{
    return (b + 63) & ~(size_t)63;
}

size_t eng_attn_tile_bf16_bytes(const struct tx8_cmd_attention *m)
{
    size_t qk = m->qk_dim, vd = m->v_dim, R = ATTN_TILE_ROWS, mx = qk > vd ? qk : vd;
    return al64(qk / 2 * R * 4) + al64(vd * R * 4) + al64((size_t)FKC * R * 4) +
           al64((size_t)FKC * qk * 2) + al64((size_t)FKC / 2 * vd * 4) +
           al64((size_t)FKC * vd * 2) + al64(mx * 4) + al64((size_t)FKC / 2 * R * 4) + al64(qk * 2);
}

/* n floats (a multiple of 2) to BF16 */
BF16_FN ATTN_AI void f32_bf16(uint16_t *dst, const float *s, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = attn_m16(n - i);
        __m256bh b = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, s + i));
        _mm256_mask_storeu_epi16(dst + i, m, (__m256i)b);
    }
}

/* one cache row of n elements to BF16 (tmp: n floats for the block types) */
BF16_FN static void row_bf16(uint16_t *dst, const uint8_t *s, unsigned dt, size_t n, float *tmp)
{
    switch (dt) {
    case TX8_DTYPE_BF16:
        memcpy(dst, s, n * 2);
        return;
    case TX8_DTYPE_F16:
        for (size_t i = 0; i < n; i += 16) {
            __mmask16 m = attn_m16(n - i);
            __m512 f = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + i * 2));
            _mm256_mask_storeu_epi16(dst + i, m, (__m256i)_mm512_cvtneps_pbh(f));
        }
        return;
    case TX8_DTYPE_F32:
        f32_bf16(dst, (const float *)(const void *)s, n);
        return;
    default:
        eng_kv_row_f32_avx512(tmp, s, dt, n);
        f32_bf16(dst, tmp, n);
        return;
    }
}

/*
 * A register tile of JT x RV row vectors, as the f32 tile's, over pairs:
 * acc[jj][rv] += sum_i pair(ap + jj * as + i * ai) . b[i][rv], the pair (two
 * BF16 at a u16 address) broadcast, b[i] = bp + i * NP (16 * RV BF16 pairs).
 */
BF16_FN ATTN_AI void tile_bf(float *c, size_t NP, const unsigned JT, const unsigned RV,
                             const uint16_t *ap, size_t as, size_t ai, const uint32_t *bp, size_t n,
                             int init)
{
    __m512 acc[16][4];
    attn_acc_load(acc, c, NP, JT, RV, init);
    for (size_t i = 0; i < n; i++) {
        __m512bh bv[4];
#pragma GCC unroll 4
        for (unsigned rv = 0; rv < RV; rv++)
            bv[rv] = (__m512bh)_mm512_loadu_si512(bp + i * NP + rv * 16);
        const uint16_t *a = ap + i * ai;
#pragma GCC unroll 16
        for (unsigned jj = 0; jj < JT; jj++) {
            uint32_t x;
            memcpy(&x, a + jj * as, 4);
            __m512bh xv = (__m512bh)_mm512_set1_epi32((int)x);
#pragma GCC unroll 4
            for (unsigned rv = 0; rv < RV; rv++)
                acc[jj][rv] = _mm512_dpbf16_ps(acc[jj][rv], xv, bv[rv]);
        }
    }
    attn_acc_store(acc, c, NP, JT, RV);
}

BF16_FN static void tiles_bf(unsigned RV, float *c, size_t NP, const uint16_t *ap, size_t as,
                             size_t ai, const uint32_t *bp, size_t n, size_t m, int init)
{
    ATTN_TILES(tile_bf, RV, c, NP, ap, as, ai, bp, n, m, init);
}

/* the V rows of keys 2i and 2i + 1 (r1 NULL: none, zeros) interleaved:
 * vb[d] = v0[d] | v1[d] << 16, d < vd */
BF16_FN ATTN_AI void v_pairs(uint32_t *vb, const uint16_t *r0, const uint16_t *r1, size_t vd)
{
    for (size_t d = 0; d < vd; d += 16) {
        __mmask16 m = attn_m16(vd - d);
        __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0 + d));
        __m512i hi = r1 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r1 + d))
                        : _mm512_setzero_si512();
        _mm512_mask_storeu_epi32(vb + d, m, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
}

BF16_FN void eng_attn_tile_bf16(const struct attn_ctx *a, size_t t0, size_t nt, size_t h0,
                                size_t h1, size_t g, size_t j0, size_t j1, float *part,
                                struct eng_worker *w)
{
    const struct tx8_cmd_attention *m = a->m;
    size_t qk = m->qk_dim, vd = m->v_dim, nh = h1 - h0, nr = nt * nh;
    if (!nr || nr > ATTN_TILE_ROWS)
        return;
    size_t R = ATTN_TILE_ROWS, mxd = qk > vd ? qk : vd;
    uint8_t *raw = eng_wscratch(w, W_TMP, eng_attn_tile_scratch(m));
    if (!raw)
        return;
    uint8_t *p = raw + ((64 - ((uintptr_t)raw & 63)) & 63);
    uint32_t *qb = (uint32_t *)(void *)p; /* [qk / 2][NP] query pairs */
    p += al64(qk / 2 * R * 4);
    float *ot = (float *)(void *)p; /* [vd][NP] */
    p += al64(vd * R * 4);
    float *st = (float *)(void *)p; /* [FKC][NP] */
    p += al64((size_t)FKC * R * 4);
    uint16_t *kb = (uint16_t *)(void *)p; /* [FKC][qk] key rows */
    p += al64((size_t)FKC * qk * 2);
    uint32_t *vb = (uint32_t *)(void *)p; /* [FKC / 2][vd] value pairs */
    p += al64((size_t)FKC / 2 * vd * 4);
    uint16_t *vc = (uint16_t *)(void *)p; /* [FKC][vd] value rows */
    p += al64((size_t)FKC * vd * 2);
    float *tmp = (float *)(void *)p; /* [max(qk, vd)] */
    p += al64(mxd * 4);
    uint32_t *pb = (uint32_t *)(void *)p; /* [FKC / 2][NP] probability pairs */
    p += al64((size_t)FKC / 2 * R * 4);
    uint16_t *qrow = (uint16_t *)(void *)p; /* [qk] */
    p += al64(qk * 2);
    struct attn_tile ts;
    attn_tile_init(&ts, a, t0, nt, h0, h1, p);
    size_t NP = ts.NP;
    unsigned RV = ts.RV;

    /* Qs^T pairs: row r's dims 2i, 2i + 1 at u16 (i * NP + r) * 2 + 0, 1 */
    size_t qst = (size_t)m->q_heads * m->ld_q_head;
    uint16_t *q16 = (uint16_t *)qb;
    memset(qb, 0, qk / 2 * NP * 4);
    const __m512 sc = _mm512_set1_ps(m->scale);
    for (size_t r = 0; r < nr; r++) {
        size_t t = t0 + r / nh, h = h0 + r % nh;
        const float *qr = a->q + t * qst + h * m->ld_q_head;
        for (size_t d = 0; d < qk; d += 16) {
            __mmask16 mk = attn_m16(qk - d);
            __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, qr + d), sc);
            _mm256_mask_storeu_epi16(qrow + d, mk, (__m256i)_mm512_cvtneps_pbh(v));
        }
        for (size_t d = 0; d < qk; d++)
            q16[((d / 2) * NP + r) * 2 + (d & 1)] = qrow[d];
    }
    memset(ot, 0, vd * NP * 4);

    size_t krow = (size_t)m->kv_heads * m->ld_k_head, vrow = (size_t)m->kv_heads * m->ld_v_head;
    /* every block's K (and V) rows are copied or converted one row after
     * the other into kb (vc) before the tile reads them 16 rows at a time:
     * a cache row read in the tile straight from memory is 16 interleaved
     * streams, which the hardware prefetch does not follow (a decode's
     * cache is not in the CPU's caches: the weights streamed past it);
     * measured in glm-inference (docs/engine.md, "BF16 attention") */
    /* p pairs: u16 lane r of pair i = (p[2i][r], p[2i + 1][r]) */
    __m512i pidx;
    {
        uint16_t ix[32];
        for (unsigned r = 0; r < 16; r++) {
            ix[2 * r] = (uint16_t)r;
            ix[2 * r + 1] = (uint16_t)(16 + r);
        }
        pidx = _mm512_loadu_si512(ix);
    }

    for (size_t c0 = j0; c0 < j1; c0 += FKC) {
        size_t cn = attn_tile_block(&ts, c0, c0 + FKC < j1 ? c0 + FKC : j1);
        if (!cn)
            continue;
        const uint16_t *kp = kb, *vp;
        size_t kst = qk, vst;
        for (size_t j = 0; j < cn; j++)
            row_bf16(kb + j * qk,
                     kv_at(m->kv_dtype, a->k, attn_tile_key(&ts, c0, j) * krow + g * m->ld_k_head),
                     m->kv_dtype, qk, tmp);
        if (a->shared) {
            vp = kp; /* V = the first v_dim dims of the K rows */
            vst = kst;
        } else {
            for (size_t j = 0; j < cn; j++)
                row_bf16(vc + j * vd,
                         kv_at(a->vdt, a->v, attn_tile_key(&ts, c0, j) * vrow + g * m->ld_v_head),
                         a->vdt, vd, tmp);
            vp = vc;
            vst = vd;
        }
        size_t np2 = (cn + 1) / 2;
        for (size_t i = 0; i < np2; i++)
            v_pairs(vb + i * vd, vp + 2 * i * vst, 2 * i + 1 < cn ? vp + (2 * i + 1) * vst : NULL,
                    vd);
        /* S^T = K Qs^T over dim pairs */
        tiles_bf(RV, st, NP, kp, kst, 2, qb, qk / 2, cn, 0);
        if (attn_tile_softmax(&ts, st, c0, cn))
            attn_tile_rescale(&ts, ot, vd);
        for (size_t i = 0; i < np2; i++)
            for (unsigned rv = 0; rv < RV; rv++) {
                __m512 p0 = _mm512_loadu_ps(st + 2 * i * NP + rv * 16);
                __m512 p1 = 2 * i + 1 < cn ? _mm512_loadu_ps(st + (2 * i + 1) * NP + rv * 16)
                                           : _mm512_setzero_ps();
                __m512i both = (__m512i)_mm512_cvtne2ps_pbh(p1, p0);
                _mm512_storeu_si512(pb + i * NP + rv * 16, _mm512_permutexvar_epi16(pidx, both));
            }
        /* O^T += V^T P^T over key pairs */
        tiles_bf(RV, ot, NP, (const uint16_t *)vb, 2, 2 * vd, pb, np2, vd, 1);
    }
    attn_tile_finish(&ts, ot, vd, part);
}
