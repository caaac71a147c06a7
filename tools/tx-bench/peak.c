/* SPDX-License-Identifier: MIT */
/*
 * Expected compute peak of an engine ISA path, measured: the core clock
 * (a chain of dependent integer adds, one per cycle) and, per instruction
 * family, how many multiply-accumulate instructions one core retires per
 * cycle (independent chains of FMA / vpdpbusd / vdpbf16ps in registers).
 * peak = clock x instructions per cycle x MACs per instruction x 2 x
 * threads. Each family is run only when the CPU has it (the caller checks).
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bench.h"

/* The probes run in the calling thread's CPU time: on a host shared with
 * other jobs, time the thread spends descheduled does not count, so the
 * clock and the rates are those of a core while it runs this thread (the
 * figures --cpu-time rows are per CPU-second of) instead of what the host's
 * load left of it in one moment. */
static double pk_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define PK_ITERS 20000000ull

double txb_clock_ghz(void)
{
#if defined(__x86_64__)
    /* a chain of dependent register-register adds, one cycle each (not
     * add-immediate: newer cores fold chains of those at rename, several
     * per cycle, which read as a clock of 15-20 GHz) */
    uint64_t x = 0, one = 1;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = pk_now();
        for (uint64_t i = 0; i < PK_ITERS; i++)
            __asm__ volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
                             "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
                             : "+r"(x)
                             : "r"(one));
        double ghz = (double)PK_ITERS * 8 / (pk_now() - t0) / 1e9;
        best = ghz > best ? ghz : best;
    }
    return best;
#else
    return 0;
#endif
}

#if defined(__x86_64__)
/* 12 independent accumulators: enough to cover the latency of 2 units. */
#define PK_CHAINS(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7) OP(8) OP(9) OP(10) OP(11)

__attribute__((target("avx512f"))) static double ipc_fma512(double ghz)
{
    __m512 a[12], b = _mm512_set1_ps(1.0f), c = _mm512_set1_ps(1e-9f);
#define I(k) a[k] = _mm512_set1_ps((float)(k));
    PK_CHAINS(I)
#undef I
    uint64_t n = PK_ITERS / 4;
    double t0 = pk_now();
    for (uint64_t i = 0; i < n; i++) {
#define F(k) a[k] = _mm512_fmadd_ps(a[k], b, c);
        PK_CHAINS(F)
#undef F
        __asm__ volatile("" ::: "memory");
    }
    double dt = pk_now() - t0;
    float s = 0;
#define S(k) s += _mm512_reduce_add_ps(a[k]);
    PK_CHAINS(S)
#undef S
    __asm__ volatile("" ::"x"(s));
    return (double)n * 12 / (dt * ghz * 1e9);
}

__attribute__((target("avx2,fma"))) static double ipc_fma256(double ghz)
{
    __m256 a[12], b = _mm256_set1_ps(1.0f), c = _mm256_set1_ps(1e-9f);
#define I(k) a[k] = _mm256_set1_ps((float)(k));
    PK_CHAINS(I)
#undef I
    uint64_t n = PK_ITERS / 4;
    double t0 = pk_now();
    for (uint64_t i = 0; i < n; i++) {
#define F(k) a[k] = _mm256_fmadd_ps(a[k], b, c);
        PK_CHAINS(F)
#undef F
        __asm__ volatile("" ::: "memory");
    }
    double dt = pk_now() - t0;
    __m256 s = a[0];
#define S(k) s = _mm256_add_ps(s, a[k]);
    PK_CHAINS(S)
#undef S
    __asm__ volatile("" ::"x"(s));
    return (double)n * 12 / (dt * ghz * 1e9);
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double ipc_vnni512(double ghz)
{
    __m512i a[12], b = _mm512_set1_epi8(1), c = _mm512_set1_epi8(2);
#define I(k) a[k] = _mm512_set1_epi32(k);
    PK_CHAINS(I)
#undef I
    uint64_t n = PK_ITERS / 4;
    double t0 = pk_now();
    for (uint64_t i = 0; i < n; i++) {
#define F(k) a[k] = _mm512_dpbusd_epi32(a[k], b, c);
        PK_CHAINS(F)
#undef F
        __asm__ volatile("" ::: "memory");
    }
    double dt = pk_now() - t0;
    __m512i s = a[0];
#define S(k) s = _mm512_add_epi32(s, a[k]);
    PK_CHAINS(S)
#undef S
    __asm__ volatile("" ::"x"(s));
    return (double)n * 12 / (dt * ghz * 1e9);
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) static double ipc_bf16(double ghz)
{
    __m512 a[12];
    __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80), c = (__m512bh)_mm512_set1_epi16(0x3000);
#define I(k) a[k] = _mm512_set1_ps((float)(k));
    PK_CHAINS(I)
#undef I
    uint64_t n = PK_ITERS / 4;
    double t0 = pk_now();
    for (uint64_t i = 0; i < n; i++) {
#define F(k) a[k] = _mm512_dpbf16_ps(a[k], b, c);
        PK_CHAINS(F)
#undef F
        __asm__ volatile("" ::: "memory");
    }
    double dt = pk_now() - t0;
    float s = 0;
#define S(k) s += _mm512_reduce_add_ps(a[k]);
    PK_CHAINS(S)
#undef S
    __asm__ volatile("" ::"x"(s));
    return (double)n * 12 / (dt * ghz * 1e9);
}

/*
 * AMX: 4 independent C tiles (2 A x 2 B, the engine's blocking), 16 rows x
 * 64 bytes each, dot products on in-register tiles. Expected on Sapphire
 * Rapids class cores: one TDPBSSD / TDPBF16PS per 16 cycles (ipc 0.0625),
 * i.e. 1024 int8 / 512 bf16 MACs per cycle per core (Intel optimization
 * manual; not measured on the machine this was written on, which has no
 * AMX). Only called for an amx engine: it asked the kernel for the tile
 * state (arch_prctl) and CPUID reported AMX.
 */
#define AMX_TGT __attribute__((target("amx-tile,amx-int8,amx-bf16")))

struct pk_tilecfg {
    uint8_t palette, start_row, rsvd[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

AMX_TGT static double ipc_amx(double ghz, int bf16)
{
    static uint8_t src[2][16][64] __attribute__((aligned(64)));
    struct pk_tilecfg cfg __attribute__((aligned(64)));
    uint8_t out[16][64] __attribute__((aligned(64)));
    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.rows[i] = 16;
        cfg.colsb[i] = 64;
    }
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, src[0], 64);
    _tile_loadd(5, src[1], 64);
    _tile_loadd(6, src[0], 64);
    _tile_loadd(7, src[1], 64);
    uint64_t n = PK_ITERS / 64;
    double t0 = pk_now();
    if (bf16)
        for (uint64_t i = 0; i < n; i++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    else
        for (uint64_t i = 0; i < n; i++) {
            _tile_dpbssd(0, 4, 6);
            _tile_dpbssd(1, 4, 7);
            _tile_dpbssd(2, 5, 6);
            _tile_dpbssd(3, 5, 7);
        }
    double dt = pk_now() - t0;
    _tile_stored(0, out, 64);
    _tile_release();
    __asm__ volatile("" ::"r"(out) : "memory");
    return (double)n * 4 / (dt * ghz * 1e9);
}
#endif

/* Scalar: multiply-adds the compiler keeps scalar (portable kernels). */
static double ipc_scalar(double ghz)
{
    volatile float seed = 1.0f;
    float a0 = seed, a1 = seed, a2 = seed, a3 = seed, a4 = seed, a5 = seed, a6 = seed, a7 = seed,
          b = 0.999f, c = 1e-9f;
    uint64_t n = PK_ITERS / 4;
    double t0 = pk_now();
    for (uint64_t i = 0; i < n; i++) {
        a0 = a0 * b + c;
        a1 = a1 * b + c;
        a2 = a2 * b + c;
        a3 = a3 * b + c;
        a4 = a4 * b + c;
        a5 = a5 * b + c;
        a6 = a6 * b + c;
        a7 = a7 * b + c;
        __asm__ volatile(""
                         : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6),
                           "+x"(a7));
    }
    double dt = pk_now() - t0;
    seed = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    return (double)n * 8 / (dt * ghz * 1e9);
}

int txb_peak(enum txb_family f, double ghz, struct txb_peak *out)
{
    out->ipc = 0;
    out->macs_per_insn = 0;
    if (ghz <= 0)
        return -1;
    switch (f) {
#if defined(__x86_64__)
    case TXB_FMA512:
        out->ipc = ipc_fma512(ghz);
        out->macs_per_insn = 16;
        break;
    case TXB_FMA256:
        out->ipc = ipc_fma256(ghz);
        out->macs_per_insn = 8;
        break;
    case TXB_VNNI512:
        out->ipc = ipc_vnni512(ghz);
        out->macs_per_insn = 64;
        break;
    case TXB_BF16:
        out->ipc = ipc_bf16(ghz);
        out->macs_per_insn = 32;
        break;
    case TXB_AMX_I8:
        out->ipc = ipc_amx(ghz, 0);
        out->macs_per_insn = 16 * 16 * 64;
        break;
    case TXB_AMX_BF16:
        out->ipc = ipc_amx(ghz, 1);
        out->macs_per_insn = 16 * 16 * 32;
        break;
#endif
    case TXB_SCALAR:
        out->ipc = ipc_scalar(ghz);
        out->macs_per_insn = 1;
        break;
    default:
        return -1;
    }
    return 0;
}
