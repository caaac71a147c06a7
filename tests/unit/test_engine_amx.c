/* SPDX-License-Identifier: MIT */
/*
 * The AMX path (TX8_ISA_AMX; emu/engine/kern_amx.inc, docs/engine.md
 * "AMX"). The AMX blocks run on the emulated tile unit (kern_amx_emu.c,
 * the instructions' documented semantics in C) on every AVX-512 CPU, and
 * on the real tiles where the CPU has AMX and the kernel grants the tile
 * state (else that part is skipped, saying why):
 *   - kernel level (eng_amx_mm_*): int8 bit-identical to the AVX-512 VNNI
 *     tiles run in matmul.c's loop order and to a scalar reference with
 *     the same epilogue; BF16 within the BF16 tolerance of a double
 *     reference; T = 16, 17, 31, 64, 100, rows and K with tails, per-row
 *     and grouped scales, accumulation into non-zero outputs;
 *   - a deliberately wrong B layout (no VNNI interleave) must fail;
 *   - end to end: an engine with TX8_ISA_AMX on the emulated tiles against
 *     the AVX-512 engine, MATMUL and MOE_FFN, int8 with memcmp (also in
 *     batch-invariant jobs), BF16 within tolerance, and that the tile
 *     unit was actually used.
 */
#include <errno.h>
#include <stdio.h>

#include "test_engine_common.h"

#include "engine/engine_internal.h"
#include "tx_test_main.h"

typedef int (*amx_fn)(const struct mm_amx *m, struct eng_worker *w);
typedef void (*pack_fn)(uint8_t *dst, const uint8_t *x, size_t x_stride, size_t rows, size_t K,
                        int i8, uint8_t flip);

/* a worker for the kernels' scratch (malloc'd, no NUMA) */
static struct tx8_engine fake_e;
static struct eng_worker fake_w = {.e = &fake_e};

static void fake_free(void)
{
    for (unsigned i = 0; i < ENG_SCRATCH_SLOTS; i++) {
        eng_free(&fake_e, fake_w.scr[i], fake_w.scr_size[i]);
        fake_w.scr[i] = NULL;
        fake_w.scr_size[i] = 0;
    }
}

static int have_avx512(void)
{
    if (!tx8_engine_isa_supported(TX8_ISA_AVX512)) {
        fprintf(stderr, "test_engine_amx: skipped: the CPU lacks AVX-512 (the AMX path's "
                        "tails are the AVX-512 tiles)\n");
        return 0;
    }
    return 1;
}

/* the AVX-512 table as an AMX engine has it */
static struct eng_kernels amx_table(void)
{
    struct eng_kernels k = eng_kernels_avx512;
    k.mm_tile_bf16 = tx8_engine_has_feature(TX8_FEAT_AVX512BF16) ? eng_avx512bf16_tile : NULL;
    return k;
}

struct kcase {
    unsigned T, R, K, kb, group; /* group 0: per row */
};

static const struct kcase kcases[] = {
    {16, 16, 64, 2048, 0},     {17, 16, 100, 2048, 0},    {31, 33, 2085, 2048, 0},
    {64, 64, 4160, 2048, 0},   {100, 48, 4100, 4096, 0},  {16, 20, 4160, 2048, 2080},
    {17, 64, 4096, 2048, 64},  {64, 32, 8192, 4096, 4096}, {100, 17, 257, 2048, 0},
    {32, 64, 1000, 1000, 0},   {48, 40, 6000, 2048, 3000}, {8, 16, 64, 2048, 0},
    {9, 32, 1000, 2048, 0},    {15, 48, 4160, 2048, 0},   {12, 20, 2085, 2048, 64},
};
#define N_KC (sizeof(kcases) / sizeof(kcases[0]))

struct kdata {
    unsigned T, R, K, ng, group;
    size_t xs; /* activation stride (bytes int8, elements bf16) */
    uint8_t *w;
    float *sc;
    uint8_t *xu;   /* int8: q + 128 (the VNNI storage) */
    int8_t *xq;    /* int8: q */
    uint16_t *xb;  /* bf16 activations */
    float *out0;   /* initial outputs (random: the blocks accumulate) */
};

static void kdata_make(struct kdata *d, const struct kcase *c, int i8, uint64_t *rng)
{
    memset(d, 0, sizeof(*d));
    d->T = c->T;
    d->R = c->R;
    d->K = c->K;
    d->group = c->group ? c->group : c->K;
    d->ng = c->K / d->group;
    d->xs = (c->K + 63) & ~63u;
    size_t es = i8 ? 1 : 2;
    d->w = malloc((size_t)c->R * c->K * es);
    d->sc = malloc((size_t)c->R * d->ng * 4 + 4);
    d->out0 = malloc((size_t)c->T * c->R * 4);
    ck_assert(d->w && d->sc && d->out0);
    for (size_t i = 0; i < (size_t)c->R * d->ng; i++)
        d->sc[i] = 0.001f + 0.01f * (float)te_rand(rng, 1, 1000) / 1000.0f;
    for (size_t i = 0; i < (size_t)c->T * c->R; i++)
        d->out0[i] = te_randf(rng);
    if (i8) {
        d->xu = malloc((size_t)c->T * d->xs);
        d->xq = malloc((size_t)c->T * d->xs);
        ck_assert(d->xu && d->xq);
        for (size_t i = 0; i < (size_t)c->R * c->K; i++)
            d->w[i] = (uint8_t)(int8_t)((int)te_rand(rng, 0, 254) - 127);
        for (size_t i = 0; i < (size_t)c->T * d->xs; i++) {
            int q = (int)te_rand(rng, 0, 254) - 127;
            d->xq[i] = (int8_t)q;
            d->xu[i] = (uint8_t)(q + 128);
        }
    } else {
        d->xb = malloc((size_t)c->T * d->xs * 2);
        ck_assert_ptr_nonnull(d->xb);
        uint16_t *w = (uint16_t *)(void *)d->w;
        for (size_t i = 0; i < (size_t)c->R * c->K; i++)
            w[i] = tx_f32_to_bf16(te_randf(rng));
        for (size_t i = 0; i < (size_t)c->T * d->xs; i++)
            d->xb[i] = tx_f32_to_bf16(te_randf(rng) * 2.0f);
    }
}

static void kdata_free(struct kdata *d)
{
    free(d->w);
    free(d->sc);
    free(d->xu);
    free(d->xq);
    free(d->xb);
    free(d->out0);
}

static struct mm_amx kjob(const struct kdata *d, const struct eng_kernels *k, unsigned kb, int i8,
                          float *out)
{
    struct mm_amx m;
    memset(&m, 0, sizeof(m));
    m.k = k;
    m.R = d->R;
    m.T = d->T;
    m.K = d->K;
    m.kb = kb;
    m.i8 = i8;
    m.t.w = d->w;
    m.t.w_stride = (size_t)d->K * (i8 ? 1 : 2);
    m.t.scales = i8 ? d->sc : NULL;
    m.t.scale_stride = d->ng;
    m.t.group = d->group;
    m.t.dtype = i8 ? TX8_DTYPE_I8 : TX8_DTYPE_BF16;
    m.t.x = i8 ? (const void *)d->xu : NULL;
    m.t.x_stride = d->xs;
    m.t.xb = i8 ? NULL : d->xb;
    m.t.xb_stride = d->xs;
    m.t.out = out;
    m.t.out_stride = d->R;
    return m;
}

/* matmul.c's AVX-512 loop for the same block: K blocks outer, tiles of
 * 4 tokens x 4 rows */
static void vnni_ref(const struct mm_amx *m, float *out)
{
    struct mm_tile t = m->t;
    t.out = out;
    for (size_t k0 = 0; k0 < m->K; k0 += m->kb) {
        t.k0 = k0;
        t.k1 = m->K - k0 < m->kb ? m->K : k0 + m->kb;
        for (size_t j = 0; j < m->T; j += 4) {
            t.T = m->T - j < 4 ? (unsigned)(m->T - j) : 4;
            t.x = (const uint8_t *)m->t.x + j * m->t.x_stride;
            for (size_t r = 0; r < m->R; r += 4) {
                t.R = m->R - r < 4 ? (unsigned)(m->R - r) : 4;
                t.w = m->t.w + r * m->t.w_stride;
                t.scales = m->t.scales + r * m->t.scale_stride;
                t.out = out + j * m->t.out_stride + r;
                m->k->mm_tile_i8(&t);
            }
        }
    }
}

/* int8 scalar reference: exact integer dot per K block (inside one group:
 * the AMX epilogue's arithmetic, compared bit for bit), else a double sum
 * per group (compared within 1e-5 relative) */
static void int8_scalar_check(const struct kdata *d, unsigned kb, const float *got, const char *what)
{
    for (unsigned t = 0; t < d->T; t++)
        for (unsigned r = 0; r < d->R; r++) {
            float o = d->out0[(size_t)t * d->R + r];
            double od = o, mag = fabs(o);
            int exact = 1;
            for (size_t k0 = 0; k0 < d->K; k0 += kb) {
                size_t k1 = d->K - k0 < kb ? d->K : k0 + kb;
                if ((k1 - 1) / d->group != k0 / d->group)
                    exact = 0;
                int64_t dot = 0;
                for (size_t k = k0; k < k1; k++) {
                    int64_t p = (int64_t)d->xq[(size_t)t * d->xs + k] *
                                (int8_t)d->w[(size_t)r * d->K + k];
                    dot += p;
                    double s = d->sc[(size_t)r * d->ng + k / d->group];
                    od += s * (double)p;
                    mag += fabs(s * (double)p);
                }
                float res = 0;
                res += d->sc[(size_t)r * d->ng + k0 / d->group] * (float)dot;
                o += res;
            }
            float g = got[(size_t)t * d->R + r];
            if (exact)
                TE_CHECK(!memcmp(&g, &o, 4), "%s: T=%u R=%u K=%u token %u row %u: %.9g, scalar %.9g",
                         what, d->T, d->R, d->K, t, r, g, o);
            TE_CHECK(fabs(g - od) <= 1e-5 * mag + 1e-6, "%s: T=%u R=%u K=%u group=%u token %u row %u: %.9g, "
                     "reference %.9g", what, d->T, d->R, d->K, d->group, t, r, g, od);
        }
}

static void bf16_check(const struct kdata *d, const float *got, const char *what)
{
    const uint16_t *w = (const uint16_t *)(const void *)d->w;
    for (unsigned t = 0; t < d->T; t++)
        for (unsigned r = 0; r < d->R; r++) {
            double ref = d->out0[(size_t)t * d->R + r], mag = fabs(ref);
            for (unsigned k = 0; k < d->K; k++) {
                double p = (double)tx_bf16_to_f32(d->xb[(size_t)t * d->xs + k]) *
                           tx_bf16_to_f32(w[(size_t)r * d->K + k]);
                ref += p;
                mag += fabs(p);
            }
            double g = got[(size_t)t * d->R + r];
            TE_CHECK(fabs(g - ref) <= 1e-4 * mag + 1e-5,
                     "%s: bf16 T=%u R=%u K=%u token %u row %u: %.9g, reference %.9g", what, d->T,
                     d->R, d->K, t, r, g, ref);
        }
}

/* The activations of m's full 16-token tiles packed by `pack` (as
 * matmul.c's mm_amx_prep does once per command), set as m->xp; the buffer
 * to free. */
static uint8_t *kpack(struct mm_amx *m, pack_fn pack, const struct eng_kernels *k)
{
    size_t es = m->i8 ? 1 : 2, steps = (m->K * es + 63) / 64, groups = (m->T + 15) / 16;
    uint8_t *p = aligned_alloc(64, groups * steps * 1024 + 64);
    ck_assert_ptr_nonnull(p);
    const uint8_t *x = m->i8 ? (const uint8_t *)m->t.x : (const uint8_t *)m->t.xb;
    size_t stride = m->i8 ? m->t.x_stride : m->t.xb_stride * 2;
    for (size_t g = 0; g < groups; g++)
        pack(p + g * steps * 1024, x + g * 16 * stride, stride,
             m->T - g * 16 < 16 ? m->T - g * 16 : 16, m->K, m->i8, m->i8 && k->act_u8 ? 0x80 : 0);
    m->xp = p;
    m->xsteps = steps;
    return p;
}

/* Every kernel case through fn, with the call packing its activations and
 * with them packed beforehand by `pack` (the two must agree bit for bit);
 * returns how many mismatched the VNNI path (int8) or the tolerance (bf16)
 * when `expect_fail` (no assertions then). */
static unsigned run_kernel_cases(amx_fn fn, pack_fn pack, const char *what, int expect_fail)
{
    struct eng_kernels k = amx_table();
    uint64_t rng = 4242;
    unsigned bad = 0;
    for (int i8 = 1; i8 >= 0; i8--) {
        if (!i8 && !k.mm_tile_bf16) {
            fprintf(stderr, "test_engine_amx: %s bf16 cases skipped: the CPU lacks AVX512-BF16 "
                            "(the BF16 tails)\n", what);
            continue;
        }
        for (unsigned c = 0; c < N_KC; c++) {
            const struct kcase *kc = &kcases[c];
            if (!i8 && kc->group)
                continue;
            struct kdata d;
            kdata_make(&d, kc, i8, &rng);
            size_t n = (size_t)d.T * d.R;
            float *oa = malloc(n * 4), *ov = malloc(n * 4);
            ck_assert(oa && ov);
            memcpy(oa, d.out0, n * 4);
            memcpy(ov, d.out0, n * 4);
            unsigned kb = i8 ? kc->kb : 1024;
            struct mm_amx m = kjob(&d, &k, kb, i8, oa);
            ck_assert_int_eq(fn(&m, &fake_w), 0);
            {
                /* the same with the activations packed once beforehand */
                float *op = malloc(n * 4);
                ck_assert_ptr_nonnull(op);
                memcpy(op, d.out0, n * 4);
                struct mm_amx mp = kjob(&d, &k, kb, i8, op);
                uint8_t *buf = kpack(&mp, pack, &k);
                ck_assert_int_eq(fn(&mp, &fake_w), 0);
                if (!expect_fail)
                    TE_CHECK(!memcmp(op, oa, n * 4),
                             "%s: %s T=%u R=%u K=%u: pre-packed activations differ from the "
                             "call's own packing", what, i8 ? "int8" : "bf16", d.T, d.R, d.K);
                free(buf);
                free(op);
            }
            if (i8) {
                vnni_ref(&m, ov);
                int same = !memcmp(oa, ov, n * 4);
                if (expect_fail) {
                    bad += !same;
                } else {
                    for (size_t i = 0; i < n && !same; i++)
                        TE_CHECK(!memcmp(&oa[i], &ov[i], 4),
                                 "%s: int8 T=%u R=%u K=%u kb=%u group=%u: token %zu row %zu: "
                                 "%.9g, VNNI %.9g", what, d.T, d.R, d.K, kb, d.group, i / d.R,
                                 i % d.R, oa[i], ov[i]);
                    int8_scalar_check(&d, kb, oa, what);
                }
            } else if (expect_fail) {
                const uint16_t *w = (const uint16_t *)(const void *)d.w;
                for (unsigned t = 0; t < d.T && t < 16; t++) {
                    double ref = d.out0[(size_t)t * d.R], mag = fabs(ref);
                    for (unsigned kk = 0; kk < d.K; kk++) {
                        double p = (double)tx_bf16_to_f32(d.xb[(size_t)t * d.xs + kk]) *
                                   tx_bf16_to_f32(w[kk]);
                        ref += p;
                        mag += fabs(p);
                    }
                    if (fabs(oa[(size_t)t * d.R] - ref) > 1e-4 * mag + 1e-5) {
                        bad++;
                        break;
                    }
                }
            } else {
                bf16_check(&d, oa, what);
            }
            free(oa);
            free(ov);
            kdata_free(&d);
        }
    }
    fake_free();
    return bad;
}

START_TEST(test_amx_emulated_kernels)
{
    if (!have_avx512())
        return;
    uint64_t before = eng_amx_emu_tdp;
    run_kernel_cases(eng_amx_mm_emu, eng_amx_pack_emu, "emulated tiles", 0);
    ck_assert_uint_gt(eng_amx_emu_tdp, before);
}
END_TEST

/* The B tiles packed as a plain transpose (no VNNI interleave of 4 int8 /
 * 2 bf16 per dword): every case must then differ from the VNNI path. */
START_TEST(test_amx_broken_layout_fails)
{
    if (!have_avx512())
        return;
    eng_amx_break_layout = 1;
    unsigned bad = run_kernel_cases(eng_amx_mm_emu, eng_amx_pack_emu, "broken layout", 1);
    eng_amx_break_layout = 0;
    unsigned cases = 0;
    for (unsigned c = 0; c < N_KC; c++) {
        const struct kcase *kc = &kcases[c];
        /* int8 blocks spanning groups run the VNNI tiles (no AMX): a case
         * reaches the tiles if one of its K blocks lies inside a group */
        unsigned g = kc->group ? kc->group : kc->K, in = 0;
        for (unsigned k0 = 0; k0 < kc->K; k0 += kc->kb) {
            unsigned k1 = kc->K - k0 < kc->kb ? kc->K : k0 + kc->kb;
            in |= (k1 - 1) / g == k0 / g && k0 % 64 == 0;
        }
        cases += in;
        cases += !kc->group && tx8_engine_has_feature(TX8_FEAT_AVX512BF16);
    }
    ck_assert_uint_eq(bad, cases);
}
END_TEST

START_TEST(test_amx_real_tiles)
{
    int emu = eng_amx_emulate;
    eng_amx_emulate = 0;
    const char *why = tx8_engine_isa_why(TX8_ISA_AMX);
    int ok = tx8_engine_isa_supported(TX8_ISA_AMX);
    eng_amx_emulate = emu;
    if (!ok) {
        fprintf(stderr, "test_engine_amx: real tiles skipped: %s\n", why ? why : "?");
        return;
    }
    run_kernel_cases(eng_amx_mm_hw, eng_amx_pack_hw, "real tiles", 0);
}
END_TEST

/* ---- end to end ---------------------------------------------------------- */

static struct te *amx_emu_engine(void)
{
    eng_amx_emulate = 1;
    struct te *t = te_new(TX8_ISA_AMX, 2, 48ull << 20);
    eng_amx_emulate = 0;
    ck_assert_ptr_nonnull(t);
    ck_assert(tx8_engine_features(t->e) & TX8_FEAT_AMX);
    return t;
}

/* b gets a's heap (the same inputs at the same addresses) */
static void te_mirror(struct te *a, struct te *b)
{
    memcpy(b->mem + TX8_CTRL_SIZE, a->mem + TX8_CTRL_SIZE, a->brk - TX8_CTRL_SIZE);
    b->brk = a->brk;
}

static unsigned run_cmd(struct te *t, const void *cmd, int bi)
{
    te_cmd_begin(t);
    te_cmd(t, cmd);
    te_job_default(t);
    if (bi)
        t->job.flags = TX8_JOB_F_BATCH_INVARIANT;
    return te_run_job(t, NULL);
}

static uint64_t make_weight(struct te *t, uint64_t *rng, struct tx8_weight *w, unsigned N,
                            unsigned K, unsigned dt, unsigned group)
{
    memset(w, 0, sizeof(*w));
    size_t es = dt == TX8_DTYPE_I8 ? 1 : 2;
    w->data = te_alloc(t, (uint64_t)N * K * es);
    w->rows = N;
    w->cols = K;
    w->dtype = (uint16_t)dt;
    if (dt == TX8_DTYPE_I8) {
        unsigned ng = group ? K / group : 1;
        w->scales = te_alloc(t, (uint64_t)N * ng * 4);
        w->group_size = group;
        float *s = te_ptr(t, w->scales);
        for (size_t i = 0; i < (size_t)N * ng; i++)
            s[i] = 0.001f + 0.01f * (float)te_rand(rng, 1, 1000) / 1000.0f;
        int8_t *q = te_ptr(t, w->data);
        for (size_t i = 0; i < (size_t)N * K; i++)
            q[i] = (int8_t)((int)te_rand(rng, 0, 254) - 127);
    } else {
        uint16_t *h = te_ptr(t, w->data);
        for (size_t i = 0; i < (size_t)N * K; i++)
            h[i] = tx_f32_to_bf16(te_randf(rng));
    }
    return w->data;
}

static void compare_out(const float *a, const float *v, size_t n, int i8, const char *what,
                        unsigned T, unsigned N, unsigned K, unsigned group)
{
    if (i8) {
        for (size_t i = 0; i < n; i++)
            TE_CHECK(!memcmp(&a[i], &v[i], 4),
                     "%s int8 T=%u N=%u K=%u group=%u: token %zu col %zu: amx %.9g, avx512 %.9g",
                     what, T, N, K, group, i / N, i % N, a[i], v[i]);
        return;
    }
    /* both are within the BF16 tolerance of the exact result (checked per
     * element against a double reference at the kernel level above); here,
     * relative to the largest output (MOE_FFN rounds its hidden rows to
     * BF16, where a last-bit difference can flip a rounding) */
    double mx = 0;
    for (size_t i = 0; i < n; i++)
        mx = fabs(v[i]) > mx ? fabs(v[i]) : mx;
    for (size_t i = 0; i < n; i++)
        TE_CHECK(fabs((double)a[i] - v[i]) <= 2e-3 * (mx + 1),
                 "%s bf16 T=%u N=%u K=%u: token %zu col %zu: amx %.9g, avx512 %.9g", what, T, N,
                 K, i / N, i % N, a[i], v[i]);
}

START_TEST(test_amx_matmul_e2e)
{
    if (!have_avx512())
        return;
    struct te *ta = amx_emu_engine();
    struct te *tv = te_new(TX8_ISA_AVX512, 2, 48ull << 20);
    static const unsigned Ts[] = {16, 17, 31, 64, 100, 300};
    static const struct {
        unsigned N, K, dt, group;
    } shapes[] = {
        {200, 2100, TX8_DTYPE_I8, 0},    {520, 4160, TX8_DTYPE_I8, 0},
        {200, 4160, TX8_DTYPE_I8, 2080}, {136, 1024, TX8_DTYPE_I8, 64},
        {200, 2100, TX8_DTYPE_BF16, 0},  {264, 1000, TX8_DTYPE_BF16, 0},
    };
    uint64_t rng = 99;
    uint64_t tdp0 = eng_amx_emu_tdp;
    for (unsigned s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        unsigned N = shapes[s].N, K = shapes[s].K, dt = shapes[s].dt;
        int i8 = dt == TX8_DTYPE_I8;
        if (!i8 && !tx8_engine_has_feature(TX8_FEAT_AVX512BF16))
            continue;
        for (unsigned ti = 0; ti < sizeof(Ts) / sizeof(Ts[0]); ti++) {
            unsigned T = Ts[ti];
            for (int bi = 0; bi < 2; bi++) {
                uint64_t mark = ta->brk;
                struct tx8_cmd_matmul m;
                memset(&m, 0, sizeof(m));
                m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
                make_weight(ta, &rng, &m.w, N, K, dt, shapes[s].group);
                m.x = te_alloc(ta, (uint64_t)T * K * 4);
                m.y = te_alloc(ta, (uint64_t)T * N * 4);
                te_fill_f32(&rng, te_ptr(ta, m.x), (size_t)T * K, 1.0f);
                m.act_dtype = (uint16_t)dt;
                m.ld_x = K;
                m.ld_y = N;
                m.tokens = T;
                te_mirror(ta, tv);
                TE_EQ(run_cmd(ta, &m, bi), TX8_STATUS_OK);
                TE_EQ(run_cmd(tv, &m, bi), TX8_STATUS_OK);
                compare_out(te_ptr(ta, m.y), te_ptr(tv, m.y), (size_t)T * N, i8 || bi,
                            bi ? "MATMUL (batch-invariant)" : "MATMUL", T, N, K,
                            shapes[s].group);
                te_reset(ta, mark);
                te_reset(tv, mark);
            }
        }
    }
    ck_assert_uint_gt(eng_amx_emu_tdp, tdp0); /* the tile unit was used */
    te_free(ta);
    te_free(tv);
}
END_TEST

START_TEST(test_amx_moe_e2e)
{
    if (!have_avx512())
        return;
    struct te *ta = amx_emu_engine();
    struct te *tv = te_new(TX8_ISA_AVX512, 2, 48ull << 20);
    uint64_t rng = 7;
    uint64_t tdp0 = eng_amx_emu_tdp;
    for (int c = 0; c < 3; c++) {
        unsigned dt = c < 2 ? TX8_DTYPE_I8 : TX8_DTYPE_BF16;
        if (dt == TX8_DTYPE_BF16 && !tx8_engine_has_feature(TX8_FEAT_AVX512BF16))
            continue;
        unsigned NE = 4, TK = 2, T = 70, D = 160, F = 192, group = c == 1 ? 32 : 0;
        uint64_t mark = ta->brk;
        uint64_t tab = te_alloc(ta, NE * 3 * sizeof(struct tx8_weight));
        for (unsigned e = 0; e < NE; e++)
            for (unsigned j = 0; j < 3; j++) {
                struct tx8_weight w;
                make_weight(ta, &rng, &w, j == 2 ? D : F, j == 2 ? F : D, dt, group);
                ((struct tx8_weight *)te_ptr(ta, tab))[e * 3 + j] = w;
            }
        uint64_t x = te_alloc(ta, (size_t)T * D * 4), y = te_alloc(ta, (size_t)T * D * 4),
                 ids = te_alloc(ta, T * TK * 4), wt = te_alloc(ta, T * TK * 4);
        te_fill_f32(&rng, te_ptr(ta, x), (size_t)T * D, 1.0f);
        te_fill_f32(&rng, te_ptr(ta, wt), T * TK, 1.0f);
        int32_t *ip = te_ptr(ta, ids);
        for (unsigned i = 0; i < T; i++) {
            /* expert 0 gets most tokens (>= 16 rows: the AMX blocks) */
            ip[i * TK] = i % 5 ? 0 : (int32_t)te_rand(&rng, 1, NE - 1);
            ip[i * TK + 1] = (ip[i * TK] + 1 + (int32_t)te_rand(&rng, 0, NE - 2)) % (int32_t)NE;
        }
        struct tx8_cmd_moe_ffn m = {TE_HDR(TX8_OP_MOE_FFN, struct tx8_cmd_moe_ffn),
                                    y, x, ids, wt, tab, T, TK, NE, D, F, D, D, (uint16_t)dt, 0};
        for (int bi = 0; bi < 2; bi++) {
            te_mirror(ta, tv);
            TE_EQ(run_cmd(ta, &m, bi), TX8_STATUS_OK);
            TE_EQ(run_cmd(tv, &m, bi), TX8_STATUS_OK);
            compare_out(te_ptr(ta, y), te_ptr(tv, y), (size_t)T * D,
                        dt == TX8_DTYPE_I8 || bi, bi ? "MOE_FFN (batch-invariant)" : "MOE_FFN", T,
                        D, F, group);
        }
        te_reset(ta, mark);
        te_reset(tv, mark);
    }
    ck_assert_uint_gt(eng_amx_emu_tdp, tdp0);
    te_free(ta);
    te_free(tv);
}
END_TEST

/* Forcing amx: accepted where the CPU has it, else refused with a reason. */
START_TEST(test_amx_select)
{
    struct tx8_engine *e = NULL;
    static uint8_t mem[TX8_CTRL_SIZE + 65536] __attribute__((aligned(4096)));
    struct tx8_engine_config cfg = {1, -1, 0, TX8_ISA_AMX, {0, 0, 0}};
    int rc = tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL);
    if (tx8_engine_isa_supported(TX8_ISA_AMX)) {
        ck_assert_int_eq(rc, 0);
        ck_assert_uint_eq(tx8_engine_isa(e), TX8_ISA_AMX);
        ck_assert(tx8_engine_features(e) & TX8_FEAT_AMX);
        ck_assert_ptr_null(tx8_engine_isa_why(TX8_ISA_AMX));
        tx8_engine_destroy(e);
        /* auto picks it */
        cfg.isa = TX8_ISA_AUTO;
        unsetenv("TX8_ENGINE_ISA");
        ck_assert_int_eq(tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), 0);
        ck_assert_uint_eq(tx8_engine_isa(e), TX8_ISA_AMX);
        tx8_engine_destroy(e);
    } else {
        ck_assert_int_eq(rc, -ENOTSUP);
        const char *why = tx8_engine_isa_why(TX8_ISA_AMX);
        ck_assert_ptr_nonnull(why);
        fprintf(stderr, "test_engine_amx: amx refused here: %s\n", why);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_amx");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_amx_select);
    tcase_add_test(tc, test_amx_emulated_kernels);
    tcase_add_test(tc, test_amx_broken_layout_fails);
    tcase_add_test(tc, test_amx_real_tiles);
    tcase_add_test(tc, test_amx_matmul_e2e);
    tcase_add_test(tc, test_amx_moe_e2e);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
