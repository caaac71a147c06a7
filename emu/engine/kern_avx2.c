/* SPDX-License-Identifier: MIT */
/*
 * AVX2 + FMA + F16C kernels. Compiled with SIMD_AVX2 flags; only called
 * when the CPU supports them.
 *
 * INT8 x INT8: both operands are sign-extended to int16 (vpmovsxbw) and
 * multiplied pairwise into int32 with vpmaddwd (exact: |q * w| <= 127^2).
 * Activations are stored signed (act_u8 = 0).
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "engine_internal.h"

#define AI __attribute__((always_inline)) static inline

/* 8 E4M3 codes -> f32, bit-exact with tx_e4m3_to_f32 (as eng_e4m3x16) */
AI __m256 e4m3x8(__m128i bytes)
{
    __m256i b = _mm256_cvtepu8_epi32(bytes);
    __m256i em = _mm256_and_si256(b, _mm256_set1_epi32(0x7f));
    __m256i v = _mm256_add_epi32(_mm256_slli_epi32(em, 20), _mm256_set1_epi32(120 << 23));
    __m256i sub =
        _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(em), _mm256_set1_ps(1.0f / 512.0f)));
    v = _mm256_blendv_epi8(v, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(8), em));
    v = _mm256_blendv_epi8(v, _mm256_set1_epi32(0x7fc00000),
                           _mm256_cmpeq_epi32(em, _mm256_set1_epi32(0x7f)));
    v = _mm256_or_si256(v, _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24));
    return _mm256_castsi256_ps(v);
}

AI __m256 load8(const uint8_t *w, size_t k, unsigned dtype)
{
    switch (dtype) {
    case TX8_DTYPE_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(w + k * 2)));
    case TX8_DTYPE_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(w + k * 2))),
            16));
    case TX8_DTYPE_I8:
        return _mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(w + k))));
    case TX8_DTYPE_F8_E4M3:
        return e4m3x8(_mm_loadl_epi64((const __m128i *)(const void *)(w + k)));
    default:
        return _mm256_loadu_ps((const float *)(const void *)(w + k * 4));
    }
}

AI float w_scalar(const uint8_t *w, size_t k, unsigned dtype)
{
    uint16_t h;
    switch (dtype) {
    case TX8_DTYPE_F16:
        memcpy(&h, w + k * 2, 2);
        return tx_f16_to_f32(h);
    case TX8_DTYPE_BF16:
        memcpy(&h, w + k * 2, 2);
        return tx_bf16_to_f32(h);
    case TX8_DTYPE_I8:
        return (float)(int8_t)w[k];
    case TX8_DTYPE_F8_E4M3:
        return tx_e4m3_to_f32(w[k]);
    default: {
        float f;
        memcpy(&f, w + k * 4, 4);
        return f;
    }
    }
}

AI float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define ES(D) ((D) == TX8_DTYPE_F32 ? 4 : (D) == TX8_DTYPE_I8 || (D) == TX8_DTYPE_F8_E4M3 ? 1 : 2)
/* weights multiplied by scales (I8 per row / group, FP8 per block) */
#define SCALED(D) ((D) == TX8_DTYPE_I8 || (D) == TX8_DTYPE_F8_E4M3)

/* RM (<= 5) weight rows, rows past t->R repeating the last one (results
 * dropped), T (<= 4) tokens; SM: the small-batch kernel (mm_small_f32). */
AI void tile_f32_x(const struct mm_tile *t, const unsigned T, const unsigned D, const unsigned RM,
                   const int SM)
{
    __m256 acc[5][4];
    float tail[5][4];
    const uint8_t *w[5];
    const float *x[4];
    const float *sc[5];
#pragma GCC unroll 5
    for (unsigned r = 0; r < RM; r++) {
        unsigned rr = r < t->R ? r : t->R - 1;
        w[r] = t->w + rr * t->w_stride;
        sc[r] = t->scales ? t->scales + rr * t->scale_stride : NULL;
#pragma GCC unroll 4
        for (unsigned j = 0; j < 4; j++) {
            acc[r][j] = _mm256_setzero_ps();
            tail[r][j] = 0;
        }
    }
#pragma GCC unroll 4
    for (unsigned j = 0; j < T; j++)
        x[j] = (const float *)t->x + j * t->x_stride;

    size_t k = t->k0;
    while (k < t->k1) {
        size_t kend = t->k1;
        size_t g = 0;
        __m256 s[5];
        if (SCALED(D)) {
            g = k / t->group;
            size_t ge = (g + 1) * t->group;
            if (ge < kend)
                kend = ge;
#pragma GCC unroll 5
            for (unsigned r = 0; r < RM; r++)
                s[r] = _mm256_set1_ps(sc[r][g]);
        }
        for (; k + 8 <= kend; k += 8) {
            __m256 wv[5];
            if (SM && ((k * ES(D)) & 63) == 0) {
                /* the next row tile's line at this k, into L2 (as the
                 * AVX-512 small-batch kernel) */
#pragma GCC unroll 5
                for (unsigned r = 0; r < RM; r++)
                    _mm_prefetch((const char *)(t->w + (RM + r) * t->w_stride + k * ES(D)),
                                 _MM_HINT_T1);
            }
#pragma GCC unroll 5
            for (unsigned r = 0; r < RM; r++) {
                wv[r] = load8(w[r], k, D);
                if (SCALED(D))
                    wv[r] = _mm256_mul_ps(wv[r], s[r]);
            }
#pragma GCC unroll 4
            for (unsigned j = 0; j < T; j++) {
                __m256 xv = _mm256_loadu_ps(x[j] + k);
                /* one load for the RM FMAs (not folded into each) */
                if (SM)
                    __asm__("" : "+x"(xv));
#pragma GCC unroll 5
                for (unsigned r = 0; r < RM; r++)
                    acc[r][j] = _mm256_fmadd_ps(wv[r], xv, acc[r][j]);
            }
        }
        if (SM && k < kend) {
            /* the < 8 left as one zero-padded vector step, so that no
             * scalar partial sum stays live across the loop above */
            float wb[5][8], xb[8];
            size_t n = kend - k;
#pragma GCC unroll 5
            for (unsigned r = 0; r < RM; r++)
                for (size_t i = 0; i < 8; i++)
                    wb[r][i] =
                        i < n ? w_scalar(w[r], k + i, D) * (SCALED(D) ? sc[r][g] : 1.0f) : 0.0f;
#pragma GCC unroll 4
            for (unsigned j = 0; j < T; j++) {
                for (size_t i = 0; i < 8; i++)
                    xb[i] = i < n ? x[j][k + i] : 0.0f;
                __m256 xv = _mm256_loadu_ps(xb);
#pragma GCC unroll 5
                for (unsigned r = 0; r < RM; r++)
                    acc[r][j] = _mm256_fmadd_ps(_mm256_loadu_ps(wb[r]), xv, acc[r][j]);
            }
            k = kend;
        }
        for (; !SM && k < kend; k++) {
#pragma GCC unroll 5
            for (unsigned r = 0; r < RM; r++) {
                float wf = w_scalar(w[r], k, D);
                if (SCALED(D))
                    wf *= sc[r][g];
#pragma GCC unroll 4
                for (unsigned j = 0; j < T; j++)
                    tail[r][j] += wf * x[j][k];
            }
        }
    }
#pragma GCC unroll 5
    for (unsigned r = 0; r < RM; r++) {
        if (r >= t->R)
            break;
#pragma GCC unroll 4
        for (unsigned j = 0; j < T; j++)
            t->out[j * t->out_stride + r] += SM ? hsum8(acc[r][j]) : hsum8(acc[r][j]) + tail[r][j];
    }
}

/* the 4-row tile (T <= 4) of mm_tile_f32 */
AI void tile_f32(const struct mm_tile *t, const unsigned T, const unsigned D)
{
    tile_f32_x(t, T, D, 4, 0);
}

#define TILE_F32_D(D)                                                                              \
    static void tile_f32_##D(const struct mm_tile *t)                                              \
    {                                                                                              \
        switch (t->T) {                                                                            \
        case 1:                                                                                    \
            tile_f32(t, 1, D);                                                                     \
            break;                                                                                 \
        case 2:                                                                                    \
            tile_f32(t, 2, D);                                                                     \
            break;                                                                                 \
        case 3:                                                                                    \
            tile_f32(t, 3, D);                                                                     \
            break;                                                                                 \
        default:                                                                                   \
            tile_f32(t, 4, D);                                                                     \
            break;                                                                                 \
        }                                                                                          \
    }
TILE_F32_D(0)
TILE_F32_D(1)
TILE_F32_D(2)
TILE_F32_D(3)
TILE_F32_D(18) /* TX8_DTYPE_F8_E4M3 */

static void mm_tile_f32(const struct mm_tile *t)
{
    switch (t->dtype) {
    case TX8_DTYPE_F16:
        tile_f32_1(t);
        break;
    case TX8_DTYPE_BF16:
        tile_f32_2(t);
        break;
    case TX8_DTYPE_I8:
        tile_f32_3(t);
        break;
    case TX8_DTYPE_F8_E4M3:
        tile_f32_18(t);
        break;
    default:
        tile_f32_0(t);
        break;
    }
}

/* ---- f32 small-batch tile (matmul.c small batches) ---------------------- */

/*
 * T = 2..4 tokens per tile (activations f32), not batch-invariant:
 * SMALL_RM(T) weight rows so that the RM x T accumulators, the RM weight
 * vectors and the activation vector fit the 16 registers (the 4 x 4 tile
 * of mm_tile_f32 does not), each weight vector loaded once per k step for
 * all T tokens; the next row tile is prefetched into L2.
 */
#define SMALL_RM(T) ((T) <= 2 ? 4 : 3)

#define SMALL_F32_D(D)                                                                             \
    static void small_f32_##D(const struct mm_tile *t)                                             \
    {                                                                                              \
        switch (t->T) {                                                                            \
        case 2:                                                                                    \
            tile_f32_x(t, 2, D, SMALL_RM(2), 1);                                                   \
            break;                                                                                 \
        case 3:                                                                                    \
            tile_f32_x(t, 3, D, SMALL_RM(3), 1);                                                   \
            break;                                                                                 \
        default:                                                                                   \
            tile_f32_x(t, 4, D, SMALL_RM(4), 1);                                                   \
            break;                                                                                 \
        }                                                                                          \
    }
SMALL_F32_D(0)
SMALL_F32_D(1)
SMALL_F32_D(2)
SMALL_F32_D(3)
SMALL_F32_D(18) /* TX8_DTYPE_F8_E4M3 */

static void mm_small_f32(const struct mm_tile *t)
{
    if (t->T == 1) {
        mm_tile_f32(t);
        return;
    }
    switch (t->dtype) {
    case TX8_DTYPE_F16:
        small_f32_1(t);
        break;
    case TX8_DTYPE_BF16:
        small_f32_2(t);
        break;
    case TX8_DTYPE_I8:
        small_f32_3(t);
        break;
    case TX8_DTYPE_F8_E4M3:
        small_f32_18(t);
        break;
    default:
        small_f32_0(t);
        break;
    }
}

AI int64_t hsum_epi32(__m256i v)
{
    __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v));
    __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1));
    __m256i s = _mm256_add_epi64(lo, hi);
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return _mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1);
}

/* 16 int8 -> int16 */
AI __m256i ld16x8(const int8_t *p)
{
    return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p));
}

AI void tile_i8(const struct mm_tile *t, const unsigned T)
{
    const int8_t *w[4];
    const int8_t *x[4];
    const float *sc[4];
    float res[4][4];
#pragma GCC unroll 4
    for (unsigned r = 0; r < 4; r++) {
        unsigned rr = r < t->R ? r : t->R - 1;
        w[r] = (const int8_t *)(t->w + rr * t->w_stride);
        sc[r] = t->scales + rr * t->scale_stride;
#pragma GCC unroll 4
        for (unsigned j = 0; j < 4; j++)
            res[r][j] = 0;
    }
#pragma GCC unroll 4
    for (unsigned j = 0; j < T; j++)
        x[j] = (const int8_t *)t->x + j * t->x_stride;

    size_t k = t->k0;
    while (k < t->k1) {
        size_t g = k / t->group;
        size_t kend = (g + 1) * t->group;
        if (kend > t->k1)
            kend = t->k1;
        __m256i acc[4][4];
        int64_t tl[4][4];
#pragma GCC unroll 4
        for (unsigned r = 0; r < 4; r++)
#pragma GCC unroll 4
            for (unsigned j = 0; j < 4; j++) {
                acc[r][j] = _mm256_setzero_si256();
                tl[r][j] = 0;
            }
        for (; k + 16 <= kend; k += 16) {
            __m256i wv[4];
#pragma GCC unroll 4
            for (unsigned r = 0; r < 4; r++)
                wv[r] = ld16x8(w[r] + k);
#pragma GCC unroll 4
            for (unsigned j = 0; j < T; j++) {
                __m256i xv = ld16x8(x[j] + k);
#pragma GCC unroll 4
                for (unsigned r = 0; r < 4; r++)
                    acc[r][j] = _mm256_add_epi32(acc[r][j], _mm256_madd_epi16(xv, wv[r]));
            }
        }
        for (; k < kend; k++)
#pragma GCC unroll 4
            for (unsigned r = 0; r < 4; r++)
#pragma GCC unroll 4
                for (unsigned j = 0; j < T; j++)
                    tl[r][j] += (int32_t)x[j][k] * (int32_t)w[r][k];
#pragma GCC unroll 4
        for (unsigned r = 0; r < 4; r++)
#pragma GCC unroll 4
            for (unsigned j = 0; j < T; j++)
                res[r][j] += sc[r][g] * (float)(hsum_epi32(acc[r][j]) + tl[r][j]);
    }
#pragma GCC unroll 4
    for (unsigned r = 0; r < t->R; r++)
#pragma GCC unroll 4
        for (unsigned j = 0; j < T; j++)
            t->out[j * t->out_stride + r] += res[r][j];
}

static void mm_tile_i8(const struct mm_tile *t)
{
    switch (t->T) {
    case 1:
        tile_i8(t, 1);
        break;
    case 2:
        tile_i8(t, 2);
        break;
    case 3:
        tile_i8(t, 3);
        break;
    default:
        tile_i8(t, 4);
        break;
    }
}

AI void sparse_f32(const struct mm_sparse *s, const unsigned D)
{
    __m256 acc[8];
    const float *x[8];
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; j++) {
        acc[j] = _mm256_setzero_ps();
        x[j] = (const float *)s->x + (j < s->T ? j : 0) * s->x_stride;
    }
    size_t es = D == TX8_DTYPE_F32 ? 4 : D == TX8_DTYPE_I8 ? 1 : 2;
    for (unsigned b = 0; b < s->nblk; b++) {
        size_t col = (size_t)s->cols[b] * TX8_SPARSE_BLOCK;
        const uint8_t *wp = s->w + (size_t)b * TX8_SPARSE_BLOCK * es;
        __m256 wv[4];
#pragma GCC unroll 4
        for (unsigned q = 0; q < 4; q++)
            wv[q] = load8(wp, q * 8, D);
        if (D == TX8_DTYPE_I8) {
            __m256 sv = _mm256_set1_ps(s->scales[col / s->group]);
#pragma GCC unroll 4
            for (unsigned q = 0; q < 4; q++)
                wv[q] = _mm256_mul_ps(wv[q], sv);
        }
#pragma GCC unroll 4
        for (unsigned j = 0; j < s->T; j++)
#pragma GCC unroll 4
            for (unsigned q = 0; q < 4; q++)
                acc[j] = _mm256_fmadd_ps(wv[q], _mm256_loadu_ps(x[j] + col + q * 8), acc[j]);
    }
#pragma GCC unroll 4
    for (unsigned j = 0; j < s->T; j++)
        s->out[j * s->out_stride] += hsum8(acc[j]);
}

static void mm_sparse_f32(const struct mm_sparse *s)
{
    switch (s->dtype) {
    case TX8_DTYPE_F16:
        sparse_f32(s, TX8_DTYPE_F16);
        break;
    case TX8_DTYPE_BF16:
        sparse_f32(s, TX8_DTYPE_BF16);
        break;
    case TX8_DTYPE_I8:
        sparse_f32(s, TX8_DTYPE_I8);
        break;
    default:
        sparse_f32(s, TX8_DTYPE_F32);
        break;
    }
}

static void mm_sparse_i8(const struct mm_sparse *s)
{
    const int8_t *x[8];
    float res[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    unsigned T = s->T;
#pragma GCC unroll 4
    for (unsigned j = 0; j < 8; j++)
        x[j] = (const int8_t *)s->x + (j < T ? j : 0) * s->x_stride;
    unsigned b = 0;
    while (b < s->nblk) {
        size_t g = (size_t)s->cols[b] * TX8_SPARSE_BLOCK / s->group;
        __m256i acc[8];
#pragma GCC unroll 8
        for (unsigned j = 0; j < 8; j++)
            acc[j] = _mm256_setzero_si256();
        for (; b < s->nblk && (size_t)s->cols[b] * TX8_SPARSE_BLOCK / s->group == g; b++) {
            size_t col = (size_t)s->cols[b] * TX8_SPARSE_BLOCK;
            const int8_t *wp = (const int8_t *)s->w + (size_t)b * TX8_SPARSE_BLOCK;
            __m256i w0 = ld16x8(wp), w1 = ld16x8(wp + 16);
#pragma GCC unroll 4
            for (unsigned j = 0; j < T; j++) {
                acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(ld16x8(x[j] + col), w0));
                acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(ld16x8(x[j] + col + 16), w1));
            }
        }
#pragma GCC unroll 4
        for (unsigned j = 0; j < T; j++)
            res[j] += s->scales[g] * (float)hsum_epi32(acc[j]);
    }
#pragma GCC unroll 4
    for (unsigned j = 0; j < T; j++)
        s->out[j * s->out_stride] += res[j];
}

static float dot_f32(const float *a, const float *b, size_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void axpy_f32(float *y, float a, const float *x, size_t n)
{
    __m256 av = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    /* the tail fused as a vector lane: MOE_FFN's sum is one fma per term
     * on every path (include/tx8/tx8_hw.h), which also makes it batch
     * invariant wherever the range ends */
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

static void scale_f32(float *y, float a, size_t n)
{
    __m256 av = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(av, _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] *= a;
}

static size_t cols_scan(const uint16_t *c, size_t n, unsigned *max)
{
    __m256i m = _mm256_setzero_si256();
    size_t d = 0, b = 1;
    if (n == 0) {
        *max = 0;
        return 0;
    }
    for (; b + 16 <= n; b += 16) {
        __m256i cur = _mm256_loadu_si256((const __m256i *)(const void *)(c + b));
        __m256i prev = _mm256_loadu_si256((const __m256i *)(const void *)(c + b - 1));
        m = _mm256_max_epu16(m, cur);
        /* cur <= prev  <=>  max(cur, prev) == prev */
        __m256i le = _mm256_cmpeq_epi16(_mm256_max_epu16(cur, prev), prev);
        d += (size_t)__builtin_popcount((unsigned)_mm256_movemask_epi8(le)) / 2;
    }
    unsigned mx = c[0];
    for (; b < n; b++) {
        mx = c[b] > mx ? c[b] : mx;
        d += c[b] <= c[b - 1];
    }
    __m128i q = _mm_max_epu16(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    q = _mm_minpos_epu16(_mm_xor_si128(q, _mm_set1_epi16(-1)));
    unsigned vm = 0xffffu ^ (unsigned)_mm_extract_epi16(q, 0);
    *max = vm > mx ? vm : mx;
    return d;
}

/* exp(x) for x <= 0, as the AVX-512 version (2^n by exponent arithmetic). */
AI __m256 exp_ps(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    __m256 tiny = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(x, lo);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* n >= -126 here, so 2^n is a normal number: (n + 127) << 23 */
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 res = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(tiny, res);
}

/* silu(g) * u with e = exp(-|g|) (exp_ps's domain): g >= 0: g / (1 + e),
 * else g * e / (1 + e) */
AI __m256 silu_mul8(__m256 g, __m256 u)
{
    __m256 ng = _mm256_sub_ps(_mm256_setzero_ps(), g);
    __m256 e = exp_ps(_mm256_min_ps(g, ng));
    __m256 num = _mm256_blendv_ps(g, _mm256_mul_ps(g, e), g);
    return _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

static void silu_mul(float *h, const float *u, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(h + i, silu_mul8(_mm256_loadu_ps(h + i), _mm256_loadu_ps(u + i)));
    for (; i < n; i++) {
        float g = h[i];
        h[i] = g / (1.0f + expf(-g)) * u[i];
    }
}

/* batch-invariant jobs: the tail through the vector function too, so that
 * an element's value does not depend on where a caller's range ends */
static void silu_mul_bi(float *h, const float *u, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(h + i, silu_mul8(_mm256_loadu_ps(h + i), _mm256_loadu_ps(u + i)));
    if (i < n) {
        float hb[8] = {0}, ub[8] = {0};
        memcpy(hb, h + i, (n - i) * 4);
        memcpy(ub, u + i, (n - i) * 4);
        _mm256_storeu_ps(hb, silu_mul8(_mm256_loadu_ps(hb), _mm256_loadu_ps(ub)));
        memcpy(h + i, hb, (n - i) * 4);
    }
}

static float exp_sum(float *s, size_t n, float max)
{
    __m256 mv = _mm256_set1_ps(max), acc = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + i), mv));
        _mm256_storeu_ps(s + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = hsum8(acc);
    for (; i < n; i++) {
        s[i] = expf(s[i] - max);
        sum += s[i];
    }
    return sum;
}

/* O += P V: tiles of 4 heads x 8 dims in registers (scalar tail dims). */
static void pv_f32(float *o, size_t ldo, const float *p, size_t ldp, size_t nh, const float *v,
                   size_t ldv, size_t n, size_t vd)
{
    for (size_t h = 0; h < nh; h += 4) {
        size_t hn = nh - h < 4 ? nh - h : 4;
        size_t d = 0;
        /* 4 rows x 16 dims: two V loads and four broadcasts feed eight FMAs
         * (each element's sum runs over j in the same order as below) */
        for (; hn == 4 && d + 16 <= vd; d += 16) {
            __m256 a0[4], a1[4];
#pragma GCC unroll 4
            for (unsigned i = 0; i < 4; i++) {
                a0[i] = _mm256_loadu_ps(o + (h + i) * ldo + d);
                a1[i] = _mm256_loadu_ps(o + (h + i) * ldo + d + 8);
            }
            for (size_t j = 0; j < n; j++) {
                __m256 v0 = _mm256_loadu_ps(v + j * ldv + d),
                       v1 = _mm256_loadu_ps(v + j * ldv + d + 8);
#pragma GCC unroll 4
                for (unsigned i = 0; i < 4; i++) {
                    __m256 pb = _mm256_set1_ps(p[(h + i) * ldp + j]);
                    a0[i] = _mm256_fmadd_ps(pb, v0, a0[i]);
                    a1[i] = _mm256_fmadd_ps(pb, v1, a1[i]);
                }
            }
#pragma GCC unroll 4
            for (unsigned i = 0; i < 4; i++) {
                _mm256_storeu_ps(o + (h + i) * ldo + d, a0[i]);
                _mm256_storeu_ps(o + (h + i) * ldo + d + 8, a1[i]);
            }
        }
        for (; d + 8 <= vd; d += 8) {
            __m256 acc[4];
#pragma GCC unroll 4
            for (unsigned i = 0; i < 4; i++)
                acc[i] = i < hn ? _mm256_loadu_ps(o + (h + i) * ldo + d) : _mm256_setzero_ps();
            for (size_t j = 0; j < n; j++) {
                __m256 vv = _mm256_loadu_ps(v + j * ldv + d);
#pragma GCC unroll 4
                for (unsigned i = 0; i < 4; i++)
                    if (i < hn)
                        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(p[(h + i) * ldp + j]), vv, acc[i]);
            }
#pragma GCC unroll 4
            for (unsigned i = 0; i < 4; i++)
                if (i < hn)
                    _mm256_storeu_ps(o + (h + i) * ldo + d, acc[i]);
        }
        for (; d < vd; d++)
            for (size_t i = 0; i < hn; i++) {
                float s = o[(h + i) * ldo + d];
                for (size_t j = 0; j < n; j++)
                    s += p[(h + i) * ldp + j] * v[j * ldv + d];
                o[(h + i) * ldo + d] = s;
            }
    }
}

static void to_f32(float *dst, const void *src, unsigned dtype, size_t n)
{
    const uint8_t *s = src;
    size_t i = 0;
    if (dtype == TX8_DTYPE_F32) {
        memmove(dst, src, n * 4);
        return;
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, load8(s, i, dtype));
    for (; i < n; i++)
        dst[i] = w_scalar(s, i, dtype);
}

AI __m128i f32_to_bf16(__m256 v)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    /* NaN: |u| > 0x7f800000 (signed compare is fine for 31-bit values) */
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, q, nan);
    /* pack 8 x u32 (< 65536) to u16 */
    __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    return _mm_packus_epi32(lo, hi);
}

static void from_f32(void *dst, const float *src, unsigned dtype, size_t n)
{
    uint16_t *d = dst;
    size_t i = 0;
    if (dtype == TX8_DTYPE_F32) {
        memmove(dst, src, n * 4);
        return;
    }
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(src + i);
        __m128i h =
            dtype == TX8_DTYPE_F16 ? _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT) : f32_to_bf16(v);
        _mm_storeu_si128((__m128i *)(void *)(d + i), h);
    }
    for (; i < n; i++)
        d[i] = dtype == TX8_DTYPE_F16 ? tx_f32_to_f16(src[i]) : tx_f32_to_bf16(src[i]);
}

/* Q8_0 / Q4_0 blocks (an f16 scale, then 32 int8 or 16 bytes of two
 * 4-bit values, low nibble first) to f32: q * d, as the scalar decode */
static void kv_block_to_f32(float *dst, const void *src, unsigned dtype, size_t n)
{
    const uint8_t *s = src;
    int q4 = dtype == TX8_DTYPE_Q4_0;
    size_t bs = q4 ? 18 : 34;
    const __m128i lo4 = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
    for (size_t b = 0; b < n / TX8_KV_BLOCK; b++, s += bs) {
        uint16_t h;
        memcpy(&h, s, 2);
        __m256 d = _mm256_set1_ps(tx_f16_to_f32(h));
        __m128i q0, q1; /* the 32 values as int8, in order */
        if (q4) {
            __m128i p = _mm_loadu_si128((const __m128i *)(const void *)(s + 2));
            __m128i l = _mm_and_si128(p, lo4), u = _mm_and_si128(_mm_srli_epi16(p, 4), lo4);
            q0 = _mm_sub_epi8(_mm_unpacklo_epi8(l, u), eight);
            q1 = _mm_sub_epi8(_mm_unpackhi_epi8(l, u), eight);
        } else {
            q0 = _mm_loadu_si128((const __m128i *)(const void *)(s + 2));
            q1 = _mm_loadu_si128((const __m128i *)(const void *)(s + 18));
        }
        float *o = dst + b * TX8_KV_BLOCK;
        const __m128i qs[2] = {q0, q1};
        for (int i = 0; i < 2; i++) {
            __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(qs[i]));
            __m256 c = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(qs[i], 8)));
            _mm256_storeu_ps(o + i * 16, _mm256_mul_ps(a, d));
            _mm256_storeu_ps(o + i * 16 + 8, _mm256_mul_ps(c, d));
        }
    }
}

const struct eng_kernels eng_kernels_avx2 = {
    .isa = TX8_ISA_AVX2,
    .gemv_rows = 4,
    .gemv_rows_bi = 4,
    .gemv_rows_i8_bi = 4,
    .gemm_tokens = 4,
    .act_u8 = 0,
    .mm_tile_f32 = mm_tile_f32,
    .mm_tile_i8 = mm_tile_i8,
    .mm_sparse_f32 = mm_sparse_f32,
    .mm_sparse_i8 = mm_sparse_i8,
    .dot_f32 = dot_f32,
    .axpy_f32 = axpy_f32,
    .scale_f32 = scale_f32,
    .cols_scan = cols_scan,
    .exp_sum = exp_sum,
    .silu_mul = silu_mul,
    .quant_row = eng_quant_row,
    .silu_mul_bi = silu_mul_bi,
    .pv_f32 = pv_f32,
    .kv_block_to_f32 = kv_block_to_f32,
    .to_f32 = to_f32,
    .from_f32 = from_f32,
    .mm_small_f32 = mm_small_f32,
    .small_max = 32,
    .small_tokens = 4,
    .small_rows = {0, 4, SMALL_RM(2), SMALL_RM(3), SMALL_RM(4)},
};
