/* SPDX-License-Identifier: MIT */
/*
 * ISA dispatch: every kernel path the engine can pick (portable, AVX2,
 * AVX-512 without and with AVX512-BF16) against a scalar reference, with a
 * message for each path this CPU lacks; AMX runs where the CPU and the OS
 * give it, else is refused with a reason (its kernels are also tested on an
 * emulated tile unit: test_engine_amx.c).
 */
#include <errno.h>
#include <stdio.h>

#include "test_engine_common.h"

#include "engine/engine_internal.h"
#include "tx_test_main.h"

enum { P_PORTABLE, P_AVX2, P_AVX512, P_AVX512BF16, P_AMX, NPATH };

static const char *const path_name[NPATH] = {"portable", "avx2", "avx512 (no AVX512-BF16)",
                                             "avx512 + AVX512-BF16", "amx"};

/* Engine of path p, or NULL (and a message) when the CPU lacks it. */
static struct te *path_engine(int p)
{
    static const unsigned isa[NPATH] = {TX8_ISA_PORTABLE, TX8_ISA_AVX2, TX8_ISA_AVX512,
                                        TX8_ISA_AVX512, TX8_ISA_AMX};
    int bf16 = p == P_AVX512BF16;
    if (!tx8_engine_isa_supported(isa[p]) ||
        (bf16 && !tx8_engine_has_feature(TX8_FEAT_AVX512BF16))) {
        const char *why = tx8_engine_isa_why(isa[p]);
        fprintf(stderr, "test_engine_isa: path %s skipped: %s\n", path_name[p],
                why ? why : "the CPU lacks AVX512-BF16");
        return NULL;
    }
    if (p == P_AVX512)
        setenv("TX8_ENGINE_AVX512BF16", "0", 1);
    struct te *t = te_new(isa[p], 2, 0);
    unsetenv("TX8_ENGINE_AVX512BF16");
    unsigned f = tx8_engine_features(t->e);
    if (p == P_AMX) /* the AVX-512 level with AMX: BF16 where present */
        ck_assert_uint_eq(!!(f & TX8_FEAT_AVX512BF16),
                          !!tx8_engine_has_feature(TX8_FEAT_AVX512BF16));
    else
        ck_assert_uint_eq(!!(f & TX8_FEAT_AVX512BF16), bf16);
    return t;
}

static float bf16r(float x)
{
    return tx_bf16_to_f32(tx_f32_to_bf16(x));
}

static float f16r(float x)
{
    return tx_f16_to_f32(tx_f32_to_f16(x));
}

static float round_as(float x, unsigned dt)
{
    return dt == TX8_DTYPE_BF16 ? bf16r(x) : dt == TX8_DTYPE_F16 ? f16r(x) : x;
}

/* Dense float MATMUL, every weight x activation dtype, odd shapes. */
START_TEST(test_path_matmul)
{
    struct te *t = path_engine(_i);
    if (!t)
        return;
    static const unsigned dts[3] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_BF16};
    static const unsigned Ts[5] = {1, 2, 5, 7, 13};
    static const unsigned Ks[5] = {1, 31, 64, 97, 1100};
    uint64_t rng = 77 + (uint64_t)_i;
    for (unsigned wd = 0; wd < 3; wd++)
        for (unsigned ad = 0; ad < 3; ad++)
            for (unsigned c = 0; c < 5; c++) {
                unsigned T = Ts[c], K = Ks[(c + wd + ad) % 5], N = te_rand(&rng, 1, 21);
                unsigned wdt = dts[wd], adt = dts[ad];
                size_t es = wdt == TX8_DTYPE_F32 ? 4 : 2;
                uint64_t mark = t->brk;
                uint64_t w = te_alloc(t, (uint64_t)N * K * es);
                uint64_t x = te_alloc(t, (uint64_t)T * K * 4);
                uint64_t y = te_alloc(t, (uint64_t)T * N * 4);
                float *xp = te_ptr(t, x), *yp = te_ptr(t, y);
                float *wf = malloc((size_t)N * K * 4);
                te_fill_f32(&rng, xp, (size_t)T * K, 1.0f);
                for (size_t i = 0; i < (size_t)N * K; i++) {
                    float v = te_randf(&rng);
                    if (wdt == TX8_DTYPE_F32) {
                        ((float *)te_ptr(t, w))[i] = v;
                    } else {
                        uint16_t h = wdt == TX8_DTYPE_F16 ? tx_f32_to_f16(v) : tx_f32_to_bf16(v);
                        ((uint16_t *)te_ptr(t, w))[i] = h;
                        v = wdt == TX8_DTYPE_F16 ? tx_f16_to_f32(h) : tx_bf16_to_f32(h);
                    }
                    wf[i] = v;
                }
                struct tx8_cmd_matmul m;
                memset(&m, 0, sizeof(m));
                m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
                m.y = y;
                m.x = x;
                m.w.data = w;
                m.w.dtype = (uint16_t)wdt;
                m.w.rows = N;
                m.w.cols = K;
                m.tokens = T;
                m.ld_x = K;
                m.ld_y = N;
                m.act_dtype = (uint16_t)adt;
                TE_EQ(te_run1(t, &m), TX8_STATUS_OK);
                for (unsigned tt = 0; tt < T; tt++)
                    for (unsigned n = 0; n < N; n++) {
                        double want = 0, mag = 0;
                        for (unsigned k = 0; k < K; k++) {
                            double p = (double)round_as(xp[(size_t)tt * K + k], adt) *
                                       wf[(size_t)n * K + k];
                            want += p;
                            mag += fabs(p);
                        }
                        double got = yp[(size_t)tt * N + n];
                        TE_CHECK(fabs(got - want) <= 1e-5 * mag + 1e-6,
                                 "%s w=%u act=%u T=%u N=%u K=%u [%u][%u]: %.9g vs %.9g",
                                 path_name[_i], wdt, adt, T, N, K, tt, n, got, want);
                    }
                free(wf);
                te_reset(t, mark);
            }
    te_free(t);
}
END_TEST

/* Greedy SAMPLE over a vocabulary of several chunks: the lowest id among
 * the largest logits (ties across chunks, NaN skipped) and its probability
 * against a double-precision softmax. */
START_TEST(test_path_greedy)
{
    struct te *t = path_engine(_i);
    if (!t)
        return;
    const unsigned V = 70001;
    uint64_t rng = 5;
    uint64_t lg = te_alloc(t, (uint64_t)V * 4), out = te_alloc(t, 8), pr = te_alloc(t, 8);
    float *l = te_ptr(t, lg);
    for (int it = 0; it < 6; it++) {
        te_fill_f32(&rng, l, V, 8.0f);
        unsigned want = te_rand(&rng, 0, V - 1);
        if (it == 1)
            want = V - 1;
        l[want] = 9.0f + (float)it;
        if (it >= 2) /* a tie later in another chunk, NaNs around */
            l[(want + 20000) % V] = l[want];
        if (it >= 2 && want > 40000) { /* the tie is then the lower id */
            want = (want + 20000) % V;
        }
        for (unsigned k = 0; k < 50; k++)
            l[te_rand(&rng, 0, V - 1)] = NAN;
        l[want] = 9.0f + (float)it;
        if (it >= 2)
            l[want + 20000 < V ? want + 20000 : want] = l[want];
        struct tx8_cmd_sample c;
        memset(&c, 0, sizeof(c));
        c.hdr = TE_HDR(TX8_OP_SAMPLE, struct tx8_cmd_sample);
        c.out = out;
        c.logits = lg;
        c.probs = it == 5 ? 0 : pr;
        c.rows = 1;
        c.vocab = V;
        c.ld_logits = V;
        c.top_p = 1.0f;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        /* reference: first maximum, softmax in double */
        unsigned best = 0;
        float bv = -INFINITY;
        int found = 0;
        for (unsigned i = 0; i < V; i++)
            if (!isnan(l[i]) && (!found || l[i] > bv)) {
                bv = l[i];
                best = i;
                found = 1;
            }
        TE_EQ(((int32_t *)te_ptr(t, out))[0], best);
        if (c.probs) {
            double sum = 0;
            for (unsigned i = 0; i < V; i++)
                if (!isnan(l[i]))
                    sum += exp((double)l[i] - bv);
            double p = ((float *)te_ptr(t, pr))[0];
            TE_CHECK(fabs(p - 1.0 / sum) < 1e-6, "%s: greedy p %.9g vs %.9g", path_name[_i], p,
                     1.0 / sum);
        }
    }
    te_free(t);
}
END_TEST

/* One stochastic SAMPLE command of `rows` rows on engine t; the tokens and
 * the probabilities' bits into tok[] / pb[]. */
static void sample_run(struct te *t, const float *logits, unsigned rows, unsigned V,
                       const struct tx8_cmd_sample *tmpl, int32_t *tok, uint32_t *pb)
{
    uint64_t mark = t->brk;
    uint64_t lg = te_alloc(t, (uint64_t)rows * V * 4), out = te_alloc(t, rows * 4ull),
             pr = te_alloc(t, rows * 4ull);
    memcpy(te_ptr(t, lg), logits, (size_t)rows * V * 4);
    struct tx8_cmd_sample c = *tmpl;
    c.hdr.opcode = TX8_OP_SAMPLE;
    c.out = out;
    c.logits = lg;
    c.probs = pr;
    c.rows = rows;
    c.vocab = V;
    c.ld_logits = V;
    TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
    memcpy(tok, te_ptr(t, out), rows * 4ull);
    memcpy(pb, te_ptr(t, pr), rows * 4ull);
    te_reset(t, mark);
}

/* Stochastic SAMPLE (temperature, top-k, top-p, min-p, both orders) over a
 * 151,808-token vocabulary with NaN, -inf, +inf, signed zeros and ties at
 * the maximum and at the top-k boundary: every path draws the same tokens
 * with the same probabilities, bit for bit, as the portable path (the
 * scalar code the vector passes replace). */
START_TEST(test_path_sample)
{
    if (_i == P_PORTABLE)
        return;
    struct te *t = path_engine(_i);
    if (!t)
        return;
    struct te *ref = te_new(TX8_ISA_PORTABLE, 2, 0);
    const unsigned V = 151808, rows = 3;
    float *l = malloc((size_t)rows * V * 4);
    ck_assert_ptr_nonnull(l);
    uint64_t rng = 11;
    static const struct {
        float temp, top_p, min_p;
        unsigned top_k, flags;
    } cfg[] = {
        {0.7f, 0.95f, 0.0f, 40, 0},
        {0.7f, 0.95f, 0.05f, 40, TX8_SAMPLE_F_TEMP_LAST},
        {1.0f, 1.0f, 0.0f, 1, 0},
        {1e-30f, 1.0f, 0.0f, 4096, 0},
        {2.5f, 0.5f, 0.0f, 4096, TX8_SAMPLE_F_TEMP_LAST},
        {0.3f, 0.9f, 0.1f, 200, 0},
    };
    for (unsigned it = 0; it < 8; it++)
        for (unsigned ci = 0; ci < sizeof(cfg) / sizeof(cfg[0]); ci++) {
            te_fill_f32(&rng, l, (size_t)rows * V, 6.0f);
            for (unsigned r = 0; r < rows; r++) {
                float *x = l + (size_t)r * V;
                for (unsigned k = 0; k < 40; k++)
                    x[te_rand(&rng, 0, V - 1)] = NAN;
                for (unsigned k = 0; k < 40; k++)
                    x[te_rand(&rng, 0, V - 1)] = -INFINITY;
                if (it & 1) /* ties: one value many times, some above the rest */
                    for (unsigned k = 0; k < 300; k++)
                        x[te_rand(&rng, 0, V - 1)] = 5.5f;
                if (it == 2 && r == 0)
                    x[te_rand(&rng, 0, V - 1)] = INFINITY;
                if (it == 4) { /* a flat row of signed zeros and a few NaN */
                    for (unsigned i = 0; i < V; i++)
                        x[i] = (i & 1) ? -0.0f : 0.0f;
                    x[7] = NAN;
                }
                if (it == 6 && r == 1) /* all NaN but one -inf */
                    for (unsigned i = 0; i < V; i++)
                        x[i] = i == 99 ? -INFINITY : NAN;
                if (it == 7 && r == 2) /* the maximum in the last, partial vector */
                    x[V - 1] = 50.0f;
            }
            struct tx8_cmd_sample c;
            memset(&c, 0, sizeof(c));
            c.hdr = TE_HDR(TX8_OP_SAMPLE, struct tx8_cmd_sample);
            c.hdr.flags = (uint16_t)cfg[ci].flags;
            c.temperature = cfg[ci].temp;
            c.top_p = cfg[ci].top_p;
            c.min_p = cfg[ci].min_p;
            c.top_k = cfg[ci].top_k;
            c.seed = 1000 + it;
            c.counter = ci;
            int32_t ta[3], tb[3];
            uint32_t pa[3], pb[3];
            sample_run(ref, l, rows, V, &c, ta, pa);
            sample_run(t, l, rows, V, &c, tb, pb);
            for (unsigned r = 0; r < rows; r++) {
                TE_CHECK(ta[r] == tb[r] && pa[r] == pb[r],
                         "%s it %u cfg %u row %u: token %d p %08x vs portable %d p %08x",
                         path_name[_i], it, ci, r, tb[r], pb[r], ta[r], pa[r]);
            }
        }
    free(l);
    te_free(ref);
    te_free(t);
}
END_TEST

/* AMX is a name the engine knows; it is refused, with a reason, where the
 * CPU lacks AMX-TILE/INT8/BF16 or the kernel the tile state. */
/* The AVX-512 quantiser (eng_kernels_avx512.quant_row, used by the avx512
 * and amx paths) gives eng_quant_row's bytes and scale bit for bit: random
 * rows of every length 0..80 and 1000, rows with exact .5 ties (x * inv
 * lands half-way: round to even), NaN, +-Inf, all-zero, denormal-only rows
 * (127 / amax overflows to +Inf), zeros and infinities only (inv 0),
 * and both storages (q and q + 128). */
/* the AVX2 KV block decode (Q8_0 / Q4_0) against the scalar decode, bit
 * for bit: random values, scales of every magnitude (denormal f16, inf) */
START_TEST(test_kv_block_decode)
{
    if (!tx8_engine_isa_supported(TX8_ISA_AVX2)) {
        fprintf(stderr, "test_engine_isa: kv_block_to_f32 skipped: the CPU lacks AVX2\n");
        return;
    }
    const struct eng_kernels *k = &eng_kernels_avx2;
    ck_assert_ptr_nonnull(k->kv_block_to_f32);
    uint64_t rng = 31;
    static const uint16_t scales[] = {0x3c00, 0x0001, 0x03ff, 0x7bff, 0x7c00, 0xfc00, 0x8000,
                                      0x2e66, 0xb800};
    uint8_t blk[34 * 8];
    float a[256], b[256];
    for (int q4 = 0; q4 < 2; q4++)
        for (unsigned rep = 0; rep < 200; rep++) {
            unsigned dt = q4 ? TX8_DTYPE_Q4_0 : TX8_DTYPE_Q8_0, bs = q4 ? 18 : 34;
            for (unsigned i = 0; i < sizeof(blk); i++)
                blk[i] = (uint8_t)te_rand(&rng, 0, 255);
            for (unsigned bl = 0; bl < 8; bl++) {
                uint16_t h = rep < 9 ? scales[rep] : (uint16_t)te_rand(&rng, 0, 0x7bff);
                memcpy(blk + bl * bs, &h, 2);
            }
            eng_kv_to_f32(&eng_kernels_portable, a, blk, dt, 256);
            k->kv_block_to_f32(b, blk, dt, 256);
            ck_assert_msg(!memcmp(a, b, sizeof(a)), "%s rep %u: not the scalar decode",
                          q4 ? "q4_0" : "q8_0", rep);
        }
}
END_TEST

START_TEST(test_quant_row)
{
    if (!tx8_engine_isa_supported(TX8_ISA_AVX512)) {
        fprintf(stderr, "test_engine_isa: quant_row skipped: the CPU lacks AVX-512\n");
        return;
    }
    const struct eng_kernels *k = &eng_kernels_avx512;
    ck_assert_ptr_nonnull(k->quant_row);
    uint64_t rng = 77;
    float x[1000];
    int8_t qa[1000], qb[1000];
    unsigned cases = 0;
    for (unsigned kind = 0; kind < 8; kind++)
        for (unsigned n = 0; n <= 1000; n = n < 80 ? n + 1 : n + 920) {
            for (unsigned i = 0; i < n; i++) {
                float v = te_randf(&rng) * 3.0f;
                switch (kind) {
                case 1: /* ties: amax 127 so inv = 1, halves of odd and even */
                    v = (float)((int)te_rand(&rng, 0, 252) - 126) + 0.5f;
                    break;
                case 2:
                    if (te_rand(&rng, 0, 7) == 0)
                        v = NAN;
                    break;
                case 3:
                    if (te_rand(&rng, 0, 7) == 0)
                        v = te_rand(&rng, 0, 1) ? INFINITY : -INFINITY;
                    break;
                case 4:
                    v = 0.0f;
                    break;
                case 5:
                    v = (te_randf(&rng) - 0.5f) * 1e-40f; /* denormals */
                    break;
                case 6:
                    v = te_rand(&rng, 0, 3) == 0 ? -v : v * 1e30f;
                    break;
                case 7: /* only zeros and infinities: amax 0, inv 0 */
                    v = te_rand(&rng, 0, 2) == 0 ? 0.0f : te_rand(&rng, 0, 1) ? INFINITY : -INFINITY;
                    break;
                }
                x[i] = v;
            }
            if (kind == 1 && n)
                x[0] = 127.0f;
            for (int u8 = 0; u8 <= 1; u8++) {
                memset(qa, 0x55, sizeof(qa));
                memset(qb, 0x55, sizeof(qb));
                float sa = eng_quant_row(x, n, qa, u8), sb = k->quant_row(x, n, qb, u8);
                ck_assert_msg(!memcmp(&sa, &sb, 4), "kind %u n %u: scale %.9g vs %.9g", kind, n,
                              sa, sb);
                for (unsigned i = 0; i < 1000; i++)
                    ck_assert_msg(qa[i] == qb[i], "kind %u n %u u8 %d: q[%u] (x %.9g) %d vs %d",
                                  kind, n, u8, i, i < n ? x[i] : 0.0f, qa[i], qb[i]);
                cases++;
            }
        }
    ck_assert_uint_eq(cases, 8 * 82 * 2);
}
END_TEST

START_TEST(test_amx_refused)
{
    static uint8_t mem[TX8_CTRL_SIZE + 65536] __attribute__((aligned(4096)));
    struct tx8_engine *e = NULL;
    unsigned isa = 0;
    ck_assert_int_eq(tx8_engine_isa_parse("amx", &isa), 0);
    ck_assert_uint_eq(isa, TX8_ISA_AMX);
    ck_assert_str_eq(tx8_engine_isa_name(TX8_ISA_AMX), "amx");
    ck_assert_int_eq(tx8_engine_isa_parse("sse9", &isa), -EINVAL);
    if (tx8_engine_isa_supported(TX8_ISA_AMX)) {
        fprintf(stderr, "test_engine_isa: amx refusal skipped: this CPU and kernel give AMX\n");
        return;
    }
    ck_assert_ptr_nonnull(tx8_engine_isa_why(TX8_ISA_AMX));
    ck_assert_ptr_null(tx8_engine_isa_why(TX8_ISA_PORTABLE));
    struct tx8_engine_config cfg = {1, -1, 0, TX8_ISA_AMX, {0, 0, 0}};
    ck_assert_int_eq(tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), -ENOTSUP);
    ck_assert_ptr_null(e);
    cfg.isa = TX8_ISA_AUTO;
    setenv("TX8_ENGINE_ISA", "amx", 1);
    ck_assert_int_eq(tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), -ENOTSUP);
    ck_assert_ptr_null(e);
    unsetenv("TX8_ENGINE_ISA");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_isa");
    TCase *tc = tcase_create("isa");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_path_matmul, 0, NPATH);
    tcase_add_loop_test(tc, test_path_greedy, 0, NPATH);
    tcase_add_loop_test(tc, test_path_sample, 0, NPATH);
    tcase_add_test(tc, test_amx_refused);
    tcase_add_test(tc, test_quant_row);
    tcase_add_test(tc, test_kv_block_decode);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
