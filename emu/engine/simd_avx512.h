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

#include <tx8/tx8_dtype.h>

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

/* 16 E4M3 codes -> f32, bit-exact with tx_e4m3_to_f32: the code's sign
 * and 7 magnitude bits placed at f32 bits 31 and 26..20 (sign-extend,
 * shift, mask) are 2^-120 times the value, normal or subnormal (an exact
 * power-of-two multiply, f32 denormal operands included: the engine never
 * sets DAZ), then the NaN codes (0x7f, 0xff) as a quiet NaN (8 operations
 * per 16 codes; tx_e4m3_to_f32 keeps the NaN's sign, a NaN either way). */
__attribute__((always_inline)) static inline __m512 eng_e4m3x16(__m128i bytes)
{
    __m512i v = _mm512_and_si512(_mm512_slli_epi32(_mm512_cvtepi8_epi32(bytes), 20),
                                 _mm512_set1_epi32((int)0x87f00000u));
    __m512 f = _mm512_mul_ps(_mm512_castsi512_ps(v), _mm512_set1_ps(0x1p120f));
    __mmask16 nan =
        _mm_cmpeq_epi8_mask(_mm_and_si128(bytes, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7f));
    return _mm512_mask_mov_ps(f, nan, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
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
