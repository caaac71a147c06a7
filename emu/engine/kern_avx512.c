/* SPDX-License-Identifier: MIT */
/*
 * AVX-512 kernels (F, BW, VL, DQ, VNNI). Compiled with SIMD_AVX512 flags;
 * only called when the CPU supports them (tx8_engine_isa_supported).
 *
 * INT8 x INT8 uses vpdpbusd, which multiplies unsigned by signed bytes:
 * activations are stored as u = q + 128 (eng_quant_row with u8), so
 *   sum(u * w) = sum(q * w) + 128 * sum(w),
 * and sum(w) is accumulated alongside with vpdpbusd(ones, w) per weight
 * row, then subtracted. Everything stays exact in int32 (per 64-byte step a
 * lane grows by at most 4 * 255 * 127, so K up to ~1M elements is safe).
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "engine_internal.h"
#include "simd_avx512.h"

#define AI __attribute__((always_inline)) static inline

/* Software prefetch distance (bytes) of the GEMV weight streams (T == 1,
 * 8 rows at a time): measured to add ~10% per-core bandwidth here. */
#ifndef ENG_PREFETCH
#define ENG_PREFETCH 1024
#endif
/* The FP8 GEMV's distance: its steps are compute-bound (decode, then the
 * f32 FMA), so a line must be asked for further ahead than for the float
 * streams: tx-bench --cpu-time -t 1 -s 136 -d int8,fp8 -p 1, FP8 GB/s per
 * CPU-second at 1024 / 2048 / 4096 / 8192 / 16384 bytes: 8.4-9.0 / 10.2-10.3
 * / 10.4-11.0 / 10.6-10.8 / 9.9-10.3 (INT8 12-14; Xeon family 6 model 207,
 * 2 vCPUs, load average 10-21) */
#ifndef ENG_PREFETCH_F8
#define ENG_PREFETCH_F8 4096
#endif
#define ES(D) ((D) == TX8_DTYPE_F32 ? 4 : (D) == TX8_DTYPE_I8 || (D) == TX8_DTYPE_F8_E4M3 ? 1 : 2)
/* weights multiplied by scales (I8 per row / group, FP8 per block) */
#define SCALED(D) ((D) == TX8_DTYPE_I8 || (D) == TX8_DTYPE_F8_E4M3)

/* ---- loads -------------------------------------------------------------- */


AI __m512 load16m(const uint8_t *w, size_t k, unsigned dtype, __mmask16 m)
{
    switch (dtype) {
    case TX8_DTYPE_F16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + k * 2));
    case TX8_DTYPE_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, w + k * 2)), 16));
    case TX8_DTYPE_I8:
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, w + k)));
    case TX8_DTYPE_F8_E4M3:
        return eng_e4m3x16(_mm_maskz_loadu_epi8(m, w + k));
    default:
        return _mm512_maskz_loadu_ps(m, w + k * 4);
    }
}

AI __mmask16 mask16(size_t n)
{
    return (__mmask16)((1u << n) - 1u);
}

AI __mmask64 mask64(size_t n)
{
    return n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
}

/* ---- f32 tile ----------------------------------------------------------- */

/* lane-wise a + b of f32 (F) or int32 lanes */
AI __m512i add_lanes(__m512i a, __m512i b, const int F)
{
    return F ? _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b)))
             : _mm512_add_epi32(a, b);
}

/* Horizontal sums of v[0..n) (n <= 8; v[j] for j >= n taken as zero) in
 * one tree, f32 (F) or int32 lanes: sum[(j & 3) * 4 + (j >> 2)] = the sum
 * of v[j]'s 16 lanes (int32: the caller keeps every sum within int32). */
AI void hsum8x_lanes(const __m512i *v, const unsigned n, void *sum, const int F)
{
    __m512i a[8], b[4], c[2];
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; j++)
        a[j] = j < n ? v[j] : _mm512_setzero_si512();
        /* 256-bit halves: b[i] = [a(2i) lo + hi | a(2i+1) lo + hi] */
#pragma GCC unroll 4
    for (unsigned i = 0; i < 4; i++)
        b[i] = add_lanes(_mm512_shuffle_i32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_i32x4(a[2 * i], a[2 * i + 1], 0xEE), F);
        /* 128-bit lanes: c[i] = [a(4i) | a(4i+1) | a(4i+2) | a(4i+3)], 4 each */
#pragma GCC unroll 2
    for (unsigned i = 0; i < 2; i++)
        c[i] = add_lanes(_mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], 0xDD), F);
    /* within the lanes: lane L ends as [a(L), a(4 + L), a(L), a(4 + L)] */
    __m512i d =
        add_lanes(_mm512_unpacklo_epi32(c[0], c[1]), _mm512_unpackhi_epi32(c[0], c[1]), F);
    d = add_lanes(d, _mm512_shuffle_epi32(d, (_MM_PERM_ENUM)0x4E), F);
    _mm512_storeu_si512(sum, d);
}

AI void hsum8x(const __m512 *v, const unsigned n, float *sum)
{
    __m512i a[8];
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; j++)
        a[j] = j < n ? _mm512_castps_si512(v[j]) : _mm512_setzero_si512();
    hsum8x_lanes(a, n, sum, 1);
}

/* RM weight rows (rows past t->R repeat the last one, results dropped),
 * T tokens, weight dtype D: all compile-time constants after inlining.
 * Each (row, token) has one accumulator chain whatever T and RM (batch
 * invariance, engine_internal.h); in batch-invariant jobs T == 1 (GEMV)
 * uses RM = 4 too, i.e. four independent chains over four weight streams,
 * with software prefetch (other jobs use row_dot1, below). */
AI void tile_f32_x(const struct mm_tile *t, const unsigned T, const unsigned D, const unsigned RM,
                   const int SM)
{
    __m512 acc[8][8];
    const uint8_t *w[8];
    const float *x[8];
    const float *sc[8];
#pragma GCC unroll 8
    for (unsigned r = 0; r < RM; r++) {
        unsigned rr = r < t->R ? r : t->R - 1;
        w[r] = t->w + rr * t->w_stride;
        sc[r] = t->scales ? t->scales + rr * t->scale_stride : NULL;
#pragma GCC unroll 8
        for (unsigned j = 0; j < T; j++)
            acc[r][j] = _mm512_setzero_ps();
    }
#pragma GCC unroll 8
    for (unsigned j = 0; j < T; j++)
        x[j] = (const float *)t->x + j * t->x_stride;

    size_t k = t->k0;
    while (k < t->k1) {
        size_t kend = t->k1;
        __m512 s[8];
        if (SCALED(D)) {
            size_t g = k / t->group;
            size_t ge = (g + 1) * t->group;
            if (ge < kend)
                kend = ge;
#pragma GCC unroll 8
            for (unsigned r = 0; r < RM; r++)
                s[r] = _mm512_set1_ps(sc[r][g]);
        }
        for (; k + 16 <= kend; k += 16) {
            __m512 wv[8];
            if (SM && ENG_PREFETCH && ((k * ES(D)) & 63) == 0) {
                /* the next row tile's line at this k, into L2: a tile's
                 * rows are separate 4 KiB pages at lm_head's K (tx8-emu's
                 * device memory has no huge pages), where the hardware
                 * prefetchers stop */
#pragma GCC unroll 8
                for (unsigned r = 0; r < RM; r++)
                    _mm_prefetch((const char *)(t->w + (RM + r) * t->w_stride + k * ES(D)),
                                 _MM_HINT_T1);
            }
            if (ENG_PREFETCH && T == 1 && ((k * ES(D)) & 63) == 0) {
#pragma GCC unroll 8
                for (unsigned r = 0; r < RM; r++)
                    _mm_prefetch((const char *)(w[r] + k * ES(D) + ENG_PREFETCH), _MM_HINT_T0);
            }
#pragma GCC unroll 8
            for (unsigned r = 0; r < RM; r++) {
                wv[r] = eng_load16(w[r], k, D);
                if (SCALED(D))
                    wv[r] = _mm512_mul_ps(wv[r], s[r]);
            }
#pragma GCC unroll 8
            for (unsigned j = 0; j < T; j++) {
                __m512 xv = _mm512_loadu_ps(x[j] + k);
                /* one load for the RM FMAs: keeps GCC from folding the
                 * load into each of them (RM loads of the same vector) */
                if (SM)
                    __asm__("" : "+v"(xv));
#pragma GCC unroll 8
                for (unsigned r = 0; r < RM; r++)
                    acc[r][j] = _mm512_fmadd_ps(wv[r], xv, acc[r][j]);
            }
        }
        if (k < kend) {
            __mmask16 m = mask16(kend - k);
            __m512 wv[8];
#pragma GCC unroll 8
            for (unsigned r = 0; r < RM; r++) {
                wv[r] = load16m(w[r], k, D, m);
                if (SCALED(D))
                    wv[r] = _mm512_mul_ps(wv[r], s[r]);
            }
#pragma GCC unroll 8
            for (unsigned j = 0; j < T; j++) {
                __m512 xv = _mm512_maskz_loadu_ps(m, x[j] + k);
#pragma GCC unroll 8
                for (unsigned r = 0; r < RM; r++)
                    acc[r][j] = _mm512_fmadd_ps(wv[r], xv, acc[r][j]);
            }
            k = kend;
        }
    }
    if (SM) {
        /* the T sums of a row at once (hsum8x) */
#pragma GCC unroll 8
        for (unsigned r = 0; r < RM; r++) {
            if (r >= t->R)
                break;
            float sum[16];
            hsum8x(acc[r], T, sum);
#pragma GCC unroll 8
            for (unsigned j = 0; j < T; j++)
                t->out[j * t->out_stride + r] += sum[(j & 3) * 4 + (j >> 2)];
        }
        return;
    }
#pragma GCC unroll 8
    for (unsigned r = 0; r < t->R; r++)
#pragma GCC unroll 8
        for (unsigned j = 0; j < T; j++)
            t->out[j * t->out_stride + r] += _mm512_reduce_add_ps(acc[r][j]);
}

AI void tile_f32(const struct mm_tile *t, const unsigned T, const unsigned D, const unsigned RM)
{
    tile_f32_x(t, T, D, RM, 0);
}

/*
 * GEMV (T == 1): one weight row at a time, 64 elements per step in four
 * independent FMA chains, with software prefetch: the chunk's weights are
 * read as one sequential stream, which the hardware prefetchers follow
 * better than 8 interleaved row streams (measured: f16 ~40 -> ~50 GB/s on
 * this machine's two cores).
 */
#ifndef ENG_GEMV_SEQ
#define ENG_GEMV_SEQ 1
#endif
/*
 * The FP8 GEMV's decode: 16 E4M3 codes (sign-extending load, vpmovsxbd)
 * times their block's scale, as f32, bit-identical to eng_e4m3x16(code) *
 * s with one multiply instead of two. eng_e4m3x16 forms v = 2^-120 x value
 * exactly (shift, mask) and then multiplies by 2^120; here v is multiplied
 * by s8 = s x 2^120 (exact while |s| < 2^8: no overflow), and v x s8 is the
 * same real number as value x s, rounded once: the same f32, subnormal
 * products included (the engine never sets DAZ/FTZ). 3 integer operations
 * and one multiply per 16 codes. Not for the NaN codes (0x7f, 0xff), which
 * this would read as 480: the callers check for them first.
 */
AI __m512 e4m3x16_scaled(const uint8_t *p, __m512 s8)
{
    const __m512i keep = _mm512_set1_epi32((int)0x87f00000u);
    __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(v, 20), keep)), s8);
}

/* Whether any of the 64 codes at p is a NaN code (S.1111.111) */
AI int e4m3x64_has_nan(__m512i raw)
{
    return _mm512_cmpeq_epi8_mask(_mm512_or_si512(raw, _mm512_set1_epi8((char)0x80)),
                                  _mm512_set1_epi8(-1)) != 0;
}

/*
 * The 64-element steps of an FP8 GEMV row over [k, k1) (k a multiple of
 * 64), in the F32 loops' four chains (a[0..3], element k + 16 c + lane in
 * chain c: row_dot1's), each code times its block's scale. Per block of
 * TX8_FP8_BLOCK columns: the scale read and checked once (no division per
 * step); per step, when the block's scale is below 2^8 and the 64 codes
 * hold no NaN code, e4m3x16_scaled, else the general decode (eng_e4m3x16
 * times the scale): the same f32 either way. Returns the first k not done
 * (fewer than 64 elements left).
 */
AI size_t fp8_row_steps(const uint8_t *w, const float *x, size_t k, size_t k1, const float *sc,
                        __m512 *a)
{
    while (k + 64 <= k1) {
        size_t bend = (k / TX8_FP8_BLOCK + 1) * TX8_FP8_BLOCK;
        if (bend > k1)
            bend = k1;
        const float s = sc[k / TX8_FP8_BLOCK];
        const int fast_s = fabsf(s) < 0x1p8f;
        const __m512 s8 = _mm512_set1_ps(s * 0x1p120f), sv = _mm512_set1_ps(s);
        for (; k + 64 <= bend; k += 64) {
            if (ENG_PREFETCH && eng_gemv_prefetch)
                _mm_prefetch((const char *)(w + k + ENG_PREFETCH_F8), _MM_HINT_T0);
            __m512 wv[4];
            if (fast_s && !e4m3x64_has_nan(_mm512_loadu_si512(w + k))) {
#pragma GCC unroll 4
                for (unsigned c = 0; c < 4; c++)
                    wv[c] = e4m3x16_scaled(w + k + 16 * c, s8);
            } else {
#pragma GCC unroll 4
                for (unsigned c = 0; c < 4; c++)
                    wv[c] = _mm512_mul_ps(eng_load16(w, k + 16 * c, TX8_DTYPE_F8_E4M3), sv);
            }
#pragma GCC unroll 4
            for (unsigned c = 0; c < 4; c++)
                a[c] = _mm512_fmadd_ps(wv[c], _mm512_loadu_ps(x + k + 16 * c), a[c]);
        }
    }
    return k;
}

AI float row_dot1(const uint8_t *w, const float *x, size_t k0, size_t k1, const unsigned D,
                  const float *sc, size_t group)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t k = k0;
    /* FP8: the F32 loops (so the same sums as f32 weights holding the
     * dequantised values), each vector times its block's scale: k0 is a
     * multiple of 64, so a 64-element step, and the < 64 left after the
     * steps, lie in one block of TX8_FP8_BLOCK columns */
    const int F8 = D == TX8_DTYPE_F8_E4M3;
    if (F8) {
        __m512 a[4] = {a0, a1, a2, a3};
        k = fp8_row_steps(w, x, k, k1, sc, a);
        a0 = a[0];
        a1 = a[1];
        a2 = a[2];
        a3 = a[3];
    } else if (D != TX8_DTYPE_I8) {
        for (; k + 64 <= k1; k += 64) {
            if (ENG_PREFETCH && eng_gemv_prefetch) {
                _mm_prefetch((const char *)(w + k * ES(D) + ENG_PREFETCH), _MM_HINT_T0);
                if (ES(D) >= 2)
                    _mm_prefetch((const char *)(w + k * ES(D) + 64 + ENG_PREFETCH), _MM_HINT_T0);
                if (ES(D) == 4) {
                    _mm_prefetch((const char *)(w + k * ES(D) + 128 + ENG_PREFETCH), _MM_HINT_T0);
                    _mm_prefetch((const char *)(w + k * ES(D) + 192 + ENG_PREFETCH), _MM_HINT_T0);
                }
            }
            a0 = _mm512_fmadd_ps(eng_load16(w, k, D), _mm512_loadu_ps(x + k), a0);
            a1 = _mm512_fmadd_ps(eng_load16(w, k + 16, D), _mm512_loadu_ps(x + k + 16), a1);
            a2 = _mm512_fmadd_ps(eng_load16(w, k + 32, D), _mm512_loadu_ps(x + k + 32), a2);
            a3 = _mm512_fmadd_ps(eng_load16(w, k + 48, D), _mm512_loadu_ps(x + k + 48), a3);
        }
    }
    while (k < k1) {
        size_t kend = k1;
        __m512 sv = _mm512_set1_ps(1.0f);
        if (D == TX8_DTYPE_I8) {
            size_t g = k / group;
            if ((g + 1) * group < kend)
                kend = (g + 1) * group;
            sv = _mm512_set1_ps(sc[g]);
        }
        if (F8)
            sv = _mm512_set1_ps(sc[k / group]);
        for (; k + 32 <= kend; k += 32) {
            __m512 w0 = eng_load16(w, k, D), w1 = eng_load16(w, k + 16, D);
            if (SCALED(D)) {
                w0 = _mm512_mul_ps(w0, sv);
                w1 = _mm512_mul_ps(w1, sv);
            }
            a2 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + k), a2);
            a3 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + k + 16), a3);
        }
        for (; k + 16 <= kend; k += 16) {
            __m512 wv = eng_load16(w, k, D);
            if (SCALED(D))
                wv = _mm512_mul_ps(wv, sv);
            a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + k), a0);
        }
        if (k < kend) {
            __mmask16 m = mask16(kend - k);
            __m512 wv = load16m(w, k, D, m);
            if (SCALED(D))
                wv = _mm512_mul_ps(wv, sv);
            a1 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + k), a1);
            k = kend;
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

#define TILE_F32_D(D)                                                                              \
    static void tile_f32_##D(const struct mm_tile *t)                                              \
    {                                                                                              \
        switch (t->T) {                                                                            \
        case 1:                                                                                    \
            if (t->bi) {                                                                           \
                tile_f32(t, 1, D, 4); /* the (row, token) chains of T = 2..6 */                    \
            } else if (ENG_GEMV_SEQ) {                                                             \
                for (unsigned r = 0; r < t->R; r++)                                                \
                    t->out[r] +=                                                                   \
                        row_dot1(t->w + r * t->w_stride, t->x, t->k0, t->k1, D,                    \
                                 t->scales ? t->scales + r * t->scale_stride : NULL, t->group);    \
            } else {                                                                               \
                tile_f32(t, 1, D, 8);                                                              \
            }                                                                                      \
            break;                                                                                 \
        case 2:                                                                                    \
            tile_f32(t, 2, D, 4);                                                                  \
            break;                                                                                 \
        case 3:                                                                                    \
            tile_f32(t, 3, D, 4);                                                                  \
            break;                                                                                 \
        case 4:                                                                                    \
            tile_f32(t, 4, D, 4);                                                                  \
            break;                                                                                 \
        case 5:                                                                                    \
            tile_f32(t, 5, D, 4);                                                                  \
            break;                                                                                 \
        default:                                                                                   \
            tile_f32(t, 6, D, 4);                                                                  \
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
 * T = 2..8 tokens per tile (activations f32), not batch-invariant:
 * RM = SMALL_RM(T) weight rows (8 for 2 tokens, 6 for 3-4, 3 for 5-8) so
 * that the RM x T accumulators, the RM weight vectors and the activation
 * vector fit the 32 registers with no spill; each weight vector is loaded
 * once per k step and feeds all T tokens (RM + T loads for RM x T FMAs),
 * and the next row tile is prefetched into L2. Up to 8 tokens are one
 * tile, so each weight row streams from memory once and the rows are
 * never read again from L2 for a second token tile. At lm_head's shape
 * (tx-bench --small-pages -s 593 -k 1024 -p 1,8 -d f32, wall time, three
 * alternating runs) 8 tokens took 16.6-19.1 ms as one 8 x 3 tile against
 * 24.9-31.0 ms as two 4 x 6 tiles (one token: 12.9-18.0 ms). An earlier
 * measurement in CPU time on a loaded host (--cpu-time) had favoured the
 * 4-token tiles; wall time is what a decode pass waits for.
 */
#define SMALL_RM(T) ((T) <= 2 ? 8 : (T) <= 4 ? 6 : 3)

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
        case 4:                                                                                    \
            tile_f32_x(t, 4, D, SMALL_RM(4), 1);                                                   \
            break;                                                                                 \
        case 5:                                                                                    \
            tile_f32_x(t, 5, D, SMALL_RM(5), 1);                                                   \
            break;                                                                                 \
        case 6:                                                                                    \
            tile_f32_x(t, 6, D, SMALL_RM(6), 1);                                                   \
            break;                                                                                 \
        case 7:                                                                                    \
            tile_f32_x(t, 7, D, SMALL_RM(7), 1);                                                   \
            break;                                                                                 \
        default:                                                                                   \
            tile_f32_x(t, 8, D, SMALL_RM(8), 1);                                                   \
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

/* ---- int8 tile (VNNI) --------------------------------------------------- */

AI int64_t hsum_epi32(__m512i v)
{
    __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v));
    __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(v, 1));
    return _mm512_reduce_add_epi64(_mm512_add_epi64(lo, hi));
}

AI void tile_i8(const struct mm_tile *t, const unsigned T, const unsigned RM)
{
    const __m512i ones = _mm512_set1_epi8(1);
    const uint8_t *w[8];
    const uint8_t *x[4];
    const float *sc[8];
    float res[8][4];
#pragma GCC unroll 8
    for (unsigned r = 0; r < RM; r++) {
        unsigned rr = r < t->R ? r : t->R - 1;
        w[r] = t->w + rr * t->w_stride;
        sc[r] = t->scales + rr * t->scale_stride;
#pragma GCC unroll 4
        for (unsigned j = 0; j < 4; j++)
            res[r][j] = 0;
    }
#pragma GCC unroll 4
    for (unsigned j = 0; j < T; j++)
        x[j] = (const uint8_t *)t->x + j * t->x_stride;

    size_t k = t->k0;
    while (k < t->k1) {
        size_t g = k / t->group;
        size_t kend = (g + 1) * t->group;
        if (kend > t->k1)
            kend = t->k1;
        __m512i acc[8][4], ws[8];
#pragma GCC unroll 8
        for (unsigned r = 0; r < RM; r++) {
            ws[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (unsigned j = 0; j < T; j++)
                acc[r][j] = _mm512_setzero_si512();
        }
        for (; k + 64 <= kend; k += 64) {
            __m512i wv[8];
            if (ENG_PREFETCH && T == 1) {
#pragma GCC unroll 8
                for (unsigned r = 0; r < RM; r++)
                    _mm_prefetch((const char *)(w[r] + k + ENG_PREFETCH), _MM_HINT_T0);
            }
            if (ENG_PREFETCH && T > 1) {
                /* small batches: the next row tile's line at this k (the
                 * rows of tx8-emu's device memory are 4 KiB pages where
                 * the hardware prefetchers stop; tx-bench --small-pages
                 * -s 256 -k 1024 -p 2,4,8 -d int8: 8 tokens 10.7-11.9 ms,
                 * was 17.2-18.9 ms) */
#pragma GCC unroll 8
                for (unsigned r = 0; r < RM; r++)
                    _mm_prefetch((const char *)(t->w + (RM + r) * t->w_stride + k), _MM_HINT_T0);
            }
#pragma GCC unroll 8
            for (unsigned r = 0; r < RM; r++) {
                wv[r] = _mm512_loadu_si512(w[r] + k);
                ws[r] = _mm512_dpbusd_epi32(ws[r], ones, wv[r]);
            }
#pragma GCC unroll 4
            for (unsigned j = 0; j < T; j++) {
                __m512i xv = _mm512_loadu_si512(x[j] + k);
#pragma GCC unroll 8
                for (unsigned r = 0; r < RM; r++)
                    acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv, wv[r]);
            }
        }
        if (k < kend) {
            __mmask64 m = mask64(kend - k);
            __m512i wv[8];
#pragma GCC unroll 8
            for (unsigned r = 0; r < RM; r++) {
                wv[r] = _mm512_maskz_loadu_epi8(m, w[r] + k);
                ws[r] = _mm512_dpbusd_epi32(ws[r], ones, wv[r]);
            }
#pragma GCC unroll 4
            for (unsigned j = 0; j < T; j++) {
                __m512i xv = _mm512_maskz_loadu_epi8(m, x[j] + k);
#pragma GCC unroll 8
                for (unsigned r = 0; r < RM; r++)
                    acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv, wv[r]);
            }
            k = kend;
        }
/* exact integer dot of this group, then its scale */
#pragma GCC unroll 8
        for (unsigned r = 0; r < RM; r++) {
            int64_t wsum = hsum_epi32(ws[r]);
#pragma GCC unroll 4
            for (unsigned j = 0; j < T; j++) {
                int64_t d = hsum_epi32(acc[r][j]) - 128 * wsum;
                res[r][j] += sc[r][g] * (float)d;
            }
        }
    }
#pragma GCC unroll 8
    for (unsigned r = 0; r < RM; r++)
#pragma GCC unroll 4
        for (unsigned j = 0; j < T; j++)
            if (r < t->R)
                t->out[j * t->out_stride + r] += res[r][j];
}

/*
 * Many scale groups in the range (per-group weight scales): the group's
 * exact int32 lanes are corrected lane-wise (acc - 128 * wsum), converted
 * and accumulated in f32 vectors with the group's scale; one reduction at
 * the end. Two tokens per call keep the 16 + 8 accumulators in registers.
 */
AI void tile_i8g(const struct mm_tile *t, const unsigned T)
{
    const __m512i ones = _mm512_set1_epi8(1);
    const uint8_t *w[4];
    const uint8_t *x[2];
    const float *sc[4];
    __m512 facc[4][2];
#pragma GCC unroll 4
    for (unsigned r = 0; r < 4; r++) {
        unsigned rr = r < t->R ? r : t->R - 1;
        w[r] = t->w + rr * t->w_stride;
        sc[r] = t->scales + rr * t->scale_stride;
#pragma GCC unroll 2
        for (unsigned j = 0; j < 2; j++)
            facc[r][j] = _mm512_setzero_ps();
    }
#pragma GCC unroll 2
    for (unsigned j = 0; j < T; j++)
        x[j] = (const uint8_t *)t->x + j * t->x_stride;

    size_t k = t->k0;
    while (k < t->k1) {
        size_t g = k / t->group;
        size_t kend = (g + 1) * t->group;
        if (kend > t->k1)
            kend = t->k1;
        __m512i acc[4][2], ws[4];
#pragma GCC unroll 4
        for (unsigned r = 0; r < 4; r++) {
            ws[r] = _mm512_setzero_si512();
#pragma GCC unroll 2
            for (unsigned j = 0; j < T; j++)
                acc[r][j] = _mm512_setzero_si512();
        }
        while (k < kend) {
            __mmask64 m = mask64(kend - k);
            __m512i wv[4];
            if (ENG_PREFETCH) { /* the next row tile, as in tile_i8 */
#pragma GCC unroll 4
                for (unsigned r = 0; r < 4; r++)
                    _mm_prefetch((const char *)(t->w + (4 + r) * t->w_stride + k), _MM_HINT_T0);
            }
#pragma GCC unroll 4
            for (unsigned r = 0; r < 4; r++) {
                wv[r] = _mm512_maskz_loadu_epi8(m, w[r] + k);
                ws[r] = _mm512_dpbusd_epi32(ws[r], ones, wv[r]);
            }
#pragma GCC unroll 2
            for (unsigned j = 0; j < T; j++) {
                __m512i xv = _mm512_maskz_loadu_epi8(m, x[j] + k);
#pragma GCC unroll 4
                for (unsigned r = 0; r < 4; r++)
                    acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv, wv[r]);
            }
            k = kend - k < 64 ? kend : k + 64;
        }
#pragma GCC unroll 4
        for (unsigned r = 0; r < 4; r++) {
            __m512 sv = _mm512_set1_ps(sc[r][g]);
            __m512i c = _mm512_slli_epi32(ws[r], 7);
#pragma GCC unroll 2
            for (unsigned j = 0; j < T; j++)
                facc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][j], c)), sv,
                                             facc[r][j]);
        }
    }
#pragma GCC unroll 4
    for (unsigned r = 0; r < t->R; r++)
#pragma GCC unroll 2
        for (unsigned j = 0; j < T; j++)
            t->out[j * t->out_stride + r] += _mm512_reduce_add_ps(facc[r][j]);
}

/* GEMV with int8 activations (u8 = q + 128): one row, 256 bytes per step. */
AI float row_dot1_i8(const uint8_t *w, const uint8_t *x, size_t k0, size_t k1, const float *sc,
                     size_t group)
{
    const __m512i ones = _mm512_set1_epi8(1);
    float res = 0;
    size_t k = k0;
    while (k < k1) {
        size_t g = k / group;
        size_t kend = (g + 1) * group;
        if (kend > k1)
            kend = k1;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
        __m512i s0 = a0, s1 = a0, s2 = a0, s3 = a0;
        for (; k + 256 <= kend; k += 256) {
            if (ENG_PREFETCH) {
                _mm_prefetch((const char *)(w + k + ENG_PREFETCH), _MM_HINT_T0);
                _mm_prefetch((const char *)(w + k + 64 + ENG_PREFETCH), _MM_HINT_T0);
                _mm_prefetch((const char *)(w + k + 128 + ENG_PREFETCH), _MM_HINT_T0);
                _mm_prefetch((const char *)(w + k + 192 + ENG_PREFETCH), _MM_HINT_T0);
            }
            __m512i w0 = _mm512_loadu_si512(w + k), w1 = _mm512_loadu_si512(w + k + 64);
            __m512i w2 = _mm512_loadu_si512(w + k + 128), w3 = _mm512_loadu_si512(w + k + 192);
            s0 = _mm512_dpbusd_epi32(s0, ones, w0);
            s1 = _mm512_dpbusd_epi32(s1, ones, w1);
            s2 = _mm512_dpbusd_epi32(s2, ones, w2);
            s3 = _mm512_dpbusd_epi32(s3, ones, w3);
            a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512(x + k), w0);
            a1 = _mm512_dpbusd_epi32(a1, _mm512_loadu_si512(x + k + 64), w1);
            a2 = _mm512_dpbusd_epi32(a2, _mm512_loadu_si512(x + k + 128), w2);
            a3 = _mm512_dpbusd_epi32(a3, _mm512_loadu_si512(x + k + 192), w3);
        }
        while (k < kend) {
            __mmask64 m = mask64(kend - k);
            __m512i wv = _mm512_maskz_loadu_epi8(m, w + k);
            s0 = _mm512_dpbusd_epi32(s0, ones, wv);
            a0 = _mm512_dpbusd_epi32(a0, _mm512_maskz_loadu_epi8(m, x + k), wv);
            k = kend - k < 64 ? kend : k + 64;
        }
        __m512i a = _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
        __m512i ws = _mm512_add_epi32(_mm512_add_epi32(s0, s1), _mm512_add_epi32(s2, s3));
        res += sc[g] * (float)(hsum_epi32(a) - 128 * hsum_epi32(ws));
    }
    return res;
}

/*
 * INT8 GEMM panel (T > 32 outside batch-invariant jobs, matmul.c): PANEL_R
 * weight rows whose range [k0, k1) lies in one scale group, against all
 * t->T tokens, in register tiles of PANEL_T tokens x PANEL_R rows (24 int32
 * accumulators, 4 weight vectors, 1 activation vector: 29 of the 32
 * registers; 10 loads per 24 vpdpbusd). The rows' sum(w) (the u8
 * correction) is computed once per call instead of once per token tile
 * (tile_i8 spends a fifth of its vpdpbusd on it), and each (row, token)
 * sum comes from one int32 shuffle tree per row. The integers are the
 * exact dot products tile_i8 forms, scaled the same way: results are
 * bit-identical to it. The rows (4 x (k1 - k0) bytes) stay in L1 while
 * the tokens' activations stream from L2.
 */
#define PANEL_R 4
#define PANEL_T 6

AI void panel_i8_x(const struct mm_tile *t, const uint8_t *const *w, const int32_t *wsum,
                   const float *s, size_t j0, const unsigned T)
{
    __m512i acc[PANEL_R][8];
    const uint8_t *x[PANEL_T];
#pragma GCC unroll 4
    for (unsigned r = 0; r < PANEL_R; r++)
#pragma GCC unroll 6
        for (unsigned j = 0; j < T; j++)
            acc[r][j] = _mm512_setzero_si512();
#pragma GCC unroll 6
    for (unsigned j = 0; j < T; j++)
        x[j] = (const uint8_t *)t->x + (j0 + j) * t->x_stride;
    size_t k = t->k0;
    for (; k + 64 <= t->k1; k += 64) {
        __m512i wv[PANEL_R];
#pragma GCC unroll 4
        for (unsigned r = 0; r < PANEL_R; r++)
            wv[r] = _mm512_loadu_si512(w[r] + k);
#pragma GCC unroll 6
        for (unsigned j = 0; j < T; j++) {
            __m512i xv = _mm512_loadu_si512(x[j] + k);
#pragma GCC unroll 4
            for (unsigned r = 0; r < PANEL_R; r++)
                acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv, wv[r]);
        }
    }
    if (k < t->k1) {
        __mmask64 m = mask64(t->k1 - k);
        __m512i wv[PANEL_R];
#pragma GCC unroll 4
        for (unsigned r = 0; r < PANEL_R; r++)
            wv[r] = _mm512_maskz_loadu_epi8(m, w[r] + k);
#pragma GCC unroll 6
        for (unsigned j = 0; j < T; j++) {
            __m512i xv = _mm512_maskz_loadu_epi8(m, x[j] + k);
#pragma GCC unroll 4
            for (unsigned r = 0; r < PANEL_R; r++)
                acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv, wv[r]);
        }
    }
#pragma GCC unroll 4
    for (unsigned r = 0; r < PANEL_R; r++) {
        if (r >= t->R)
            break;
        int32_t sum[16];
        hsum8x_lanes(acc[r], T, sum, 0);
#pragma GCC unroll 6
        for (unsigned j = 0; j < T; j++) {
            int64_t d = (int64_t)sum[(j & 3) * 4 + (j >> 2)] - 128 * (int64_t)wsum[r];
            t->out[(j0 + j) * t->out_stride + r] += s[r] * (float)d;
        }
    }
}

static void mm_panel_i8(const struct mm_tile *t)
{
    const __m512i ones = _mm512_set1_epi8(1);
    const uint8_t *w[PANEL_R];
    int32_t wsum[PANEL_R];
    float s[PANEL_R];
    const size_t g = t->k0 / t->group;
    for (unsigned r = 0; r < PANEL_R; r++) {
        unsigned rr = r < t->R ? r : t->R - 1;
        w[r] = t->w + rr * t->w_stride;
        s[r] = t->scales[rr * t->scale_stride + g];
        __m512i a = _mm512_setzero_si512();
        for (size_t k = t->k0; k < t->k1; k += 64)
            a = _mm512_dpbusd_epi32(a, ones, _mm512_maskz_loadu_epi8(mask64(t->k1 - k), w[r] + k));
        wsum[r] = (int32_t)hsum_epi32(a);
    }
    size_t j = 0;
    for (; j + PANEL_T <= t->T; j += PANEL_T)
        panel_i8_x(t, w, wsum, s, j, PANEL_T);
    switch (t->T - j) {
    case 0:
        break;
    case 1:
        panel_i8_x(t, w, wsum, s, j, 1);
        break;
    case 2:
        panel_i8_x(t, w, wsum, s, j, 2);
        break;
    case 3:
        panel_i8_x(t, w, wsum, s, j, 3);
        break;
    case 4:
        panel_i8_x(t, w, wsum, s, j, 4);
        break;
    default:
        panel_i8_x(t, w, wsum, s, j, 5);
        break;
    }
}

static void mm_tile_i8(const struct mm_tile *t)
{
    if (ENG_GEMV_SEQ && t->T == 1 && t->k1 - t->k0 <= t->group) {
        for (unsigned r = 0; r < t->R; r++)
            t->out[r] += row_dot1_i8(t->w + r * t->w_stride, t->x, t->k0, t->k1,
                                     t->scales + r * t->scale_stride, t->group);
        return;
    }
    if (t->k1 - t->k0 > t->group) {
        /* several groups: vector accumulation, two tokens at a time */
        struct mm_tile h = *t;
        for (unsigned r = 0; r < t->R; r += 4) {
            h.R = t->R - r < 4 ? t->R - r : 4;
            h.w = t->w + r * t->w_stride;
            h.scales = t->scales + r * t->scale_stride;
            for (unsigned j = 0; j < t->T; j += 2) {
                h.T = t->T - j < 2 ? t->T - j : 2;
                h.x = (const uint8_t *)t->x + j * t->x_stride;
                h.out = t->out + j * t->out_stride + r;
                if (h.T == 1)
                    tile_i8g(&h, 1);
                else
                    tile_i8g(&h, 2);
            }
        }
        return;
    }
    switch (t->T) {
    case 1:
        tile_i8(t, 1, 8);
        break;
    case 2:
        tile_i8(t, 2, 4);
        break;
    case 3:
        tile_i8(t, 3, 4);
        break;
    default:
        tile_i8(t, 4, 4);
        break;
    }
}

/* ---- block-sparse rows -------------------------------------------------- */

/* Dispatch on the token count of a sparse row (1..ENG_SPARSE_T). */
#define SWITCH_T8(T, CALL)                                                                         \
    switch (T) {                                                                                   \
    case 1:                                                                                        \
        CALL(1);                                                                                   \
        break;                                                                                     \
    case 2:                                                                                        \
        CALL(2);                                                                                   \
        break;                                                                                     \
    case 3:                                                                                        \
        CALL(3);                                                                                   \
        break;                                                                                     \
    case 4:                                                                                        \
        CALL(4);                                                                                   \
        break;                                                                                     \
    case 5:                                                                                        \
        CALL(5);                                                                                   \
        break;                                                                                     \
    case 6:                                                                                        \
        CALL(6);                                                                                   \
        break;                                                                                     \
    case 7:                                                                                        \
        CALL(7);                                                                                   \
        break;                                                                                     \
    default:                                                                                       \
        CALL(8);                                                                                   \
        break;                                                                                     \
    }

AI void sparse_f32(const struct mm_sparse *s, const unsigned D, const unsigned T)
{
    __m512 acc[8], acc2[8]; /* two chains per token: FMA latency */
    const float *x[8];
#pragma GCC unroll 8
    for (unsigned j = 0; j < T; j++) {
        acc[j] = _mm512_setzero_ps();
        acc2[j] = _mm512_setzero_ps();
        x[j] = (const float *)s->x + j * s->x_stride;
    }
    const size_t es = ES(D);
    for (unsigned b = 0; b < s->nblk; b++) {
        size_t col = (size_t)s->cols[b] * TX8_SPARSE_BLOCK;
        const uint8_t *wp = s->w + (size_t)b * TX8_SPARSE_BLOCK * es;
        __m512 w0 = eng_load16(wp, 0, D), w1 = eng_load16(wp, 16, D);
        if (D == TX8_DTYPE_I8) {
            __m512 sv = _mm512_set1_ps(s->scales[col / s->group]);
            w0 = _mm512_mul_ps(w0, sv);
            w1 = _mm512_mul_ps(w1, sv);
        }
#pragma GCC unroll 8
        for (unsigned j = 0; j < T; j++) {
            acc[j] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[j] + col), acc[j]);
            acc2[j] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x[j] + col + 16), acc2[j]);
        }
    }
#pragma GCC unroll 8
    for (unsigned j = 0; j < T; j++)
        s->out[j * s->out_stride] += _mm512_reduce_add_ps(_mm512_add_ps(acc[j], acc2[j]));
}

#define SPARSE_F32_D(D)                                                                            \
    static void sparse_f32_##D(const struct mm_sparse *s)                                          \
    {                                                                                              \
        SWITCH_T8(s->T, SPARSE_F32_CALL_##D)                                                       \
    }
#define SPARSE_F32_CALL_0(T) sparse_f32(s, 0, T)
#define SPARSE_F32_CALL_1(T) sparse_f32(s, 1, T)
#define SPARSE_F32_CALL_2(T) sparse_f32(s, 2, T)
#define SPARSE_F32_CALL_3(T) sparse_f32(s, 3, T)
SPARSE_F32_D(0)
SPARSE_F32_D(1)
SPARSE_F32_D(2)
SPARSE_F32_D(3)

static void mm_sparse_f32(const struct mm_sparse *s)
{
    switch (s->dtype) {
    case TX8_DTYPE_F16:
        sparse_f32_1(s);
        break;
    case TX8_DTYPE_BF16:
        sparse_f32_2(s);
        break;
    case TX8_DTYPE_I8:
        sparse_f32_3(s);
        break;
    default:
        sparse_f32_0(s);
        break;
    }
}

AI int64_t hsum256_epi32(__m256i v)
{
    __m512i w = _mm512_cvtepi32_epi64(v);
    return _mm512_reduce_add_epi64(w);
}

/* One 32-byte block = one 256-bit vpdpbusd per token; the weight sum for
 * the +128 correction is shared by the tokens. */
AI void sparse_i8(const struct mm_sparse *s, const unsigned T)
{
    const __m256i ones = _mm256_set1_epi8(1);
    const uint8_t *x[8];
    float res[8];
#pragma GCC unroll 8
    for (unsigned j = 0; j < T; j++) {
        x[j] = (const uint8_t *)s->x + j * s->x_stride;
        res[j] = 0;
    }
    unsigned b = 0;
    while (b < s->nblk) {
        size_t g = (size_t)s->cols[b] * TX8_SPARSE_BLOCK / s->group;
        size_t gend = (g + 1) * s->group;
        /* NA independent accumulator sets so that few tokens do not wait
         * on one vpdpbusd latency chain */
        const unsigned NA = T == 1 ? 4 : T <= 3 ? 2 : 1;
        __m256i acc[4][8], ws[4];
#pragma GCC unroll 4
        for (unsigned a = 0; a < NA; a++) {
            ws[a] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (unsigned j = 0; j < T; j++)
                acc[a][j] = _mm256_setzero_si256();
        }
        /* all consecutive blocks of this group */
        int done = 0;
        while (!done) {
#pragma GCC unroll 4
            for (unsigned a = 0; a < NA; a++) {
                size_t col = b < s->nblk ? (size_t)s->cols[b] * TX8_SPARSE_BLOCK : gend;
                if (col >= gend) {
                    done = 1;
                    break;
                }
                __m256i wv = _mm256_loadu_si256(
                    (const __m256i *)(const void *)(s->w + (size_t)b * TX8_SPARSE_BLOCK));
                ws[a] = _mm256_dpbusd_epi32(ws[a], ones, wv);
#pragma GCC unroll 8
                for (unsigned j = 0; j < T; j++)
                    acc[a][j] = _mm256_dpbusd_epi32(
                        acc[a][j], _mm256_loadu_si256((const __m256i *)(const void *)(x[j] + col)),
                        wv);
                b++;
            }
        }
#pragma GCC unroll 4
        for (unsigned a = 1; a < NA; a++) {
            ws[0] = _mm256_add_epi32(ws[0], ws[a]);
#pragma GCC unroll 8
            for (unsigned j = 0; j < T; j++)
                acc[0][j] = _mm256_add_epi32(acc[0][j], acc[a][j]);
        }
        int64_t wsum = hsum256_epi32(ws[0]);
#pragma GCC unroll 8
        for (unsigned j = 0; j < T; j++)
            res[j] += s->scales[g] * (float)(hsum256_epi32(acc[0][j]) - 128 * wsum);
    }
#pragma GCC unroll 8
    for (unsigned j = 0; j < T; j++)
        s->out[j * s->out_stride] += res[j];
}

/* One token, all blocks in one scale group (per-row scales): two blocks
 * per 512-bit vpdpbusd (the weights of consecutive stored blocks are
 * contiguous; the two activation blocks are combined with one insert), in
 * two independent chains, with no group bookkeeping per block. */
static void sparse_i8_1(const struct mm_sparse *s)
{
    const __m512i ones = _mm512_set1_epi8(1);
    const uint8_t *x = s->x, *w = s->w;
    const uint16_t *cb = s->cols;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, s0 = a0, s1 = a0;
    unsigned b = 0, n = s->nblk;
#define XB(I) _mm256_loadu_si256((const __m256i *)(const void *)(x + (size_t)cb[I] * 32))
    for (; b + 4 <= n; b += 4) {
        __m512i w0 = _mm512_loadu_si512(w + (size_t)b * 32);
        __m512i w1 = _mm512_loadu_si512(w + (size_t)b * 32 + 64);
        __m512i x0 = _mm512_inserti64x4(_mm512_castsi256_si512(XB(b)), XB(b + 1), 1);
        __m512i x1 = _mm512_inserti64x4(_mm512_castsi256_si512(XB(b + 2)), XB(b + 3), 1);
        s0 = _mm512_dpbusd_epi32(s0, ones, w0);
        s1 = _mm512_dpbusd_epi32(s1, ones, w1);
        a0 = _mm512_dpbusd_epi32(a0, x0, w0);
        a1 = _mm512_dpbusd_epi32(a1, x1, w1);
    }
    for (; b < n; b++) {
        __m512i wv = _mm512_castsi256_si512(
            _mm256_loadu_si256((const __m256i *)(const void *)(w + (size_t)b * 32)));
        wv = _mm512_maskz_mov_epi32(0xff, wv);
        s0 = _mm512_dpbusd_epi32(s0, ones, wv);
        a0 = _mm512_dpbusd_epi32(a0, _mm512_maskz_mov_epi32(0xff, _mm512_castsi256_si512(XB(b))),
                                 wv);
    }
#undef XB
    __m512i a = _mm512_add_epi32(a0, a1), ws = _mm512_add_epi32(s0, s1);
    size_t g = (size_t)cb[0] * TX8_SPARSE_BLOCK / s->group;
    s->out[0] += s->scales[g] * (float)(hsum_epi32(a) - 128 * hsum_epi32(ws));
}

/* Eight tokens with interleaved activations: the block's 32 weight bytes
 * are broadcast to both halves of a register, each 512-bit activation load
 * holds two tokens' blocks, so one vpdpbusd does 2 x 32 x 4 MACs. */
static void sparse_i8_il(const struct mm_sparse *s)
{
    const __m512i ones = _mm512_set1_epi8(1);
    float res[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    unsigned b = 0;
    while (b < s->nblk) {
        size_t g = (size_t)s->cols[b] * TX8_SPARSE_BLOCK / s->group;
        size_t gend = (g + 1) * s->group;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, ws = a0;
        for (; b < s->nblk; b++) {
            size_t col = (size_t)s->cols[b] * TX8_SPARSE_BLOCK;
            if (col >= gend)
                break;
            __m512i wv = _mm512_broadcast_i64x4(
                _mm256_loadu_si256((const __m256i *)(const void *)(s->w + (size_t)b * 32)));
            const uint8_t *xp = s->x_il + (size_t)s->cols[b] * 256;
            ws = _mm512_dpbusd_epi32(ws, ones, wv);
            a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512(xp), wv);
            a1 = _mm512_dpbusd_epi32(a1, _mm512_loadu_si512(xp + 64), wv);
            a2 = _mm512_dpbusd_epi32(a2, _mm512_loadu_si512(xp + 128), wv);
            a3 = _mm512_dpbusd_epi32(a3, _mm512_loadu_si512(xp + 192), wv);
        }
        int64_t wsum = hsum256_epi32(_mm512_castsi512_si256(ws));
        float sc = s->scales[g];
        __m512i acc[4] = {a0, a1, a2, a3};
#pragma GCC unroll 4
        for (unsigned p = 0; p < 4; p++) {
            res[2 * p] += sc * (float)(hsum256_epi32(_mm512_castsi512_si256(acc[p])) - 128 * wsum);
            res[2 * p + 1] +=
                sc * (float)(hsum256_epi32(_mm512_extracti64x4_epi64(acc[p], 1)) - 128 * wsum);
        }
    }
    for (unsigned j = 0; j < 8; j++)
        s->out[j * s->out_stride] += res[j];
}

#define SPARSE_I8_CALL(T) sparse_i8(s, T)
static void mm_sparse_i8(const struct mm_sparse *s)
{
    if (s->x_il && s->T == 8) {
        sparse_i8_il(s);
        return;
    }
    if (s->T == 1 && s->nblk &&
        (size_t)s->cols[0] * TX8_SPARSE_BLOCK / s->group ==
            (size_t)s->cols[s->nblk - 1] * TX8_SPARSE_BLOCK / s->group) {
        sparse_i8_1(s);
        return;
    }
    SWITCH_T8(s->T, SPARSE_I8_CALL)
}

/* ---- vector helpers ----------------------------------------------------- */

static float dot_f32(const float *a, const float *b, size_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) {
        __mmask16 m = mask16(n - i);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

static void axpy_f32(float *y, float a, const float *x, size_t n)
{
    __m512 av = _mm512_set1_ps(a);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i,
                         _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = mask16(n - i);
        _mm512_mask_storeu_ps(
            y + i, m,
            _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
    }
}

static void scale_f32(float *y, float a, size_t n)
{
    __m512 av = _mm512_set1_ps(a);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(av, _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(av, _mm512_maskz_loadu_ps(m, y + i)));
    }
}

static size_t cols_scan(const uint16_t *c, size_t n, unsigned *max)
{
    __m512i m = _mm512_setzero_si512();
    size_t d = 0, b = 1;
    if (n == 0) {
        *max = 0;
        return 0;
    }
    for (; b + 32 <= n; b += 32) {
        __m512i cur = _mm512_loadu_si512(c + b), prev = _mm512_loadu_si512(c + b - 1);
        m = _mm512_max_epu16(m, cur);
        d += (size_t)__builtin_popcount(_mm512_cmple_epu16_mask(cur, prev));
    }
    unsigned mx = c[0];
    for (; b < n; b++) {
        mx = c[b] > mx ? c[b] : mx;
        d += c[b] <= c[b - 1];
    }
    __m256i h = _mm256_max_epu16(_mm512_castsi512_si256(m), _mm512_extracti64x4_epi64(m, 1));
    __m128i q = _mm_max_epu16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    /* max of 8 u16: min of their complements */
    q = _mm_minpos_epu16(_mm_xor_si128(q, _mm_set1_epi16(-1)));
    unsigned vm = 0xffffu ^ (unsigned)_mm_extract_epi16(q, 0);
    *max = vm > mx ? vm : mx;
    return d;
}

/* silu(g) * u with e = exp(-|g|) (exp_ps's domain): g >= 0: g / (1 + e),
 * else g * e / (1 + e) */
AI __m512 silu_mul16(__m512 g, __m512 u)
{
    __m512 ng = _mm512_sub_ps(_mm512_setzero_ps(), g);
    __m512 e = eng_exp512(_mm512_min_ps(g, ng));
    __mmask16 neg = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ);
    __m512 num = _mm512_mask_mul_ps(g, neg, g, e);
    return _mm512_mul_ps(_mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

static void silu_mul(float *h, const float *u, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(h + i, silu_mul16(_mm512_loadu_ps(h + i), _mm512_loadu_ps(u + i)));
    if (i < n) {
        __mmask16 m = mask16(n - i);
        _mm512_mask_storeu_ps(
            h + i, m, silu_mul16(_mm512_maskz_loadu_ps(m, h + i), _mm512_maskz_loadu_ps(m, u + i)));
    }
}

static float exp_sum(float *s, size_t n, float max)
{
    __m512 mv = _mm512_set1_ps(max), acc = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 e = eng_exp512(_mm512_sub_ps(_mm512_loadu_ps(s + i), mv));
        _mm512_storeu_ps(s + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (i < n) {
        __mmask16 m = mask16(n - i);
        __m512 e = eng_exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + i), mv));
        _mm512_mask_storeu_ps(s + i, m, e);
        acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(m, e));
    }
    return _mm512_reduce_add_ps(acc);
}

/* SAMPLE's vocabulary passes (engine_internal.h: the same results as the
 * scalar loops of ops_route.c) */
static size_t argmax_f32(const float *x, size_t n, float *max, size_t *n_max)
{
    __m512 acc = _mm512_set1_ps(-INFINITY);
    __mmask16 any = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __mmask16 ord = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
        acc = _mm512_mask_max_ps(acc, ord, acc, v);
        any |= ord;
    }
    if (i < n) {
        __mmask16 m = mask16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __mmask16 ord = _mm512_mask_cmp_ps_mask(m, v, v, _CMP_ORD_Q);
        acc = _mm512_mask_max_ps(acc, ord, acc, v);
        any |= ord;
    }
    if (!any) {
        *max = NAN;
        *n_max = 0;
        return 0;
    }
    __m512 bv = _mm512_set1_ps(_mm512_reduce_max_ps(acc));
    size_t best = n, cnt = 0;
    for (i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : mask16(n - i);
        __mmask16 eq = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, x + i), bv, _CMP_EQ_OQ);
        if (eq) {
            if (best == n)
                best = i + (size_t)__builtin_ctz(eq);
            cnt += (size_t)__builtin_popcount(eq);
        }
    }
    *max = x[best]; /* the first of the equal values (+0 or -0) */
    *n_max = cnt;
    return best;
}

static size_t first_gt_f32(const float *x, size_t n, float thr)
{
    __m512 t = _mm512_set1_ps(thr);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : mask16(n - i);
        __mmask16 gt = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, x + i), t, _CMP_GT_OQ);
        if (gt)
            return i + (size_t)__builtin_ctz(gt);
    }
    return n;
}

static void sample_z_f32(float *z, const float *l, size_t n, float max, double sel)
{
    const __m512d mx = _mm512_set1_pd((double)max), sv = _mm512_set1_pd(sel);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (size_t i = 0; i < n; i += 8) {
        __mmask8 m = n - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1u);
        __m256 v = _mm256_maskz_loadu_ps(m, l + i);
        __m256 r = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(v), mx), sv));
        /* NaN (unordered) or -inf: -inf */
        __mmask8 bad = _mm256_cmp_ps_mask(v, ninf, _CMP_EQ_UQ);
        r = _mm256_mask_mov_ps(r, bad, ninf);
        _mm256_mask_storeu_ps(z + i, m, r);
    }
}

/* O += P V: tiles of 4 heads x 16 dims in registers, one V load per key
 * shared by the 4 heads. */
static void pv_f32(float *o, size_t ldo, const float *p, size_t ldp, size_t nh, const float *v,
                   size_t ldv, size_t n, size_t vd)
{
    for (size_t h = 0; h < nh; h += 4) {
        size_t hn = nh - h < 4 ? nh - h : 4;
        for (size_t d = 0; d < vd; d += 16) {
            __mmask16 m = vd - d >= 16 ? (__mmask16)0xffff : mask16(vd - d);
            __m512 acc[4];
#pragma GCC unroll 4
            for (unsigned i = 0; i < 4; i++)
                acc[i] =
                    i < hn ? _mm512_maskz_loadu_ps(m, o + (h + i) * ldo + d) : _mm512_setzero_ps();
            for (size_t j = 0; j < n; j++) {
                __m512 vv = _mm512_maskz_loadu_ps(m, v + j * ldv + d);
#pragma GCC unroll 4
                for (unsigned i = 0; i < 4; i++)
                    if (i < hn)
                        acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(p[(h + i) * ldp + j]), vv, acc[i]);
            }
#pragma GCC unroll 4
            for (unsigned i = 0; i < 4; i++)
                if (i < hn)
                    _mm512_mask_storeu_ps(o + (h + i) * ldo + d, m, acc[i]);
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
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, eng_load16(s, i, dtype));
    if (i < n)
        _mm512_mask_storeu_ps(dst + i, mask16(n - i), load16m(s, i, dtype, mask16(n - i)));
}

/* f32 -> bf16 with round-to-nearest-even, NaN kept quiet (as tx_f32_to_bf16) */
AI __m256i f32_to_bf16(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    r = _mm512_mask_mov_epi32(r, nan, q);
    return _mm512_cvtepi32_epi16(r);
}

static void from_f32(void *dst, const float *src, unsigned dtype, size_t n)
{
    uint8_t *d = dst;
    size_t i = 0;
    if (dtype == TX8_DTYPE_F32) {
        memmove(dst, src, n * 4);
        return;
    }
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(src + i);
        __m256i h =
            dtype == TX8_DTYPE_F16 ? _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT) : f32_to_bf16(v);
        _mm256_storeu_si256((__m256i *)(void *)(d + i * 2), h);
    }
    if (i < n) {
        __mmask16 m = mask16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, src + i);
        __m256i h =
            dtype == TX8_DTYPE_F16 ? _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT) : f32_to_bf16(v);
        _mm256_mask_storeu_epi16(d + i * 2, m, h);
    }
}

/* ---- activation quantisation ------------------------------------------- */

/*
 * eng_quant_row (util.c), 16 lanes at a time, with the same result bit for
 * bit: amax = the largest finite |x| (a maximum does not depend on the
 * order), inv = 127 / amax in scalar code, then per element the same float
 * product x * inv, NaN -> 0, the clamp to [-127, 127], +-Inf -> +-127, and
 * round-to-nearest-even (roundscale in the default mode, as nearbyintf),
 * the offset added and truncated to a byte as the scalar code's casts do.
 */
static float quant_row(const float *x, size_t n, int8_t *q, int u8)
{
    const __m512 inf = _mm512_set1_ps(INFINITY);
    __m512 mx = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_abs_ps(_mm512_loadu_ps(x + i));
        mx = _mm512_mask_max_ps(mx, _mm512_cmp_ps_mask(a, inf, _CMP_LT_OQ), mx, a);
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 a = _mm512_abs_ps(_mm512_maskz_loadu_ps(m, x + i));
        mx = _mm512_mask_max_ps(mx, m & _mm512_cmp_ps_mask(a, inf, _CMP_LT_OQ), mx, a);
    }
    float amax = _mm512_reduce_max_ps(mx);
    float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    const __m512 vinv = _mm512_set1_ps(inv), hi = _mm512_set1_ps(127.0f),
                 lo = _mm512_set1_ps(-127.0f), zero = _mm512_setzero_ps();
    const __m512i off = _mm512_set1_epi32(u8 ? 128 : 0);
    for (i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
        __m512 v = _mm512_mul_ps(xv, vinv);
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), zero);
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        __mmask16 isinf = _mm512_cmp_ps_mask(_mm512_abs_ps(xv), inf, _CMP_EQ_OQ);
        v = _mm512_mask_mov_ps(v, isinf & _mm512_cmp_ps_mask(xv, zero, _CMP_GT_OQ), hi);
        v = _mm512_mask_mov_ps(v, isinf & _mm512_cmp_ps_mask(xv, zero, _CMP_LT_OQ), lo);
        v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512i iv = _mm512_add_epi32(_mm512_cvtps_epi32(v), off);
        _mm_mask_storeu_epi8(q + i, m, _mm512_cvtepi32_epi8(iv));
    }
    return amax / 127.0f;
}

const struct eng_kernels eng_kernels_avx512 = {
    .isa = TX8_ISA_AVX512,
    .gemv_rows = 8,
    .gemv_rows_bi = 4,
    .gemv_rows_i8_bi = 1,
    .gemm_tokens = 6,
    .sparse_il = 1,
    .act_u8 = 1,
    .mm_tile_f32 = mm_tile_f32,
    .mm_tile_i8 = mm_tile_i8,
    .mm_panel_i8 = mm_panel_i8,
    .panel_rows = PANEL_R,
    .mm_sparse_f32 = mm_sparse_f32,
    .mm_sparse_i8 = mm_sparse_i8,
    .dot_f32 = dot_f32,
    .axpy_f32 = axpy_f32,
    .scale_f32 = scale_f32,
    .cols_scan = cols_scan,
    .exp_sum = exp_sum,
    .argmax_f32 = argmax_f32,
    .first_gt_f32 = first_gt_f32,
    .sample_z_f32 = sample_z_f32,
    .silu_mul = silu_mul,
    .quant_row = quant_row,
    .pv_f32 = pv_f32,
    .to_f32 = to_f32,
    .from_f32 = from_f32,
    .mm_small_f32 = mm_small_f32,
    /* T > 8: the 6-token x 4-row tiles of mm_tile_f32 measured faster
     * (tx-bench -t 1 -s 1 -k 1024 -p 16: 90 vs 79 GFLOP/s) */
    .small_max = 8,
    .small_tokens = 8,
    .small_rows = {0, 4, SMALL_RM(2), SMALL_RM(3), SMALL_RM(4), SMALL_RM(5), SMALL_RM(6),
                   SMALL_RM(7), SMALL_RM(8)},
};

/* ---- BF16 x BF16 tiles (AVX512-BF16) ------------------------------------ */

/*
 * Only reached through eng_kernels.mm_tile_bf16, which the engine sets when
 * CPUID reports AVX512-BF16 (tx8_engine_has_feature): this file is built
 * without -mavx512bf16, the functions below carry the family themselves.
 *
 * Weights BF16, activations f32 rows that hold BF16 values (act_dtype
 * BF16) passed in their packed BF16 form (t->xb). vdpbf16ps multiplies
 * pairs of BF16 exactly and adds them to f32 lanes; it treats denormal
 * inputs as zero, so results may differ from the f32 kernels in the order
 * of the sums and in denormals only (within the documented BF16 tolerance).
 */
#define BF16_FN __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq")))

AI __mmask32 mask32(size_t n)
{
    return n >= 32 ? ~(__mmask32)0 : (__mmask32)((1u << n) - 1u);
}

BF16_FN AI __m512bh ldbh(const uint16_t *p)
{
    return (__m512bh)_mm512_loadu_si512(p);
}

BF16_FN AI __m512bh ldbhm(const uint16_t *p, __mmask32 m)
{
    return (__m512bh)_mm512_maskz_loadu_epi16(m, p);
}

BF16_FN AI void tile_bf16(const struct mm_tile *t, const unsigned T, const unsigned RM)
{
    __m512 acc[4][6];
    const uint16_t *w[4];
    const uint16_t *x[6];
#pragma GCC unroll 4
    for (unsigned r = 0; r < RM; r++) {
        unsigned rr = r < t->R ? r : t->R - 1;
        w[r] = (const uint16_t *)(const void *)(t->w + rr * t->w_stride);
#pragma GCC unroll 6
        for (unsigned j = 0; j < T; j++)
            acc[r][j] = _mm512_setzero_ps();
    }
#pragma GCC unroll 6
    for (unsigned j = 0; j < T; j++)
        x[j] = t->xb + j * t->xb_stride;
    size_t k = t->k0;
    for (; k + 32 <= t->k1; k += 32) {
        __m512bh wv[4];
        if (ENG_PREFETCH && T == 1) {
#pragma GCC unroll 4
            for (unsigned r = 0; r < RM; r++)
                _mm_prefetch((const char *)(w[r] + k) + ENG_PREFETCH, _MM_HINT_T0);
        }
#pragma GCC unroll 4
        for (unsigned r = 0; r < RM; r++)
            wv[r] = ldbh(w[r] + k);
#pragma GCC unroll 6
        for (unsigned j = 0; j < T; j++) {
            __m512bh xv = ldbh(x[j] + k);
#pragma GCC unroll 4
            for (unsigned r = 0; r < RM; r++)
                acc[r][j] = _mm512_dpbf16_ps(acc[r][j], wv[r], xv);
        }
    }
    if (k < t->k1) {
        __mmask32 m = mask32(t->k1 - k);
        __m512bh wv[4];
#pragma GCC unroll 4
        for (unsigned r = 0; r < RM; r++)
            wv[r] = ldbhm(w[r] + k, m);
#pragma GCC unroll 6
        for (unsigned j = 0; j < T; j++) {
            __m512bh xv = ldbhm(x[j] + k, m);
#pragma GCC unroll 4
            for (unsigned r = 0; r < RM; r++)
                acc[r][j] = _mm512_dpbf16_ps(acc[r][j], wv[r], xv);
        }
    }
    /* a row's T sums from one shuffle tree (hsum8x; each sum in the same
     * order whatever T) */
#pragma GCC unroll 4
    for (unsigned r = 0; r < RM; r++) {
        if (r >= t->R)
            break;
        float sum[16];
        hsum8x(acc[r], T, sum);
#pragma GCC unroll 6
        for (unsigned j = 0; j < T; j++)
            t->out[j * t->out_stride + r] += sum[(j & 3) * 4 + (j >> 2)];
    }
}

/* GEMV: the rows one after the other (one sequential stream, as row_dot1) */
BF16_FN static float row_dot_bf16(const uint16_t *w, const uint16_t *x, size_t k0, size_t k1)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    size_t k = k0;
    for (; k + 64 <= k1; k += 64) {
        if (ENG_PREFETCH) {
            _mm_prefetch((const char *)(w + k) + ENG_PREFETCH, _MM_HINT_T0);
            _mm_prefetch((const char *)(w + k) + 64 + ENG_PREFETCH, _MM_HINT_T0);
        }
        a0 = _mm512_dpbf16_ps(a0, ldbh(w + k), ldbh(x + k));
        a1 = _mm512_dpbf16_ps(a1, ldbh(w + k + 32), ldbh(x + k + 32));
    }
    for (; k < k1; k += 32) {
        __mmask32 m = mask32(k1 - k);
        a0 = _mm512_dpbf16_ps(a0, ldbhm(w + k, m), ldbhm(x + k, m));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

BF16_FN void eng_avx512bf16_tile(const struct mm_tile *t)
{
    switch (t->T) {
    case 1:
        if (t->bi) {
            tile_bf16(t, 1, 4); /* the vdpbf16ps chain of T = 2..6 */
            break;
        }
        for (unsigned r = 0; r < t->R; r++)
            t->out[r] += row_dot_bf16((const uint16_t *)(const void *)(t->w + r * t->w_stride),
                                      t->xb, t->k0, t->k1);
        break;
    case 2:
        tile_bf16(t, 2, 4);
        break;
    case 3:
        tile_bf16(t, 3, 4);
        break;
    case 4:
        tile_bf16(t, 4, 4);
        break;
    case 5:
        tile_bf16(t, 5, 4);
        break;
    default:
        tile_bf16(t, 6, 4);
        break;
    }
}
