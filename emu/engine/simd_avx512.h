/* SPDX-License-Identifier: MIT */
/*
 * Inline AVX-512 helpers shared by the engine's AVX-512 files
 * (kern_avx512.c, attn_avx512.c, attn_decode_avx512.c). Include only from *_avx512.c, which the
 * Makefile compiles with the AVX-512 flags.
 */
#ifndef TX8_ENGINE_SIMD_AVX512_H
#define TX8_ENGINE_SIMD_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "tx/tx_dtype.h"

/* exp(x), meant for x <= 0 (softmax): 2^n * p(r), r = x - n ln2, degree-6
 * polynomial (relative error ~2e-7, ~1 ulp); arguments below -87.3 give 0
 * (-inf included). */
__attribute__((always_inline)) static inline __m512 eng_exp512(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.33654f);
    __mmask16 tiny = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_ps(x, lo);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_mov_ps(~tiny, _mm512_scalef_ps(p, n));
}

/* 16 E4M3 codes -> f32,
 * bit-exact with tx_e4m3_to_f32: normals by rebiasing the exponent in the
 * integer lanes, subnormals as m * 2^-9 (no denormal operand), the NaN
 * codes as quiet NaN, then the sign. */
__attribute__((always_inline)) static inline __m512 eng_e4m3x16(__m128i bytes)
{
    __m512i b = _mm512_cvtepu8_epi32(bytes);
    __m512i em = _mm512_and_si512(b, _mm512_set1_epi32(0x7f));
    __m512i v = _mm512_add_epi32(_mm512_slli_epi32(em, 20), _mm512_set1_epi32(120 << 23));
    __m512i sub =
        _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(em), _mm512_set1_ps(1.0f / 512.0f)));
    v = _mm512_mask_mov_epi32(v, _mm512_cmplt_epi32_mask(em, _mm512_set1_epi32(8)), sub);
    v = _mm512_mask_mov_epi32(v, _mm512_cmpeq_epi32_mask(em, _mm512_set1_epi32(0x7f)),
                              _mm512_set1_epi32(0x7fc00000));
    v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24));
    return _mm512_castsi512_ps(v);
}

/* 16 f32 from element k of a row of type dtype (F32, F16, BF16, I8, FP8
 * codes decoded without their scales) */
__attribute__((always_inline)) static inline __m512 eng_load16(const uint8_t *w, size_t k, unsigned dtype)
{
    switch (dtype) {
    case TX8_DTYPE_F16:
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(w + k * 2)));
    case TX8_DTYPE_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(w + k * 2))),
            16));
    case TX8_DTYPE_I8:
        return _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(w + k))));
    case TX8_DTYPE_F8_E4M3:
        return eng_e4m3x16(_mm_loadu_si128((const __m128i *)(const void *)(w + k)));
    default:
        return _mm512_loadu_ps((const float *)(const void *)(w + k * 4));
    }
}

#endif
