/* SPDX-License-Identifier: MIT */
/* tx-bench: streaming read kernel with AVX-512 (compiled with SIMD_AVX512). */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "bench.h"

uint64_t txb_read_avx512(const void *buf, size_t bytes, int prefetch)
{
    const __m512i *p = buf;
    size_t n = bytes / 64;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    if (prefetch) {
        /* as the engine's GEMV kernels: 1 KiB ahead, every line */
        for (; i + 4 <= n; i += 4) {
            _mm_prefetch((const char *)(p + i) + 1024, _MM_HINT_T0);
            _mm_prefetch((const char *)(p + i) + 1088, _MM_HINT_T0);
            _mm_prefetch((const char *)(p + i) + 1152, _MM_HINT_T0);
            _mm_prefetch((const char *)(p + i) + 1216, _MM_HINT_T0);
            a0 = _mm512_xor_si512(a0, _mm512_load_si512(p + i));
            a1 = _mm512_xor_si512(a1, _mm512_load_si512(p + i + 1));
            a2 = _mm512_xor_si512(a2, _mm512_load_si512(p + i + 2));
            a3 = _mm512_xor_si512(a3, _mm512_load_si512(p + i + 3));
        }
    }
    for (; i + 4 <= n; i += 4) {
        a0 = _mm512_xor_si512(a0, _mm512_load_si512(p + i));
        a1 = _mm512_xor_si512(a1, _mm512_load_si512(p + i + 1));
        a2 = _mm512_xor_si512(a2, _mm512_load_si512(p + i + 2));
        a3 = _mm512_xor_si512(a3, _mm512_load_si512(p + i + 3));
    }
    for (; i < n; i++)
        a0 = _mm512_xor_si512(a0, _mm512_load_si512(p + i));
    a0 = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    return (uint64_t)_mm512_reduce_add_epi64(a0);
}
