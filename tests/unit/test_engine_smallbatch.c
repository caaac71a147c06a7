/* SPDX-License-Identifier: MIT */
/*
 * Small-batch GEMM (T = 2..32 rows, matmul.c "small batch"): on every ISA
 * path, every weight x activation dtype, K past the path's 4096-byte K
 * block, each row of a batched MATMUL is within 1e-5 (relative) of the
 * same row computed alone, and of a scalar double reference within the
 * dtype's rounding.
 */
#include <math.h>
#include <stdio.h>

#include "test_engine_common.h"
#include "tx_test_main.h"

struct sb_case {
    unsigned wdt, adt, group;
};

static const struct sb_case sb_cases[] = {
    {TX8_DTYPE_F32, TX8_DTYPE_F32, 0},  {TX8_DTYPE_F16, TX8_DTYPE_F32, 0},
    {TX8_DTYPE_F16, TX8_DTYPE_F16, 0},  {TX8_DTYPE_BF16, TX8_DTYPE_F32, 0},
    {TX8_DTYPE_BF16, TX8_DTYPE_BF16, 0}, {TX8_DTYPE_I8, TX8_DTYPE_I8, 0},
    {TX8_DTYPE_I8, TX8_DTYPE_I8, 64},   {TX8_DTYPE_I8, TX8_DTYPE_I8, 4160 / 5},
    {TX8_DTYPE_I8, TX8_DTYPE_F32, 0},   {TX8_DTYPE_I8, TX8_DTYPE_F32, 32},
};
#define N_SB (sizeof(sb_cases) / sizeof(sb_cases[0]))

/* engine of path p (0 portable, 1 avx2, 2 avx512 without BF16, 3 avx512
 * with BF16), or NULL (with a message) when the CPU lacks it */
static struct te *sb_engine(int p, const char **name)
{
    static const char *const names[4] = {"portable", "avx2", "avx512", "avx512+bf16"};
    unsigned isa = p == 0 ? TX8_ISA_PORTABLE : p == 1 ? TX8_ISA_AVX2 : TX8_ISA_AVX512;
    *name = names[p];
    if (!tx8_engine_isa_supported(isa) ||
        (p == 3 && !tx8_engine_has_feature(TX8_FEAT_AVX512BF16))) {
        fprintf(stderr, "test_engine_smallbatch: path %s skipped: the CPU lacks it\n", names[p]);
        return NULL;
    }
    setenv("TX8_ENGINE_AVX512BF16", p == 3 ? "1" : "0", 1);
    struct te *t = te_new(isa, 2, 24ull << 20);
    unsetenv("TX8_ENGINE_AVX512BF16");
    return t;
}

START_TEST(test_smallbatch_matmul)
{
    static const unsigned Ts[6] = {2, 3, 5, 8, 13, 32};
    const unsigned K = 4160, N = 23;
    const char *pn;
    struct te *t = sb_engine(_i, &pn);
    if (!t)
        return;
    uint64_t rng = 1234 + (uint64_t)_i;
    for (unsigned c = 0; c < N_SB; c++) {
        const struct sb_case *sc = &sb_cases[c];
        for (unsigned ti = 0; ti < 6; ti++) {
            unsigned T = Ts[(ti + c) % 6];
            uint64_t mark = t->brk;
            size_t es = sc->wdt == TX8_DTYPE_F32 ? 4 : sc->wdt == TX8_DTYPE_I8 ? 1 : 2;
            unsigned ng = sc->wdt == TX8_DTYPE_I8 && sc->group ? K / sc->group : 1;
            uint64_t w = te_alloc(t, (uint64_t)N * K * es);
            uint64_t s = te_alloc(t, (uint64_t)N * ng * 4 + 4);
            uint64_t x = te_alloc(t, (uint64_t)T * K * 4);
            uint64_t yb = te_alloc(t, (uint64_t)T * N * 4);
            uint64_t y1 = te_alloc(t, (uint64_t)T * N * 4);
            float *wf = malloc((size_t)N * K * 4);
            ck_assert_ptr_nonnull(wf);
            float *sp = te_ptr(t, s);
            for (size_t i = 0; i < (size_t)N * ng; i++)
                sp[i] = 0.001f + 0.01f * (float)te_rand(&rng, 1, 100) / 100.0f;
            for (size_t i = 0; i < (size_t)N * K; i++) {
                float v = te_randf(&rng);
                if (sc->wdt == TX8_DTYPE_F32) {
                    ((float *)te_ptr(t, w))[i] = v;
                } else if (sc->wdt == TX8_DTYPE_I8) {
                    int8_t q = (int8_t)((int)te_rand(&rng, 0, 254) - 127);
                    ((int8_t *)te_ptr(t, w))[i] = q;
                    v = (float)q * sp[(i / K) * ng + (i % K) / (sc->group ? sc->group : K)];
                } else {
                    uint16_t h =
                        sc->wdt == TX8_DTYPE_F16 ? tx_f32_to_f16(v) : tx_f32_to_bf16(v);
                    ((uint16_t *)te_ptr(t, w))[i] = h;
                    v = sc->wdt == TX8_DTYPE_F16 ? tx_f16_to_f32(h) : tx_bf16_to_f32(h);
                }
                wf[i] = v;
            }
            float *xp = te_ptr(t, x);
            te_fill_f32(&rng, xp, (size_t)T * K, 1.0f);
            struct tx8_cmd_matmul m;
            memset(&m, 0, sizeof(m));
            m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
            m.w.data = w;
            m.w.dtype = (uint16_t)sc->wdt;
            m.w.rows = N;
            m.w.cols = K;
            if (sc->wdt == TX8_DTYPE_I8) {
                m.w.scales = s;
                m.w.group_size = sc->group;
            }
            m.act_dtype = (uint16_t)sc->adt;
            m.ld_x = K;
            m.ld_y = N;
            m.x = x;
            m.y = yb;
            m.tokens = T;
            TE_EQ(te_run1(t, &m), TX8_STATUS_OK);
            m.tokens = 1;
            for (unsigned r = 0; r < T; r++) {
                m.x = x + (uint64_t)r * K * 4;
                m.y = y1 + (uint64_t)r * N * 4;
                TE_EQ(te_run1(t, &m), TX8_STATUS_OK);
            }
            const float *pb = te_ptr(t, yb), *p1 = te_ptr(t, y1);
            for (unsigned r = 0; r < T; r++)
                for (unsigned n = 0; n < N; n++) {
                    /* reference with the activation as the kernels see it
                     * (rounded; int8: within the quantisation step) */
                    double ref = 0, mag = 0;
                    for (unsigned k = 0; k < K; k++) {
                        double xv = xp[(size_t)r * K + k];
                        if (sc->adt == TX8_DTYPE_F16)
                            xv = tx_f16_to_f32(tx_f32_to_f16((float)xv));
                        else if (sc->adt == TX8_DTYPE_BF16)
                            xv = tx_bf16_to_f32(tx_f32_to_bf16((float)xv));
                        ref += xv * wf[(size_t)n * K + k];
                        mag += fabs(xv * wf[(size_t)n * K + k]);
                    }
                    float b = pb[(size_t)r * N + n], o = p1[(size_t)r * N + n];
                    TE_CHECK(fabs((double)b - o) <= 1e-5 * (1 + fabs((double)o)) + 1e-6 * mag,
                             "%s: w=%u act=%u group=%u T=%u row %u col %u: batched %.9g, alone "
                             "%.9g",
                             pn, sc->wdt, sc->adt, sc->group, T, r, n, b, o);
                    double tol = sc->adt == TX8_DTYPE_I8 ? 1.5e-2 * mag : 1e-4 * mag + 1e-5;
                    TE_CHECK(fabs(b - ref) <= tol,
                             "%s: w=%u act=%u group=%u T=%u row %u col %u: %.9g, reference "
                             "%.9g",
                             pn, sc->wdt, sc->adt, sc->group, T, r, n, b, ref);
                }
            free(wf);
            te_reset(t, mark);
        }
    }
    te_free(t);
}
END_TEST

/*
 * The small-batch kernels' tile shapes (mm_small_f32: up to 4 tokens per
 * tile, 3..8 weight rows per tile by token count and ISA): every T in
 * 2..17 (one to five token tiles, odd sizes), K with a vector tail and past the
 * 4096-byte K block, N = 263 (chunks of 32 rows and a 7-row chunk: row
 * tails of every tile height); f32, f16 and int8 (grouped scales) weights
 * with f32 activations, against a scalar double reference and the same row
 * alone, on every ISA path.
 */
START_TEST(test_smallbatch_shapes)
{
    static const unsigned Ks[3] = {5, 37, 1040},
                          wdts[3] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_I8};
    const unsigned N = 263, TM = 17, G = 16;
    const char *pn;
    struct te *t = sb_engine(_i, &pn);
    if (!t)
        return;
    uint64_t rng = 777 + (uint64_t)_i;
    for (unsigned d = 0; d < 3; d++)
        for (unsigned ki = 0; ki < 3; ki++) {
            unsigned wdt = wdts[d], K = Ks[ki];
            unsigned grp = wdt == TX8_DTYPE_I8 && K % G == 0 ? G : 0;
            unsigned ng = grp ? K / grp : 1;
            size_t es = wdt == TX8_DTYPE_F32 ? 4 : wdt == TX8_DTYPE_I8 ? 1 : 2;
            uint64_t mark = t->brk;
            uint64_t w = te_alloc(t, (uint64_t)N * K * es);
            uint64_t s = te_alloc(t, (uint64_t)N * ng * 4 + 4);
            uint64_t x = te_alloc(t, (uint64_t)TM * K * 4);
            uint64_t yb = te_alloc(t, (uint64_t)TM * N * 4);
            uint64_t y1 = te_alloc(t, (uint64_t)TM * N * 4);
            float *wf = malloc((size_t)N * K * 4);
            double *ref = malloc((size_t)TM * N * sizeof(double) * 2);
            ck_assert_ptr_nonnull(wf);
            ck_assert_ptr_nonnull(ref);
            double *mag = ref + (size_t)TM * N;
            float *sp = te_ptr(t, s);
            for (size_t i = 0; i < (size_t)N * ng; i++)
                sp[i] = 0.001f + 0.01f * (float)te_rand(&rng, 1, 100) / 100.0f;
            for (size_t i = 0; i < (size_t)N * K; i++) {
                float v = te_randf(&rng);
                if (wdt == TX8_DTYPE_F32) {
                    ((float *)te_ptr(t, w))[i] = v;
                } else if (wdt == TX8_DTYPE_I8) {
                    int8_t q = (int8_t)((int)te_rand(&rng, 0, 254) - 127);
                    ((int8_t *)te_ptr(t, w))[i] = q;
                    v = (float)q * sp[(i / K) * ng + (i % K) / (grp ? grp : K)];
                } else {
                    uint16_t h = tx_f32_to_f16(v);
                    ((uint16_t *)te_ptr(t, w))[i] = h;
                    v = tx_f16_to_f32(h);
                }
                wf[i] = v;
            }
            float *xp = te_ptr(t, x);
            te_fill_f32(&rng, xp, (size_t)TM * K, 1.0f);
            for (unsigned r = 0; r < TM; r++)
                for (unsigned n = 0; n < N; n++) {
                    double a = 0, m = 0;
                    for (unsigned k = 0; k < K; k++) {
                        double p = (double)xp[(size_t)r * K + k] * wf[(size_t)n * K + k];
                        a += p;
                        m += fabs(p);
                    }
                    ref[(size_t)r * N + n] = a;
                    mag[(size_t)r * N + n] = m;
                }
            struct tx8_cmd_matmul mm;
            memset(&mm, 0, sizeof(mm));
            mm.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
            mm.w.data = w;
            mm.w.dtype = (uint16_t)wdt;
            mm.w.rows = N;
            mm.w.cols = K;
            if (wdt == TX8_DTYPE_I8) {
                mm.w.scales = s;
                mm.w.group_size = grp;
            }
            mm.act_dtype = TX8_DTYPE_F32;
            mm.ld_x = K;
            mm.ld_y = N;
            mm.tokens = 1;
            for (unsigned r = 0; r < TM; r++) {
                mm.x = x + (uint64_t)r * K * 4;
                mm.y = y1 + (uint64_t)r * N * 4;
                TE_EQ(te_run1(t, &mm), TX8_STATUS_OK);
            }
            const float *p1 = te_ptr(t, y1), *pb = te_ptr(t, yb);
            for (unsigned T = 2; T <= TM; T++) {
                mm.x = x;
                mm.y = yb;
                mm.tokens = T;
                memset(te_ptr(t, yb), 0, (size_t)TM * N * 4);
                TE_EQ(te_run1(t, &mm), TX8_STATUS_OK);
                for (unsigned r = 0; r < T; r++)
                    for (unsigned n = 0; n < N; n++) {
                        size_t i = (size_t)r * N + n;
                        double b = pb[i], o = p1[i];
                        TE_CHECK(fabs(b - ref[i]) <= 1e-6 * mag[i] + 1e-6,
                                 "%s: w=%u K=%u T=%u row %u col %u: %.9g, reference %.9g", pn, wdt,
                                 K, T, r, n, b, ref[i]);
                        TE_CHECK(fabs(b - o) <= 1e-5 * (1 + fabs(o)) + 1e-6 * mag[i],
                                 "%s: w=%u K=%u T=%u row %u col %u: batched %.9g, alone %.9g", pn,
                                 wdt, K, T, r, n, b, o);
                    }
            }
            free(ref);
            free(wf);
            te_reset(t, mark);
        }
    te_free(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_smallbatch");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_smallbatch_matmul, 0, 4);
    tcase_add_loop_test(tc, test_smallbatch_shapes, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
