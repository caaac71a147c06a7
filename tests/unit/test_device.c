/* SPDX-License-Identifier: MIT */
/*
 * The libtx device layer through its public API.
 *
 * Backend: $TX_DEVICE if set (e.g. /dev/accel/accel0 in the VM suite, where
 * this same program runs against tx8.ko), else a tx8-emu started for this
 * program. Tests that need what only one backend offers (fault injection,
 * the memory view, killing the emulator) say so and skip otherwise.
 */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tx/tx.h>

#include "tx_test_emu.h"
#include "tx_test_main.h"

static struct tx_test_emu g_emu;
static bool g_own_emu;
static char g_spec[300];

#define MS 1000000ll

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

#define TX_OKAY(expr)                                                                              \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        ck_assert_msg(rc_ == TX_OK, "%s = %d (%s): %s", #expr, rc_, tx_strerror(rc_),              \
                      tx_last_error());                                                            \
    } while (0)

#define TX_FAILS(expr, code)                                                                       \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        ck_assert_msg(rc_ == (code), "%s = %d (%s), expected %d (%s); last error: %s", #expr, rc_, \
                      tx_strerror(rc_), (code), tx_strerror(code), tx_last_error());               \
        ck_assert_msg(tx_last_error()[0] != 0, "%s: no error message", #expr);                     \
    } while (0)

static tx_device_t *open_dev(void)
{
    tx_device_t *dev = NULL;

    TX_OKAY(tx_device_open(g_spec, &dev));
    ck_assert_ptr_nonnull(dev);
    return dev;
}

static tx_bo_t *alloc_bo(tx_device_t *dev, uint64_t size, const char *label, void **map)
{
    tx_bo_t *bo = NULL;

    TX_OKAY(tx_bo_alloc(dev, size, 0, label, &bo));
    if (map)
        TX_OKAY(tx_bo_map(bo, map));
    return bo;
}

static uint64_t bo_addr(tx_bo_t *bo)
{
    uint64_t a = 0;

    TX_OKAY(tx_bo_addr(bo, &a));
    return a;
}

static uint64_t checksum(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ull;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void fill_pattern(void *p, size_t n, uint32_t seed)
{
    uint8_t *b = p;

    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        b[i] = (uint8_t)(seed >> 24);
    }
}

/* Submit cb and wait for it; returns tx_wait's code, result in *r. */
static int run(tx_device_t *dev, tx_cmdbuf_t *cb, struct tx_job_result *r)
{
    tx_job_t job = 0;
    int rc = tx_submit(dev, cb, &job);

    if (rc)
        return rc;
    ck_assert_uint_ne(job, 0);
    return tx_wait(dev, job, 20000 * MS, r);
}

/* Fault injection is optional for a backend: report and skip. */
static bool inject(tx_device_t *dev, enum tx_fault kind, uint32_t param, uint32_t count)
{
    int rc = tx_device_inject_fault(dev, kind, param, count);

    if (rc == TX_ENOTSUP) {
        fprintf(stderr, "skipped: this backend cannot inject faults (%s)\n", tx_last_error());
        return false;
    }
    TX_OKAY(rc);
    return true;
}

static uint64_t wall_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

START_TEST(test_open_info)
{
    struct tx_device_info info;
    tx_device_t *dev = open_dev();

    TX_OKAY(tx_device_info(dev, &info));
    ck_assert(strcmp(info.backend, "emu") == 0 || strcmp(info.backend, "accel") == 0);
    ck_assert_msg(info.name[0], "empty device name");
    ck_assert_int_eq(TX8_IF_MAJOR(info.if_version), TX8_IF_VERSION_MAJOR);
    ck_assert_uint_ge(info.mem_size, TX8_MIN_MEMORY);
    ck_assert_uint_eq(info.mem_size & (info.mem_size - 1), 0);
    ck_assert_uint_ge(info.heap_offset, TX8_CTRL_SIZE);
    ck_assert_uint_gt(info.heap_size, 0);
    ck_assert_uint_le(info.heap_offset + info.heap_size, info.mem_size);
    ck_assert_uint_ge(info.num_cores, 1);
    ck_assert_uint_ge(info.max_ranges, 2);
    ck_assert_uint_ge(info.max_cmd_size, 4096);
    ck_assert_uint_ge(info.sq_entries, 1);
    for (int t = TX8_DTYPE_F32; t <= TX8_DTYPE_I8; t++)
        ck_assert_msg(info.dtypes & TX8_DTYPE_BIT(t), "dtype %d missing", t);
    ck_assert_uint_le(info.mem_used, info.mem_size);
    if (!strcmp(info.backend, "emu")) {
        ck_assert_str_eq(info.name, "TX8 (tx8-emu)");
        ck_assert_int_gt(info.client_id, 0);
        ck_assert(info.caps & TX8_CAP_RESET);
    }

    TX_FAILS(tx_device_info(dev, NULL), TX_EINVAL);
    TX_FAILS(tx_device_info(NULL, &info), TX_EINVAL);
    TX_OKAY(tx_device_close(dev));
    TX_FAILS(tx_device_close(dev), TX_EINVAL);
    TX_FAILS(tx_device_info(dev, &info), TX_EINVAL);
    TX_FAILS(tx_device_close(NULL), TX_EINVAL);
}
END_TEST

START_TEST(test_open_errors)
{
    tx_device_t *dev = (tx_device_t *)1;
    struct tx_device_desc list[8];
    size_t n = 0;
    unsigned count = 0;

    TX_FAILS(tx_device_open("emu:/nonexistent-dir/tx8.sock", &dev), TX_ENODEV);
    ck_assert_ptr_null(dev);
    ck_assert_msg(strstr(tx_last_error(), "/nonexistent-dir/tx8.sock"), "message: %s",
                  tx_last_error());
    TX_FAILS(tx_device_open("bogus", &dev), TX_EINVAL);
    TX_FAILS(tx_device_open("emu:", &dev), TX_EINVAL);
    TX_FAILS(tx_device_open(g_spec, NULL), TX_EINVAL);
    {
        char longspec[600];

        memset(longspec, 'a', sizeof(longspec));
        memcpy(longspec, "emu:/", 5);
        longspec[sizeof(longspec) - 1] = 0;
        TX_FAILS(tx_device_open(longspec, &dev), TX_EINVAL);
    }

    /* TX_DEVICE selects the default device. */
    setenv("TX_DEVICE", g_spec, 1);
    TX_OKAY(tx_device_open(NULL, &dev));
    TX_OKAY(tx_device_close(dev));
    TX_OKAY(tx_device_open("", &dev));
    TX_OKAY(tx_device_close(dev));
    TX_OKAY(tx_device_enumerate(list, 8, &n));
    TX_OKAY(tx_device_count(&count));
    ck_assert_uint_eq(count, n);
    if (!strncmp(g_spec, "emu:", 4)) {
        bool found = false;

        for (size_t i = 0; i < n && i < 8; i++)
            found |= !strcmp(list[i].spec, g_spec) && !strcmp(list[i].backend, "emu");
        ck_assert_msg(found, "enumerate does not list %s", g_spec);
    }
    TX_FAILS(tx_device_enumerate(NULL, 1, &n), TX_EINVAL);
    TX_FAILS(tx_device_enumerate(list, 8, NULL), TX_EINVAL);
    TX_FAILS(tx_device_count(NULL), TX_EINVAL);

    for (int code = TX_OK; code >= TX_EPERM; code--)
        ck_assert_str_ne(tx_strerror(code), "unknown error");
    ck_assert_str_eq(tx_strerror(-999), "unknown error");
    ck_assert_str_eq(tx_job_status_str(TX_JOB_ADDR_FAULT), "address fault");
    ck_assert_str_eq(tx_job_status_str(12345), "unknown status");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Buffer objects                                                            */
/* ------------------------------------------------------------------------ */

START_TEST(test_bo_basic)
{
    struct tx_device_info info;
    struct tx_bo_info bi;
    tx_device_t *dev = open_dev();
    uint64_t size = 0, a1, a2;
    void *m1, *m1b = NULL, *m2;
    tx_bo_t *b1 = alloc_bo(dev, 1, "unit-test-b1", &m1);
    tx_bo_t *b2 = alloc_bo(dev, 10000, NULL, &m2);

    TX_OKAY(tx_device_info(dev, &info));
    TX_OKAY(tx_bo_size(b1, &size));
    ck_assert_uint_eq(size, 4096);
    TX_OKAY(tx_bo_size(b2, &size));
    ck_assert_uint_eq(size, 12288);
    a1 = bo_addr(b1);
    a2 = bo_addr(b2);
    ck_assert_uint_eq(a1 % 4096, 0);
    ck_assert_uint_eq(a2 % 4096, 0);
    ck_assert_uint_ge(a1, info.heap_offset);
    ck_assert_uint_le(a2 + 12288, info.mem_size);
    ck_assert(a1 + 4096 <= a2 || a2 + 12288 <= a1);
    TX_OKAY(tx_bo_map(b1, &m1b));
    ck_assert_ptr_eq(m1, m1b);
    memset(m2, 0x5a, 12288);
    memset(m1, 0xa5, 4096);
    ck_assert_uint_eq(((uint8_t *)m2)[12287], 0x5a);

    TX_OKAY(tx_bo_info(b1, &bi));
    ck_assert_str_eq(bi.label, "unit-test-b1");
    ck_assert_uint_eq(bi.addr, a1);
    ck_assert_uint_eq(bi.size, 4096);
    TX_OKAY(tx_bo_set_label(b1, "a-label-that-is-much-longer-than-31-bytes"));
    TX_OKAY(tx_bo_info(b1, &bi));
    ck_assert_str_eq(bi.label, "a-label-that-is-much-longer-tha");

    {
        struct tx_mem_region r[64];
        size_t n = 0;
        int rc = tx_device_memory_view(dev, r, 64, &n);

        if (rc == TX_ENOTSUP) {
            fprintf(stderr, "skipped: no memory view on this backend\n");
        } else {
            bool seen = false;

            TX_OKAY(rc);
            ck_assert_uint_ge(n, 2);
            for (size_t i = 0; i < n && i < 64; i++) {
                if (i)
                    ck_assert_uint_gt(r[i].addr, r[i - 1].addr);
                if (r[i].addr == a1) {
                    seen = true;
                    ck_assert_str_eq(r[i].label, "a-label-that-is-much-longer-tha");
                    ck_assert(r[i].flags & TX_MEM_OWN);
                    ck_assert_uint_eq(r[i].size, 4096);
                }
            }
            ck_assert_msg(seen, "BO at 0x%" PRIx64 " not in the memory view", a1);
            TX_OKAY(tx_device_memory_view(dev, NULL, 0, &n));
            ck_assert_uint_ge(n, 2);
        }
    }
    TX_OKAY(tx_device_info(dev, &info));
    ck_assert_uint_ge(info.mem_used, 4096 + 12288);

    TX_OKAY(tx_bo_free(b1));
    TX_OKAY(tx_bo_free(b2));
    TX_OKAY(tx_device_close(dev));
}
END_TEST

START_TEST(test_bo_bad_args)
{
    struct tx_device_info info;
    tx_device_t *dev = open_dev();
    tx_bo_t *bo = NULL, *freed;
    uint64_t v;
    void *p;

    TX_OKAY(tx_device_info(dev, &info));
    TX_FAILS(tx_bo_alloc(dev, 0, 0, NULL, &bo), TX_EINVAL);
    TX_FAILS(tx_bo_alloc(dev, 1ull << 62, 0, NULL, &bo), TX_ENOSPC);
    TX_FAILS(tx_bo_alloc(dev, UINT64_MAX, 0, NULL, &bo), TX_ENOSPC);
    TX_FAILS(tx_bo_alloc(dev, info.mem_size, 0, NULL, &bo), TX_ENOSPC);
    TX_FAILS(tx_bo_alloc(dev, 4096, 0x80000000u, NULL, &bo), TX_EINVAL);
    TX_FAILS(tx_bo_alloc(NULL, 4096, 0, NULL, &bo), TX_EINVAL);
    TX_FAILS(tx_bo_alloc(dev, 4096, 0, NULL, NULL), TX_EINVAL);
    TX_FAILS(tx_bo_alloc((tx_device_t *)(uintptr_t)0x1234567, 4096, 0, NULL, &bo), TX_EINVAL);

    /* Freed, forged and wrong-type handles are refused, never followed. */
    freed = alloc_bo(dev, 4096, "freed", NULL);
    TX_OKAY(tx_bo_free(freed));
    TX_FAILS(tx_bo_free(freed), TX_EINVAL);
    TX_FAILS(tx_bo_map(freed, &p), TX_EINVAL);
    TX_FAILS(tx_bo_addr(freed, &v), TX_EINVAL);
    TX_FAILS(tx_bo_size(freed, &v), TX_EINVAL);
    TX_FAILS(tx_bo_set_label(freed, "x"), TX_EINVAL);
    /* Its slot reused by a new BO: the old handle still fails. */
    bo = alloc_bo(dev, 4096, "new", NULL);
    ck_assert_ptr_ne(bo, freed);
    TX_FAILS(tx_bo_addr(freed, &v), TX_EINVAL);
    TX_OKAY(tx_bo_addr(bo, &v));
    TX_FAILS(tx_bo_free(NULL), TX_EINVAL);
    TX_FAILS(tx_bo_map(NULL, &p), TX_EINVAL);
    TX_FAILS(tx_bo_map(bo, NULL), TX_EINVAL);
    TX_FAILS(tx_bo_addr(bo, NULL), TX_EINVAL);
    TX_FAILS(tx_bo_size(bo, NULL), TX_EINVAL);
    TX_FAILS(tx_bo_info(bo, NULL), TX_EINVAL);
    TX_FAILS(tx_bo_map((tx_bo_t *)dev, &p), TX_EINVAL);
    TX_FAILS(tx_bo_free((tx_bo_t *)(uintptr_t)0xdeadbeef), TX_EINVAL);
    TX_FAILS(tx_device_info((tx_device_t *)bo, &info), TX_EINVAL);
    TX_OKAY(tx_bo_set_label(bo, NULL));
    TX_OKAY(tx_bo_free(bo));

    /* Exhaust device memory, then get it all back. */
    {
        tx_bo_t *bos[64];
        int n = 0, rc = 0;
        uint64_t chunk = info.heap_size / 8;

        while (n < 64 && (rc = tx_bo_alloc(dev, chunk, 0, "fill", &bos[n])) == TX_OK)
            n++;
        ck_assert_msg(rc == TX_ENOSPC, "expected ENOSPC after %d chunks, got %d (%s)", n, rc,
                      tx_last_error());
        ck_assert_int_ge(n, 4);
        for (int i = 0; i < n; i++)
            TX_OKAY(tx_bo_free(bos[i]));
        bos[0] = alloc_bo(dev, chunk, "again", NULL);
        TX_OKAY(tx_bo_free(bos[0]));
    }
    TX_OKAY(tx_device_close(dev));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Jobs                                                                      */
/* ------------------------------------------------------------------------ */

START_TEST(test_zero_copy)
{
    tx_device_t *dev = open_dev();
    void *ms, *md;
    tx_bo_t *src = alloc_bo(dev, 64 << 10, "zc-src", &ms);
    tx_bo_t *dst = alloc_bo(dev, 64 << 10, "zc-dst", &md);
    struct tx_job_result r;
    tx_cmdbuf_t *cb;

    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_copy(cb, tx_ref(dst, 0), tx_ref(src, 0), 64 << 10));
    for (uint32_t round = 1; round <= 3; round++) {
        /* Written through the mapping, read by the device: no staging. */
        fill_pattern(ms, 64 << 10, round);
        memset(md, 0, 64 << 10);
        TX_OKAY(run(dev, cb, &r));
        ck_assert_uint_eq(r.status, TX_JOB_OK);
        ck_assert_msg(memcmp(ms, md, 64 << 10) == 0, "round %u: copy differs", round);
    }
    TX_OKAY(tx_cmdbuf_destroy(cb));
    TX_OKAY(tx_bo_free(src));
    TX_OKAY(tx_bo_free(dst));
    TX_OKAY(tx_device_close(dev));
}
END_TEST

START_TEST(test_fill_copy)
{
    tx_device_t *dev = open_dev();
    void *m;
    tx_bo_t *bo = alloc_bo(dev, 8192, "fill", &m);
    uint32_t *w = m;
    struct tx_job_result r;
    tx_cmdbuf_t *cb;
    size_t bytes = 0;
    unsigned ncmd = 0;

    memset(m, 0, 8192);
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 0xdeadbeefu));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 4096), 16, 0x01020304u));
    /* overlapping copy: memmove semantics */
    TX_OKAY(tx_cmd_copy(cb, tx_ref(bo, 4100), tx_ref(bo, 4096), 16));
    TX_OKAY(tx_cmd_nop(cb));
    TX_OKAY(tx_cmdbuf_size(cb, &bytes, &ncmd));
    ck_assert_uint_eq(ncmd, 4);
    ck_assert_uint_eq(bytes, sizeof(struct tx8_cmd_fill) * 2 + sizeof(struct tx8_cmd_copy) +
                                 sizeof(struct tx8_cmd_hdr));
    TX_OKAY(run(dev, cb, &r));
    for (int i = 0; i < 1024; i++)
        ck_assert_uint_eq(w[i], 0xdeadbeefu);
    ck_assert_uint_eq(w[1024], 0x01020304u);
    for (int i = 1025; i < 1029; i++)
        ck_assert_uint_eq(w[i], 0x01020304u);
    ck_assert_uint_eq(w[1029], 0);

    /* reset and reuse the builder */
    TX_OKAY(tx_cmdbuf_reset(cb));
    TX_OKAY(tx_cmdbuf_size(cb, &bytes, &ncmd));
    ck_assert_uint_eq(bytes, 0);
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 8192, 7));
    TX_OKAY(run(dev, cb, &r));
    ck_assert_uint_eq(w[2047], 7);
    TX_OKAY(tx_cmdbuf_destroy(cb));
    TX_OKAY(tx_device_close(dev));
}
END_TEST

static void matmul_case(tx_device_t *dev, uint16_t wdtype, uint16_t act, double tol)
{
    const uint32_t T = 3, K = 37, N = 5;
    void *mx, *mw, *ms, *mb, *my;
    tx_bo_t *x = alloc_bo(dev, T * K * 4, "mm-x", &mx);
    tx_bo_t *w = alloc_bo(dev, N * K * 4, "mm-w", &mw);
    tx_bo_t *sc = alloc_bo(dev, N * 4, "mm-scales", &ms);
    tx_bo_t *bias = alloc_bo(dev, N * 4, "mm-bias", &mb);
    tx_bo_t *y = alloc_bo(dev, T * N * 4, "mm-y", &my);
    float *fx = mx, *fs = ms, *fb = mb, *fy = my, ref[3 * 5], wf[5 * 37];
    struct tx_matmul_args a;
    struct tx_job_result r;
    tx_cmdbuf_t *cb;
    double maxref = 0;
    uint32_t seed = 12345;

    for (uint32_t i = 0; i < T * K; i++) {
        seed = seed * 1664525u + 1013904223u;
        fx[i] = (float)((int)(seed >> 16) % 2001 - 1000) / 500.0f;
    }
    for (uint32_t n = 0; n < N; n++) {
        fb[n] = 0.25f * (float)n - 0.5f;
        fs[n] = 0.01f + 0.002f * (float)n;
        for (uint32_t k = 0; k < K; k++) {
            float v;

            seed = seed * 1664525u + 1013904223u;
            v = (float)((int)(seed >> 16) % 255 - 127);
            switch (wdtype) {
            case TX8_DTYPE_I8:
                ((int8_t *)mw)[n * K + k] = (int8_t)v;
                wf[n * K + k] = v * fs[n];
                break;
            case TX8_DTYPE_BF16:
                ((uint16_t *)mw)[n * K + k] = tx_f32_to_bf16(v / 64.0f);
                wf[n * K + k] = tx_bf16_to_f32(((uint16_t *)mw)[n * K + k]);
                break;
            default:
                ((float *)mw)[n * K + k] = v / 64.0f;
                wf[n * K + k] = v / 64.0f;
                break;
            }
        }
    }
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t n = 0; n < N; n++) {
            double s = fb[n];

            for (uint32_t k = 0; k < K; k++)
                s += (double)fx[t * K + k] * wf[n * K + k];
            ref[t * N + n] = (float)s;
            if (fabs(s) > maxref)
                maxref = fabs(s);
        }
    memset(my, 0xff, T * N * 4);

    memset(&a, 0, sizeof(a));
    a.y = tx_ref(y, 0);
    a.x = tx_ref(x, 0);
    a.bias = tx_ref(bias, 0);
    a.w.data = tx_ref(w, 0);
    if (wdtype == TX8_DTYPE_I8)
        a.w.scales = tx_ref(sc, 0);
    a.w.rows = N;
    a.w.cols = K;
    a.w.dtype = wdtype;
    a.w.format = TX8_WFMT_DENSE;
    a.tokens = T;
    a.ld_x = K;
    a.ld_y = N;
    a.act_dtype = act;
    a.flags = TX8_MATMUL_F_BIAS;
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_matmul(cb, &a));
    TX_OKAY(run(dev, cb, &r));
    ck_assert_uint_eq(r.macs, (uint64_t)T * N * K);
    for (uint32_t i = 0; i < T * N; i++)
        ck_assert_msg(fabs(fy[i] - ref[i]) <= tol * maxref + 1e-5,
                      "dtype %u act %u: y[%u] = %g, reference %g", wdtype, act, i, fy[i], ref[i]);
    TX_OKAY(tx_cmdbuf_destroy(cb));
    tx_bo_free(x);
    tx_bo_free(w);
    tx_bo_free(sc);
    tx_bo_free(bias);
    tx_bo_free(y);
}

START_TEST(test_matmul)
{
    tx_device_t *dev = open_dev();

    matmul_case(dev, TX8_DTYPE_F32, TX8_DTYPE_F32, 1e-5);
    matmul_case(dev, TX8_DTYPE_BF16, TX8_DTYPE_F32, 1e-4);
    /* INT8 weights and activations quantised on the fly (scale max/127). */
    matmul_case(dev, TX8_DTYPE_I8, TX8_DTYPE_I8, 0.03);
    TX_OKAY(tx_device_close(dev));
}
END_TEST

/*
 * TX8_ATTN_F_BF16 (interface 1.7) through the SDK: a query of 1 + 2^-9 (BF16
 * rounds it to 1) over two exact BF16 keys and values. The f32 form gives
 * o[0] = (1 + 5 e^-1.001953125) / (1 + e^-1.001953125) = 2.074230; the BF16
 * form rounds the query to 1 and p1 = e^-1 to 0.3671875 for P V (the
 * softmax sums the f32 p): (1 + 5 * 0.3671875) / (1 + e^-1) = 2.073236.
 */
START_TEST(test_attention_bf16_flag)
{
    tx_device_t *dev = open_dev();
    struct tx_device_info info;
    void *mq, *mk, *mo;
    tx_bo_t *q = alloc_bo(dev, 16, "at-q", &mq), *k = alloc_bo(dev, 32, "at-kv", &mk),
            *o = alloc_bo(dev, 16, "at-o", &mo);
    const float kv[2][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}}, vv[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
    const double want[2] = {2.074230, 2.073236};
    struct tx_attention_args a;
    struct tx_job_result r;

    TX_OKAY(tx_device_info(dev, &info));
    ck_assert_uint_ge(TX8_IF_MINOR(info.if_version), 7);
    ((float *)mq)[0] = 1.0f + 1.0f / 512;
    ((float *)mq)[1] = ((float *)mq)[2] = ((float *)mq)[3] = 0;
    /* a shared K/V cache would make V the keys: a separate V of 4 dims
     * after the keys in the same BO */
    for (int j = 0; j < 2; j++)
        for (int d = 0; d < 4; d++) {
            ((uint16_t *)mk)[j * 4 + d] = tx_f32_to_bf16(kv[j][d]);
            ((uint16_t *)mk)[8 + j * 4 + d] = tx_f32_to_bf16(vv[j][d]);
        }
    memset(&a, 0, sizeof(a));
    a.out = tx_ref(o, 0);
    a.q = tx_ref(q, 0);
    a.k = tx_ref(k, 0);
    a.v = tx_ref(k, 16);
    a.tokens = a.q_heads = a.kv_heads = 1;
    a.qk_dim = a.v_dim = a.ld_q_head = a.ld_k_head = a.ld_v_head = a.ld_o_head = 4;
    a.kv_len = 2;
    a.q_pos0 = 1;
    a.scale = 1.0f;
    a.kv_dtype = TX8_DTYPE_BF16;
    for (int bf = 0; bf < 2; bf++) {
        tx_cmdbuf_t *cb;

        TX_OKAY(tx_cmdbuf_create(dev, &cb));
        TX_OKAY(tx_cmd_attention_flags(cb, &a, TX8_DTYPE_BF16, bf ? TX8_ATTN_F_BF16 : 0));
        TX_OKAY(run(dev, cb, &r));
        ck_assert_msg(fabs(((float *)mo)[0] - want[bf]) < 2e-5, "%s form: o[0] = %.6f, want %.6f",
                      bf ? "BF16" : "f32", ((float *)mo)[0], want[bf]);
        TX_OKAY(tx_cmdbuf_destroy(cb));
    }
    tx_bo_free(q);
    tx_bo_free(k);
    tx_bo_free(o);
    TX_OKAY(tx_device_close(dev));
}
END_TEST

START_TEST(test_job_status)
{
    tx_device_t *dev = open_dev();
    tx_bo_t *bo = alloc_bo(dev, 4096, "status", NULL);
    struct tx_job_result r, s;
    tx_job_t j1 = 0, j2 = 0;
    tx_cmdbuf_t *cb;

    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 1));
    TX_OKAY(tx_submit_ex(dev, cb, 0, 0xfeedface12345678ull, &j1));
    TX_OKAY(tx_submit(dev, cb, &j2));
    ck_assert_uint_gt(j2, j1);
    TX_OKAY(tx_job_status(dev, j1, &s));
    ck_assert(s.status == TX_JOB_OK || s.status == TX_JOB_PENDING);
    TX_OKAY(tx_wait(dev, j2, -1, &r));
    TX_OKAY(tx_wait(dev, j1, 0, &r)); /* in order: finished too */
    ck_assert_uint_eq(r.job, j1);
    ck_assert_uint_eq(r.status, TX_JOB_OK);
    ck_assert_uint_eq(r.user_data, 0xfeedface12345678ull);
    ck_assert_uint_le(r.start_ns, r.end_ns);
    TX_OKAY(tx_job_status(dev, j1, &s));
    ck_assert_uint_eq(s.status, TX_JOB_OK);
    ck_assert_uint_eq(s.user_data, 0xfeedface12345678ull);
    /* waiting again is fine */
    TX_OKAY(tx_wait(dev, j1, 0, NULL));

    TX_FAILS(tx_wait(dev, j2 + 1000, 0, &r), TX_ENOENT);
    TX_FAILS(tx_wait(dev, 0, 0, &r), TX_EINVAL);
    TX_FAILS(tx_job_status(dev, j1, NULL), TX_EINVAL);
    TX_FAILS(tx_wait(NULL, j1, 0, &r), TX_EINVAL);
    TX_FAILS(tx_submit(dev, cb, NULL), TX_EINVAL);
    TX_FAILS(tx_submit_ex(dev, cb, 0x40, 0, &j1), TX_EINVAL);
    /* a batch-invariant job (interface 1.6) runs on both backends (emu;
     * /dev/accel through DRM_TX8_SUBMIT_BATCH_INVARIANT, tx8.ko 1.2) */
    TX_OKAY(tx_submit_ex(dev, cb, TX_SUBMIT_BATCH_INVARIANT, 0, &j1));
    TX_OKAY(tx_wait(dev, j1, -1, &r));
    ck_assert_uint_eq(r.status, TX_JOB_OK);
    TX_OKAY(tx_cmdbuf_destroy(cb));
    TX_OKAY(tx_device_close(dev));
}
END_TEST

/*
 * The flag reaches the device (emu socket or /dev/accel): with
 * TX_SUBMIT_BATCH_INVARIANT each row of a MATMUL of BI_T rows is
 * bit-identical (memcmp) to the same row computed alone.
 */
#define BI_K 512
#define BI_N 96
#define BI_T 7

static void bi_matmul(tx_device_t *dev, tx_bo_t *w, tx_bo_t *x, uint64_t x_off, tx_bo_t *y,
                      uint64_t y_off, uint32_t tokens)
{
    struct tx_matmul_args m;
    struct tx_job_result r;
    tx_cmdbuf_t *cb;
    tx_job_t j;

    memset(&m, 0, sizeof(m));
    m.y = tx_ref(y, y_off);
    m.x = tx_ref(x, x_off);
    m.w.data = tx_ref(w, 0);
    m.w.rows = BI_N;
    m.w.cols = BI_K;
    m.w.dtype = TX8_DTYPE_F32;
    m.w.format = TX8_WFMT_DENSE;
    m.tokens = tokens;
    m.ld_x = BI_K;
    m.ld_y = BI_N;
    m.act_dtype = TX8_DTYPE_F32;
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_matmul(cb, &m));
    TX_OKAY(tx_submit_ex(dev, cb, TX_SUBMIT_BATCH_INVARIANT, 0, &j));
    TX_OKAY(tx_wait(dev, j, 20000 * MS, &r));
    ck_assert_uint_eq(r.status, TX_JOB_OK);
    TX_OKAY(tx_cmdbuf_destroy(cb));
}

START_TEST(test_batch_invariant_rows)
{
    tx_device_t *dev = open_dev();
    struct tx_device_info di;
    float *wp, *xp, *yb, *ys;
    void *p;
    uint64_t rng = 17;
    tx_bo_t *w, *x, *yb_bo, *ys_bo;

    TX_OKAY(tx_device_info(dev, &di));
    w = alloc_bo(dev, (uint64_t)BI_N * BI_K * 4, "bi-w", &p);
    wp = p;
    x = alloc_bo(dev, (uint64_t)BI_T * BI_K * 4, "bi-x", &p);
    xp = p;
    yb_bo = alloc_bo(dev, (uint64_t)BI_T * BI_N * 4, "bi-yb", &p);
    yb = p;
    ys_bo = alloc_bo(dev, (uint64_t)BI_T * BI_N * 4, "bi-ys", &p);
    ys = p;
    for (size_t i = 0; i < (size_t)BI_N * BI_K; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        wp[i] = (float)((int)(rng >> 40) % 2001 - 1000) / 997.0f;
    }
    for (size_t i = 0; i < (size_t)BI_T * BI_K; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        xp[i] = (float)((int)(rng >> 40) % 2001 - 1000) / 311.0f;
    }
    /* all rows in one pass, then each row alone */
    bi_matmul(dev, w, x, 0, yb_bo, 0, BI_T);
    for (uint32_t t = 0; t < BI_T; t++)
        bi_matmul(dev, w, x, (uint64_t)t * BI_K * 4, ys_bo, (uint64_t)t * BI_N * 4, 1);
    for (int t = 0; t < BI_T; t++)
        ck_assert_msg(memcmp(yb + t * BI_N, ys + t * BI_N, BI_N * sizeof(float)) == 0,
                      "%s: row %d of a %d-row batch-invariant MATMUL differs from the row alone",
                      di.backend, t, BI_T);
    printf("[device] %s: %d rows of a batch-invariant MATMUL bit-identical to each row alone\n",
           di.backend, BI_T);
    tx_bo_free(w);
    tx_bo_free(x);
    tx_bo_free(yb_bo);
    tx_bo_free(ys_bo);
    TX_OKAY(tx_device_close(dev));
}
END_TEST

START_TEST(test_counters)
{
    struct tx_device_counters c0, c1, c2;
    tx_device_t *dev = open_dev();
    tx_bo_t *bo = alloc_bo(dev, 1 << 20, "counters", NULL);
    struct tx_job_result r;
    tx_cmdbuf_t *cb;

    TX_OKAY(tx_device_counters(dev, &c0));
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    for (int i = 0; i < 8; i++)
        TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 1 << 20, (uint32_t)i));
    TX_OKAY(run(dev, cb, &r));
    TX_OKAY(tx_device_counters(dev, &c1));
    ck_assert_uint_ge(c1.dev.jobs_submitted, c0.dev.jobs_submitted + 1);
    ck_assert_uint_ge(c1.dev.jobs_completed, c0.dev.jobs_completed + 1);
    ck_assert_uint_ge(c1.dev.commands, c0.dev.commands + 8);
    ck_assert_uint_ge(c1.dev.bytes_written, c0.dev.bytes_written + 8 * (1 << 20));
    ck_assert_uint_gt(c1.dev.busy_ns, c0.dev.busy_ns);
    ck_assert_uint_eq(c1.state, TX8_STATE_READY);
    if (c1.num_queues) {
        ck_assert_int_ge(c1.own_queue, 0);
        ck_assert_uint_ge(c1.client.jobs_completed, c0.client.jobs_completed + 1);
        ck_assert_uint_gt(c1.client.busy_ns, c0.client.busy_ns);
        ck_assert_uint_ge(c1.client.bytes_allocated, 1 << 20);
        ck_assert_uint_eq(c1.queues[c1.own_queue].state, TX8_QUEUE_ACTIVE);
    }
    {
        struct tx_device_info info;

        TX_OKAY(tx_device_info(dev, &info));
        if (!strcmp(info.backend, "emu") && TX8_IF_MINOR(info.if_version) >= 1) {
            /* interface 1.1: the emulator names the process of each queue */
            ck_assert_int_eq(c1.client.owner_pid, getpid());
            ck_assert_int_eq(c1.queues[c1.own_queue].owner_pid, getpid());
            for (unsigned i = 0; i < c1.num_queues; i++)
                if (c1.queues[i].owner < 0)
                    ck_assert_int_eq(c1.queues[i].owner_pid, 0);
        } else {
            /* the kernel driver's one device queue serves every client */
            ck_assert_int_eq(c1.client.owner_pid, 0);
        }
    }
    if (c1.heartbeat) {
        /* the device's clock and heartbeat move (every 10 ms) */
        tx_test_emu_sleep_ms(60);
        TX_OKAY(tx_device_counters(dev, &c2));
        ck_assert_uint_gt(c2.heartbeat, c1.heartbeat);
        ck_assert_uint_gt(c2.clock_ns, c1.clock_ns);
    }
    TX_FAILS(tx_device_counters(dev, NULL), TX_EINVAL);
    TX_OKAY(tx_cmdbuf_destroy(cb));
    TX_OKAY(tx_device_close(dev));
}
END_TEST

START_TEST(test_busy_live)
{
    struct tx_device_counters c0, c1;
    struct tx_device_info info;
    tx_device_t *dev = open_dev();
    tx_bo_t *bo = alloc_bo(dev, 4096, "live", NULL);
    struct tx_job_result r;
    tx_cmdbuf_t *cb;
    tx_job_t job;

    TX_OKAY(tx_device_info(dev, &info));
    if (strcmp(info.backend, "emu") || !inject(dev, TX_FAULT_SLOW, 600, 1)) {
        fprintf(stderr, "skipped: test_busy_live is about tx8-emu's counters\n");
        goto out;
    }
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 1));
    TX_OKAY(tx_device_counters(dev, &c0));
    TX_OKAY(tx_submit(dev, cb, &job));
    tx_test_emu_sleep_ms(300);
    TX_OKAY(tx_device_counters(dev, &c1));
    TX_FAILS(tx_wait(dev, job, 0, &r), TX_ETIMEDOUT);
    /* busy time of the running job is counted as it runs */
    ck_assert_uint_ge(c1.dev.busy_ns - c0.dev.busy_ns, 150 * MS);
    ck_assert_uint_ge(c1.client.busy_ns - c0.client.busy_ns, 150 * MS);
    TX_OKAY(tx_wait(dev, job, -1, &r));
    TX_OKAY(tx_device_counters(dev, &c1));
    ck_assert_uint_ge(c1.client.busy_ns - c0.client.busy_ns, 590 * MS);
    TX_OKAY(tx_cmdbuf_destroy(cb));
out:
    TX_OKAY(tx_device_close(dev));
}
END_TEST

START_TEST(test_wait_timeout)
{
    tx_device_t *dev = open_dev();
    tx_bo_t *bo = alloc_bo(dev, 4096, "slow", NULL);
    struct tx_job_result r;
    tx_cmdbuf_t *cb;
    tx_job_t job;
    uint64_t t0;

    if (!inject(dev, TX_FAULT_SLOW, 400, 1))
        goto out;
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 3));
    t0 = wall_ns();
    TX_OKAY(tx_submit(dev, cb, &job));
    TX_FAILS(tx_wait(dev, job, 0, &r), TX_ETIMEDOUT);
    ck_assert_uint_eq(r.status, TX_JOB_PENDING);
    TX_FAILS(tx_wait(dev, job, 30 * MS, &r), TX_ETIMEDOUT);
    ck_assert_uint_ge(wall_ns() - t0, 30 * MS);
    TX_OKAY(tx_job_status(dev, job, &r));
    ck_assert_uint_eq(r.status, TX_JOB_PENDING);
    TX_OKAY(tx_wait(dev, job, -1, &r));
    ck_assert_uint_eq(r.status, TX_JOB_OK);
    /* the injected delay happened (a functional check, not a speed test) */
    ck_assert_uint_ge(wall_ns() - t0, 380 * MS);
    TX_OKAY(tx_cmdbuf_destroy(cb));
out:
    TX_OKAY(tx_device_close(dev));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Address faults                                                            */
/* ------------------------------------------------------------------------ */

static void raw_copy(tx_cmdbuf_t *cb, uint64_t dst, uint64_t src, uint64_t bytes)
{
    struct tx8_cmd_copy c;

    memset(&c, 0, sizeof(c));
    c.hdr.opcode = TX8_OP_COPY;
    c.hdr.size = sizeof(c);
    c.dst = dst;
    c.src = src;
    c.bytes = bytes;
    TX_OKAY(tx_cmdbuf_raw(cb, &c, sizeof(c)));
}

START_TEST(test_addr_fault)
{
    tx_device_t *dev = open_dev();
    void *ma, *mb, *mc;
    tx_bo_t *a = alloc_bo(dev, 8192, "fault-a", &ma);
    tx_bo_t *b = alloc_bo(dev, 8192, "fault-b (not in the job)", &mb);
    tx_bo_t *c = alloc_bo(dev, 8192, "fault-c", &mc);
    uint64_t ha, hb, hc;
    struct tx_job_result r;
    tx_cmdbuf_t *cb;

    fill_pattern(ma, 8192, 1);
    fill_pattern(mb, 8192, 2);
    fill_pattern(mc, 8192, 3);
    ha = checksum(ma, 8192);
    hb = checksum(mb, 8192);
    hc = checksum(mc, 8192);
    TX_OKAY(tx_cmdbuf_create(dev, &cb));

    /* 1. Write into a BO the job does not list. */
    TX_OKAY(tx_cmdbuf_use(cb, a, TX_ACCESS_READ));
    raw_copy(cb, bo_addr(b), bo_addr(a), 4096);
    TX_FAILS(run(dev, cb, &r), TX_EJOB);
    ck_assert_uint_eq(r.status, TX_JOB_ADDR_FAULT);
    ck_assert_uint_eq(r.fault_cmd, 0);
    ck_assert_uint_ge(r.fault_addr, bo_addr(b));
    ck_assert_uint_lt(r.fault_addr, bo_addr(b) + 8192);
    ck_assert_msg(strstr(tx_last_error(), "address fault"), "message: %s", tx_last_error());
    ck_assert_uint_eq(checksum(mb, 8192), hb);

    /* 2. Read past the end of a listed BO. */
    TX_OKAY(tx_cmdbuf_reset(cb));
    TX_OKAY(tx_cmd_copy(cb, tx_ref(c, 0), tx_ref(a, 4096), 8192));
    TX_FAILS(run(dev, cb, &r), TX_EJOB);
    ck_assert_uint_eq(r.status, TX_JOB_ADDR_FAULT);
    ck_assert_uint_eq(checksum(mc, 8192), hc);

    /* 3. Write into a BO listed read-only. */
    TX_OKAY(tx_cmdbuf_reset(cb));
    TX_OKAY(tx_cmdbuf_use(cb, a, TX_ACCESS_READ));
    TX_OKAY(tx_cmdbuf_use(cb, c, TX_ACCESS_READ));
    raw_copy(cb, bo_addr(c), bo_addr(a), 64);
    TX_FAILS(run(dev, cb, &r), TX_EJOB);
    ck_assert_uint_eq(r.status, TX_JOB_ADDR_FAULT);
    ck_assert_uint_eq(checksum(mc, 8192), hc);

    /* 4. A later command faults: nothing of the job runs. */
    TX_OKAY(tx_cmdbuf_reset(cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(c, 0), 8192, 0));
    TX_OKAY(tx_cmd_copy(cb, tx_ref(c, 0), tx_ref(a, 0), 64));
    raw_copy(cb, bo_addr(b) + 100, bo_addr(a), 8);
    TX_FAILS(run(dev, cb, &r), TX_EJOB);
    ck_assert_uint_eq(r.status, TX_JOB_ADDR_FAULT);
    ck_assert_uint_eq(r.fault_cmd, 2);
    ck_assert_uint_eq(checksum(mc, 8192), hc);
    ck_assert_uint_eq(checksum(mb, 8192), hb);
    ck_assert_uint_eq(checksum(ma, 8192), ha);

    /* 5. The control block and unallocated memory are out of reach. */
    TX_OKAY(tx_cmdbuf_reset(cb));
    TX_OKAY(tx_cmdbuf_use(cb, a, TX_ACCESS_RW));
    raw_copy(cb, 0, bo_addr(a), 64);
    TX_FAILS(run(dev, cb, &r), TX_EJOB);
    ck_assert_uint_eq(r.status, TX_JOB_ADDR_FAULT);

    /* 6. An invalid command. */
    TX_OKAY(tx_cmdbuf_reset(cb));
    {
        uint64_t bad[2] = {0, 0};
        struct tx8_cmd_hdr h = {.opcode = 999, .flags = 0, .size = 16};

        memcpy(bad, &h, sizeof(h));
        TX_OKAY(tx_cmdbuf_use(cb, a, TX_ACCESS_READ));
        TX_OKAY(tx_cmdbuf_raw(cb, bad, sizeof(bad)));
    }
    TX_FAILS(run(dev, cb, &r), TX_EJOB);
    ck_assert_uint_eq(r.status, TX_JOB_INVALID_CMD);

    /* The device still works, and counted the faults. */
    {
        struct tx_device_counters k;

        TX_OKAY(tx_device_counters(dev, &k));
        ck_assert_uint_ge(k.dev.faults, 5);
    }
    TX_OKAY(tx_cmdbuf_reset(cb));
    TX_OKAY(tx_cmd_copy(cb, tx_ref(c, 0), tx_ref(a, 0), 8192));
    TX_OKAY(run(dev, cb, &r));
    ck_assert_uint_eq(checksum(mc, 8192), ha);
    TX_OKAY(tx_cmdbuf_destroy(cb));
    TX_OKAY(tx_device_close(dev));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Reset and fault injection                                                 */
/* ------------------------------------------------------------------------ */

START_TEST(test_reset_hang)
{
    struct tx_device_counters c0, c1;
    tx_device_t *dev = open_dev();
    void *m;
    tx_bo_t *bo = alloc_bo(dev, 4096, "hang", &m);
    struct tx_job_result r;
    tx_job_t j1, j2, j3, j4;
    tx_cmdbuf_t *cb;

    TX_OKAY(tx_device_counters(dev, &c0));
    if (!inject(dev, TX_FAULT_HANG, 0, 1))
        goto out;
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 0x11111111u));
    TX_OKAY(tx_submit(dev, cb, &j1));
    TX_OKAY(tx_submit(dev, cb, &j2)); /* queued behind the hung job */
    TX_FAILS(tx_wait(dev, j1, 150 * MS, &r), TX_ETIMEDOUT);
    TX_FAILS(tx_wait(dev, j2, 0, &r), TX_ETIMEDOUT);
    TX_OKAY(tx_device_reset(dev));
    TX_FAILS(tx_wait(dev, j1, 5000 * MS, &r), TX_EJOB);
    ck_assert_msg(r.status == TX_JOB_ABORTED || r.status == TX_JOB_TIMEOUT, "status %s",
                  tx_job_status_str(r.status));
    TX_FAILS(tx_wait(dev, j2, 5000 * MS, &r), TX_EJOB);
    ck_assert(r.status == TX_JOB_ABORTED || r.status == TX_JOB_TIMEOUT);

    /* The next job runs normally. */
    memset(m, 0, 4096);
    TX_OKAY(tx_cmdbuf_reset(cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 0x22222222u));
    TX_OKAY(tx_submit(dev, cb, &j3));
    TX_OKAY(tx_wait(dev, j3, 5000 * MS, &r));
    ck_assert_uint_eq(((uint32_t *)m)[1023], 0x22222222u);
    TX_OKAY(tx_device_counters(dev, &c1));
    ck_assert_uint_ge(c1.dev.resets, c0.dev.resets + 1);

    /* A reset with nothing running is harmless. */
    TX_OKAY(tx_device_reset(dev));
    TX_OKAY(tx_submit(dev, cb, &j4));
    TX_OKAY(tx_wait(dev, j4, 5000 * MS, &r));
    TX_OKAY(tx_cmdbuf_destroy(cb));
out:
    TX_OKAY(tx_device_close(dev));
}
END_TEST

START_TEST(test_fault_error_slow)
{
    tx_device_t *dev = open_dev();
    tx_bo_t *bo = alloc_bo(dev, 4096, "err", NULL);
    struct tx_job_result r;
    tx_cmdbuf_t *cb;
    uint64_t t0;

    if (!inject(dev, TX_FAULT_ERROR, 0, 2))
        goto out;
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 1));
    TX_FAILS(run(dev, cb, &r), TX_EJOB);
    ck_assert_uint_eq(r.status, TX_JOB_DEVICE_ERROR);
    TX_FAILS(run(dev, cb, &r), TX_EJOB);
    ck_assert_uint_eq(r.status, TX_JOB_DEVICE_ERROR);
    TX_OKAY(run(dev, cb, &r));

    TX_OKAY(tx_device_inject_fault(dev, TX_FAULT_SLOW, 150, 1));
    t0 = wall_ns();
    TX_OKAY(run(dev, cb, &r));
    ck_assert_uint_ge(wall_ns() - t0, 140 * MS);
    ck_assert_uint_ge(r.end_ns - r.start_ns, 140 * MS);

    /* NONE cancels what is pending. */
    TX_OKAY(tx_device_inject_fault(dev, TX_FAULT_ERROR, 0, 5));
    TX_OKAY(tx_device_inject_fault(dev, TX_FAULT_NONE, 0, 0));
    TX_OKAY(run(dev, cb, &r));

    TX_FAILS(tx_device_inject_fault(dev, (enum tx_fault)77, 0, 0), TX_EINVAL);
    TX_FAILS(tx_device_inject_fault(dev, TX_FAULT_SLOW, 0, 1), TX_EINVAL);
    TX_FAILS(tx_device_inject_fault(NULL, TX_FAULT_ERROR, 0, 1), TX_EINVAL);
    TX_OKAY(tx_cmdbuf_destroy(cb));
out:
    TX_OKAY(tx_device_close(dev));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Many jobs, threads                                                        */
/* ------------------------------------------------------------------------ */

START_TEST(test_many_jobs)
{
    enum { MAXN = 2000 };
    struct tx_device_info info;
    tx_device_t *dev = open_dev();
    void *m;
    tx_bo_t *bo;
    static tx_job_t jobs[MAXN];
    struct tx_job_result r;
    tx_cmdbuf_t *cb;
    int N;

    /* many more jobs than the device's submission ring holds */
    TX_OKAY(tx_device_info(dev, &info));
    N = 4 * (int)info.sq_entries + 1 > 300 ? 4 * (int)info.sq_entries + 1 : 300;
    if (N > MAXN)
        N = MAXN;
    bo = alloc_bo(dev, (uint64_t)N * 64, "many", &m);
    memset(m, 0, (size_t)N * 64);
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    for (int i = 0; i < N; i++) {
        TX_OKAY(tx_cmdbuf_reset(cb));
        TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, (uint64_t)i * 64), 64, (uint32_t)i + 1));
        TX_OKAY(tx_submit_ex(dev, cb, i % 3 == 0 ? TX_SUBMIT_NO_IRQ : 0, (uint64_t)i, &jobs[i]));
        if (i)
            ck_assert_uint_gt(jobs[i], jobs[i - 1]);
    }
    /* wait in a scrambled order */
    for (int k = 0; k < N; k++) {
        int i = (k * 7) % N;

        TX_OKAY(tx_wait(dev, jobs[i], 20000 * MS, &r));
        ck_assert_uint_eq(r.user_data, (uint64_t)i);
    }
    for (int i = 0; i < N; i++)
        ck_assert_uint_eq(((uint32_t *)m)[i * 16 + 15], (uint32_t)i + 1);
    TX_OKAY(tx_cmdbuf_destroy(cb));
    TX_OKAY(tx_device_close(dev));
}
END_TEST

struct thread_arg {
    tx_device_t *dev;
    int id;
    int failures;
};

static void *thread_main(void *p)
{
    struct thread_arg *a = p;
    tx_cmdbuf_t *cb = NULL;
    tx_bo_t *bo = NULL;
    uint32_t *m = NULL;

    if (tx_bo_alloc(a->dev, 4096, 0, "thread", &bo) || tx_bo_map(bo, (void **)&m) ||
        tx_cmdbuf_create(a->dev, &cb)) {
        a->failures++;
        return NULL;
    }
    for (int i = 0; i < 40; i++) {
        struct tx_job_result r;
        tx_job_t job;
        uint32_t v = (uint32_t)(a->id << 16 | i);

        if (tx_cmdbuf_reset(cb) || tx_cmd_fill(cb, tx_ref(bo, 0), 4096, v) ||
            tx_submit(a->dev, cb, &job) || tx_wait(a->dev, job, 20000 * MS, &r) || m[1023] != v)
            a->failures++;
    }
    tx_cmdbuf_destroy(cb);
    tx_bo_free(bo);
    return NULL;
}

START_TEST(test_threads)
{
    tx_device_t *dev = open_dev();
    struct thread_arg args[4];
    pthread_t th[4];

    for (int i = 0; i < 4; i++) {
        args[i].dev = dev;
        args[i].id = i;
        args[i].failures = 0;
        ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(args[i].failures == 0, "thread %d: %d failures (%s)", i, args[i].failures,
                      tx_last_error());
    }
    TX_OKAY(tx_device_close(dev));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Command buffers and bad arguments                                         */
/* ------------------------------------------------------------------------ */

START_TEST(test_cmdbuf_bad_args)
{
    struct tx_device_info info;
    tx_device_t *dev = open_dev(), *dev2 = open_dev();
    tx_bo_t *bo = alloc_bo(dev, 4096, "args", NULL), *other = alloc_bo(dev2, 4096, "other", NULL);
    tx_bo_t *gone = alloc_bo(dev, 4096, "gone", NULL);
    struct tx_matmul_args ma;
    struct tx8_weight w8;
    struct tx_weight_ref wr;
    tx_cmdbuf_t *cb, *cb2, *dead;
    struct tx_job_result r;
    tx_job_t job;

    TX_OKAY(tx_device_info(dev, &info));
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmdbuf_create(dev2, &cb2));
    TX_FAILS(tx_cmdbuf_create(dev, NULL), TX_EINVAL);
    TX_FAILS(tx_cmdbuf_create(NULL, &dead), TX_EINVAL);

    TX_FAILS(tx_cmd_fill(NULL, tx_ref(bo, 0), 16, 0), TX_EINVAL);
    TX_FAILS(tx_cmd_fill(cb, tx_ref(NULL, 0), 16, 0), TX_EINVAL);
    TX_FAILS(tx_cmd_fill(cb, tx_ref(bo, 4096), 16, 0), TX_EINVAL);
    TX_FAILS(tx_cmd_fill(cb, tx_ref(bo, UINT64_MAX), 16, 0), TX_EINVAL);
    TX_FAILS(tx_cmd_copy(cb, tx_ref(bo, 0), tx_ref(other, 0), 16), TX_EINVAL);
    TX_FAILS(tx_cmd_matmul(cb, NULL), TX_EINVAL);
    memset(&ma, 0, sizeof(ma));
    ma.y = tx_ref(bo, 0);
    ma.x = tx_ref(bo, 0);
    TX_FAILS(tx_cmd_matmul(cb, &ma), TX_EINVAL); /* no weight data */
    TX_FAILS(tx_cmd_rmsnorm(cb, NULL), TX_EINVAL);
    TX_FAILS(tx_cmd_attention(cb, NULL), TX_EINVAL);
    {
        /* tx_cmd_attention_flags (libtx 2.5): TX8_ATTN_F_BF16 only, even dims */
        struct tx_attention_args aa;

        memset(&aa, 0, sizeof(aa));
        aa.out = aa.q = aa.k = aa.v = tx_ref(bo, 0);
        aa.tokens = aa.q_heads = aa.kv_heads = 1;
        aa.qk_dim = aa.v_dim = aa.ld_q_head = aa.ld_k_head = aa.ld_v_head = aa.ld_o_head = 4;
        aa.kv_len = 1;
        aa.scale = 0.5f;
        aa.kv_dtype = TX8_DTYPE_BF16;
        TX_FAILS(tx_cmd_attention_flags(cb, NULL, TX8_DTYPE_BF16, 0), TX_EINVAL);
        TX_FAILS(tx_cmd_attention_flags(cb, &aa, TX8_DTYPE_BF16, TX8_ATTN_F_V_DTYPE), TX_EINVAL);
        TX_FAILS(tx_cmd_attention_flags(cb, &aa, TX8_DTYPE_BF16, 0x80), TX_EINVAL);
        aa.qk_dim = 3;
        TX_FAILS(tx_cmd_attention_flags(cb, &aa, TX8_DTYPE_BF16, TX8_ATTN_F_BF16), TX_EINVAL);
        ck_assert_msg(strstr(tx_last_error(), "even") != NULL, "%s", tx_last_error());
    }
    TX_FAILS(tx_cmd_sample(cb, NULL), TX_EINVAL);
    TX_FAILS(tx_cmdbuf_raw(cb, NULL, 16), TX_EINVAL);
    {
        uint64_t raw[2] = {0, 0};
        struct tx8_cmd_hdr h = {.opcode = TX8_OP_NOP, .flags = 0, .size = 8};

        memcpy(raw, &h, sizeof(h));
        TX_FAILS(tx_cmdbuf_raw(cb, raw, 16), TX_EINVAL); /* hdr.size says 8 */
        TX_FAILS(tx_cmdbuf_raw(cb, raw, 12), TX_EINVAL);
        TX_FAILS(tx_cmdbuf_raw(cb, raw, 0), TX_EINVAL);
    }
    TX_FAILS(tx_cmdbuf_use(cb, bo, 0), TX_EINVAL);
    TX_FAILS(tx_cmdbuf_use(cb, bo, 0x10), TX_EINVAL);
    TX_FAILS(tx_cmdbuf_use(cb, other, TX_ACCESS_READ), TX_EINVAL);
    TX_FAILS(tx_cmdbuf_use(cb, NULL, TX_ACCESS_READ), TX_EINVAL);
    memset(&wr, 0, sizeof(wr));
    TX_FAILS(tx_weight_encode(&wr, &w8), TX_EINVAL);
    TX_FAILS(tx_weight_encode(NULL, &w8), TX_EINVAL);
    wr.data = tx_ref(bo, 64);
    wr.rows = 2;
    TX_OKAY(tx_weight_encode(&wr, &w8));
    ck_assert_uint_eq(w8.data, bo_addr(bo) + 64);
    ck_assert_uint_eq(w8.rows, 2);

    /* Failed helpers recorded nothing: the builder is still empty. */
    {
        size_t bytes = 1;
        unsigned n = 1;

        TX_OKAY(tx_cmdbuf_size(cb, &bytes, &n));
        ck_assert_uint_eq(bytes, 0);
        ck_assert_uint_eq(n, 0);
    }
    TX_FAILS(tx_submit(dev, cb, &job), TX_EINVAL); /* empty */

    /* A BO freed after it was recorded. */
    TX_OKAY(tx_cmd_fill(cb, tx_ref(gone, 0), 16, 0));
    TX_OKAY(tx_bo_free(gone));
    TX_FAILS(tx_submit(dev, cb, &job), TX_EINVAL);
    TX_OKAY(tx_cmdbuf_reset(cb));

    /* A builder of another device. */
    TX_OKAY(tx_cmd_fill(cb2, tx_ref(other, 0), 16, 0));
    TX_FAILS(tx_submit(dev, cb2, &job), TX_EINVAL);
    TX_OKAY(run(dev2, cb2, &r));

    /* More BOs than a job may carry. */
    {
        unsigned n = info.max_ranges;
        tx_bo_t **many = calloc(n, sizeof(*many));

        for (unsigned i = 0; i < n; i++) {
            TX_OKAY(tx_bo_alloc(dev, 4096, 0, "many", &many[i]));
            TX_OKAY(tx_cmdbuf_use(cb, many[i], TX_ACCESS_READ));
        }
        TX_OKAY(tx_cmd_nop(cb));
        TX_FAILS(tx_submit(dev, cb, &job), TX_EINVAL); /* n + the command buffer */
        TX_OKAY(tx_cmdbuf_reset(cb));
        for (unsigned i = 0; i + 1 < n; i++)
            TX_OKAY(tx_cmdbuf_use(cb, many[i], TX_ACCESS_READ));
        TX_OKAY(tx_cmd_nop(cb));
        TX_OKAY(run(dev, cb, &r));
        for (unsigned i = 0; i < n; i++)
            TX_OKAY(tx_bo_free(many[i]));
        free(many);
    }

    /* Raw submission. */
    {
        struct tx_raw_job rj;
        struct tx8_cmd_fill f;
        struct tx_bo_use use = {bo, TX_ACCESS_WRITE};
        tx_bo_t *cmd;
        void *mc;

        cmd = alloc_bo(dev, 4096, "raw-cmd", &mc);
        memset(&f, 0, sizeof(f));
        f.hdr.opcode = TX8_OP_FILL;
        f.hdr.size = sizeof(f);
        f.dst = bo_addr(bo);
        f.bytes = 4096;
        f.value = 9;
        memcpy((char *)mc + 64, &f, sizeof(f));
        memset(&rj, 0, sizeof(rj));
        rj.cmd_bo = cmd;
        rj.cmd_offset = 64;
        rj.cmd_size = sizeof(f);
        rj.num_bos = 1;
        rj.bos = &use;
        TX_OKAY(tx_submit_raw(dev, &rj, &job));
        TX_OKAY(tx_wait(dev, job, -1, &r));
        /* batch-invariant raw jobs (libtx 2.6) where the device has them;
         * profiling and unknown flags are refused */
        rj.flags = TX_SUBMIT_BATCH_INVARIANT;
        int brc = tx_submit_raw(dev, &rj, &job);
        ck_assert_msg(brc == TX_OK || brc == TX_ENOTSUP, "batch-invariant raw job: %d (%s)", brc,
                      tx_last_error());
        if (brc == TX_OK)
            TX_OKAY(tx_wait(dev, job, -1, &r));
        rj.flags = TX_SUBMIT_PROFILE;
        TX_FAILS(tx_submit_raw(dev, &rj, &job), TX_EINVAL);
        rj.flags = 1u << 30;
        TX_FAILS(tx_submit_raw(dev, &rj, &job), TX_EINVAL);
        rj.flags = 0;
        rj.cmd_offset = 4096;
        TX_FAILS(tx_submit_raw(dev, &rj, &job), TX_EINVAL);
        rj.cmd_offset = 4;
        TX_FAILS(tx_submit_raw(dev, &rj, &job), TX_EINVAL);
        rj.cmd_offset = 64;
        rj.cmd_size = 12;
        TX_FAILS(tx_submit_raw(dev, &rj, &job), TX_EINVAL);
        rj.cmd_size = sizeof(f);
        rj.bos = NULL;
        TX_FAILS(tx_submit_raw(dev, &rj, &job), TX_EINVAL);
        rj.bos = &use;
        rj.cmd_bo = other;
        TX_FAILS(tx_submit_raw(dev, &rj, &job), TX_EINVAL);
        TX_FAILS(tx_submit_raw(dev, NULL, &job), TX_EINVAL);
        TX_OKAY(tx_bo_free(cmd));
    }

    /* Destroyed builders. */
    TX_OKAY(tx_cmdbuf_create(dev, &dead));
    TX_OKAY(tx_cmdbuf_destroy(dead));
    TX_FAILS(tx_cmdbuf_destroy(dead), TX_EINVAL);
    TX_FAILS(tx_cmd_nop(dead), TX_EINVAL);
    TX_FAILS(tx_submit(dev, dead, &job), TX_EINVAL);
    TX_FAILS(tx_cmdbuf_reset(NULL), TX_EINVAL);

    TX_OKAY(tx_cmdbuf_destroy(cb));
    TX_OKAY(tx_cmdbuf_destroy(cb2));
    TX_OKAY(tx_device_close(dev2));
    /* handles of a closed device */
    TX_FAILS(tx_bo_free(other), TX_EINVAL);
    TX_FAILS(tx_cmd_nop(cb2), TX_EINVAL);
    TX_OKAY(tx_device_close(dev));
    TX_FAILS(tx_bo_free(bo), TX_EINVAL);
}
END_TEST

START_TEST(test_free_while_busy)
{
    tx_device_t *dev = open_dev();
    tx_bo_t *bo = alloc_bo(dev, 1 << 16, "busy", NULL), *nb[8];
    uint64_t a = bo_addr(bo);
    struct tx_job_result r;
    tx_cmdbuf_t *cb;
    tx_job_t job;

    if (!inject(dev, TX_FAULT_SLOW, 200, 1))
        goto out;
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 1 << 16, 5));
    TX_OKAY(tx_submit(dev, cb, &job));
    TX_OKAY(tx_bo_free(bo)); /* still used by the job: freed when it ends */
    for (int i = 0; i < 8; i++) {
        uint64_t b;

        nb[i] = alloc_bo(dev, 1 << 16, "new", NULL);
        b = bo_addr(nb[i]);
        ck_assert_msg(b + (1 << 16) <= a || a + (1 << 16) <= b,
                      "memory of a BO in use was handed out again");
    }
    TX_OKAY(tx_wait(dev, job, -1, &r));
    for (int i = 0; i < 8; i++)
        TX_OKAY(tx_bo_free(nb[i]));
    TX_OKAY(tx_cmdbuf_destroy(cb));
out:
    TX_OKAY(tx_device_close(dev));
}
END_TEST

START_TEST(test_big_cmdbuf)
{
    tx_device_t *dev = open_dev();
    void *m;
    tx_bo_t *bo = alloc_bo(dev, 1 << 16, "big", &m);
    struct tx_job_result r;
    tx_cmdbuf_t *cb;
    tx_job_t jobs[12];

    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    /* 8000 commands (320 KB): a command buffer of its own */
    for (uint32_t i = 0; i < 8000; i++)
        TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, (i % 1024) * 64), 64, i));
    TX_OKAY(run(dev, cb, &r));
    /* the last command writing slot 1023 is i = 1023 + 6 * 1024 */
    ck_assert_uint_eq(((uint32_t *)m)[1023 * 16], 7167);
    ck_assert_uint_eq(((uint32_t *)m)[0], 7168);
    TX_OKAY(tx_cmdbuf_reset(cb));
    /* 12 jobs of 120 KB each, in flight together: the arena wraps */
    for (uint32_t i = 0; i < 3000; i++)
        TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, (i % 1024) * 64), 64, i));
    for (int j = 0; j < 12; j++)
        TX_OKAY(tx_submit(dev, cb, &jobs[j]));
    for (int j = 0; j < 12; j++)
        TX_OKAY(tx_wait(dev, jobs[j], 20000 * MS, &r));
    TX_OKAY(tx_cmdbuf_destroy(cb));
    TX_OKAY(tx_device_close(dev));
}
END_TEST

START_TEST(test_close_with_objects)
{
    tx_device_t *dev = open_dev();
    tx_bo_t *bo = alloc_bo(dev, 4096, "left", NULL);
    tx_cmdbuf_t *cb;
    tx_job_t job;
    void *p;

    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 1));
    TX_OKAY(tx_submit(dev, cb, &job));
    TX_OKAY(tx_device_close(dev)); /* BOs, builders, unfinished job: all go */
    TX_FAILS(tx_bo_map(bo, &p), TX_EINVAL);
    TX_FAILS(tx_cmd_nop(cb), TX_EINVAL);
    TX_FAILS(tx_cmdbuf_destroy(cb), TX_EINVAL);
    TX_FAILS(tx_wait(dev, job, 0, NULL), TX_EINVAL);
}
END_TEST

struct waiter {
    tx_device_t *dev;
    tx_job_t job;
    int rc;
};

static void *waiter_main(void *p)
{
    struct waiter *w = p;
    struct tx_job_result r;

    w->rc = tx_wait(w->dev, w->job, -1, &r);
    return NULL;
}

START_TEST(test_close_while_waiting)
{
    tx_device_t *dev = open_dev();
    tx_bo_t *bo = alloc_bo(dev, 4096, "waited", NULL);
    struct waiter w = {dev, 0, 1};
    tx_cmdbuf_t *cb;
    pthread_t th;
    uint64_t t0;

    if (!inject(dev, TX_FAULT_HANG, 0, 1)) {
        TX_OKAY(tx_device_close(dev));
        return;
    }
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 1));
    TX_OKAY(tx_submit(dev, cb, &w.job));
    ck_assert_int_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
    tx_test_emu_sleep_ms(50);
    t0 = wall_ns();
    TX_OKAY(tx_device_close(dev)); /* the waiter gives up, nothing is freed under it */
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, TX_EINVAL);
    ck_assert_uint_lt(wall_ns() - t0, 2000 * MS);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The device dies (emu only: needs an emulator of its own)                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_device_lost)
{
    struct tx_test_emu emu;
    tx_device_t *dev;
    tx_bo_t *bo, *bo2;
    struct tx_job_result r;
    tx_cmdbuf_t *cb;
    tx_job_t job;
    void *m;

    if (getenv("TX_DEVICE") && strncmp(getenv("TX_DEVICE"), "emu:", 4)) {
        fprintf(stderr, "skipped: test_device_lost needs the emu backend\n");
        return;
    }
    ck_assert_int_eq(tx_test_emu_start(&emu, "32M", "--cores", "1", NULL), 0);
    TX_OKAY(tx_device_open(emu.spec, &dev));
    bo = alloc_bo(dev, 4096, "lost", &m);
    bo2 = alloc_bo(dev, 4096, "lost2", NULL);
    TX_OKAY(tx_device_inject_fault(dev, TX_FAULT_SLOW, 5000, 1));
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    TX_OKAY(tx_cmd_fill(cb, tx_ref(bo, 0), 4096, 1));
    TX_OKAY(tx_submit(dev, cb, &job));
    tx_test_emu_sleep_ms(50);
    tx_test_emu_kill(&emu, SIGKILL); /* dies mid-job */
    {
        uint64_t t0 = wall_ns();

        TX_FAILS(tx_wait(dev, job, -1, &r), TX_EDEVICE_LOST);
        ck_assert_uint_lt(wall_ns() - t0, 3000 * MS); /* no hang */
    }
    TX_FAILS(tx_submit(dev, cb, &job), TX_EDEVICE_LOST);
    TX_FAILS(tx_bo_alloc(dev, 4096, 0, NULL, &bo), TX_EDEVICE_LOST);
    TX_FAILS(tx_bo_set_label(bo2, "x"), TX_EDEVICE_LOST);
    TX_FAILS(tx_device_reset(dev), TX_EDEVICE_LOST);
    ((volatile uint32_t *)m)[0] = 1; /* the mapping stays valid */
    TX_OKAY(tx_bo_free(bo2));
    TX_OKAY(tx_device_close(dev));
    ck_assert_int_eq(tx_test_emu_stop(&emu), 0);
}
END_TEST

START_TEST(test_inject_crash)
{
    struct tx_test_emu emu;
    struct tx_device_info info;
    tx_device_t *dev;
    tx_bo_t *bo;
    int st;

    if (getenv("TX_DEVICE") && strncmp(getenv("TX_DEVICE"), "emu:", 4)) {
        fprintf(stderr, "skipped: test_inject_crash needs the emu backend\n");
        return;
    }
    ck_assert_int_eq(tx_test_emu_start(&emu, "16M", "--cores", "1", NULL), 0);
    TX_OKAY(tx_device_open(emu.spec, &dev));
    TX_OKAY(tx_device_inject_fault(dev, TX_FAULT_CRASH, 0, 0));
    TX_FAILS(tx_bo_alloc(dev, 4096, 0, NULL, &bo), TX_EDEVICE_LOST);
    TX_OKAY(tx_device_info(dev, &info)); /* what is known stays readable */
    TX_OKAY(tx_device_close(dev));
    ck_assert(tx_test_emu_wait_exit(&emu, 3000));
    st = emu.status;
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    ck_assert_int_eq(tx_test_emu_stop(&emu), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */

static void suite_setup(void)
{
    const char *env = getenv("TX_DEVICE");

    if (env && *env) {
        snprintf(g_spec, sizeof(g_spec), "%s", env);
        return;
    }
    if (tx_test_emu_start(&g_emu, "128M", "--cores", "2", NULL) != 0)
        ck_abort_msg("cannot start tx8-emu");
    g_own_emu = true;
    snprintf(g_spec, sizeof(g_spec), "%s", g_emu.spec);
}

static void suite_teardown(void)
{
    if (g_own_emu)
        tx_test_emu_stop(&g_emu);
    g_own_emu = false;
}

static Suite *device_suite(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("api");
    TCase *tl = tcase_create("lost");

    tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_open_info);
    tcase_add_test(tc, test_open_errors);
    tcase_add_test(tc, test_bo_basic);
    tcase_add_test(tc, test_bo_bad_args);
    tcase_add_test(tc, test_zero_copy);
    tcase_add_test(tc, test_fill_copy);
    tcase_add_test(tc, test_matmul);
    tcase_add_test(tc, test_attention_bf16_flag);
    tcase_add_test(tc, test_batch_invariant_rows);
    tcase_add_test(tc, test_job_status);
    tcase_add_test(tc, test_counters);
    tcase_add_test(tc, test_wait_timeout);
    tcase_add_test(tc, test_busy_live);
    tcase_add_test(tc, test_addr_fault);
    tcase_add_test(tc, test_reset_hang);
    tcase_add_test(tc, test_fault_error_slow);
    tcase_add_test(tc, test_many_jobs);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_cmdbuf_bad_args);
    tcase_add_test(tc, test_free_while_busy);
    tcase_add_test(tc, test_big_cmdbuf);
    tcase_add_test(tc, test_close_with_objects);
    tcase_add_test(tc, test_close_while_waiting);
    suite_add_tcase(s, tc);

    tcase_set_timeout(tl, 60);
    tcase_add_test(tl, test_device_lost);
    tcase_add_test(tl, test_inject_crash);
    suite_add_tcase(s, tl);
    return s;
}

int main(void)
{
    return tx_test_run_emu(device_suite());
}
