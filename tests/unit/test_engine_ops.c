/* SPDX-License-Identifier: MIT */
/*
 * The compute engine's operations against plain scalar references, for
 * every SIMD path this CPU supports (portable, AVX2, AVX-512), on random
 * shapes including sizes that are not multiples of the SIMD width.
 */
#include "test_engine_common.h"
#include "tx_test_main.h"

#define NISA 3

/* Loop index -> engine, or skip when the CPU lacks the ISA. */
#define TE_BEGIN(i)                                                                                \
    struct te *t = te_new(te_isas[(i)], 2, 0);                                                     \
    if (!t)                                                                                        \
        return;                                                                                    \
    uint64_t rng = 0x1234567ull + (uint64_t)(i)*977;                                               \
    (void)rng

static double f16r(float x)
{
    return tx_f16_to_f32(tx_f32_to_f16(x));
}

static double bf16r(float x)
{
    return tx_bf16_to_f32(tx_f32_to_bf16(x));
}

/* Store n floats as dtype at p. */
static void store_as(void *p, const float *src, unsigned dtype, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (dtype) {
        case TX8_DTYPE_F32:
            ((float *)p)[i] = src[i];
            break;
        case TX8_DTYPE_F16:
            ((uint16_t *)p)[i] = tx_f32_to_f16(src[i]);
            break;
        case TX8_DTYPE_BF16:
            ((uint16_t *)p)[i] = tx_f32_to_bf16(src[i]);
            break;
        }
    }
}

static double load_as(const void *p, unsigned dtype, size_t i)
{
    switch (dtype) {
    case TX8_DTYPE_F16:
        return tx_f16_to_f32(((const uint16_t *)p)[i]);
    case TX8_DTYPE_BF16:
        return tx_bf16_to_f32(((const uint16_t *)p)[i]);
    default:
        return ((const float *)p)[i];
    }
}

/* The documented activation quantisation, written independently. */
static float ref_quant(const float *x, size_t n, int8_t *q)
{
    float amax = 0;
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * inv;
        if (v > 127)
            v = 127;
        if (v < -127)
            v = -127;
        q[i] = (int8_t)nearbyintf(v);
    }
    return amax / 127.0f;
}

/* ------------------------------------------------------------------------ */
/* FILL, COPY, CONVERT                                                       */
/* ------------------------------------------------------------------------ */

START_TEST(test_fill_copy)
{
    TE_BEGIN(_i);
    for (int it = 0; it < 20; it++) {
        uint64_t mark = t->brk;
        size_t n = te_rand(&rng, 1, 300000);
        uint64_t a = te_alloc(t, n * 4 + 64), b = te_alloc(t, n * 4 + 64);
        uint32_t v = (uint32_t)te_rand_u64(&rng);
        struct tx8_cmd_fill f = {TE_HDR(TX8_OP_FILL, struct tx8_cmd_fill), a, n * 4, v, 0};
        TE_EQ(te_run1(t, &f), TX8_STATUS_OK);
        uint32_t *pa = te_ptr(t, a);
        for (size_t i = 0; i < n; i++)
            TE_EQ(pa[i], v);
        TE_EQ(pa[n], 0); /* nothing beyond */
        for (size_t i = 0; i < n; i++)
            pa[i] = (uint32_t)i * 2654435761u;
        size_t bytes = te_rand(&rng, 1, (unsigned)(n * 4));
        struct tx8_cmd_copy c = {TE_HDR(TX8_OP_COPY, struct tx8_cmd_copy), b, a, bytes};
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        TE_EQ(memcmp(te_ptr(t, a), te_ptr(t, b), bytes), 0);
        TE_EQ(((uint8_t *)te_ptr(t, b))[bytes], 0);
        /* overlapping copy = memmove */
        if (n > 8) {
            size_t sh = te_rand(&rng, 1, 17);
            size_t len = (n - 4) * 4 - sh;
            uint8_t *ref = malloc(n * 4);
            memcpy(ref, te_ptr(t, a), n * 4);
            memmove(ref + sh, ref, len);
            struct tx8_cmd_copy o = {TE_HDR(TX8_OP_COPY, struct tx8_cmd_copy), a + sh, a, len};
            TE_EQ(te_run1(t, &o), TX8_STATUS_OK);
            TE_EQ(memcmp(ref, te_ptr(t, a), n * 4), 0);
            free(ref);
        }
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

START_TEST(test_convert)
{
    TE_BEGIN(_i);
    const unsigned fl[3] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_BF16};
    for (int it = 0; it < 40; it++) {
        uint64_t mark = t->brk;
        unsigned rows = te_rand(&rng, 1, 9), cols = te_rand(&rng, 1, 77);
        unsigned lds = cols + te_rand(&rng, 0, 5), ldd = cols + te_rand(&rng, 0, 5);
        unsigned sd = fl[te_rand(&rng, 0, 2)], dd = fl[te_rand(&rng, 0, 2)];
        int mode = te_rand(&rng, 0, 3); /* 0,1: float pairs, 2: quant, 3: dequant */
        if (mode == 2) {
            sd = TX8_DTYPE_F32;
            dd = TX8_DTYPE_I8;
        } else if (mode == 3) {
            sd = TX8_DTYPE_I8;
            dd = TX8_DTYPE_F32;
        }
        size_t ss = tx_dtype_size(sd), ds = tx_dtype_size(dd);
        uint64_t src = te_alloc(t, (size_t)rows * lds * ss);
        uint64_t dst = te_alloc(t, (size_t)rows * ldd * ds);
        uint64_t sc = te_alloc(t, rows * 4);
        float *tmp = malloc((size_t)rows * lds * 4);
        te_fill_f32(&rng, tmp, (size_t)rows * lds, 100.0f);
        /* special values (not NaN: its payload may differ by path) */
        tmp[0] = 0.0f;
        if (rows * lds > 3) {
            tmp[1] = -0.0f;
            tmp[2] = 1e-6f; /* f16 subnormal */
            tmp[3] = 70000.0f;
        }
        if (sd == TX8_DTYPE_I8) {
            for (size_t i = 0; i < (size_t)rows * lds; i++)
                ((int8_t *)te_ptr(t, src))[i] = (int8_t)te_rand(&rng, 0, 254) - 127;
            for (unsigned r = 0; r < rows; r++)
                ((float *)te_ptr(t, sc))[r] = te_randf(&rng);
        } else {
            store_as(te_ptr(t, src), tmp, sd, (size_t)rows * lds);
        }
        struct tx8_cmd_convert c = {TE_HDR(TX8_OP_CONVERT, struct tx8_cmd_convert),
                                    dst,
                                    src,
                                    (mode >= 2) ? sc : 0,
                                    rows,
                                    cols,
                                    ldd,
                                    lds,
                                    (uint16_t)dd,
                                    (uint16_t)sd,
                                    0};
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        for (unsigned r = 0; r < rows; r++) {
            if (mode == 2) {
                float row[128];
                int8_t q[128];
                for (unsigned k = 0; k < cols; k++)
                    row[k] = tmp[r * lds + k];
                float s = ref_quant(row, cols, q);
                TE_FEQ(((float *)te_ptr(t, sc))[r], s);
                TE_EQ(memcmp(q, (int8_t *)te_ptr(t, dst) + (size_t)r * ldd, cols), 0);
                continue;
            }
            for (unsigned k = 0; k < cols; k++) {
                double v;
                if (sd == TX8_DTYPE_I8)
                    v = (float)((int8_t *)te_ptr(t, src))[r * lds + k] *
                        ((float *)te_ptr(t, sc))[r];
                else
                    v = load_as(te_ptr(t, src), sd, (size_t)r * lds + k);
                float want;
                uint8_t *d = (uint8_t *)te_ptr(t, dst) + ((size_t)r * ldd + k) * ds;
                if (dd == TX8_DTYPE_F32) {
                    want = (float)v;
                    TE_EQ(memcmp(d, &want, 4), 0);
                } else {
                    uint16_t h =
                        dd == TX8_DTYPE_F16 ? tx_f32_to_f16((float)v) : tx_f32_to_bf16((float)v);
                    TE_EQ(memcmp(d, &h, 2), 0); /* bit-exact */
                }
            }
        }
        free(tmp);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* MATMUL                                                                    */
/* ------------------------------------------------------------------------ */

/* A test weight: dequantised values (reference) and its device encoding. */
struct tw {
    struct tx8_weight w;
    double *deq; /* [N][K], zero in absent sparse blocks */
};

static void tw_make(struct te *t, uint64_t *rng, struct tw *o, unsigned N, unsigned K,
                    unsigned dtype, int sparse, unsigned group)
{
    memset(o, 0, sizeof(*o));
    o->deq = calloc((size_t)N * K + 1, sizeof(double));
    float *wf = malloc(((size_t)N * K + 1) * 4);
    te_fill_f32(rng, wf, (size_t)N * K, 1.0f);
    unsigned nbc = K / TX8_SPARSE_BLOCK;
    uint8_t *keep = calloc((size_t)N * (nbc ? nbc : 1) + 1, 1);
    uint32_t nnz = 0;
    if (sparse) {
        for (size_t i = 0; i < (size_t)N * nbc; i++) {
            keep[i] = te_rand(rng, 0, 99) < 45;
            nnz += keep[i];
        }
        for (unsigned r = 0; r < N; r++)
            for (unsigned b = 0; b < nbc; b++)
                if (!keep[(size_t)r * nbc + b])
                    for (unsigned k = 0; k < TX8_SPARSE_BLOCK; k++)
                        wf[(size_t)r * K + b * TX8_SPARSE_BLOCK + k] = 0;
    }
    size_t es = tx_dtype_size(dtype);
    unsigned ng = dtype == TX8_DTYPE_I8 ? (group ? K / group : 1) : 0;
    unsigned gs = group ? group : (K ? K : 1);
    /* dense values (quantised for I8) */
    int8_t *q = malloc((size_t)N * K + 1);
    float *sc = malloc(((size_t)N * (ng ? ng : 1) + 1) * 4);
    for (unsigned r = 0; r < N; r++) {
        for (unsigned g = 0; dtype == TX8_DTYPE_I8 && g < ng; g++) {
            float amax = 0;
            for (unsigned k = g * gs; k < (g + 1) * gs; k++)
                amax = fmaxf(amax, fabsf(wf[(size_t)r * K + k]));
            float s = amax / 127.0f;
            sc[(size_t)r * ng + g] = s;
            for (unsigned k = g * gs; k < (g + 1) * gs; k++) {
                int v = s > 0 ? (int)lrintf(wf[(size_t)r * K + k] / s) : 0;
                q[(size_t)r * K + k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
                o->deq[(size_t)r * K + k] = (double)((float)q[(size_t)r * K + k] * s);
            }
        }
        for (unsigned k = 0; dtype != TX8_DTYPE_I8 && k < K; k++) {
            float v = wf[(size_t)r * K + k];
            o->deq[(size_t)r * K + k] = dtype == TX8_DTYPE_F16    ? f16r(v)
                                        : dtype == TX8_DTYPE_BF16 ? bf16r(v)
                                                                  : v;
        }
    }
    o->w.rows = N;
    o->w.cols = K;
    o->w.dtype = (uint16_t)dtype;
    o->w.format = sparse ? TX8_WFMT_BLOCK_SPARSE : TX8_WFMT_DENSE;
    o->w.group_size = dtype == TX8_DTYPE_I8 ? group : 0;
    if (dtype == TX8_DTYPE_I8) {
        o->w.scales = te_alloc(t, (size_t)N * ng * 4 + 4);
        memcpy(te_ptr(t, o->w.scales), sc, (size_t)N * ng * 4);
    }
    size_t nel = sparse ? (size_t)nnz * TX8_SPARSE_BLOCK : (size_t)N * K;
    o->w.data = te_alloc(t, nel * es + 4);
    uint8_t *d = te_ptr(t, o->w.data);
    size_t pos = 0;
    for (unsigned r = 0; r < N; r++) {
        for (unsigned k = 0; k < K; k++) {
            if (sparse && !keep[(size_t)r * nbc + k / TX8_SPARSE_BLOCK])
                continue;
            if (dtype == TX8_DTYPE_I8)
                ((int8_t *)d)[pos] = q[(size_t)r * K + k];
            else
                store_as(d + pos * es, &wf[(size_t)r * K + k], dtype, 1);
            pos++;
        }
    }
    if (sparse) {
        o->w.nnz_blocks = nnz;
        o->w.index = te_alloc(t, ((size_t)N + 1) * 4 + (size_t)nnz * 2 + 4);
        uint32_t *rp = te_ptr(t, o->w.index);
        uint16_t *cb = (uint16_t *)(rp + N + 1);
        uint32_t c = 0;
        for (unsigned r = 0; r < N; r++) {
            rp[r] = c;
            for (unsigned b = 0; b < nbc; b++)
                if (keep[(size_t)r * nbc + b])
                    cb[c++] = (uint16_t)b;
        }
        rp[N] = c;
    }
    free(wf);
    free(keep);
    free(q);
    free(sc);
}

/* Reference y[T][N] for activations x[T][ld_x] entering as act_dtype. */
static void ref_matmul(const struct tw *w, const float *x, unsigned ld_x, unsigned T, unsigned act,
                       double *y, double *mag)
{
    unsigned N = w->w.rows, K = w->w.cols;
    float *xa = malloc(((size_t)K + 1) * 4);
    int8_t *q = malloc((size_t)K + 1);
    for (unsigned t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * ld_x;
        float xs = 1;
        for (unsigned k = 0; k < K; k++)
            xa[k] = act == TX8_DTYPE_F16    ? (float)f16r(xr[k])
                    : act == TX8_DTYPE_BF16 ? (float)bf16r(xr[k])
                                            : xr[k];
        if (act == TX8_DTYPE_I8) {
            xs = ref_quant(xr, K, q);
            for (unsigned k = 0; k < K; k++)
                xa[k] = q[k];
        }
        for (unsigned n = 0; n < N; n++) {
            double s = 0, m = 0;
            for (unsigned k = 0; k < K; k++) {
                double p = (double)xa[k] * w->deq[(size_t)n * K + k];
                s += p;
                m += fabs(p);
            }
            y[(size_t)t * N + n] = s * xs;
            mag[(size_t)t * N + n] = m * xs;
        }
    }
    free(xa);
    free(q);
}

struct mm_case {
    unsigned wdt, act;
    int sparse;
    unsigned group; /* I8 */
};

static void run_matmul_cases(struct te *t, uint64_t *rng, const struct mm_case *mc, int iters)
{
    for (int it = 0; it < iters; it++) {
        uint64_t mark = t->brk;
        unsigned T = it % 4 == 0 ? 1 : te_rand(rng, 1, it % 3 ? 9 : 40);
        unsigned N = te_rand(rng, 1, 70);
        unsigned K;
        if (mc->sparse)
            K = TX8_SPARSE_BLOCK * te_rand(rng, 1, 9);
        else
            K = te_rand(rng, 1, 300);
        unsigned group = 0;
        if (mc->wdt == TX8_DTYPE_I8 && mc->group) {
            /* a group size dividing K (multiple of 32 for sparse) */
            unsigned unit = mc->sparse ? TX8_SPARSE_BLOCK : 1;
            unsigned units = K / unit, g = 1;
            for (unsigned d = 1; d <= units; d++)
                if (units % d == 0 && te_rand(rng, 0, 2) == 0)
                    g = d;
            group = g * unit;
            if (!mc->sparse && K % 64 == 0 && it % 2)
                group = 64;
        }
        struct tw w;
        tw_make(t, rng, &w, N, K, mc->wdt, mc->sparse, group);
        unsigned ld_x = K + te_rand(rng, 0, 3), ld_y = N + te_rand(rng, 0, 3);
        uint64_t x = te_alloc(t, (size_t)T * ld_x * 4 + 4);
        uint64_t y = te_alloc(t, (size_t)T * ld_y * 4 + 4);
        uint64_t b = te_alloc(t, (size_t)N * 4 + 4);
        float *xp = te_ptr(t, x), *yp = te_ptr(t, y), *bp = te_ptr(t, b);
        te_fill_f32(rng, xp, (size_t)T * ld_x, 2.0f);
        te_fill_f32(rng, bp, N, 1.0f);
        te_fill_f32(rng, yp, (size_t)T * ld_y, 1.0f);
        float *y0 = malloc((size_t)T * ld_y * 4 + 4);
        memcpy(y0, yp, (size_t)T * ld_y * 4);
        uint16_t flags = (uint16_t)te_rand(rng, 0, 3);
        struct tx8_cmd_matmul m;
        memset(&m, 0, sizeof(m));
        m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
        m.hdr.flags = flags;
        m.y = y;
        m.x = x;
        m.bias = (flags & TX8_MATMUL_F_BIAS) ? b : 0;
        m.w = w.w;
        m.tokens = T;
        m.ld_x = ld_x;
        m.ld_y = ld_y;
        m.act_dtype = (uint16_t)mc->act;
        uint64_t macs0 = t->ctr.macs[mc->wdt];
        TE_EQ(te_run1(t, &m), TX8_STATUS_OK);
        double *ref = malloc(sizeof(double) * T * N + 8), *mag = malloc(sizeof(double) * T * N + 8);
        ref_matmul(&w, xp, ld_x, T, mc->act, ref, mag);
        uint64_t dense = (uint64_t)T * N * K;
        uint64_t expect_macs = mc->sparse ? (uint64_t)T * w.w.nnz_blocks * 32 : dense;
        TE_EQ(t->ctr.macs[mc->wdt] - macs0, expect_macs);
        TE_EQ(t->done.macs, expect_macs);
        for (unsigned tt = 0; tt < T; tt++) {
            for (unsigned n = 0; n < ld_y; n++) {
                float got = yp[(size_t)tt * ld_y + n];
                if (n >= N) { /* padding untouched */
                    TE_FEQ(got, y0[(size_t)tt * ld_y + n]);
                    continue;
                }
                double want = ref[(size_t)tt * N + n];
                double tol = 1e-4 * mag[(size_t)tt * N + n] + 1e-5;
                if (flags & TX8_MATMUL_F_BIAS)
                    want += bp[n];
                if (flags & TX8_MATMUL_F_ACCUMULATE)
                    want += y0[(size_t)tt * ld_y + n];
                tol += 1e-6 * (fabs(bp[n]) + fabs(y0[(size_t)tt * ld_y + n]));
                TE_CHECK(fabs(got - want) <= tol,
                         "matmul w=%s act=%s sparse=%d group=%u T=%u N=%u K=%u [%u][%u]: "
                         "%g vs %g",
                         tx_dtype_name(mc->wdt), tx_dtype_name(mc->act), mc->sparse, group, T, N, K,
                         tt, n, got, want);
            }
        }
        free(ref);
        free(mag);
        free(y0);
        free(w.deq);
        te_reset(t, mark);
    }
}

START_TEST(test_matmul_float)
{
    TE_BEGIN(_i);
    const unsigned wd[3] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_BF16};
    const unsigned ad[3] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_BF16};
    for (int s = 0; s < 2; s++)
        for (int a = 0; a < 3; a++)
            for (int d = 0; d < 3; d++) {
                struct mm_case mc = {wd[d], ad[a], s, 0};
                run_matmul_cases(t, &rng, &mc, a == 0 ? 12 : 4);
            }
    te_free(t);
}
END_TEST

START_TEST(test_matmul_int8)
{
    TE_BEGIN(_i);
    const unsigned ad[4] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_BF16, TX8_DTYPE_I8};
    for (int s = 0; s < 2; s++)
        for (int g = 0; g < 2; g++)
            for (int a = 0; a < 4; a++) {
                struct mm_case mc = {TX8_DTYPE_I8, ad[a], s, (unsigned)g};
                run_matmul_cases(t, &rng, &mc, a == 3 || a == 0 ? 14 : 4);
            }
    te_free(t);
}
END_TEST

/*
 * The documented INT8 error bound: with INT8 weights, act_dtype I8 differs
 * from act_dtype F32 by at most sum_k |W[n][k]| * s_x / 2 (each activation
 * moves by at most half a quantisation step s_x = max|x| / 127), plus f32
 * rounding.
 */
START_TEST(test_int8_error_bound)
{
    TE_BEGIN(_i);
    for (int it = 0; it < 12; it++) {
        uint64_t mark = t->brk;
        unsigned T = te_rand(&rng, 1, 6), N = te_rand(&rng, 1, 50), K = te_rand(&rng, 16, 700);
        struct tw w;
        tw_make(t, &rng, &w, N, K, TX8_DTYPE_I8, 0, 0);
        uint64_t x = te_alloc(t, (size_t)T * K * 4), y1 = te_alloc(t, (size_t)T * N * 4),
                 y2 = te_alloc(t, (size_t)T * N * 4);
        float *xp = te_ptr(t, x);
        te_fill_f32(&rng, xp, (size_t)T * K, 3.0f);
        struct tx8_cmd_matmul m;
        memset(&m, 0, sizeof(m));
        m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
        m.x = x;
        m.w = w.w;
        m.tokens = T;
        m.ld_x = K;
        m.ld_y = N;
        m.y = y1;
        m.act_dtype = TX8_DTYPE_F32;
        te_cmd_begin(t);
        te_cmd(t, &m);
        m.y = y2;
        m.act_dtype = TX8_DTYPE_I8;
        te_cmd(t, &m);
        TE_EQ(te_run(t), TX8_STATUS_OK);
        for (unsigned tt = 0; tt < T; tt++) {
            float amax = 0;
            for (unsigned k = 0; k < K; k++)
                amax = fmaxf(amax, fabsf(xp[(size_t)tt * K + k]));
            double sx = amax / 127.0;
            for (unsigned n = 0; n < N; n++) {
                double sw = 0, mag = 0;
                for (unsigned k = 0; k < K; k++) {
                    sw += fabs(w.deq[(size_t)n * K + k]);
                    mag += fabs(w.deq[(size_t)n * K + k] * xp[(size_t)tt * K + k]);
                }
                double bound = sw * sx / 2 * 1.0001 + 1e-4 * mag + 1e-6;
                double d = fabs(((float *)te_ptr(t, y1))[tt * N + n] -
                                ((float *)te_ptr(t, y2))[tt * N + n]);
                TE_CHECK(d <= bound, "int8 error %g > bound %g", d, bound);
            }
        }
        free(w.deq);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* Larger shapes: the blocked GEMM path (T > 4, K > one block, many chunks). */
START_TEST(test_matmul_large)
{
    TE_BEGIN(_i);
    const unsigned wd[4] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_BF16, TX8_DTYPE_I8};
    for (int d = 0; d < 4; d++) {
        for (int s = 0; s < 2; s++) {
            uint64_t mark = t->brk;
            unsigned T = d == 0 ? 1 : 37, N = 203, K = s ? 2400 : 2333;
            struct tw w;
            tw_make(t, &rng, &w, N, K, wd[d], s, 0);
            uint64_t x = te_alloc(t, (size_t)T * K * 4), y = te_alloc(t, (size_t)T * N * 4);
            float *xp = te_ptr(t, x);
            te_fill_f32(&rng, xp, (size_t)T * K, 1.0f);
            unsigned act = wd[d] == TX8_DTYPE_I8 ? TX8_DTYPE_I8 : TX8_DTYPE_F32;
            struct tx8_cmd_matmul m;
            memset(&m, 0, sizeof(m));
            m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
            m.x = x;
            m.y = y;
            m.w = w.w;
            m.tokens = T;
            m.ld_x = K;
            m.ld_y = N;
            m.act_dtype = (uint16_t)act;
            TE_EQ(te_run1(t, &m), TX8_STATUS_OK);
            double *ref = malloc(sizeof(double) * T * N), *mag = malloc(sizeof(double) * T * N);
            ref_matmul(&w, xp, K, T, act, ref, mag);
            for (size_t i = 0; i < (size_t)T * N; i++)
                TE_CHECK(fabs(((float *)te_ptr(t, y))[i] - ref[i]) <= 1e-4 * mag[i] + 1e-5,
                         "large matmul %s sparse=%d at %zu", tx_dtype_name(wd[d]), s, i);
            free(ref);
            free(mag);
            free(w.deq);
            te_reset(t, mark);
        }
    }
    te_free(t);
}
END_TEST

/* INT8 GEMM (T > 32, per-row scales: the AVX-512 panel kernel, matmul.c
 * mm_panel_takes): tokens past one 256-token block and past the panel's
 * token block, rows not a multiple of the panel's 4, K with a tail and
 * past the panel's K block (4096 with a 32 KiB L1d), accumulation and
 * bias; the integer products are exact, so the results are within f32
 * rounding of the double reference. */
START_TEST(test_int8_gemm_panel)
{
    TE_BEGIN(_i);
    static const unsigned Ts[3] = {33, 150, 263}, Ns[3] = {1, 6, 37}, Ks[4] = {5, 64, 4100, 9000};
    for (unsigned c = 0; c < 6; c++) {
        uint64_t mark = t->brk;
        unsigned T = Ts[c % 3], N = Ns[(c + 1) % 3], K = Ks[c % 4];
        struct tw w;
        tw_make(t, &rng, &w, N, K, TX8_DTYPE_I8, 0, 0);
        uint64_t x = te_alloc(t, (size_t)T * K * 4), y = te_alloc(t, (size_t)T * N * 4),
                 b = te_alloc(t, (size_t)N * 4);
        float *xp = te_ptr(t, x), *yp = te_ptr(t, y), *bp = te_ptr(t, b);
        te_fill_f32(&rng, xp, (size_t)T * K, 1.0f);
        te_fill_f32(&rng, yp, (size_t)T * N, 1.0f);
        te_fill_f32(&rng, bp, N, 1.0f);
        float *y0 = malloc(sizeof(float) * T * N);
        memcpy(y0, yp, sizeof(float) * T * N);
        struct tx8_cmd_matmul m;
        memset(&m, 0, sizeof(m));
        m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
        m.hdr.flags = TX8_MATMUL_F_BIAS | TX8_MATMUL_F_ACCUMULATE;
        m.x = x;
        m.y = y;
        m.bias = b;
        m.w = w.w;
        m.tokens = T;
        m.ld_x = K;
        m.ld_y = N;
        m.act_dtype = TX8_DTYPE_I8;
        TE_EQ(te_run1(t, &m), TX8_STATUS_OK);
        double *ref = malloc(sizeof(double) * T * N), *mag = malloc(sizeof(double) * T * N);
        ref_matmul(&w, xp, K, T, TX8_DTYPE_I8, ref, mag);
        for (size_t i = 0; i < (size_t)T * N; i++) {
            double want = ref[i] + bp[i % N] + y0[i];
            double tol = 1e-5 * (mag[i] + fabs(bp[i % N]) + fabs(y0[i])) + 1e-6;
            TE_CHECK(fabs(yp[i] - want) <= tol, "int8 gemm T=%u N=%u K=%u at token %zu row %zu: %.9g, want %.9g",
                     T, N, K, i / N, i % N, yp[i], want);
        }
        free(ref);
        free(mag);
        free(y0);
        free(w.deq);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Norms, RoPE, SwiGLU, Add, Embed                                           */
/* ------------------------------------------------------------------------ */

START_TEST(test_norms)
{
    TE_BEGIN(_i);
    for (int it = 0; it < 30; it++) {
        uint64_t mark = t->brk;
        unsigned rows = te_rand(&rng, 1, 12), dim = te_rand(&rng, 1, 3000);
        unsigned ldx = dim + te_rand(&rng, 0, 4), ldy = dim + te_rand(&rng, 0, 4);
        int layer = it % 2, inplace = it % 3 == 0, beta = it % 4 != 1;
        if (inplace)
            ldy = ldx;
        uint64_t x = te_alloc(t, (size_t)rows * ldx * 4), g = te_alloc(t, dim * 4),
                 b = te_alloc(t, dim * 4);
        uint64_t y = inplace ? x : te_alloc(t, (size_t)rows * ldy * 4);
        float *xp = te_ptr(t, x), *gp = te_ptr(t, g), *bp = te_ptr(t, b);
        te_fill_f32(&rng, xp, (size_t)rows * ldx, 5.0f);
        te_fill_f32(&rng, gp, dim, 2.0f);
        te_fill_f32(&rng, bp, dim, 2.0f);
        float *x0 = malloc((size_t)rows * ldx * 4);
        memcpy(x0, xp, (size_t)rows * ldx * 4);
        float eps = 1e-5f;
        if (layer) {
            struct tx8_cmd_layernorm c = {TE_HDR(TX8_OP_LAYERNORM, struct tx8_cmd_layernorm),
                                          y,
                                          x,
                                          g,
                                          beta ? b : 0,
                                          rows,
                                          dim,
                                          ldx,
                                          ldy,
                                          eps,
                                          0};
            TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        } else {
            struct tx8_cmd_rmsnorm c = {TE_HDR(TX8_OP_RMSNORM, struct tx8_cmd_rmsnorm),
                                        y,
                                        x,
                                        g,
                                        rows,
                                        dim,
                                        ldx,
                                        ldy,
                                        eps,
                                        0};
            TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        }
        float *yp = te_ptr(t, y);
        for (unsigned r = 0; r < rows; r++) {
            const float *xr = x0 + (size_t)r * ldx;
            double mean = 0, var = 0;
            for (unsigned k = 0; k < dim; k++)
                mean += xr[k];
            mean /= dim;
            for (unsigned k = 0; k < dim; k++)
                var += layer ? (xr[k] - mean) * (xr[k] - mean) : (double)xr[k] * xr[k];
            double inv = 1.0 / sqrt(var / dim + eps);
            for (unsigned k = 0; k < dim; k++) {
                double want =
                    layer ? (xr[k] - mean) * inv * gp[k] + (beta ? bp[k] : 0) : xr[k] * inv * gp[k];
                TE_CHECK(fabs(yp[(size_t)r * ldy + k] - want) <= 1e-5 * (1 + fabs(want)),
                         "norm %d: %g vs %g", layer, yp[(size_t)r * ldy + k], want);
            }
        }
        free(x0);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

START_TEST(test_rope)
{
    TE_BEGIN(_i);
    for (int it = 0; it < 30; it++) {
        uint64_t mark = t->brk;
        unsigned T = te_rand(&rng, 1, 7), H = te_rand(&rng, 1, 5);
        unsigned rot = 2 * te_rand(&rng, 1, 40), off = te_rand(&rng, 0, 9);
        unsigned ldh = off + rot + te_rand(&rng, 0, 8), ldt = H * ldh + te_rand(&rng, 0, 5);
        unsigned mode = it % 2;
        size_t n = (size_t)T * ldt;
        uint64_t x = te_alloc(t, n * 4), pos = te_alloc(t, T * 4), fr = te_alloc(t, rot / 2 * 4);
        float *xp = te_ptr(t, x), *fp = te_ptr(t, fr);
        int32_t *pp = te_ptr(t, pos);
        te_fill_f32(&rng, xp, n, 1.0f);
        for (unsigned i = 0; i < T; i++)
            pp[i] = (int32_t)te_rand(&rng, 0, 100000);
        for (unsigned i = 0; i < rot / 2; i++)
            fp[i] = powf(10000.0f, -2.0f * i / rot);
        float *x0 = malloc(n * 4);
        memcpy(x0, xp, n * 4);
        struct tx8_cmd_rope c = {TE_HDR(TX8_OP_ROPE, struct tx8_cmd_rope),
                                 x,
                                 pos,
                                 fr,
                                 T,
                                 H,
                                 ldt,
                                 ldh,
                                 off,
                                 rot,
                                 mode,
                                 0};
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        float *want = malloc(n * 4);
        memcpy(want, x0, n * 4);
        for (unsigned tt = 0; tt < T; tt++)
            for (unsigned h = 0; h < H; h++) {
                float *v = want + (size_t)tt * ldt + (size_t)h * ldh + off;
                for (unsigned i = 0; i < rot / 2; i++) {
                    double a = (double)pp[tt] * fp[i];
                    unsigned i0 = mode ? 2 * i : i, i1 = mode ? 2 * i + 1 : i + rot / 2;
                    double a0 = v[i0], a1 = v[i1];
                    v[i0] = (float)(a0 * cos(a) - a1 * sin(a));
                    v[i1] = (float)(a0 * sin(a) + a1 * cos(a));
                }
            }
        for (size_t i = 0; i < n; i++)
            TE_CHECK(fabsf(xp[i] - want[i]) <= 2e-6f, "rope mode %u at %zu: %g vs %g", mode, i,
                     xp[i], want[i]);
        free(x0);
        free(want);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

START_TEST(test_swiglu_add)
{
    TE_BEGIN(_i);
    for (int it = 0; it < 20; it++) {
        uint64_t mark = t->brk;
        unsigned rows = te_rand(&rng, 1, 9), cols = te_rand(&rng, 1, 5000);
        unsigned lg = cols + te_rand(&rng, 0, 3), lu = cols + te_rand(&rng, 0, 3),
                 ly = cols + te_rand(&rng, 0, 3);
        uint64_t g = te_alloc(t, (size_t)rows * lg * 4), u = te_alloc(t, (size_t)rows * lu * 4),
                 y = te_alloc(t, (size_t)rows * ly * 4);
        float *gp = te_ptr(t, g), *up = te_ptr(t, u), *yp = te_ptr(t, y);
        te_fill_f32(&rng, gp, (size_t)rows * lg, 8.0f);
        te_fill_f32(&rng, up, (size_t)rows * lu, 2.0f);
        struct tx8_cmd_swiglu s = {
            TE_HDR(TX8_OP_SWIGLU, struct tx8_cmd_swiglu), y, g, u, rows, cols, ly, lg, lu, 0};
        TE_EQ(te_run1(t, &s), TX8_STATUS_OK);
        for (unsigned r = 0; r < rows; r++)
            for (unsigned c = 0; c < cols; c++) {
                double gv = gp[(size_t)r * lg + c], uv = up[(size_t)r * lu + c];
                double want = gv / (1 + exp(-gv)) * uv;
                TE_CHECK(fabs(yp[(size_t)r * ly + c] - want) <= 1e-5 * (1 + fabs(want)),
                         "fabs(yp[(size_t)r * ly + c] - want) <= 1e-5 * (1 + fabs(want))");
            }
        /* ADD, with y aliasing a */
        size_t n = te_rand(&rng, 1, 200000);
        uint64_t a = te_alloc(t, n * 4), b = te_alloc(t, n * 4);
        float *ap = te_ptr(t, a), *bp = te_ptr(t, b);
        te_fill_f32(&rng, ap, n, 3.0f);
        te_fill_f32(&rng, bp, n, 3.0f);
        float *a0 = malloc(n * 4);
        memcpy(a0, ap, n * 4);
        float al = te_randf(&rng) * 2, be = te_randf(&rng) * 2;
        struct tx8_cmd_add ad = {TE_HDR(TX8_OP_ADD, struct tx8_cmd_add), a, a, b, n, al, be};
        TE_EQ(te_run1(t, &ad), TX8_STATUS_OK);
        for (size_t i = 0; i < n; i++)
            TE_CHECK(fabsf(ap[i] - (al * a0[i] + be * bp[i])) <= 1e-5f,
                     "fabsf(ap[i] - (al * a0[i] + be * bp[i])) <= 1e-5f");
        free(a0);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

START_TEST(test_embed)
{
    TE_BEGIN(_i);
    const unsigned dts[4] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_BF16, TX8_DTYPE_I8};
    for (int it = 0; it < 24; it++) {
        uint64_t mark = t->brk;
        unsigned dt = dts[it % 4];
        unsigned V = te_rand(&rng, 1, 300), D = te_rand(&rng, 1, 100), T = te_rand(&rng, 1, 20);
        unsigned ldo = D + te_rand(&rng, 0, 3);
        size_t es = tx_dtype_size(dt);
        uint64_t tab = te_alloc(t, (size_t)V * D * es), sc = te_alloc(t, V * 4),
                 ids = te_alloc(t, T * 4), out = te_alloc(t, (size_t)T * ldo * 4);
        float *tmp = malloc((size_t)V * D * 4);
        te_fill_f32(&rng, tmp, (size_t)V * D, 4.0f);
        if (dt == TX8_DTYPE_I8) {
            for (size_t i = 0; i < (size_t)V * D; i++)
                ((int8_t *)te_ptr(t, tab))[i] = (int8_t)(te_rand(&rng, 0, 254) - 127);
            te_fill_f32(&rng, te_ptr(t, sc), V, 0.1f);
        } else {
            store_as(te_ptr(t, tab), tmp, dt, (size_t)V * D);
        }
        int32_t *ip = te_ptr(t, ids);
        for (unsigned i = 0; i < T; i++)
            ip[i] = (int32_t)te_rand(&rng, 0, V - 1);
        struct tx8_cmd_embed c = {TE_HDR(TX8_OP_EMBED, struct tx8_cmd_embed),
                                  out,
                                  ids,
                                  tab,
                                  dt == TX8_DTYPE_I8 ? sc : 0,
                                  T,
                                  V,
                                  D,
                                  ldo,
                                  (uint16_t)dt,
                                  0,
                                  0};
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        for (unsigned i = 0; i < T; i++)
            for (unsigned k = 0; k < D; k++) {
                size_t e = (size_t)ip[i] * D + k;
                double want = dt == TX8_DTYPE_I8 ? (float)((int8_t *)te_ptr(t, tab))[e] *
                                                       ((float *)te_ptr(t, sc))[ip[i]]
                                                 : load_as(te_ptr(t, tab), dt, e);
                TE_FEQ(((float *)te_ptr(t, out))[(size_t)i * ldo + k], (float)want);
            }
        /* an id out of range fails with INVALID_CMD and writes nothing */
        ip[T - 1] = (int32_t)V;
        uint64_t sum = te_heap_sum(t);
        TE_EQ(te_run1(t, &c), TX8_STATUS_INVALID_CMD);
        TE_EQ(te_heap_sum(t), sum);
        ip[T - 1] = -1;
        TE_EQ(te_run1(t, &c), TX8_STATUS_INVALID_CMD);
        free(tmp);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* ATTENTION and DSA_INDEX                                                   */
/* ------------------------------------------------------------------------ */

START_TEST(test_attention)
{
    TE_BEGIN(_i);
    const unsigned kvd[3] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_BF16};
    for (int it = 0; it < 24; it++) {
        uint64_t mark = t->brk;
        unsigned kv_dt = kvd[it % 3];
        unsigned kvh = te_rand(&rng, 1, 3), grp = te_rand(&rng, 1, 4), qh = kvh * grp;
        unsigned T = te_rand(&rng, 1, 6), qk = te_rand(&rng, 1, 70), vd = te_rand(&rng, 1, 50);
        unsigned q0 = te_rand(&rng, 0, 300), kvlen = q0 + T - te_rand(&rng, 0, T - 1);
        if (it % 5 == 4)
            kvlen = te_rand(&rng, 1, 300); /* fewer keys than positions */
        unsigned ldq = qk + te_rand(&rng, 0, 3), ldk = qk + te_rand(&rng, 0, 3),
                 ldv = vd + te_rand(&rng, 0, 3), ldo = vd + te_rand(&rng, 0, 3);
        int use_sel = it % 4 == 3;
        unsigned sel_k = use_sel ? te_rand(&rng, 1, 20) : 0;
        size_t es = tx_dtype_size(kv_dt);
        uint64_t q = te_alloc(t, (size_t)T * qh * ldq * 4),
                 k = te_alloc(t, (size_t)kvlen * kvh * ldk * es),
                 v = te_alloc(t, (size_t)kvlen * kvh * ldv * es),
                 o = te_alloc(t, (size_t)T * qh * ldo * 4), sel = te_alloc(t, T * sel_k * 4 + 4);
        float *qp = te_ptr(t, q);
        te_fill_f32(&rng, qp, (size_t)T * qh * ldq, 1.0f);
        float *tmp = malloc(((size_t)kvlen * kvh * (ldk > ldv ? ldk : ldv) + 1) * 4);
        te_fill_f32(&rng, tmp, (size_t)kvlen * kvh * ldk, 1.0f);
        store_as(te_ptr(t, k), tmp, kv_dt, (size_t)kvlen * kvh * ldk);
        te_fill_f32(&rng, tmp, (size_t)kvlen * kvh * ldv, 1.0f);
        store_as(te_ptr(t, v), tmp, kv_dt, (size_t)kvlen * kvh * ldv);
        int32_t *sp = te_ptr(t, sel);
        for (unsigned tt = 0; tt < T; tt++) {
            unsigned lim = q0 + tt + 1 < kvlen ? q0 + tt + 1 : kvlen;
            for (unsigned j = 0; j < sel_k; j++) {
                /* distinct valid keys, some -1 */
                int32_t s = te_rand(&rng, 0, 3) == 0 ? -1 : (int32_t)((j * 7 + tt) % lim);
                for (unsigned p = 0; p < j && s >= 0; p++)
                    if (sp[tt * sel_k + p] == s)
                        s = -1;
                sp[tt * sel_k + j] = s;
            }
        }
        float scale = 1.0f / sqrtf((float)qk);
        struct tx8_cmd_attention c;
        memset(&c, 0, sizeof(c));
        c.hdr = TE_HDR(TX8_OP_ATTENTION, struct tx8_cmd_attention);
        c.out = o;
        c.q = q;
        c.k = k;
        c.v = v;
        c.sel = use_sel ? sel : 0;
        c.tokens = T;
        c.q_heads = qh;
        c.kv_heads = kvh;
        c.qk_dim = qk;
        c.v_dim = vd;
        c.kv_len = kvlen;
        c.q_pos0 = q0;
        c.sel_k = sel_k;
        c.ld_q_head = ldq;
        c.ld_k_head = ldk;
        c.ld_v_head = ldv;
        c.ld_o_head = ldo;
        c.scale = scale;
        c.kv_dtype = (uint16_t)kv_dt;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        double *sc = malloc(sizeof(double) * (kvlen + 1));
        for (unsigned tt = 0; tt < T; tt++)
            for (unsigned h = 0; h < qh; h++) {
                unsigned g = h / grp;
                unsigned lim = q0 + tt + 1 < kvlen ? q0 + tt + 1 : kvlen;
                double mx = -INFINITY;
                for (unsigned s = 0; s < kvlen; s++) {
                    int vis = s < lim;
                    if (use_sel) {
                        vis = 0;
                        for (unsigned j = 0; j < sel_k; j++)
                            vis |= sp[tt * sel_k + j] == (int32_t)s;
                    }
                    sc[s] = -INFINITY;
                    if (!vis)
                        continue;
                    double d = 0;
                    for (unsigned i = 0; i < qk; i++)
                        d += (double)qp[((size_t)tt * qh + h) * ldq + i] *
                             load_as(te_ptr(t, k), kv_dt, ((size_t)s * kvh + g) * ldk + i);
                    sc[s] = d * scale;
                    mx = fmax(mx, sc[s]);
                }
                double sum = 0;
                for (unsigned s = 0; s < kvlen; s++)
                    if (sc[s] != -INFINITY)
                        sum += exp(sc[s] - mx);
                for (unsigned d = 0; d < vd; d++) {
                    double acc = 0;
                    for (unsigned s = 0; s < kvlen; s++)
                        if (sc[s] != -INFINITY)
                            acc += exp(sc[s] - mx) / sum *
                                   load_as(te_ptr(t, v), kv_dt, ((size_t)s * kvh + g) * ldv + d);
                    float got = ((float *)te_ptr(t, o))[((size_t)tt * qh + h) * ldo + d];
                    TE_CHECK(fabs(got - acc) <= 2e-5, "attention %s: %g vs %g",
                             tx_dtype_name(kv_dt), got, acc);
                }
            }
        free(sc);
        free(tmp);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* The 1.6 KV-cache block types, written independently: Q8_0 / Q4_0 rows */
static double load_blk(const void *p, unsigned dt, size_t i)
{
    const uint8_t *b = (const uint8_t *)p + i / 32 * (dt == TX8_DTYPE_Q8_0 ? 34 : 18);
    uint16_t h;
    memcpy(&h, b, 2);
    double d = tx_f16_to_f32(h);
    size_t j = i % 32;
    if (dt == TX8_DTYPE_Q8_0)
        return (int8_t)b[2 + j] * d;
    uint8_t q = b[2 + j / 2];
    return ((int)((j & 1) ? q >> 4 : q & 15) - 8) * d;
}

/* ATTENTION over a shared latent cache (k == v, kv_heads 1: absorbed MLA)
 * of F16 / Q8_0 / Q4_0 written by CONVERT, with the decode key split
 * (one token over 600+ keys) and with a selection; DSA_INDEX over a Q8_0
 * key cache */
START_TEST(test_attention_latent_blocks)
{
    TE_BEGIN(_i);
    const unsigned dts[3] = {TX8_DTYPE_F16, TX8_DTYPE_Q8_0, TX8_DTYPE_Q4_0};
    for (int it = 0; it < 6; it++) {
        uint64_t mark = t->brk;
        unsigned dt = dts[it % 3], T = it < 3 ? 1 : 3, qh = 4, qk = 96, vd = 64;
        unsigned kvlen = 600 + te_rand(&rng, 0, 200), q0 = kvlen - T;
        int use_sel = it >= 3;
        unsigned sel_k = use_sel ? 300 : 0;
        uint64_t src = te_alloc(t, (size_t)kvlen * qk * 4),
                 cache = te_alloc(t, (size_t)kvlen * qk * 4), q = te_alloc(t, (size_t)T * qh * qk * 4),
                 o = te_alloc(t, (size_t)T * qh * vd * 4), sel = te_alloc(t, T * sel_k * 4 + 4);
        te_fill_f32(&rng, te_ptr(t, src), (size_t)kvlen * qk, 1.0f);
        te_fill_f32(&rng, te_ptr(t, q), (size_t)T * qh * qk, 0.5f);
        struct tx8_cmd_convert cv;
        memset(&cv, 0, sizeof(cv));
        cv.hdr = TE_HDR(TX8_OP_CONVERT, struct tx8_cmd_convert);
        cv.dst = cache;
        cv.src = src;
        cv.rows = kvlen;
        cv.cols = cv.ld_dst = cv.ld_src = qk;
        cv.dst_dtype = (uint16_t)dt;
        cv.src_dtype = TX8_DTYPE_F32;
        TE_EQ(te_run1(t, &cv), TX8_STATUS_OK);
        int32_t *sp = te_ptr(t, sel);
        for (unsigned tt = 0; tt < T; tt++)
            for (unsigned j = 0; j < sel_k; j++)
                sp[tt * sel_k + j] = j % 7 == 3 ? -1 : (int32_t)((j * 2 + tt) % (q0 + tt + 1));
        struct tx8_cmd_attention c;
        memset(&c, 0, sizeof(c));
        c.hdr = TE_HDR(TX8_OP_ATTENTION, struct tx8_cmd_attention);
        c.out = o;
        c.q = q;
        c.k = c.v = cache;
        c.sel = use_sel ? sel : 0;
        c.sel_k = sel_k;
        c.tokens = T;
        c.q_heads = qh;
        c.kv_heads = 1;
        c.qk_dim = qk;
        c.v_dim = vd;
        c.kv_len = kvlen;
        c.q_pos0 = q0;
        c.ld_q_head = c.ld_k_head = c.ld_v_head = qk;
        c.ld_o_head = vd;
        c.scale = 0.125f;
        c.kv_dtype = (uint16_t)dt;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        const void *kc = te_ptr(t, cache);
        const float *qp = te_ptr(t, q), *op = te_ptr(t, o);
        double *sc = malloc(sizeof(double) * kvlen);
        double worst = 0;
        for (unsigned tt = 0; tt < T; tt++)
            for (unsigned h = 0; h < qh; h++) {
                double mx = -INFINITY;
                for (unsigned s = 0; s < kvlen; s++) {
                    int vis = s <= q0 + tt;
                    if (use_sel) {
                        vis = 0;
                        for (unsigned j = 0; j < sel_k; j++)
                            vis |= sp[tt * sel_k + j] == (int32_t)s;
                    }
                    sc[s] = -INFINITY;
                    if (!vis)
                        continue;
                    double d = 0;
                    for (unsigned i = 0; i < qk; i++) {
                        size_t e = (size_t)s * qk + i;
                        d += qp[((size_t)tt * qh + h) * qk + i] *
                             (dt == TX8_DTYPE_F16 ? load_as(kc, dt, e) : load_blk(kc, dt, e));
                    }
                    sc[s] = d * 0.125;
                    mx = fmax(mx, sc[s]);
                }
                double sum = 0;
                for (unsigned s = 0; s < kvlen; s++)
                    if (sc[s] != -INFINITY)
                        sum += exp(sc[s] - mx);
                for (unsigned d = 0; d < vd; d++) {
                    double acc = 0;
                    for (unsigned s = 0; s < kvlen; s++)
                        if (sc[s] != -INFINITY) {
                            size_t e = (size_t)s * qk + d;
                            acc += exp(sc[s] - mx) / sum *
                                   (dt == TX8_DTYPE_F16 ? load_as(kc, dt, e) : load_blk(kc, dt, e));
                        }
                    worst = fmax(worst, fabs(op[((size_t)tt * qh + h) * vd + d] - acc));
                }
            }
        TE_CHECK(worst <= 2e-5, "latent attention %s%s: max error %g", tx_dtype_name(dt),
                 use_sel ? " (selection)" : "", worst);
        /* the block round trip: |x - dequant(quant(x))| <= scale / 2 per block */
        if (dt != TX8_DTYPE_F16) {
            const float *xs = te_ptr(t, src);
            double qmax = dt == TX8_DTYPE_Q8_0 ? 127 : 7, bad = 0;
            for (size_t b0 = 0; b0 < (size_t)kvlen * qk; b0 += 32) {
                double amax = 0;
                for (int i = 0; i < 32; i++)
                    amax = fmax(amax, fabs(xs[b0 + i]));
                for (int i = 0; i < 32; i++)
                    bad = fmax(bad, fabs(xs[b0 + i] - load_blk(kc, dt, b0 + i)) -
                                        amax / qmax * 0.5 * 1.01 - 1e-6);
            }
            TE_CHECK(bad <= 0, "%s round trip beyond half a step: %g", tx_dtype_name(dt), bad);
        }
        free(sc);
        te_reset(t, mark);
    }
    /* DSA_INDEX over a Q8_0 key cache == DSA_INDEX over its dequantised f32 copy */
    for (int it = 0; it < 4; it++) {
        uint64_t mark = t->brk;
        unsigned T = it % 2 ? 1 : 3, H = 4, D = 64, kvlen = 900, K = 64, q0 = kvlen - T;
        uint64_t kf = te_alloc(t, (size_t)kvlen * D * 4), kq = te_alloc(t, (size_t)kvlen * D * 2),
                 kd = te_alloc(t, (size_t)kvlen * D * 4), q = te_alloc(t, (size_t)T * H * D * 4),
                 w = te_alloc(t, (size_t)T * H * 4), s1 = te_alloc(t, (size_t)T * K * 4),
                 s2 = te_alloc(t, (size_t)T * K * 4);
        te_fill_f32(&rng, te_ptr(t, kf), (size_t)kvlen * D, 1.0f);
        te_fill_f32(&rng, te_ptr(t, q), (size_t)T * H * D, 1.0f);
        te_fill_f32(&rng, te_ptr(t, w), (size_t)T * H, 1.0f);
        struct tx8_cmd_convert cv;
        memset(&cv, 0, sizeof(cv));
        cv.hdr = TE_HDR(TX8_OP_CONVERT, struct tx8_cmd_convert);
        cv.dst = kq;
        cv.src = kf;
        cv.rows = kvlen;
        cv.cols = cv.ld_dst = cv.ld_src = D;
        cv.dst_dtype = TX8_DTYPE_Q8_0;
        cv.src_dtype = TX8_DTYPE_F32;
        TE_EQ(te_run1(t, &cv), TX8_STATUS_OK);
        cv.dst = kd; /* and back: Q8_0 -> F32 */
        cv.src = kq;
        cv.dst_dtype = TX8_DTYPE_F32;
        cv.src_dtype = TX8_DTYPE_Q8_0;
        TE_EQ(te_run1(t, &cv), TX8_STATUS_OK);
        struct tx8_cmd_dsa_index c = {TE_HDR(TX8_OP_DSA_INDEX, struct tx8_cmd_dsa_index),
                                      s1, q, kq, w, T, H, D, kvlen, q0, K, D, D, 0, 0, 0};
        c.hdr.flags = TX8_DSA_F_KEY_Q8_0;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        c.hdr.flags = 0;
        c.sel = s2;
        c.k = kd;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        TE_CHECK(!memcmp(te_ptr(t, s1), te_ptr(t, s2), (size_t)T * K * 4),
                 "DSA_INDEX q8_0 keys != the same keys in f32");
        /* a Q8_0 row not a multiple of 32: refused */
        c.hdr.flags = TX8_DSA_F_KEY_Q8_0;
        c.k = kq;
        c.dim = c.ld_k = 48;
        TE_EQ(te_run1(t, &c), TX8_STATUS_INVALID_CMD);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

START_TEST(test_dsa_index)
{
    TE_BEGIN(_i);
    for (int it = 0; it < 16; it++) {
        uint64_t mark = t->brk;
        unsigned T = te_rand(&rng, 1, 5), H = te_rand(&rng, 1, 6), D = te_rand(&rng, 1, 40);
        unsigned q0 = te_rand(&rng, 0, 600), kvlen = q0 + T, K = te_rand(&rng, 1, 80);
        if (it % 4 == 3)
            q0 = te_rand(&rng, 0, 10); /* fewer visible keys than k: -1 padding */
        kvlen = q0 + T;
        unsigned ldq = D + te_rand(&rng, 0, 3), ldk = D + te_rand(&rng, 0, 3);
        uint64_t q = te_alloc(t, (size_t)T * H * ldq * 4), k = te_alloc(t, (size_t)kvlen * ldk * 4),
                 w = te_alloc(t, (size_t)T * H * 4), sel = te_alloc(t, (size_t)T * K * 4);
        float *qp = te_ptr(t, q), *kp = te_ptr(t, k), *wp = te_ptr(t, w);
        te_fill_f32(&rng, qp, (size_t)T * H * ldq, 1.0f);
        te_fill_f32(&rng, kp, (size_t)kvlen * ldk, 1.0f);
        te_fill_f32(&rng, wp, (size_t)T * H, 1.0f);
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
                                      ldq,
                                      ldk,
                                      0,
                                      0,
                                      0};
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        int32_t *sp = te_ptr(t, sel);
        double *sc = malloc(sizeof(double) * kvlen);
        for (unsigned tt = 0; tt < T; tt++) {
            unsigned vis = q0 + tt + 1;
            for (unsigned s = 0; s < vis; s++) {
                double acc = 0;
                for (unsigned h = 0; h < H; h++) {
                    double d = 0;
                    for (unsigned i = 0; i < D; i++)
                        d += (double)qp[((size_t)tt * H + h) * ldq + i] * kp[(size_t)s * ldk + i];
                    if (d > 0)
                        acc += wp[tt * H + h] * d;
                }
                sc[s] = acc;
            }
            unsigned want_n = vis < K ? vis : K;
            double prev = INFINITY, minsel = INFINITY;
            uint8_t *chosen = calloc(vis, 1);
            for (unsigned j = 0; j < K; j++) {
                int32_t s = sp[tt * K + j];
                if (j >= want_n) {
                    TE_EQ(s, -1);
                    continue;
                }
                TE_CHECK(s >= 0 && (unsigned)s < vis, "s >= 0 && (unsigned)s < vis");
                TE_CHECK(!chosen[s], "!chosen[s]");
                chosen[s] = 1;
                TE_CHECK(sc[s] <= prev + 1e-5, "sc[s] <= prev + 1e-5"); /* best first */
                prev = sc[s];
                minsel = fmin(minsel, sc[s]);
            }
            for (unsigned s = 0; s < vis; s++)
                if (!chosen[s])
                    TE_CHECK(sc[s] <= minsel + 1e-5,
                             "sc[s] <= minsel + 1e-5"); /* it is the top k */
            free(chosen);
        }
        free(sc);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* TX8_DSA_F_QUERY_Q8's scores as tx8_hw.h defines them, computed here on
 * their own: the queries' 32-element blocks to 8 bits, integer block sums
 * with the Q8_0 keys, fma over the blocks, relu x w summed over the heads */
static void dsa_q8_model(const float *q, const uint8_t *kq, const float *w, unsigned H,
                         unsigned D, unsigned t, unsigned nkeys, float *sc)
{
    unsigned nb = D / 32;
    int8_t qi[16][128];
    float qd[16][4];
    for (unsigned h = 0; h < H; h++)
        for (unsigned b = 0; b < nb; b++) {
            const float *x = q + ((size_t)t * H + h) * D + b * 32;
            float amax = 0;
            int nan = 0;
            for (int i = 0; i < 32; i++) {
                nan |= isnan(x[i]);
                amax = fmaxf(amax, fabsf(x[i]));
            }
            qd[h][b] = nan || amax == 0 ? 0 : amax / 127.0f;
            for (int i = 0; i < 32; i++) {
                float v = nan || amax == 0 ? 0 : rintf(x[i] * (127.0f / amax));
                qi[h][b * 32 + i] = (int8_t)fminf(127.0f, fmaxf(-127.0f, v));
            }
        }
    size_t rb = (size_t)nb * 34;
    for (unsigned s = 0; s < nkeys; s++) {
        float acc = 0;
        for (unsigned h = 0; h < H; h++) {
            float dot = 0;
            for (unsigned b = 0; b < nb; b++) {
                const uint8_t *blk = kq + s * rb + b * 34;
                uint16_t hs;
                memcpy(&hs, blk, 2);
                int32_t n = 0;
                for (int i = 0; i < 32; i++)
                    n += qi[h][b * 32 + i] * (int8_t)blk[2 + i];
                dot = fmaf((float)n, qd[h][b] * tx_f16_to_f32(hs), dot);
            }
            acc += (dot > 0 ? dot : 0.0f) * w[t * H + h];
        }
        sc[s] = acc;
    }
}

/* DSA_INDEX with 8-bit products (interface 1.9): the selection is exactly the
 * top k of the defined scores (ties: lower index), on every ISA, on the tile
 * path and on the per-token path (TX8_DSA_TILE=0); the flag without Q8_0 keys
 * is refused */
START_TEST(test_dsa_index_q8)
{
    TE_BEGIN(_i);
    for (int it = 0; it < 8; it++) {
        uint64_t mark = t->brk;
        unsigned H = it % 2 ? 16 : te_rand(&rng, 1, 8), D = it % 3 ? 128 : 64;
        unsigned T = te_rand(&rng, 1, 5), K = te_rand(&rng, 1, 300);
        unsigned q0 = te_rand(&rng, 0, 1200), kvlen = q0 + T;
        uint64_t kf = te_alloc(t, (size_t)kvlen * D * 4), kq = te_alloc(t, (size_t)kvlen * D * 2),
                 q = te_alloc(t, (size_t)T * H * D * 4), w = te_alloc(t, (size_t)T * H * 4),
                 s1 = te_alloc(t, (size_t)T * K * 4), s2 = te_alloc(t, (size_t)T * K * 4);
        te_fill_f32(&rng, te_ptr(t, kf), (size_t)kvlen * D, 2.0f);
        float *qp = te_ptr(t, q);
        te_fill_f32(&rng, qp, (size_t)T * H * D, 1.0f);
        memset(qp, 0, 32 * 4); /* an all-zero block */
        if (it == 5)
            qp[40] = NAN; /* a block with a NaN: quantised to 0 */
        te_fill_f32(&rng, te_ptr(t, w), (size_t)T * H, 1.0f);
        struct tx8_cmd_convert cv;
        memset(&cv, 0, sizeof(cv));
        cv.hdr = TE_HDR(TX8_OP_CONVERT, struct tx8_cmd_convert);
        cv.dst = kq;
        cv.src = kf;
        cv.rows = kvlen;
        cv.cols = cv.ld_dst = cv.ld_src = D;
        cv.dst_dtype = TX8_DTYPE_Q8_0;
        cv.src_dtype = TX8_DTYPE_F32;
        TE_EQ(te_run1(t, &cv), TX8_STATUS_OK);
        struct tx8_cmd_dsa_index c = {TE_HDR(TX8_OP_DSA_INDEX, struct tx8_cmd_dsa_index),
                                      s1, q, kq, w, T, H, D, kvlen, q0, K, D, D, 0, 0, 0};
        c.hdr.flags = TX8_DSA_F_KEY_Q8_0 | TX8_DSA_F_QUERY_Q8;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        TE_EQ(tx8_engine_setting(t->e, "TX8_DSA_TILE", "0"), 0);
        c.sel = s2;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        TE_EQ(tx8_engine_setting(t->e, "TX8_DSA_TILE", NULL), 0);
        TE_CHECK(!memcmp(te_ptr(t, s1), te_ptr(t, s2), (size_t)T * K * 4),
                 "DSA_INDEX 8-bit products: tile and per-token paths differ (H %u D %u T %u)", H,
                 D, T);
        float *sc = malloc(sizeof(float) * kvlen);
        uint8_t *taken = malloc(kvlen);
        const int32_t *sp = te_ptr(t, s1);
        for (unsigned tt = 0; tt < T; tt++) {
            unsigned vis = q0 + tt + 1;
            dsa_q8_model(qp, te_ptr(t, kq), te_ptr(t, w), H, D, tt, vis, sc);
            memset(taken, 0, kvlen);
            for (unsigned j = 0; j < K; j++) { /* the expected j-th: best untaken */
                int32_t best = -1;
                for (unsigned s = 0; s < vis; s++)
                    if (!taken[s] && (best < 0 || sc[s] > sc[best]))
                        best = (int32_t)s;
                if (best >= 0)
                    taken[best] = 1;
                TE_CHECK(sp[tt * K + j] == best,
                         "DSA_INDEX 8-bit products: token %u rank %u: key %d, the model's %d", tt,
                         j, sp[tt * K + j], best);
            }
        }
        free(sc);
        free(taken);
        c.hdr.flags = TX8_DSA_F_QUERY_Q8; /* without the Q8_0 keys: refused */
        c.k = kf;
        TE_EQ(te_run1(t, &c), TX8_STATUS_INVALID_CMD);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* MOE_ROUTE and MOE_FFN                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_moe_route)
{
    TE_BEGIN(_i);
    for (int it = 0; it < 30; it++) {
        uint64_t mark = t->brk;
        unsigned ng = it % 3 == 0 ? 1 : te_rand(&rng, 2, 8), gsz = te_rand(&rng, 1, 16);
        unsigned E = ng * gsz, tkg = te_rand(&rng, 1, ng);
        unsigned K = te_rand(&rng, 1, tkg * gsz < 8 ? tkg * gsz : 8);
        unsigned T = te_rand(&rng, 1, 9);
        uint16_t flags = (uint16_t)te_rand(&rng, 0, 7);
        int use_bias = it % 2, use_counts = it % 5 != 0;
        float scaling = 1.0f + te_randf(&rng), lambda = 0.2f;
        uint64_t lg = te_alloc(t, (size_t)T * E * 4), b = te_alloc(t, E * 4),
                 cnt = te_alloc(t, E * 8), ids = te_alloc(t, T * K * 4), w = te_alloc(t, T * K * 4);
        float *lp = te_ptr(t, lg), *bp = te_ptr(t, b);
        uint64_t *cp = te_ptr(t, cnt);
        te_fill_f32(&rng, lp, (size_t)T * E, 4.0f);
        te_fill_f32(&rng, bp, E, 0.5f);
        for (unsigned e = 0; e < E; e++)
            cp[e] = te_rand(&rng, 0, 1000);
        uint64_t *c0 = malloc(E * 8);
        memcpy(c0, cp, E * 8);
        struct tx8_cmd_moe_route c = {TE_HDR(TX8_OP_MOE_ROUTE, struct tx8_cmd_moe_route),
                                      ids,
                                      w,
                                      lg,
                                      use_bias ? b : 0,
                                      use_counts ? cnt : 0,
                                      T,
                                      E,
                                      K,
                                      ng,
                                      tkg,
                                      scaling,
                                      lambda,
                                      0};
        c.hdr.flags = flags;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        int32_t *ip = te_ptr(t, ids);
        float *wp = te_ptr(t, w);
        uint64_t tot = 0;
        for (unsigned e = 0; e < E; e++)
            tot += c0[e];
        unsigned *picks = calloc(E, sizeof(unsigned));
        for (unsigned tt = 0; tt < T; tt++) {
            double s[256], ch[256];
            int elig[256];
            for (unsigned e = 0; e < E; e++) {
                s[e] = 1.0 / (1.0 + exp(-(double)lp[tt * E + e]));
                ch[e] = s[e] + (use_bias ? bp[e] : 0);
                if (use_counts && (flags & TX8_ROUTE_F_LOAD_PENALTY))
                    ch[e] -= lambda * ((double)c0[e] / (double)(tot > 1 ? tot : 1));
                elig[e] = 1;
            }
            if (ng > 1) {
                double gs[16];
                int gk[16] = {0};
                for (unsigned g = 0; g < ng; g++) {
                    double b1 = -INFINITY, b2 = -INFINITY;
                    for (unsigned e = g * gsz; e < (g + 1) * gsz; e++) {
                        if (ch[e] > b1) {
                            b2 = b1;
                            b1 = ch[e];
                        } else if (ch[e] > b2) {
                            b2 = ch[e];
                        }
                    }
                    gs[g] = gsz >= 2 ? b1 + b2 : b1;
                }
                for (unsigned j = 0; j < tkg; j++) {
                    int best = -1;
                    for (unsigned g = 0; g < ng; g++)
                        if (!gk[g] && (best < 0 || gs[g] > gs[best]))
                            best = (int)g;
                    gk[best] = 1;
                }
                for (unsigned e = 0; e < E; e++)
                    elig[e] = gk[e / gsz];
            }
            int taken[256] = {0};
            double sum = 0;
            int want[8];
            for (unsigned j = 0; j < K; j++) {
                int best = -1;
                for (unsigned e = 0; e < E; e++)
                    if (elig[e] && !taken[e] && (best < 0 || ch[e] > ch[best]))
                        best = (int)e;
                taken[best] = 1;
                want[j] = best;
                sum += s[best];
            }
            for (unsigned j = 0; j < K; j++) {
                TE_EQ(ip[tt * K + j], want[j]);
                picks[want[j]]++;
                double wv = s[want[j]];
                if (flags & TX8_ROUTE_F_NORM_TOPK)
                    wv /= sum + 1e-20;
                wv *= scaling;
                TE_CHECK(fabs(wp[tt * K + j] - wv) <= 1e-5 * (1 + fabs(wv)),
                         "fabs(wp[tt * K + j] - wv) <= 1e-5 * (1 + fabs(wv))");
            }
        }
        for (unsigned e = 0; e < E; e++) {
            uint64_t want = c0[e];
            if (use_counts && (flags & TX8_ROUTE_F_COUNT))
                want += picks[e];
            TE_EQ(cp[e], want);
        }
        free(picks);
        free(c0);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* Scalar reference of the softmax router (interface 1.4,
 * TX8_ROUTE_F_SOFTMAX): p in double rounded to f32, top-k by p with ties to
 * the lower index, NaN as -inf, +inf logits sharing the probability. */
static void softmax_route_ref(const float *lg, unsigned E, unsigned K, int norm, float scaling,
                              const double *pen, int32_t *ids, double *w)
{
    float p[256], ch[256];
    double mx = -INFINITY, sum = 0;
    for (unsigned e = 0; e < E; e++)
        if (!isnan(lg[e]) && lg[e] > mx)
            mx = lg[e];
    double v[256];
    for (unsigned e = 0; e < E; e++) {
        if (isnan(lg[e]) || lg[e] == -INFINITY || mx == -INFINITY)
            v[e] = 0;
        else if (mx == INFINITY)
            v[e] = lg[e] == INFINITY;
        else
            v[e] = exp((double)lg[e] - mx);
        sum += v[e];
    }
    for (unsigned e = 0; e < E; e++) {
        p[e] = sum > 0 ? (float)(v[e] / sum) : 0.0f;
        ch[e] = pen ? (float)(p[e] - pen[e]) : p[e];
    }
    int taken[256] = {0};
    double ks = 0;
    for (unsigned j = 0; j < K; j++) {
        int best = -1;
        for (unsigned e = 0; e < E; e++)
            if (!taken[e] && (best < 0 || ch[e] > ch[best]))
                best = (int)e;
        taken[best] = 1;
        ids[j] = best;
        w[j] = p[best];
        ks += p[best];
    }
    for (unsigned j = 0; j < K; j++) {
        if (norm && ks > 0)
            w[j] /= ks;
        w[j] *= scaling;
    }
}

START_TEST(test_moe_route_softmax)
{
    TE_BEGIN(_i);
    for (int it = 0; it < 40; it++) {
        uint64_t mark = t->brk;
        unsigned E = te_rand(&rng, 1, 64), T = te_rand(&rng, 1, 9);
        /* K == E every fourth case */
        unsigned K = it % 4 == 3 ? E : te_rand(&rng, 1, E < 8 ? E : 8);
        int norm = it % 2, count = it % 3 != 0, ties = it % 5 < 2, pen = it % 7 == 6;
        uint16_t flags = TX8_ROUTE_F_SOFTMAX | (norm ? TX8_ROUTE_F_NORM_TOPK : 0) |
                         (count ? TX8_ROUTE_F_COUNT : 0) | (pen ? TX8_ROUTE_F_LOAD_PENALTY : 0);
        float scaling = it % 3 == 2 ? 2.5f : 1.0f, lambda = 0.3f;
        uint64_t lg = te_alloc(t, (size_t)T * E * 4), cnt = te_alloc(t, E * 8),
                 ids = te_alloc(t, T * K * 4), w = te_alloc(t, T * K * 4);
        float *lp = te_ptr(t, lg);
        uint64_t *cp = te_ptr(t, cnt);
        te_fill_f32(&rng, lp, (size_t)T * E, 6.0f);
        if (ties) /* few distinct values: many exact ties */
            for (size_t i = 0; i < (size_t)T * E; i++)
                lp[i] = (float)te_rand(&rng, 0, 3);
        if (it == 7 && E >= 4 && T >= 2) { /* non-finite rows */
            lp[0] = NAN;
            lp[1] = INFINITY;
            lp[3] = INFINITY;
            for (unsigned e = 0; e < E; e++)
                lp[E + e] = e % 2 ? -INFINITY : NAN;
        }
        for (unsigned e = 0; e < E; e++)
            cp[e] = te_rand(&rng, 0, 100);
        uint64_t c0[64], tot = 0;
        memcpy(c0, cp, E * 8);
        double penv[64];
        for (unsigned e = 0; e < E; e++)
            tot += c0[e];
        for (unsigned e = 0; e < E; e++)
            penv[e] = lambda * (float)((double)c0[e] / (double)(tot > 1 ? tot : 1));
        struct tx8_cmd_moe_route c;
        memset(&c, 0, sizeof(c));
        c.hdr = TE_HDR(TX8_OP_MOE_ROUTE, struct tx8_cmd_moe_route);
        c.hdr.flags = flags;
        c.out_ids = ids;
        c.out_w = w;
        c.logits = lg;
        c.counts = cnt;
        c.tokens = T;
        c.experts = E;
        c.top_k = K;
        c.n_group = it % 2; /* 0 and 1 both mean no group limit */
        c.topk_group = c.n_group;
        c.scaling = scaling;
        c.lambda = lambda;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        int32_t *ip = te_ptr(t, ids);
        float *wp = te_ptr(t, w);
        unsigned picks[64] = {0};
        for (unsigned tt = 0; tt < T; tt++) {
            int32_t want[64];
            double ww[64];
            softmax_route_ref(lp + (size_t)tt * E, E, K, norm, scaling, pen ? penv : NULL, want,
                              ww);
            for (unsigned j = 0; j < K; j++) {
                TE_CHECK(ip[tt * K + j] == want[j], "it %d token %u rank %u: id %d, want %d", it,
                         tt, j, ip[tt * K + j], want[j]);
                picks[want[j]]++;
                TE_CHECK(fabs(wp[tt * K + j] - ww[j]) <= 1e-6 * (1 + fabs(ww[j])),
                         "it %d token %u rank %u: weight %.9g, want %.9g", it, tt, j,
                         wp[tt * K + j], ww[j]);
            }
        }
        for (unsigned e = 0; e < E; e++)
            TE_EQ(cp[e], c0[e] + (count ? picks[e] : 0));
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* Hand-checked softmax routing: ties go to the lower index, norm on/off. */
START_TEST(test_moe_route_softmax_hand)
{
    struct te *t = te_new(TX8_ISA_PORTABLE, 1, 0);
    uint64_t lg = te_alloc(t, 4 * 4), ids = te_alloc(t, 4 * 4), w = te_alloc(t, 4 * 4),
             cnt = te_alloc(t, 4 * 8);
    float *lp = te_ptr(t, lg), *wp = te_ptr(t, w);
    int32_t *ip = te_ptr(t, ids);
    uint64_t *cp = te_ptr(t, cnt);
    /* logits ln 1, ln 3, ln 3, ln 1: p = 1/8, 3/8, 3/8, 1/8 */
    lp[0] = 0.0f;
    lp[1] = (float)log(3.0);
    lp[2] = lp[1];
    lp[3] = 0.0f;
    struct tx8_cmd_moe_route c;
    memset(&c, 0, sizeof(c));
    c.hdr = TE_HDR(TX8_OP_MOE_ROUTE, struct tx8_cmd_moe_route);
    c.hdr.flags = TX8_ROUTE_F_SOFTMAX;
    c.out_ids = ids;
    c.out_w = w;
    c.logits = lg;
    c.tokens = 1;
    c.experts = 4;
    c.top_k = 3;
    c.scaling = 1.0f;
    ck_assert_uint_eq(te_run1(t, &c), TX8_STATUS_OK);
    ck_assert_int_eq(ip[0], 1);
    ck_assert_int_eq(ip[1], 2);
    ck_assert_int_eq(ip[2], 0); /* 0 and 3 tie: the lower index */
    ck_assert(fabsf(wp[0] - 0.375f) < 1e-6f && fabsf(wp[1] - 0.375f) < 1e-6f);
    ck_assert(fabsf(wp[2] - 0.125f) < 1e-6f);
    c.hdr.flags |= TX8_ROUTE_F_NORM_TOPK | TX8_ROUTE_F_COUNT;
    c.counts = cnt;
    ck_assert_uint_eq(te_run1(t, &c), TX8_STATUS_OK);
    ck_assert(fabsf(wp[0] - 3.0f / 7) < 1e-6f && fabsf(wp[2] - 1.0f / 7) < 1e-6f);
    ck_assert(cp[0] == 1 && cp[1] == 1 && cp[2] == 1 && cp[3] == 0);
    /* top_k == experts: all four, weights summing to 1 */
    c.top_k = 4;
    ck_assert_uint_eq(te_run1(t, &c), TX8_STATUS_OK);
    ck_assert_int_eq(ip[3], 3);
    ck_assert(fabsf(wp[0] + wp[1] + wp[2] + wp[3] - 1.0f) < 1e-6f);
    /* non-finite logits: +inf alone shares the probability, NaN has
     * probability 0 (as the finite logit here: ranked by index among the
     * zeros); a row of -inf/NaN gives ids 0.. with weight 0 */
    lp[0] = NAN;
    lp[1] = 5.0f;
    lp[2] = INFINITY;
    lp[3] = INFINITY;
    c.hdr.flags = TX8_ROUTE_F_SOFTMAX;
    c.counts = 0;
    c.top_k = 3;
    ck_assert_uint_eq(te_run1(t, &c), TX8_STATUS_OK);
    ck_assert(ip[0] == 2 && ip[1] == 3 && ip[2] == 0);
    ck_assert(wp[0] == 0.5f && wp[1] == 0.5f && wp[2] == 0.0f);
    lp[0] = NAN;
    lp[1] = -INFINITY;
    lp[2] = NAN;
    lp[3] = -INFINITY;
    ck_assert_uint_eq(te_run1(t, &c), TX8_STATUS_OK);
    ck_assert(ip[0] == 0 && ip[1] == 1 && ip[2] == 2);
    ck_assert(wp[0] == 0.0f && wp[1] == 0.0f && wp[2] == 0.0f);
    lp[0] = 0.0f;
    lp[1] = (float)log(3.0);
    lp[2] = lp[1];
    lp[3] = 0.0f;
    /* without SOFTMAX the same command is the sigmoid router */
    c.hdr.flags = 0;
    c.top_k = 1;
    ck_assert_uint_eq(te_run1(t, &c), TX8_STATUS_OK);
    ck_assert(fabsf(wp[0] - 0.75f) < 1e-6f); /* sigmoid(ln 3) */
    te_free(t);
}
END_TEST

/* ROPE with TX8_ROPE_F_ATTN_FACTOR (1.4): cos and sin times the factor;
 * flag unset or factor 1: bit-identical to the plain rotation. */
START_TEST(test_rope_attn_factor)
{
    TE_BEGIN(_i);
    for (int it = 0; it < 12; it++) {
        uint64_t mark = t->brk;
        unsigned T = te_rand(&rng, 1, 6), H = te_rand(&rng, 1, 4), rot = 2 * te_rand(&rng, 1, 32);
        unsigned ldh = rot + te_rand(&rng, 0, 4), ldt = H * ldh, mode = it % 2;
        float af = it % 3 == 0 ? 1.0f : 0.5f + 1.5f * (te_randf(&rng) + 1.0f) / 2.0f;
        size_t n = (size_t)T * ldt;
        uint64_t x = te_alloc(t, n * 4), x2 = te_alloc(t, n * 4), pos = te_alloc(t, T * 4),
                 fr = te_alloc(t, rot / 2 * 4);
        float *xp = te_ptr(t, x), *x2p = te_ptr(t, x2), *fp = te_ptr(t, fr);
        int32_t *pp = te_ptr(t, pos);
        te_fill_f32(&rng, xp, n, 1.0f);
        memcpy(x2p, xp, n * 4);
        for (unsigned i = 0; i < T; i++)
            pp[i] = (int32_t)te_rand(&rng, 0, 70000);
        for (unsigned i = 0; i < rot / 2; i++)
            fp[i] = powf(10000.0f, -2.0f * i / rot) / (i > rot / 4 ? 40.0f : 1.0f);
        float *x0 = malloc(n * 4);
        memcpy(x0, xp, n * 4);
        struct tx8_cmd_rope c = {
            TE_HDR(TX8_OP_ROPE, struct tx8_cmd_rope), x, pos, fr, T, H, ldt, ldh, 0, rot, mode, af};
        c.hdr.flags = TX8_ROPE_F_ATTN_FACTOR;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        struct tx8_cmd_rope plain = c;
        plain.hdr.flags = 0;
        plain.attn_factor = 0.0f;
        plain.x = x2;
        TE_EQ(te_run1(t, &plain), TX8_STATUS_OK);
        for (unsigned tt = 0; tt < T; tt++)
            for (unsigned h = 0; h < H; h++) {
                size_t b = (size_t)tt * ldt + (size_t)h * ldh;
                for (unsigned i = 0; i < rot / 2; i++) {
                    double a = (double)pp[tt] * fp[i];
                    unsigned i0 = mode ? 2 * i : i, i1 = mode ? 2 * i + 1 : i + rot / 2;
                    double co = (double)((float)cos(a) * af), si = (double)((float)sin(a) * af);
                    double a0 = x0[b + i0], a1 = x0[b + i1];
                    double w0 = a0 * co - a1 * si, w1 = a0 * si + a1 * co;
                    TE_CHECK(fabs(xp[b + i0] - w0) <= 4e-6 && fabs(xp[b + i1] - w1) <= 4e-6,
                             "it %d: %g %g vs %g %g", it, xp[b + i0], xp[b + i1], w0, w1);
                }
            }
        if (af == 1.0f) /* factor 1 is the plain rotation, bit for bit */
            TE_CHECK(!memcmp(xp, x2p, n * 4), "attn_factor 1 differs from the plain ROPE");
        free(x0);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

START_TEST(test_moe_ffn)
{
    TE_BEGIN(_i);
    const unsigned wd[4] = {TX8_DTYPE_F32, TX8_DTYPE_F16, TX8_DTYPE_BF16, TX8_DTYPE_I8};
    for (int it = 0; it < 12; it++) {
        uint64_t mark = t->brk;
        unsigned dt = wd[it % 4];
        unsigned act = dt == TX8_DTYPE_I8 && it % 8 == 3 ? TX8_DTYPE_I8
                       : it % 3 == 1                     ? TX8_DTYPE_BF16
                                                         : TX8_DTYPE_F32;
        int sparse = it >= 8;
        unsigned NE = te_rand(&rng, 1, 6), T = te_rand(&rng, 1, 10), K = te_rand(&rng, 1, 3);
        unsigned D = sparse ? 32 * te_rand(&rng, 1, 3) : te_rand(&rng, 1, 70);
        unsigned F = sparse ? 32 * te_rand(&rng, 1, 3) : te_rand(&rng, 1, 90);
        unsigned ldx = D + te_rand(&rng, 0, 2), ldy = D + te_rand(&rng, 0, 2);
        struct tw *ws = calloc(NE * 3, sizeof(struct tw));
        uint64_t tab = te_alloc(t, NE * 3 * sizeof(struct tx8_weight));
        for (unsigned e = 0; e < NE; e++)
            for (unsigned j = 0; j < 3; j++) {
                tw_make(t, &rng, &ws[e * 3 + j], j == 2 ? D : F, j == 2 ? F : D, dt, sparse, 0);
                ((struct tx8_weight *)te_ptr(t, tab))[e * 3 + j] = ws[e * 3 + j].w;
            }
        uint64_t x = te_alloc(t, (size_t)T * ldx * 4), y = te_alloc(t, (size_t)T * ldy * 4),
                 ids = te_alloc(t, T * K * 4), w = te_alloc(t, T * K * 4);
        float *xp = te_ptr(t, x), *yp = te_ptr(t, y), *wp = te_ptr(t, w);
        int32_t *ip = te_ptr(t, ids);
        te_fill_f32(&rng, xp, (size_t)T * ldx, 1.0f);
        te_fill_f32(&rng, yp, (size_t)T * ldy, 1.0f);
        te_fill_f32(&rng, wp, T * K, 1.0f);
        for (unsigned i = 0; i < T * K; i++)
            ip[i] = te_rand(&rng, 0, 5) == 0 ? -1 : (int32_t)te_rand(&rng, 0, NE - 1);
        float *y0 = malloc((size_t)T * ldy * 4);
        memcpy(y0, yp, (size_t)T * ldy * 4);
        int accum = it % 2;
        struct tx8_cmd_moe_ffn c = {TE_HDR(TX8_OP_MOE_FFN, struct tx8_cmd_moe_ffn),
                                    y,
                                    x,
                                    ids,
                                    w,
                                    tab,
                                    T,
                                    K,
                                    NE,
                                    D,
                                    F,
                                    ldx,
                                    ldy,
                                    (uint16_t)act,
                                    0};
        c.hdr.flags = accum ? TX8_MOE_FFN_F_ACCUMULATE : 0;
        uint64_t h0 = t->ctr.expert_cache_hits, m0 = t->ctr.expert_cache_misses;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        /* reference: per (token, slot) */
        unsigned used = 0;
        for (unsigned e = 0; e < NE; e++) {
            int u = 0;
            for (unsigned i = 0; i < T * K; i++)
                u |= ip[i] == (int32_t)e;
            used += u;
        }
        /* unflagged (resident) experts: nothing counted (interface 1.6) */
        TE_EQ(t->ctr.expert_cache_hits - h0, 0);
        TE_EQ(t->ctr.expert_cache_misses - m0, 0);
        (void)used;
        double *h1 = malloc(sizeof(double) * F), *h2 = malloc(sizeof(double) * F),
               *hm = malloc(sizeof(double) * F), *o = malloc(sizeof(double) * D),
               *om = malloc(sizeof(double) * D);
        float *hf = malloc(F * 4);
        for (unsigned tt = 0; tt < T; tt++) {
            double acc[256] = {0}, mag[256] = {0};
            for (unsigned j = 0; j < K; j++) {
                int e = ip[tt * K + j];
                if (e < 0)
                    continue;
                ref_matmul(&ws[e * 3 + 0], xp + (size_t)tt * ldx, ldx, 1, act, h1, hm);
                ref_matmul(&ws[e * 3 + 1], xp + (size_t)tt * ldx, ldx, 1, act, h2, hm);
                for (unsigned f = 0; f < F; f++)
                    hf[f] = (float)(h1[f] / (1 + exp(-h1[f])) * h2[f]);
                ref_matmul(&ws[e * 3 + 2], hf, F, 1, act, o, om);
                for (unsigned d = 0; d < D; d++) {
                    acc[d] += wp[tt * K + j] * o[d];
                    mag[d] += fabs(wp[tt * K + j]) * (om[d] + 1);
                }
            }
            for (unsigned d = 0; d < D; d++) {
                double want = acc[d] + (accum ? y0[(size_t)tt * ldy + d] : 0);
                double tol = (act == TX8_DTYPE_I8    ? 2e-2
                              : act == TX8_DTYPE_F32 ? 1e-4
                                                     : 5e-3) *
                                 mag[d] +
                             1e-5;
                float got = yp[(size_t)tt * ldy + d];
                TE_CHECK(fabs(got - want) <= tol, "moe_ffn %s act %s: %g vs %g (tol %g)",
                         tx_dtype_name(dt), tx_dtype_name(act), got, want, tol);
            }
        }
        free(h1);
        free(h2);
        free(hm);
        free(o);
        free(om);
        free(hf);
        free(y0);
        for (unsigned i = 0; i < NE * 3; i++)
            free(ws[i].deq);
        free(ws);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* ---- batch invariance (issue 17 item 7) ------------------------------------- */

/*
 * In a job with TX8_JOB_F_BATCH_INVARIANT, a row of a MATMUL / MOE_FFN pass
 * is bit-identical (memcmp) to the same row computed alone, whatever the
 * other rows: for every ISA path (portable,
 * AVX2, AVX-512 without and, where the CPU has it, with AVX512-BF16), every
 * weight dtype the plans use with its activation types (f32, f16, bf16, int8
 * per row and per group with int8 activations, int8 weights with f32
 * activations, block-sparse), and K across the kernels' K blocks (1024 for
 * f32 activations, 2048 for int8). docs/engine.md, "Batch invariance".
 */
struct bi_case {
    unsigned wdt, adt, group;
    int sparse;
};

static const struct bi_case bi_cases[] = {
    {TX8_DTYPE_F32, TX8_DTYPE_F32, 0, 0},   {TX8_DTYPE_F16, TX8_DTYPE_F16, 0, 0},
    {TX8_DTYPE_F16, TX8_DTYPE_F32, 0, 0},   {TX8_DTYPE_BF16, TX8_DTYPE_BF16, 0, 0},
    {TX8_DTYPE_BF16, TX8_DTYPE_F32, 0, 0},  {TX8_DTYPE_I8, TX8_DTYPE_I8, 0, 0},
    {TX8_DTYPE_I8, TX8_DTYPE_I8, 64, 0},    {TX8_DTYPE_I8, TX8_DTYPE_F32, 0, 0},
    {TX8_DTYPE_I8, TX8_DTYPE_F32, 32, 0},   {TX8_DTYPE_F32, TX8_DTYPE_F32, 0, 1},
    {TX8_DTYPE_BF16, TX8_DTYPE_BF16, 0, 1}, {TX8_DTYPE_I8, TX8_DTYPE_I8, 0, 1},
    {TX8_DTYPE_I8, TX8_DTYPE_I8, 64, 1},
};
#define N_BI_CASES (sizeof(bi_cases) / sizeof(bi_cases[0]))

/* Run one command in a job with TX8_JOB_F_BATCH_INVARIANT. */
static unsigned te_run1_bi(struct te *t, const void *cmd)
{
    te_cmd_begin(t);
    te_cmd(t, cmd);
    te_job_default(t);
    t->job.flags = TX8_JOB_F_BATCH_INVARIANT;
    return te_run_job(t, NULL);
}

/* engine of path p (0 portable, 1 avx2, 2 avx512 without BF16, 3 avx512 with
 * BF16), or NULL when the CPU lacks it */
static struct te *bi_engine(int p, const char **name, unsigned cores)
{
    static const char *const names[4] = {"portable", "avx2", "avx512", "avx512+bf16"};
    unsigned isa = p == 0 ? TX8_ISA_PORTABLE : p == 1 ? TX8_ISA_AVX2 : TX8_ISA_AVX512;
    *name = names[p];
    if (!tx8_engine_isa_supported(isa) ||
        (p == 3 && !tx8_engine_has_feature(TX8_FEAT_AVX512BF16)))
        return NULL;
    setenv("TX8_ENGINE_AVX512BF16", p == 3 ? "1" : "0", 1);
    struct te *t = te_new(isa, cores, 16ull << 20);
    unsetenv("TX8_ENGINE_AVX512BF16");
    return t;
}

/* y[T][N] of one MATMUL case on a fresh engine of path p with `cores`
 * workers, the data drawn from `seed`; with `alone`, each row in a pass of
 * its own. NULL when the CPU lacks the path. */
static float *bi_matmul(int p, unsigned cores, const struct bi_case *bc, unsigned K, unsigned N,
                        unsigned T, uint64_t seed, int alone)
{
    const char *pn;
    struct te *t = bi_engine(p, &pn, cores);
    if (!t)
        return NULL;
    uint64_t rng = seed;
    struct tw w;
    tw_make(t, &rng, &w, N, K, bc->wdt, bc->sparse, bc->group);
    uint64_t x = te_alloc(t, (uint64_t)T * K * 4), y = te_alloc(t, (uint64_t)T * N * 4);
    te_fill_f32(&rng, te_ptr(t, x), (size_t)T * K, 2.0f);
    struct tx8_cmd_matmul m;
    memset(&m, 0, sizeof(m));
    m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    m.w = w.w;
    m.ld_x = K;
    m.ld_y = N;
    m.act_dtype = (uint16_t)bc->adt;
    for (unsigned r = 0; r < T; r += alone ? 1 : T) {
        m.x = x + (uint64_t)r * K * 4;
        m.y = y + (uint64_t)r * N * 4;
        m.tokens = alone ? 1 : T;
        TE_EQ(te_run1_bi(t, &m), TX8_STATUS_OK);
    }
    float *out = malloc((size_t)T * N * 4);
    ck_assert_ptr_nonnull(out);
    memcpy(out, te_ptr(t, y), (size_t)T * N * 4);
    free(w.deq);
    te_free(t);
    return out;
}

START_TEST(test_batch_invariance_matmul)
{
    static const unsigned Ks[4] = {64, 1088, 2112, 4160}; /* multiples of the groups */
    static const unsigned Ts[6] = {2, 4, 5, 7, 13, 40};
    const char *pn;
    struct te *probe = bi_engine(_i, &pn, 1);
    if (!probe)
        return;
    te_free(probe);
    for (unsigned c = 0; c < N_BI_CASES; c++)
        for (unsigned ki = 0; ki < 4; ki++) {
            const struct bi_case *bc = &bi_cases[c];
            unsigned K = Ks[ki], N = 37 + 8 * ki, T = Ts[(c + ki) % 6];
            uint64_t seed = 4242 + 100 * c + ki;
            float *all = bi_matmul(_i, 2, bc, K, N, T, seed, 0);
            float *one = bi_matmul(_i, 2, bc, K, N, T, seed, 1);
            /* the same pass split over 1 and 3 cores */
            float *c1 = bi_matmul(_i, 1, bc, K, N, T, seed, 0);
            float *c3 = bi_matmul(_i, 3, bc, K, N, T, seed, 0);
            for (unsigned r = 0; r < T; r++)
                TE_CHECK(!memcmp(all + (size_t)r * N, one + (size_t)r * N, (size_t)N * 4),
                         "%s: MATMUL w=%u act=%u group=%u sparse=%d K=%u: row %u of %u differs "
                         "from the row alone",
                         pn, bc->wdt, bc->adt, bc->group, bc->sparse, K, r, T);
            TE_CHECK(!memcmp(all, c1, (size_t)T * N * 4) && !memcmp(all, c3, (size_t)T * N * 4),
                     "%s: MATMUL w=%u act=%u group=%u sparse=%d K=%u T=%u: the result depends on "
                     "the number of cores",
                     pn, bc->wdt, bc->adt, bc->group, bc->sparse, K, T);
            free(all);
            free(one);
            free(c1);
            free(c3);
        }
}
END_TEST

START_TEST(test_batch_invariance_moe)
{
    const char *pn;
    struct te *t = bi_engine(_i, &pn, 2);
    if (!t)
        return;
    uint64_t rng = 777 + (uint64_t)_i;
    for (unsigned c = 0; c < N_BI_CASES; c++) {
        const struct bi_case *bc = &bi_cases[c];
        if (bc->adt == TX8_DTYPE_F32 && bc->wdt == TX8_DTYPE_I8 && bc->group)
            continue; /* MOE_FFN: same kernels as the per-row int8 case */
        unsigned NE = 5, T = 9, TK = 2;
        unsigned D = bc->sparse ? 96 : 70 + 2 * c, F = bc->sparse ? 128 : 46 + 3 * c;
        if (bc->group) {
            D = 128;
            F = bc->sparse ? 128 : 192;
        }
        uint64_t mark = t->brk;
        struct tw ws[15];
        uint64_t tab = te_alloc(t, NE * 3 * sizeof(struct tx8_weight));
        for (unsigned e = 0; e < NE; e++)
            for (unsigned j = 0; j < 3; j++) {
                tw_make(t, &rng, &ws[e * 3 + j], j == 2 ? D : F, j == 2 ? F : D, bc->wdt,
                        bc->sparse, bc->group);
                ((struct tx8_weight *)te_ptr(t, tab))[e * 3 + j] = ws[e * 3 + j].w;
            }
        uint64_t x = te_alloc(t, (size_t)T * D * 4), y = te_alloc(t, (size_t)T * D * 4),
                 y1 = te_alloc(t, (size_t)D * 4), ids = te_alloc(t, T * TK * 4),
                 wt = te_alloc(t, T * TK * 4);
        te_fill_f32(&rng, te_ptr(t, x), (size_t)T * D, 1.0f);
        te_fill_f32(&rng, te_ptr(t, wt), T * TK, 1.0f);
        int32_t *ip = te_ptr(t, ids);
        for (unsigned i = 0; i < T; i++) {
            ip[i * TK] = (int32_t)te_rand(&rng, 0, NE - 1);
            ip[i * TK + 1] = (ip[i * TK] + 1 + (int32_t)te_rand(&rng, 0, NE - 2)) % (int32_t)NE;
        }
        struct tx8_cmd_moe_ffn m = {TE_HDR(TX8_OP_MOE_FFN, struct tx8_cmd_moe_ffn),
                                    y,
                                    x,
                                    ids,
                                    wt,
                                    tab,
                                    T,
                                    TK,
                                    NE,
                                    D,
                                    F,
                                    D,
                                    D,
                                    (uint16_t)bc->adt,
                                    0};
        TE_EQ(te_run1_bi(t, &m), TX8_STATUS_OK);
        for (unsigned r = 0; r < T; r++) {
            m.x = x + (uint64_t)r * D * 4;
            m.ids = ids + (uint64_t)r * TK * 4;
            m.w = wt + (uint64_t)r * TK * 4;
            m.y = y1;
            m.tokens = 1;
            TE_EQ(te_run1_bi(t, &m), TX8_STATUS_OK);
            TE_CHECK(!memcmp(te_ptr(t, y1), (const float *)te_ptr(t, y) + (size_t)r * D,
                             (size_t)D * 4),
                     "%s: MOE_FFN w=%u act=%u group=%u sparse=%d D=%u F=%u: token %u of %u "
                     "differs from the token alone",
                     pn, bc->wdt, bc->adt, bc->group, bc->sparse, D, F, r, T);
        }
        for (unsigned i = 0; i < NE * 3; i++)
            free(ws[i].deq);
        te_reset(t, mark);
    }
    te_free(t);
}
END_TEST

/* Interface 1.6: expert_cache_hits / misses count the experts a MOE_FFN uses
 * whose gate entry carries TX8_WEIGHT_F_XCACHE (a miss with
 * TX8_WEIGHT_F_XMISS too), once per expert; unflagged entries count
 * nothing, unknown flag bits are refused. */
START_TEST(test_expert_cache)
{
    TE_BEGIN(_i);
    unsigned NE = 4, D = 64, F = 32;
    struct tw ws[12];
    uint64_t tab = te_alloc(t, NE * 3 * sizeof(struct tx8_weight));
    struct tx8_weight *tp = te_ptr(t, tab);
    for (unsigned e = 0; e < NE; e++)
        for (unsigned j = 0; j < 3; j++) {
            tw_make(t, &rng, &ws[e * 3 + j], j == 2 ? D : F, j == 2 ? F : D, TX8_DTYPE_F32, 0, 0);
            tp[e * 3 + j] = ws[e * 3 + j].w;
        }
    uint64_t x = te_alloc(t, D * 4), y = te_alloc(t, D * 4), ids = te_alloc(t, 8),
             w = te_alloc(t, 8);
    int32_t *ip = te_ptr(t, ids);
    ip[0] = 1;
    ip[1] = 3;
    struct tx8_cmd_moe_ffn c = {TE_HDR(TX8_OP_MOE_FFN, struct tx8_cmd_moe_ffn),
                                y,
                                x,
                                ids,
                                w,
                                tab,
                                1,
                                2,
                                NE,
                                D,
                                F,
                                D,
                                D,
                                TX8_DTYPE_F32,
                                0};
    TE_EQ(te_run1(t, &c), TX8_STATUS_OK); /* no flags: nothing counted */
    TE_EQ(t->ctr.expert_cache_misses, 0);
    TE_EQ(t->ctr.expert_cache_hits, 0);
    tp[1 * 3].rsvd = TX8_WEIGHT_F_XCACHE | TX8_WEIGHT_F_XMISS;
    tp[3 * 3].rsvd = TX8_WEIGHT_F_XCACHE;
    tp[0 * 3].rsvd = TX8_WEIGHT_F_XCACHE | TX8_WEIGHT_F_XMISS; /* not routed: not counted */
    TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
    TE_EQ(t->ctr.expert_cache_misses, 1);
    TE_EQ(t->ctr.expert_cache_hits, 1);
    tp[1 * 3].rsvd = TX8_WEIGHT_F_XCACHE;
    TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
    TE_EQ(t->ctr.expert_cache_misses, 1);
    TE_EQ(t->ctr.expert_cache_hits, 3);
    tx8_engine_reset_cache(t->e); /* a no-op since 1.6 */
    tp[3 * 3].rsvd = 4; /* unknown flag */
    TE_EQ(te_run1(t, &c), TX8_STATUS_INVALID_CMD);
    tp[3 * 3].rsvd = 0;
    tp[3 * 3 + 1].rsvd = TX8_WEIGHT_F_XCACHE; /* flags only on the gate entry */
    TE_EQ(te_run1(t, &c), TX8_STATUS_INVALID_CMD);
    for (unsigned i = 0; i < 12; i++)
        free(ws[i].deq);
    te_free(t);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* SAMPLE                                                                    */
/* ------------------------------------------------------------------------ */

static uint64_t ref_splitmix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

struct rc {
    float s;
    int i;
};

static int rc_cmp(const void *a, const void *b)
{
    const struct rc *x = a, *y = b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return x->i - y->i;
}

static int rc_idx(const void *a, const void *b)
{
    return ((const struct rc *)a)->i - ((const struct rc *)b)->i;
}

/* The documented sampling algorithm, written independently. */
static int ref_sample(const float *lg, unsigned V, float temp, unsigned top_k, float top_p,
                      uint64_t seed, uint64_t ctr, float *prob)
{
    struct rc *c = malloc(sizeof(*c) * V);
    /* the largest non-NaN logit; NaN counts as -inf, +inf logits share the
     * probability alone; (logit - max) / temperature in double */
    float mx = -INFINITY;
    for (unsigned i = 0; i < V; i++)
        if (lg[i] == lg[i] && lg[i] > mx)
            mx = lg[i];
    for (unsigned i = 0; i < V; i++) {
        if (lg[i] != lg[i] || lg[i] == -INFINITY)
            c[i].s = -INFINITY;
        else if (mx == INFINITY)
            c[i].s = lg[i] == INFINITY ? 0.0f : -INFINITY;
        else
            c[i].s = (float)(((double)lg[i] - (double)mx) / (double)temp);
        c[i].i = (int)i;
    }
    qsort(c, V, sizeof(*c), rc_cmp);
    unsigned n = top_k && top_k < V ? top_k : V;
    double total = 0;
    for (unsigned i = 0; i < n; i++) {
        c[i].s = (float)exp((double)c[i].s);
        total += c[i].s;
    }
    if (top_p < 1.0f) {
        double cum = 0, lim = (double)top_p * total;
        unsigned keep = n;
        for (unsigned i = 0; i < n; i++) {
            cum += c[i].s;
            if (cum >= lim) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        total = cum < lim ? total : cum;
    }
    qsort(c, n, sizeof(*c), rc_idx);
    double u = (double)(ref_splitmix(seed ^ ref_splitmix(ctr)) >> 11) / 9007199254740992.0 * total;
    double cum = 0;
    unsigned pick = n - 1;
    for (unsigned i = 0; i < n; i++) {
        cum += c[i].s;
        if (cum > u) {
            pick = i;
            break;
        }
    }
    while (pick > 0 && !(c[pick].s > 0))
        pick--;
    int tok = c[pick].i;
    *prob = (float)(c[pick].s / total);
    free(c);
    return tok;
}

START_TEST(test_sample)
{
    TE_BEGIN(_i);
    for (int it = 0; it < 30; it++) {
        uint64_t mark = t->brk;
        unsigned rows = te_rand(&rng, 1, 6), V = te_rand(&rng, 1, 3000);
        unsigned ld = V + te_rand(&rng, 0, 3);
        uint64_t lg = te_alloc(t, (size_t)rows * ld * 4), out = te_alloc(t, rows * 4),
                 pr = te_alloc(t, rows * 4);
        float *lp = te_ptr(t, lg);
        te_fill_f32(&rng, lp, (size_t)rows * ld, 6.0f);
        float temp = it % 4 == 0 ? 0.0f : 0.3f + te_randf(&rng) * 0.25f + 0.5f;
        unsigned top_k = it % 3 == 0 ? 0 : te_rand(&rng, 1, 60);
        float top_p = it % 2 ? 1.0f : 0.5f + 0.4f * (te_randf(&rng) + 1) / 2;
        uint64_t seed = te_rand_u64(&rng), ctr = te_rand(&rng, 0, 1000000);
        if (it % 4 == 0 && V > 2) { /* a tie for the argmax: lower id wins */
            lp[1] = 100;
            lp[2] = 100;
        }
        struct tx8_cmd_sample c = {TE_HDR(TX8_OP_SAMPLE, struct tx8_cmd_sample),
                                   out,
                                   lg,
                                   pr,
                                   seed,
                                   ctr,
                                   rows,
                                   V,
                                   ld,
                                   top_k,
                                   temp,
                                   top_p,
                                   0.0f, 0.0f, 0.0f, 0.0f, 0, 0, 0, 0, 0, 0};
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        int32_t *op = te_ptr(t, out);
        float *pp = te_ptr(t, pr);
        for (unsigned r = 0; r < rows; r++) {
            const float *l = lp + (size_t)r * ld;
            if (temp <= 0) {
                unsigned best = 0;
                for (unsigned i = 1; i < V; i++)
                    if (l[i] > l[best])
                        best = i;
                TE_EQ(op[r], (int32_t)best);
                double sum = 0;
                for (unsigned i = 0; i < V; i++)
                    sum += exp((double)l[i] - l[best]);
                TE_CHECK(fabs(pp[r] - 1.0 / sum) < 1e-6, "fabs(pp[r] - 1.0 / sum) < 1e-6");
            } else {
                float p;
                int want = ref_sample(l, V, temp, top_k, top_p, seed, ctr + r, &p);
                TE_EQ(op[r], want);
                TE_CHECK(fabsf(pp[r] - p) < 1e-6f, "fabsf(pp[r] - p) < 1e-6f");
            }
        }
        /* same inputs, same tokens */
        int32_t first[8];
        memcpy(first, op, rows * 4);
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        TE_EQ(memcmp(first, op, rows * 4), 0);
        te_reset(t, mark);
    }
    /* the draws follow the distribution: p = (0.1, 0.2, 0.3, 0.4) */
    uint64_t lg = te_alloc(t, 256 * 4 * 4), out = te_alloc(t, 256 * 4);
    float *lp = te_ptr(t, lg);
    for (unsigned r = 0; r < 256; r++)
        for (unsigned i = 0; i < 4; i++)
            lp[r * 4 + i] = logf(0.1f * (float)(i + 1));
    unsigned hist[4] = {0};
    for (int rep = 0; rep < 8; rep++) {
        struct tx8_cmd_sample c = {TE_HDR(TX8_OP_SAMPLE, struct tx8_cmd_sample),
                                   out,
                                   lg,
                                   0,
                                   42,
                                   (uint64_t)rep * 256,
                                   256,
                                   4,
                                   4,
                                   0,
                                   1.0f,
                                   1.0f,
                                   0.0f, 0.0f, 0.0f, 0.0f, 0, 0, 0, 0, 0, 0};
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        for (unsigned r = 0; r < 256; r++)
            hist[((int32_t *)te_ptr(t, out))[r]]++;
    }
    for (unsigned i = 0; i < 4; i++)
        TE_CHECK(fabs(hist[i] / 2048.0 - 0.1 * (i + 1)) < 0.04, "sample histogram %u: %u", i,
                 hist[i]);
    te_free(t);
}
END_TEST

/* Non-finite logits and extreme temperatures (issue 17 item 3). */
static int32_t sample1(struct te *t, const float *l, unsigned V, float temp, unsigned top_k,
                       float top_p, uint64_t seed, float *prob)
{
    uint64_t mark = t->brk;
    uint64_t lg = te_alloc(t, V * 4), out = te_alloc(t, 4), pr = te_alloc(t, 4);
    memcpy(te_ptr(t, lg), l, V * 4);
    struct tx8_cmd_sample c = {TE_HDR(TX8_OP_SAMPLE, struct tx8_cmd_sample),
                               out,
                               lg,
                               pr,
                               seed,
                               0,
                               1,
                               V,
                               V,
                               top_k,
                               temp,
                               top_p,
                                   0.0f, 0.0f, 0.0f, 0.0f, 0, 0, 0, 0, 0, 0};
    int32_t r = te_run1(t, &c) == TX8_STATUS_OK ? *(int32_t *)te_ptr(t, out) : -100;
    if (prob)
        *prob = *(float *)te_ptr(t, pr);
    te_reset(t, mark);
    return r;
}

START_TEST(test_sample_nonfinite)
{
    TE_BEGIN(_i);
    (void)rng;
    const float inf = INFINITY, nan = NAN;
    float p;
    /* +inf wins: at temperature 1, with top-k 3, with top-p, and greedy */
    const float a[6] = {1, 2, inf, 3, 0, 0};
    for (uint64_t seed = 0; seed < 64; seed++) {
        TE_EQ(sample1(t, a, 6, 1.0f, 0, 1.0f, seed, &p), 2);
        TE_CHECK(p == 1.0f, "+inf: probability %g", (double)p);
        TE_EQ(sample1(t, a, 6, 1.0f, 3, 1.0f, seed, NULL), 2);
        TE_EQ(sample1(t, a, 6, 0.7f, 0, 0.9f, seed, NULL), 2);
    }
    TE_EQ(sample1(t, a, 6, 0.0f, 0, 1.0f, 0, &p), 2);
    TE_CHECK(p == 1.0f, "greedy +inf: probability %g", (double)p);
    /* two +inf logits share the draws; nothing else is drawn */
    const float b[5] = {5, inf, 4, inf, nan};
    unsigned hit[5] = {0};
    for (uint64_t seed = 0; seed < 400; seed++)
        hit[sample1(t, b, 5, 1.0f, 0, 1.0f, seed, NULL)]++;
    TE_CHECK(hit[1] + hit[3] == 400 && hit[1] > 120 && hit[3] > 120, "+inf pair: %u %u", hit[1],
             hit[3]);
    TE_EQ(sample1(t, b, 5, 0.0f, 0, 1.0f, 0, &p), 1);
    TE_CHECK(p == 0.5f, "greedy +inf pair: probability %g", (double)p);
    /* NaN is never drawn, even as the highest id or next to -inf only */
    const float c[4] = {-inf, 0.5f, -inf, nan};
    const float d[3] = {nan, nan, nan};
    const float e[3] = {nan, -inf, -inf};
    for (uint64_t seed = 0; seed < 64; seed++) {
        TE_EQ(sample1(t, c, 4, 1.0f, 0, 1.0f, seed, NULL), 1);
        TE_EQ(sample1(t, c, 4, 2.0f, 2, 0.5f, seed, NULL), 1);
    }
    TE_EQ(sample1(t, c, 4, 0.0f, 0, 1.0f, 0, NULL), 1);
    TE_EQ(sample1(t, d, 3, 1.0f, 0, 1.0f, 3, &p), 0);
    TE_CHECK(p == 0.0f, "all NaN: probability %g", (double)p);
    TE_EQ(sample1(t, e, 3, 1.0f, 0, 1.0f, 3, &p), 1);
    TE_CHECK(p == 0.0f, "all -inf: probability %g", (double)p);
    /* tiny temperatures (1 / T overflows f32) behave as greedy */
    const float f[6] = {-3, 7, 1.5f, 6.999f, -1e30f, 2};
    const float tiny[] = {1e-30f, 1e-38f, 1e-45f, 1e-7f};
    for (unsigned k = 0; k < sizeof(tiny) / sizeof(tiny[0]); k++)
        for (uint64_t seed = 0; seed < 32; seed++) {
            TE_EQ(sample1(t, f, 6, tiny[k], 0, 1.0f, seed, &p), 1);
            TE_CHECK(p == 1.0f, "T=%g: probability %g", (double)tiny[k], (double)p);
            TE_EQ(sample1(t, f, 6, tiny[k], 3, 0.5f, seed, NULL), 1);
        }
    /* huge logits at a small temperature: no overflow either */
    const float g[3] = {3e38f, -3e38f, 2.9e38f};
    TE_EQ(sample1(t, g, 3, 1e-3f, 0, 1.0f, 1, NULL), 0);
    /* temperature +inf: uniform over the finite logits, never -inf/NaN */
    const float h[4] = {1, -inf, 100, nan};
    unsigned hh[4] = {0};
    for (uint64_t seed = 0; seed < 400; seed++)
        hh[sample1(t, h, 4, inf, 0, 1.0f, seed, NULL)]++;
    TE_CHECK(hh[1] == 0 && hh[3] == 0 && hh[0] > 140 && hh[2] > 140, "T=inf: %u %u %u %u", hh[0],
             hh[1], hh[2], hh[3]);
    te_free(t);
}
END_TEST

/* Interface 1.3 fields: penalties, min-p, the llama.cpp order (temperature
 * last), and the 1.2 form of the command. An independent reference: */
struct samp13 {
    float temp, top_p, min_p, rep, pres, freq;
    unsigned top_k, nh;
    int temp_last;
    const int32_t *hist;
};

static int ref_sample13(const float *lg0, unsigned V, const struct samp13 *q, uint64_t seed,
                        uint64_t ctr)
{
    float *lg = malloc(sizeof(float) * V);
    memcpy(lg, lg0, sizeof(float) * V);
    /* penalties: count every id of the history */
    for (unsigned id = 0; id < V; id++) {
        unsigned cnt = 0;
        for (unsigned h = 0; h < q->nh; h++)
            cnt += q->hist[h] == (int32_t)id;
        if (!cnt)
            continue;
        if (q->rep != 0.0f && q->rep != 1.0f)
            lg[id] = lg[id] > 0 ? lg[id] / q->rep : lg[id] * q->rep;
        lg[id] -= (float)cnt * q->freq + q->pres;
    }
    unsigned best = 0;
    for (unsigned i = 1; i < V; i++)
        if (lg[i] > lg[best])
            best = i;
    if (q->temp <= 0) {
        free(lg);
        return (int)best;
    }
    double mx = lg[best], sel = q->temp_last ? 1.0 : 1.0 / (double)q->temp;
    struct rc *c = malloc(sizeof(*c) * V);
    for (unsigned i = 0; i < V; i++) {
        c[i].s = (float)(((double)lg[i] - mx) * sel);
        c[i].i = (int)i;
    }
    qsort(c, V, sizeof(*c), rc_cmp);
    unsigned n = q->top_k && q->top_k < V ? q->top_k : V;
    double total = 0;
    for (unsigned i = 0; i < n; i++) {
        c[i].s = (float)exp((double)c[i].s);
        total += c[i].s;
    }
    if (q->top_p < 1.0f) {
        double cum = 0, lim = (double)q->top_p * total;
        unsigned keep = n;
        for (unsigned i = 0; i < n; i++) {
            cum += c[i].s;
            if (cum >= lim) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        total = cum < lim ? total : cum;
    }
    if (q->min_p > 0) {
        unsigned k = 0;
        total = 0;
        for (unsigned i = 0; i < n; i++)
            if (c[i].s >= q->min_p) {
                c[k++] = c[i];
                total += c[i].s;
            }
        n = k;
    }
    if (q->temp_last && q->temp != 1.0f) {
        total = 0;
        for (unsigned i = 0; i < n; i++) {
            c[i].s = (float)exp(((double)lg[c[i].i] - mx) * (1.0 / (double)q->temp));
            total += c[i].s;
        }
    }
    qsort(c, n, sizeof(*c), rc_idx);
    double u = (double)(ref_splitmix(seed ^ ref_splitmix(ctr)) >> 11) / 9007199254740992.0 * total;
    double cum = 0;
    unsigned pick = n - 1;
    while (pick > 0 && !(c[pick].s > 0))
        pick--;
    for (unsigned i = 0; i < n; i++) {
        cum += c[i].s;
        if (cum > u) {
            pick = i;
            break;
        }
    }
    int tok = c[pick].i;
    free(c);
    free(lg);
    return tok;
}

START_TEST(test_sample_v13)
{
    TE_BEGIN(_i);
    int differ_order = 0;
    for (int it = 0; it < 40; it++) {
        uint64_t mark = t->brk;
        unsigned rows = te_rand(&rng, 1, 4), V = te_rand(&rng, 2, 1500), nh = te_rand(&rng, 0, 80);
        uint64_t lg = te_alloc(t, (size_t)rows * V * 4), out = te_alloc(t, rows * 4),
                 hi = te_alloc(t, (size_t)rows * (nh ? nh : 1) * 4), out2 = te_alloc(t, rows * 4);
        float *lp = te_ptr(t, lg);
        te_fill_f32(&rng, lp, (size_t)rows * V, 5.0f);
        int32_t *hp = te_ptr(t, hi);
        for (unsigned i = 0; i < rows * nh; i++) /* repeats, padding (-1), out of range */
            hp[i] = i % 7 == 6 ? -1 : i % 11 == 10 ? (int32_t)V + 3 : (int32_t)te_rand(&rng, 0, V < 30 ? V - 1 : 29);
        struct samp13 q = {it % 5 == 0 ? 0.0f : 0.4f + te_randf(&rng) * 0.3f + 0.5f,
                           it % 2 ? 1.0f : 0.8f,
                           it % 3 ? 0.05f : 0.0f,
                           it % 4 ? 1.1f + 0.2f * (float)(it % 3) : 1.0f,
                           it % 3 == 1 ? 0.5f : 0.0f,
                           it % 4 == 2 ? 0.3f : 0.0f,
                           it % 6 ? (unsigned)te_rand(&rng, 1, 50) : 0,
                           nh,
                           it % 2,
                           NULL};
        uint64_t seed = te_rand_u64(&rng), ctr = te_rand(&rng, 0, 100000);
        struct tx8_cmd_sample c = {TE_HDR(TX8_OP_SAMPLE, struct tx8_cmd_sample),
                                   out,
                                   lg,
                                   0,
                                   seed,
                                   ctr,
                                   rows,
                                   V,
                                   V,
                                   q.top_k,
                                   q.temp,
                                   q.top_p,
                                   q.min_p,
                                   q.rep,
                                   q.pres,
                                   q.freq,
                                   nh ? hi : 0,
                                   nh,
                                   0, 0, 0, 0};
        c.hdr.flags = q.temp_last ? TX8_SAMPLE_F_TEMP_LAST : 0;
        TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
        int32_t *op = te_ptr(t, out);
        for (unsigned r = 0; r < rows; r++) {
            struct samp13 qr = q;
            qr.hist = hp + (size_t)r * nh;
            TE_EQ(op[r], ref_sample13(lp + (size_t)r * V, V, &qr, seed, ctr + r));
        }
        /* the other order */
        if (q.temp > 0 && q.temp != 1.0f) {
            c.out = out2;
            c.hdr.flags ^= TX8_SAMPLE_F_TEMP_LAST;
            TE_EQ(te_run1(t, &c), TX8_STATUS_OK);
            int32_t *o2 = te_ptr(t, out2);
            for (unsigned r = 0; r < rows; r++) {
                struct samp13 qr = q;
                qr.hist = hp + (size_t)r * nh;
                qr.temp_last = !q.temp_last;
                TE_EQ(o2[r], ref_sample13(lp + (size_t)r * V, V, &qr, seed, ctr + r));
                differ_order += o2[r] != op[r];
            }
        }
        te_reset(t, mark);
    }
    (void)differ_order;
    /* penalties reach greedy: a repeated argmax loses to the runner-up */
    const float l[4] = {1.0f, 3.0f, 2.9f, -1.0f};
    const int32_t h[3] = {1, 1, 3};
    uint64_t lg = te_alloc(t, 16), out = te_alloc(t, 4), hi = te_alloc(t, 12);
    memcpy(te_ptr(t, lg), l, 16);
    memcpy(te_ptr(t, hi), h, 12);
    struct tx8_cmd_sample g = {TE_HDR(TX8_OP_SAMPLE, struct tx8_cmd_sample),
                               out, lg, 0, 0, 0, 1, 4, 4, 0, 0.0f, 1.0f,
                               0.0f, 1.1f, 0.0f, 0.0f, hi, 3, 0, 0, 0, 0};
    TE_EQ(te_run1(t, &g), TX8_STATUS_OK);
    TE_EQ(*(int32_t *)te_ptr(t, out), 2); /* 3 / 1.1 = 2.73 < 2.9 */
    g.repeat_penalty = 1.0f;
    g.frequency_penalty = 0.06f; /* 3 - 2 * 0.06 = 2.88 < 2.9 */
    TE_EQ(te_run1(t, &g), TX8_STATUS_OK);
    TE_EQ(*(int32_t *)te_ptr(t, out), 2);
    g.frequency_penalty = 0.0f;
    g.presence_penalty = 0.05f; /* 2.95 > 2.9 */
    TE_EQ(te_run1(t, &g), TX8_STATUS_OK);
    TE_EQ(*(int32_t *)te_ptr(t, out), 1);
    /* min-p 0.5 at temperature 1: only ids with p >= p_max / 2 */
    const float mp[4] = {0.0f, logf(0.4f), logf(0.1f), logf(0.5f)};
    memcpy(te_ptr(t, lg), mp, 16);
    g.presence_penalty = 0.0f;
    g.n_history = 0;
    g.history = 0;
    g.temperature = 1.0f;
    g.min_p = 0.5f;
    unsigned hit[4] = {0};
    for (uint64_t seed = 0; seed < 300; seed++) {
        g.seed = seed;
        TE_EQ(te_run1(t, &g), TX8_STATUS_OK);
        hit[*(int32_t *)te_ptr(t, out)]++;
    }
    TE_CHECK(hit[0] > 0 && hit[1] == 0 && hit[2] == 0 && hit[3] > 0, "min-p: %u %u %u %u", hit[0],
             hit[1], hit[2], hit[3]);
    /* the 1.2 form (without the 1.3 fields) is accepted and means them 0,
     * also when another command follows it (its bytes are not fields) */
    g.min_p = 0.0f;
    unsigned same = 0;
    uint64_t out12 = te_alloc(t, 8), fl = te_alloc(t, 64);
    for (uint64_t seed = 0; seed < 50; seed++) {
        g.seed = seed;
        g.out = out;
        g.hdr.size = sizeof(g);
        TE_EQ(te_run1(t, &g), TX8_STATUS_OK);
        int32_t full = *(int32_t *)te_ptr(t, out);
        g.out = out12;
        g.hdr.size = TX8_CMD_SAMPLE_SIZE_1_2;
        struct tx8_cmd_fill f = {TE_HDR(TX8_OP_FILL, struct tx8_cmd_fill), fl, 64, 0x3f000000u,
                                 0};
        te_cmd_begin(t);
        te_cmd(t, &g);
        te_cmd(t, &f);
        TE_EQ(te_run(t), TX8_STATUS_OK);
        same += *(int32_t *)te_ptr(t, out12) == full;
    }
    TE_EQ(same, 50);
    g.out = out;
    /* bad 1.3 fields */
    g.hdr.size = sizeof(g);
    g.min_p = 1.5f;
    TE_EQ(te_run1(t, &g), TX8_STATUS_INVALID_CMD);
    g.min_p = 0.0f;
    g.repeat_penalty = NAN;
    TE_EQ(te_run1(t, &g), TX8_STATUS_INVALID_CMD);
    g.repeat_penalty = 1.0f;
    g.hdr.flags = 2;
    TE_EQ(te_run1(t, &g), TX8_STATUS_INVALID_CMD);
    g.hdr.flags = 0;
    /* 1.9: the allowed-token mask. Greedy picks the best allowed id (and its
     * probability among the allowed ones); sampling never draws a masked id;
     * a 1.3-size command means no mask; a short ld_allow is refused. */
    const float ml[4] = {3.0f, 2.0f, 1.0f, 0.0f};
    memcpy(te_ptr(t, lg), ml, 16);
    uint64_t al = te_alloc(t, 8);
    *(uint32_t *)te_ptr(t, al) = 0x6u; /* ids 1 and 2 */
    g.allow = al;
    g.ld_allow = 1;
    g.temperature = 0.0f;
    g.probs = out12;
    TE_EQ(te_run1(t, &g), TX8_STATUS_OK);
    TE_EQ(*(int32_t *)te_ptr(t, out), 1);
    float pm = *(float *)te_ptr(t, out12);
    TE_CHECK(fabsf(pm - 1.0f / (1.0f + expf(-1.0f))) < 1e-5f, "masked greedy p %g", (double)pm);
    g.probs = 0;
    g.temperature = 1.0f;
    unsigned mh[4] = {0};
    for (uint64_t seed = 0; seed < 200; seed++) {
        g.seed = seed;
        TE_EQ(te_run1(t, &g), TX8_STATUS_OK);
        mh[*(int32_t *)te_ptr(t, out)]++;
    }
    TE_CHECK(mh[0] == 0 && mh[3] == 0 && mh[1] > mh[2] && mh[2] > 0, "mask: %u %u %u %u", mh[0],
             mh[1], mh[2], mh[3]);
    g.temperature = 0.0f;
    g.hdr.size = TX8_CMD_SAMPLE_SIZE_1_3; /* the mask fields are not read */
    TE_EQ(te_run1(t, &g), TX8_STATUS_OK);
    TE_EQ(*(int32_t *)te_ptr(t, out), 0);
    g.hdr.size = sizeof(g);
    g.ld_allow = 0;
    TE_EQ(te_run1(t, &g), TX8_STATUS_INVALID_CMD);
    g.ld_allow = 1;
    g.rsvd2 = 1;
    TE_EQ(te_run1(t, &g), TX8_STATUS_INVALID_CMD);
    te_free(t);
}
END_TEST

/* A job of several commands: each sees the previous ones' results. */
START_TEST(test_sequence)
{
    TE_BEGIN(_i);
    unsigned n = 1000;
    uint64_t a = te_alloc(t, n * 4), b = te_alloc(t, n * 4);
    struct tx8_cmd_fill f1 = {TE_HDR(TX8_OP_FILL, struct tx8_cmd_fill), a, n * 4, 0x3f800000u,
                              0}; /* 1.0f */
    struct tx8_cmd_copy cp = {TE_HDR(TX8_OP_COPY, struct tx8_cmd_copy), b, a, n * 4};
    struct tx8_cmd_add ad = {TE_HDR(TX8_OP_ADD, struct tx8_cmd_add), b, a, b, n, 2.0f, 3.0f};
    struct tx8_cmd_hdr nop = TE_HDR(TX8_OP_NOP, struct tx8_cmd_hdr);
    te_cmd_begin(t);
    te_cmd(t, &f1);
    te_cmd(t, &nop);
    te_cmd(t, &cp);
    te_cmd(t, &ad);
    uint64_t c0 = t->ctr.commands;
    TE_EQ(te_run(t), TX8_STATUS_OK);
    TE_EQ(t->ctr.commands - c0, 4);
    for (unsigned i = 0; i < n; i++)
        TE_FEQ(((float *)te_ptr(t, b))[i], 5.0f);
    TE_CHECK(t->ctr.bytes_written > 0 && t->ctr.bytes_read > 0,
             "t->ctr.bytes_written > 0 && t->ctr.bytes_read > 0");
    /* an empty job is fine */
    te_cmd_begin(t);
    TE_EQ(te_run(t), TX8_STATUS_OK);
    te_free(t);
}
END_TEST

/* Every ISA gives the same INT8 result (exact integer dot products) and the
 * same conversions. */
START_TEST(test_isa_agree)
{
    struct te *ref = te_new(TX8_ISA_PORTABLE, 1, 0);
    uint64_t rng = 5;
    unsigned T = 3, N = 37, K = 333;
    struct tw w;
    tw_make(ref, &rng, &w, N, K, TX8_DTYPE_I8, 0, 0);
    uint64_t x = te_alloc(ref, T * K * 4), y = te_alloc(ref, T * N * 4);
    te_fill_f32(&rng, te_ptr(ref, x), T * K, 1.0f);
    struct tx8_cmd_matmul m;
    memset(&m, 0, sizeof(m));
    m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    m.x = x;
    m.y = y;
    m.w = w.w;
    m.tokens = T;
    m.ld_x = K;
    m.ld_y = N;
    m.act_dtype = TX8_DTYPE_I8;
    TE_EQ(te_run1(ref, &m), TX8_STATUS_OK);
    for (int i = 1; i < NISA; i++) {
        struct te *o = te_new(te_isas[i], 2, 0);
        if (!o)
            continue;
        memcpy(o->mem, ref->mem, ref->mem_size);
        o->brk = ref->brk;
        memset(te_ptr(o, y), 0, T * N * 4);
        TE_EQ(te_run1(o, &m), TX8_STATUS_OK);
        for (unsigned j = 0; j < T * N; j++) {
            float a = ((float *)te_ptr(ref, y))[j], b = ((float *)te_ptr(o, y))[j];
            TE_CHECK(fabsf(a - b) <= 1e-6f * (1 + fabsf(a)), "isa %s: %g vs %g",
                     tx8_engine_isa_name(te_isas[i]), b, a);
        }
        te_free(o);
    }
    free(w.deq);
    te_free(ref);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_ops");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_fill_copy, 0, NISA);
    tcase_add_loop_test(tc, test_convert, 0, NISA);
    tcase_add_loop_test(tc, test_matmul_float, 0, NISA);
    tcase_add_loop_test(tc, test_matmul_int8, 0, NISA);
    tcase_add_loop_test(tc, test_int8_error_bound, 0, NISA);
    tcase_add_loop_test(tc, test_matmul_large, 0, NISA);
    tcase_add_loop_test(tc, test_int8_gemm_panel, 0, NISA);
    tcase_add_loop_test(tc, test_norms, 0, NISA);
    tcase_add_loop_test(tc, test_rope, 0, NISA);
    tcase_add_loop_test(tc, test_swiglu_add, 0, NISA);
    tcase_add_loop_test(tc, test_embed, 0, NISA);
    tcase_add_loop_test(tc, test_attention, 0, NISA);
    tcase_add_loop_test(tc, test_dsa_index, 0, NISA);
    tcase_add_loop_test(tc, test_dsa_index_q8, 0, NISA);
    tcase_add_loop_test(tc, test_attention_latent_blocks, 0, NISA);
    tcase_add_loop_test(tc, test_moe_route, 0, NISA);
    tcase_add_loop_test(tc, test_moe_route_softmax, 0, NISA);
    tcase_add_test(tc, test_moe_route_softmax_hand);
    tcase_add_loop_test(tc, test_rope_attn_factor, 0, NISA);
    tcase_add_loop_test(tc, test_moe_ffn, 0, NISA);
    tcase_add_loop_test(tc, test_batch_invariance_matmul, 0, 4);
    tcase_add_loop_test(tc, test_batch_invariance_moe, 0, 4);
    tcase_add_loop_test(tc, test_expert_cache, 0, NISA);
    tcase_add_loop_test(tc, test_sample, 0, NISA);
    tcase_add_loop_test(tc, test_sample_nonfinite, 0, NISA);
    tcase_add_loop_test(tc, test_sample_v13, 0, NISA);
    tcase_add_loop_test(tc, test_sequence, 0, NISA);
    tcase_add_test(tc, test_isa_agree);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
