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

