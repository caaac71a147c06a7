/* SPDX-License-Identifier: MIT */
/*
 * Portable C kernels: the reference implementation of every kernel of
 * struct eng_kernels, used on CPUs without AVX2 and as a forced path for
 * testing (TX8_ENGINE_ISA=portable).
 */
#include <math.h>
#include <string.h>

#include "engine_internal.h"

#define CHUNK 256

/* Weight elements [k, k + n) of a row as f32 (I8, FP8: times their scales). */
static void load_w(float *dst, const uint8_t *w, unsigned dtype, size_t k, size_t n,
                   const float *scales, size_t group)
{
    switch (dtype) {
    case TX8_DTYPE_F32:
        memmove(dst, w + k * 4, n * 4);
        break;
    case TX8_DTYPE_F16: {
        const uint16_t *p = (const uint16_t *)(const void *)w + k;
        for (size_t i = 0; i < n; i++)
            dst[i] = tx_f16_to_f32(p[i]);
        break;
    }
    case TX8_DTYPE_BF16: {
        const uint16_t *p = (const uint16_t *)(const void *)w + k;
        for (size_t i = 0; i < n; i++)
            dst[i] = tx_bf16_to_f32(p[i]);
        break;
    }
    case TX8_DTYPE_I8: {
        const int8_t *p = (const int8_t *)w + k;
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)p[i] * scales[(k + i) / group];
        break;
    }
    case TX8_DTYPE_F8_E4M3: { /* the engine's FP8 reference: e4m3 x scale, one rounding */
        const uint8_t *p = w + k;
        for (size_t i = 0; i < n; i++)
            dst[i] = tx_e4m3_to_f32(p[i]) * scales[(k + i) / group];
        break;
    }
    }
}

static float dot_f32(const float *a, const float *b, size_t n)
{
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static void mm_tile_f32(const struct mm_tile *t)
{
    float buf[CHUNK];
    for (unsigned r = 0; r < t->R; r++) {
        const uint8_t *w = t->w + r * t->w_stride;
        const float *sc = t->scales ? t->scales + r * t->scale_stride : NULL;
        float acc[4] = {0, 0, 0, 0};
        for (size_t k = t->k0; k < t->k1; k += CHUNK) {
            size_t n = t->k1 - k < CHUNK ? t->k1 - k : CHUNK;
            load_w(buf, w, t->dtype, k, n, sc, t->group);
            for (unsigned tt = 0; tt < t->T; tt++)
                acc[tt] += dot_f32(buf, (const float *)t->x + tt * t->x_stride + k, n);
        }
        for (unsigned tt = 0; tt < t->T; tt++)
            t->out[tt * t->out_stride + r] += acc[tt];
    }
}

static void mm_tile_i8(const struct mm_tile *t)
{
    for (unsigned r = 0; r < t->R; r++) {
        const int8_t *w = (const int8_t *)(t->w + r * t->w_stride);
        const float *sc = t->scales + r * t->scale_stride;
        for (unsigned tt = 0; tt < t->T; tt++) {
            const int8_t *x = (const int8_t *)t->x + tt * t->x_stride;
            float acc = 0;
            for (size_t k0 = t->k0; k0 < t->k1;) {
                size_t g = k0 / t->group, kend = (g + 1) * t->group;
                if (kend > t->k1)
                    kend = t->k1;
                /* int32 accumulation, wrapping like the SIMD kernels */
                uint32_t s = 0;
                for (size_t k = k0; k < kend; k++)
                    s += (uint32_t)((int32_t)x[k] * (int32_t)w[k]);
                acc += sc[g] * (float)(int32_t)s;
                k0 = kend;
            }
            t->out[tt * t->out_stride + r] += acc;
        }
    }
}

static void mm_sparse_f32(const struct mm_sparse *s)
{
    float buf[TX8_SPARSE_BLOCK];
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t es = tx_dtype_size(s->dtype);
    for (unsigned b = 0; b < s->nblk; b++) {
        size_t col = (size_t)s->cols[b] * TX8_SPARSE_BLOCK;
        const float *sc = NULL;
        float one;
        if (s->dtype == TX8_DTYPE_I8) {
            one = s->scales[col / s->group];
            sc = &one;
        }
        load_w(buf, s->w + (size_t)b * TX8_SPARSE_BLOCK * es, s->dtype, 0, TX8_SPARSE_BLOCK, sc,
               TX8_SPARSE_BLOCK);
        for (unsigned t = 0; t < s->T; t++)
            acc[t] += dot_f32(buf, (const float *)s->x + t * s->x_stride + col, TX8_SPARSE_BLOCK);
    }
    for (unsigned t = 0; t < s->T; t++)
        s->out[t * s->out_stride] += acc[t];
}

static void mm_sparse_i8(const struct mm_sparse *s)
{
    for (unsigned t = 0; t < s->T; t++) {
        const int8_t *x = (const int8_t *)s->x + t * s->x_stride;
        float acc = 0;
        uint32_t gs = 0;
        size_t cur_g = SIZE_MAX;
        for (unsigned b = 0; b < s->nblk; b++) {
            size_t col = (size_t)s->cols[b] * TX8_SPARSE_BLOCK;
            size_t g = col / s->group;
            if (g != cur_g) {
                if (cur_g != SIZE_MAX)
                    acc += s->scales[cur_g] * (float)(int32_t)gs;
                gs = 0;
                cur_g = g;
            }
            const int8_t *w = (const int8_t *)s->w + (size_t)b * TX8_SPARSE_BLOCK;
            for (unsigned i = 0; i < TX8_SPARSE_BLOCK; i++)
                gs += (uint32_t)((int32_t)x[col + i] * (int32_t)w[i]);
        }
        if (cur_g != SIZE_MAX)
            acc += s->scales[cur_g] * (float)(int32_t)gs;
        s->out[t * s->out_stride] += acc;
    }
}

/* fused, like the vector paths: MOE_FFN's sum is defined as one fma per
 * term (include/tx8/tx8_hw.h) */
static void axpy_f32(float *y, float a, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

static void scale_f32(float *y, float a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] *= a;
}

static size_t cols_scan(const uint16_t *c, size_t n, unsigned *max)
{
    unsigned m = 0;
    size_t d = 0;
    for (size_t b = 0; b < n; b++) {
        m = c[b] > m ? c[b] : m;
        d += b > 0 && c[b] <= c[b - 1];
    }
    *max = m;
    return d;
}

static void silu_mul(float *h, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = h[i];
        h[i] = g / (1.0f + expf(-g)) * u[i];
    }
}

static float exp_sum(float *s, size_t n, float max)
{
    float sum = 0;
    for (size_t i = 0; i < n; i++) {
        s[i] = expf(s[i] - max);
        sum += s[i];
    }
    return sum;
}

static void pv_f32(float *o, size_t ldo, const float *p, size_t ldp, size_t nh, const float *v,
                   size_t ldv, size_t n, size_t vd)
{
    for (size_t h = 0; h < nh; h++)
        for (size_t j = 0; j < n; j++) {
            float pj = p[h * ldp + j];
            if (pj != 0.0f)
                axpy_f32(o + h * ldo, pj, v + j * ldv, vd);
        }
}

static void to_f32(float *dst, const void *src, unsigned dtype, size_t n)
{
    load_w(dst, src, dtype, 0, n, NULL, 1);
}

static void from_f32(void *dst, const float *src, unsigned dtype, size_t n)
{
    switch (dtype) {
    case TX8_DTYPE_F32:
        memmove(dst, src, n * 4);
        break;
    case TX8_DTYPE_F16: {
        uint16_t *p = dst;
        for (size_t i = 0; i < n; i++)
            p[i] = tx_f32_to_f16(src[i]);
        break;
    }
    case TX8_DTYPE_BF16: {
        uint16_t *p = dst;
        for (size_t i = 0; i < n; i++)
            p[i] = tx_f32_to_bf16(src[i]);
        break;
    }
    }
}

const struct eng_kernels eng_kernels_portable = {
    .isa = TX8_ISA_PORTABLE,
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
    .pv_f32 = pv_f32,
    .to_f32 = to_f32,
    .from_f32 = from_f32,
};
