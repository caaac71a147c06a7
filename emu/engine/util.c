/* SPDX-License-Identifier: MIT */
/*
 * Engine helpers shared by all ISAs: activation quantisation, the
 * counter-based random generator and the expert cache model.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/*
 * Symmetric per-row int8 quantisation: scale = max|x| / 127 over the finite
 * elements, q = round-to-nearest-even(x * (127 / max|x|)) clamped to
 * [-127, 127] (NaN -> 0, +-Inf -> +-127). With u8, q + 128 is stored (the
 * unsigned operand of VNNI's vpdpbusd). Returns the scale (0 for a zero row).
 */
float eng_quant_row(const float *x, size_t n, int8_t *q, int u8)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax && a != INFINITY)
            amax = a;
    }
    float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    uint8_t off = u8 ? 128 : 0;
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * inv;
        if (isnan(v)) /* NaN input, or 0 * Inf for a denormal max */
            v = 0.0f;
        else if (v > 127.0f)
            v = 127.0f;
        else if (v < -127.0f)
            v = -127.0f;
        if (isinf(x[i]))
            v = x[i] > 0 ? 127.0f : -127.0f;
        int iv = (int)nearbyintf(v);
        q[i] = (int8_t)(uint8_t)((uint8_t)iv + off);
    }
    return amax / 127.0f;
}

static uint64_t splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* u = 53 random bits of splitmix64(seed ^ splitmix64(counter)) / 2^53 */
double eng_rand_uniform(uint64_t seed, uint64_t counter)
{
    uint64_t h = splitmix64(seed ^ splitmix64(counter));
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- KV-cache block types (interface 1.6, docs/hardware.md) -------------- */

void eng_kv_to_f32(const struct eng_kernels *k, float *dst, const void *src, unsigned dt, size_t n)
{
    const uint8_t *s = src;
    if (tx_dtype_is_block(dt) && k->kv_block_to_f32) {
        k->kv_block_to_f32(dst, src, dt, n);
    } else if (dt == TX8_DTYPE_Q8_0) {
        for (size_t b = 0; b < n / TX8_KV_BLOCK; b++, s += 34) {
            uint16_t h;
            memcpy(&h, s, 2);
            float d = tx_f16_to_f32(h);
            const int8_t *q = (const int8_t *)(s + 2);
            float *o = dst + b * TX8_KV_BLOCK;
            for (int i = 0; i < TX8_KV_BLOCK; i++)
                o[i] = (float)q[i] * d;
        }
    } else if (dt == TX8_DTYPE_Q4_0) {
        for (size_t b = 0; b < n / TX8_KV_BLOCK; b++, s += 18) {
            uint16_t h;
            memcpy(&h, s, 2);
            float d = tx_f16_to_f32(h);
            const uint8_t *q = s + 2;
            float *o = dst + b * TX8_KV_BLOCK;
            for (int i = 0; i < TX8_KV_BLOCK / 2; i++) {
                o[2 * i] = (float)((int)(q[i] & 15) - 8) * d;
                o[2 * i + 1] = (float)((int)(q[i] >> 4) - 8) * d;
            }
        }
    } else {
        k->to_f32(dst, src, dt, n);
    }
}

static int clampi(float v, int lo, int hi)
{
    if (isnan(v))
        return 0;
    int i = (int)nearbyintf(v < (float)lo ? (float)lo : v > (float)hi ? (float)hi : v);
    return i;
}

void eng_kv_from_f32(const struct eng_kernels *k, void *dst, const float *src, unsigned dt,
                     size_t n)
{
    uint8_t *o = dst;
    if (dt != TX8_DTYPE_Q8_0 && dt != TX8_DTYPE_Q4_0) {
        k->from_f32(dst, src, dt, n);
        return;
    }
    int q4 = dt == TX8_DTYPE_Q4_0;
    float qmax = q4 ? 7.0f : 127.0f;
    for (size_t b = 0; b < n / TX8_KV_BLOCK; b++) {
        const float *x = src + b * TX8_KV_BLOCK;
        float amax = 0.0f;
        for (int i = 0; i < TX8_KV_BLOCK; i++) {
            float a = fabsf(x[i]);
            if (a > amax && a != INFINITY)
                amax = a;
        }
        uint16_t h = tx_f32_to_f16(amax / qmax);
        float d = tx_f16_to_f32(h);
        float inv = d > 0.0f ? 1.0f / d : 0.0f;
        memcpy(o, &h, 2);
        if (q4) {
            for (int i = 0; i < TX8_KV_BLOCK / 2; i++) {
                int lo = clampi(x[2 * i] * inv, -8, 7) + 8, hi = clampi(x[2 * i + 1] * inv, -8, 7) + 8;
                o[2 + i] = (uint8_t)(lo | (hi << 4));
            }
            o += 18;
        } else {
            for (int i = 0; i < TX8_KV_BLOCK; i++)
                o[2 + i] = (uint8_t)(int8_t)clampi(x[i] * inv, -127, 127);
            o += 34;
        }
    }
}
