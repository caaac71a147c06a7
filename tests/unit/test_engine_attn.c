/* SPDX-License-Identifier: MIT */
/*
 * ATTENTION in query tiles (the AVX-512 tile path, emu/engine/attn_avx512.c)
 * against a double-precision reference, on every ISA this CPU has: prefill
 * shapes (many tokens and heads per tile, causal tiles), decode (the key
 * split), the cache types F32/F16/BF16/Q8_0/Q4_0, absorbed-MLA's shared
 * latent cache and GQA's separate K/V, and selections that keep most keys
 * (the bitmap-masked tiles) or few (one token per tile, gathered keys);
 * DSA_INDEX's tile scoring and radix top-k on exact scores with ties.
 */
#include <immintrin.h>
#include <stdio.h>

#include "test_engine_common.h"
#include "engine/attn_internal.h"
#include "tx_test_main.h"

#define NISA 3

#define TE_BEGIN(i)                                                                                \
    struct te *t = te_new(te_isas[(i)], 2, 64ull << 20);                                           \
    if (!t)                                                                                        \
        return;                                                                                    \
    uint64_t rng = 0x7a11e5ull + (uint64_t)(i)*131;                                                \
    (void)rng

/* the larger of an error so far and |x - y|, a NaN an infinite error (fmax
 * would pass over it) */
static double err_max(double worst, double x, double y)
{
    double e = fabs(x - y);
    return isnan(e) ? INFINITY : fmax(worst, e);
}

static void fill(uint64_t *rng, float *p, size_t n, float a)
{
    for (size_t i = 0; i < n; i++)
        p[i] = a * te_randf(rng);
}

/* rows x cols f32 at src written as dt at dst, and read back as f32 into deq */
static void convert(struct te *t, uint64_t dst, uint64_t src, uint64_t deq, unsigned rows,
                    unsigned cols, unsigned dt)
{
    struct tx8_cmd_convert cv;
    memset(&cv, 0, sizeof(cv));
    cv.hdr = TE_HDR(TX8_OP_CONVERT, struct tx8_cmd_convert);
    cv.dst = dst;
    cv.src = src;
    cv.rows = rows;
    cv.cols = cv.ld_dst = cv.ld_src = cols;
    cv.dst_dtype = (uint16_t)dt;
    cv.src_dtype = TX8_DTYPE_F32;
    ck_assert_uint_eq(te_run1(t, &cv), TX8_STATUS_OK);
    cv.dst = deq;
    cv.src = dst;
    cv.dst_dtype = TX8_DTYPE_F32;
    cv.src_dtype = (uint16_t)dt;
    ck_assert_uint_eq(te_run1(t, &cv), TX8_STATUS_OK);
}

struct acase {
    unsigned dt, T, qh, kvh, qk, vd, q0;
    int shared;  /* k == v (absorbed MLA), kvh 1 */
    int sel;     /* 0 none, 1 most keys (bitmap tiles), 2 few keys (gathered) */
    int bf;      /* TX8_ATTN_F_BF16 */
    float scale; /* 0: 0.125 */
};

/* run_case_x with the 1.10 key bitmap (custom attention masks): a pattern
 * hiding about a third of each query's keys (test_attention_mask) */
static int g_mask;

/* the case's key bitmap pattern: key s visible to query position p (s <= p) */
static int mask_keeps(unsigned p, unsigned s)
{
    if (g_mask == 2 && p % 2 == 0)
        return 0; /* mode 2: the queries at even positions see no key (zeros) */
    return s == p || (s * 3 + p) % 5 < 3;
}

/* the reference's BF16 rounding (nearest even; no denormals arise here) */
static float bf16r(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

/*
 * Runs the case; returns the largest error against the double reference of
 * its form (with bf: the scaled query and the K/V elements rounded to BF16,
 * the probabilities exact), and in *other the error against the other
 * form's reference.
 */
static double run_case_x(struct te *t, uint64_t *rng, const struct acase *cs, unsigned vt,
                         double *other, float *out)
{
    unsigned T = cs->T, qh = cs->qh, kvh = cs->kvh, qk = cs->qk, vd = cs->vd, q0 = cs->q0;
    unsigned kvlen = q0 + T, grp = qh / kvh;
    unsigned krow = kvh * qk, vrow = kvh * vd;
    unsigned sel_k = cs->sel ? kvlen : 0;
    uint64_t mark = t->brk;
    uint64_t ksrc = te_alloc(t, (size_t)kvlen * krow * 4),
             kc = te_alloc(t, (size_t)kvlen * krow * 4), kd = te_alloc(t, (size_t)kvlen * krow * 4),
             vsrc = te_alloc(t, (size_t)kvlen * vrow * 4),
             vc = te_alloc(t, (size_t)kvlen * vrow * 4),
             vdq = te_alloc(t, (size_t)kvlen * vrow * 4), q = te_alloc(t, (size_t)T * qh * qk * 4),
             o = te_alloc(t, (size_t)T * qh * vd * 4), sel = te_alloc(t, (size_t)T * sel_k * 4 + 4);
    /* the key bitmap, one spare word a row (ld_mask above the minimum), bits
     * past each query's causal keys set too: the device ignores them */
    unsigned ldm = (kvlen + 63) / 64 + 1;
    uint64_t mk = g_mask ? te_alloc(t, (size_t)T * ldm * 8) : 0;
    uint64_t *mp = g_mask ? te_ptr(t, mk) : NULL;
    for (unsigned tt = 0; mp && tt < T; tt++)
        for (unsigned s = 0; s < ldm * 64; s++)
            if (s >= kvlen || s > q0 + tt || mask_keeps(q0 + tt, s))
                mp[(size_t)tt * ldm + s / 64] |= (uint64_t)1 << (s % 64);
            else
                mp[(size_t)tt * ldm + s / 64] &= ~((uint64_t)1 << (s % 64));
    fill(rng, te_ptr(t, ksrc), (size_t)kvlen * krow, 1.0f);
    fill(rng, te_ptr(t, vsrc), (size_t)kvlen * vrow, 1.0f);
    fill(rng, te_ptr(t, q), (size_t)T * qh * qk, 0.5f);
    convert(t, kc, ksrc, kd, kvlen * kvh, qk, cs->dt);
    unsigned vdt = vt ? vt - 1 : cs->dt;
    if (!cs->shared)
        convert(t, vc, vsrc, vdq, kvlen * kvh, vd, vdt);
    int32_t *sp = te_ptr(t, sel);
    for (unsigned tt = 0; cs->sel && tt < T; tt++) {
        unsigned lim = q0 + tt + 1, n = 0;
        /* every causal key but some (sel 1) or one in six (sel 2), in a
         * scrambled order, -1 pads */
        for (unsigned j = 0; j < lim; j++) {
            unsigned s = (j * 37 + tt) % lim; /* a permutation when gcd(37, lim) == 1 */
            if (lim % 37 == 0)
                s = j;
            int keep = cs->sel == 1 ? (s * 7 + tt) % 10 != 3 : (s * 5 + tt) % 6 == 0;
            if (keep)
                sp[tt * sel_k + n++] = (int32_t)s;
        }
        while (n < sel_k)
            sp[tt * sel_k + n++] = -1;
    }
    struct tx8_cmd_attention c;
    memset(&c, 0, sizeof(c));
    c.hdr = TE_HDR(TX8_OP_ATTENTION, struct tx8_cmd_attention);
    c.out = o;
    c.q = q;
    c.k = kc;
    c.v = cs->shared ? kc : vc;
    c.sel = cs->sel ? sel : 0;
    c.sel_k = sel_k;
    c.tokens = T;
    c.q_heads = qh;
    c.kv_heads = kvh;
    c.qk_dim = qk;
    c.v_dim = vd;
    c.kv_len = kvlen;
    c.q_pos0 = q0;
    c.ld_q_head = qk;
    c.ld_k_head = qk;
    c.ld_v_head = cs->shared ? qk : vd;
    c.ld_o_head = vd;
    float scale = cs->scale > 0 ? cs->scale : 0.125f;
    c.scale = scale;
    c.kv_dtype = (uint16_t)cs->dt;
    if (vdt != cs->dt && !cs->shared) {
        c.hdr.flags |= TX8_ATTN_F_V_DTYPE;
        c.v_dtype = (uint16_t)vdt;
    }
    if (cs->bf)
        c.hdr.flags |= TX8_ATTN_F_BF16;
    if (g_mask) {
        c.mask = mk;
        c.ld_mask = ldm;
    }
    ck_assert_uint_eq(te_run1(t, &c), TX8_STATUS_OK);

    const float *kp = te_ptr(t, kd), *vp = cs->shared ? kp : te_ptr(t, vdq);
    unsigned ldv = cs->shared ? qk : vd, vst = cs->shared ? krow : vrow;
    const float *qp = te_ptr(t, q), *op = te_ptr(t, o);
    if (out)
        memcpy(out, op, sizeof(float) * T * qh * vd);
    double *sc = malloc(sizeof(double) * kvlen);
    char *vis = malloc(kvlen);
    ck_assert_ptr_nonnull(sc);
    ck_assert_ptr_nonnull(vis);
    double worst[2] = {0, 0}; /* [0] f32 form, [1] BF16 form */
    for (int form = 0; form < 2; form++)
        for (unsigned tt = 0; tt < T; tt++) {
            memset(vis, 0, kvlen);
            if (cs->sel) {
                for (unsigned j = 0; j < sel_k; j++)
                    if (sp[tt * sel_k + j] >= 0)
                        vis[sp[tt * sel_k + j]] = 1;
            } else {
                memset(vis, 1, q0 + tt + 1);
            }
            for (unsigned j = 0; g_mask && j <= q0 + tt; j++)
                vis[j] &= (char)mask_keeps(q0 + tt, j);
            for (unsigned h = 0; h < qh; h++) {
                unsigned g = h / grp;
                double mx = -INFINITY;
                for (unsigned s = 0; s < kvlen; s++) {
                    sc[s] = -INFINITY;
                    if (!vis[s])
                        continue;
                    double d = 0;
                    for (unsigned i = 0; i < qk; i++) {
                        float qv = qp[((size_t)tt * qh + h) * qk + i],
                              kv = kp[(size_t)s * krow + g * qk + i];
                        d += form ? (double)bf16r(qv * scale) * bf16r(kv) : (double)qv * kv * scale;
                    }
                    sc[s] = d;
                    mx = fmax(mx, sc[s]);
                }
                double sum = 0;
                for (unsigned s = 0; s < kvlen; s++)
                    if (vis[s])
                        sum += exp(sc[s] - mx);
                for (unsigned d = 0; d < vd; d++) {
                    double acc = 0;
                    for (unsigned s = 0; s < kvlen; s++)
                        if (vis[s]) {
                            float v = vp[(size_t)s * vst + g * ldv + d];
                            acc += exp(sc[s] - mx) / sum * (form ? bf16r(v) : v);
                        }
                    worst[form] = err_max(worst[form], op[((size_t)tt * qh + h) * vd + d], acc);
                }
            }
        }
    free(vis);
    free(sc);
    te_reset(t, mark);
    if (other)
        *other = worst[!cs->bf];
    return worst[!!cs->bf];
}

static double run_case(struct te *t, uint64_t *rng, const struct acase *cs)
{
    return run_case_x(t, rng, cs, 0, NULL, NULL);
}

START_TEST(test_attention_tiles)
{
    TE_BEGIN(_i);
    const unsigned dts[5] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_BF16, TX8_DTYPE_Q8_0,
                             TX8_DTYPE_Q4_0};
    /* dt, T, qh, kvh, qk, vd, q0, shared, sel, bf, scale */
    const struct acase cases[] = {
        {0, 70, 16, 1, 96, 64, 0, 1, 0, 0, 0},   /* MLA prefill from empty */
        {0, 37, 16, 1, 96, 64, 150, 1, 0, 0, 0}, /* MLA prefill after a prefix */
        {0, 1, 16, 1, 96, 64, 700, 1, 0, 0, 0},  /* MLA decode: the key split */
        {0, 1, 16, 1, 96, 64, 20, 1, 0, 0, 0},   /* short decode: heads split */
        {0, 40, 8, 2, 64, 64, 90, 0, 0, 0, 0},   /* GQA prefill */
        {0, 3, 8, 2, 64, 64, 600, 0, 0, 0, 0},   /* GQA decode-ish */
        {0, 33, 16, 1, 96, 64, 200, 1, 1, 0, 0}, /* DSA: most keys, bitmap tiles */
        {0, 1, 16, 1, 96, 64, 700, 1, 1, 0, 0},  /* DSA decode, bitmap + split */
        {0, 9, 16, 1, 96, 64, 300, 1, 2, 0, 0},  /* DSA: few keys, gathered */
        {0, 20, 4, 1, 64, 32, 60, 0, 1, 0, 0},   /* MQA with its own V, bitmap */
        {0, 2, 80, 1, 32, 32, 40, 1, 0, 0, 0},   /* a group wider than a tile */
        {0, 45, 4, 4, 96, 64, 0, 0, 0, 0, 0},    /* MHA prefill (expanded MLA): token tiles */
        {0, 29, 4, 4, 96, 32, 150, 0, 0, 0, 0},  /* MHA prefill after a prefix */
        {0, 13, 3, 3, 64, 32, 0, 0, 2, 0, 0},    /* MHA with a selection: one token a tile */
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
        for (int d = 0; d < 5; d++) {
            struct acase cs = cases[ci];
            cs.dt = dts[d];
            double worst = run_case(t, &rng, &cs);
            ck_assert_msg(worst <= 3e-5, "case %zu (%s, T %u, q0 %u, sel %d): max error %g", ci,
                          tx_dtype_name(cs.dt), cs.T, cs.q0, cs.sel, worst);
        }
    te_free(t);
}
END_TEST

/* the 1.10 key bitmap (custom attention masks) on every path: the tile
 * path's masked tiles (as DSA's selection bitmap), the decode kernel, the
 * per-token path (AVX2, portable), with and without a selection (the
 * bitmap and the selection intersected), against the reference over the
 * keys both allow; then with queries that see no key at all (zeros) */
START_TEST(test_attention_mask)
{
    TE_BEGIN(_i);
    const unsigned dts[3] = {TX8_DTYPE_F32, TX8_DTYPE_BF16, TX8_DTYPE_Q8_0};
    /* dt, T, qh, kvh, qk, vd, q0, shared, sel, bf, scale */
    const struct acase cases[] = {
        {0, 40, 8, 2, 64, 64, 0, 0, 0, 0, 0},    /* GQA prefill from empty */
        {0, 40, 8, 2, 64, 64, 90, 0, 0, 0, 0},   /* GQA prefill after a prefix */
        {0, 70, 16, 1, 96, 64, 0, 1, 0, 0, 0},   /* MLA prefill */
        {0, 33, 16, 1, 96, 64, 200, 1, 1, 0, 0}, /* DSA: the selection and the mask */
        {0, 9, 16, 1, 96, 64, 300, 1, 2, 0, 0},  /* DSA: few keys, gathered */
        {0, 1, 16, 1, 96, 64, 700, 1, 0, 0, 0},  /* one token: the key split */
        {0, 3, 8, 2, 64, 64, 600, 0, 0, 0, 0},   /* GQA, few tokens */
        {0, 2, 80, 1, 32, 32, 40, 1, 0, 0, 0},   /* a group wider than a tile */
        {0, 45, 4, 4, 96, 64, 0, 0, 0, 0, 0},    /* MHA prefill: token tiles */
    };
    for (g_mask = 1; g_mask <= 2; g_mask++) /* 2: some queries see nothing */
        for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
            for (int d = 0; d < 3; d++) {
                struct acase cs = cases[ci];
                cs.dt = dts[d];
                double worst = run_case(t, &rng, &cs);
                ck_assert_msg(worst <= 3e-5,
                              "mask %d case %zu (%s, T %u, q0 %u, sel %d): max error %g", g_mask,
                              ci, tx_dtype_name(cs.dt), cs.T, cs.q0, cs.sel, worst);
            }
    g_mask = 0;
    te_free(t);
}
END_TEST

/* one token's group off the tile path (GQA decode: fewer than 8 rows),
 * the AVX-512 decode kernel (attn_decode_avx512.c) against the reference
 * and, with TX8_ATTN_DECODE=0, the per-token path: groups of 1-7 rows
 * (register blocks of 4 with padded rows), head dims that leave a 16-wide
 * V block, key counts around its 64-key chunks and 4-key blocks, one
 * position, and the key split (one kv head over 700 keys) */
START_TEST(test_attention_decode)
{
    TE_BEGIN(_i);
    const unsigned dts[5] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_BF16, TX8_DTYPE_Q8_0,
                             TX8_DTYPE_Q4_0};
    /* dt, T, qh, kvh, qk, vd, q0, shared, sel, bf, scale */
    const struct acase cases[] = {
        {0, 1, 16, 4, 128, 128, 2047, 0, 0, 0, 0}, /* GLM-4.5's group of 4 at d2048 */
        {0, 1, 6, 2, 64, 48, 64, 0, 0, 0, 0},      /* 3 rows, a 16-wide V block */
        {0, 1, 7, 1, 64, 80, 699, 0, 0, 0, 0},     /* 7 rows, the key split */
        {0, 1, 2, 1, 32, 32, 62, 0, 0, 0, 0},      /* 2 rows, 63 keys */
        {0, 1, 5, 5, 64, 64, 4, 0, 0, 0, 0},       /* MHA decode, 5 keys */
        {0, 1, 4, 2, 64, 64, 0, 0, 0, 0, 0},       /* the first position */
        {0, 1, 12, 3, 96, 64, 130, 0, 0, 0, 0.4f}, /* larger scores */
        /* the last: K of each type, V f16 (--ctk q8_0 --ctv f16) */
        {0, 1, 16, 4, 128, 128, 300, 0, 0, 0, 0},
    };
    const size_t ncases = sizeof(cases) / sizeof(cases[0]);
    for (int path = 0; path < 2; path++) {
        ck_assert_int_eq(tx8_engine_setting(t->e, "TX8_ATTN_DECODE", path ? "0" : "1"), 0);
        for (size_t ci = 0; ci < ncases; ci++)
            for (int d = 0; d < 5; d++) {
                struct acase cs = cases[ci];
                cs.dt = dts[d];
                if (tx_dtype_is_block(cs.dt) && (cs.qk % TX8_KV_BLOCK || cs.vd % TX8_KV_BLOCK))
                    continue; /* a block type's rows are whole blocks */
                /* V type + 1 (TX8_ATTN_F_V_DTYPE); 0: as K */
                unsigned vt = ci == ncases - 1 ? TX8_DTYPE_F16 + 1 : 0;
                double worst = run_case_x(t, &rng, &cs, vt, NULL, NULL);
                ck_assert_msg(worst <= 3e-5, "%s, case %zu (%s, qh %u, kvh %u, q0 %u): max error %g",
                              path ? "per-token path" : "decode kernel", ci, tx_dtype_name(cs.dt),
                              cs.qh, cs.kvh, cs.q0, worst);
            }
    }
    ck_assert_int_eq(tx8_engine_setting(t->e, "TX8_ATTN_DECODE", NULL), 0);
    te_free(t);
}
END_TEST

/* The decode kernel against the query tile on one token's commands (the
 * decode kernel takes them, TX8_ATTN_DECODE=0 gives them back to the tile),
 * with BF16 products and without: both compute the same form, so their
 * outputs agree to f32 summation order (a query left unrounded fails the
 * sharper case's reference check, a p left unrounded its agreement). Loop
 * 0: BF16 products by vdpbf16ps on both paths (the decode kernel's pairs
 * of dims and of keys; skipped without AVX512-BF16), 1: by f32 FMAs of the
 * rounded operands */
START_TEST(test_attention_decode_paths)
{
    setenv("TX8_ATTN_BF16_DOT", _i == 0 ? "vdpbf16ps" : "f32", 1);
    struct te *t = te_new(TX8_ISA_AVX512, 2, 64ull << 20);
    unsetenv("TX8_ATTN_BF16_DOT");
    if (!t)
        return;
    if (_i == 0 && !tx8_engine_attn_bf16_dot(t->e)) {
        fprintf(stderr, "test_attention_decode_paths: no AVX512-BF16 here: the vdpbf16ps "
                        "decode kernel not run\n");
        te_free(t);
        return;
    }
    /* dt, T, qh, kvh, qk, vd, q0, shared, sel, bf, scale */
    const struct acase cases[] = {
        {TX8_DTYPE_BF16, 1, 16, 1, 96, 64, 300, 1, 0, 1, 0},  /* MLA decode, BF16 products */
        {TX8_DTYPE_BF16, 1, 16, 1, 96, 64, 700, 1, 1, 1, 0},  /* DSA decode (bitmap), split */
        {TX8_DTYPE_BF16, 1, 16, 1, 96, 64, 450, 1, 0, 1, 8},  /* sharper */
        {TX8_DTYPE_F16, 1, 16, 1, 96, 64, 700, 1, 1, 0, 0},   /* DSA decode, f32 products */
        {TX8_DTYPE_BF16, 1, 16, 2, 64, 64, 400, 0, 0, 1, 0},  /* GQA group of 8, BF16 */
        {TX8_DTYPE_Q8_0, 1, 32, 2, 64, 64, 333, 0, 0, 0, 0},  /* GQA group of 16, q8_0 */
        {TX8_DTYPE_BF16, 1, 16, 1, 128, 96, 260, 1, 0, 1, 0}, /* a 32-wide V block (96 = 64 + 32) */
        {TX8_DTYPE_BF16, 1, 4, 1, 64, 64, 0, 0, 0, 1, 0},     /* one key: a pair's zero half */
        {TX8_DTYPE_BF16, 1, 32, 2, 48, 48, 100, 0, 0, 1, 0},  /* dims not in 32s: f32 FMAs */
    };
    float *out[2];
    out[0] = malloc(sizeof(float) * 32 * 64);
    out[1] = malloc(sizeof(float) * 32 * 64);
    ck_assert_ptr_nonnull(out[0]);
    ck_assert_ptr_nonnull(out[1]);
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const struct acase *cs = &cases[ci];
        double worst[2];
        for (int path = 0; path < 2; path++) {
            uint64_t rng = 0xdec0deull + ci; /* the same inputs on both paths */
            ck_assert_int_eq(tx8_engine_setting(t->e, "TX8_ATTN_DECODE", path ? "0" : "1"), 0);
            worst[path] = run_case_x(t, &rng, cs, 0, NULL, out[path]);
        }
        ck_assert_int_eq(tx8_engine_setting(t->e, "TX8_ATTN_DECODE", NULL), 0);
        double tol = cs->bf ? 1.2 / 512 + 3e-5 : 3e-5, diff = 0;
        for (size_t i = 0; i < (size_t)cs->qh * cs->vd; i++)
            diff = err_max(diff, out[0][i], out[1][i]);
        ck_assert_msg(worst[0] <= tol && worst[1] <= tol, "case %zu: errors %g (decode), %g (tile)",
                      ci, worst[0], worst[1]);
        /* bf16(p) of a p near a rounding boundary may round either way
         * after a different summation order: 1e-4 at a flat softmax; the
         * sharper case (its p far apart) is where the forms must agree */
        double agree = cs->bf && cs->scale == 0 ? 3e-4 : 3e-5;
        ck_assert_msg(diff <= agree, "case %zu: the decode kernel is %g from the tile path", ci,
                      diff);
    }
    free(out[0]);
    free(out[1]);
    te_free(t);
}
END_TEST

/* DSA_INDEX with small-integer queries, keys and weights: every score is
 * exact whatever the order of the sums, so the selection (ties included:
 * many keys share a score) must equal a sort by (score desc, index asc),
 * for the tile scoring + radix top-k and for the per-token scoring */
static const double *g_sc;
static int by_rank(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (g_sc[x] != g_sc[y])
        return g_sc[x] > g_sc[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

START_TEST(test_dsa_index_ties)
{
    TE_BEGIN(_i);
    /* T, H, D, q0, K */
    const unsigned cs[][5] = {{1, 16, 128, 2048, 2048}, {9, 16, 64, 300, 64},
                              {1, 16, 64, 5000, 2048},  {70, 4, 32, 100, 50},
                              {5, 24, 32, 700, 128},    {3, 64, 32, 90, 16},
                              {2, 80, 16, 40, 8},       {33, 1, 16, 10, 20},
                              {1, 16, 32, 9000, 256}}; /* the last: parallel parts + merge */
    for (size_t ci = 0; ci < sizeof(cs) / sizeof(cs[0]); ci++)
        for (int pathi = 0; pathi < 4; pathi++) {
            /* paths 2, 3: with the 1.10 key bitmap (the top-k among the
             * keys it shows) */
            int masked = pathi >= 2;
            ck_assert_int_eq(tx8_engine_setting(t->e, "TX8_DSA_TILE", pathi % 2 ? "1" : "0"), 0);
            unsigned T = cs[ci][0], H = cs[ci][1], D = cs[ci][2], q0 = cs[ci][3], K = cs[ci][4];
            unsigned kvlen = q0 + T;
            uint64_t mark = t->brk;
            uint64_t q = te_alloc(t, (size_t)T * H * D * 4), k = te_alloc(t, (size_t)kvlen * D * 4),
                     w = te_alloc(t, (size_t)T * H * 4), sel = te_alloc(t, (size_t)T * K * 4);
            float *qp = te_ptr(t, q), *kp = te_ptr(t, k), *wp = te_ptr(t, w);
            for (size_t i = 0; i < (size_t)T * H * D; i++)
                qp[i] = (float)((int)te_rand(&rng, 0, 4) - 2);
            for (size_t i = 0; i < (size_t)kvlen * D; i++)
                kp[i] = (float)((int)te_rand(&rng, 0, 2) - 1);
            for (size_t i = 0; i < (size_t)T * H; i++)
                wp[i] = (float)((int)te_rand(&rng, 0, 4) - 1) * 0.5f;
            struct tx8_cmd_dsa_index c = {TE_HDR(TX8_OP_DSA_INDEX, struct tx8_cmd_dsa_index),
                                          sel,
                                          q,
                                          k,
                                          w,
                                          T,
                                          H,
                                          D,
                                          kvlen,
                                          q0,
                                          K,
                                          D,
                                          D,
                                          0,
                                          0,
                                          0};
            unsigned ldm = (kvlen + 63) / 64;
            uint64_t mk = masked ? te_alloc(t, (size_t)T * ldm * 8) : 0;
            for (unsigned tt = 0; masked && tt < T; tt++) {
                uint64_t *row = (uint64_t *)te_ptr(t, mk) + (size_t)tt * ldm;
                memset(row, 0, ldm * 8);
                for (unsigned s = 0; s < kvlen; s++)
                    if (mask_keeps(q0 + tt, s))
                        row[s / 64] |= (uint64_t)1 << (s % 64);
            }
            c.mask = mk;
            c.ld_mask = masked ? ldm : 0;
            ck_assert_uint_eq(te_run1(t, &c), TX8_STATUS_OK);
            const int32_t *sp = te_ptr(t, sel);
            double *sc = malloc(sizeof(double) * kvlen);
            int32_t *ord = malloc(sizeof(int32_t) * kvlen);
            ck_assert_ptr_nonnull(sc);
            ck_assert_ptr_nonnull(ord);
            for (unsigned tt = 0; tt < T; tt++) {
                unsigned vis = 0;
                for (unsigned s = 0; s <= q0 + tt; s++) {
                    if (masked && !mask_keeps(q0 + tt, s))
                        continue; /* hidden: never selected */
                    double acc = 0;
                    for (unsigned h = 0; h < H; h++) {
                        double d = 0;
                        for (unsigned i = 0; i < D; i++)
                            d += (double)qp[((size_t)tt * H + h) * D + i] * kp[(size_t)s * D + i];
                        if (d > 0)
                            acc += wp[tt * H + h] * d;
                    }
                    sc[s] = acc;
                    ord[vis++] = (int32_t)s;
                }
                g_sc = sc;
                qsort(ord, vis, sizeof(int32_t), by_rank);
                for (unsigned j = 0; j < K; j++) {
                    int32_t want = j < vis ? ord[j] : -1;
                    ck_assert_msg(sp[(size_t)tt * K + j] == want,
                                  "case %zu path %d token %u rank %u: key %d, want %d", ci, pathi,
                                  tt, j, sp[(size_t)tt * K + j], want);
                }
            }
            free(ord);
            free(sc);
            te_reset(t, mark);
        }
    ck_assert_int_eq(tx8_engine_setting(t->e, "TX8_DSA_TILE", NULL), 0);
    te_free(t);
}
END_TEST

/*
 * TX8_ATTN_F_BF16 (interface 1.7) on every ISA (loop indices 0-2; AVX-512
 * with the engine's default form), and on AVX-512 without AVX512-BF16 (3),
 * with vdpbf16ps forced (4: the BF16 tile) and with the f32 tile forced (5:
 * FMAs of the rounded operands); the per-token path (AVX2, portable) rounds
 * the operands too: against the BF16 form's reference within the rounding
 * of the probabilities (2^-9 relative, |v| <= 1), and, with a sharp
 * softmax, measurably away from the f32 form (the operands are rounded, not
 * computed in f32).
 */
START_TEST(test_attention_bf16)
{
    unsigned isa = te_isas[_i < 3 ? _i : 2];
    if (_i == 3)
        setenv("TX8_ENGINE_AVX512BF16", "0", 1);
    if (_i == 4 || _i == 5)
        setenv("TX8_ATTN_BF16_DOT", _i == 4 ? "vdpbf16ps" : "f32", 1);
    struct te *t = te_new(isa, 2, 64ull << 20);
    unsetenv("TX8_ENGINE_AVX512BF16");
    unsetenv("TX8_ATTN_BF16_DOT");
    if (!t)
        return;
    uint64_t rng = 0xbf16ull + (uint64_t)_i * 17;
    if (_i >= 2 && _i != 3 && !(tx8_engine_features(t->e) & TX8_FEAT_AVX512BF16))
        fprintf(stderr, "test_attention_bf16: this CPU has no AVX512-BF16: avx512 run %d takes "
                        "the f32 tile on rounded operands, as run 3 does\n",
                _i);
    const unsigned dts[5] = {TX8_DTYPE_BF16, TX8_DTYPE_F16, TX8_DTYPE_F32, TX8_DTYPE_Q8_0,
                             TX8_DTYPE_Q4_0};
    /* dt, T, qh, kvh, qk, vd, q0, shared, sel, bf, scale */
    const struct acase cases[] = {
        {0, 70, 16, 1, 96, 64, 0, 1, 0, 1, 0},    /* MLA prefill */
        {0, 1, 16, 1, 96, 64, 700, 1, 0, 1, 0},   /* MLA decode: the key split */
        {0, 1, 16, 1, 96, 64, 20, 1, 0, 1, 0},    /* short decode */
        {0, 40, 8, 2, 64, 64, 90, 0, 0, 1, 0},    /* GQA prefill */
        {0, 3, 8, 2, 64, 64, 600, 0, 0, 1, 0},    /* GQA decode-ish */
        {0, 33, 16, 1, 96, 64, 200, 1, 1, 1, 0},  /* DSA: bitmap tiles */
        {0, 1, 16, 1, 96, 64, 701, 1, 1, 1, 0},   /* DSA decode, odd key count */
        {0, 9, 16, 1, 96, 64, 300, 1, 2, 1, 0},   /* DSA: few keys, gathered */
        {0, 20, 4, 1, 64, 32, 61, 0, 1, 1, 0},    /* MQA with its own V */
        {0, 2, 80, 1, 40, 34, 40, 1, 0, 1, 0},    /* wide group, v_dim 34 */
        {0, 17, 16, 1, 96, 64, 100, 1, 0, 1, 24}, /* sharp softmax */
        {0, 45, 4, 4, 80, 48, 0, 0, 0, 1, 0},     /* MHA prefill: token tiles */
        {0, 29, 4, 4, 64, 64, 150, 0, 0, 1, 24},  /* MHA after a prefix, sharp */
        {0, 1, 16, 1, 96, 64, 300, 1, 0, 1, 0},   /* MLA decode, one key range */
        {0, 1, 16, 1, 96, 64, 520, 1, 1, 1, 0},   /* DSA decode, bitmap, key split */
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
        for (int d = 0; d < 5; d++) {
            struct acase cs = cases[ci];
            cs.dt = dts[d];
            if (tx_dtype_is_block(cs.dt) && (cs.qk % 32 || cs.vd % 32))
                continue;
            double other = 0, worst = run_case_x(t, &rng, &cs, 0, &other, NULL);
            double tol = 1.2 / 512 + 3e-5;
            ck_assert_msg(worst <= tol, "run %d case %zu (%s, T %u, q0 %u, sel %d): max error %g",
                          _i, ci, tx_dtype_name(cs.dt), cs.T, cs.q0, cs.sel, worst);
            if (cs.scale > 0)
                ck_assert_msg(other > 4 * tol,
                              "run %d case %zu (%s): %g from the f32 form: not rounded?", _i, ci,
                              tx_dtype_name(cs.dt), other);
        }
    te_free(t);
}
END_TEST

/* the hardware's vcvtneps2bf16 on 16 floats */
__attribute__((target("avx512bf16,avx512f,avx512vl"))) static void hw_bf16(const float *x,
                                                                           uint16_t *o)
{
    __m256bh b = _mm512_cvtneps_pbh(_mm512_loadu_ps(x));
    memcpy(o, &b, 32);
}

/*
 * The rounding of TX8_ATTN_F_BF16's operands three ways: eng_bf16_bits (the
 * per-token path), eng_bf16_round_avx512 (its AVX-512F form) and, where the
 * CPU has it, vcvtneps2bf16 (the BF16 tile): the same bits for denormals,
 * signed zeros, infinities, NaNs (quieted), halfway cases and 2^20 random
 * bit patterns.
 */
START_TEST(test_bf16_rounding)
{
    int hw = tx8_engine_has_feature(TX8_FEAT_AVX512BF16),
        f512 = tx8_engine_isa_supported(TX8_ISA_AVX512);
    if (!hw)
        fprintf(stderr, "test_bf16_rounding: no AVX512-BF16 here: vcvtneps2bf16 not compared\n");
    if (!f512)
        fprintf(stderr, "test_bf16_rounding: no AVX-512 here: eng_bf16_round_avx512 not run\n");
    const uint32_t special[16] = {0x00000001u, 0x80000001u, 0x007fffffu, 0x00800000u,
                                  0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00001u,
                                  0x7f800001u, 0x00000000u, 0x80000000u, 0x3f808000u,
                                  0x3f818000u, 0x3f80ffffu, 0xbf807fffu, 0x7f7f8000u};
    uint64_t rng = 0xb16b00b5ull;
    for (unsigned round = 0; round <= 65536; round++) {
        uint32_t u[16];
        float x[16], r[16];
        for (int i = 0; i < 16; i++)
            u[i] = round ? (uint32_t)te_rand_u64(&rng) : special[i];
        memcpy(x, u, sizeof(x));
        memcpy(r, x, sizeof(r));
        if (f512)
            eng_bf16_round_avx512(r, 16);
        uint16_t h[16];
        if (hw)
            hw_bf16(x, h);
        for (int i = 0; i < 16; i++) {
            uint16_t want = eng_bf16_bits(x[i]);
            uint32_t ru;
            memcpy(&ru, &r[i], 4);
            if (f512)
                ck_assert_msg(ru == (uint32_t)want << 16, "avx512 %08x: %08x, want %04x0000", u[i],
                              ru, want);
            if (hw)
                ck_assert_msg(h[i] == want, "vcvtneps2bf16 %08x: %04x, eng_bf16_bits %04x", u[i],
                              h[i], want);
        }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_attn");
    TCase *tc = tcase_create("attn");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_attention_tiles, 0, NISA);
    tcase_add_loop_test(tc, test_attention_decode, 0, NISA);
    tcase_add_loop_test(tc, test_attention_mask, 0, NISA);
    tcase_add_loop_test(tc, test_attention_decode_paths, 0, 2);
    tcase_add_loop_test(tc, test_dsa_index_ties, 0, NISA);
    tcase_add_loop_test(tc, test_attention_bf16, 0, NISA + 3);
    tcase_add_test(tc, test_bf16_rounding);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
