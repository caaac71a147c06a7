/* SPDX-License-Identifier: MIT */
/*
 * FP8 weights on the device (TX8_DTYPE_F8_E4M3, issue 38): on every ISA
 * path of the engine (portable, AVX2, AVX-512 with and without
 * AVX512-BF16, and the AMX engine, on an emulated tile unit where the CPU
 * has none):
 *   - all 256 codes dequantise bit-exactly (e4m3 x block scale), alone
 *     and through the GEMV's 64-code steps (scales below 2^8, at 2^8 - ulp
 *     and with denormal products);
 *   - MATMUL and MOE_FFN with FP8 weights are bit-identical to the same
 *     commands on F32 weights holding the dequantised values (the
 *     engine's FP8 reference), for GEMV, small batches, GEMM, batch-
 *     invariant jobs, edge blocks (N, K not multiples of 128) and K past
 *     the 1024-element blocks;
 *   - within f32 rounding of a double-precision product;
 *   - the command checks (dense only, group_size 128, scales present and
 *     in range, float activations) and the macs_fp8 counter.
 */
#include <math.h>
#include <stdio.h>

#include "test_engine_common.h"

#include "engine/engine_internal.h"
#include "tx_test_main.h"

enum { P_PORTABLE, P_AVX2, P_AVX512, P_AVX512BF16, P_AMX, NPATH };

static const char *const path_name[NPATH] = {"portable", "avx2", "avx512 (no AVX512-BF16)",
                                             "avx512 + AVX512-BF16", "amx"};

static struct te *path_engine(int p)
{
    static const unsigned isa[NPATH] = {TX8_ISA_PORTABLE, TX8_ISA_AVX2, TX8_ISA_AVX512,
                                        TX8_ISA_AVX512, TX8_ISA_AMX};
    int emu = 0;
    if (p == P_AMX && !tx8_engine_isa_supported(TX8_ISA_AMX) &&
        tx8_engine_isa_supported(TX8_ISA_AVX512))
        emu = 1; /* the emulated tile unit (test_engine_amx.c) */
    if ((!emu && !tx8_engine_isa_supported(isa[p])) ||
        (p == P_AVX512BF16 && !tx8_engine_has_feature(TX8_FEAT_AVX512BF16))) {
        const char *why = tx8_engine_isa_why(isa[p]);
        fprintf(stderr, "test_engine_fp8: SKIP path %s: %s\n", path_name[p],
                why ? why : "the CPU lacks AVX512-BF16");
        return NULL;
    }
    if (p == P_AVX512)
        setenv("TX8_ENGINE_AVX512BF16", "0", 1);
    eng_amx_emulate = emu;
    struct te *t = te_new(isa[p], 2, 64ull << 20);
    eng_amx_emulate = 0;
    unsetenv("TX8_ENGINE_AVX512BF16");
    return t;
}

/* An FP8 weight [N x K] with random codes (no NaN) and scales, and the
 * same values dequantised as an F32 weight. */
struct fw {
    struct tx8_weight f8, f32;
    float *deq; /* host copy of the dequantised values */
};

static void fw_make(struct te *t, uint64_t *rng, struct fw *w, unsigned N, unsigned K)
{
    unsigned sr = (N + 127) / 128, sc = (K + 127) / 128;
    uint64_t d = te_alloc(t, (uint64_t)N * K), s = te_alloc(t, (uint64_t)sr * sc * 4);
    uint64_t f = te_alloc(t, (uint64_t)N * K * 4);
    uint8_t *dp = te_ptr(t, d);
    float *sp = te_ptr(t, s), *fp = te_ptr(t, f);
    for (unsigned i = 0; i < sr * sc; i++)
        sp[i] = ldexpf(1.0f + te_randf(rng) * 0.5f, (int)te_rand(rng, 0, 12) - 14);
    for (size_t i = 0; i < (size_t)N * K; i++) {
        uint8_t c = (uint8_t)te_rand(rng, 0, 255);
        if ((c & 0x7f) == 0x7f)
            c ^= 1; /* no NaN */
        dp[i] = c;
        size_t r = i / K, k = i % K;
        fp[i] = tx_e4m3_to_f32(c) * sp[(r / 128) * sc + k / 128];
    }
    memset(&w->f8, 0, sizeof(w->f8));
    w->f8.data = d;
    w->f8.scales = s;
    w->f8.rows = N;
    w->f8.cols = K;
    w->f8.group_size = TX8_FP8_BLOCK;
    w->f8.dtype = TX8_DTYPE_F8_E4M3;
    memset(&w->f32, 0, sizeof(w->f32));
    w->f32.data = f;
    w->f32.rows = N;
    w->f32.cols = K;
    w->f32.dtype = TX8_DTYPE_F32;
    w->deq = fp;
}

static unsigned run_bi(struct te *t, const void *cmd, int bi)
{
    te_cmd_begin(t);
    te_cmd(t, cmd);
    te_job_default(t);
    if (bi)
        t->job.flags |= TX8_JOB_F_BATCH_INVARIANT;
    return te_run_job(t, NULL);
}

/* MATMUL y = x . W^T of T tokens, W an FP8 weight [N x K] at d with its
 * block scales at s, f32 activations */
static struct tx8_cmd_matmul fp8_matmul(uint64_t d, uint64_t s, uint64_t x, uint64_t y,
                                        unsigned N, unsigned K, unsigned T)
{
    struct tx8_cmd_matmul m;
    memset(&m, 0, sizeof(m));
    m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    m.y = y;
    m.x = x;
    m.w = (struct tx8_weight){.data = d,
                              .scales = s,
                              .rows = N,
                              .cols = K,
                              .group_size = TX8_FP8_BLOCK,
                              .dtype = TX8_DTYPE_F8_E4M3};
    m.tokens = T;
    m.ld_x = K;
    m.ld_y = N;
    m.act_dtype = TX8_DTYPE_F32;
    return m;
}

/* every code x both block rows: y = 1 . W^T with K = 1 */
START_TEST(test_fp8_codes)
{
    struct te *t = path_engine(_i);
    if (!t)
        return;
    const unsigned N = 256;
    for (unsigned T = 1; T <= 40; T += 39) {
        uint64_t mark = t->brk;
        uint64_t d = te_alloc(t, N), s = te_alloc(t, 8), x = te_alloc(t, T * 4),
                 y = te_alloc(t, (uint64_t)T * N * 4);
        uint8_t *dp = te_ptr(t, d);
        float *sp = te_ptr(t, s), *xp = te_ptr(t, x), *yp = te_ptr(t, y);
        for (unsigned n = 0; n < N; n++)
            dp[n] = (uint8_t)n;
        sp[0] = 1.0f;
        sp[1] = 0.375f;
        for (unsigned j = 0; j < T; j++)
            xp[j] = 1.0f;
        struct tx8_cmd_matmul m = fp8_matmul(d, s, x, y, N, 1, T);
        uint64_t macs0 = t->ctr.macs_fp8;
        TE_EQ(te_run1(t, &m), TX8_STATUS_OK);
        TE_EQ(t->ctr.macs_fp8 - macs0, (uint64_t)T * N);
        for (unsigned j = 0; j < T; j++)
            for (unsigned n = 0; n < N; n++) {
                /* (a sum from +0: -0 comes out +0) */
                float want = 0.0f + tx_e4m3_to_f32((uint8_t)n) * sp[n / 128];
                float got = yp[j * N + n];
                if (isnan(want))
                    TE_CHECK(isnan(got), "%s code 0x%02x: %g", path_name[_i], n, (double)got);
                else
                    TE_CHECK(memcmp(&got, &want, 4) == 0, "%s code 0x%02x: %.9g vs %.9g",
                             path_name[_i], n, (double)got, (double)want);
            }
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* every code through the GEMV's 64-code steps (AVX-512: the one-multiply
 * decode; NaN codes: the general one): row c of [256 x K] holds code c in
 * every column, x is one-hot at column j, so y[c] = code c x its block
 * row's scale exactly; K = 128 (one block) and 200 (a full block, then a
 * 72-column edge block: one step and a tail), j in both blocks */
START_TEST(test_fp8_codes_gemv_steps)
{
    struct te *t = path_engine(_i);
    if (!t)
        return;
    const unsigned N = 256;
    static const unsigned Ks[] = {128, 200};
    for (unsigned ki = 0; ki < 2; ki++) {
        const unsigned K = Ks[ki], sc = (K + 127) / 128;
        uint64_t mark = t->brk;
        uint64_t d = te_alloc(t, (uint64_t)N * K), s = te_alloc(t, 2 * sc * 4),
                 x = te_alloc(t, K * 4), y = te_alloc(t, N * 4);
        uint8_t *dp = te_ptr(t, d);
        float *sp = te_ptr(t, s), *xp = te_ptr(t, x), *yp = te_ptr(t, y);
        for (unsigned n = 0; n < N; n++)
            memset(dp + (size_t)n * K, (int)n, K);
        static const float bscale[4] = {1.0f, 0x1.8p-3f, 0x1.fffffep7f, 0x1p-130f};
        for (unsigned i = 0; i < 2 * sc; i++)
            sp[i] = bscale[i % 4];
        for (unsigned j = 5; j < K; j += 127) {
            memset(xp, 0, K * 4);
            xp[j] = 1.0f;
            struct tx8_cmd_matmul m = fp8_matmul(d, s, x, y, N, K, 1);
            TE_EQ(te_run1(t, &m), TX8_STATUS_OK);
            for (unsigned n = 0; n < N; n++) {
                float want = 0.0f + tx_e4m3_to_f32((uint8_t)n) * sp[(n / 128) * sc + j / 128];
                float got = yp[n];
                if (isnan(want))
                    TE_CHECK(isnan(got), "%s K=%u j=%u code 0x%02x: %g", path_name[_i], K, j, n,
                             (double)got);
                else
                    TE_CHECK(memcmp(&got, &want, 4) == 0,
                             "%s K=%u j=%u code 0x%02x: %.9g vs %.9g", path_name[_i], K, j, n,
                             (double)got, (double)want);
            }
        }
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* MATMUL: FP8 == F32 on the dequantised values, bit for bit */
START_TEST(test_fp8_matmul)
{
    struct te *t = path_engine(_i);
    if (!t)
        return;
    uint64_t rng = 0xf8f8 + (uint64_t)_i;
    static const unsigned Ts[] = {1, 2, 3, 5, 8, 13, 40, 300};
    static const unsigned Ks[] = {1, 100, 128, 300, 1100, 4500};
    static const unsigned Ns[] = {1, 130, 257};
    static const unsigned acts[] = {TX8_DTYPE_F32, TX8_DTYPE_BF16, TX8_DTYPE_F16};
    int c = 0;
    for (unsigned ti = 0; ti < sizeof(Ts) / sizeof(Ts[0]); ti++)
        for (unsigned ki = 0; ki < sizeof(Ks) / sizeof(Ks[0]); ki++) {
            unsigned T = Ts[ti], K = Ks[ki], N = Ns[(ti + ki) % 3];
            if ((uint64_t)T * K > 300 * 1100)
                continue;
            unsigned act = acts[c % 3];
            int bi = (c++ % 4) == 3;
            uint64_t mark = t->brk;
            struct fw w;
            fw_make(t, &rng, &w, N, K);
            uint64_t x = te_alloc(t, (uint64_t)T * K * 4), y8 = te_alloc(t, (uint64_t)T * N * 4),
                     y32 = te_alloc(t, (uint64_t)T * N * 4);
            float *xp = te_ptr(t, x), *p8 = te_ptr(t, y8), *p32 = te_ptr(t, y32);
            te_fill_f32(&rng, xp, (size_t)T * K, 1.0f);
            struct tx8_cmd_matmul m;
            memset(&m, 0, sizeof(m));
            m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
            m.x = x;
            m.tokens = T;
            m.ld_x = K;
            m.ld_y = N;
            m.act_dtype = (uint16_t)act;
            m.y = y8;
            m.w = w.f8;
            TE_EQ(run_bi(t, &m, bi), TX8_STATUS_OK);
            m.y = y32;
            m.w = w.f32;
            TE_EQ(run_bi(t, &m, bi), TX8_STATUS_OK);
            for (size_t i = 0; i < (size_t)T * N; i++)
                TE_CHECK(memcmp(&p8[i], &p32[i], 4) == 0,
                         "%s T=%u N=%u K=%u act=%u bi=%d [%zu]: fp8 %.9g vs f32 %.9g",
                         path_name[_i], T, N, K, act, bi, i, (double)p8[i], (double)p32[i]);
            /* and against double products (f32 activations) */
            if (act == TX8_DTYPE_F32)
                for (unsigned tt = 0; tt < T; tt += 7)
                    for (unsigned n = 0; n < N; n += 3) {
                        double want = 0, mag = 0;
                        for (unsigned k = 0; k < K; k++) {
                            double p = (double)xp[(size_t)tt * K + k] * w.deq[(size_t)n * K + k];
                            want += p;
                            mag += fabs(p);
                        }
                        double got = p8[(size_t)tt * N + n];
                        TE_CHECK(fabs(got - want) <= 1e-5 * mag + 1e-30, "%s: %.9g vs %.9g",
                                 path_name[_i], got, want);
                    }
            te_reset(t, mark);
        }
    te_free(t);
}
END_TEST

/* The GEMV's 64-code steps on their general decode (AVX-512: a NaN code
 * among the 64, or a block scale of 2^8 or more, where the one-multiply
 * decode would overflow) and scales whose products are denormal: FP8 ==
 * F32 on the dequantised values, bit for bit (NaN where a NaN code is) */
START_TEST(test_fp8_gemv_decode_cases)
{
    struct te *t = path_engine(_i);
    if (!t)
        return;
    uint64_t rng = 0x6e6d + (uint64_t)_i;
    const unsigned N = 260, K = 384, sc = 3;
    static const float scales[9] = {300.0f, 1e30f, 0x1p8f, 0x1.fffffep7f, 1e-38f,
                                    0x1p-140f, 0.5f, -2.0f, 1e-3f};
    struct fw w;
    fw_make(t, &rng, &w, N, K);
    uint8_t *dp = te_ptr(t, w.f8.data);
    float *sp = te_ptr(t, w.f8.scales), *fp = w.deq;
    for (unsigned i = 0; i < 9; i++)
        sp[i] = scales[i];
    for (unsigned r = 0; r < N; r += 7) /* NaN codes in some rows' steps */
        dp[(size_t)r * K + te_rand(&rng, 0, K - 1)] = (uint8_t)(r & 1 ? 0xff : 0x7f);
    for (size_t i = 0; i < (size_t)N * K; i++)
        fp[i] = tx_e4m3_to_f32(dp[i]) * sp[(i / K / 128) * sc + (i % K) / 128];
    uint64_t x = te_alloc(t, K * 4), y8 = te_alloc(t, N * 4), y32 = te_alloc(t, N * 4);
    float *xp = te_ptr(t, x), *p8 = te_ptr(t, y8), *p32 = te_ptr(t, y32);
    te_fill_f32(&rng, xp, K, 1.0f);
    struct tx8_cmd_matmul m;
    memset(&m, 0, sizeof(m));
    m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    m.x = x;
    m.tokens = 1;
    m.ld_x = K;
    m.ld_y = N;
    m.act_dtype = TX8_DTYPE_F32;
    m.y = y8;
    m.w = w.f8;
    TE_EQ(te_run1(t, &m), TX8_STATUS_OK);
    m.y = y32;
    m.w = w.f32;
    TE_EQ(te_run1(t, &m), TX8_STATUS_OK);
    for (unsigned n = 0; n < N; n++) {
        if (isnan(p32[n]))
            TE_CHECK(isnan(p8[n]), "%s row %u: fp8 %.9g, f32 NaN", path_name[_i], n,
                     (double)p8[n]);
        else
            TE_CHECK(memcmp(&p8[n], &p32[n], 4) == 0, "%s row %u: fp8 %.9g vs f32 %.9g",
                     path_name[_i], n, (double)p8[n], (double)p32[n]);
    }
    te_reset(t, w.f8.data);
    te_free(t);
}
END_TEST

/* MOE_FFN with FP8 experts == with F32 experts of the dequantised values */
START_TEST(test_fp8_moe_ffn)
{
    struct te *t = path_engine(_i);
    if (!t)
        return;
    uint64_t rng = 0x3e + (uint64_t)_i;
    for (int it = 0; it < 6; it++) {
        uint64_t mark = t->brk;
        unsigned NE = te_rand(&rng, 1, 5), T = it < 3 ? te_rand(&rng, 1, 4) : te_rand(&rng, 9, 40);
        unsigned K = te_rand(&rng, 1, 3), D = te_rand(&rng, 100, 300), F = te_rand(&rng, 60, 200);
        uint64_t tab8 = te_alloc(t, NE * 3 * sizeof(struct tx8_weight));
        uint64_t tab32 = te_alloc(t, NE * 3 * sizeof(struct tx8_weight));
        for (unsigned e = 0; e < NE; e++)
            for (unsigned j = 0; j < 3; j++) {
                struct fw w;
                fw_make(t, &rng, &w, j == 2 ? D : F, j == 2 ? F : D);
                ((struct tx8_weight *)te_ptr(t, tab8))[e * 3 + j] = w.f8;
                ((struct tx8_weight *)te_ptr(t, tab32))[e * 3 + j] = w.f32;
            }
        uint64_t x = te_alloc(t, (size_t)T * D * 4), y8 = te_alloc(t, (size_t)T * D * 4),
                 y32 = te_alloc(t, (size_t)T * D * 4), ids = te_alloc(t, T * K * 4),
                 wts = te_alloc(t, T * K * 4);
        te_fill_f32(&rng, te_ptr(t, x), (size_t)T * D, 1.0f);
        te_fill_f32(&rng, te_ptr(t, wts), T * K, 1.0f);
        int32_t *ip = te_ptr(t, ids);
        for (unsigned i = 0; i < T * K; i++)
            ip[i] = (int32_t)te_rand(&rng, 0, NE - 1);
        struct tx8_cmd_moe_ffn c = {TE_HDR(TX8_OP_MOE_FFN, struct tx8_cmd_moe_ffn),
                                    y8,
                                    x,
                                    ids,
                                    wts,
                                    tab8,
                                    T,
                                    K,
                                    NE,
                                    D,
                                    F,
                                    D,
                                    D,
                                    (uint16_t)(it % 2 ? TX8_DTYPE_BF16 : TX8_DTYPE_F32),
                                    0};
        TE_EQ(run_bi(t, &c, it == 5), TX8_STATUS_OK);
        c.y = y32;
        c.experts = tab32;
        TE_EQ(run_bi(t, &c, it == 5), TX8_STATUS_OK);
        const float *p8 = te_ptr(t, y8), *p32 = te_ptr(t, y32);
        for (size_t i = 0; i < (size_t)T * D; i++)
            TE_CHECK(memcmp(&p8[i], &p32[i], 4) == 0, "%s moe it %d [%zu]: %.9g vs %.9g",
                     path_name[_i], it, i, (double)p8[i], (double)p32[i]);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* the command checks */
START_TEST(test_fp8_checks)
{
    struct te *t = te_new(TX8_ISA_PORTABLE, 1, 0);
    ck_assert_ptr_nonnull(t);
    uint64_t rng = 5;
    struct fw w;
    fw_make(t, &rng, &w, 200, 300);
    uint64_t x = te_alloc(t, 300 * 4), y = te_alloc(t, 200 * 4);
    struct tx8_cmd_matmul m;
    memset(&m, 0, sizeof(m));
    m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    m.x = x;
    m.y = y;
    m.tokens = 1;
    m.ld_x = 300;
    m.ld_y = 200;
    m.w = w.f8;
    TE_EQ(te_run1(t, &m), TX8_STATUS_OK);
    m.w.group_size = 64;
    TE_EQ(te_run1(t, &m), TX8_STATUS_INVALID_CMD);
    m.w.group_size = 0;
    TE_EQ(te_run1(t, &m), TX8_STATUS_INVALID_CMD);
    m.w = w.f8;
    m.w.scales = 0;
    TE_EQ(te_run1(t, &m), TX8_STATUS_INVALID_CMD);
    m.w = w.f8;
    m.w.format = TX8_WFMT_BLOCK_SPARSE;
    TE_EQ(te_run1(t, &m), TX8_STATUS_INVALID_CMD);
    m.w = w.f8;
    m.act_dtype = TX8_DTYPE_I8;
    TE_EQ(te_run1(t, &m), TX8_STATUS_UNSUPPORTED_DTYPE);
    m.act_dtype = TX8_DTYPE_F32;
    /* the 2 x 3 scales end past the job's memory */
    m.w.scales = t->mem_size - 20;
    TE_EQ(te_run1(t, &m), TX8_STATUS_ADDR_FAULT);
    m.w = w.f8;
    m.w.dtype = 19; /* not a dtype */
    TE_EQ(te_run1(t, &m), TX8_STATUS_UNSUPPORTED_DTYPE);
    te_free(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_fp8");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_fp8_codes, 0, NPATH);
    tcase_add_loop_test(tc, test_fp8_codes_gemv_steps, 0, NPATH);
    tcase_add_loop_test(tc, test_fp8_matmul, 0, NPATH);
    tcase_add_loop_test(tc, test_fp8_gemv_decode_cases, 0, NPATH);
    tcase_add_loop_test(tc, test_fp8_moe_ffn, 0, NPATH);
    tcase_add_test(tc, test_fp8_checks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
