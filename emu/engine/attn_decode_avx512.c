/* SPDX-License-Identifier: MIT */
/*
 * ATTENTION's AVX-512 decode kernel: the q heads of one kv head for one
 * token over a range of its causal keys (those a selection's bitmap keeps),
 * read straight from an F32/F16/BF16/Q8_0/Q4_0 cache: GQA decode (a group
 * of 2-8 rows), MHA's single row, absorbed MLA's 16 heads over the shared
 * latent. With BF16 products (a BF16 cache) the query is bf16(scale q) and
 * P V takes bf16(p), as on the other paths. The query tile (attn_avx512.c)
 * holds 16 rows per vector, wastes most of each vector on a group of 4, and
 * broadcasts every key element from an f32 copy of the rows; the per-token
 * path's matmul tiles reduce every (row, key) dot product on its own and
 * convert each chunk's V rows to an f32 copy first. Here, per chunk of
 * keys:
 *   S[row][key]: 4 rows x 4 keys of accumulators over the head dim (each K
 *     vector converted once for the 4 rows), the 16 sums reduced together
 *     by one transposing add tree;
 *   the online softmax of ops_attn.c (running max and sum per row);
 *   O[row] += P[row][key] V[key]: 4 rows x 64 dims of accumulators in
 *     registers over the chunk's keys, each V vector converted once for the
 *     4 rows.
 * Rows past the group's last are zero queries with zero weights; the key
 * block past a chunk's last key reads that last key again, and those
 * scores are not used. Where the engine computes BF16 products by
 * vdpbf16ps (e->attn_bf16_dp: AMD's Zen 4, AVX512-BF16) and the head dims
 * are multiples of 32, the two products take pairs instead (32 MACs per
 * instruction): of the head dims for S, of the keys for P V (two V rows
 * interleaved, the (p_j, p_j+1) pair broadcast). Compiled with
 * SIMD_AVX512; reached only from ops_attn.c when the engine's kernels are
 * the AVX-512 set.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn_internal.h"
#include "simd_avx512.h"

#define DEC_KC 64 /* keys per chunk */
#define DEC_RB 4  /* rows per register block */
#define DEC_PF 8  /* keys of prefetch distance */
#define DEC_AI static inline __attribute__((always_inline))

/* byte offset of element e (a multiple of 16) in a cache row of type dt */
DEC_AI size_t dec_off(unsigned dt, size_t e)
{
    if (dt == TX8_DTYPE_Q8_0)
        return e / TX8_KV_BLOCK * 34 + 2 + e % TX8_KV_BLOCK;
    if (dt == TX8_DTYPE_Q4_0)
        return e / TX8_KV_BLOCK * 18 + 2 + e % TX8_KV_BLOCK / 2;
    return e * tx_dtype_size(dt);
}

/* elements [e, e + 16) of a cache row of type dt as f32, bit-exact with
 * eng_kv_to_f32 (a block type's q times its f16 scale d) */
DEC_AI __m512 dec_load16(const uint8_t *row, size_t e, unsigned dt)
{
    if (!tx_dtype_is_block(dt))
        return eng_load16(row, e, dt);
    const uint8_t *b = row + e / TX8_KV_BLOCK * (dt == TX8_DTYPE_Q8_0 ? 34 : 18);
    uint16_t h;
    memcpy(&h, b, 2);
    __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16((short)h));
    __m512i q;
    if (dt == TX8_DTYPE_Q8_0) {
        q = _mm512_cvtepi8_epi32(
            _mm_loadu_si128((const __m128i *)(const void *)(b + 2 + e % TX8_KV_BLOCK)));
    } else {
        /* byte i = lo | hi << 4 holds elements 2i and 2i + 1 (biased by
         * 8): widen to 16 bits, hi into the upper byte, bytes in order */
        __m128i w = _mm_cvtepu8_epi16(
            _mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + e % TX8_KV_BLOCK / 2)));
        __m128i c = _mm_or_si128(_mm_and_si128(w, _mm_set1_epi16(15)),
                                 _mm_slli_epi16(_mm_srli_epi16(w, 4), 8));
        q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(c), _mm512_set1_epi32(8));
    }
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
}

/* lanes [4 r .. 4 r + 3] of the result: the sums of a[4 r .. 4 r + 3] (a
 * transposing add tree: 16 vectors -> one, 45 operations) */
DEC_AI __m512 dec_sum16(const __m512 *a)
{
    __m512 b[8], c[4], d[2];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                             _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m512d u = _mm512_castps_pd(b[2 * i]), v = _mm512_castps_pd(b[2 * i + 1]);
        c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(u, v)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(u, v)));
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        d[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], 0x88),
                         _mm512_shuffle_f32x4(d[0], d[1], 0xdd));
}

/* s[r][j .. j + 4) = q[r] . key rows kr[0..3] for the 4 rows of q (stride qk) */
DEC_AI void dec_scores4(const float *q, size_t qk, const uint8_t *const *kr, unsigned dt,
                               float *s, size_t lds)
{
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        acc[i] = _mm512_setzero_ps();
    for (size_t d = 0; d < qk; d += 16) {
        __m512 kv0 = dec_load16(kr[0], d, dt), kv1 = dec_load16(kr[1], d, dt),
               kv2 = dec_load16(kr[2], d, dt), kv3 = dec_load16(kr[3], d, dt);
#pragma GCC unroll 4
        for (int r = 0; r < DEC_RB; r++) {
            __m512 qv = _mm512_loadu_ps(q + r * qk + d);
            acc[r * 4 + 0] = _mm512_fmadd_ps(qv, kv0, acc[r * 4 + 0]);
            acc[r * 4 + 1] = _mm512_fmadd_ps(qv, kv1, acc[r * 4 + 1]);
            acc[r * 4 + 2] = _mm512_fmadd_ps(qv, kv2, acc[r * 4 + 2]);
            acc[r * 4 + 3] = _mm512_fmadd_ps(qv, kv3, acc[r * 4 + 3]);
        }
    }
    __m512 sum = dec_sum16(acc);
    _mm_storeu_ps(s, _mm512_extractf32x4_ps(sum, 0));
    _mm_storeu_ps(s + lds, _mm512_extractf32x4_ps(sum, 1));
    _mm_storeu_ps(s + 2 * lds, _mm512_extractf32x4_ps(sum, 2));
    _mm_storeu_ps(s + 3 * lds, _mm512_extractf32x4_ps(sum, 3));
}

/* the P V register block: 4 rows x nv vectors of o from dims d0 */
DEC_AI void dec_acc_load(__m512 acc[DEC_RB][4], const float *o, size_t vd, size_t d0, int nv)
{
#pragma GCC unroll 4
    for (int r = 0; r < DEC_RB; r++)
#pragma GCC unroll 4
        for (int i = 0; i < nv; i++)
            acc[r][i] = _mm512_loadu_ps(o + r * vd + d0 + 16 * i);
}

DEC_AI void dec_acc_store(__m512 acc[DEC_RB][4], float *o, size_t vd, size_t d0, int nv)
{
#pragma GCC unroll 4
    for (int r = 0; r < DEC_RB; r++)
#pragma GCC unroll 4
        for (int i = 0; i < nv; i++)
            _mm512_storeu_ps(o + r * vd + d0 + 16 * i, acc[r][i]);
}

/* o[r][d0 .. d0 + 16 nv) += sum_j p[r][j] v[j][d0 ..] for the 4 rows, nv 4 or 1 */
DEC_AI void dec_pv(float *o, size_t vd, const float *p, const uint8_t *v, size_t ldv_b,
                          unsigned dt, size_t cn, size_t d0, int nv)
{
    __m512 acc[DEC_RB][4];
    dec_acc_load(acc, o, vd, d0, nv);
    for (size_t j = 0; j < cn; j++) {
        const uint8_t *row = v + j * ldv_b;
        /* the row DEC_PF keys on (the cache is strided by the kv heads) */
#pragma GCC unroll 2
        for (int i = 0; i < nv; i += 2)
            _mm_prefetch((const char *)(row + DEC_PF * ldv_b + dec_off(dt, d0 + 16 * i)),
                         _MM_HINT_T0);
        __m512 x[4];
#pragma GCC unroll 4
        for (int i = 0; i < nv; i++)
            x[i] = dec_load16(row, d0 + 16 * i, dt);
#pragma GCC unroll 4
        for (int r = 0; r < DEC_RB; r++) {
            __m512 pv = _mm512_set1_ps(p[r * DEC_KC + j]);
#pragma GCC unroll 4
            for (int i = 0; i < nv; i++)
                acc[r][i] = _mm512_fmadd_ps(pv, x[i], acc[r][i]);
        }
    }
    dec_acc_store(acc, o, vd, d0, nv);
}

/* the largest of m and x[0 .. n), a NaN in x passed over as by the scalar
 * "x > max" scan (vmaxps returns its second operand when either is NaN) */
DEC_AI float dec_max(const float *x, size_t n, float m)
{
    __m512 v = _mm512_set1_ps(m);
    for (size_t j = 0; j < n; j += 16) {
        __mmask16 k = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
        v = _mm512_mask_max_ps(v, k, _mm512_maskz_loadu_ps(k, x + j), v);
    }
    return _mm512_reduce_max_ps(v);
}

/*
 * BF16 products by vdpbf16ps (a BF16 K and V cache where the engine
 * prefers it, e->attn_bf16_dp: 32 MACs per instruction instead of 16). The
 * functions carry the AVX512-BF16 target themselves (the file's flags do
 * not have it) and are called, not inlined, from dec_run.
 */
#define DEC_BF16_TARGET target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq,f16c")
#define DEC_BF16_FN __attribute__((DEC_BF16_TARGET, noinline))
#define DEC_BF16_AI static inline __attribute__((DEC_BF16_TARGET, always_inline))

/* n floats already rounded to BF16 (eng_bf16_round_avx512) as their BF16
 * bits, n a multiple of 16 */
DEC_AI void dec_pack_bf16(uint16_t *dst, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i += 16)
        _mm256_storeu_si256((__m256i *)(void *)(dst + i),
                            _mm512_cvtepi32_epi16(_mm512_srli_epi32(
                                _mm512_castps_si512(_mm512_loadu_ps(x + i)), 16)));
}

/* S[r][jb + i] for the nrp rows of qb (BF16, stride qk, a multiple of 32)
 * and keys c0 + jb + i of the chunk: 4 rows x 4 keys of accumulators, each
 * over pairs of the head dim (as dec_scores4) */
DEC_BF16_FN static void dec_scores_dp(const uint16_t *qb, size_t nrp, size_t qk,
                                      const uint8_t *kb, size_t krow, size_t c0, size_t cn,
                                      float *s)
{
    for (size_t jb = 0; jb < cn; jb += 4) {
        const uint8_t *kr[4];
        for (size_t i = 0; i < 4; i++)
            kr[i] = kb + (c0 + (jb + i < cn ? jb + i : cn - 1)) * krow;
        for (size_t r0 = 0; r0 < nrp; r0 += DEC_RB) {
            const uint16_t *q = qb + r0 * qk;
            __m512 acc[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                acc[i] = _mm512_setzero_ps();
            for (size_t d = 0; d < qk; d += 32) {
                if (r0 == 0) {
                    /* a line of each key row DEC_PF keys on per 32 dims:
                     * spread over the block, not one burst of misses (5%
                     * of ATTENTION in the model, where the latent comes
                     * from DRAM) */
#pragma GCC unroll 4
                    for (int i = 0; i < 4; i++)
                        _mm_prefetch((const char *)(kr[i] + DEC_PF * krow + 2 * d),
                                     _MM_HINT_T0);
                }
                __m512bh k0 = (__m512bh)_mm512_loadu_si512(kr[0] + 2 * d),
                         k1 = (__m512bh)_mm512_loadu_si512(kr[1] + 2 * d),
                         k2 = (__m512bh)_mm512_loadu_si512(kr[2] + 2 * d),
                         k3 = (__m512bh)_mm512_loadu_si512(kr[3] + 2 * d);
#pragma GCC unroll 4
                for (int r = 0; r < DEC_RB; r++) {
                    __m512bh qv = (__m512bh)_mm512_loadu_si512(q + r * qk + d);
                    acc[r * 4 + 0] = _mm512_dpbf16_ps(acc[r * 4 + 0], qv, k0);
                    acc[r * 4 + 1] = _mm512_dpbf16_ps(acc[r * 4 + 1], qv, k1);
                    acc[r * 4 + 2] = _mm512_dpbf16_ps(acc[r * 4 + 2], qv, k2);
                    acc[r * 4 + 3] = _mm512_dpbf16_ps(acc[r * 4 + 3], qv, k3);
                }
            }
            __m512 sum = dec_sum16(acc);
            float *sr = s + r0 * DEC_KC + jb;
            _mm_storeu_ps(sr, _mm512_extractf32x4_ps(sum, 0));
            _mm_storeu_ps(sr + DEC_KC, _mm512_extractf32x4_ps(sum, 1));
            _mm_storeu_ps(sr + 2 * DEC_KC, _mm512_extractf32x4_ps(sum, 2));
            _mm_storeu_ps(sr + 3 * DEC_KC, _mm512_extractf32x4_ps(sum, 3));
        }
    }
}

/*
 * O[r] += sum_j P[r][j] V[j] over the chunk's cn keys in pairs: the V rows
 * of keys j and j + 1 interleaved (vpunpck[lh]wd; a zero row after an odd
 * last key, whose p pair's second half is zero), the (p_j, p_j+1) pair
 * broadcast. The interleave leaves each 32 dims of o in the order
 * dec_dp_order undoes: lanes 4k + i of the first vector are dims 8k + i,
 * of the second 8k + 4 + i (k < 4, i < 4). ps: [row][DEC_KC] BF16.
 */
DEC_BF16_AI void dec_pv_dp_block(float *o, size_t vd, const uint16_t *ps, const uint8_t *v,
                            size_t ldv_b, size_t cn, size_t d0, int nv)
{
    __m512 acc[DEC_RB][4];
    dec_acc_load(acc, o, vd, d0, nv);
    for (size_t j = 0; j < cn; j += 2) {
        const uint8_t *r0 = v + j * ldv_b, *r1 = r0 + ldv_b;
#pragma GCC unroll 2
        for (int i = 0; i < nv; i += 2) {
            _mm_prefetch((const char *)(r0 + 2 * DEC_PF * ldv_b + 2 * (d0 + 16 * i)),
                         _MM_HINT_T0);
            _mm_prefetch((const char *)(r1 + 2 * DEC_PF * ldv_b + 2 * (d0 + 16 * i)),
                         _MM_HINT_T0);
        }
        __m512bh x[4];
#pragma GCC unroll 2
        for (int i = 0; i < nv; i += 2) {
            __m512i a = _mm512_loadu_si512(r0 + 2 * (d0 + 16 * i));
            __m512i b = j + 1 < cn ? _mm512_loadu_si512(r1 + 2 * (d0 + 16 * i))
                                   : _mm512_setzero_si512();
            x[i] = (__m512bh)_mm512_unpacklo_epi16(a, b);
            x[i + 1] = (__m512bh)_mm512_unpackhi_epi16(a, b);
        }
#pragma GCC unroll 4
        for (int r = 0; r < DEC_RB; r++) {
            uint32_t pp;
            memcpy(&pp, ps + r * DEC_KC + j, 4);
            __m512bh pv = (__m512bh)_mm512_set1_epi32((int)pp);
#pragma GCC unroll 4
            for (int i = 0; i < nv; i++)
                acc[r][i] = _mm512_dpbf16_ps(acc[r][i], x[i], pv);
        }
    }
    dec_acc_store(acc, o, vd, d0, nv);
}

DEC_BF16_FN static void dec_pv_dp(float *o, size_t nrp, size_t vd, const uint16_t *ps,
                                  const uint8_t *v, size_t ldv_b, size_t cn)
{
    for (size_t r0 = 0; r0 < nrp; r0 += DEC_RB) {
        size_t d0 = 0;
        for (; d0 + 64 <= vd; d0 += 64)
            dec_pv_dp_block(o + r0 * vd, vd, ps + r0 * DEC_KC, v, ldv_b, cn, d0, 4);
        for (; d0 < vd; d0 += 32)
            dec_pv_dp_block(o + r0 * vd, vd, ps + r0 * DEC_KC, v, ldv_b, cn, d0, 2);
    }
}

/* the rows' dims back in order after dec_pv_dp (vd a multiple of 32) */
DEC_AI void dec_dp_order(float *o, size_t n)
{
    const __m512i i0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23),
                  i1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29,
                                         30, 31);
    for (size_t d = 0; d < n; d += 32) {
        __m512 lo = _mm512_loadu_ps(o + d), hi = _mm512_loadu_ps(o + d + 16);
        _mm512_storeu_ps(o + d, _mm512_permutex2var_ps(lo, i0, hi));
        _mm512_storeu_ps(o + d + 16, _mm512_permutex2var_ps(lo, i1, hi));
    }
}

size_t eng_attn_decode_scratch(const struct tx8_cmd_attention *m, size_t nh)
{
    size_t nrp = (nh + DEC_RB - 1) / DEC_RB * DEC_RB;
    /* f32 q, s, o, max, sum; BF16 q and p (vdpbf16ps) */
    return nrp * ((size_t)m->qk_dim + DEC_KC + m->v_dim + 2) * 4 +
           nrp * ((size_t)m->qk_dim + DEC_KC) * 2 + 64;
}

/* the kernel for K type kdt and V type vdt (constants where inlined) */
DEC_AI void dec_run(const struct attn_ctx *a, size_t t, size_t h0, size_t h1, size_t g, size_t j0,
                    size_t j1, float *part, struct eng_worker *w, unsigned kdt, unsigned vdt)
{
    const struct tx8_cmd_attention *m = a->m;
    const struct eng_kernels *k = a->e->k;
    size_t nh = h1 - h0, nrp = (nh + DEC_RB - 1) / DEC_RB * DEC_RB;
    size_t qk = m->qk_dim, vd = m->v_dim;
    float *buf = eng_wscratch(w, W_TMP, eng_attn_decode_scratch(m, nh));
    if (!buf)
        return;
    float *q = buf, *s = q + nrp * qk, *o = s + nrp * DEC_KC, *mx = o + nrp * vd, *l = mx + nrp;
    uint16_t *qb = (uint16_t *)(void *)(l + nrp), *ps = qb + nrp * qk;
    /* BF16 products by vdpbf16ps: pairs of the head dims, of the keys */
    int dp = a->bf_dp && kdt == TX8_DTYPE_BF16 && vdt == TX8_DTYPE_BF16 && qk % 32 == 0 &&
             vd % 32 == 0;
    /* the scaled queries; padded rows zero */
    const float *qs = a->q + t * (size_t)m->q_heads * m->ld_q_head + h0 * m->ld_q_head;
    __m512 sc = _mm512_set1_ps(m->scale);
    for (size_t r = 0; r < nrp; r++)
        for (size_t d = 0; d < qk; d += 16)
            _mm512_storeu_ps(q + r * qk + d,
                             r < nh ? _mm512_mul_ps(sc, _mm512_loadu_ps(qs + r * m->ld_q_head + d))
                                    : _mm512_setzero_ps());
    /* BF16 products (a BF16 cache): bf16(scale q) times the cache's BF16
     * elements is exact in f32, as on the other paths */
    if (a->bf)
        eng_bf16_round_avx512(q, nrp * qk);
    if (dp)
        dec_pack_bf16(qb, q, nrp * qk);
    /* a selection as a bitmap of this token's keys (else every causal key) */
    const uint64_t *bmt = a->bm ? a->bm + t * a->bm_words : NULL;
    memset(o, 0, nrp * vd * 4);
    for (size_t r = 0; r < nrp; r++) {
        mx[r] = -INFINITY;
        l[r] = 0;
    }
    /* row strides and the head's offset in bytes (block types: whole
     * blocks, as the command's validation requires) */
    size_t krow = tx_dtype_row_bytes(kdt, (uint64_t)m->kv_heads * m->ld_k_head);
    size_t vrow = tx_dtype_row_bytes(vdt, (uint64_t)m->kv_heads * m->ld_v_head);
    size_t krb = tx_dtype_row_bytes(kdt, qk);
    const uint8_t *kb = a->k + tx_dtype_row_bytes(kdt, g * m->ld_k_head),
                  *vb = a->v + tx_dtype_row_bytes(vdt, g * m->ld_v_head);

    for (size_t c0 = j0; c0 < j1; c0 += DEC_KC) {
        size_t cn = j1 - c0 < DEC_KC ? j1 - c0 : DEC_KC;
        if (dp)
            dec_scores_dp(qb, nrp, qk, kb, krow, c0, cn, s);
        for (size_t jb = 0; !dp && jb < cn; jb += 4) {
            const uint8_t *kr[4];
            for (size_t i = 0; i < 4; i++)
                kr[i] = kb + (c0 + (jb + i < cn ? jb + i : cn - 1)) * krow;
            for (size_t i = 0; i < 4; i++)
                for (size_t b = 0; b < krb; b += 64)
                    _mm_prefetch((const char *)(kr[i] + DEC_PF * krow + b), _MM_HINT_T0);
            for (size_t r0 = 0; r0 < nrp; r0 += DEC_RB)
                dec_scores4(q + r0 * qk, qk, kr, kdt, s + r0 * DEC_KC + jb, DEC_KC);
        }
        /* keys the selection leaves out: no weight */
        for (size_t j = 0; bmt && j < cn; j++)
            if (!((bmt[(c0 + j) / 64] >> ((c0 + j) % 64)) & 1))
                for (size_t r = 0; r < nh; r++)
                    s[r * DEC_KC + j] = -INFINITY;
        /* the online softmax update of each row */
        for (size_t r = 0; r < nrp; r++) {
            float *sr = s + r * DEC_KC;
            uint16_t *pr = ps + r * DEC_KC;
            float cmax = r < nh ? dec_max(sr, cn, mx[r]) : -INFINITY;
            if (cmax == -INFINITY || isnan(cmax)) { /* a padded row, or no weight */
                if (dp)
                    memset(pr, 0, DEC_KC * 2);
                else
                    memset(sr, 0, DEC_KC * 4);
                continue;
            }
            float corr = mx[r] == -INFINITY ? 0.0f : expf(mx[r] - cmax);
            float sum = k->exp_sum(sr, cn, cmax);
            l[r] = l[r] * corr + sum;
            if (corr != 1.0f)
                k->scale_f32(o + r * vd, corr, vd);
            mx[r] = cmax;
            if (a->bf) /* the sum is of the f32 p, P V of bf16(p) */
                eng_bf16_round_avx512(sr, cn);
            if (dp) { /* the p of the chunk's keys; the zeros after them give
                       * an odd last key's pair its zero second half */
                size_t n16 = (cn + 15) / 16 * 16;
                memset(sr + cn, 0, (n16 - cn) * 4);
                dec_pack_bf16(pr, sr, n16);
            }
        }
        const uint8_t *vc = vb + c0 * vrow;
        if (dp)
            dec_pv_dp(o, nrp, vd, ps, vc, vrow, cn);
        for (size_t r0 = 0; !dp && r0 < nrp; r0 += DEC_RB) {
            size_t d0 = 0;
            for (; d0 + 64 <= vd; d0 += 64)
                dec_pv(o + r0 * vd, vd, s + r0 * DEC_KC, vc, vrow, vdt, cn, d0, 4);
            for (; d0 < vd; d0 += 16)
                dec_pv(o + r0 * vd, vd, s + r0 * DEC_KC, vc, vrow, vdt, cn, d0, 1);
        }
    }
    if (dp)
        dec_dp_order(o, nh * vd);
    if (part) { /* (o, max, sum) of the nh rows, as attn_item's */
        memcpy(part, o, nh * vd * 4);
        memcpy(part + nh * vd, mx, nh * 4);
        memcpy(part + nh * vd + nh, l, nh * 4);
        return;
    }
    size_t orow = (size_t)m->q_heads * m->ld_o_head;
    for (size_t r = 0; r < nh; r++) {
        float *dst = a->out + t * orow + (h0 + r) * m->ld_o_head;
        float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
        for (size_t d = 0; d < vd; d++)
            dst[d] = o[r * vd + d] * inv;
    }
}

void eng_attn_decode_avx512(const struct attn_ctx *a, size_t t, size_t h0, size_t h1, size_t g,
                            size_t j0, size_t j1, float *part, struct eng_worker *w)
{
    unsigned kdt = a->m->kv_dtype, vdt = a->vdt;
    if (kdt == TX8_DTYPE_F16 && vdt == TX8_DTYPE_F16)
        dec_run(a, t, h0, h1, g, j0, j1, part, w, TX8_DTYPE_F16, TX8_DTYPE_F16);
    else if (kdt == TX8_DTYPE_BF16 && vdt == TX8_DTYPE_BF16)
        dec_run(a, t, h0, h1, g, j0, j1, part, w, TX8_DTYPE_BF16, TX8_DTYPE_BF16);
    else if (kdt == TX8_DTYPE_F32 && vdt == TX8_DTYPE_F32)
        dec_run(a, t, h0, h1, g, j0, j1, part, w, TX8_DTYPE_F32, TX8_DTYPE_F32);
    else if (kdt == TX8_DTYPE_Q8_0 && vdt == TX8_DTYPE_Q8_0)
        dec_run(a, t, h0, h1, g, j0, j1, part, w, TX8_DTYPE_Q8_0, TX8_DTYPE_Q8_0);
    else if (kdt == TX8_DTYPE_Q4_0 && vdt == TX8_DTYPE_Q4_0)
        dec_run(a, t, h0, h1, g, j0, j1, part, w, TX8_DTYPE_Q4_0, TX8_DTYPE_Q4_0);
    else if (kdt == TX8_DTYPE_Q8_0 && vdt == TX8_DTYPE_F16)
        dec_run(a, t, h0, h1, g, j0, j1, part, w, TX8_DTYPE_Q8_0, TX8_DTYPE_F16);
    else
        dec_run(a, t, h0, h1, g, j0, j1, part, w, kdt, vdt);
}
