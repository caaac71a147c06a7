/* SPDX-License-Identifier: MIT */
/*
 * The TX8's number formats, part of the hardware interface: scalar
 * conversions between float and the device's 16- and 8-bit types, and the
 * sizes and names of its dtypes. Shared by the device model (emu/), libtx
 * and the tools; the SDK spells it <tx/tx_dtype.h>. User space only (the
 * kernel never converts numbers). Bit-exact IEEE-754 binary16 and bfloat16
 * with round-to-nearest-even; NaN stays NaN, overflow goes to Inf.
 */
#ifndef TX8_DTYPE_H
#define TX8_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tx8/tx8_hw.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint32_t tx_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float tx_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* bfloat16 */
static inline uint16_t tx_f32_to_bf16(float f)
{
    uint32_t u = tx_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float tx_bf16_to_f32(uint16_t h)
{
    return tx_bits_f32((uint32_t)h << 16);
}

/* IEEE binary16 */
static inline float tx_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* Inf / NaN */
        return tx_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return tx_bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return tx_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t tx_f32_to_f16(float f)
{
    uint32_t u = tx_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u);
    if (abs >= 0x477ff000u) /* rounds to >= 65520: Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) { /* below 2^-14: subnormal or zero */
        /* add 0.5 in the f32 domain so the FPU rounds to nearest even */
        float v = tx_bits_f32(abs) + 0.5f;
        return (uint16_t)(sign | (uint16_t)(tx_f32_bits(v) - 0x3f000000u));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd; /* rebias exponent, round to even */
    return (uint16_t)(sign | (uint16_t)(abs >> 13));
}

/*
 * FP8 E4M3 "FN" (OCP FP8 E4M3, PyTorch's float8_e4m3fn: the element type
 * of the Hugging Face FP8 checkpoints, safetensors dtype F8_E4M3): 1 sign,
 * 4 exponent (bias 7) and 3 mantissa bits; no infinities; S.1111.111 (0x7f,
 * 0xff) is NaN; largest finite value 448 (0x7e); subnormals m * 2^-9.
 * Decoding is exact in float.
 */
static inline float tx_e4m3_to_f32(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t exp = (b >> 3) & 0xfu, man = b & 7u;
    if (exp == 0xfu && man == 7u) /* NaN */
        return tx_bits_f32(sign | 0x7fc00000u);
    if (exp == 0) { /* zero or subnormal: man * 2^-9 */
        float v = (float)man * (1.0f / 512.0f);
        return sign ? -v : v;
    }
    return tx_bits_f32(sign | ((exp + 120u) << 23) | (man << 20));
}

/* Round to nearest even, as PyTorch's conversion to float8_e4m3fn: a
 * magnitude above 464 (the midpoint between 448 and the missing 480),
 * infinity and NaN give NaN (0x7f with the sign); (448, 464] gives 448. */
static inline uint8_t tx_f32_to_e4m3(float f)
{
    uint32_t u = tx_f32_bits(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x43e80000u) /* > 464, Inf, NaN */
        return (uint8_t)(sign | 0x7fu);
    if (abs < 0x3c800000u) { /* below 2^-6: subnormal or zero */
        /* 2^14 + x: the FPU rounds x to a multiple of 2^-9, to even */
        float v = tx_bits_f32(abs) + 16384.0f;
        return (uint8_t)(sign | (uint8_t)(tx_f32_bits(v) - 0x46800000u));
    }
    abs += 0x7ffffu + ((abs >> 20) & 1u); /* round the 20 dropped bits to even */
    return (uint8_t)(sign | (uint8_t)((abs >> 20) - (120u << 3)));
}

/* Bytes per element of a tx8 dtype (0 for an unknown one). */
static inline size_t tx_dtype_size(unsigned dtype)
{
    switch (dtype) {
    case TX8_DTYPE_F32:
    case TX8_DTYPE_I32:
        return 4;
    case TX8_DTYPE_F16:
    case TX8_DTYPE_BF16:
        return 2;
    case TX8_DTYPE_I8:
    case TX8_DTYPE_F8_E4M3:
        return 1;
    default:
        return 0;
    }
}

/* "f32", "f16", "bf16", "i8", "i32", "q8_0", "q4_0", "fp8" or "?" */
static inline const char *tx_dtype_name(unsigned dtype)
{
    static const char *const names[] = {"f32", "f16", "bf16", "i8", "i32"};
    if (dtype == TX8_DTYPE_F8_E4M3)
        return "fp8";
    if (dtype == TX8_DTYPE_Q8_0)
        return "q8_0";
    if (dtype == TX8_DTYPE_Q4_0)
        return "q4_0";
    return dtype < TX8_DTYPE_COUNT ? names[dtype] : "?";
}

/* 1 for the KV-cache block types (TX8_DTYPE_Q8_0, TX8_DTYPE_Q4_0) */
static inline int tx_dtype_is_block(unsigned dtype)
{
    return dtype == TX8_DTYPE_Q8_0 || dtype == TX8_DTYPE_Q4_0;
}

/* Bytes of n consecutive elements of dtype along a row (for a block type
 * n is a multiple of TX8_KV_BLOCK); 0 for an unknown dtype. */
static inline uint64_t tx_dtype_row_bytes(unsigned dtype, uint64_t n)
{
    if (dtype == TX8_DTYPE_Q8_0)
        return n / TX8_KV_BLOCK * 34;
    if (dtype == TX8_DTYPE_Q4_0)
        return n / TX8_KV_BLOCK * 18;
    return n * tx_dtype_size(dtype);
}

#ifdef __cplusplus
}
#endif

#endif /* TX8_DTYPE_H */
